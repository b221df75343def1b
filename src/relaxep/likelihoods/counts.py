r"""Count likelihoods :math:`p(y | \eta)`, :math:`\eta = f + o` (:math:`o` the log exposure), log-concave in eta.

:class:`CountLikelihood` holds what :class:`~relaxep.likelihoods.Poisson` and
:class:`~relaxep.likelihoods.NegativeBinomial` share: the targets, the tilted integrals and the
predictive.  For a small count under a wide cavity the tilted is strongly skewed (a Gaussian tail on
the left, a wall on the right), which is why the integrals here are not by Gauss-Hermite.

**Targets.**  ``y`` is a vector of counts, or an array of shape ``(n, 2)`` whose columns are
``[count, log exposure]``.  In the pointwise methods (``log_z``, ``log_lik``, ...) ``y`` holds pairs
when its last axis has length 2, the rest broadcasts against the latent argument(s), and ``y`` has more
dimensions than they do (or does not broadcast with them as it is): ``y[i]`` of an ``(n, 2)`` array with a
scalar cavity is one pair.  To pass two counts with a scalar cavity, give the cavity shape ``(2,)``.

**The integrals.**  The tilted :math:`h(f) = u \log p(y|f) + \log N(f | \mu_c, s^2)` is concave; its mode
:math:`\hat f` is found by a safeguarded Newton iteration on the bracket between :math:`\mu_c`, the
likelihood's peak :math:`\log y - o` and :math:`\mu_c + s^2 u\,\partial_f \log p(y|\mu_c)`.  Then, with
:math:`\ell = (1/s^2 - u\,\partial^2_f \log p(y|\hat f))^{-1/2}` (the Laplace width), the trapezoid rule in
:math:`x` after :math:`f = \hat f + \ell \sinh x` runs from where :math:`h` has fallen by 40 below the
mode to where it has fallen by 40 above (solved by Newton on the convex drop), with step
:math:`\Delta = \min(0.1,\ 0.25 / \sqrt{\ell^2 + D^2})`, :math:`D` the farthest distance from the mode at
which the log-likelihood's curvature :math:`-u\,\partial^2_f \log p` exceeds 0.01: nodes are
:math:`0.1\ell` apart at the mode and at most 0.25 apart wherever the likelihood bends (its analytic
continuation grows like :math:`\exp(e^\eta(1 - \cos \mathrm{Im}\,\eta))` off the real axis, so a
trapezoid rule needs spacing well below 1 there).  The derivatives of :math:`\log Z` in the cavity mean
come from the tilted moments, or, for a cavity narrower than the likelihood
(:math:`s^2 u\,|\partial^2_f \log p(y|\hat f)| < 1`, where those would cancel), from
:math:`E[u\,l']` and :math:`E[u\,l''] + \operatorname{Var}[u\,l']`.  Against adaptive quadrature
(counts 0 to 1000, cavity means -30 to 10, variances 1e-4 to 100, powers 1 and 0.5, with exposures)
``log Z`` agrees to 1e-8 absolutely, the mean to 1e-8 tilted standard deviations and the variance to
1e-8 relatively (``tests/test_count_likelihoods.py``; the errors measured are about 1e-11).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import ClassVar, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from relaxep._numerics import logsumexp
from relaxep._typing import Array
from relaxep._xp import adaptive_or_fixed
from relaxep.likelihoods.base import Likelihood, TiltedLogZ, _as_floats
from relaxep.likelihoods.count_predictive import CountPredictive
from relaxep.likelihoods.counts_on import count_log_z_on

__all__ = ["BEND_CURVATURE", "CountLikelihood", "read_rows", "split_targets"]

_TAIL = 40.0  # the rule covers the tilted down to exp(-40) of its density at the mode
_BULK_STEP = 0.1  # trapezoid step in x = arcsinh((f - mode) / ell)
_BEND_SPACING = 0.25  # largest node spacing in f where the likelihood bends
BEND_CURVATURE = 1e-2  #: ... i.e. where -u d2 log p / df2 exceeds this (a subclass's :meth:`_bend`)
_NEWTON_ITERATIONS = 100
_REACH_ITERATIONS = 30
_MIN_NODES, _MAX_NODES = 64, 8192
_CHUNK = 1 << 21  # nodes times sites integrated at once


def _broadcastable(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def split_targets(y: Array, *others: Array) -> tuple[Array, ...]:
    """``(count, log exposure, *others)`` broadcast together; ``y``'s pairs split as the module explains."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in others))
    paired = (
        y.ndim >= 1
        and y.shape[-1] == 2
        and _broadcastable(y.shape[:-1], shape)
        and (y.ndim > len(shape) or not _broadcastable(y.shape, shape))
    )
    count, offset = (y[..., 0], y[..., 1]) if paired else (y, np.zeros(()))
    return tuple(np.broadcast_arrays(count, offset, *others))


class _Nodes(NamedTuple):
    """One group of sites on the rule: counts, the mode (in eta), eta at the nodes, the nodes' offsets from
    the mode, normalised weights, ``log Z``, the cavity's variance and the mode's offset from its mean."""

    count: Array
    mode: Array
    eta: Array  # at the nodes
    d: Array
    weights: Array
    log_z: Array
    var: Array
    shift: Array


class CountLikelihood(CountPredictive, Likelihood):
    r"""Shared by :class:`Poisson` and :class:`~relaxep.likelihoods.NegativeBinomial`: targets, tilted integrals
    and predictive of a count likelihood :math:`p(y | \eta)`, :math:`\eta = f + o`, log-concave in :math:`\eta`.

    Subclasses give :meth:`_log_pmf`, :meth:`_dlog_pmf_in`, :meth:`_bend` and :meth:`_count_cdf`; the predictive
    (:meth:`predict_y`, :meth:`predict_interval`, :meth:`loo_tail`) is :class:`CountPredictive`'s.
    """

    kind: ClassVar[str] = "count"
    is_density: ClassVar[bool] = False  # P(y = k | f): a probability
    target_width: ClassVar[int] = 2  # a count, or a row [count, log exposure]
    latent_is_link: ClassVar[bool] = True  # (the log rate)

    # ------------------------------------------------------------ the count model, in eta
    def _log_pmf(self, count: Array, eta: Array) -> Array:
        raise NotImplementedError

    def _dlog_pmf(self, count: Array, eta: Array) -> tuple[Array, Array]:
        """First and second derivative of ``log p`` in ``eta`` (numpy: the namespaced form's)."""
        return self._dlog_pmf_in(np, count, eta)

    def _dlog_pmf_in(self, xp: ModuleType, count: Array, eta: Array) -> tuple[Array, Array]:
        """:meth:`_dlog_pmf` in the array namespace ``xp``, written once."""
        raise NotImplementedError

    def _bend(self, count: Array, power: float) -> tuple[Array, Array]:
        """The interval of ``eta`` where ``-u d2 log p / d eta2 >= BEND_CURVATURE`` (empty: ``lo > hi``)."""
        raise NotImplementedError

    def _dlog_pmf_dtheta(self, count: Array, eta: Array) -> Array:
        raise NotImplementedError(f"{type(self).__name__} has learned hyperparameters but no _dlog_pmf_dtheta")

    # ------------------------------------------------------------ targets and pointwise
    def check_targets(self, y: ArrayLike, n: int | None = None) -> Array:
        """Counts, shape ``(n,)``, or ``[count, log exposure]`` rows ``(n, 2)``; else a ``ValueError`` naming ``y``.

        Counts must be finite non-negative integers (given as floats or ints; nothing is rounded), the
        log exposures finite.
        """
        arr = np.asarray(y)
        if not (arr.ndim == 1 or (arr.ndim == 2 and arr.shape[1] == 2)):
            raise ValueError(f"y must be counts of shape (n,) or [count, log exposure] rows (n, 2), got {arr.shape}")
        try:
            values = arr.astype(float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"y must hold counts for {type(self).__name__}") from exc
        count = values if values.ndim == 1 else values[:, 0]
        if not np.all(np.isfinite(count)):
            raise ValueError("y contains NaN or inf counts")
        bad = (count < 0.0) | (count != np.floor(count))
        if np.any(bad):
            raise ValueError(f"y must hold non-negative integer counts; found {np.unique(count[bad])[:5].tolist()}")
        if values.ndim == 2 and not np.all(np.isfinite(values[:, 1])):
            raise ValueError("y's log exposures (column 1) contain NaN or inf")
        if n is not None and values.shape[0] != n:
            raise ValueError(f"length mismatch: K has {n} rows but y has {values.shape[0]} targets")
        return values

    def read_targets(self, y: ArrayLike, log_exposure: ArrayLike | None = None) -> Array:
        """Counts ``(n,)``, with each row's ``log_exposure`` as rows ``[count, log exposure]`` ``(n, 2)`` where one is
        given, or such rows as ``y`` holds them (:func:`read_rows`)."""
        return read_rows(self, y, log_exposure)

    def _log_lik(self, y: Array, f: Array) -> Array:
        count, offset, f = split_targets(y, f)
        return self._log_pmf(count, f + offset)

    def _dlog_lik_dtheta(self, y: Array, f: Array) -> Array:
        count, offset, f = split_targets(y, f)
        return self._dlog_pmf_dtheta(count, f + offset)

    # ------------------------------------------------------------ the tilted integrals
    def _mode(self, count: Array, mean: Array, var: Array, power: float) -> tuple[Array, Array]:
        """The tilted's mode in ``eta`` (the cavity's mean in ``eta`` given) and the Laplace width there."""
        d1, _ = self._dlog_pmf(count, mean)
        g0 = power * d1  # the slope of h at the cavity mean
        with np.errstate(divide="ignore"):
            peak = np.log(count)  # the likelihood's peak (-inf for a zero count)
        lo = np.where(g0 >= 0.0, mean, np.maximum(mean + var * g0, peak))
        hi = np.where(g0 >= 0.0, np.minimum(mean + var * g0, peak), mean)
        lo = np.minimum(lo, hi)
        eta = hi.copy()  # h' <= 0 here: Newton from the right converges where h' is concave
        last = hi - lo  # (a Newton step must at least halve the one before, else bisect: rtsafe)
        for _ in range(_NEWTON_ITERATIONS):
            with np.errstate(over="ignore", invalid="ignore"):
                d1, d2 = self._dlog_pmf(count, eta)
                grad = power * d1 - (eta - mean) / var
                step = eta - grad / (power * d2 - 1.0 / var)
            lo, hi = np.where(grad > 0.0, eta, lo), np.where(grad > 0.0, hi, eta)
            bad = ~np.isfinite(step) | (step <= lo) | (step >= hi) | (np.abs(step - eta) > 0.5 * last)
            new = np.where(grad == 0.0, eta, np.where(bad, 0.5 * (lo + hi), step))
            last = np.abs(new - eta)
            done = np.all((last <= 1e-13 * (1.0 + np.abs(eta))) | (hi - lo <= 1e-13 * (1.0 + np.abs(eta))))
            eta = new
            if done:
                break
        _, d2 = self._dlog_pmf(count, eta)
        return eta, 1.0 / np.sqrt(1.0 / var - power * np.minimum(d2, 0.0))

    def _reach(self, count: Array, mode: Array, shift: Array, var: Array, power: float, side: float) -> Array:
        r"""Distance ``d > 0`` from the mode, on ``side`` (+1 or -1), where the log tilted has fallen by ``_TAIL``.

        The fall :math:`H(d)` is convex with :math:`H(0) = H'(0) = 0`: Newton from the Gaussian bound
        :math:`\sqrt{2T}\,s` (where :math:`H \ge T`) stays above the root; any point there is kept.
        """
        l0 = self._log_pmf(count, mode)
        lo, hi = np.zeros_like(mode), np.sqrt(2.0 * _TAIL * var)
        d, last = hi.copy(), hi.copy()
        for _ in range(_REACH_ITERATIONS):
            e = mode + side * d
            with np.errstate(over="ignore", invalid="ignore"):
                fall = -power * (self._log_pmf(count, e) - l0) + d * (2.0 * side * shift + d) / (2.0 * var)
                slope = -side * power * self._dlog_pmf(count, e)[0] + (side * shift + d) / var
                step = d - (fall - _TAIL) / slope
            above = fall >= _TAIL
            lo, hi = np.where(above, lo, d), np.where(above, d, hi)
            if np.all((above & (fall - _TAIL <= 1e-2)) | (hi - lo <= 1e-3 * hi)):
                break
            # Newton while it at least halves its last step, else bisection (rtsafe)
            ok = np.isfinite(step) & (step > lo) & (step < hi) & (np.abs(step - d) <= 0.5 * last)
            new = np.where(ok, step, 0.5 * (lo + hi))
            last, d = np.abs(new - d), new
        return hi

    def _rule(self, count: Array, offset: Array, mean: Array, var: Array, power: float) -> tuple[Array, ...]:
        """Per site (flat): the count, the mode in eta, its offset from the cavity mean, the Laplace width,
        the rule's range in x and the cavity variance; and the node count."""
        eta_mean = mean + offset
        mode, ell = self._mode(count, eta_mean, var, power)
        shift = mode - eta_mean
        right = self._reach(count, mode, shift, var, power, 1.0)
        left = self._reach(count, mode, shift, var, power, -1.0)
        lo, hi = self._bend(count, power)
        lo, hi = np.maximum(lo, mode - left), np.minimum(hi, mode + right)
        reach = np.where(lo <= hi, np.maximum(np.abs(lo - mode), np.abs(hi - mode)), 0.0)
        step = np.minimum(_BULK_STEP, _BEND_SPACING / np.hypot(ell, reach))
        x_lo, x_hi = -np.arcsinh(left / ell), np.arcsinh(right / ell)
        nodes = np.clip(np.ceil((x_hi - x_lo) / step) + 1, _MIN_NODES, _MAX_NODES)
        levels = np.minimum(2 ** np.ceil(np.log2(nodes)), _MAX_NODES).astype(int)
        return (count, mode, shift, ell, x_lo, x_hi, var), levels

    def _nodes(self, site: tuple[Array, ...], power: float, n_nodes: int) -> _Nodes:
        """The rule with ``n_nodes`` nodes for the sites ``site`` (from :meth:`_rule`)."""
        count, mode, shift, ell, x_lo, x_hi, var = site
        t = np.linspace(0.0, 1.0, n_nodes)
        step = (x_hi - x_lo)[..., None] / (n_nodes - 1)
        x = x_lo[..., None] + (x_hi - x_lo)[..., None] * t
        d = ell[..., None] * np.sinh(x)
        eta = mode[..., None] + d
        e = shift[..., None] + d  # offset from the cavity mean
        with np.errstate(over="ignore"):
            log_terms = (
                np.log(step * ell[..., None] * np.cosh(x))
                + power * self._log_pmf(count[..., None], eta)
                - (0.5 / var[..., None]) * e * e
            )
        log_z = logsumexp(log_terms, axis=-1)
        weights = np.exp(log_terms - log_z[..., None])
        return _Nodes(count, mode, eta, d, weights, log_z - 0.5 * np.log(2.0 * np.pi * var), var, shift)

    def _tilted_sums(
        self, y: Array, mean: Array, var: Array, power: float, reduce: Callable[[_Nodes], tuple[Array, ...]]
    ) -> tuple[Array, ...]:
        """``reduce(nodes)`` per site, the sites integrated in groups of equal node count."""
        split = split_targets(y, mean, var)
        shape, size = split[0].shape, split[0].size
        site, levels = self._rule(*(np.ravel(a) for a in split), power)
        outs: list[Array] = []
        for level in np.unique(levels) if size else [_MIN_NODES]:
            group = np.flatnonzero(levels == level)
            for idx in np.array_split(group, max(1, -(-group.size * int(level) // _CHUNK))):
                part = reduce(self._nodes(tuple(a[idx] for a in site), power, int(level)))
                if not outs:
                    outs = [np.empty((size, *np.shape(p)[1:])) for p in part]
                for out, p in zip(outs, part, strict=True):
                    out[idx] = p
        return tuple(np.reshape(out, shape + np.shape(out)[1:]) for out in outs)

    def _derivatives(self, nodes: _Nodes, power: float) -> tuple[Array, Array, Array, Array]:
        """``dlog Z``, ``d2log Z`` and the tilted's mean offset from the mode and variance."""
        w, d, var = nodes.weights, nodes.d, nodes.var
        d_mean = np.sum(w * d, axis=-1)
        t_var = np.sum(w * (d - d_mean[..., None]) ** 2, axis=-1)
        d1, d2 = self._dlog_pmf(nodes.count[..., None], nodes.eta)
        used = w > 0.0  # (where the likelihood underflowed its derivatives may be infinite)
        d1, d2 = np.where(used, d1, 0.0), np.where(used, d2, 0.0)
        g1 = power * np.sum(w * d1, axis=-1)
        g2 = np.sum(w * (power * d2 + (power * d1 - g1[..., None]) ** 2), axis=-1)
        mode_d2 = self._dlog_pmf(nodes.count, nodes.mode)[1]
        narrow = var * power * np.abs(mode_d2) < 1.0
        dlog_z = np.where(narrow, g1, (nodes.shift + d_mean) / var)
        d2log_z = np.where(narrow, g2, (t_var - var) / var**2)
        return dlog_z, d2log_z, d_mean, t_var

    #: whether -d2 log p / d eta2 grows to the right (the Poisson's e^eta; counts_on's reach)
    curved_right: ClassVar[bool] = False

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        return self._log_z_in(np, y, mean, var, power)

    def _log_z_in(self, xp: ModuleType, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        """The tilted integral: on numpy the adaptive rule (module docstring), elsewhere the fixed-size one of
        :mod:`~relaxep.likelihoods.counts_on` (where :attr:`tilted_on_device`); ``y`` as :func:`split_targets`."""
        reduce = lambda nodes: (nodes.log_z, *self._derivatives(nodes, power)[:2])  # noqa: E731
        fixed = partial(count_log_z_on, xp, self, y, mean, var, power)
        return adaptive_or_fixed(xp, lambda: TiltedLogZ(*self._tilted_sums(y, mean, var, power, reduce)), fixed)

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        def reduce(nodes: _Nodes) -> tuple[Array]:
            return (np.sum(nodes.weights * self._log_pmf(nodes.count[..., None], nodes.eta), axis=-1),)

        return self._tilted_sums(y, mean, var, 1.0, reduce)[0]

    def _tilted_cumulants(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        def reduce(nodes: _Nodes) -> tuple[Array, ...]:
            dlog_z, d2log_z, d_mean, _ = self._derivatives(nodes, 1.0)
            c = nodes.d - d_mean[..., None]
            wc2 = nodes.weights * c * c
            k3, m4 = np.sum(wc2 * c, axis=-1), np.sum(wc2 * c * c, axis=-1)
            k2 = nodes.var + nodes.var**2 * d2log_z
            return nodes.var * dlog_z, k2, k3, m4 - 3.0 * np.sum(wc2, axis=-1) ** 2

        shift, k2, k3, k4 = self._tilted_sums(y, mean, var, 1.0, reduce)
        return np.broadcast_to(mean, shift.shape) + shift, k2, k3, k4

    def dlog_z_dtheta(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""Gradient of :math:`\log Z` in :attr:`theta`, :math:`E_{\hat p}[\partial_\theta \log p(y|f)]`.

        Shape ``(..., n_dims)``.  Overrides the base class's, which broadcasts ``y`` against the cavity as it
        is (pairs would not).
        """
        y, mean, var = _as_floats(y, mean, var)
        count = split_targets(y, mean, var)[0]
        if self.n_dims == 0:
            return np.zeros((*count.shape, 0))
        return self._dlog_z_dtheta(y, mean, var)

    def _dlog_z_dtheta(self, y: Array, mean: Array, var: Array) -> Array:
        def reduce(nodes: _Nodes) -> tuple[Array]:
            grad = self._dlog_pmf_dtheta(nodes.count[..., None], nodes.eta)
            return (np.sum(nodes.weights[..., None] * grad, axis=-2),)

        return self._tilted_sums(y, mean, var, 1.0, reduce)[0]


def read_rows(likelihood: Likelihood, y: ArrayLike, log_exposure: ArrayLike | None, what: str = "exposure") -> Array:
    """An estimator's targets for a likelihood of rows ``[count, log exposure]`` (a binomial's ``[successes, log
    trials]``): the rows as ``y`` holds them, or its vector with each row's ``log_exposure`` beside it, checked
    (:meth:`Likelihood.check_targets`); a ``ValueError`` naming ``y`` for targets of another form, or naming
    ``what`` where both ``y``'s rows and ``log_exposure`` give it."""
    arr = np.asarray(y, dtype=float)
    if arr.ndim == 2 and arr.shape[1] == 2:
        if log_exposure is not None:
            raise ValueError(f"{what}: y's rows [count, log {what}] already give it; give one or the other")
        likelihood.check_targets(arr)
        return arr
    if arr.ndim == 2 and arr.shape[1] > 1:
        raise ValueError(
            f"y has {arr.shape[1]} outputs: with {likelihood!r} fit one model per output (multi-output y needs the "
            "dense default Gaussian model)"
        )
    values = arr.reshape(-1)
    rows = values if log_exposure is None else np.column_stack([values, log_exposure])
    likelihood.check_targets(rows)
    return rows
