r"""The mode-centred sinh rule for tilted integrals of log-concave likelihoods (on the host, adaptive).

For a likelihood :math:`t(f)` whose logarithm is concave, the tilted density
:math:`\hat p(f) \propto t(f)^u N(f | \mu, s^2)` is log-concave.  Its mode :math:`\hat f` solves
:math:`u\,(\log t)'(\hat f) = (\hat f - \mu)/s^2` and lies in :math:`[\mu, \mu + s^2 u (\log t)'(\mu)]` (the
objective's derivative is :math:`u(\log t)'(\mu)` at :math:`\mu` and has the other sign at the bracket's far end,
as :math:`(\log t)'` decreases), where a Newton iteration safeguarded by bisection finds it; for a likelihood that
is not log-concave it finds a point of that bracket, which only places the nodes.  The integrals are then taken by
the trapezoid rule in :math:`x` after the substitution :math:`f = \hat f + a\sinh x`, :math:`a = \min(\ell, w)`
(:math:`\ell` the Laplace standard deviation, :math:`w` the width of the likelihood's transition): nodes are dense
at the mode and spread geometrically into the tails, so both scales are resolved; the half-width
:math:`\operatorname{arcsinh}(14\max(s, \ell)/a)` reaches 14 of the wider scale, and the step is small enough that
the transition, centred at ``transition``, is sampled at least every :math:`w/4`.  The trapezoid rule converges
geometrically for integrands analytic in a strip (Trefethen & Weideman 2014, "The exponentially convergent
trapezoidal rule", SIAM Review 56), so the error is set by the truncation, below 1e-10 in the tests of each family.

:class:`~relaxep.likelihoods.QuadratureLikelihood` (binary, folded :math:`g = yf`, transition at 0) and
:class:`~relaxep.likelihoods.survival.SurvivalLikelihood` (rows of a survival time) take their tilted moments here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from relaxep._numerics import logsumexp
from relaxep._typing import Array
from relaxep.likelihoods.tilted import TiltedLogZ

__all__ = ["moments_from_nodes", "sinh_nodes", "tilted_mode"]

#: ``log t`` at nodes ``f`` (the rows on the leading axes, nodes, where any, on the last)
LogLik = Callable[[Array], Array]
#: ``((log t)', (log t)'')`` at ``f``, as :data:`LogLik`
DLogLik = Callable[[Array], tuple[Array, Array]]

NEWTON_ITERATIONS = 100
MAX_NODES = 4096
MAX_STEP = 0.08


def tilted_mode(
    dlog_lik: DLogLik,
    mean: Array,
    var: Array,
    power: float,
    iterations: int = NEWTON_ITERATIONS,
    bracket: tuple[Array, Array, Array] | None = None,
) -> tuple[Array, Array]:
    r"""The tilted density's mode :math:`\hat f` and the inverse curvature there,
    :math:`\ell^2 = 1/(1/s^2 - u(\log t)''(\hat f))` (bounded by :math:`s^2` where :math:`t` is not log-concave).

    Newton's method on :math:`u(\log t)'(f) - (f - \mu)/s^2`, safeguarded by bisection on the bracket of the module
    docstring (where Newton leaves it or its step exceeds half the last one), from the first Newton step at
    the cavity mean, each row until its step is below 1e-9 cavity standard deviations.  A bracket end at an
    infinite slope (a likelihood that vanishes steeply where the cavity sits) is held within :math:`10^4` cavity
    standard deviations.  A likelihood that is not log-concave may give the tilted density a second mode outside
    that bracket; ``bracket`` ``(lo, hi, start)`` then says where to search (a grid's best point and its neighbours,
    :class:`~relaxep.likelihoods.smooth.SmoothLikelihood`).
    """
    if bracket is None:
        d1_mu, d2_mu = dlog_lik(mean)
        reach = 1e4 * np.sqrt(var)
        far = mean + np.clip(var * power * d1_mu, -reach, reach)
        lo, hi = np.minimum(mean, far), np.maximum(mean, far)
        # the first Newton step from the cavity mean, where it falls inside the bracket (else its middle)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            first = mean + var * power * d1_mu / (1.0 - var * power * d2_mu)
    else:
        lo, hi, first = bracket
    f = np.where((first >= lo) & (first <= hi), first, 0.5 * (lo + hi))
    dx = hi - lo
    # the mode only places the nodes: 1e-9 cavity standard deviations is far inside the rule's accuracy
    tolerance = 1e-9 * (np.sqrt(var) + np.abs(mean))
    active = np.ones(np.shape(f), dtype=bool)
    for _ in range(iterations):
        d1, d2 = dlog_lik(f)
        grad = power * d1 - (f - mean) / var
        hess = power * d2 - 1.0 / var
        lo = np.where(grad > 0, f, lo)
        hi = np.where(grad > 0, hi, f)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = f - grad / hess
        # bisect where Newton leaves the bracket or is slow: its step over half the one before last (rtsafe, Press
        # et al., Numerical Recipes 3rd ed., section 9.4; from far out on an exponential tail Newton moves by
        # a constant step, and bisection's halving of the bracket reaches the mode first)
        slow = ~(np.abs(step - f) <= 0.5 * np.abs(dx))
        outside = ~((step >= lo) & (step <= hi))
        f_new = np.where(active, np.where(outside | slow, 0.5 * (lo + hi), step), f)
        dx = f_new - f
        # a converged row stays put (rounding would read its next tiny step as slow and bisect it away)
        active &= np.abs(dx) > tolerance
        f = f_new
        if not np.any(active):
            break
    _, d2 = dlog_lik(f)
    return f, 1.0 / np.maximum(1.0 / var - power * d2, 1.0 / var)


def sinh_nodes(
    log_lik: LogLik,
    dlog_lik: DLogLik,
    mean: Array,
    var: Array,
    power: float,
    width: float | Array,
    transition: float | Array | tuple[Array, ...] = 0.0,
    max_nodes: int = MAX_NODES,
    bracket: tuple[Array, Array, Array] | None = None,
    cover: bool = False,
) -> tuple[Array, Array, Array]:
    r"""Nodes :math:`f_k`, normalised tilted weights and :math:`\log Z` (nodes on the last axis) of
    :math:`\int t(f)^u N(f | \mu, s^2)\,df` by the mode-centred sinh rule (module docstring).

    ``width`` is the likelihood's transition width :math:`w`, ``transition`` where the transition is centred (the
    step is at most :math:`w/4` over the distance from the mode to it), or a tuple of such places (an interval's
    two ends: the farther one counts).  ``log_lik`` and ``dlog_lik`` take
    ``f`` with the rows' shape (the mode's search) and with a last axis of nodes; ``bracket`` is
    :func:`tilted_mode`'s.  With ``cover`` the rule also reaches 14 widths past the farthest transition (a tilted
    density with a second mode there, from a likelihood that is not log-concave).
    """
    mean, var = np.broadcast_arrays(mean, var)
    mode, lap_var = tilted_mode(dlog_lik, mean, var, power, bracket=bracket)
    # (a row whose likelihood underflows at every node, log Z = -inf, or whose curvature overflows, answers NaN
    # moments: a failed site, which the inference reports, not a warning)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        lap_sd = np.sqrt(lap_var)
        scale = np.minimum(lap_sd, width)
        ends = transition if isinstance(transition, tuple) else (transition,)
        distance = np.max([np.abs(mode - end) for end in ends], axis=0)
        reach = 14.0 * np.maximum(np.sqrt(var), lap_sd)
        if cover:
            reach = np.maximum(reach, distance + 14.0 * width)
        half_width = np.arcsinh(reach / scale)
        max_step = np.minimum(MAX_STEP, 0.25 * width / np.maximum(distance, scale))
        wanted = np.ceil(2.0 * half_width / max_step)
        wanted = np.where(np.isfinite(wanted), wanted, 1.0)  # (a failed row sets no node count)
        n_nodes = int(np.clip(np.max(wanted, initial=1) + 1, 64, max_nodes))
        x = np.linspace(-1.0, 1.0, n_nodes) * half_width[..., None]
        step = (2.0 * half_width / (n_nodes - 1))[..., None]
        f = mode[..., None] + scale[..., None] * np.sinh(x)
        m, v = mean[..., None], var[..., None]
        log_terms = (
            np.log(step * scale[..., None] * np.cosh(x))
            + power * log_lik(f)
            - 0.5 * (f - m) ** 2 / v
            - 0.5 * np.log(2.0 * np.pi * v)
        )
        log_z = logsumexp(log_terms, axis=-1)
        weights = np.exp(log_terms - log_z[..., None])
    return f, weights, log_z


def moments_from_nodes(f: Array, weights: Array, log_z: Array, mean: Array, var: Array) -> TiltedLogZ:
    r""":math:`\log Z` and its derivatives in the cavity mean from the tilted moments on the nodes:
    :math:`\partial_\mu\log Z = (E[f] - \mu)/s^2`, :math:`\partial^2_\mu\log Z = (\operatorname{Var}[f] - s^2)/s^4`."""
    mean, var = np.broadcast_arrays(mean, var)
    with np.errstate(invalid="ignore"):
        tilted_mean = np.sum(weights * f, axis=-1)
        tilted_var = np.sum(weights * (f - tilted_mean[..., None]) ** 2, axis=-1)
    return TiltedLogZ(log_z, (tilted_mean - mean) / var, (tilted_var - var) / var**2)
