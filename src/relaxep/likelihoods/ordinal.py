r"""The ordinal probit likelihood of Chu & Ghahramani (2005) for :math:`K` ordered classes.

Class :math:`k \in \{0, \dots, K-1\}` is observed when the noisy latent :math:`f + \epsilon`,
:math:`\epsilon \sim N(0, \sigma^2)`, falls between two of the cut-points
:math:`b_0 < b_1 < \dots < b_{K-2}`:

.. math::
    p(y = k | f) = \Phi\Big(\frac{b_k - f}{\sigma}\Big) - \Phi\Big(\frac{b_{k-1} - f}{\sigma}\Big),
    \qquad b_{-1} = -\infty,\ b_{K-1} = +\infty,

so class :math:`k` is the interval :math:`(b_{k-1}, b_k]` and the first and last classes have one finite
cut-point each (Chu & Ghahramani 2005, "Gaussian processes for ordinal regression", JMLR 6, eq. 4).
Under a cavity :math:`N(f | \mu, v)` at power 1, with :math:`s = \sqrt{\sigma^2 + v}` and
:math:`z_j = (b_j - \mu)/s`,

.. math::
    Z = \Phi(z_k) - \Phi(z_{k-1}),\qquad
    \partial_\mu \log Z = \frac{N(z_{k-1}) - N(z_k)}{s Z},\qquad
    \partial^2_\mu \log Z = \frac{z_{k-1} N(z_{k-1}) - z_k N(z_k)}{s^2 Z} - (\partial_\mu \log Z)^2,

the moments of a truncated normal, each evaluated without cancellation by :mod:`relaxep.likelihoods.truncated_normal`
(written once in the array namespace: :meth:`OrdinalProbit._log_z_in`, numpy on the host and another array library
on its device).  Other powers integrate the log-concave
tilted :math:`p(y|f)^u N(f | \mu, v)` by the house's sinh-mapped Gauss-Legendre panels
(:mod:`relaxep.likelihoods._panels`), centred on its mode and on the cut-points within its reach.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike
from sklearn.gaussian_process.kernels import Hyperparameter

from relaxep._typing import Array
from relaxep._validation import check_positive_number, check_target_vector
from relaxep._xp import adaptive_or_fixed
from relaxep.likelihoods._hyperparameters import ValueEquality
from relaxep.likelihoods._panels import node_levels, split_gap, two_centre_rule
from relaxep.likelihoods.base import Likelihood, TiltedLogZ, check_bounds, refuse_off_host
from relaxep.likelihoods.truncated_normal import class_interval, interval_terms

__all__ = ["OrdinalProbit"]

_TAIL = 40.0  # the rule covers the tilted down to exp(-40) of its density at the mode
_NEWTON_ITERATIONS = 60
_AT_ONE_ONLY = "OrdinalProbit's tilted log Z on a device is its closed form at u = 1 only"
_Reduce = Callable[..., tuple[Array, ...]]


class OrdinalProbit(ValueEquality, Likelihood):
    r"""Ordinal regression's probit likelihood (Chu & Ghahramani 2005): :math:`K` ordered classes.

    .. math::
        p(y = k | f) = \Phi((b_k - f)/\sigma) - \Phi((b_{k-1} - f)/\sigma),
        \qquad b_{-1} = -\infty,\ b_{K-1} = \infty.

    Parameters
    ----------
    cut_points : array_like of shape (K - 1,) or None
        The strictly increasing, finite cut-points :math:`b_0 < \dots < b_{K-2}` (at least one: two
        classes); class :math:`k` is :math:`(b_{k-1}, b_k]`.  ``None``: not yet known; an estimator
        sets them from the class count (``set_params``) before the likelihood is used.
    noise : float
        The standard deviation :math:`\sigma > 0` of the latent noise (not a variance).
    noise_bounds : pair of float or "fixed"
        Bounds for learning ``noise``.
    cut_points_bounds : pair of pairs or "fixed"
        ``((low, high), (gap_low, gap_high))``: bounds of :math:`b_0` (a real, learned as it is)
        and of each increment :math:`b_j - b_{j-1} > 0` (learned in log space).

    Notes
    -----
    :attr:`theta` is :math:`(b_0, \log(b_1 - b_0), \dots, \log(b_{K-2} - b_{K-3}), \log\sigma)`, less
    the fixed blocks: the order of the cut-points holds for every :math:`\theta`.  :attr:`bounds`
    are those of :math:`\theta` (``low, high`` for :math:`b_0` itself, logarithms for the rest).
    """

    hyperparameter_names = ("cut_points", "noise")

    def __init__(
        self,
        cut_points: ArrayLike | None = None,
        noise: float = 1.0,
        noise_bounds: tuple[float, float] | str = (1e-2, 1e2),
        cut_points_bounds: tuple[tuple[float, float], tuple[float, float]] | str = ((-10.0, 10.0), (1e-2, 1e2)),
    ) -> None:
        check_positive_number(noise, "noise")
        check_bounds(noise_bounds, "noise_bounds")
        if not (isinstance(cut_points_bounds, str) and cut_points_bounds == "fixed"):
            try:
                (low, high), gaps = cut_points_bounds  # type: ignore[misc]
                low, high = float(low), float(high)
            except (TypeError, ValueError):
                raise ValueError(
                    "cut_points_bounds must be 'fixed' or ((low, high), (gap_low, gap_high)), "
                    f"got {cut_points_bounds!r}"
                ) from None
            if not (np.isfinite(low) and np.isfinite(high) and low <= high):
                raise ValueError(
                    f"cut_points_bounds' first pair must be finite with low <= high, got {cut_points_bounds!r}"
                )
            check_bounds(gaps, "cut_points_bounds' gap pair")
        self._b: Array | None = None
        if cut_points is not None:
            try:
                b = np.asarray(cut_points, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"cut_points must be an increasing array of reals, got {cut_points!r}") from None
            if b.ndim != 1 or b.size < 1:
                raise ValueError(f"cut_points must be a 1-d array of at least one cut-point, got {cut_points!r}")
            if not np.all(np.isfinite(b)) or np.any(np.diff(b) <= 0.0):
                raise ValueError(f"cut_points must be finite and strictly increasing, got {cut_points!r}")
            self._b = b
        self.cut_points = cut_points  # stored as given (scikit-learn's clone checks identity)
        self.noise = noise
        self.noise_bounds = noise_bounds
        self.cut_points_bounds = cut_points_bounds

    # ------------------------------------------------------------ hyperparameters
    @property
    def n_classes(self) -> int:
        """:math:`K`, one more than the cut-points."""
        return self._cuts().size + 1

    def _cuts(self) -> Array:
        if self._b is None:
            raise ValueError(
                "cut_points is None: give the K - 1 cut-points (OrdinalProbit(cut_points=...) or "
                "set_params(cut_points=...)) before using the likelihood"
            )
        return self._b

    def _learned(self) -> tuple[bool, bool]:
        fixed = [isinstance(v, str) for v in (self.cut_points_bounds, self.noise_bounds)]
        return not fixed[0], not fixed[1]

    @property
    def hyperparameters(self) -> list[Hyperparameter]:
        """``cut_points`` (a vector; bounds of :math:`b_0` then of the increments) and ``noise``."""
        m = self._cuts().size
        cut_bounds: Any = self.cut_points_bounds
        if not isinstance(cut_bounds, str):
            cut_bounds = np.array([cut_bounds[0]] + [cut_bounds[1]] * (m - 1), dtype=float)
        return [
            Hyperparameter("cut_points", "numeric", cut_bounds, m),
            Hyperparameter("noise", "numeric", self.noise_bounds),
        ]

    @property
    def n_dims(self) -> int:
        """The number of learned entries of :attr:`theta`."""
        return sum(h.n_elements for h in self.hyperparameters if not h.fixed)

    @property
    def theta(self) -> Array:
        r""":math:`(b_0, \log(b_j - b_{j-1})_{j \ge 1}, \log\sigma)`, the learned blocks only."""
        b, (cuts, noise) = self._cuts(), self._learned()
        parts = [b[:1], np.log(np.diff(b))] if cuts else []
        return np.concatenate([*parts, np.log([float(self.noise)] if noise else np.zeros(0))])

    @property
    def bounds(self) -> Array:
        """Bounds of :attr:`theta`, shape ``(n_dims, 2)``: :math:`b_0`'s as given, the others' logarithms."""
        m, (cuts, noise) = self._cuts().size, self._learned()
        rows = []
        if cuts:
            first, gaps = self.cut_points_bounds
            rows = [np.asarray(first, dtype=float)] + [np.log(np.asarray(gaps, dtype=float))] * (m - 1)
        if noise:
            rows.append(np.log(np.asarray(self.noise_bounds, dtype=float)))
        return np.array(rows, dtype=float).reshape(-1, 2)

    def clone_with_theta(self, theta: ArrayLike) -> OrdinalProbit:
        """A copy with the learned blocks set from ``theta`` (layout of :attr:`theta`)."""
        theta = np.asarray(theta, dtype=float).ravel()
        if theta.shape != (self.n_dims,):
            raise ValueError(f"theta must have {self.n_dims} entries, got shape {theta.shape}")
        m, (cuts, noise) = self._cuts().size, self._learned()
        params = self.get_params()
        if cuts:
            b = theta[0] + np.concatenate([[0.0], np.cumsum(np.exp(theta[1:m]))])
            params["cut_points"] = tuple(float(v) for v in b)
        if noise:
            params["noise"] = float(np.exp(theta[-1]))
        return type(self)(**params)

    # ------------------------------------------------------------ targets and pointwise
    kind: ClassVar[str] = "ordinal"
    is_density: ClassVar[bool] = False  # P(y = k | f): a probability
    class_targets: ClassVar[bool] = True

    def check_targets(self, y: ArrayLike, n: int | None = None, both_classes: bool = True) -> Array:
        """Class indices ``0, ..., K-1`` as floats (two distinct ones unless ``both_classes=False``).

        While ``cut_points`` is ``None`` any non-negative integers pass (the class count is the estimator's).
        """
        values = check_target_vector(y, n, "labels", "the class indices 0, ..., K-1")
        top = np.inf if self._b is None else self._b.size
        bad = (values != np.round(values)) | (values < 0) | (values > top)
        if np.any(bad):
            classes = "0, ..., K-1" if self._b is None else f"0, ..., {self._b.size}"
            raise ValueError(f"y must hold the class indices {classes}; found {np.unique(values[bad])[:5].tolist()}")
        if both_classes and np.unique(values).size < 2:
            raise ValueError(f"y holds one class only ({values[0]:.0f}); ordinal regression needs two or more")
        return values

    def _edges(self, y: Array) -> tuple[Array, Array, Array]:
        """The class index and its interval's ends :math:`b_{k-1}, b_k` (``ValueError`` naming ``y``)."""
        b = self._cuts()
        y = np.asarray(y)
        if not np.all(np.isin(y, np.arange(b.size + 1))):
            raise ValueError(f"y must hold the class indices 0, ..., {b.size}; found {np.unique(y)[:5].tolist()}")
        k = y.astype(np.intp)
        ext = np.concatenate([[-np.inf], b, [np.inf]])
        return k, ext[k], ext[k + 1]

    def _pointwise(self, lo_b: Array, hi_b: Array, f: Array) -> tuple[Array, Array, Array]:
        r""":math:`\log p(y|f)` and its first two derivatives in :math:`f`."""
        sigma = float(self.noise)
        log_p, _, _, diff, _, curv = interval_terms(np, (lo_b - f) / sigma, (hi_b - f) / sigma)
        return log_p, diff / sigma, curv / sigma**2

    def _log_lik(self, y: Array, f: Array) -> Array:
        _, lo_b, hi_b = self._edges(y)
        return self._pointwise(lo_b, hi_b, f)[0]

    # ------------------------------------------------------------ the tilted integrals
    closed_form_on_device: ClassVar[bool] = True

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        self._edges(y)  # (the class indices checked)
        return self._log_z_in(np, y, mean, var, power)

    def _log_z_in(self, xp: ModuleType, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        r""":meth:`log_z` in ``xp``: the closed form at ``u = 1`` (module docstring), else the panels (numpy only)."""
        if power != 1.0:
            panels = partial(self._tilted_sums, y, mean, var, power, self._derivative_sums)
            return TiltedLogZ(*adaptive_or_fixed(xp, panels, refuse_off_host(_AT_ONE_ONLY)))
        lo_b, hi_b = class_interval(xp, self._cuts(), *xp.broadcast_arrays(y, mean))
        s = xp.sqrt(float(self.noise) ** 2 + var)
        log_p, _, _, diff, _, curv = interval_terms(xp, (lo_b - mean) / s, (hi_b - mean) / s)
        return TiltedLogZ(log_p, diff / s, curv / s**2)

    def _derivative_sums(
        self, e: Array, w: Array, l0: Array, l1: Array, l2: Array, log_z: Array, var: Array, power: float
    ) -> tuple[Array, Array, Array]:
        e_mean = np.sum(w * e, axis=-1)
        e_var = np.sum(w * (e - e_mean[..., None]) ** 2, axis=-1)
        g1 = power * np.sum(w * l1, axis=-1)
        g2 = np.sum(w * (power * l2 + (power * l1) ** 2), axis=-1) - g1**2
        narrow = var < float(self.noise) ** 2  # the moments' differences from the cavity's would cancel
        return log_z, np.where(narrow, g1, e_mean / var), np.where(narrow, g2, (e_var - var) / var**2)

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        return self._tilted_sums(y, mean, var, 1.0, lambda e, w, l0, *_: (np.sum(w * l0, axis=-1),))[0]

    def _tilted_cumulants(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        def sums(e: Array, w: Array, *_: Any) -> tuple[Array, ...]:
            e_mean = np.sum(w * e, axis=-1)
            d = e - e_mean[..., None]
            k2 = np.sum(w * d**2, axis=-1)
            return e_mean, k2, np.sum(w * d**3, axis=-1), np.sum(w * d**4, axis=-1) - 3.0 * k2**2

        shift, k2, k3, k4 = self._tilted_sums(y, mean, var, 1.0, sums)
        return np.broadcast_to(mean, shift.shape) + shift, k2, k3, k4

    def _tilted_sums(self, y: Array, mean: Array, var: Array, power: float, reduce: _Reduce) -> tuple[Array, ...]:
        """``reduce(e, w, l, l', l'', log_z, var, power)`` per site over the rule's nodes (``e = f - mu``), the
        sites integrated in groups of equal panel size (:func:`~relaxep.likelihoods._panels.node_levels`)."""
        _, lo_b, hi_b = self._edges(y)
        shape = np.broadcast_shapes(np.shape(y), np.shape(mean), np.shape(var))
        lo_b, hi_b, mean, var = (a.ravel() for a in np.broadcast_arrays(lo_b, hi_b, mean, var))
        sites = self._geometry(lo_b, hi_b, mean, var, power)
        levels = np.maximum(node_levels(*sites[3:9]), node_levels(*sites[9:15]))
        outs: list[Array] = []
        for level in np.unique(levels):
            idx = np.flatnonzero(levels == level)
            part = reduce(*self._rule(*(a[idx] for a in (lo_b, hi_b, mean, var, *sites)), power=power), var[idx], power)
            if not outs:
                outs = [np.empty(lo_b.size) for _ in part]
            for out, q in zip(outs, part, strict=True):
                out[idx] = q
        return tuple(out.reshape(shape) for out in outs)

    def _geometry(self, lo_b: Array, hi_b: Array, mean: Array, var: Array, power: float) -> tuple[Array, ...]:
        r"""The tilted's mode (safeguarded Newton in the bracket :math:`[\mu, \mu + v u\, l'(\mu)]`) and the
        two two-centre rules' centres, widths, gaps and reaches (mode and cut-points, sorted)."""
        _, d1, _ = self._pointwise(lo_b, hi_b, mean)
        end = mean + var * power * d1
        # the mode lies between the cavity's mean and the likelihood's maximum (log-concave): the interval's midpoint,
        # or 40 noise sds inside a one-sided class's edge; a far cavity (1e7, v 7e5) would bracket it by 1e16
        with np.errstate(invalid="ignore"):
            mid = 0.5 * (lo_b + hi_b)
            sigma = float(self.noise)
            down = np.where(np.isfinite(mid), mid, hi_b - 40.0 * sigma)
            up = np.where(np.isfinite(mid), mid, lo_b + 40.0 * sigma)
        end = np.where(end < mean, np.maximum(end, np.minimum(down, mean)), np.minimum(end, np.maximum(up, mean)))
        lo, hi = np.minimum(mean, end), np.maximum(mean, end)
        g = 0.5 * (lo + hi)
        for _ in range(_NEWTON_ITERATIONS):
            _, d1, d2 = self._pointwise(lo_b, hi_b, g)
            grad = power * d1 - (g - mean) / var
            lo, hi = np.where(grad > 0.0, g, lo), np.where(grad > 0.0, hi, g)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = g - grad / (power * d2 - 1.0 / var)
            g_new = np.where((step >= lo) & (step <= hi), step, 0.5 * (lo + hi))
            done = np.all(np.abs(g_new - g) <= 1e-10 * (np.abs(g) + np.sqrt(var)))
            g = g_new
            if done:
                break
        _, _, d2 = self._pointwise(lo_b, hi_b, g)
        w_mode = 1.0 / np.sqrt(np.maximum(1.0 / var - power * d2, 1.0 / var))  # Laplace's sd
        w_cut = 1.0 / np.sqrt(1.0 / var + power / float(self.noise) ** 2)  # bounds the curvature anywhere
        reach = np.sqrt(2.0 * _TAIL * var)  # the log tilted falls at least (f - mode)^2 / 2v
        inside = [np.abs(b - g) < reach for b in (lo_b, hi_b)]
        # an edge within reach leaves features of its own width near the mode too (its tail's curvature)
        w_mode = np.where(inside[0] | inside[1], np.minimum(w_mode, w_cut), w_mode)
        centres = [g, np.where(inside[0], lo_b, g), np.where(inside[1], hi_b, g)]
        widths = [w_mode, np.where(inside[0], w_cut, w_mode), np.where(inside[1], w_cut, w_mode)]
        order = np.argsort(np.stack(centres, axis=-1), axis=-1)
        (p1, p2, p3), (w1, w2, w3) = (
            np.moveaxis(np.take_along_axis(np.stack(a, axis=-1), order, axis=-1), -1, 0) for a in (centres, widths)
        )
        zero = np.zeros_like(g)
        ga1, ga2 = split_gap(w1, w2, p2 - p1)
        gb1, gb2 = split_gap(w2, w3, p3 - p2)
        return (p1, p2, p3, w1, w2, ga1, ga2, p1 - (g - reach), zero, w2, w3, gb1, gb2, zero, g + reach - p3)

    def _rule(
        self, lo_b: Array, hi_b: Array, mean: Array, var: Array, *sites: Array, power: float
    ) -> tuple[Array, ...]:
        r"""Offsets ``e = f - mu``, normalised weights, :math:`\log p` and its derivatives at the nodes, ``log Z``."""
        p1, p2, p3 = sites[:3]
        es, jacs = [], []
        for c1, c2, rule in ((p1, p2, sites[3:9]), (p2, p3, sites[9:15])):
            disp, second, jac = two_centre_rule(*rule)
            es.append(np.where(second, (c2 - mean)[..., None], (c1 - mean)[..., None]) + disp)
            jacs.append(jac)
        e, jac = np.concatenate(es, axis=-1), np.concatenate(jacs, axis=-1)
        l0, l1, l2 = self._pointwise(lo_b[..., None], hi_b[..., None], mean[..., None] + e)
        with np.errstate(divide="ignore"):
            log_terms = np.log(jac) + power * l0 - 0.5 * e**2 / var[..., None]
        top = np.max(log_terms, axis=-1, keepdims=True)
        terms = np.exp(log_terms - top)
        total = np.sum(terms, axis=-1)
        log_z = top[..., 0] + np.log(total) - 0.5 * np.log(2.0 * np.pi * var)
        return e, terms / total[..., None], l0, l1, l2, log_z

    # ------------------------------------------------------------ evidence gradient
    def _theta_columns(self, k: Array, r_lo: Array, r_hi: Array, moment: Array, scale: Array) -> Array:
        r""":math:`\partial \log P / \partial\theta` for :math:`P = \Phi((b_k - m)/S) - \Phi((b_{k-1} - m)/S)`,
        :math:`S^2 = \sigma^2 + v`: :math:`\partial_{b_k} = N(z_k)/(SP)`, :math:`\partial_{b_{k-1}} = -N(z_{k-1})/(SP)`,
        chained through :math:`b_j = \theta_0 + \sum_{i \le j} e^{\theta_i}`, and
        :math:`\partial_{\log\sigma} = (\sigma/S)^2 (z_{k-1} N(z_{k-1}) - z_k N(z_k))/P`."""
        b, (cuts, noise) = self._cuts(), self._learned()
        cols = []
        if cuts:
            j = np.arange(b.size)
            kk = k[..., None]
            grad_b = np.where(j == kk - 1, -r_lo[..., None], 0.0) + np.where(j == kk, r_hi[..., None], 0.0)
            grad_b = grad_b / scale[..., None]
            tail = np.cumsum(grad_b[..., ::-1], axis=-1)[..., ::-1]  # sum over j >= i
            cols.append(tail[..., :1])
            cols.append(tail[..., 1:] * np.diff(b))
        if noise:
            cols.append(((float(self.noise) / scale) ** 2 * moment)[..., None])
        return np.concatenate(cols, axis=-1)

    def _dlog_z_dtheta(self, y: Array, mean: Array, var: Array) -> Array:
        k, lo_b, hi_b = self._edges(y)
        s = np.sqrt(float(self.noise) ** 2 + var)
        _, r_lo, r_hi, _, moment, _ = interval_terms(np, (lo_b - mean) / s, (hi_b - mean) / s)
        return self._theta_columns(*np.broadcast_arrays(k, r_lo, r_hi, moment, s))

    def _dlog_lik_dtheta(self, y: Array, f: Array) -> Array:
        k, lo_b, hi_b = self._edges(y)
        sigma = np.full(np.shape(f), float(self.noise))
        _, r_lo, r_hi, _, moment, _ = interval_terms(np, (lo_b - f) / sigma, (hi_b - f) / sigma)
        return self._theta_columns(*np.broadcast_arrays(k, r_lo, r_hi, moment, sigma))

    # ------------------------------------------------------------ predictive
    def class_probabilities(self, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""The predictive class probabilities at a latent :math:`N(\mu_*, s^2_*)`.

        .. math:: P(y_* = k) = \Phi((b_k - \mu_*)/S) - \Phi((b_{k-1} - \mu_*)/S),\qquad S^2 = \sigma^2 + s^2_*.

        Shape ``(..., K)``: a last axis over the classes added to ``mean``'s and ``var``'s broadcast shape.
        """
        mean, var = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(var, dtype=float))
        ext = np.concatenate([[-np.inf], self._cuts(), [np.inf]])
        s = np.sqrt(float(self.noise) ** 2 + var)[..., None]
        return np.exp(interval_terms(np, (ext[:-1] - mean[..., None]) / s, (ext[1:] - mean[..., None]) / s)[0])

    def loo_tail(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, pointwise: ArrayLike) -> Array:
        r"""Each row's leave-one-out tail probability: of the classes no more probable than the observed one,
        :math:`\sum_k P_k [P_k \le P_{y_i}]`, :math:`P_k` the leave-one-out class probabilities
        (:meth:`class_probabilities` at the cavity); ``pointwise`` unused."""
        proba = self.class_probabilities(mean, var)
        observed = proba[np.arange(proba.shape[0]), np.asarray(y, dtype=float).astype(int)]
        return np.sum(np.where(proba <= observed[:, None], proba, 0.0), axis=1)

    def predict(self, mean: ArrayLike, var: ArrayLike) -> Array:
        """The predictive class probabilities, :meth:`class_probabilities`."""
        return self.class_probabilities(mean, var)

    def predict_y(self, mean: ArrayLike, var: ArrayLike) -> tuple[Array, Array]:
        r"""Mean and variance of the predictive class index, :math:`\sum_k k\,P(y_* = k)` and its spread."""
        p = self.class_probabilities(mean, var)
        k = np.arange(p.shape[-1], dtype=float)
        m = p @ k
        return m, np.sum(p * (k - m[..., None]) ** 2, axis=-1)
