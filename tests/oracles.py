"""Independent ground truth for the tests: adaptive 1-D quadrature and exact integrals.

Nothing here imports relaxep's numerics; the tests compare relaxep against these.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import integrate, stats
from scipy.special import expit

RTOL = 1e-8  # quadrature-level agreement for closed forms


def lik_fn(name: str, eps: float = 0.0, scale: float = 1.0):
    """``t(g)`` as a plain function of the folded latent, by likelihood name."""
    if name == "step":
        return lambda g: eps + (1.0 - 2.0 * eps) * (np.asarray(g) >= 0)
    if name == "probit":
        return lambda g: stats.norm.cdf(g)
    if name == "noisy-probit":
        return lambda g: eps + (1.0 - 2.0 * eps) * stats.norm.cdf(np.asarray(g) / scale)
    if name == "logistic":
        return expit
    # regression likelihoods p(y = 1 | g): eps is the noise variance / the degrees of freedom
    # (written out: quad calls them point by point, and scipy.stats is slow per call)
    if name == "gaussian":
        return lambda g: np.exp(-0.5 * (1.0 - g) ** 2 / eps) / np.sqrt(2 * np.pi * eps)
    if name == "student-t":
        const = math.lgamma((eps + 1) / 2) - math.lgamma(eps / 2) - 0.5 * math.log(eps * math.pi) - math.log(scale)
        return lambda g: np.exp(const - 0.5 * (eps + 1) * np.log1p(((1.0 - g) / scale) ** 2 / eps))
    if name == "laplace":
        return lambda g: np.exp(-np.abs(1.0 - g) / scale) / (2 * scale)
    raise KeyError(name)


def tilted_quad(t, mean: float, var: float, power: float = 1.0, extra=None):
    """``log Z``, tilted mean and variance (and ``E[extra(g)]``) by adaptive quadrature.

    The integrand is evaluated relative to its value at a well-placed centre so that
    tiny normalisers (cavities far in the tails) keep full relative precision.
    """
    sd = np.sqrt(var)
    grid = np.linspace(mean - 40 * sd, mean + 40 * sd, 20001)
    with np.errstate(divide="ignore"):
        logp = power * np.log(np.maximum(t(grid), 0.0)) + stats.norm.logpdf(grid, mean, sd)
    centre = grid[np.argmax(logp)]
    ref = logp.max()
    lo, hi = grid[0], grid[-1]
    pts = sorted({centre, 0.0} if lo < 0 < hi else {centre})

    def f(g, k):
        with np.errstate(divide="ignore", under="ignore"):
            lp = power * np.log(max(float(t(g)), 0.0)) + stats.norm.logpdf(g, mean, sd) - ref
        return np.exp(lp) * (g - centre) ** k if np.isfinite(lp) else 0.0

    kw = dict(points=pts, epsabs=0.0, epsrel=1e-13, limit=2000)
    z0 = integrate.quad(f, lo, hi, args=(0,), **kw)[0]
    m1 = integrate.quad(f, lo, hi, args=(1,), **kw)[0] / z0
    m2 = integrate.quad(f, lo, hi, args=(2,), **kw)[0] / z0
    out = [np.log(z0) + ref, centre + m1, m2 - m1**2]
    if extra is not None:

        def fe(g):
            weight = f(g, 0)
            return weight * extra(g) if weight > 0 else 0.0

        out.append(integrate.quad(fe, lo, hi, **kw)[0] / z0)
    return tuple(out)


def gaussian_kl_quad(t, mean: float, var: float, proj_mean: float, proj_var: float) -> float:
    """KL(p || N(proj_mean, proj_var)) for ``p ∝ t(g) N(g | mean, var)`` by quadrature."""
    log_z = tilted_quad(t, mean, var)[0]
    sd = np.sqrt(var)

    def integrand(g):
        tg = float(t(g))
        if tg <= 0.0:
            return 0.0
        logp = np.log(tg) + stats.norm.logpdf(g, mean, sd) - log_z
        return np.exp(logp) * (logp - stats.norm.logpdf(g, proj_mean, np.sqrt(proj_var)))

    lo, hi = mean - 40 * sd, mean + 40 * sd
    pts = [0.0] if lo < 0 < hi else None
    return integrate.quad(integrand, lo, hi, points=pts, epsabs=1e-14, epsrel=1e-12, limit=2000)[0]


def exact_linear_step_posterior(X: np.ndarray, y: np.ndarray, eps: float):
    """Exact posterior of ``w`` for ``f = X w``, ``w ~ N(0, I_2)``, step likelihood with noise ``eps``.

    The likelihood depends on ``w`` only through its direction, so in polar
    coordinates it is piecewise constant in the angle with breaks where
    ``x_i . u(theta) = 0``; the radial integrals are closed form
    (``int r e^{-r^2/2} = 1``, ``int r^2 e^{-r^2/2} = sqrt(pi/2)``, ``int r^3 e^{-r^2/2} = 2``),
    and the angular ones are integrals of trigonometric polynomials over arcs.
    Returns ``(mean_w, cov_w, log Z)``.
    """
    angles = np.arctan2(X[:, 1], X[:, 0])
    breaks = np.sort(np.mod(np.concatenate([angles + np.pi / 2, angles - np.pi / 2]), 2 * np.pi))
    breaks = np.concatenate([breaks, [breaks[0] + 2 * np.pi]])
    z = 0.0
    m = np.zeros(2)
    s = np.zeros((2, 2))
    for a, b in itertools.pairwise(breaks):
        if b - a <= 0:
            continue
        mid = 0.5 * (a + b)
        u = np.array([np.cos(mid), np.sin(mid)])
        lik = np.prod(np.where(y * (X @ u) >= 0, 1.0 - eps, eps))
        d = b - a
        z += lik * d
        m += lik * np.array([np.sin(b) - np.sin(a), np.cos(a) - np.cos(b)])
        s2 = 0.25 * (np.sin(2 * b) - np.sin(2 * a))
        sc = 0.5 * (np.sin(b) ** 2 - np.sin(a) ** 2)
        s += lik * np.array([[d / 2 + s2, sc], [sc, d / 2 - s2]])
    z_norm = z / (2 * np.pi)
    mean = np.sqrt(np.pi / 2) * m / (2 * np.pi) / z_norm
    second = 2.0 * s / (2 * np.pi) / z_norm
    return mean, second - np.outer(mean, mean), np.log(z_norm)


def orthant_log_evidence(K: np.ndarray, y: np.ndarray, likelihood: str, eps: float = 0.0) -> float:
    """Exact ``log p(y)`` for probit or noisy-step likelihoods via Gaussian orthant probabilities.

    Probit: ``p(y) = P(y_i (f_i + e_i) > 0 for all i)``, ``e ~ N(0, I)``.
    Step: ``p(y) = sum_S eps^{n-|S|} (1-2 eps)^{|S|} P(y_i f_i > 0, i in S)``.
    """
    n = len(y)
    Y = np.diag(y)
    if likelihood == "probit":
        cov = Y @ (K + np.eye(n)) @ Y
        return float(np.log(_orthant(cov)))
    total = 0.0
    cov = Y @ K @ Y
    for r in range(n + 1):
        for subset in itertools.combinations(range(n), r):
            idx = list(subset)
            if not idx:
                prob = 1.0
            elif len(idx) == 1:
                prob = 0.5
            else:
                prob = _orthant(cov[np.ix_(idx, idx)])
            total += eps ** (n - r) * (1 - 2 * eps) ** r * prob
    return float(np.log(total))


def _orthant(cov: np.ndarray) -> float:
    """P(v <= 0) for v ~ N(0, cov), by scipy's Genz quadrature."""
    d = cov.shape[0]
    return float(stats.multivariate_normal.cdf(np.zeros(d), np.zeros(d), cov, maxpts=10**6, abseps=1e-10, releps=1e-10))


def regression_tilted_quad(log_lik, y: float, mean: float, var: float, power: float, width: float, extras=()):
    """``log Z``, mean, variance, third and fourth cumulants (and ``E[extra(f)]``) of
    ``p(y|f)^power N(f | mean, var)`` by ``scipy.integrate.quad``, for a likelihood of width ``width``
    peaked at ``y``; ``log_lik`` and the extras are scalar functions (plain ``math``: quad calls them
    point by point).

    The range covers ``mean +- 42 sd`` and ``y +- 42 width``; ``points`` are ``y``, ``mean`` and a
    geometric ladder around both (the tilted of a heavy-tailed likelihood lives on both scales); the
    integrand is taken relative to its largest value on a grid, so tiny normalisers keep their
    relative precision, and moments are of ``(f - c)`` about that grid's mode ``c``.
    """
    sd = math.sqrt(var)
    lo, hi = min(mean - 42 * sd, y - 42 * width), max(mean + 42 * sd, y + 42 * width)
    pts = {mean, y}
    for centre, w in ((y, width), (mean, sd)):
        for k in range(-2, 40, 3):
            pts.update((centre - w * 2.0**k, centre + w * 2.0**k))
    pts = sorted(p for p in pts if lo < p < hi)
    half_log_2pi_var = 0.5 * math.log(2 * math.pi * var)

    def log_integrand(f):
        return power * log_lik(f) - 0.5 * (f - mean) ** 2 / var - half_log_2pi_var

    grid = [*pts, *np.linspace(lo, hi, 2001)]
    values = [log_integrand(f) for f in grid]
    k_max = int(np.argmax(values))
    ref, centre = values[k_max], grid[k_max]

    def moment(k, extra=None):
        def f(x):
            w = math.exp(log_integrand(x) - ref)
            return w * (x - centre) ** k if extra is None else (w * extra(x) if w > 0 else 0.0)

        return integrate.quad(f, lo, hi, points=pts, epsabs=0.0, epsrel=1e-12, limit=4000)[0]

    z = moment(0)
    m1, m2, m3, m4 = (moment(k) / z for k in range(1, 5))
    c2 = m2 - m1**2
    c3 = m3 - 3 * m1 * m2 + 2 * m1**3
    c4 = m4 - 4 * m1 * m3 + 6 * m1**2 * m2 - 3 * m1**4
    return {
        "log_z": math.log(z) + ref,
        "mean": centre + m1,
        "var": c2,
        "k3": c3,
        "k4": c4 - 3 * c2**2,
        "extras": [moment(0, e) / z for e in extras],
    }
