r"""The probit mass of an interval, :math:`P = \Phi(h) - \Phi(l)`, and the truncated normal's moments.

The ordinal probit's likelihood and its ``log Z`` at power 1 (:mod:`relaxep.likelihoods.ordinal`) are such
masses.  :math:`\log P` is :math:`\log\Phi(h) + \log(1 - \Phi(l)/\Phi(h))` (``log_ndtr``, ``expm1``), or its
mirror image :math:`\Phi(-l) - \Phi(-h)` when both ends lie in the upper tail; the ratios :math:`N(z)/P` come
from Mills' ratio by ``erfcx``, and :math:`N(l) - N(h)` from one of them times ``expm1`` of the exponents'
difference: no :math:`0/0` and no cancellation for any :math:`|z|`.  Written once in the array namespace (numpy on
the host; another array library's on its device, for the ordinal probit's ``log Z`` there): no boolean indexing
and no branch on the data, every choice by ``xp.where``, its unused side evaluated on a finite stand-in.
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np

from relaxep._typing import Array
from relaxep._xp import normal_tail

__all__ = ["class_interval", "interval_terms"]

# N/Phi is analytic in the strip |Im x| < 2.8 (the zeros of erfc), so 10 nodes reach rounding on intervals up to 1
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(10)


def class_interval(xp: ModuleType, cuts: Array, y: Array, like: Array) -> tuple[Array, Array]:
    r"""The ends :math:`b_{k-1}, b_k` of class :math:`k = y`'s interval (:math:`b_{-1} = -\infty`,
    :math:`b_{K-1} = \infty`), shaped as ``like``, chosen by ``xp.where`` (``cuts`` a numpy vector; ``y`` the class
    indices as floats, not checked)."""
    lo_b, hi_b = xp.full_like(like, -np.inf), xp.full_like(like, np.inf)
    for j, b in enumerate(np.asarray(cuts, dtype=float).tolist()):
        lo_b, hi_b = xp.where(y == j + 1.0, b, lo_b), xp.where(y == float(j), b, hi_b)
    return lo_b, hi_b


def interval_terms(xp: ModuleType, lo: Array, hi: Array) -> tuple[Array, Array, Array, Array, Array, Array]:
    r"""For :math:`P = \Phi(h) - \Phi(l)`, :math:`l < h` (either infinite), in the array namespace ``xp``:
    :math:`\log P`, :math:`N(l)/P`, :math:`N(h)/P`, :math:`D = (N(l) - N(h))/P`, :math:`C = (l N(l) - h N(h))/P`
    and :math:`C - D^2`.

    :math:`\log\Phi` and :math:`N/\Phi` at both ends and at the Gauss-Legendre nodes of a narrow interval come from
    one call of :func:`~relaxep._xp.normal_tail`; every choice is an ``xp.where`` whose unused side is evaluated on
    a finite stand-in (on numpy the same digits as evaluating each side only where it is chosen).
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _interval_terms(xp, *xp.broadcast_arrays(lo, hi))


def _interval_terms(xp: ModuleType, lo: Array, hi: Array) -> tuple[Array, Array, Array, Array, Array, Array]:
    upper = lo > 0.0  # both ends in the upper tail: P = Phi(-lo) - Phi(-hi)
    a, c = xp.where(upper, -hi, lo), xp.where(upper, -lo, hi)  # P = Phi(c) - Phi(a), a <= 0 or c < 0
    finite_a, finite_c = xp.isfinite(a), xp.isfinite(c)
    narrow = c - a <= 1.0  # there the difference of logs loses digits: d = -int_a^c N/Phi by Gauss-Legendre
    a_n, c_n = xp.where(narrow, a, 0.0), xp.where(narrow, c, 0.0)
    half, centre = 0.5 * (c_n - a_n), 0.5 * (a_n + c_n)
    nodes = xp.stack([centre + half * float(x) for x in _GL_NODES], axis=-1)
    shape, n = tuple(lo.shape), math.prod(lo.shape)
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
    moment = lo_s * r_lo - hi_s * r_hi
    # moment - diff^2 = diff (lo - diff) - (hi - lo) r_hi = diff (hi - diff) - (hi - lo) r_lo: the form whose last
    # term is the smaller keeps the digits of a narrow interval (1 + moment - diff^2 is its variance)
    width = xp.where(finite_lo & finite_hi, hi - lo, 0.0)  # (an infinite width meets a zero ratio only)
    by_lo = diff * (lo_s - diff) - xp.where(r_hi > 0.0, width * r_hi, 0.0)
    by_hi = diff * (hi_s - diff) - xp.where(r_lo > 0.0, width * r_lo, 0.0)
    curv = xp.where(finite_lo & (~finite_hi | (r_hi <= r_lo)), by_lo, by_hi)
    # one end infinite, the other far in the lower tail (c < -40): curv = -rho (c + rho) cancels, and
    # c + rho = -1/c + 2/c^3 - 10/c^5 + 74/c^7 + O(c^-9) (the Mills ratio's series; relative error < 1e-10)
    tail = ~finite_a & (c < -40.0)
    inv = 1.0 / xp.where(tail, c, -40.0)
    series = -inv + 2.0 * inv**3 - 10.0 * inv**5 + 74.0 * inv**7
    curv = xp.where(tail, -rho_c * series, curv)
    return log_p, r_lo, r_hi, diff, moment, curv
