r"""The Student-t's tilted integrals with fixed sizes, in any array library: both modes, on the device.

:class:`~relaxep.likelihoods.StudentT` integrates :math:`p(y|f)^u N(f | \mu, s^2)` on numpy around the two
modes of its tilted (an outlier makes it bimodal): the roots of a cubic by a Newton iteration that stops when
it has converged, then the two-centre rule of :mod:`relaxep.likelihoods._panels` with as many nodes a panel as
the widest site of a group needs (12 to 160).  Both decisions read the data.  The rule here makes neither: the
same geometry, with :data:`NEWTON_STEPS` Newton steps and :data:`PANEL_NODES` Gauss-Legendre nodes on each of
the four panels for every site, so a parallel EP sweep (:mod:`relaxep.inference.device_ep`) runs without
reading anything back.  A different algorithm by design, not a copy: the Student-t's one tilted integral
(``StudentT._log_z_in``) takes numpy's adaptive rule on the host and this one on another array library
(:func:`relaxep._xp.adaptive_or_fixed`).  Every branch is an ``xp.where`` whose unused side is kept finite.

With :math:`x = f - y` in the frame where the residual :math:`r = |\mu - y| \ge 0` (the sign flipped back at
the end), :math:`a = \nu\sigma^2` and :math:`p = u(\nu + 1)`:

1. **The modes.**  The stationary points of the log tilted solve the cubic
   :math:`c(x) = (x - r)(a + x^2) + s^2 p\, x = 0`, all in :math:`[0, r]`.  Scaled by
   :math:`L = \max(r, s, \sqrt a)`, its critical points
   :math:`x_{1,2} = (r \mp \sqrt{r^2 - 3(a + s^2p)})/3` (where real) split :math:`[0, r]` into the brackets
   :math:`[0, x_1]` (the mode on the likelihood's side) and :math:`[x_2, r]` (the cavity's side), on which
   :math:`c` is monotone; :data:`NEWTON_STEPS` Newton steps in each, a step that leaves its bracket replaced by
   bisection, from :math:`r a/(a + s^2p)` and :math:`r`.  The centres :math:`c_1 \le c_2`: both modes where
   there are three roots; else the one mode and, on the other side, the likelihood's peak :math:`x = 0` or
   the critical point :math:`x_2` (a shoulder of the tilted).
2. **The rule.**  Widths :math:`w_k = 1/\sqrt{\max(|h''(c_k)|, 1/s^2)}`, :math:`h` the log tilted; the gap
   between the centres split where both maps space their nodes equally,
   :math:`w_1^2 + g_1^2 = w_2^2 + g_2^2`; reaches :math:`R_1 = s\sqrt{2(T + \tfrac p2\log(1 + c_1^2/a))}` below
   :math:`c_1` and :math:`R_2 = (r - c_2) + \sqrt{(r - c_2)^2 + 2Ts^2}` above :math:`c_2`, :math:`T = 40`
   (numpy's).  Four panels :math:`[c_1 - R_1, c_1], [c_1, c_1 + g_1], [c_2 - g_2, c_2], [c_2, c_2 + R_2]`, each
   by :data:`PANEL_NODES`-point Gauss-Legendre in :math:`t` after :math:`x = c_k + w_k\sinh t`.
3. **The sums**, in log space: :math:`\log Z = u\log C + \log\sum_k J_k (1 + x_k^2/a)^{-p/2}
   e^{-e_k^2/(2s^2)} - \tfrac12\log(2\pi s^2)`, :math:`C` the density's normaliser, :math:`J_k` the weights
   with the map's Jacobian and :math:`e_k = x_k - r` each node's offset from the cavity mean (near the
   cavity's mode written :math:`-s^2p\,c_2/(a + c_2^2) + (x_k - c_2)` from the stationarity condition, no
   cancellation).  With the normalised weights :math:`w_k`,
   :math:`\partial_\mu\log Z = \bar e/s^2` and :math:`\partial^2_\mu\log Z = (\operatorname{Var} e - s^2)/s^4`,
   or, where the cavity is narrower than the likelihood (:math:`s^2 < a`, where those differences cancel),
   :math:`E[u l']` and :math:`E[u l'' + u^2l'^2] - E[u l']^2`, :math:`l = \log p(y|f)`.

Accuracy (relative errors of :math:`\log Z` and its two derivatives, each against its own scale where it passes
near zero: 1, :math:`\sqrt{\hat v}/s^2`, :math:`\hat v/s^4`; ``tests/test_device_robust.py``), in the box
:math:`|\mu - y| \le 50 s`, :math:`10^{-3} \le s^2 \le 10^3`, :math:`\nu \in \{1.5, 3, 4, 10\}`,
:math:`\sigma \in \{0.1, 1\}`, :math:`u \in \{1, 0.5, 0.1\}`: against numpy's adaptive rule on the tests' grid
at most 2e-13, against itself with 160 nodes a panel on 6000 random cavities of each setting at most 3e-13, against
``scipy.integrate.quad`` at most 2e-9, all below :data:`ERROR_BOUND`.  Where :math:`u(\nu + 1)` is small (``u = 0.1``)
numpy's rule (10 nodes a unit of the sinh variable) is the less accurate: up to 1.5e-8 off this one on random
cavities, and 5e-7 (:math:`\log Z`) to 3e-5 (its second derivative) off ``quad`` where the tilted's two modes
merge (:math:`\nu = 1.5`, :math:`\sigma = 0.1`, :math:`r = 6.07`, :math:`s^2 = 5.83`), where this rule is 2e-9 off.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from relaxep._typing import Array
from relaxep.likelihoods._panels import split_gap
from relaxep.likelihoods.base import TiltedLogZ
from relaxep.likelihoods.panels_on import two_centre_rule_on

__all__ = ["ERROR_BOUND", "NEWTON_STEPS", "PANEL_NODES", "student_t_log_z_on"]

#: Gauss-Legendre nodes on each of the four panels (numpy's rule takes 10 a unit of the sinh variable, at most 160)
PANEL_NODES = 64
#: safeguarded Newton steps for each root of the cubic
NEWTON_STEPS = 30
#: the measured bound (relative error of log Z and of its derivatives, in the box of the tests)
ERROR_BOUND = 1e-8
_TAIL = 40.0  # the rule covers the tilted down to exp(-40) of its density at the centres (numpy's)


def _cubic_modes_on(xp: ModuleType, r: Array, s2: Array, a: float, p: float) -> tuple[Array, Array, Array]:
    r"""Step 1: the centres :math:`c_1 \le c_2` (offsets from :math:`y`, frame :math:`r \ge 0`) and whether
    :math:`c_2` is a root of the cubic (its offset from :math:`\mu` then from the stationarity condition)."""
    scale = xp.maximum(xp.maximum(r, xp.sqrt(s2)), xp.full_like(r, float(np.sqrt(a))))
    rt, at = r / scale, a / scale**2
    ct = at + p * s2 / scale**2
    disc = rt * rt - 3.0 * ct
    has_crit = disc > 0.0
    root_disc = xp.sqrt(xp.maximum(disc, 0.0))
    x2 = xp.where(has_crit, (rt + root_disc) / 3.0, rt)
    x1 = xp.where(has_crit, ct / xp.where(has_crit, rt + root_disc, 1.0), 0.0)

    def cubic(x: Array) -> Array:
        return ((x - rt) * x + ct) * x - rt * at

    g1, g2 = cubic(x1), cubic(x2)
    three = has_crit & (g1 > 0.0) & (g2 < 0.0)
    low_root = has_crit & ~three & (g2 >= 0.0)  # the only root is in [0, x1]
    high_root = has_crit & ~three & ~low_root  # the only root is in [x2, r]
    # each slot's bracket (0: the likelihood's side, 1: the cavity's), on which the cubic is monotone: both
    # slots at once, on a last axis of two
    rt2, ct2, at2 = rt[..., None], ct[..., None], at[..., None]
    lo = xp.stack([xp.zeros_like(rt), x2], axis=-1)
    hi = xp.stack([xp.where(has_crit, x1, rt), rt], axis=-1)
    x = xp.minimum(xp.maximum(xp.stack([rt * at / ct, rt], axis=-1), lo), hi)

    def cubic2(x: Array) -> Array:
        return ((x - rt2) * x + ct2) * x - rt2 * at2

    sign_lo = xp.sign(cubic2(lo))
    for _ in range(NEWTON_STEPS):
        gx = cubic2(x)
        slope = (3.0 * x - 2.0 * rt2) * x + ct2
        same = xp.sign(gx) == sign_lo
        lo, hi = xp.where(same, x, lo), xp.where(same, hi, x)
        flat = slope == 0.0
        step = x - gx / xp.where(flat, 1.0, slope)
        x = xp.where(flat | (step < lo) | (step > hi), 0.5 * (lo + hi), step)
    roots = [x[..., 0] * scale, x[..., 1] * scale]
    c1 = xp.where(three | low_root, roots[0], 0.0)
    c2 = xp.where(three | high_root, roots[1], xp.where(low_root, x2 * scale, roots[0]))
    return c1, c2, three | high_root


def student_t_log_z_on(
    xp: ModuleType, resid: Array, var: Array, df: float, scale: float, log_norm: float, power: float
) -> TiltedLogZ:
    r""":math:`\log Z` of :math:`p(y|f)^u N(f | \mu, s^2)` for the Student-t and its derivatives in :math:`\mu`,
    by the fixed-size two-centre rule of the module docstring, in ``xp`` on the arrays' device.

    Parameters
    ----------
    xp : module
        The array namespace of ``resid`` and ``var``.
    resid : array
        The residuals :math:`\mu - y` of the cavity means, any shape.
    var : array
        The cavity variances :math:`s^2 > 0`, ``resid``'s shape.
    df, scale : float
        :math:`\nu` and :math:`\sigma`.
    log_norm : float
        :math:`\log C`, the density's normaliser :math:`\log\Gamma(\frac{\nu+1}2) - \log\Gamma(\frac\nu2) -
        \frac12\log(\nu\pi) - \log\sigma`.
    power : float
        :math:`u \in (0, 1]`.
    """
    a, p = df * scale**2, power * (df + 1.0)
    sign = xp.where(resid < 0.0, -xp.ones_like(resid), xp.ones_like(resid))
    r = xp.abs(resid)
    s = xp.sqrt(var)
    c1, c2, c2_is_root = _cubic_modes_on(xp, r, var, a, p)

    def width(x: Array) -> Array:
        ratio = a / (a + x * x)  # (in [0, 1]: no overflow)
        curv = 1.0 / var + (p / a) * ratio * (2.0 * ratio - 1.0)
        return 1.0 / xp.sqrt(xp.maximum(xp.abs(curv), 1.0 / var))

    w1, w2 = width(c1), width(c2)
    gap1, gap2 = split_gap(w1, w2, xp.maximum(c2 - c1, 0.0), xp)
    reach1 = s * xp.sqrt(2.0 * (_TAIL + 0.5 * p * xp.log1p(c1 * c1 / a)))
    reach2 = (r - c2) + xp.sqrt((r - c2) ** 2 + 2.0 * _TAIL * var)
    nodes = two_centre_rule_on(xp, w1, w2, gap1, gap2, reach1, reach2, PANEL_NODES)
    # the cavity-side centre's offset from mu, from the stationarity condition where it is a root
    delta2 = xp.where(c2_is_root, -var * p * c2 / (a + c2 * c2), c2 - r)
    x = xp.concat([c1[..., None] + nodes.disp1, c2[..., None] + nodes.disp2], axis=-1)
    e = xp.concat([(c1 - r)[..., None] + nodes.disp1, delta2[..., None] + nodes.disp2], axis=-1)
    jac = xp.concat([nodes.weights1, nodes.weights2], axis=-1)
    v = var[..., None]
    z = x * (1.0 / scale)
    log_terms = (-0.5 * p) * xp.log1p(z * z * (1.0 / df)) - (0.5 / v) * e * e
    top = xp.max(log_terms, axis=-1, keepdims=True)
    terms = jac * xp.exp(log_terms - top)
    total = xp.sum(terms, axis=-1)
    log_z = top[..., 0] + xp.log(total) + power * log_norm - 0.5 * xp.log((2.0 * np.pi) * var)
    weights = terms / total[..., None]
    e_mean = xp.sum(weights * e, axis=-1)
    e_var = xp.sum(weights * (e - e_mean[..., None]) ** 2, axis=-1)
    ratio = a / (a + x * x)
    dl = (-(df + 1.0) / a) * x * ratio  # d log p / d f in the flipped frame
    d2l = (-(df + 1.0) / a) * ratio * (2.0 * ratio - 1.0)
    g1 = power * xp.sum(weights * dl, axis=-1)
    g2 = xp.sum(weights * (power * d2l + (power * dl) ** 2), axis=-1) - g1**2
    narrow = var < a  # the moments' differences would cancel: the derivatives' expectations
    dlog_z = xp.where(narrow, g1, e_mean / var)
    d2log_z = xp.where(narrow, g2, (e_var - var) / var**2)
    return TiltedLogZ(log_z, sign * dlog_z, d2log_z)
