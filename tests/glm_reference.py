"""Adaptive-quadrature references for the tilted integrals of the GLM likelihoods (binomial, beta, gamma,
zero-inflated and hurdle counts, asymmetric Laplace), written from their definitions with scipy.stats.

Nothing here imports relaxep: each log-likelihood is scipy's log pmf or log pdf at the link's mean (the beta's,
gamma's and Poisson's as scipy.stats' own ``_logpdf``/``_logpmf`` formulas, in scipy.special, without
scipy.stats' per-call argument handling inside quad; ``check_scipy_densities`` holds them to scipy.stats').
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, stats
from scipy.special import betaln, expit, gammaln, log_ndtr, xlog1py, xlogy

from oracles import quad


def binomial(k, n, link="logit"):
    """log pmf of k successes in n trials at the link's probability (scipy's, written in log space far out)."""
    return lambda f: _binom_far(k, n, np.asarray(f, dtype=float), link)


def _binom_far(k, n, f, link):
    norm = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
    up = -np.logaddexp(0.0, -f) if link == "logit" else log_ndtr(f)
    down = -np.logaddexp(0.0, f) if link == "logit" else log_ndtr(-f)
    return norm + (k * up if k else 0.0) + ((n - k) * down if n > k else 0.0)


def check_binomial_formula():
    """The log-space form above is the binomial log pmf at the link's probability, computed in 50-digit arithmetic
    by mpmath, to 1e-13 of the larger of it and log n! over latents -20 to 20, both links.  (scipy's
    ``binom.logpmf(k, n, expit(f))`` is no reference there: ``expit(20)`` rounds 1 - p, 1e-9 relatively off.)"""
    import mpmath

    f = np.linspace(-20, 20, 41)
    with mpmath.workdps(50):
        for link in ("logit", "probit"):
            for k, n in [(0, 3), (2, 7), (7, 7), (3, 5000)]:
                got = _binom_far(k, n, f, link)
                for fi, gi in zip(f, got, strict=True):
                    x = mpmath.mpf(float(fi))
                    p = 1 / (1 + mpmath.exp(-x)) if link == "logit" else mpmath.ncdf(x)
                    q = 1 / (1 + mpmath.exp(x)) if link == "logit" else mpmath.ncdf(-x)  # (1 - p, not rounded)
                    want = mpmath.log(mpmath.binomial(n, k)) + k * mpmath.log(p) + (n - k) * mpmath.log(q)
                    scale = max(1.0, abs(float(want)), float(gammaln(n + 1.0)))  # (the normaliser's cancellation)
                    assert abs(gi - float(want)) <= 1e-13 * scale, (link, k, n, fi, gi, want)


def _beta_logpdf(y, a, b):
    """scipy.stats.beta.logpdf for 0 < y < 1 and a, b > 0 (its ``_logpdf``)."""
    return xlog1py(b - 1.0, -y) + xlogy(a - 1.0, y) - betaln(a, b)


def _gamma_logpdf(y, shape, scale):
    """scipy.stats.gamma.logpdf(y, shape, scale=scale) for y > 0 (its ``_logpdf`` at y / scale, less log scale)."""
    x = y / scale
    return xlogy(shape - 1.0, x) - x - gammaln(shape) - np.log(scale)


def _poisson_logpmf(k, mu):
    """scipy.stats.poisson.logpmf (its ``_logpmf``)."""
    return xlogy(k, mu) - gammaln(k + 1) - mu


def check_scipy_densities():
    """The three formulas above are scipy.stats' densities, over latents far out on both sides."""
    f = np.linspace(-30.0, 30.0, 601)
    for y, precision in [(0.3, 5.0), (0.5, 300.0), (0.01, 2.0)]:
        mu, nu = expit(f), expit(-f)
        want = stats.beta.logpdf(y, mu * precision, nu * precision)
        assert np.allclose(_beta_logpdf(y, mu * precision, nu * precision), want, rtol=1e-13, atol=1e-13)
    for y, shape in [(1.0, 2.0), (0.2, 0.7), (5.0, 10.0)]:
        want = stats.gamma.logpdf(y, shape, scale=np.exp(f) / shape)
        assert np.allclose(_gamma_logpdf(y, shape, np.exp(f) / shape), want, rtol=1e-13, atol=1e-13)
    for k in (0, 1, 7):
        mu = np.exp(f)
        assert np.allclose(_poisson_logpmf(k, mu), stats.poisson.logpmf(k, mu), rtol=1e-13, atol=1e-13)


def beta(y, precision):
    def log_pdf(f):
        mu = expit(np.clip(f, -600, 600))
        return _beta_logpdf(y, mu * precision, expit(-np.clip(f, -600, 600)) * precision)

    return log_pdf


def gamma(y, shape):
    return lambda f: _gamma_logpdf(y, shape, np.exp(f) / shape)


def tilted(log_lik, mean, var, power, span=(-80.0, 80.0), extras=(), kinks=()):
    """log Z, mean and variance of p(y|f)^u N(f | mean, var), and tilted expectations of ``extras``: the global
    mode from a grid over the cavity and ``span``, refined; quad between where log h has fallen by 80, split at the
    mode and at the likelihood's ``kinks``."""
    s = np.sqrt(var)

    def h(f):
        with np.errstate(all="ignore"):
            value = power * log_lik(f) - 0.5 * (f - mean) ** 2 / var
        return (
            np.where(np.isfinite(value), value, -np.inf)
            if np.ndim(value)
            else (value if np.isfinite(value) else -np.inf)
        )

    grid = np.unique(np.concatenate([mean + s * np.linspace(-30, 30, 3001), np.linspace(*span, 8001)]))
    values = h(grid)
    j = int(np.argmax(values))
    lo, hi = grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)]
    mode = optimize.minimize_scalar(lambda f: -h(f), bounds=(lo, hi), method="bounded",
                                    options={"xatol": 1e-14 * (1 + abs(grid[j]))}).x  # fmt: skip
    top = h(mode)
    ends = []
    for side in (-1.0, 1.0):
        d = min(s, 1.0) * 1e-4
        while h(mode + side * d) > top - 80.0:
            d *= 1.2
        ends.append(mode + side * d)
    points = sorted({mode, *(k for k in kinks if ends[0] < k < ends[1])})

    def integral(g):
        return quad(lambda f: g(f) * np.exp(h(f) - top), ends[0], ends[1], points=points, epsabs=0.0,
                    epsrel=1e-13, limit=2000)  # fmt: skip

    z = integral(lambda f: 1.0)
    shift = integral(lambda f: f - mode) / z
    t_var = integral(lambda f: (f - mode - shift) ** 2) / z
    more = [integral(g) / z for g in extras]
    return (np.log(z) + top - 0.5 * np.log(2.0 * np.pi * var), mode + shift, t_var, *more)


def zero_modified(y, offset, pi, dispersion=None, hurdle=False):
    """log p of a zero-inflated or hurdle count (scipy's Poisson or NB2 pmfs) at eta = f + offset."""

    def count_logpmf(k, eta):
        if dispersion is None:
            return _poisson_logpmf(k, np.exp(eta))
        # NB2 in log space (scipy's nbinom at p = r / (r + mu) loses 1 - p's digits for a tiny mu)
        r, log_r = dispersion, np.log(dispersion)
        norm = gammaln(k + r) - gammaln(r) - gammaln(k + 1.0)
        both = np.logaddexp(log_r, eta)
        return norm + r * (log_r - both) + (k * (eta - both) if k else 0.0)

    def log_pmf(f):
        eta = np.asarray(f, dtype=float) + offset
        with np.errstate(all="ignore"):
            if hurdle:
                if y == 0:
                    return np.full(np.shape(eta), np.log(pi))
                return np.log1p(-pi) + count_logpmf(y, eta) - np.log(-np.expm1(count_logpmf(0, eta)))
            if y == 0:
                return np.logaddexp(np.log(pi), np.log1p(-pi) + count_logpmf(0, eta))
            return np.log1p(-pi) + count_logpmf(y, eta)

    return log_pmf


def asymmetric_laplace(y, tau, scale):
    """log p of the asymmetric Laplace, the check loss written out."""

    def log_pdf(f):
        r = (y - np.asarray(f, dtype=float)) / scale
        return np.log(tau * (1 - tau) / scale) - r * (tau - (r < 0))

    return log_pdf
