"""The regression study's data generators against their formulas, and its machinery on a tiny config."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from sklearn.datasets import load_diabetes

from relaxep.datasets import (
    contaminate,
    load_mcycle,
    load_regression,
    make_friedman,
    make_neal,
    neal_function,
    regression_split,
)
from relaxep.datasets.registry import PACKAGED_DATA
from relaxep.experiments.regression_claims import evaluate_regression_claims, summarize_regression

SHA256 = {
    "diabetes_lars442.csv": "3b271426c1bd56aebb217e16eb31a4b0f5a5669fe59258d6c6c65411a115cd22",
    "engel.csv": "1ab6a5c4e884ef9ad624949d2b7e94652eccd75ba3905d1a46c85d28b153ec49",
    "carseats.csv": "818f9baf6cfb5281005488ef6cf7cd3f34ddb15f9874e8089a17260acbc2f662",
    "wage_age.csv": "33e15383656d98c02c871bb26491022f9869a152596629ddaafebca892769a74",
}


def test_neal_function_is_the_published_formula():
    # Neal (1997): 0.3 + 0.4 x + 0.5 sin(2.7 x) + 1.1 / (1 + x^2), evaluated by hand
    assert neal_function(0.0) == pytest.approx(1.4)
    assert neal_function(1.0) == pytest.approx(0.3 + 0.4 + 0.5 * np.sin(2.7) + 0.55)
    assert neal_function(-2.0) == pytest.approx(0.3 - 0.8 + 0.5 * np.sin(-5.4) + 0.22)


def test_neal_data_have_the_published_noise_and_outlier_rate():
    d = make_neal(20000, 0.05, n_test=20000, random_state=1)
    x = d.X[:, 0]
    assert abs(x.mean()) < 4 / np.sqrt(x.size) and abs(x.std() - 1) < 0.02  # x ~ N(0, 1)
    resid = d.y - neal_function(x)
    rate = d.outlier.mean()
    assert abs(rate - 0.05) < 4 * np.sqrt(0.05 * 0.95 / x.size)
    assert resid[~d.outlier].std() == pytest.approx(0.1, rel=0.03)
    assert resid[d.outlier].std() == pytest.approx(1.0, rel=0.06)
    # the test grid is clean: inlier noise only, equally spaced on [-2.5, 2.5]
    np.testing.assert_allclose(np.diff(d.X_test[:, 0]), 5.0 / 19999)
    np.testing.assert_allclose(d.f_test, neal_function(d.X_test[:, 0]))
    assert (d.y_test - d.f_test).std() == pytest.approx(0.1, rel=0.03)
    assert np.abs(d.y_test - d.f_test).max() < 0.6  # no outlier-sized residual in 20000 N(0, 0.1^2)


def test_contaminate_shifts_exactly_the_fraction_by_three_to_six_sds_and_leaves_the_input_alone():
    y = np.random.default_rng(0).normal(size=400)
    before = y.copy()
    new, outlier = contaminate(y, 0.2, random_state=3)
    np.testing.assert_array_equal(y, before)
    assert outlier.sum() == 80
    np.testing.assert_array_equal(new[~outlier], y[~outlier])
    shift = (new - y)[outlier] / y.std()
    assert np.all((np.abs(shift) >= 3) & (np.abs(shift) <= 6))
    assert 20 < np.sum(shift > 0) < 60  # both signs, about equally often
    assert contaminate(y, 0.0)[1].sum() == 0
    with pytest.raises(ValueError, match="rate"):
        contaminate(y, 1.0)


def test_friedman_targets_follow_friedmans_formula_with_clean_test_targets():
    d = make_friedman(300, 0.1, n_test=20000, random_state=2)
    X = d.X_test
    f = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] + 5 * X[:, 4]
    np.testing.assert_allclose(d.f_test, f)
    assert (d.y_test - f).std() == pytest.approx(1.0, rel=0.03)  # noise sd 1, no outliers
    assert d.X.shape == (300, 10) and d.outlier.sum() == 30
    Xt = d.X[~d.outlier]
    clean_resid = d.y[~d.outlier] - (
        10 * np.sin(np.pi * Xt[:, 0] * Xt[:, 1]) + 20 * (Xt[:, 2] - 0.5) ** 2 + 10 * Xt[:, 3] + 5 * Xt[:, 4]
    )
    assert np.abs(clean_resid).max() < 5  # N(0, 1) noise only
    Xo = d.X[d.outlier]
    bad_resid = d.y[d.outlier] - (
        10 * np.sin(np.pi * Xo[:, 0] * Xo[:, 1]) + 20 * (Xo[:, 2] - 0.5) ** 2 + 10 * Xo[:, 3] + 5 * Xo[:, 4]
    )
    assert np.abs(bad_resid).min() > 3 * 4.0 - 5  # shifted by >= 3 sds of y (sd about 5)


@pytest.mark.parametrize("file", sorted(SHA256))
def test_shipped_regression_files_are_the_documented_copies(file):
    data = (PACKAGED_DATA / file).read_bytes()
    assert hashlib.sha256(data).hexdigest() == SHA256[file]
    assert (PACKAGED_DATA / "README.md").read_text().count(SHA256[file]) == 1


def test_diabetes_equals_scikit_learns_copy_and_engel_has_its_published_shape():
    X, y = load_regression("diabetes")
    ref = load_diabetes(scaled=False)
    np.testing.assert_array_equal(X, ref.data)
    np.testing.assert_array_equal(y, ref.target)
    X, y = load_regression("engel")
    assert X.shape == (235, 1) and y.shape == (235,)
    assert (X[0, 0], y[0]) == pytest.approx((420.157650843928, 255.839424594576))
    assert np.all(y < X[:, 0])  # food is a share of income in every household
    with pytest.raises(ValueError, match="name"):
        load_regression("boston")


def test_islr_sets_have_their_published_shapes_and_first_rows():
    X, y = load_regression("carseats")  # ISLR: 400 stores; Sales 9.50 at the first, ShelveLoc "Bad", Urban and US
    assert X.shape == (400, 11) and y.shape == (400,)
    assert y[0] == pytest.approx(9.5) and list(X[0, 7:]) == [0, 0, 1, 1]
    assert set(np.unique(X[:, 7] + X[:, 8])) == {0.0, 1.0}  # at most one shelf indicator is set
    X, y = load_regression("wage")  # ISLR: 3000 men, ages 18-80
    assert X.shape == (3000, 1) and (X.min(), X.max()) == (18, 80)
    assert y[0] == pytest.approx(75.0431540173515)
    X, y = load_regression("mcycle")
    np.testing.assert_array_equal(np.column_stack([X[:, 0], y]), np.column_stack(load_mcycle()))


def test_regression_split_standardises_by_the_training_split_and_keeps_test_targets_clean():
    _, y = load_regression("engel")
    d = regression_split("engel", 150, 0.2, random_state=4)
    assert d.X.shape == (150, 1) and d.X_test.shape == (85, 1) and d.outlier.sum() == 30
    np.testing.assert_allclose(d.X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(d.X.std(axis=0), 1.0)
    assert set(np.round(d.y_test, 9)) <= set(np.round(y, 9))
    assert not set(np.round(d.y[d.outlier], 9)) & set(np.round(y, 9))
    with pytest.raises(ValueError, match="n_train"):
        regression_split("engel", 235)


def _row(method, status, mean_err=0.01, sd_err=0.01, stage="fixed", **kw):
    base = dict(data="neal", rate=0.05, n_train=20, repeat=0, stage=stage, method=method, status=status)
    base.update(rmse=1.0, mae=1.0, nlpd=1.0, sweeps=5, time_s=0.1, mcmc_rhat=1.0, mean_err=mean_err, sd_err=sd_err)
    base.update(kw)
    return base


def test_claims_read_hand_made_rows_correctly():
    rows = [
        _row("sklearn GPR", "closed form", stage="learned", rmse=2.0, nlpd=1.5),
        _row("Student-t auto", "converged", stage="learned", rmse=1.0, nlpd=0.5),
        _row("EP", "max_sweeps", mean_err=0.9),
        _row("auto", "converged", mean_err=0.02),
        _row("FEP a=0.5", "converged", mean_err=0.2),
        _row("REP c=0.1", "converged", mean_err=0.03),
        _row("REP c=1", "max_sweeps"),
        _row("REP c=10", "converged", mean_err=0.5),
    ]
    claims = {c["id"]: c for c in evaluate_regression_claims(rows)}
    assert claims["R1"]["verdict"] == "holds" and "0.500" in claims["R1"]["measured"]
    assert claims["R2"]["verdict"] == "not run"  # no clean setting
    assert claims["R3"]["verdict"] == "holds"
    assert claims["R4"]["verdict"] == "holds" and "REP c=1 0/1" in claims["R4"]["measured"]
    assert claims["R5"]["verdict"] == "partly" and "REP c=10: 0 of 1" in claims["R5"]["measured"]
    summary = summarize_regression(rows)
    assert {r["method"]: r["converged"] for r in summary}["EP"] == 0


@pytest.mark.slow  # a study end to end (12 s): with the slow studies
def test_the_study_runs_end_to_end_on_a_tiny_problem(tmp_path):
    from relaxep.experiments.studies.regression import FIXED_METHODS, LEARNED_METHODS, STRESS_SKIPS, report, run
    from relaxep.experiments.study import StudyContext

    spec = {"data": "neal", "rate": 0.2, "n_train": 15, "repeat": 0}
    tables = run(StudyContext(quick=True, progress=False), specs=[spec], n_samples=400)
    rows = tables["regression"]
    stress = [m for m in FIXED_METHODS if m not in STRESS_SKIPS]
    assert [r["method"] for r in rows] == [*LEARNED_METHODS, *FIXED_METHODS, *stress]
    assert [r["stage"] for r in rows] == ["learned"] * 3 + ["fixed"] * 6 + ["stress"] * len(stress)
    assert all(np.isfinite(r["rmse"]) and np.isfinite(r["nlpd"]) for r in rows)
    fixed = [r for r in rows if r["stage"] != "learned"]
    assert all("mean_err" in r and r["status"] in ("converged", "max_sweeps", "diverged", "stuck") for r in fixed)
    # auto at the Student-t's learned hyperparameters is the learned fit's own posterior
    learned_t = next(r for r in rows if r["method"] == "Student-t auto")
    auto = next(r for r in fixed if r["method"] == "auto" and r["stage"] == "fixed")
    assert auto["rmse"] == pytest.approx(learned_t["rmse"], rel=1e-3)
    assert [c["id"] for c in tables["regression_claims"]] == ["R1", "R2", "R3", "R4", "R5", "R6"]
    (tmp_path / "figures").mkdir()
    section = report(tables, tmp_path)
    assert "### Claims put to the test" in section and "Student-t" in section
    for name in ("regression.csv", "regression_summary.csv", "regression_claims.csv", "regression_mcmc.csv"):
        assert (tmp_path / name).is_file()
    assert (tmp_path / "figures" / "regression_rmse.png").is_file()
