r"""The probit mass of an interval, :math:`P = \Phi(h) - \Phi(l)`, and the truncated normal's moments.

The ordinal probit's likelihood and its ``log Z`` at power 1 (:mod:`relaxep.likelihoods.ordinal`) are such
masses.  :math:`\log P` is :math:`\log\Phi(h) + \log(1 - \Phi(l)/\Phi(h))` (``log_ndtr``, ``expm1``), or its
mirror image :math:`\Phi(-l) - \Phi(-h)` when both ends lie in the upper tail; the ratios :math:`N(z)/P` come
from Mills' ratio by ``erfcx``, and :math:`N(l) - N(h)` from one of them times ``expm1`` of the exponents'
difference: no :math:`0/0` and no cancellation for any :math:`|z|`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr

from relaxep._numerics import normal_cdf_ratio
from relaxep._typing import Array

__all__ = ["interval_terms"]

# N/Phi is analytic in the strip |Im x| < 2.8 (the zeros of erfc), so 10 nodes reach rounding on intervals up to 1
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(10)


def interval_terms(lo: Array, hi: Array) -> tuple[Array, Array, Array, Array, Array, Array]:
    r"""For :math:`P = \Phi(h) - \Phi(l)`, :math:`l < h` (either infinite): :math:`\log P`,
    :math:`N(l)/P`, :math:`N(h)/P`, :math:`D = (N(l) - N(h))/P`, :math:`C = (l N(l) - h N(h))/P` and :math:`C - D^2`."""
    upper = lo > 0.0  # both ends in the upper tail: P = Phi(-lo) - Phi(-hi)
    a, c = np.where(upper, -hi, lo), np.where(upper, -lo, hi)  # P = Phi(c) - Phi(a), a <= 0 or c < 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_c = log_ndtr(c)
        d = np.asarray(log_ndtr(a) - log_c)  # log(Phi(a) / Phi(c)) <= 0
        narrow = c - a <= 1.0  # there the difference of logs loses digits: d = -int_a^c N/Phi by Gauss-Legendre
        if np.any(narrow):
            a_n, c_n = a[narrow], c[narrow]
            half = 0.5 * (c_n - a_n)[..., None]
            ratios = normal_cdf_ratio(0.5 * (a_n + c_n)[..., None] + half * _GL_NODES)
            d[narrow] = -np.sum(half * _GL_WEIGHTS * ratios, axis=-1)
        mass = -np.expm1(d)  # P / Phi(c)
        log_p = log_c + np.log(mass)
        finite_a = np.isfinite(a)
        rho_c = normal_cdf_ratio(c) / mass
        rho_a = np.where(finite_a, normal_cdf_ratio(np.where(finite_a, a, 0.0)) * np.exp(d) / mass, 0.0)
        r_lo, r_hi = np.where(upper, rho_c, rho_a), np.where(upper, rho_a, rho_c)
        t = 0.5 * (hi - lo) * (hi + lo)  # N(hi) / N(lo) = exp(-t)
        diff = np.where(t >= 0.0, -r_lo * np.expm1(-t), r_hi * np.expm1(t))
        moment = np.where(np.isfinite(lo), lo * r_lo, 0.0) - np.where(np.isfinite(hi), hi * r_hi, 0.0)
        # moment - diff^2 = diff (lo - diff) - (hi - lo) r_hi = diff (hi - diff) - (hi - lo) r_lo: the form whose
        # last term is the smaller keeps the digits of a narrow interval (1 + moment - diff^2 is its variance)
        width = hi - lo
        by_lo = diff * (lo - diff) - np.where(r_hi > 0.0, width * r_hi, 0.0)
        by_hi = diff * (hi - diff) - np.where(r_lo > 0.0, width * r_lo, 0.0)
        curv = np.where(np.isfinite(lo) & (np.isinf(hi) | (r_hi <= r_lo)), by_lo, by_hi)
        # one end infinite, the other far in the lower tail (c < -40): curv = -rho (c + rho) cancels, and
        # c + rho = -1/c + 2/c^3 - 10/c^5 + 74/c^7 + O(c^-9) (the Mills ratio's series; relative error < 1e-10)
        tail = np.isinf(a) & (c < -40.0)
        if np.any(tail):
            inv = 1.0 / np.where(tail, c, -40.0)
            series = -inv + 2.0 * inv**3 - 10.0 * inv**5 + 74.0 * inv**7
            curv = np.where(tail, -rho_c * series, curv)
    return log_p, r_lo, r_hi, diff, moment, curv
