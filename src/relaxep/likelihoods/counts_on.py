r"""The count likelihoods' tilted integrals with fixed sizes, in any array library: on the device.

:class:`~relaxep.likelihoods.counts.CountLikelihood` integrates :math:`p(y | \eta)^u N(\eta | \mu, s^2)`,
:math:`\eta = f + o`, on numpy by a mode-centred sinh rule whose Newton searches stop when they have converged
and whose node count (64 to 8192) is set by the widest site of a group: reads of the data.  The rule here makes
none, so that a parallel EP sweep (:mod:`relaxep.inference.device_ep`) runs without reading anything back.  A
different algorithm by design, not a copy: the family's one tilted integral,
:meth:`CountLikelihood._log_z_in <relaxep.likelihoods.counts.CountLikelihood._log_z_in>`, takes numpy's adaptive rule
on the host and this one on another array library (:func:`relaxep._xp.adaptive_or_fixed`).  With
:math:`l(\eta) = \log p(y | \eta)` (log-concave) and :math:`h(\eta) = u\,l(\eta) - (\eta - \mu)^2/(2s^2)`:

1. **The mode** :math:`\hat\eta` of :math:`h`: the Poisson's in closed form up to the Lambert-type equation
   :math:`e^\omega + \omega = L`, :math:`L = \log(s^2u) + \mu + s^2uy`, :math:`\hat\eta = \omega - \log(s^2u)`
   (:math:`h' = 0` is :math:`u(y - e^\eta) = (\eta - \mu)/s^2`), by :data:`LAMBERT_STEPS` Newton steps from
   :math:`\omega_0 = \log L` (:math:`L > 1`) or :math:`L`, right of the root, where Newton on the convex
   :math:`e^\omega + \omega` decreases monotonically to it, for cavities at any distance; the negative
   binomial's (:math:`l'` bounded by :math:`-r` and :math:`y`) by :data:`MODE_STEPS` Newton steps on numpy's
   bracket between :math:`\mu`, the likelihood's peak :math:`\log y` and :math:`\mu + s^2u\,l'(\mu)`, bisection
   where a step leaves it or does not halve the last (rtsafe: Newton may cycle about an inflection of
   :math:`l'`).  The Laplace width :math:`\ell = (1/s^2 - u\,l''(\hat\eta))^{-1/2}`.
2. **The reaches** :math:`R_\pm`, where :math:`h` has fallen by :math:`T = 40` below the mode on each side: the
   fall :math:`H(d)` is convex with :math:`H(0) = H'(0) = 0` and :math:`H'' \ge 1/s^2`, so Newton from the bound
   :math:`\sqrt{2T}s` (for the Poisson's right side :math:`\sqrt{2T}\ell`, its curvature growing there) stays
   above the root; :data:`REACH_STEPS` steps (bisection where Newton would not halve its last step), the upper
   end of the bracket kept: a valid reach whether or not it has converged.
3. **Two centres.**  Where the likelihood bends (:math:`-u\,l'' \ge 0.01`, numpy's criterion) its analytic
   continuation grows off the real axis (:math:`|e^{-ue^{\eta + i\theta}}| = e^{-ue^\eta\cos\theta}`), and a
   trapezoid or Gauss rule needs nodes well under 1 apart there; a cavity wider than the likelihood with its mode
   in the flat part (a zero count under a wide cavity) puts that wall many :math:`\ell` from the mode, still
   carrying mass.  So the rule takes a second centre: the point :math:`c_b` of the bending interval nearest the
   mode, within the reaches (the mode itself where it lies in the interval; for a negative binomial whose
   curvature stays below 0.01, the point :math:`\log r`: its kink, slight, still bends a wide tilted), width
   :math:`\min(\ell, 1)`; then the
   two-centre rule of :mod:`relaxep.likelihoods.panels_on`, :data:`PANEL_NODES` Gauss-Legendre nodes on each of
   its four panels, from :math:`\min(\hat\eta, c_b) - R_-` to :math:`\max(\hat\eta, c_b) + R_+`.
4. **The sums**, in log space, the nodes as offsets :math:`d_k` from the mode (full precision far from 0):
   :math:`\log Z = u\log C_y + \log\sum_k J_k e^{u\,l_0(\hat\eta + d_k) - (\hat\eta - \mu + d_k)^2/(2s^2)} -
   \tfrac12\log(2\pi s^2)`, :math:`C_y` the count's normaliser (:math:`1/y!` for the Poisson, by
   :func:`lgamma_on`) and :math:`l_0 = l - \log C_y`; :math:`\partial_\mu\log Z = (\hat\eta - \mu + \bar d)/s^2`,
   :math:`\partial^2_\mu\log Z = (\operatorname{Var} d - s^2)/s^4`, or, for a cavity narrower than the likelihood
   (:math:`s^2u|l''(\hat\eta)| < 1`, where those differences cancel), :math:`E[u\,l']` and
   :math:`E[u\,l''] + \operatorname{Var}[u\,l']` (numpy's choice).

Accuracy (relative errors of :math:`\log Z` and its two derivatives, each against its own scale where it passes
near zero: 1, :math:`\sqrt{\hat v}/s^2`, :math:`\hat v/s^4`; ``tests/test_device_robust.py``), in the box of
counts 0 to 1000, log exposures -3 to 3, :math:`10^{-3} \le s^2 \le 10^3`, cavity means up to :math:`50s` from
:math:`\log\max(y, 1)`, :math:`u \in \{1, 0.5, 0.1\}`: against numpy's adaptive rule at most 2e-13 (Poisson) and
1.3e-10 (negative binomial, ``r`` from 0.1 to 300), against itself with 200 nodes a panel likewise, against
``scipy.integrate.quad`` at most 5e-12, all below :data:`ERROR_BOUND`.  For a zero count under a cavity mean
beyond about :math:`\eta = 67` or below :math:`-700` numpy's Poisson rule overflows (its bracket holds
:math:`e^\mu`) and answers garbage or NaN; this one stays finite there and agrees with ``quad``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Protocol

import numpy as np

from relaxep._typing import Array
from relaxep.likelihoods._panels import split_gap
from relaxep.likelihoods.base import TiltedLogZ
from relaxep.likelihoods.panels_on import two_centre_rule_on

__all__ = [
    "ERROR_BOUND",
    "LAMBERT_STEPS",
    "MODE_STEPS",
    "PANEL_NODES",
    "REACH_STEPS",
    "CountModelOn",
    "bracketed_mode_on",
    "count_log_z_on",
    "lgamma_on",
    "poisson_mode_on",
    "split_targets_on",
]

#: Gauss-Legendre nodes on each of the four panels
PANEL_NODES = 64
#: Newton steps for the Poisson's mode (from the right of the root: monotone, quadratic)
LAMBERT_STEPS = 12
#: safeguarded Newton steps for the negative binomial's mode
MODE_STEPS = 40
#: safeguarded Newton steps for each reach
REACH_STEPS = 20
#: the measured bound (relative error of log Z and of its derivatives, in the box of the tests)
ERROR_BOUND = 1e-8
_TAIL = 40.0  # the rule covers the tilted down to exp(-40) of its density at the mode (numpy's)
_BEND = 1e-2  # -u l'' beyond this: the likelihood bends (numpy's BEND_CURVATURE)
_HALF_LOG_2PI = 0.5 * float(np.log(2.0 * np.pi))
# Stirling's series for log Gamma(z), z >= 10: coefficients of z^-1, z^-3, ..., z^-13 (B_2k / (2k (2k - 1)))
_STIRLING = (1.0 / 12.0, -1.0 / 360.0, 1.0 / 1260.0, -1.0 / 1680.0, 1.0 / 1188.0, -691.0 / 360360.0, 1.0 / 156.0)


class CountModelOn(Protocol):
    """What :func:`count_log_z_on` asks of a count likelihood, in the namespace ``xp`` (elementwise)."""

    tilted_on_device: bool
    curved_right: bool

    def _log_kernel_on(self, xp: ModuleType, count: Array, eta: Array) -> Array:
        r""":math:`l_0(\eta) = \log p(y | \eta) - \log C_y`, the part that depends on :math:`\eta`."""

    def _log_norm_on(self, xp: ModuleType, count: Array) -> Array:
        r""":math:`\log C_y`."""

    def _dlog_pmf_in(self, xp: ModuleType, count: Array, eta: Array) -> tuple[Array, Array]:
        r""":math:`l'(\eta)` and :math:`l''(\eta)`."""

    def _mode_on(self, xp: ModuleType, count: Array, mean: Array, var: Array, power: float) -> Array:
        r"""The tilted's mode :math:`\hat\eta` (step 1)."""

    def _bend_on(self, xp: ModuleType, count: Array, power: float) -> tuple[Array, Array]:
        r"""The interval where :math:`-u\,l'' \ge 0.01` (empty: ``lo > hi``)."""


def lgamma_on(xp: ModuleType, x: Array) -> Array:
    r""":math:`\log\Gamma(x)` for :math:`x > 0` in ``xp``: :math:`z = x + k \ge 10` (:math:`k \le 10` steps, the
    product :math:`x(x+1)\cdots(x+k-1)` divided out in one log), then Stirling's series
    :math:`(z - \tfrac12)\log z - z + \tfrac12\log 2\pi + \sum_{j=1}^{7} \frac{B_{2j}}{2j(2j-1)z^{2j-1}}`
    (its next term below 4e-17 at :math:`z = 10`)."""
    z, prod = x, xp.ones_like(x)
    for _ in range(10):
        small = z < 10.0
        prod = xp.where(small, prod * z, prod)
        z = xp.where(small, z + 1.0, z)
    inv2 = 1.0 / (z * z)
    series = xp.zeros_like(z)
    for c in reversed(_STIRLING):
        series = series * inv2 + c
    return (z - 0.5) * xp.log(z) - z + _HALF_LOG_2PI + series / z - xp.log(prod)


def split_targets_on(xp: ModuleType, y: Array, like: Array) -> tuple[Array, Array]:
    """The counts and log exposures of ``y`` in ``xp``: rows ``[count, log exposure]`` where ``y`` has a last axis
    of two beyond ``like``'s shape (as the device loop holds the checked targets), else counts, exposure 1."""
    rows = y.ndim == like.ndim + 1 and y.shape[-1] == 2
    return (y[..., 0], y[..., 1]) if rows else (y, xp.zeros_like(y))


def poisson_mode_on(xp: ModuleType, count: Array, mean: Array, var: Array, power: float) -> Array:
    r"""The Poisson tilted's mode (step 1): :math:`\omega` with :math:`e^\omega + \omega = L` by Newton from the
    right, :math:`\hat\eta = \omega - \log(s^2u)`."""
    log_su = xp.log(var * power)
    big = log_su + mean + var * power * count
    omega = xp.where(big > 1.0, xp.log(xp.maximum(big, 1.0)), big)
    for _ in range(LAMBERT_STEPS):
        grow = xp.exp(omega)
        omega = omega - (grow + omega - big) / (grow + 1.0)
    return omega - log_su


def bracketed_mode_on(
    xp: ModuleType, model: CountModelOn, count: Array, mean: Array, var: Array, power: float
) -> Array:
    r"""The mode (step 1) by safeguarded Newton on numpy's bracket, for a likelihood whose slope :math:`l'` is
    bounded (the negative binomial's), so that the bracket is finite."""
    d1, _ = model._dlog_pmf_in(xp, count, mean)
    g0 = power * d1
    peak = xp.where(count > 0.0, xp.log(xp.where(count > 0.0, count, 1.0)), -float("inf"))
    up = g0 > 0.0  # (g0 = 0: the bracket is the cavity mean)
    lo = xp.where(up, mean, xp.maximum(mean + var * g0, peak))
    hi = xp.where(up, xp.minimum(mean + var * g0, peak), mean)
    lo = xp.minimum(lo, hi)
    eta, last = hi, hi - lo
    for _ in range(MODE_STEPS):
        d1, d2 = model._dlog_pmf_in(xp, count, eta)
        grad = power * d1 - (eta - mean) / var
        step = eta - grad / (power * d2 - 1.0 / var)  # (the curvature is below -1/s^2)
        rising = grad > 0.0
        lo, hi = xp.where(rising, eta, lo), xp.where(rising, hi, eta)
        # Newton while it halves its last step (else it may cycle about an inflection of l'), or has converged
        move = xp.abs(step - eta)
        ok = (step >= lo) & (step <= hi) & ((move <= 0.5 * last) | (move <= 1e-13 * (1.0 + xp.abs(eta))))
        new = xp.where(ok, step, 0.5 * (lo + hi))
        last, eta = xp.abs(new - eta), new
    return eta


def _reaches_on(
    xp: ModuleType, model: CountModelOn, count: Array, mode: Array, shift: Array, var: Array, power: float,
    start: Array,
) -> Array:  # fmt: skip
    r"""Step 2: distances :math:`d > 0` from the mode, right and left (a last axis of two), where :math:`h` has
    fallen by at least :math:`T`, from ``start`` (where it has: the same axis)."""
    side = xp.asarray([1.0, -1.0], dtype=mode.dtype, device=getattr(mode, "device", None))
    k, m, sh, v = count[..., None], mode[..., None], shift[..., None], var[..., None]
    l0 = model._log_kernel_on(xp, k, m)
    lo, hi = xp.zeros_like(start), start
    d, last = start, start
    for _ in range(REACH_STEPS):
        e = m + side * d
        fall = -power * (model._log_kernel_on(xp, k, e) - l0) + d * (2.0 * side * sh + d) / (2.0 * v)
        slope = -side * power * model._dlog_pmf_in(xp, k, e)[0] + (side * sh + d) / v
        above = fall >= _TAIL
        lo, hi = xp.where(above, lo, d), xp.where(above, d, hi)
        step = d - (fall - _TAIL) / xp.where(slope > 0.0, slope, 1.0)
        ok = (slope > 0.0) & (step > lo) & (step < hi) & (xp.abs(step - d) <= 0.5 * last)
        new = xp.where(ok, step, 0.5 * (lo + hi))
        last, d = xp.abs(new - d), new
    return hi


def count_log_z_on(xp: ModuleType, model: CountModelOn, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
    r""":math:`\log Z` of :math:`p(y | \eta)^u N(\eta | \mu, s^2)` and its derivatives in :math:`\mu` by the
    fixed-size rule of the module docstring, in ``xp`` on the arrays' device.

    Parameters
    ----------
    xp : module
        The arrays' namespace.
    model : CountModelOn
        The likelihood (its methods in ``xp``; where its ``curved_right``, :math:`-l''` grows right of every
        point, the Poisson's :math:`e^\eta`, and the right reach starts from :math:`\sqrt{2T}\ell`).
    y : array
        The counts, or rows ``[count, log exposure]`` on a last axis of two (:func:`split_targets_on`).
    mean, var : array
        The cavities of the latent :math:`f` (the log exposure :math:`o` added here: :math:`\eta = f + o`).
    power : float
        :math:`u \in (0, 1]`.
    """
    if not model.tilted_on_device:
        raise NotImplementedError(f"{type(model).__name__} has no tilted log Z on a device")
    count, offset = split_targets_on(xp, y, mean)
    count, offset, mean, var = xp.broadcast_arrays(count, offset, mean, var)
    mean, right_curved = mean + offset, model.curved_right
    mode = model._mode_on(xp, count, mean, var, power)
    _, mode_d2 = model._dlog_pmf_in(xp, count, mode)
    ell = 1.0 / xp.sqrt(1.0 / var - power * xp.minimum(mode_d2, 0.0))
    shift = mode - mean
    bound = float(np.sqrt(2.0 * _TAIL)) * xp.sqrt(var)
    start = xp.stack([xp.minimum(bound, float(np.sqrt(2.0 * _TAIL)) * ell) if right_curved else bound, bound], axis=-1)
    reaches = _reaches_on(xp, model, count, mode, shift, var, power, start)
    right, left = reaches[..., 0], reaches[..., 1]
    lo_b, hi_b = model._bend_on(xp, count, power)
    bend = xp.minimum(xp.maximum(mode, lo_b), xp.maximum(hi_b, lo_b))  # (empty interval: its lower end)
    bend = xp.where(lo_b <= hi_b, bend, mode)
    offset = xp.minimum(xp.maximum(bend - mode, -left), right)  # the second centre's offset from the mode
    below = offset < 0.0
    width_b = xp.minimum(ell, 1.0)
    w1, w2 = xp.where(below, width_b, ell), xp.where(below, ell, width_b)
    o1, o2 = xp.minimum(offset, 0.0), xp.maximum(offset, 0.0)  # the centres' offsets from the mode
    gap1, gap2 = split_gap(w1, w2, o2 - o1, xp)
    nodes = two_centre_rule_on(xp, w1, w2, gap1, gap2, left + o1, right - o2, PANEL_NODES)
    d = xp.concat([o1[..., None] + nodes.disp1, o2[..., None] + nodes.disp2], axis=-1)
    jac = xp.concat([nodes.weights1, nodes.weights2], axis=-1)
    k, eta = count[..., None], mode[..., None] + d
    e = shift[..., None] + d
    log_terms = power * model._log_kernel_on(xp, k, eta) - (0.5 / var[..., None]) * e * e
    top = xp.max(log_terms, axis=-1, keepdims=True)
    terms = jac * xp.exp(log_terms - top)
    total = xp.sum(terms, axis=-1)
    log_z = top[..., 0] + xp.log(total) + power * model._log_norm_on(xp, count) - 0.5 * xp.log(var) - _HALF_LOG_2PI
    w = terms / total[..., None]
    d_mean = xp.sum(w * d, axis=-1)
    t_var = xp.sum(w * (d - d_mean[..., None]) ** 2, axis=-1)
    d1, d2 = model._dlog_pmf_in(xp, k, eta)
    used = w > 0.0  # (where the likelihood underflowed its derivatives may be huge)
    d1, d2 = xp.where(used, d1, 0.0), xp.where(used, d2, 0.0)
    g1 = power * xp.sum(w * d1, axis=-1)
    g2 = xp.sum(w * (power * d2 + (power * d1 - g1[..., None]) ** 2), axis=-1)
    narrow = var * power * xp.abs(mode_d2) < 1.0
    dlog_z = xp.where(narrow, g1, (shift + d_mean) / var)
    d2log_z = xp.where(narrow, g2, (t_var - var) / var**2)
    return TiltedLogZ(log_z, dlog_z, d2log_z)
