"""The accelerated-failure-time likelihoods (Weibull, log-logistic, log-normal) against ground truth.

Ground truths: the rows' likelihoods from scipy.stats' ``weibull_min``, ``fisk`` and ``lognorm`` (the density of
:math:`T`, not of :math:`\\log T`) and from mpmath in the far tails; the tilted integrals by adaptive quadrature of
the textbook laws (``survival_reference``), to 1e-8, for every row kind (event, right-, left-, narrow and wide
interval), cavities 30 standard deviations either side of the row, cavity variances 1e-4 to 1e4, powers 1, 0.5,
0.3 and shapes 0.2 to 5; the hyperparameter's gradient by central differences of quadrature's log Z.  The
predictive, the band and the median are in ``test_survival_predictive.py``.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from relaxep.likelihoods.aft import LogLogisticAFT, LogNormalAFT, WeibullAFT
from survival_reference import tilted_reference

INF = np.inf
ROWS = {
    "event": (1.0, 1.0),
    "right": (1.0, INF),
    "left": (-INF, 1.0),
    "narrow": (1.0, 1.001),
    "wide": (-1.0, 3.0),
}


def make(kind: str, hyper: float):
    """The likelihood and its noise scale sigma on the log-time axis."""
    if kind == "weibull":
        return WeibullAFT(shape=hyper), 1.0 / hyper
    if kind == "loglogistic":
        return LogLogisticAFT(shape=hyper), 1.0 / hyper
    return LogNormalAFT(sigma=hyper), hyper


def _cases(hypers, variances, offsets, powers=(1.0, 0.5, 0.3), every_power=True):
    """(shape, row kind, row, cavity mean, variance, power): cavities ``offset`` sds from the row's log-time 1;
    each at every power, or (``every_power=False``) the powers in turn."""
    out = []
    for hyper in hypers:
        for k, ((name, row), v, d) in enumerate(itertools.product(ROWS.items(), variances, offsets)):
            for u in powers if every_power else (powers[k % len(powers)],):
                out.append((hyper, name, row, 1.0 + d * math.sqrt(v), v, u))
    return out


def _quad(kind, sigma, row, m, v, u):
    with warnings.catch_warnings():  # quad's roundoff notes at epsrel 1e-13
        warnings.simplefilter("ignore")
        return tilted_reference(kind, sigma, row, m, v, u)


def _check_grid(kind, cases):
    """log Z, the tilted mean and variance against quadrature; returns the worst errors per row kind."""
    worst = {}
    for hyper in sorted({c[0] for c in cases}):
        lik, sigma = make(kind, hyper)
        for u in sorted({c[5] for c in cases}):
            sub = [c for c in cases if c[0] == hyper and c[5] == u]
            y = np.array([c[2] for c in sub])
            m, v = np.array([c[3] for c in sub]), np.array([c[4] for c in sub])
            lz = lik.log_z(y, m, v, u)
            tm, tv = lz.moments(m, v)
            for i, (_, name, row, mi, vi, _) in enumerate(sub):
                log_z, mean, var = _quad(kind, sigma, row, mi, vi, u)[:3]
                err = (
                    abs(lz.log_z[i] - log_z) / (1.0 + 1e-2 * abs(log_z)),  # abs 1e-8, relative 1e-10 past 100
                    abs(tm[i] - mean) / max(1.0, math.sqrt(vi)),  # in cavity sds past 1
                    abs(tv[i] - var) / var,
                )
                assert max(err) < 1e-8, (kind, hyper, name, mi, vi, u, err, lz.log_z[i], log_z, tm[i], mean)
                worst[name] = np.maximum(worst.get(name, 0.0), err)
    return worst


@pytest.mark.parametrize(
    ("kind", "hypers"), [("weibull", (0.2, 5.0)), ("loglogistic", (0.5, 3.0)), ("lognormal", (0.2, 5.0))]
)
def test_tilted_moments_match_quadrature(kind, hypers):
    """Every row kind, cavities 30 sds below, at and above the row, variances 1e-4, 1, 1e4, powers 1, 0.5, 0.3."""
    _check_grid(kind, _cases(hypers, (1e-4, 1.0, 1e4), (-30.0, 0.0, 30.0), every_power=False))


def _near_far_step(sigma: float, v: float, d: float) -> bool:
    """The sinh rule's known limit: a censoring step of width sigma a few cavity sds (0 < |d| <= 5) from a cavity
    far wider than it (sd / sigma >= 50, or sigma <= 0.5 with variance >= 1e2) needs more nodes than the cap
    (errors up to 1e-4 on log Z; the xfail below)."""
    wide = math.sqrt(v) / sigma >= 50.0 or (sigma <= 0.5 and v >= 1e2)
    return wide and 0 < abs(d) <= 5


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["weibull", "loglogistic", "lognormal"])
def test_tilted_moments_match_quadrature_everywhere(kind):
    """The big grid: shapes (sigmas) 0.2, 0.5, 1, 2, 5; variances 1e-4 to 1e4; offsets -30 to 30 sds."""
    cases = []
    for hyper in (0.2, 0.5, 1.0, 2.0, 5.0):
        sigma = make(kind, hyper)[1]
        cases += [
            c
            for c in _cases((hyper,), (1e-4, 1e-2, 1.0, 1e2, 1e4), (-30.0, -10.0, -3.0, 0.0, 3.0, 10.0, 30.0))
            if not _near_far_step(sigma, c[4], (c[3] - 1.0) / math.sqrt(c[4]))
        ]
    worst = _check_grid(kind, cases)
    print(kind, {k: [f"{e:.1e}" for e in v] for k, v in worst.items()})


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="sinh rule's node cap: a sharp step 3 cavity sds out, variance 1e4")
def test_known_limit_sharp_step_far_in_a_wide_cavity():
    """Right-censored at 1, sigma 0.2, cavity N(301, 1e4): 4096 nodes on one sinh map cannot sample a step of
    width 0.2 at 300 from the mode (errors 7e-6 on log Z); kept here so a fix shows."""
    _check_grid("lognormal", [(0.2, "right", ROWS["right"], 301.0, 1e4, 1.0)])


# ------------------------------------------------------------ the rows' likelihoods against scipy.stats
F = np.array([-0.5, 0.3, 1.0, 2.5])  # (farther out: mpmath below; scipy underflows)


@pytest.mark.parametrize("hyper", [0.2, 1.3, 5.0])
def test_log_lik_is_scipys_time_density_and_masses(hyper):
    """Events: the density of T (not of log T); right: logsf; left: logcdf; interval: log(cdf(u) - cdf(l))."""
    t, t_lo, t_hi = 2.0, 1.5, 4.0
    laws = {
        "weibull": lambda f: stats.weibull_min(c=hyper, scale=np.exp(f)),
        "loglogistic": lambda f: stats.fisk(c=hyper, scale=np.exp(f)),
        "lognormal": lambda f: stats.lognorm(s=hyper, scale=np.exp(f)),
    }
    lt, llo, lhi = math.log(t), math.log(t_lo), math.log(t_hi)
    rows = np.array([[lt, lt], [lt, INF], [-INF, lt], [llo, lhi]])
    for kind, law in laws.items():
        lik = make(kind, hyper)[0]
        for f in F:
            got = lik.log_lik(rows, np.full(4, f))
            d = law(f)
            # the interval from the smaller tail's difference (scipy's cdf(u) - cdf(l) cancels near 1)
            mass = d.sf(t_lo) - d.sf(t_hi) if d.cdf(t_lo) > 0.5 else d.cdf(t_hi) - d.cdf(t_lo)
            want = [d.logpdf(t), d.logsf(t), d.logcdf(t), math.log(mass)]
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{kind} {hyper} f={f}")


def _mp_log_lik(kind, sigma, lo, hi, f):
    """The row's log-likelihood in 60-digit arithmetic (mpmath), from the distribution functions of T."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60

    def sf(b):  # S(z) in 60 digits and an unbounded exponent: e^{-e^{40}} is no 0 here
        if b == -INF:
            return mp.mpf(1)
        if b == INF:
            return mp.mpf(0)
        z = (mp.mpf(b) - f) / sigma
        if kind == "weibull":
            return mp.exp(-mp.exp(z))
        if kind == "loglogistic":
            return 1 / (1 + mp.exp(z))
        return mp.ncdf(-z)

    def cdf(b):
        if b in (-INF, INF):
            return 1 - sf(b)
        z = (mp.mpf(b) - f) / sigma
        if kind == "weibull":
            return -mp.expm1(-mp.exp(z))
        if kind == "loglogistic":
            return 1 / (1 + mp.exp(-z))
        return mp.ncdf(z)

    return float(mp.log(sf(lo) - sf(hi) if lo > f else cdf(hi) - cdf(lo)))


@pytest.mark.parametrize("kind", ["weibull", "loglogistic", "lognormal"])
def test_censored_rows_far_in_the_tails_match_mpmath(kind):
    """Where 1 - F or the naive difference F(u) - F(l) underflows or cancels: z from -40 to 40, and a narrow
    interval far in either tail."""
    lik, sigma = make(kind, 1.0 if kind != "weibull" else 2.0)
    rows = [(1.0, INF), (-INF, 1.0), (1.0, 1.05), (1.0, 1.0 + 1e-6), (-3.0, 5.0)]
    for (lo, hi), z in itertools.product(rows, (-40.0, -12.0, 0.0, 12.0, 40.0)):
        if kind == "weibull" and z > 6.0 and lo > -INF:  # e^(z) in the exponent: log S = -e^{2 z} (exact below)
            z = 6.0
        f = 1.0 - z * sigma
        got = float(lik.log_lik(np.array([[lo, hi]]), np.array([f]))[0])
        want = _mp_log_lik(kind, sigma, lo, hi, f)
        assert got == pytest.approx(want, rel=1e-9 if hi - lo > 1e-3 else 1e-6, abs=1e-12), (lo, hi, z, got, want)


def test_weibull_far_right_tail_is_minus_the_cumulative_hazard():
    """log S(t | f) = -(t e^{-f})^k exactly, however far: 1e200 does not round to -inf."""
    lik = WeibullAFT(shape=5.0)
    f = np.array([1.0 - 90.0, 1.0 - 140.0])
    got = lik.log_lik(np.array([[1.0, INF]] * 2), f)
    np.testing.assert_allclose(got, -np.exp(5.0 * (1.0 - f)), rtol=1e-13)
