"""Active learning for the binary classifier: BALD (``information_gain``) and the straddle, against ground truth.

BALD is checked against a Monte Carlo estimate of the mutual information from draws of the latent's posterior and
of labels from links written here with scipy (not the library's); Houlsby's closed form against the quadrature
(the measured bound of the docs); the straddle against its definition with thresholds computed independently
(``norm.ppf`` in closed form, the logistic's by ``brentq`` on a ``quad`` predictive); bad input is refused.
"""

import functools

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.special import expit, logit
from scipy.stats import norm
from sklearn.gaussian_process.kernels import RBF, ConstantKernel

from relaxep import GPClassifier
from relaxep.likelihoods import BinaryLikelihood, Logistic, NoisyProbit, NoisyStep, Probit
from relaxep.likelihoods.information import information_gain, probit_information_gain

RNG = np.random.default_rng(0)
X_TRAIN = RNG.uniform(-3.0, 3.0, (30, 2))
Y_TRAIN = (X_TRAIN[:, 0] + 0.5 * X_TRAIN[:, 1] + 0.3 * RNG.standard_normal(30) > 0).astype(int)
# near the boundary, deep in a class, at the edge, and far away (the prior's sd 3: the wide-predictive rule)
X_TEST = np.array([[0.0, 0.1], [2.5, 2.5], [-2.0, 0.5], [3.5, -3.5], [30.0, 30.0], [-25.0, 40.0]])

#: each likelihood beside its link t(f) = P(y = +1 | f), written independently of the library
LINKS = {
    "probit": (Probit(), norm.cdf),
    "noisy_probit": (None, lambda f: 0.01 + 0.98 * norm.cdf(f)),  # the default, NoisyProbit(0.01, 1.0)
    "logistic": (Logistic(), expit),
    "noisy_step": (NoisyStep(0.1), lambda f: 0.1 + 0.8 * (f > 0)),
}


@functools.cache
def _fit(likelihood, integrate="map"):
    """At a fixed kernel (prior sd 3); integrated: the kernel learned, its hyperparameters integrated over."""
    if integrate == "map":
        kernel, optimizer = ConstantKernel(9.0, "fixed") * RBF(2.0, "fixed"), None
    else:
        kernel, optimizer = ConstantKernel(9.0) * RBF(2.0), "fmin_l_bfgs_b"
    est = GPClassifier(kernel=kernel, likelihood=likelihood, optimizer=optimizer, jitter=1e-4, integrate=integrate)
    return est.fit(X_TRAIN, Y_TRAIN)


def _entropy(p):
    p = np.clip(p, 1e-300, 1.0 - 1e-16)
    return -(p * np.log2(p) + (1.0 - p) * np.log2(1.0 - p))


def _monte_carlo_bald(link, f, rng):
    """I(y; f) = h(E y) - E h(t(f)) from draws ``f`` (rows: test points) and labels y ~ t(f), with its standard
    error: the estimate is the mean of z = h'(p) y - h(t(f)) to first order (delta method), p the labels' mean."""
    t = link(f)
    y = rng.random(f.shape) < t
    p = y.mean(axis=1)
    estimate = _entropy(p) - _entropy(t).mean(axis=1)
    z = np.log2((1.0 - p) / p)[:, None] * y - _entropy(t)
    return estimate, z.std(axis=1) / np.sqrt(f.shape[1])


@pytest.mark.parametrize("name", sorted(LINKS))
def test_bald_equals_the_monte_carlo_mutual_information(name):
    likelihood, link = LINKS[name]
    est = _fit(likelihood)
    mean, var = est.latent_mean_and_variance(X_TEST)
    assert np.sqrt(var).max() > 2.5  # (the far rows take the trapezoid rule, the near ones Gauss-Hermite)
    rng = np.random.default_rng(20110)  # (the z-scores over 20 other seeds: mean within 0.2 of 0, sd 0.7-1.1)
    f = mean[:, None] + np.sqrt(var)[:, None] * rng.standard_normal((X_TEST.shape[0], 400_000))
    estimate, se = _monte_carlo_bald(link, f, rng)
    gain = est.information_gain(X_TEST)
    assert np.all(np.abs(gain - estimate) <= 3.0 * se), (gain, estimate, se)
    assert gain.max() > 0.1  # (not a vacuous agreement at 0)


def test_bald_of_an_integrated_fit_is_the_mixtures_monte_carlo_mutual_information():
    est = _fit(Probit(), integrate="ccd")
    points = est.model_.components(X_TEST, None)
    weights = np.array([w for w, *_ in points])
    rng = np.random.default_rng(2)
    n = 400_000
    k = rng.choice(weights.size, size=n, p=weights / weights.sum())  # the point, then f given it
    means = np.stack([m for _, m, _, _ in points])[k].T
    sds = np.sqrt(np.stack([v for _, _, v, _ in points]))[k].T
    estimate, se = _monte_carlo_bald(norm.cdf, means + sds * rng.standard_normal(means.shape), rng)
    gain = est.information_gain(X_TEST)
    assert np.all(np.abs(gain - estimate) <= 3.0 * se), (gain, estimate, se)
    assert weights.size > 1 and gain.max() > 0.1


@pytest.mark.parametrize(
    "likelihood", [Probit(), NoisyProbit(0.01, 1.0), NoisyProbit(0.1, 3.0), Logistic(), NoisyStep(0.1)]
)
def test_bald_lies_between_0_and_1_bit(likelihood):
    mean, var = np.meshgrid(np.linspace(-40.0, 40.0, 41), np.geomspace(1e-8, 1e6, 29))
    gain = information_gain(likelihood, mean, var)
    assert np.all(np.isfinite(gain)) and gain.min() >= 0.0 and gain.max() <= 1.0
    assert gain.max() > 0.5  # (where the posterior is wide and each latent value confident)


def test_houlsbys_closed_form_is_below_the_quadrature_by_at_most_0_0027_bits():
    mean, var = np.meshgrid(np.linspace(-8.0, 8.0, 401), np.geomspace(1e-4, 1e4, 401))
    gap = probit_information_gain(mean, var) - information_gain(Probit(), mean, var)
    assert gap.max() <= 1e-12  # an approximation from below (its expected entropy is too large)
    assert 0.002 < -gap.min() <= 0.0027  # the documented bound, and attained (0.00262 at mu = 2, s^2 = 0.028)
    est = _fit(Probit())
    exact, closed = est.information_gain(X_TEST), est.information_gain(X_TEST, method="houlsby")
    assert np.all(closed <= exact + 1e-12) and np.all(exact - closed <= 0.0027)


def test_the_step_is_exact_for_wide_predictives():
    # the noisy step's expected entropy is h(eps) (h(t(f)) = h(eps) but at f = 0): BALD = h(p) - h(eps)
    mean, var = np.array([0.0, 0.3, 1.0, 0.0, -2.0]), np.array([1.0, 4.0, 25.0, 100.0, 1e4])
    p = 0.1 + 0.8 * norm.cdf(mean / np.sqrt(var))
    assert information_gain(NoisyStep(0.1), mean, var) == pytest.approx(_entropy(p) - _entropy(0.1), abs=1e-12)


def _logistic_threshold(level, var):
    """The mean at which the logistic's predictive (by quad) is ``level``."""

    def proba(t):
        s = np.sqrt(var)
        density = lambda f: np.exp(-0.5 * ((f - t) / s) ** 2) / (s * np.sqrt(2.0 * np.pi))  # noqa: E731
        return quad(lambda f: expit(f) * density(f), t - 12 * s, t + 12 * s, epsabs=1e-13)[0]

    return brentq(lambda t: proba(t) - level, -50.0, 50.0, xtol=1e-12)


@pytest.mark.parametrize("name", sorted(LINKS))
@pytest.mark.parametrize("level", [0.5, 0.25, 0.8])
def test_straddle_against_its_definition(name, level):
    likelihood = LINKS[name][0]
    est = _fit(likelihood)
    mean, var = est.latent_mean_and_variance(X_TEST)
    s = np.sqrt(var)
    q = norm.ppf(level)
    if name == "probit":
        predictive, link = q * np.sqrt(1.0 + var), q
    elif name == "noisy_probit":
        q = norm.ppf((level - 0.01) / 0.98)
        predictive, link = q * np.sqrt(1.0 + var), q
    elif name == "logistic":
        predictive, link = np.array([_logistic_threshold(level, v) for v in var]), logit(level)
    else:
        predictive, link = norm.ppf((level - 0.1) / 0.8) * s, 0.0
    for kappa in (1.96, 0.5):
        expected = kappa * s - np.abs(mean - predictive)
        assert est.straddle(X_TEST, level, kappa) == pytest.approx(expected, abs=1e-8)
        expected = kappa * s - np.abs(mean - link)
        assert est.straddle(X_TEST, level, kappa, threshold="link") == pytest.approx(expected, abs=1e-8)


@pytest.mark.parametrize("likelihood", [Probit(), NoisyProbit(0.05, 2.0), NoisyStep(0.1)])
def test_closed_form_thresholds_equal_the_generic_solve(likelihood):
    var = np.array([1e-6, 0.3, 1.0, 10.0, 1e3])
    for level in (0.5, 0.2, 0.15, 0.85):
        closed = likelihood.latent_threshold(level, var)
        generic = BinaryLikelihood.latent_threshold(likelihood, level, var)
        assert closed == pytest.approx(generic, abs=1e-9 * (1.0 + np.abs(closed).max()))
        assert likelihood.predict(closed, var) == pytest.approx(level, abs=1e-10)


def test_rank_candidates_orders_by_information_gain():
    est = _fit(LINKS["noisy_probit"][0])
    gain = est.information_gain(X_TEST)
    order, gains = est.rank_candidates(X_TEST)
    assert np.all(np.diff(gains) <= 0.0) and gains == pytest.approx(gain[order])
    assert sorted(order) == list(range(X_TEST.shape[0]))
    best, top = est.rank_candidates(X_TEST, n_best=2)
    assert list(best) == list(order[:2]) and top == pytest.approx(gains[:2])


def test_bad_input_is_refused_naming_the_argument():
    est = _fit(LINKS["noisy_probit"][0])
    with pytest.raises(ValueError, match="X has 3 features"):
        est.information_gain(np.ones((2, 3)))
    with pytest.raises(ValueError, match="X has 1 features"):
        est.straddle(np.ones((2, 1)))
    for level in (0.0, 1.0, -0.2, 1.5, 0.005, 0.995):  # (the last two: outside NoisyProbit(0.01)'s (0.01, 0.99))
        with pytest.raises(ValueError, match="level"):
            est.straddle(X_TEST, level=level)
    with pytest.raises(ValueError, match="kappa"):
        est.straddle(X_TEST, kappa=-1.0)
    with pytest.raises(ValueError, match="threshold"):
        est.straddle(X_TEST, threshold="median")
    with pytest.raises(ValueError, match="method"):
        est.information_gain(X_TEST, method="exact")
    with pytest.raises(ValueError, match="method='houlsby'"):  # the probit's closed form, on the noisy probit
        est.information_gain(X_TEST, method="houlsby")
    with pytest.raises(ValueError, match="n_best"):
        est.rank_candidates(X_TEST, n_best=0)
    with pytest.raises(ValueError, match="level"):
        Logistic().latent_threshold(1.0, 1.0)


def test_multi_class_fits_are_refused():
    y = np.digitize(X_TRAIN[:, 0], [-1.0, 1.0])
    est = GPClassifier(kernel=ConstantKernel(1.0) * RBF(1.0), optimizer=None).fit(X_TRAIN, y)
    for call in (est.information_gain, est.straddle, est.rank_candidates):
        with pytest.raises(NotImplementedError, match="binary classifiers"):
            call(X_TEST)
    assert est.estimators_[0].information_gain(X_TEST).shape == (X_TEST.shape[0],)  # (one against the rest)
