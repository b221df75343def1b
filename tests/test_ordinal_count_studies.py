"""`relaxep reproduce ordinal` and `relaxep reproduce counts`, quick: one partition and one draw each (cells
called directly), and the reports' tables as the studies write them."""

from __future__ import annotations

import numpy as np

from relaxep.experiments import STUDIES
from relaxep.experiments.studies import counts, ordinal


def test_the_ordinal_study_scores_every_method_on_a_partition_and_reports_the_references(tmp_path):
    row = ordinal.fit_partition("toy", 0)
    methods = row["methods"]
    assert set(methods) == {"relaxep EP, RBF", "relaxep EP, ARD RBF", "scikit-learn GPR, rounded",
                            "scikit-learn LogisticRegression"}  # fmt: skip
    for scores in methods.values():
        assert 0.0 <= scores["mae"] <= 4.0 and 0.0 <= scores["accuracy"] <= 1.0
    # toy is nearly noise-free: the ordinal GP gets within a few hundredths of SVORIM's reference (0.018)
    assert methods["relaxep EP, RBF"]["mae"] < 0.1 and methods["relaxep EP, RBF"]["status"] == "converged"
    for label in ("relaxep EP, RBF", "relaxep EP, ARD RBF"):  # both decisions of the same fit
        assert 0.0 <= methods[label]["mae_median"] <= 4.0
    assert np.isnan(methods["scikit-learn LogisticRegression"]["mae_median"])
    text = STUDIES["ordinal"].report({"ordinal": [row]}, tmp_path)
    assert "ORCA SVORIM (reference, not rerun)" in text and (tmp_path / "ordinal.csv").exists()
    header = next(line for line in text.splitlines() if line.startswith("| dataset"))
    assert "| mae | mae_median |" in header and 'decision="median"' in text


def test_the_count_study_scores_a_draw_against_the_true_rate_and_the_naive_regressions(tmp_path):
    draw = counts.simulated_draw(0)
    for name in ("relaxep Poisson EP", "relaxep negative binomial EP", "scikit-learn GPR on the rates"):
        assert np.isfinite(draw[name]) and draw[name] > 0.0
    assert draw["relaxep Poisson EP status"] == "converged"
    # the rate's scale is about 10-50 per unit: an RMSE under 10 is a fit, not noise
    assert draw["relaxep Poisson EP"] < 10.0
    _, y, width = counts.lgcp(100, 0)
    assert y.sum() > 0 and np.all(y == np.round(y)) and width == 0.1
