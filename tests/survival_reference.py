"""Ground truth for the survival likelihoods' tests: each row's likelihood written out from the textbook laws, and
its tilted integrals by adaptive quadrature (scipy.integrate.quad), independent of relaxep's code.

An accelerated-failure-time row (Kalbfleisch & Prentice 2002, section 2.3): :math:`\\log T = f + \\sigma\\epsilon`,
:math:`z = (b - f)/\\sigma` at a log-time :math:`b`; :math:`\\epsilon` is minimum-Gumbel (Weibull), logistic
(log-logistic) or normal (log-normal).  An event at :math:`t = e^b` has the density of :math:`T`,
:math:`p_\\epsilon(z)/(\\sigma t)`; a censored row the mass :math:`F(z_u) - F(z_l)`, taken from the smaller tail
with ``log(-expm1(.))`` (exact for narrow intervals).  The tilted integrals :math:`\\int p(y|f)^u N(f|m, v)\\,df`
are split at the tilted mode (found by bounded Brent) and integrated to relative 1e-13 over the range where the
integrand is within :math:`e^{-90}` of its peak, with the peak factored out (so a log Z of -1e5 keeps its digits).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import integrate, optimize
from scipy.special import log_ndtr

__all__ = ["row_log_lik", "tilted_reference"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _exp(x: float) -> float:
    return math.exp(x) if x < 709.0 else math.inf


def _softplus(x: float) -> float:
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


# (log p, log S, log F) of the standardised noise, and its median
NOISE = {
    "weibull": (
        lambda z: z - _exp(z),
        lambda z: -_exp(z),
        lambda z: math.log(-math.expm1(-_exp(z))) if z > -700 else z,
        math.log(math.log(2.0)),
    ),
    "loglogistic": (
        lambda z: -z - 2.0 * _softplus(-z),
        lambda z: -_softplus(z),
        lambda z: -_softplus(-z),
        0.0,
    ),
    "lognormal": (
        lambda z: -0.5 * z * z - _LOG_SQRT_2PI,
        lambda z: float(log_ndtr(-z)),
        lambda z: float(log_ndtr(z)),
        0.0,
    ),
}


def _log_diff(big: float, small: float) -> float:
    """log(e^big - e^small), small <= big."""
    if small == -math.inf:
        return big
    return big + math.log(-math.expm1(small - big))


def row_log_lik(kind: str, sigma: float, lo: float, hi: float, f: float) -> float:
    """:math:`\\log p(y | f)` of the row ``[lo, hi]`` (log-times) under the AFT model ``kind`` with scale
    ``sigma`` on the log-time axis (module docstring)."""
    log_pdf, log_sf, log_cdf, median = NOISE[kind]
    if lo == hi:
        z = (lo - f) / sigma
        return log_pdf(z) - math.log(sigma) - lo
    z_lo = (lo - f) / sigma if np.isfinite(lo) else -math.inf
    z_hi = (hi - f) / sigma if np.isfinite(hi) else math.inf
    if z_hi == math.inf:
        return log_sf(z_lo)
    if z_lo == -math.inf:
        return log_cdf(z_hi)
    if z_lo > median:
        return _log_diff(log_sf(z_lo), log_sf(z_hi))
    return _log_diff(log_cdf(z_hi), log_cdf(z_lo))


def _extent(g, c: float, step: float, direction: float, drop: float = 90.0) -> float:
    """A distance from ``c`` beyond which the concave ``g`` is ``drop`` below ``g(c)``."""
    top, d = g(c), step
    while g(c + direction * d) > top - drop and d < 1e7:
        d *= 2.0
    return d


def tilted_reference(kind, sigma, row, m, v, u=1.0, extra=None, log_z_only=False):
    """``log Z`` of :math:`\\int p(y|f)^u N(f | m, v)\\,df` and the tilted central moments of orders 1 to 4
    (mean, variance, third, fourth), by ``quad``; ``extra(f)`` adds :math:`E[\\mathrm{extra}(f)]` at the end;
    ``log_z_only``: ``log Z`` alone."""
    lo, hi = float(row[0]), float(row[1])
    sd = math.sqrt(v)

    def g(f: float) -> float:
        return u * row_log_lik(kind, sigma, lo, hi, f) - 0.5 * (f - m) ** 2 / v

    ends = [x for x in (lo, hi) if np.isfinite(x)]
    a = min([m, *ends]) - 20.0 * (sd + sigma)
    b = max([m, *ends]) + 20.0 * (sd + sigma)
    c = optimize.minimize_scalar(lambda f: -g(f), bounds=(a, b), method="bounded", options={"xatol": 1e-12}).x
    top = g(c)
    step = min(sd, sigma)
    left, right = _extent(g, c, step, -1.0), _extent(g, c, step, 1.0)

    def moment(h) -> float:
        total = 0.0
        for x0, x1 in ((c - left, c), (c, c + right)):
            total += integrate.quad(lambda f: h(f) * math.exp(g(f) - top), x0, x1, epsabs=0, epsrel=1e-13, limit=400)[0]
        return total

    z0 = moment(lambda f: 1.0)
    log_z = top + math.log(z0) - 0.5 * math.log(2.0 * math.pi * v)
    if log_z_only:
        return log_z
    mean = c + moment(lambda f: f - c) / z0
    central = [moment(lambda f, k=k: (f - mean) ** k) / z0 for k in (2, 3, 4)]
    out = [log_z, mean, *central]
    if extra is not None:
        out.append(moment(lambda f: extra(f) * 1.0) / z0)
    return out
