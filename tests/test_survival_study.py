"""``relaxep reproduce survival``: the splits are scikit-survival's guides', the IBS grid and the capping of test
times change no Brier term, every contender's row is wired (a constant risk scores exactly 1/2, a missing package
is a "not installed" row, a failing fit a "failed" row), and the quick study with relaxep's estimator."""

import numpy as np
import pytest

from relaxep.assessment import concordance_index, integrated_brier_score
from relaxep.datasets import load_gbsg2, load_veterans
from relaxep.experiments.studies import survival


def test_the_splits_are_the_guides():
    (train, test), *more = survival.splits("gbsg2", quick=False)
    assert not more and (train.size, test.size) == (514, 172)
    # the random-survival-forest guide prints six of its test patients: rows 119, 574, 421, 24, 8 and 226
    assert {119, 574, 421, 24, 8, 226} <= set(test.tolist())
    vet = survival.splits("veterans", quick=False)
    assert len(vet) == 100 and all((a.size, b.size) == (68, 69) for a, b in vet)
    assert len(survival.splits("veterans", quick=True)) == 5 and len(survival.splits("rossi", quick=False)) == 20
    assert all(np.intersect1d(a, b).size == 0 for a, b in vet)


def test_the_ibs_grid_and_capped_test_times_leave_every_brier_term_unchanged():
    _, y, _ = load_veterans()
    lower, upper = np.percentile(y["time"], [10, 90])
    rng = np.random.default_rng(0)
    capped_somewhere = 0
    for train, test in survival.splits("veterans", quick=False):
        times = survival.ibs_times(y["time"], y[test])
        assert times[0] >= lower and times[-1] < upper + 1 and np.allclose(np.diff(times), 1.0)
        assert times[0] >= y["time"][test].min() and times[-1] < y["time"][test].max()
        S = np.sort(rng.uniform(size=(test.size, times.size)), axis=1)[:, ::-1]
        capped = y[test].copy()
        capped["time"] = np.minimum(capped["time"], y["time"][train].max())
        capped_somewhere += int(np.any(capped["time"] != y["time"][test]))
        beyond = y["time"][test] > y["time"][train].max()
        if not np.any(beyond & y["event"][test]):  # (an event beyond the training follow-up has no weight)
            full = integrated_brier_score(y[train], y[test], S, times)
            assert integrated_brier_score(y[train], capped, S, times) == pytest.approx(full, rel=1e-12)
    assert capped_somewhere > 0


def _constant(X_train, y_train, X_test, times, **_):
    return np.zeros(len(X_test)), np.full((len(X_test), len(times)), 0.5), 0.0


def _missing(X_train, y_train, X_test, times, **_):
    import relaxep_no_such_package  # noqa: F401

    raise AssertionError("unreachable")


def _broken(X_train, y_train, X_test, times, **_):
    raise RuntimeError("the fit went wrong")


class _Exponential:
    """A stand-in with the estimator's interface: exponential survival with the Kaplan-Meier-free MLE rate
    :math:`\\hat\\lambda = d / \\sum t` and a risk from the first column; bands by the rate's +-20%."""

    def fit(self, X, y):
        self.rate_ = y["event"].sum() / y["time"].sum()
        return self

    def predict(self, X):
        return X[:, 0]

    def predict_survival_function(self, X, times, return_band=False, level=0.95):
        S = np.exp(-self.rate_ * np.exp(0.1 * X[:, :1]) * np.asarray(times)[None, :])
        return (S, S**1.2, S**0.8) if return_band else S


def test_every_contender_is_a_row_and_the_report_shows_them(tmp_path, monkeypatch):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from relaxep.experiments.study import StudyContext

    contenders = {
        "constant": (_constant, {}, "numpy"),
        "GP stand-in": (survival.gp_contender, {"likelihood": "weibull"}, "relaxep"),
        "missing": (_missing, {}, "relaxep_no_such_package"),
        "broken": (_broken, {}, "numpy"),
    }
    monkeypatch.setattr(survival, "CONTENDERS", contenders)
    monkeypatch.setattr(
        survival,
        "_gp_estimator",
        lambda likelihood, inducing_points: make_pipeline(FunctionTransformer(), _Exponential()),
    )
    tables = survival.STUDY.run(StudyContext(cache_dir=None, quick=True, progress=False))
    rows = tables["survival"]
    assert len(rows) == 4 * (1 + 5 + 3 + 1)
    for row in rows:
        if row["contender"] == "constant":  # every comparable pair tied in risk: exactly 1/2
            assert row["status"] == "ok" and row["c_index"] == 0.5 and row["fit_s"] == 0.0
        if row["contender"] == "missing":
            assert row["status"].startswith("not installed (relaxep_no_such_package")
        if row["contender"] == "broken":
            assert row["status"] == "failed (RuntimeError: the fit went wrong)"
    X, y, _ = load_gbsg2()
    test = survival.splits("gbsg2", quick=True)[0][1]
    gp = next(r for r in rows if r["contender"] == "GP stand-in" and r["dataset"] == "gbsg2")
    assert gp["c_index"] == pytest.approx(concordance_index(y[test], X[test, 0]), abs=1e-12)  # risk = age
    section = survival.STUDY.report(tables, tmp_path)
    assert section.count("| not installed (relaxep_no_such_package") == 4 and "failed (RuntimeError" in section
    assert (tmp_path / "figures" / "survival_curves.png").exists() and (tmp_path / "survival.csv").exists()


@pytest.mark.slow
def test_the_quick_study_with_relaxeps_estimator(tmp_path):
    pytest.importorskip("relaxep.estimators.survival")
    from relaxep.experiments.study import StudyContext

    tables = survival.STUDY.run(StudyContext(cache_dir=str(tmp_path / "cache"), quick=True, progress=False))
    rows = [r for r in tables["survival"] if r["contender"].startswith("GPSurvival")]
    assert all(r["status"] == "ok" or r["status"].startswith("not installed") for r in rows)  # no fit fails
    gp = [r for r in rows if r["status"] == "ok"]
    assert {r["contender"] for r in gp} >= {survival.HEADLINE}
    for r in gp:  # better than chance on every set (the published Cox models: c 0.63-0.80)
        assert r["c_index"] > 0.55 and 0.0 < r["ibs"] < 0.25
    section = survival.STUDY.report(tables, tmp_path)
    assert "Targets" in section and (tmp_path / "figures" / "survival_curves.png").exists()
