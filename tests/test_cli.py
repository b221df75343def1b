import pytest

from relaxep.cli import main


def test_demo_runs_and_prints_every_method(capsys):
    assert main(["demo", "--n-train", "40", "--n-test", "200"]) == 0
    out = capsys.readouterr().out
    for method in ("EP", "Power EP", "REP (c=10)", "EP damped"):
        assert method in out
    assert "test error" in out


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # one line, no traceback
    return err[0]


def test_an_output_path_that_is_a_file_is_one_error_line(tmp_path, capsys):
    target = tmp_path / "report.txt"
    target.write_text("")
    assert main(["reproduce", "toy", "--out", str(target)]) == 2
    assert _error_line(capsys) == f"relaxep: error: --out {target} is a file, not a folder"


def test_a_missing_data_folder_is_one_error_line(tmp_path, capsys):
    assert main(["reproduce", "uci", "--out", str(tmp_path), "--data-home", str(tmp_path / "none")]) == 2
    assert _error_line(capsys).startswith("relaxep: error: --data-home")


def test_an_unwritable_output_folder_is_one_error_line(tmp_path, capsys, monkeypatch):
    import pathlib

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(pathlib.Path, "write_text", refuse)  # (root may write anywhere: simulate the refusal)
    assert main(["reproduce", "toy", "--out", str(tmp_path / "out")]) == 2
    assert "cannot write to --out" in _error_line(capsys)


def test_jobs_minus_one_means_every_cpu_as_in_joblib():
    from joblib import cpu_count

    from relaxep.cli import _n_jobs

    assert _n_jobs("-1") == cpu_count()
    assert _n_jobs("-2") == max(1, cpu_count() - 1)
    assert _n_jobs("3") == 3


def test_a_study_that_reads_no_data_ignores_a_missing_data_folder(tmp_path, monkeypatch):
    import relaxep.experiments.reproduce as reproduce_module

    ran = []
    monkeypatch.setattr(reproduce_module, "reproduce", lambda studies, out, **kw: ran.append(kw) or out / "report.md")
    assert main(["reproduce", "toy", "--out", str(tmp_path), "--data-home", str(tmp_path / "none")]) == 0
    assert ran and ran[0]["data_home"] == str(tmp_path / "none")


@pytest.mark.parametrize(
    "argv", [["reproduce", "toy", "--jobs", "0"], ["demo", "--flip-rate", "0.7"], ["demo", "--n-train", "x"]]
)
def test_bad_arguments_are_refused_by_the_parser_with_status_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert "error: argument" in capsys.readouterr().err


def test_debug_shows_the_traceback(tmp_path):
    target = tmp_path / "file"
    target.write_text("")
    with pytest.raises(NotADirectoryError):
        main(["--debug", "reproduce", "toy", "--out", str(target)])


@pytest.mark.parametrize("command", [[], ["demo"], ["reproduce"]])
def test_every_command_has_help_with_examples(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "usage: relaxep" in out
    if command:
        assert "examples:" in out
