r"""The mode-centred sinh rule with fixed sizes, in any array library: tilted moments on the device.

:class:`~relaxep.likelihoods.quadrature.QuadratureLikelihood` integrates on numpy with an adaptive rule: a
Newton search for the tilted mode that stops when it has converged, then as many nodes as the widest site of
the batch needs (64 to 4096).  Both decisions read the data, which on another array library's device is a
host round trip each.  The rule here makes none: a fixed number of Newton steps, then a fixed number of nodes
per site, every size known before the arrays are, so a parallel EP sweep (:mod:`relaxep.inference.device_ep`)
runs without reading anything back.  A different algorithm by design, not a copy: the family's one tilted integral
(``QuadratureLikelihood._folded_log_z_in``) takes numpy's adaptive rule on the host and this one on another array
library (:func:`relaxep._xp.adaptive_or_fixed`).

For the folded likelihood :math:`t(g)` at a power :math:`u` and a cavity :math:`N(g | \mu, s^2)` it computes

.. math::
    \log Z = \log\int t(g)^u N(g | \mu, s^2)\,dg,\qquad
    \partial_\mu\log Z = \frac{\hat m - \mu}{s^2},\qquad
    \partial^2_\mu\log Z = \frac{\hat v - s^2}{s^4},

:math:`\hat m, \hat v` the tilted mean and variance (the identities of
:class:`~relaxep.likelihoods.TiltedLogZ`, read backwards), in three steps:

1. **The mode.** :math:`\hat g` solves :math:`\psi(g) = u(\log t)'(g) - (g - \mu)/s^2 = 0` in the bracket
   :math:`[\mu, \mu + s^2u(\log t)'(\mu)]` (numpy's rule's bracket, valid for an increasing log-concave
   :math:`t`), by :data:`NEWTON_STEPS` Newton steps that fall back to bisection where a step leaves the
   bracket, from a start that makes Newton monotone: the cavity mean for the probit (its
   :math:`(\log\Phi)'` is convex, so from the left every step stays left of the root), :math:`g = 0` for the
   logistic (the inflection point of :math:`\sigma(-g)`: concave to its left, convex to its right, so the
   iterates approach the root from one side).  The Laplace variance :math:`\ell^2 = (1/s^2 - u(\log t)''
   (\hat g))^{-1}` sets the node scale.
2. **The nodes.** The trapezoid rule in :math:`x` after :math:`g = c + a\sinh x`, :math:`a = \min(\ell, w)`
   (:math:`w` the width of the likelihood's transition at :math:`g = 0`), :data:`NODES` nodes on
   :math:`|x| \le X`, :math:`X = \operatorname{arsinh}(R/a)`, :math:`R = 14\max(s, \ell) + |c - \hat g|`
   (numpy's reach): step :math:`h = 2X/(N - 1)` per site.  Spacing grows geometrically away from the centre
   :math:`c`, at distance :math:`d` about :math:`h\sqrt{a^2 + d^2}`.  With the mode far from the transition
   and the cavity wide, the tilted density has two features (its bulk, width :math:`\ell`, and the kink of
   :math:`t` at 0, width :math:`w`), which numpy's rule resolves with up to 4096 nodes.  Here the centre is
   chosen per site instead: :math:`c = 0` (the transition) where that rule still samples the mode's bulk
   finely, :math:`h\sqrt{a^2 + \hat g^2} \le` :data:`RESOLVE` :math:`\ell`, else :math:`c = \hat g`; where
   the latter misses the kink, the kink carries too little mass to matter (measured below).
3. **The sums**, in log space: :math:`\log Z = \operatorname{logsumexp}_k [\log(h a\cosh x_k) +
   u\log t(g_k) + \log N(g_k | \mu, s^2)]`, the moments from the normalised weights as displacements
   :math:`a\sinh x_k` from the centre (full relative precision far from 0); at :math:`u = 1`, Relaxed EP's
   tilted expectation :math:`E[\log t(g)] = \sum_k w_k\log t(g_k)` from the same normalised weights
   :math:`w_k` (:func:`tilted_log_t_on`; :func:`sinh_nodes_on` gives the nodes and weights, once for both).

Accuracy (:math:`|\mu| \le 50`, :math:`10^{-3} \le s^2 \le 10^3`, :math:`u \in [0.3, 1]`; errors of
:math:`\log Z`, that is relative errors of :math:`Z`, of the tilted mean in tilted standard deviations, and
relative errors of the tilted variance): against ``scipy.integrate.quad`` below :data:`ERROR_BOUND` = 1e-8 for
the logistic and the probit on the random cavities of ``tests/test_device_quadrature.py``; against numpy's adaptive
rule on 15 000 random cavities at eight powers, at most 2e-10 for the probit and 2e-8 for the logistic, where the
largest differences are numpy's rule's own error (at :math:`\mu = -6.4, s^2 = 983, u = 0.9` numpy's
:math:`\log Z` is 1.6e-8 off ``quad``, this rule's 1e-16).  The label-noise probit is not log-concave (its
tilted density may have two modes); at ``u < 1`` this rule is within 2e-6 of numpy's there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from relaxep._typing import Array
from relaxep.likelihoods.base import TiltedLogZ

__all__ = [
    "ERROR_BOUND",
    "NEWTON_STEPS",
    "NODES",
    "RESOLVE",
    "SinhNodes",
    "sinh_nodes_on",
    "sinh_rule_on",
    "tilted_log_t_on",
    "tilted_log_z_on",
    "tilted_mode_on",
]

#: nodes per site
NODES = 128
#: Newton steps for the mode (the probit's converge to rounding in 10, the logistic's from 0 in 12)
NEWTON_STEPS = 16
#: the largest node spacing, in Laplace standard deviations, at which the transition-centred rule is taken
RESOLVE = 0.6
#: tilted standard deviations (of the cavity or the Laplace approximation, the wider) the nodes reach
_REACH = 14.0
#: the measured bound on the errors (module docstring) in the box it states
ERROR_BOUND = 1e-8

LogT = Callable[[Any], Any]
DLogT = Callable[[Any], tuple[Any, Any]]


def tilted_mode_on(
    xp: ModuleType, dlog_t: DLogT, mean: Array, var: Array, power: float, start: float | None
) -> tuple[Array, Array]:
    r"""The tilted mode :math:`\hat g` and the Laplace variance :math:`\ell^2` there (step 1 of the module
    docstring): :data:`NEWTON_STEPS` safeguarded Newton steps from ``start`` (clipped into the bracket; the
    cavity mean where ``None``), no test of convergence."""
    d1, _ = dlog_t(mean)
    lo, hi = mean, mean + var * power * d1
    g = mean if start is None else xp.minimum(xp.maximum(xp.full_like(mean, start), lo), hi)
    for _ in range(NEWTON_STEPS):
        d1, d2 = dlog_t(g)
        grad = power * d1 - (g - mean) / var
        hess = power * d2 - 1.0 / var
        up = grad > 0.0
        lo, hi = xp.where(up, g, lo), xp.where(up, hi, g)
        curved = hess < 0.0  # (always, for a log-concave t)
        step = g - grad / xp.where(curved, hess, -xp.ones_like(hess))
        g = xp.where(curved & (step >= lo) & (step <= hi), step, 0.5 * (lo + hi))
    _, d2 = dlog_t(g)
    return g, 1.0 / xp.maximum(1.0 / var - power * d2, 1.0 / var)


@dataclass(frozen=True)
class SinhNodes:
    r"""The fixed-size sinh rule's nodes for a batch of cavities (nodes on the last axis): the centre :math:`c`,
    the displacements :math:`a\sinh x_k` from it, :math:`\log t(g_k)`, the normalised tilted weights
    :math:`w_k \propto h a\cosh x_k\, t(g_k)^u N(g_k | \mu, s^2)` and :math:`\log Z` (step 3 of the module
    docstring)."""

    centre: Array
    disp: Array
    log_t: Array
    weights: Array
    log_z: Array


def sinh_nodes_on(
    xp: ModuleType,
    log_t: LogT,
    dlog_t: DLogT,
    mean: Array,
    var: Array,
    power: float,
    width: float,
    start: float | None,
) -> SinhNodes:
    r"""Steps 1-3 of the module docstring up to the normalised weights: the :class:`SinhNodes` of
    :math:`t(g)^u N(g | \mu, s^2)`, in ``xp`` on the arrays' device (arguments as :func:`sinh_rule_on`'s)."""
    mode, lap_var = tilted_mode_on(xp, dlog_t, mean, var, power, start)
    lap_sd = xp.sqrt(lap_var)
    scale = xp.minimum(lap_sd, xp.full_like(lap_sd, width))
    far = xp.abs(mode)
    reach = _REACH * xp.maximum(xp.sqrt(var), lap_sd)
    half_edge = xp.asinh((reach + far) / scale)
    edge = (2.0 * half_edge / (NODES - 1)) * xp.sqrt(scale**2 + far**2) <= RESOLVE * lap_sd
    centre = xp.where(edge, xp.zeros_like(mode), mode)
    half = xp.where(edge, half_edge, xp.asinh(reach / scale))
    unit = xp.linspace(-1.0, 1.0, NODES, dtype=mean.dtype, device=getattr(mean, "device", None))
    x = half[..., None] * unit
    a = scale[..., None]
    disp = a * xp.sinh(x)
    g = centre[..., None] + disp
    m, v = mean[..., None], var[..., None]
    log_t_g = log_t(g)
    log_terms = (
        xp.log((2.0 / (NODES - 1)) * half[..., None] * a * xp.cosh(x))
        + power * log_t_g
        - 0.5 * (g - m) ** 2 / v
        - 0.5 * xp.log((2.0 * np.pi) * v)
    )
    top = xp.max(log_terms, axis=-1, keepdims=True)
    log_z = top[..., 0] + xp.log(xp.sum(xp.exp(log_terms - top), axis=-1))
    weights = xp.exp(log_terms - log_z[..., None])
    return SinhNodes(centre, disp, log_t_g, weights, log_z)


def tilted_log_z_on(xp: ModuleType, nodes: SinhNodes, mean: Array, var: Array) -> TiltedLogZ:
    r""":math:`\log Z` and its derivatives :math:`(\hat m - \mu)/s^2`, :math:`(\hat v - s^2)/s^4` from ``nodes``,
    the tilted moments as displacements from the centre (step 3)."""
    offset = xp.sum(nodes.weights * nodes.disp, axis=-1)
    tilted_var = xp.sum(nodes.weights * (nodes.disp - offset[..., None]) ** 2, axis=-1)
    return TiltedLogZ(nodes.log_z, (nodes.centre - mean + offset) / var, (tilted_var - var) / var**2)


def tilted_log_t_on(xp: ModuleType, nodes: SinhNodes) -> Array:
    r"""The tilted expectation :math:`E_{\hat p}[\log t(g)] = \sum_k w_k \log t(g_k)` from the same nodes and
    weights (Relaxed EP's KL, :mod:`relaxep.sites.relaxed_on`; at :math:`u = 1` the tilted distribution
    :math:`\hat p \propto t(g) N(g | \mu, s^2)`)."""
    return xp.sum(nodes.weights * nodes.log_t, axis=-1)


def sinh_rule_on(
    xp: ModuleType,
    log_t: LogT,
    dlog_t: DLogT,
    mean: Array,
    var: Array,
    power: float,
    width: float,
    start: float | None,
) -> TiltedLogZ:
    r""":math:`\log Z` of :math:`t(g)^u N(g | \mu, s^2)` and its first two derivatives in :math:`\mu`, by the
    fixed-size sinh rule of the module docstring, in ``xp`` on the arrays' device.

    Parameters
    ----------
    xp : module
        The array namespace of ``mean`` and ``var``.
    log_t, dlog_t : callable
        :math:`\log t(g)`, and :math:`((\log t)', (\log t)'')`, elementwise in ``xp``.
    mean, var : array
        The cavities (folded), any shape.
    power : float
        :math:`u \in (0, 1]`.
    width : float
        The width :math:`w` of :math:`t`'s transition at :math:`g = 0`.
    start : float or None
        Where the Newton search starts (``None``: the cavity mean).
    """
    nodes = sinh_nodes_on(xp, log_t, dlog_t, mean, var, power, width, start)
    return tilted_log_z_on(xp, nodes, mean, var)
