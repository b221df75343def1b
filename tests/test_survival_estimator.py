"""GPSurvivalRegressor: what users type (scikit-survival's targets, risk scores, survival functions), each output
against an independent computation (scipy's Weibull law and quadrature, a double loop, refits)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import integrate, optimize, stats
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.model_selection import GridSearchCV, KFold

from relaxep import (
    GPRegressor,
    GPSurvivalRegressor,
    LogNormalAFT,
    WeibullAFT,
    interval_censored,
    right_censored,
)
from relaxep.assessment.brute_force import brute_force_loo
from relaxep.likelihoods.survival_targets import survival_targets

KERNEL = ConstantKernel(0.8, "fixed") * RBF(1.5, "fixed")


def weibull_set(n: int, seed: int, shape: float = 2.0, censor: float = 8.0):
    """Weibull AFT times, log T = 1 + f(x) + eps / shape (eps minimum-Gumbel), censored by an exponential time."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    f = np.sin(X[:, 0]) + 0.5 * X[:, 1]
    time = np.exp(1.0 + f + np.log(rng.exponential(size=n)) / shape)
    cut = rng.exponential(censor, size=n)
    return X, f, right_censored(time <= cut, np.minimum(time, cut))


def test_the_intercept_only_start_is_scipys_weibull_fit():
    """Without censoring the start is scipy's Weibull maximum likelihood (shape c, scale e^location); with it, the
    maximum of the censored log likelihood written with scipy's logpdf and logsf."""
    rng = np.random.default_rng(1)
    time = stats.weibull_min(1.7, scale=3.0).rvs(300, random_state=rng)
    start = WeibullAFT().start_from(survival_targets(right_censored(np.ones(300, bool), time)))
    c, _, scale = stats.weibull_min.fit(time, floc=0)
    assert start.shape == pytest.approx(c, rel=1e-4) and np.exp(start.location) == pytest.approx(scale, rel=1e-4)

    event = rng.uniform(size=300) < 0.6

    def negative(x):
        law = stats.weibull_min(np.exp(x[1]), scale=np.exp(x[0]))
        return -(np.sum(law.logpdf(time[event])) + np.sum(law.logsf(time[~event])))

    best = optimize.minimize(negative, [1.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-12}).x
    start = WeibullAFT().start_from(survival_targets(right_censored(event, time)))
    assert start.location == pytest.approx(best[0], abs=1e-4) and start.shape == pytest.approx(np.exp(best[1]), 1e-4)


def test_the_three_forms_of_y_are_one_fit():
    """scikit-survival's structured array, (time, event) columns and interval bounds (upper inf: censored; equal:
    an event) give the same posterior."""
    X, _, y = weibull_set(40, 0)
    forms = [
        y,
        np.column_stack([y["time"], y["event"].astype(float)]),
        interval_censored(y["time"], np.where(y["event"], y["time"], np.inf)),
    ]
    fits = [GPSurvivalRegressor(KERNEL, optimizer=None).fit(X, form) for form in forms]
    for fit in fits[1:]:
        np.testing.assert_allclose(fit.predict(X), fits[0].predict(X), rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module")
def fitted():
    X, f, y = weibull_set(80, 2)
    return X, f, y, GPSurvivalRegressor(random_state=0).fit(X, y)


def test_the_survival_function_is_the_latent_average_of_scipys_weibull(fitted):
    r""":math:`S_*(t) = \int S_{\mathrm{Weibull}}(t; k, e^{c + f}) N(f | m, v) df` by scipy's quad, the band's ends
    scipy's survival at :math:`m \mp 1.96\sqrt v`, the cumulative hazard :math:`-\log S_*`."""
    X, _, _, model = fitted
    times = np.array([0.5, 2.0, 6.0])
    S, lower, upper = model.predict_survival_function(X[:4], times, return_band=True)
    mean, var = model.latent_mean_and_variance(X[:4])
    k, c = model.likelihood_.shape, model.likelihood_.location

    def weibull_sf(t, f):  # scipy's law written out for the quadrature (a frozen law per point took 4 s), checked:
        return np.exp(-((t * np.exp(-(c + f))) ** k))

    f_check = np.linspace(-4.0, 4.0, 17)
    for t in times:
        np.testing.assert_allclose(weibull_sf(t, f_check), stats.weibull_min(k, scale=np.exp(c + f_check)).sf(t),
                                   rtol=1e-13, atol=1e-300)  # fmt: skip
    for i in range(4):
        for j, t in enumerate(times):

            def integrand(f, i=i, t=t):
                z = (f - mean[i]) / np.sqrt(var[i])
                return weibull_sf(t, f) * np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi * var[i])

            sd = np.sqrt(var[i])
            exact = integrate.quad(integrand, mean[i] - 12 * sd, mean[i] + 12 * sd, epsabs=1e-12)[0]
            assert S[i, j] == pytest.approx(exact, abs=1e-8)
            ends = [stats.weibull_min(k, scale=np.exp(c + mean[i] + s * 1.959964 * sd)).sf(t) for s in (-1, 1)]
            assert lower[i, j] == pytest.approx(min(ends), abs=1e-6) and upper[i, j] == pytest.approx(
                max(ends), abs=1e-6
            )
    H = model.predict_cumulative_hazard_function(X[:4], times)
    np.testing.assert_allclose(H, -np.log(S), rtol=1e-12)


def test_the_median_halves_the_predictive_survival(fitted):
    X, _, _, model = fitted
    median = model.predict_median(X[:5])
    S = np.diag(model.predict_survival_function(X[:5], median))
    np.testing.assert_allclose(S, 0.5, atol=1e-8)


def test_risk_is_minus_the_log_time_location_and_score_is_harrells_c(fitted):
    """``predict`` ranks an earlier event higher; ``score`` is Harrell's C by the pairs' definition (a double
    loop: comparable when the earlier time is an event), and a fit on a clear signal ranks well."""
    X, f, y, model = fitted
    risk = model.predict(X)
    mean, _ = model.latent_mean_and_variance(X)
    np.testing.assert_allclose(risk, -(model.likelihood_.location + mean))
    num = den = 0.0
    for i in range(len(y)):
        for j in range(len(y)):
            if y["event"][i] and y["time"][i] < y["time"][j]:
                den += 1
                num += 1.0 if risk[i] > risk[j] else 0.5 if risk[i] == risk[j] else 0.0
    assert model.score(X, y) == pytest.approx(num / den, abs=1e-12)
    assert model.score(X, y) > 0.75 and np.corrcoef(-risk, f)[0, 1] > 0.9


def test_loo_against_brute_force_refits():
    """``loo()`` (EP's cavities) against refits without each row at the fitted hyperparameters, censored rows
    (probabilities) and events (densities of T) alike (measured: 0.014 nats mean, 0.155 at the worst row, an
    event)."""
    X, _, y = weibull_set(40, 3)
    model = GPSurvivalRegressor(KERNEL, likelihood=WeibullAFT(2.0, "fixed"), optimizer=None, tol=1e-8).fit(X, y)
    gap = np.abs(model.loo().pointwise - brute_force_loo(model, tol=1e-8))
    assert np.mean(gap) < 0.02 and np.max(gap) < 0.2


@pytest.mark.parametrize(
    ("likelihood", "options"),
    [
        ("weibull", {}),
        ("loglogistic", {}),
        ("lognormal", {}),
        ("coxph", {}),
        ("weibull", {"inducing_points": 15}),
        ("weibull", {"inducing_points": 15, "optimizer": "stochastic", "optimizer_maxiter": 20}),
    ],
    ids=["weibull", "loglogistic", "lognormal", "coxph", "weibull-sparse", "weibull-stochastic"],
)
def test_defaults_on_each_path(likelihood, options):
    """With nothing but the likelihood and the path chosen, the model fits, converges and ranks held-out rows."""
    X, _, y = weibull_set(160, 4)
    model = GPSurvivalRegressor(likelihood=likelihood, random_state=0, **options).fit(X[:100], y[:100])
    assert model.result_.status == "converged"
    assert model.score(X[100:], y[100:]) > 0.7
    assert np.all(np.isfinite(model.predict_survival_function(X[100:], [1.0, 3.0])))


_DEVICE = """
import json, numpy as np, sklearn, array_api_strict as xp
from relaxep import GPSurvivalRegressor, right_censored
rng = np.random.default_rng(0); n = 60
X = rng.normal(size=(n, 2)); t = np.exp(1 + X[:, 0] + 0.5 * rng.gumbel(size=n)); c = rng.exponential(8, size=n)
y = right_censored(t < c, np.minimum(t, c))
host = GPSurvivalRegressor(random_state=0).fit(X, y)
with sklearn.config_context(array_api_dispatch=True):
    dev = GPSurvivalRegressor(random_state=0).fit(xp.asarray(X), y)
    risk = np.asarray(dev.predict(xp.asarray(X)))
    S = dev.predict_survival_function(xp.asarray(X), [1.0, 2.0])
print(json.dumps([float(np.max(np.abs(risk - host.predict(X)))),
                  float(np.max(np.abs(S - host.predict_survival_function(X, [1.0, 2.0]))))]))
"""


def test_array_api_input_fits_as_numpy(array_api_python):
    """The array-API path (array-api-strict arrays, scikit-learn's dispatch on) answers as numpy does."""
    pytest.importorskip("array_api_strict")
    run = array_api_python.run(_DEVICE)
    risk_gap, survival_gap = json.loads(run.stdout.strip().splitlines()[-1])
    assert risk_gap < 1e-6 and survival_gap < 1e-6


def test_grid_search_cv_scores_by_concordance():
    X, _, y = weibull_set(90, 5)
    search = GridSearchCV(
        GPSurvivalRegressor(KERNEL, optimizer=None), {"likelihood": ["weibull", LogNormalAFT()]}, cv=KFold(3)
    ).fit(X, y)
    assert 0.6 < search.best_score_ <= 1.0
    assert search.best_params_["likelihood"] in search.param_grid["likelihood"]


def test_the_callers_targets_are_not_modified():
    X, _, y = weibull_set(30, 6)
    before, X_before = y.copy(), X.copy()
    GPSurvivalRegressor(KERNEL, optimizer=None).fit(X, y)
    assert np.array_equal(y, before) and np.array_equal(X, X_before)


def _raw(event, time):
    """A structured array as scikit-survival's ``Surv.from_arrays`` builds it, unchecked."""
    return np.array(list(zip(event, time, strict=True)), dtype=[("event", "?"), ("time", "f8")])


@pytest.mark.parametrize(
    ("y", "error", "words"),
    [
        (_raw([True, False, True], [1.0, 0.0, 2.0]), ValueError, "positive"),
        (_raw([True, False, True], [1.0, -3.0, 2.0]), ValueError, "positive"),
        (np.array([(1, 1.0), (0, 2.0), (1, 3.0)], dtype=[("event", "i8"), ("time", "f8")]), TypeError, "bool"),
        (
            np.array([(1.0, 2.0), (3.0, 1.0), (2.0, 2.0)], dtype=[("lower", "f8"), ("upper", "f8")]),
            ValueError,
            "upper",
        ),
        (_raw([False, False, False], [1.0, 2.0, 3.0]), ValueError, "censored"),
    ],
    ids=["zero time", "negative time", "event not bool", "lower above upper", "all censored"],
)
def test_bad_targets_are_refused_naming_y(y, error, words):
    with pytest.raises(error, match="y") as info:
        GPSurvivalRegressor(KERNEL, optimizer=None).fit(np.zeros((3, 1)), y)
    assert words in str(info.value)


def test_other_bad_input_is_named():
    X, _, y = weibull_set(20, 7)
    with pytest.raises(ValueError, match="rows"):
        GPSurvivalRegressor(KERNEL, optimizer=None).fit(X[:10], y)
    model = GPSurvivalRegressor(KERNEL, optimizer=None).fit(X, y)
    with pytest.raises(ValueError, match="times"):
        model.predict_survival_function(X, [1.0, -1.0])
    with pytest.raises(ValueError, match="likelihood"):
        GPSurvivalRegressor(likelihood="cox").fit(X, y)
    with pytest.raises(TypeError, match="GPSurvivalRegressor"):
        GPRegressor(likelihood=WeibullAFT()).fit(X, y["time"])
