"""The accelerated-failure-time likelihoods' gradient, tilted expectations and predictive against ground truth, and
an EP fit on censored data.

Ground truths: central differences in the log hyperparameter of quadrature's log Z (``survival_reference``, not the
code's log Z); the tilted :math:`E[\\log p]` and cumulants by quadrature; the predictive survival by quadrature of
:math:`S(t|f)N(f|m,v)` with :math:`S` from scipy.stats, its median by brentq on it, the band's ends from
scipy.stats at :math:`m \\mp q\\sqrt v`; EP's latent against the truth that simulated the censored times.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from relaxep import EP, infer
from survival_reference import NOISE, row_log_lik, tilted_reference
from test_survival_likelihoods import ROWS, make

INF = np.inf
KINDS = ["weibull", "loglogistic", "lognormal"]
# (row kind, cavity mean, variance): at, below and above the row's log-time 1, narrow and wide cavities
CAVITIES = [("event", 0.4, 0.5), ("right", -6.0, 4.0), ("left", 2.5, 0.01), ("narrow", 1.5, 1.0), ("wide", 9.0, 9.0)]


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _sigma(kind: str, hyper: float) -> float:
    return make(kind, hyper)[1]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("hyper", [0.4, 3.0])
def test_hyperparameter_gradient_is_the_derivative_of_quadratures_log_z(kind, hyper):
    """d log Z / d log(shape) (or log sigma) against a central difference, step 1e-4, of quadrature's log Z."""
    lik = make(kind, hyper)[0]
    y = np.array([ROWS[name] for name, _, _ in CAVITIES])
    m, v = np.array([c[1] for c in CAVITIES]), np.array([c[2] for c in CAVITIES])
    got = lik.dlog_z_dtheta(y, m, v)[:, 0]
    h = 1e-4
    for i, row in enumerate(y):
        up, down = (
            _quiet(tilted_reference, kind, _sigma(kind, hyper * math.exp(s * h)), row, m[i], v[i], log_z_only=True)
            for s in (1.0, -1.0)
        )
        want = (up - down) / (2.0 * h)
        assert got[i] == pytest.approx(want, abs=1e-6 * max(1.0, abs(want))), (CAVITIES[i], got[i], want)


@pytest.mark.parametrize("kind", KINDS)
def test_expected_log_lik_and_cumulants_match_quadrature(kind):
    """E_tilted[log p(y|f)] and the tilted cumulants k1..k4 (k4 = mu4 - 3 mu2^2) by quadrature."""
    hyper = 1.7
    lik, sigma = make(kind, hyper)
    y = np.array([ROWS[name] for name, _, _ in CAVITIES])
    m, v = np.array([c[1] for c in CAVITIES]), np.array([c[2] for c in CAVITIES])
    elog = lik.expected_log_lik(y, m, v)
    k1, k2, k3, k4 = lik.tilted_cumulants(y, m, v)
    for i, row in enumerate(y):
        _, mean, mu2, mu3, mu4, e = _quiet(
            tilted_reference, kind, sigma, row, m[i], v[i], extra=lambda f, r=row: row_log_lik(kind, sigma, *r, f)
        )
        assert elog[i] == pytest.approx(e, abs=1e-8 * max(1.0, abs(e)))
        assert k1[i] == pytest.approx(mean, abs=1e-8)
        assert k2[i] == pytest.approx(mu2, rel=1e-8)
        assert k3[i] == pytest.approx(mu3, abs=1e-8 * mu2**1.5)
        assert k4[i] == pytest.approx(mu4 - 3.0 * mu2**2, abs=1e-8 * mu2**2)


# ------------------------------------------------------------ the predictive
SCIPY = {
    "weibull": lambda h, f: stats.weibull_min(c=h, scale=np.exp(f)),
    "loglogistic": lambda h, f: stats.fisk(c=h, scale=np.exp(f)),
    "lognormal": lambda h, f: stats.lognorm(s=h, scale=np.exp(f)),
}
LATENTS = [(0.5, 0.01), (0.5, 1.0), (2.0, 25.0), (-1.0, 4.0)]


def _quad_survival(kind, sigma, b, m, v):
    """:math:`\\int S(e^b | f) N(f | m, v) df` by quad (S from the textbook law, checked against scipy below)."""
    log_sf, sd = NOISE[kind][1], math.sqrt(v)

    def integrand(f):
        return math.exp(log_sf((b - f) / sigma) - 0.5 * (f - m) ** 2 / v) / math.sqrt(2.0 * math.pi * v)

    lo, hi = m - 40.0 * sd, m + 40.0 * sd
    points = [b] if lo < b < hi else None
    return integrate.quad(integrand, lo, hi, points=points, limit=400, epsabs=1e-14, epsrel=1e-12)[0]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("hyper", [0.3, 5.0])
def test_predictive_survival_is_the_latent_average(kind, hyper):
    """S_*(t) against quad, including latents 25 times wider than the likelihood's step (sigma 0.2, sd 5)."""
    lik, sigma = make(kind, hyper)
    log_t = np.array([-2.0, 0.0, 0.5, 1.0, 4.0])
    m, v = np.array([c[0] for c in LATENTS]), np.array([c[1] for c in LATENTS])
    got = lik.survival(log_t, m, v)
    assert got.shape == (len(LATENTS), log_t.size)
    # the textbook law is scipy's at the latent's mean (fisk's sf, 1 - cdf, has 2e-9 relative at 2.5e-8)
    np.testing.assert_allclose(
        np.exp(lik.log_survival_given(log_t, 0.5)), SCIPY[kind](hyper, 0.5).sf(np.exp(log_t)), rtol=1e-8, atol=1e-300
    )
    want = [[_quad_survival(kind, sigma, b, mi, vi) for b in log_t] for mi, vi in zip(m, v, strict=True)]
    np.testing.assert_allclose(got, want, atol=1e-10)


@pytest.mark.parametrize("kind", KINDS)
def test_survival_band_is_the_latents_quantiles(kind):
    """Its ends are S(t | m -/+ q sd) (scipy.stats), q the normal's 0.975 point, and it holds S(t | m)."""
    hyper = 1.5
    lik = make(kind, hyper)[0]
    log_t = np.array([-1.0, 0.5, 2.0])
    m, v = np.array([0.2, 1.0]), np.array([0.3, 2.0])
    lower, upper = lik.survival_band(log_t, m, v, level=0.95)
    q = stats.norm.ppf(0.975)
    for i in range(2):
        ends = [SCIPY[kind](hyper, m[i] + s * q * math.sqrt(v[i])).sf(np.exp(log_t)) for s in (-1.0, 1.0)]
        np.testing.assert_allclose(lower[i], ends[0], rtol=1e-12)  # later f is a later event: S rises in f
        np.testing.assert_allclose(upper[i], ends[1], rtol=1e-12)
        at_mean = SCIPY[kind](hyper, m[i]).sf(np.exp(log_t))
        assert np.all(lower[i] < at_mean) and np.all(at_mean < upper[i])


@pytest.mark.parametrize("kind", KINDS)
def test_median_log_time_is_the_root_of_the_predictive(kind):
    """S_*(t) = 1/2 at the median, against brentq on the quadrature predictive."""
    hyper = 0.8
    lik, sigma = make(kind, hyper)
    m, v = np.array([0.3, -2.0, 4.0]), np.array([0.04, 1.0, 9.0])
    got = lik.median_log_time(m, v)
    for i in range(3):
        mi, vi = m[i], v[i]
        want = optimize.brentq(lambda b, mi=mi, vi=vi: _quad_survival(kind, sigma, b, mi, vi) - 0.5, mi - 50, mi + 50)
        assert got[i] == pytest.approx(want, abs=1e-8)


# ------------------------------------------------------------ EP on censored data
def _weibull_problem(n=60, shape=2.0, seed=3):
    """Weibull AFT times about a smooth log-scale g(x), about 60% right-censored by uniform early censoring."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0.0, 1.0, n))
    g = 0.8 * np.sin(2.0 * np.pi * x)
    log_t = g + stats.gumbel_l.rvs(size=n, random_state=rng) / shape
    log_c = rng.uniform(-1.5, 0.5, n)
    event = log_t <= log_c
    rows = np.where(event[:, None], np.column_stack([log_t, log_t]), np.column_stack([log_c, np.full(n, INF)]))
    K = 0.64 * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / 0.2**2) + 1e-6 * np.eye(n)
    return K, rows, g, event


def test_ep_on_censored_rows_recovers_the_latent_and_ignoring_censoring_does_not():
    """EP converges with positive site precisions; with the censored rows as rows its latent is near the truth,
    while the censoring times taken as events pull it down by far more."""
    from relaxep.likelihoods.aft import WeibullAFT

    K, rows, g, event = _weibull_problem()
    assert 0.45 < 1.0 - event.mean() < 0.8  # heavy censoring
    res = infer(K, rows, WeibullAFT(shape=2.0), EP(), tol=1e-6, max_sweeps=200)
    assert res.status == "converged"
    assert np.all(res.site_precision > 0.0)
    naive = infer(K, np.column_stack([rows[:, 0], rows[:, 0]]), WeibullAFT(shape=2.0), EP(), tol=1e-6)
    err, err_naive = np.sqrt(np.mean((res.mean - g) ** 2)), np.sqrt(np.mean((naive.mean - g) ** 2))
    assert err < 0.25, err
    assert err_naive > 3.0 * err, (err, err_naive)
    assert np.mean(naive.mean - g) < -0.4  # the bias is downward: censoring times are before the events
