r"""Smooth likelihoods of one latent, written as :math:`\log p(y | f)` and two derivatives: tilted integrals by the
mode-centred sinh rule.

A likelihood whose :math:`\log p(y | f)` is smooth in :math:`f` (no kink, no jump) needs nothing else for EP: the
tilted integral

.. math:: Z = \int p(y | f)^u\, N(f | \mu, s^2)\, df

and its moments are taken by the trapezoid rule after :math:`f = \hat f + a\sinh x` around the tilted mode
(:func:`relaxep.likelihoods.sinh_rule.sinh_nodes`, whose docstring gives the rule and its accuracy), and the
derivatives of :math:`\log Z` in the cavity mean come from the nodes by one of two identities: the tilted moments,

.. math::
    \partial_\mu\log Z = \frac{E[f] - \mu}{s^2},\qquad
    \partial^2_\mu\log Z = \frac{\operatorname{Var}[f] - s^2}{s^4},

or, where the cavity is narrower than the likelihood (:math:`s^2 u |\ell''| < 1` at the tilted mean, where those
differences cancel), differentiation under the integral,

.. math:: \partial_\mu\log Z = E[u\ell'],\qquad \partial^2_\mu\log Z = E[u\ell''] + \operatorname{Var}[u\ell'],

:math:`\ell = \log p(y | f)` (the choice :mod:`relaxep.likelihoods.counts` makes for the counts).  A subclass of
:class:`SmoothLikelihood` gives, for its targets split into columns (:meth:`~SmoothLikelihood._columns`: a value
per row, or rows of two such as successes with their log trials), :math:`\ell`, :math:`\ell'`, :math:`\ell''`, where
:math:`\ell` bends (the point and width the rule must resolve), and :math:`\partial_\theta\ell` for its
hyperparameters; the evidence gradient :math:`E_{\hat p}[\partial_\theta \ell]`, Relaxed EP's :math:`E_{\hat p}[\ell]`
and the tilted cumulants come from the same nodes.  :class:`~relaxep.likelihoods.Binomial`,
:class:`~relaxep.likelihoods.Beta`, :class:`~relaxep.likelihoods.Gamma` and the hurdle and zero-inflated counts are
such likelihoods.  Against adaptive quadrature (``tests/test_glm_likelihoods.py``) ``log Z``, the tilted mean (in
tilted standard deviations) and variance (relatively) agree to 1e-10 over cavity means far in both tails, variances
1e-4 to 1e4 and powers 1 and 0.5.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike

from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep.likelihoods.base import Likelihood, TiltedLogZ, _as_floats
from relaxep.likelihoods.counts import split_targets
from relaxep.likelihoods.sinh_rule import sinh_nodes

__all__ = ["SmoothLikelihood", "central_interval", "mixture_cdf", "mixture_quantile", "two_sided_tail"]

Columns = tuple[Array, ...]


class SmoothLikelihood(Likelihood):
    r"""A likelihood of one latent given as :math:`\ell = \log p(y|f)`, :math:`\ell'`, :math:`\ell''` per target
    columns, its tilted integrals by the sinh rule (module docstring).

    Subclasses give :meth:`_log_lik_of`, :meth:`_dlog_lik_of`, :meth:`_bend_of` and, with hyperparameters,
    :meth:`_dtheta_of`; where :attr:`target_width` is 2 the targets are rows of two columns (split as
    :func:`~relaxep.likelihoods.counts.split_targets` splits a count's ``[count, log exposure]``).
    """

    # ------------------------------------------------------------ what a subclass gives
    @abstractmethod
    def _log_lik_of(self, cols: Columns, f: Array) -> Array:
        r""":math:`\log p(y | f)`, the target's columns ``cols`` broadcast against ``f``."""
        raise NotImplementedError

    @abstractmethod
    def _dlog_lik_of(self, cols: Columns, f: Array) -> tuple[Array, Array]:
        r""":math:`\ell'` and :math:`\ell''` in :math:`f`."""
        raise NotImplementedError

    @abstractmethod
    def _bend_of(self, cols: Columns, power: float) -> tuple[Array, Array, Array | float]:
        r"""Where each row's likelihood bends: the interval of :math:`f` where :math:`-u\ell'' \ge` :data:`BEND`
        (ends may be infinite) and the width of its sharpest feature there (the rule's nodes are at most a quarter
        of it apart over the part of that interval where the tilted has mass)."""
        raise NotImplementedError

    def _peak_of(self, cols: Columns) -> Array | None:
        """Where the likelihood peaks in ``f``, for one that is not log-concave (``None``, the default: it is).

        The tilted density may then have a second mode away from the cavity, which the mode search must not miss:
        it starts from the best of :data:`_GRID` points from the cavity mean to beyond this peak."""
        return None

    def _dtheta_of(self, cols: Columns, f: Array) -> Array:
        r""":math:`\partial\ell/\partial\theta`, the learned hyperparameters on a last axis."""
        raise NotImplementedError(f"{type(self).__name__} has learned hyperparameters but no _dtheta_of")

    # ------------------------------------------------------------ the columns
    def _columns(self, y: Array, *others: Array) -> tuple[Array, ...]:
        """The target's columns, then ``others``, broadcast together."""
        if self.target_width == 2:
            return split_targets(np.asarray(y, dtype=float), *others)
        return tuple(np.broadcast_arrays(y, *others))

    def _split(self, y: Array, *others: Array) -> tuple[Columns, tuple[Array, ...]]:
        parts = self._columns(y, *others)
        return parts[: self.target_width], parts[self.target_width :]

    def _log_lik(self, y: Array, f: Array) -> Array:
        cols, (f,) = self._split(y, f)
        return self._log_lik_of(cols, f)

    # ------------------------------------------------------------ the tilted integrals
    def _nodes(
        self, y: Array, mean: Array, var: Array, power: float
    ) -> tuple[Columns, Array, Array, Array, Array, Array]:
        """The rows' columns, cavities, and the rule's nodes, normalised weights and ``log Z``."""
        cols, (mean, var) = self._split(y, mean, var)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            lo, hi, width = self._bend_of(cols, power)

        def at_nodes(f: Array) -> Columns:
            return tuple(c[..., None] for c in cols) if np.ndim(f) > mean.ndim else cols

        def log_lik(f: Array) -> Array:
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                return self._log_lik_of(at_nodes(f), f)

        def dlog_lik(f: Array) -> tuple[Array, Array]:
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                return self._dlog_lik_of(at_nodes(f), f)

        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            peak = self._peak_of(cols)
        bracket = None if peak is None else _grid_bracket(log_lik, mean, var, power, np.broadcast_to(peak, mean.shape))
        # first where the tilted has its mass (a coarse pass), then the rule resolving the bend inside it
        f, weights, _ = sinh_nodes(log_lik, dlog_lik, mean, var, power, 1.0, mean, bracket=bracket)
        mass = weights >= _MASS * np.max(weights, axis=-1, keepdims=True)
        first, last = np.where(mass, f, np.inf).min(axis=-1), np.where(mass, f, -np.inf).max(axis=-1)
        lo, hi = np.maximum(lo, first), np.minimum(hi, last)
        peak = np.take_along_axis(f, np.argmax(weights, axis=-1)[..., None], axis=-1)[..., 0]
        empty = ~(lo <= hi)
        ends = (np.where(empty, peak, lo), np.where(empty, peak, hi))
        f, weights, log_z = sinh_nodes(log_lik, dlog_lik, mean, var, power, width, ends, bracket=bracket, cover=True)
        return cols, mean, var, f, weights, log_z

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        cols, mean, var, f, weights, log_z = self._nodes(y, mean, var, power)
        with np.errstate(invalid="ignore", over="ignore"):
            t_mean = np.sum(weights * f, axis=-1)
            t_var = np.sum(weights * (f - t_mean[..., None]) ** 2, axis=-1)
            d1, d2 = self._dlog_lik_of(tuple(c[..., None] for c in cols), f)
            used = weights > 0.0  # (where the likelihood underflowed, its derivatives may be infinite)
            d1, d2 = np.where(used, d1, 0.0), np.where(used, d2, 0.0)
            g1 = power * np.sum(weights * d1, axis=-1)
            g2 = np.sum(weights * (power * d2 + (power * d1 - g1[..., None]) ** 2), axis=-1)
            curvature = self._dlog_lik_of(cols, np.where(np.isfinite(t_mean), t_mean, mean))[1]
            narrow = var * power * np.abs(curvature) < 1.0
        dlog_z = np.where(narrow, g1, (t_mean - mean) / var)
        d2log_z = np.where(narrow, g2, (t_var - var) / var**2)
        return TiltedLogZ(log_z, dlog_z, d2log_z)

    def _tilted_nodes(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array]:
        _, _, _, f, weights, _ = self._nodes(y, mean, var, 1.0)
        return f, weights

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        cols, _, _, f, weights, _ = self._nodes(y, mean, var, 1.0)
        with np.errstate(invalid="ignore", over="ignore"):
            terms = self._log_lik_of(tuple(c[..., None] for c in cols), f)
        return np.sum(np.where(weights > 0.0, weights * terms, 0.0), axis=-1)

    def dlog_z_dtheta(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""Gradient of :math:`\log Z` in :attr:`theta`: :math:`E_{\hat p}[\partial_\theta \log p(y|f)]` on the tilted
        integral's nodes (at an EP fixed point the evidence's gradient in the likelihood's hyperparameters is the
        sum of these over the sites), shape ``(..., n_dims)``; ``y`` as :meth:`_columns` reads it."""
        y, mean, var = _as_floats(y, mean, var)
        cols, (mean, var) = self._split(y, mean, var)
        if self.n_dims == 0:
            return np.zeros((*mean.shape, 0))
        cols, _, _, f, weights, _ = self._nodes(y, mean, var, 1.0)
        with np.errstate(invalid="ignore", over="ignore"):
            grad = self._dtheta_of(tuple(c[..., None] for c in cols), f)
            return np.sum(np.where(weights[..., None] > 0.0, weights[..., None] * grad, 0.0), axis=-2)

    #: (the default's, for the protocol: :meth:`dlog_z_dtheta` above is the one entry)
    def _dlog_lik_dtheta(self, y: Array, f: Array) -> Array:
        cols, (f,) = self._split(y, f)
        return self._dtheta_of(cols, f)

    #: a smooth likelihood's kind is the estimator's (real targets unless a subclass says otherwise)
    kind: ClassVar[str] = "real"


#: the curvature :math:`-u\ell''` above which a likelihood "bends" (:meth:`SmoothLikelihood._bend_of`), as the counts'
BEND = 1e-2
_MASS = 1e-20  # nodes of this share of the heaviest node's weight, or more, are where the tilted has its mass
_GRID = np.linspace(-0.125, 1.125, 81)  # from the cavity mean (0) to the likelihood's peak (1), and beyond


def _grid_bracket(
    log_lik: Callable[[Array], Array], mean: Array, var: Array, power: float, peak: Array
) -> tuple[Array, Array, Array]:
    r"""The best of :data:`_GRID` points of :math:`h(f) = u\ell(f) - (f - \mu)^2/(2s^2)` between the cavity mean
    and the likelihood's peak, with its neighbours: where the tilted's highest mode is (every mode of
    :math:`h` lies between the two, :math:`\ell` being unimodal)."""
    peak = np.where(np.isfinite(peak), peak, mean)
    f = mean[..., None] + (peak - mean)[..., None] * _GRID
    with np.errstate(invalid="ignore", over="ignore"):
        h = power * log_lik(f) - 0.5 * (f - mean[..., None]) ** 2 / var[..., None]
    best = np.argmax(np.where(np.isfinite(h), h, -np.inf), axis=-1)[..., None]
    take = lambda i: np.take_along_axis(f, np.clip(i, 0, _GRID.size - 1), axis=-1)[..., 0]  # noqa: E731
    ends = np.stack([take(best - 1), take(best + 1)])
    return np.min(ends, axis=0), np.max(ends, axis=0), take(best)


# ------------------------------------------------------------ predictives of continuous targets
_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(96)
_GH_W = _GH_W / np.sqrt(2.0 * np.pi)
_BISECTIONS = 200


def mixture_cdf(cdf: Callable[[Array, Array], Array], q: Array, mean: Array, var: Array) -> Array:
    r""":math:`\int F(q | f)\, N(f | m, v)\, df` by 96-node Gauss-Hermite (``cdf(q, f)`` the conditional CDF,
    smooth in :math:`f`; the nodes on a last axis)."""
    f = mean[..., None] + np.sqrt(var)[..., None] * _GH_X
    return np.sum(_GH_W * cdf(q[..., None], f), axis=-1)


def mixture_quantile(
    cdf: Callable[[Array, Array], Array],
    p: float,
    mean: Array,
    var: Array,
    to_q: Callable[[Array], Array],
    lo: float,
    hi: float,
) -> Array:
    r"""The :math:`p`-quantile of the predictive :math:`\int F(q | f) N(f | m, v) df` (:func:`mixture_cdf`), by
    bisection in a transformed variable :math:`t`, :math:`q = ` ``to_q(t)``, on ``[lo, hi]`` (the targets' range:
    the logit for proportions, the logarithm for positive values), to the last bit."""
    mean, var = np.broadcast_arrays(mean, var)
    low, high = np.full(mean.shape, lo), np.full(mean.shape, hi)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (low + high)
        above = mixture_cdf(cdf, to_q(mid), mean, var) >= p
        low, high = np.where(above, low, mid), np.where(above, mid, high)
        if np.all(high - low <= 1e-13 * (1.0 + np.abs(mid))):
            break
    return to_q(0.5 * (low + high))


def central_interval(
    cdf: Callable[[Array, Array], Array],
    mean: ArrayLike,
    var: ArrayLike,
    level: float,
    to_q: Callable[[Array], Array],
    bounds: tuple[float, float],
) -> tuple[Array, Array]:
    """The central ``level`` interval of the predictive (:func:`mixture_quantile` at :math:`(1 \\mp \\ell)/2`)."""
    level = check_unit_interval(level, "level")
    if level >= 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    mean, var = np.broadcast_arrays(*_as_floats(mean, var))
    tail = 0.5 * (1.0 - level)
    return tuple(mixture_quantile(cdf, p, mean, var, to_q, *bounds) for p in (tail, 1.0 - tail))  # type: ignore[return-value]


def two_sided_tail(cdf: Callable[[Array, Array], Array], y: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
    r"""Leave-one-out tail of a continuous target: :math:`2\min(P(y_* \le y), P(y_* \ge y))` under the predictive at
    the cavity :math:`N(h_i, \lambda_i)`, at most 1."""
    y, mean, var = np.broadcast_arrays(*_as_floats(y, mean, var))
    below = mixture_cdf(cdf, y, mean, var)
    return np.minimum(1.0, 2.0 * np.minimum(below, 1.0 - below))
