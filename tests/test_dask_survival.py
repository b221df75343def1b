"""DaskGPSurvivalRegressor on a LocalCluster this module starts: its fit is GPSurvivalRegressor's sparse fit on the
same rows and inducing inputs (right, left and interval censoring: rows with infinite ends on the shards), its AFT
start is the intercept-only Weibull maximum likelihood (solved here by root finding), and its predictions are lazy
and equal to its ``to_local()`` estimator's, which pickles."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy.optimize import brentq
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import EP, GPSurvivalRegressor, LogLogisticAFT, LogNormalAFT, WeibullAFT, right_censored
from relaxep.likelihoods.survival_targets import interval_censored

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from relaxep.estimators.dask import DaskGPSurvivalRegressor  # noqa: E402

TIMES = [0.5, 1.5, 3.0, 6.0]


@pytest.fixture(scope="module")
def client(dask_client):
    return dask_client  # the module's in-process cluster (conftest.py)


@pytest.fixture(scope="module")
def data():
    """Weibull AFT times (log T = 1 + sin(x0) + x1/2 + 0.4 eps, eps min-Gumbel), censored at uniform times; the same
    times also read by inspection intervals (left-censored below 1, right-censored above 8, else [floor, floor+1]
    except exact events a third of the time)."""
    rng = np.random.default_rng(0)
    n = 240
    X = rng.normal(size=(n, 2))
    time = np.exp(1.0 + np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.4 * np.log(rng.exponential(size=n)))
    stop = rng.uniform(1.0, 10.0, size=n)
    event = time < stop
    lower = np.where(time < 1.0, 0.0, np.floor(time))
    upper = np.where(time > 8.0, np.inf, np.floor(time) + 1.0)
    exact = (rng.uniform(size=n) < 1 / 3) & (time >= 1.0) & (time <= 8.0)
    lower[exact], upper[exact] = time[exact], time[exact]
    return dict(
        X=X, time=np.minimum(time, stop), event=event, intervals=interval_censored(lower, upper),
        Xt=rng.normal(size=(60, 2)), Z=X[::24].copy(),
    )  # fmt: skip


def _chunked(a, rows=80):
    return da.from_array(a, chunks=(rows, *a.shape[1:]))  # 3 shards on 2 workers


CASES = {
    # (likelihood with its location and shape fixed: both fits start from the same one; the targets' form)
    "weibull-structured": (WeibullAFT(1.8, "fixed", location=1.2), "structured"),
    "lognormal-intervals": (LogNormalAFT(0.6, "fixed", location=1.1), "intervals"),
    "loglogistic-dask-time-event": (LogLogisticAFT(2.5, "fixed", location=1.2), "dask"),
    # (its baseline placed by with_baseline on the rows gathered once; skipped until relaxep has CoxPH)
    "coxph-dask-time-event": ("coxph", "dask"),
}


def _targets(data, form):
    """The targets as GPSurvivalRegressor reads them and as the Dask estimator is given them."""
    if form == "intervals":
        return data["intervals"], data["intervals"]
    y = right_censored(data["event"], data["time"])
    if form == "structured":
        return y, y
    return y, _chunked(np.column_stack([data["time"], data["event"].astype(float)]))


@pytest.mark.parametrize("case", list(CASES))
def test_dask_survival_equals_gpsurvivalregressor_on_the_same_rows_and_inducing_inputs(client, data, case):
    """Right-censored rows ([log t, inf]) and left-censored and interval rows ([-inf, log u], [log l, log u]) on the
    shards: the same EP run (sweeps, evidence), the same predictions and leave-one-out terms to 1e-8."""
    likelihood, form = CASES[case]
    if likelihood == "coxph":
        pytest.importorskip("relaxep.likelihoods.coxph")
    y_ref, y_dask = _targets(data, form)
    X, Xt, Z = data["X"], data["Xt"], data["Z"]
    params = dict(likelihood=likelihood, rule=EP(), inducing_points=Z, optimizer=None)
    ref = GPSurvivalRegressor(C(0.8) * RBF(1.0), **params).fit(X, y_ref)
    got = DaskGPSurvivalRegressor(client, C(0.8) * RBF(1.0), **params).fit(_chunked(X), y_dask)
    assert got.result_.status == ref.result_.status == "converged"
    assert got.result_.n_sweeps == ref.result_.n_sweeps
    assert got.log_marginal_likelihood_value_ == pytest.approx(ref.log_marginal_likelihood_value_, rel=1e-9)
    np.testing.assert_array_equal(got.unique_times_, ref.unique_times_)
    Xd = _chunked(Xt, 25)
    risk = got.predict(Xd)
    assert isinstance(risk, da.Array)
    np.testing.assert_allclose(risk.compute(), ref.predict(Xt), rtol=0, atol=1e-8)
    for a, b in zip(got.latent_mean_and_variance(Xd), ref.latent_mean_and_variance(Xt), strict=True):
        np.testing.assert_allclose(a.compute(), b, rtol=0, atol=1e-8)
    survival = got.predict_survival_function(Xd, TIMES)
    assert isinstance(survival, da.Array) and survival.shape == (60, len(TIMES))
    np.testing.assert_allclose(survival.compute(), ref.predict_survival_function(Xt, TIMES), rtol=0, atol=1e-8)
    np.testing.assert_allclose(got.predict_median(Xd).compute(), ref.predict_median(Xt), rtol=1e-8)
    # leave-one-out from the shards' cavities: the one-process terms, on rows it recognises as the same
    loo, want = got.loo(), ref.loo()
    assert loo.fingerprint == want.fingerprint
    np.testing.assert_allclose(loo.pointwise, want.pointwise, rtol=0, atol=1e-8)
    np.testing.assert_allclose(got.loo_predict().mean, ref.loo_predict().mean, rtol=0, atol=1e-8)


def test_the_aft_start_is_the_intercept_only_weibull_maximum_likelihood(client, data):
    """The default likelihood's start, from sums over the shards: the right-censored Weibull MLE, whose shape k
    solves 1/k + mean_events(log t) = sum t^k log t / sum t^k and whose scale is (sum t^k / d)^(1/k) (brentq)."""
    t, event = data["time"], data["event"]

    def score(k):
        w = t**k
        return 1.0 / k + np.mean(np.log(t[event])) - np.sum(w * np.log(t)) / np.sum(w)

    k = brentq(score, 0.05, 50.0, xtol=1e-14)
    scale = (np.sum(t**k) / event.sum()) ** (1.0 / k)
    y = right_censored(event, t)
    got = DaskGPSurvivalRegressor(client, C(0.8) * RBF(1.0), inducing_points=data["Z"], optimizer=None)
    got.fit(_chunked(data["X"]), y)
    assert got.likelihood_.shape == pytest.approx(k, rel=1e-5)
    assert got.likelihood_.location == pytest.approx(np.log(scale), abs=1e-5)
    # and GPSurvivalRegressor's start, from its one sum over the rows, to the optimiser's tolerance
    ref = GPSurvivalRegressor(C(0.8) * RBF(1.0), rule=EP(), inducing_points=data["Z"], optimizer=None).fit(data["X"], y)
    assert got.likelihood_.shape == pytest.approx(ref.likelihood_.shape, rel=1e-6)
    np.testing.assert_allclose(got.predict(data["Xt"]), ref.predict(data["Xt"]), atol=1e-6)


@pytest.fixture(scope="module")
def fitted(client, data):
    y = right_censored(data["event"], data["time"])
    model = DaskGPSurvivalRegressor(client, C(0.8) * RBF(1.0), WeibullAFT(1.8, "fixed", location=1.2),
                                    inducing_points=data["Z"], optimizer=None)  # fmt: skip
    return model.fit(_chunked(data["X"]), y), y


def test_to_local_is_a_fitted_gpsurvivalregressor_that_pickles_and_predicts_as_the_dask_estimator(fitted, data):
    model, y = fitted
    Xt, Xd = data["Xt"], _chunked(data["Xt"], 25)
    local = pickle.loads(pickle.dumps(model.to_local()))
    assert type(local) is GPSurvivalRegressor and local.X_train_ is None and local.y_train_ is None
    assert len(pickle.dumps(local)) < 50_000  # M = 10 inducing inputs and the distinct event times
    event_times = np.unique(data["time"][data["event"]])
    np.testing.assert_allclose(local.unique_times_, event_times, rtol=1e-14)
    np.testing.assert_allclose(model.predict(Xd).compute(), local.predict(Xt), rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.predict_median(Xd).compute(), local.predict_median(Xt), rtol=1e-12)
    for cumulative in (False, True):
        name = "predict_cumulative_hazard_function" if cumulative else "predict_survival_function"
        lazy = getattr(model, name)(Xd, return_band=True, level=0.8)
        want = getattr(local, name)(Xt, return_band=True, level=0.8)
        for a, b in zip(lazy, want, strict=True):
            assert isinstance(a, da.Array) and a.shape == (60, event_times.size)
            np.testing.assert_allclose(a.compute(), b, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(getattr(model, name)(Xt, TIMES), getattr(local, name)(Xt, TIMES), atol=0)
    # the concordance: the risk scores gathered with a Dask (time, event) target equal the local score
    yd = _chunked(np.column_stack([data["time"], data["event"].astype(float)]))
    assert model.score(_chunked(data["X"]), yd) == pytest.approx(local.score(data["X"], y), abs=1e-12)
    assert 0.7 < local.score(data["X"], y) < 1.0  # (the latent follows the log-times)
    with pytest.raises(ValueError, match="level"):
        model.predict_survival_function(Xd, return_band=True, level=1.5)


def test_defaults_fit_and_predict(client, data):
    """Only a client and inducing_points: the Weibull likelihood, an isotropic kernel learned with its shape by
    L-BFGS-B on the rows gathered to the client (here a few steps of it), EP on the shards."""
    X, y = data["X"][:90], right_censored(data["event"][:90], data["time"][:90])
    model = DaskGPSurvivalRegressor(client, inducing_points=6, optimizer_maxiter=2, random_state=0)
    model.fit(_chunked(X, 30), y)
    assert model.result_.status == "converged" and isinstance(model.likelihood_, WeibullAFT)
    assert np.ndim(model.kernel_.k2.length_scale) == 0 and model.inducing_points_.shape == (6, 2)
    assert np.all(np.isfinite(model.predict_survival_function(data["Xt"])))
    assert model.score(X, y) > 0.7
    assert DaskGPSurvivalRegressor().get_params()["likelihood"] == "weibull"


@pytest.mark.slow
def test_the_defaults_alone_fit_and_predict(client, data):
    """Only a client and inducing_points, the search run to its own stop (about 20 s on 2 cores)."""
    X, y = data["X"][:100], right_censored(data["event"][:100], data["time"][:100])
    model = DaskGPSurvivalRegressor(client, inducing_points=6).fit(_chunked(X, 25), y)
    assert model.result_.status == "converged" and np.all(np.isfinite(model.predict_median(data["Xt"])))
    assert model.score(X, y) > 0.7


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"likelihood": "cox"}, ValueError, "likelihood must be one of"),
        ({"likelihood": 3}, TypeError, "likelihood must be"),
        ({"rule": "auto"}, TypeError, "rule must be a SiteRule"),
        ({"jitter": -1.0}, ValueError, "jitter"),
        ({"timeout": 0}, ValueError, "timeout must be None or a positive number"),
    ],
)
def test_bad_parameters_are_refused_before_any_dask_work(data, params, error, match):
    y = right_censored(data["event"], data["time"])
    with pytest.raises(error, match=match):
        DaskGPSurvivalRegressor(client=object(), **params).fit(data["X"], y)  # (a client that would fail if used)


def test_bad_targets_are_refused_naming_y(client, data):
    X, t, e = data["X"], data["time"], data["event"].astype(float)
    model = DaskGPSurvivalRegressor(client, inducing_points=data["Z"], optimizer=None)
    bad = {
        "structured dtype does not chunk": da.from_array(right_censored(e, t), chunks=80),
        r"y\[:, 0\] \(the time\) must be finite and positive": _chunked(np.column_stack([np.where(e, t, -t), e])),
        r"y\[:, 1\] \(the event\) must be boolean or 0/1": _chunked(np.column_stack([t, 2.0 * e])),
        "every row is censored": _chunked(np.column_stack([t, 0.0 * e])),
        "y has 239 rows but X has 240": _chunked(np.column_stack([t, e])[1:]),
    }
    for match, y in bad.items():
        with pytest.raises(ValueError, match=match):
            model.fit(_chunked(X), y)
    with pytest.raises(ValueError, match="y has 239 rows"):
        model.fit(X, right_censored(e, t)[1:])
    with pytest.raises(TypeError, match="must be real numbers"):
        model.fit(_chunked(X), da.from_array(np.column_stack([t, e]).astype(complex), chunks=80))
