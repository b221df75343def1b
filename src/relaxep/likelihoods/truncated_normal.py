r"""The probit mass of an interval, :math:`P = \Phi(h) - \Phi(l)`, and the truncated normal's moments.

The ordinal probit's likelihood and its ``log Z`` at power 1 (:mod:`relaxep.likelihoods.ordinal`) are such
masses.  :math:`\log P` is :math:`\log\Phi(h) + \log(1 - \Phi(l)/\Phi(h))` (``log_ndtr``, ``expm1``), or its
mirror image :math:`\Phi(-l) - \Phi(-h)` when both ends lie in the upper tail; the ratios :math:`N(z)/P` come
from Mills' ratio by ``erfcx``, and :math:`N(l) - N(h)` from one of them times ``expm1`` of the exponents'
difference: no :math:`0/0` and no cancellation for any :math:`|z|`.  :func:`ordinal_log_z_on` is the same
arithmetic in another array library's namespace (no boolean indexing and no branch on the data: every choice by
``xp.where``, its unused side evaluated on a finite stand-in), for the ordinal probit's ``log Z`` on a device.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
from scipy.special import log_ndtr

from relaxep._numerics import normal_cdf_ratio
from relaxep._typing import Array
from relaxep._xp import normal_tail

__all__ = ["interval_terms", "ordinal_log_z_on"]

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


def ordinal_log_z_on(
    xp: ModuleType, cuts: Array, sigma: float, y: Array, mean: Array, var: Array
) -> tuple[Array, Array, Array]:
    r"""The ordinal probit's :math:`\log Z` and its derivatives in :math:`\mu` at power 1, in the namespace ``xp``.

    With :math:`S = \sqrt{\sigma^2 + v}`, class :math:`k = y` the interval :math:`(b_{k-1}, b_k]`
    (:math:`b_{-1} = -\infty`, :math:`b_{K-1} = \infty`) and :math:`l = (b_{k-1} - \mu)/S`,
    :math:`h = (b_k - \mu)/S`,

    .. math::
        \log Z = \log(\Phi(h) - \Phi(l)),\qquad \partial_\mu\log Z = D/S,\qquad
        \partial^2_\mu\log Z = (C - D^2)/S^2,

    :math:`D`, :math:`C - D^2` as :func:`interval_terms` gives them, digit for digit: :math:`\log\Phi` and
    :math:`N/\Phi` at both ends and at the Gauss-Legendre nodes of a narrow interval from one call of
    :func:`~relaxep._xp.normal_tail`.  ``cuts`` are the cut-points (numpy), ``y`` the class indices (floats).
    """
    y, mean, var = xp.broadcast_arrays(y, mean, var)
    lo_b, hi_b = xp.full_like(mean, -np.inf), xp.full_like(mean, np.inf)
    for j, b in enumerate(np.asarray(cuts, dtype=float).tolist()):
        lo_b, hi_b = xp.where(y == j + 1.0, b, lo_b), xp.where(y == float(j), b, hi_b)
    s = xp.sqrt(sigma**2 + var)
    lo, hi = (lo_b - mean) / s, (hi_b - mean) / s
    upper = lo > 0.0  # both ends in the upper tail: P = Phi(-lo) - Phi(-hi)
    a, c = xp.where(upper, -hi, lo), xp.where(upper, -lo, hi)  # P = Phi(c) - Phi(a), a <= 0 or c < 0
    finite_a, finite_c = xp.isfinite(a), xp.isfinite(c)
    narrow = c - a <= 1.0  # (both ends finite)
    a_n, c_n = xp.where(narrow, a, 0.0), xp.where(narrow, c, 0.0)
    half, centre = 0.5 * (c_n - a_n), 0.5 * (a_n + c_n)
    nodes = xp.stack([centre + half * float(x) for x in _GL_NODES], axis=-1)
    shape, n = tuple(mean.shape), int(np.prod(mean.shape))
    ends = [xp.reshape(xp.where(finite, v, 0.0), (n,)) for finite, v in ((finite_c, c), (finite_a, a))]
    log_cdf, ratio = normal_tail(xp, xp.concat([*ends, xp.reshape(nodes, (n * _GL_NODES.size,))]))
    log_c = xp.where(finite_c, xp.reshape(log_cdf[:n], shape), 0.0)  # (c = +inf: log 1)
    log_a = xp.where(finite_a, xp.reshape(log_cdf[n : 2 * n], shape), -np.inf)
    ratio_c = xp.where(finite_c, xp.reshape(ratio[:n], shape), 0.0)
    ratio_a = xp.reshape(ratio[n : 2 * n], shape)
    ratios = xp.reshape(ratio[2 * n :], (*shape, _GL_NODES.size))
    weights = xp.stack([half * float(w) for w in _GL_WEIGHTS], axis=-1)
    d = xp.where(narrow, -xp.sum(weights * ratios, axis=-1), log_a - log_c)  # log(Phi(a) / Phi(c)) <= 0
    mass = -xp.expm1(d)  # P / Phi(c)
    log_p = log_c + xp.log(mass)
    rho_c = ratio_c / mass
    rho_a = xp.where(finite_a, ratio_a * xp.exp(d) / mass, 0.0)
    r_lo, r_hi = xp.where(upper, rho_c, rho_a), xp.where(upper, rho_a, rho_c)
    finite_lo, finite_hi = xp.isfinite(lo), xp.isfinite(hi)
    lo_s, hi_s = xp.where(finite_lo, lo, 0.0), xp.where(finite_hi, hi, 0.0)
    t = 0.5 * (hi - lo) * (hi + lo)  # N(hi) / N(lo) = exp(-t); +-inf with an infinite end
    rising = t >= 0.0
    diff = xp.where(rising, -r_lo * xp.expm1(-xp.where(rising, t, 0.0)), r_hi * xp.expm1(xp.where(rising, 0.0, t)))
    width = xp.where(finite_lo & finite_hi, hi - lo, 0.0)  # (an infinite width meets a zero ratio only)
    by_lo = diff * (lo_s - diff) - xp.where(r_hi > 0.0, width * r_hi, 0.0)
    by_hi = diff * (hi_s - diff) - xp.where(r_lo > 0.0, width * r_lo, 0.0)
    curv = xp.where(finite_lo & (~finite_hi | (r_hi <= r_lo)), by_lo, by_hi)
    tail = ~finite_a & (c < -40.0)  # curv = -rho (c + rho) by the Mills ratio's series (interval_terms)
    inv = 1.0 / xp.where(tail, c, -40.0)
    series = -inv + 2.0 * inv**3 - 10.0 * inv**5 + 74.0 * inv**7
    curv = xp.where(tail, -rho_c * series, curv)
    return log_p, diff / s, curv / s**2
