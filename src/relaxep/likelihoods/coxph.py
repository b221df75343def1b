r"""The proportional-hazards likelihood with a piecewise-constant baseline hazard (the piecewise-exponential model).

Breaks :math:`0 = s_0 < s_1 < \dots < s_{K-1} < s_K = \infty` (in time units) and hazards :math:`\lambda_k > 0` on
:math:`I_k = [s_{k-1}, s_k)` give the baseline cumulative hazard

.. math::
    \Lambda_0(t) = \sum_k \lambda_k\,|[0, t] \cap I_k| = \lambda_k t + d_k \quad (t \in I_k),\qquad
    d_k = \Lambda_0(s_{k-1}) - \lambda_k s_{k-1},

and with the log relative hazard :math:`f`, :math:`S(t | f) = \exp(-\Lambda_0(t) e^f)` (Friedman 1982, "Piecewise
exponential models for survival data with covariates", Ann. Statist. 10; GPstuff's ``lik_coxph`` is a Cox model
with a piecewise log-constant baseline, Vanhatalo et al. 2013, JMLR 14).  In the terms of
:mod:`relaxep.likelihoods.survival`: the minimum-Gumbel noise, :math:`\beta = 1` and

.. math::
    \alpha(b) = \log\Lambda_0(e^b) = \log\lambda_k + b + \operatorname{log1p}\big(d_k e^{-b}/\lambda_k\big),\qquad
    \log\alpha'(b) = \log\lambda_k + b - \alpha(b),

exact at the smallest times (:math:`d_1 = 0`: :math:`\alpha = \log\lambda_1 + b`) and free of overflow at the
largest (:math:`e^{-b} \le 1/s_{k-1}`).  An event at :math:`t` then has :math:`\log p = z - e^z + \log\alpha'(b) - b
= f + \log\lambda(t) - \Lambda_0(t) e^f`, the density :math:`h(t) S(t)` of :math:`T`.

The hazards are learned (:math:`\theta_k = \log\lambda_k`).  With the fractions :math:`w_k(t) = \lambda_k
E_k(t)/\Lambda_0(t)` of the cumulative hazard from each interval (:math:`E_k(t) = |[0, t] \cap I_k|`, the exposure),
:math:`\partial z(b)/\partial\theta_k = w_k(e^b)`, so

.. math::
    \frac{\partial\log p}{\partial\theta_k} = [t \in I_k] - w_k(t)\,e^{z}\ \text{(event)},\qquad
    \frac{w_k(u)\,p_\epsilon(z_\upsilon) - w_k(l)\,p_\epsilon(z_\ell)}{F(z_\upsilon) - F(z_\ell)}\ \text{(censored)},

a right-censored row's :math:`-\lambda_k E_k(l) e^f`.  :meth:`CoxPH.with_baseline` places the breaks at quantiles
of the event times and starts the hazards at the piecewise-exponential maximum likelihood at :math:`f = 0`,
:math:`\hat\lambda_k = D_k/E_k` (events in :math:`I_k` over the exposure in :math:`I_k`; Friedman 1982, section 2),
refined by L-BFGS-B where rows are left- or interval-censored (no closed form there).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize
from sklearn.gaussian_process.kernels import Hyperparameter

from relaxep._typing import Array
from relaxep.likelihoods._hyperparameters import ValueEquality
from relaxep.likelihoods.base import check_bounds
from relaxep.likelihoods.survival import SurvivalLikelihood, interval_log_mass
from relaxep.likelihoods.survival_noise import GumbelMin, NoiseFamily
from relaxep.likelihoods.survival_targets import SurvivalRows

__all__ = ["CoxPH", "default_breaks", "default_n_intervals", "piecewise_exponential_mle"]

_Z_CAP = 700.0  # e^z below overflow in the gradients (the tilted weight is nil far before)


def _check_breaks(breaks: ArrayLike) -> Array:
    try:
        s = np.asarray(breaks, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"breaks must be an increasing array of positive times, got {breaks!r}") from None
    if s.ndim != 1:
        raise ValueError(f"breaks must be a 1-d array of the K - 1 interior breaks, got shape {s.shape}")
    if not np.all(np.isfinite(s)) or np.any(s <= 0.0) or np.any(np.diff(s) <= 0.0):
        raise ValueError(f"breaks must be finite, positive and strictly increasing, got {breaks!r}")
    return s


def _check_hazards(hazards: ArrayLike, n_intervals: int) -> Array:
    try:
        lam = np.asarray(hazards, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"hazards must be an array of {n_intervals} positive rates, got {hazards!r}") from None
    if lam.shape != (n_intervals,):
        raise ValueError(f"hazards must have one rate per interval ({n_intervals}: len(breaks) + 1), got {lam.shape}")
    if not np.all(np.isfinite(lam)) or np.any(lam <= 0.0):
        raise ValueError(f"hazards must be finite and positive, got {hazards!r}")
    return lam


def default_n_intervals(n_events: int) -> int:
    r"""``min(10, max(1, n_events // 10))``: about ten events per interval or more, so each hazard's estimate
    :math:`D_k/E_k` has a relative standard error near :math:`1/\sqrt{D_k} \le 0.32`, and ten intervals at most
    (past that the evidence, not more breaks, should carry the baseline's shape)."""
    return int(min(10, max(1, n_events // 10)))


def _observed_times(y: Array) -> Array:
    """The event times of rows ``y``; with no events, every finite bound (a censored study's only scale)."""
    lo, hi = y[:, 0], y[:, 1]
    times = np.exp(lo[lo == hi])
    if times.size == 0:
        times = np.exp(np.concatenate([lo[np.isfinite(lo)], hi[np.isfinite(hi)]]))
    return times


def default_breaks(y: ArrayLike, n_intervals: int | None = None) -> Array:
    """The ``n_intervals - 1`` interior breaks at the ``k / n_intervals`` quantiles of the event times of rows
    ``y`` ([log_lower, log_upper]); ``n_intervals`` by :func:`default_n_intervals` where ``None``; tied quantiles
    merged (fewer intervals)."""
    y = np.asarray(y, dtype=float)
    times = _observed_times(y)
    n_events = int(np.sum(y[:, 0] == y[:, 1]))
    k = default_n_intervals(n_events) if n_intervals is None else int(n_intervals)
    if k < 1:
        raise ValueError(f"n_intervals must be an integer >= 1, got {n_intervals!r}")
    if times.size == 0 or k == 1:
        return np.zeros(0)
    s = np.unique(np.quantile(times, np.arange(1, k) / k))
    return s[(s > 0.0) & np.isfinite(s)]


def _exposure(t: Array, breaks: Array) -> Array:
    r""":math:`E_k(t) = |[0, t] \cap I_k|`, a last axis over the intervals (``t`` finite, ``>= 0``)."""
    starts = np.concatenate([[0.0], breaks])
    widths = np.diff(np.concatenate([starts, [np.inf]]))
    return np.clip(t[..., None] - starts, 0.0, widths)


def piecewise_exponential_mle(y: ArrayLike, breaks: ArrayLike, floor: float = 1e-8) -> Array:
    r"""The piecewise-exponential maximum likelihood of the hazards at :math:`f = 0` (Friedman 1982):
    :math:`\hat\lambda_k = D_k/E_k`, the events in :math:`I_k` over the time at risk in it (events' and
    right-censored rows' times), floored at ``floor`` (an interval without events).  Rows ``y`` left- or
    interval-censored enter by maximising :math:`\sum_i\log p(y_i | 0)` in :math:`\log\lambda` from there."""
    y = np.asarray(y, dtype=float)
    s = _check_breaks(breaks)
    lo, hi = y[:, 0], y[:, 1]
    event, right = lo == hi, (hi == np.inf) & (lo != hi)
    known = event | right
    t = np.exp(lo[known])
    exposure = np.sum(_exposure(t, s), axis=0)
    k = np.searchsorted(s, np.exp(lo[event]), side="right")
    deaths = np.bincount(k, minlength=s.size + 1).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(exposure > 0.0, deaths / exposure, 0.0)
    lam = np.maximum(lam, floor)
    if np.all(known):
        return lam
    model = CoxPH(s, lam, hazards_bounds=(floor, 1e12))
    zero = np.zeros(y.shape[0])

    def objective(theta: Array) -> tuple[float, Array]:
        m = model.clone_with_theta(theta)
        return -float(np.sum(m.log_lik(y, zero))), -np.sum(m._dlog_lik_dtheta(y, zero), axis=0)

    fit = minimize(objective, np.log(lam), jac=True, method="L-BFGS-B", bounds=model.bounds)
    return np.exp(fit.x)


class CoxPH(ValueEquality, SurvivalLikelihood):
    r"""Proportional hazards with a piecewise-constant baseline: :math:`S(t | f) = \exp(-\Lambda_0(t) e^f)`
    (module docstring).

    Parameters
    ----------
    breaks : array_like of shape (K - 1,) or None
        The interior breaks :math:`0 < s_1 < \dots < s_{K-1}` of the baseline hazard, in time units (not log);
        empty for a constant hazard.  ``None``: not yet known (:meth:`with_baseline` sets them from the data).
    hazards : array_like of shape (K,) or None
        The baseline hazards :math:`\lambda_k > 0` on :math:`[s_{k-1}, s_k)`, the last to infinity, per unit time.
        ``None``: not yet known (:meth:`with_baseline`: the piecewise-exponential maximum likelihood).
    hazards_bounds : pair of float or "fixed"
        Bounds of every hazard, learned in log space.

    Notes
    -----
    :math:`f` is the log relative hazard: a larger :math:`f`, an earlier event (``risk_sign = +1``).  With
    ``K = 1`` the times are exponential, :class:`~relaxep.likelihoods.WeibullAFT` ``(shape=1)`` at the latent
    :math:`-(f + \log\lambda)`.  Targets: rows ``[log_lower, log_upper]`` (:mod:`relaxep.likelihoods.survival`).
    """

    hyperparameter_names = ("hazards",)
    risk_sign: ClassVar[float] = 1.0
    noise: ClassVar[NoiseFamily] = GumbelMin()

    def __init__(
        self,
        breaks: ArrayLike | None = None,
        hazards: ArrayLike | None = None,
        hazards_bounds: tuple[float, float] | str = (1e-8, 1e4),
    ) -> None:
        check_bounds(hazards_bounds, "hazards_bounds")
        self._s = None if breaks is None else _check_breaks(breaks)
        if hazards is not None and self._s is None:
            raise ValueError("hazards given without breaks: give breaks too (breaks=() for a constant hazard)")
        self._lam = None if hazards is None else _check_hazards(hazards, self._s.size + 1)  # type: ignore[union-attr]
        self.breaks, self.hazards, self.hazards_bounds = breaks, hazards, hazards_bounds  # as given (clone)

    # ------------------------------------------------------------ the baseline
    def _baseline(self) -> tuple[Array, Array]:
        if self._s is None or self._lam is None:
            raise ValueError(
                "breaks and hazards are None: give them (CoxPH(breaks=..., hazards=...)) or set them from the data "
                "with CoxPH().with_baseline(y)"
            )
        return self._s, self._lam

    @property
    def n_intervals(self) -> int:
        """:math:`K`, one more than the breaks."""
        return self._baseline()[1].size

    def with_baseline(self, y: ArrayLike, n_intervals: int | None = None) -> CoxPH:
        """A copy whose unknown ``breaks`` (:func:`default_breaks`) and ``hazards``
        (:func:`piecewise_exponential_mle`) are set from the rows ``y``; known ones are kept."""
        y = self.check_targets(y)
        breaks = default_breaks(y, n_intervals) if self._s is None else self._s
        hazards = piecewise_exponential_mle(y, breaks) if self._lam is None else self._lam
        if not isinstance(self.hazards_bounds, str):
            hazards = np.clip(hazards, *self.hazards_bounds)
        return type(self)(tuple(breaks.tolist()), tuple(hazards.tolist()), self.hazards_bounds)

    def start_from(self, rows: ArrayLike | SurvivalRows) -> CoxPH:
        """This likelihood where its baseline is known, else a copy with it set from the rows
        (:meth:`with_baseline`; a Dask fit's rows gathered)."""
        if self._lam is not None:
            return self
        return self.with_baseline(rows.gather() if isinstance(rows, SurvivalRows) else rows)

    def cumulative_hazard(self, t: ArrayLike) -> Array:
        r"""The baseline :math:`\Lambda_0(t)` at times ``t >= 0``."""
        s, lam = self._baseline()
        return _exposure(np.asarray(t, dtype=float), s) @ lam

    # ------------------------------------------------------------ hyperparameters
    @property
    def hyperparameters(self) -> list[Hyperparameter]:
        """``hazards``: a vector of :math:`K` rates, each within ``hazards_bounds``."""
        return [Hyperparameter("hazards", "numeric", self.hazards_bounds, self.n_intervals)]

    @property
    def n_dims(self) -> int:
        return 0 if isinstance(self.hazards_bounds, str) else self.n_intervals

    @property
    def theta(self) -> Array:
        r""":math:`\log\lambda_k`, where learned."""
        return np.zeros(0) if self.n_dims == 0 else np.log(self._baseline()[1])

    @property
    def bounds(self) -> Array:
        if self.n_dims == 0:
            return np.zeros((0, 2))
        return np.tile(np.log(np.asarray(self.hazards_bounds, dtype=float)), (self.n_dims, 1))

    def clone_with_theta(self, theta: ArrayLike) -> CoxPH:
        """A copy with the hazards :math:`e^\\theta` (where learned)."""
        theta = np.asarray(theta, dtype=float).ravel()
        if theta.shape != (self.n_dims,):
            raise ValueError(f"theta must have {self.n_dims} entries (log hazards), got shape {theta.shape}")
        params: dict[str, Any] = self.get_params()
        if self.n_dims:
            params["hazards"] = tuple(float(v) for v in np.exp(theta))
        return type(self)(**params)

    # ------------------------------------------------------------ the transform
    @property
    def _beta(self) -> float:
        return 1.0

    def _pieces(self) -> tuple[Array, Array, Array, Array]:
        r"""The breaks, :math:`\log\lambda_k`, :math:`d_k/\lambda_k` and :math:`\log\Lambda_0(s_k)` (``k < K``)."""
        s, lam = self._baseline()
        starts = np.concatenate([[0.0], s])
        cum = np.concatenate([[0.0], np.cumsum(lam[:-1] * np.diff(starts))])  # Lambda_0(s_{k-1})
        with np.errstate(divide="ignore"):
            return s, np.log(lam), cum / lam - starts, np.log(cum[1:])

    def _alpha(self, b: Array) -> Array:
        s, log_lam, shift, _ = self._pieces()
        b = np.asarray(b, dtype=float)
        k = np.searchsorted(np.log(s), b, side="right")
        with np.errstate(over="ignore"):
            tail = np.where(k == 0, 0.0, np.log1p(shift[k] * np.exp(-np.where(k == 0, 0.0, b))))
        return log_lam[k] + b + tail

    def _log_dalpha(self, b: Array) -> Array:
        s, log_lam, _, _ = self._pieces()
        b = np.asarray(b, dtype=float)
        return log_lam[np.searchsorted(np.log(s), b, side="right")] + b - self._alpha(b)

    def _alpha_inverse(self, a: Array) -> Array:
        _, log_lam, shift, log_cum = self._pieces()
        a = np.asarray(a, dtype=float)
        k = np.searchsorted(log_cum, a, side="right")
        with np.errstate(over="ignore"):
            tail = np.where(k == 0, 0.0, np.log1p(-shift[k] * np.exp(log_lam[k] - np.where(k == 0, 0.0, a))))
        return a - log_lam[k] + tail

    def _weights(self, b: Array) -> Array:
        r""":math:`w_k(e^b) = \lambda_k E_k(e^b)/\Lambda_0(e^b)`, a last axis over the intervals (``b`` finite; all in
        the first interval where :math:`e^b` underflows)."""
        s, lam = self._baseline()
        share = _exposure(np.exp(np.minimum(b, _Z_CAP)), s) * lam
        total = np.sum(share, axis=-1, keepdims=True)
        with np.errstate(invalid="ignore"):
            return np.where(total > 0.0, share / total, np.arange(lam.size) == 0)

    def _dlog_lik_dtheta(self, y: Array, f: Array) -> Array:
        if not self.n_dims:
            return np.zeros((*np.shape(f), 0))
        f, y = np.asarray(f, dtype=float), np.asarray(y, dtype=float)
        nodes = f.ndim > y.ndim - 1
        lo, hi = self._rows(y, f, nodes=nodes)
        s = self._baseline()[0]
        event = lo == hi
        finite_lo, finite_hi = np.isfinite(lo), np.isfinite(hi)
        z_lo = np.where(finite_lo, self._z(np.where(finite_lo, lo, 0.0), f), -np.inf)
        z_hi = np.where(finite_hi, self._z(np.where(finite_hi, hi, 0.0), f), np.inf)
        # the rows' own factors (not the nodes'): weights at each end, the event's interval
        row_b = np.where(np.isfinite(y), y, 0.0)
        w_lo, w_hi = self._weights(row_b[..., 0]), self._weights(row_b[..., 1])
        here = np.arange(s.size + 1) == np.searchsorted(np.log(s), row_b[..., 0], side="right")[..., None]
        if nodes:
            w_lo, w_hi, here = (a[..., None, :] for a in (w_lo, w_hi, here))
        noise = self.noise
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            zf_lo = np.where(finite_lo, z_lo, 0.0)
            log_d = interval_log_mass(noise, z_lo, np.where(event, z_lo + 1.0, z_hi))
            q_lo = np.where(finite_lo, np.exp(noise.log_pdf(zf_lo) - log_d), 0.0)
            q_hi = np.where(finite_hi, np.exp(noise.log_pdf(np.where(finite_hi, z_hi, 0.0)) - log_d), 0.0)
            # event: [t in I_k] - w_k(t) e^z; censored: q_hi w_k(u) - q_lo w_k(l)
            c_lo = np.where(event, np.exp(np.minimum(zf_lo, _Z_CAP)), q_lo)
            c_hi = np.where(event, 0.0, q_hi)
        return event[..., None] * here + c_hi[..., None] * w_hi - c_lo[..., None] * w_lo
