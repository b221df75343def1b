from relaxep.cli import main


def test_demo_runs_and_prints_every_method(capsys):
    assert main(["demo", "--n-train", "40", "--n-test", "200"]) == 0
    out = capsys.readouterr().out
    for method in ("EP", "Power EP", "REP (c=10)", "EP damped"):
        assert method in out
    assert "test error" in out
