"""The constrained_bo study (issue 63): registered without importing torch; its report from rows alone."""

from __future__ import annotations

from relaxep.experiments import STUDIES

# (registered without importing torch: tests/test_import_light.py, in the same interpreter as ``import relaxep``)


def test_the_report_summarises_rows_and_names_what_was_left_out(tmp_path):
    (tmp_path / "figures").mkdir()
    rows = [
        {"problem": "townsend", "method": m, "seed": s, "iterations": 2, "best": [1.0, 1.5, 1.9],
         "regret": [1.02, 0.52, 0.12 + s], "failures": s, "seconds": [0.1, 0.2], "errors": []}
        for m in ("vgp", "sobol") for s in (0, 1)
    ]  # fmt: skip
    text = STUDIES["constrained_bo"].report(
        {"constrained_bo": rows, "constrained_bo_skipped": [{"note": "townsend / ep: not here"}]}, tmp_path
    )
    assert "variational GP classifier" in text and "townsend / ep: not here" in text
    assert "0.62 [0.37, 0.87]" in text  # final regret: median [quartiles] of 0.12 and 1.12
    assert (tmp_path / "constrained_bo.csv").exists() and (tmp_path / "figures" / "constrained_bo.png").exists()
