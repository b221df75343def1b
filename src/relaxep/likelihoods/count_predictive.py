r"""The predictive of a count :math:`y_*` at a Gaussian latent :math:`f_* \sim N(m, v)`: its moments, its central
interval and a training row's leave-one-out tail.

:class:`CountPredictive` is the part of :class:`~relaxep.likelihoods.counts.CountLikelihood` that answers for the
count's predictive :math:`p(y_*) = \int p(y_* | f)\, N(f | m, v)\, df` (a mixin; the tilted integrals, whose
:math:`\log Z` at power 1 is that predictive's log mass, stay in :mod:`relaxep.likelihoods.counts`).  A subclass
gives :meth:`~CountPredictive._count_cdf` (and, where the count is overdispersed,
:meth:`~CountPredictive._conditional_second_moment` and :meth:`~CountPredictive._count_ppf`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats
from scipy.special import ndtri

from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep.likelihoods._panels import split_gap, two_centre_rule
from relaxep.likelihoods.additive_noise import _as_floats

__all__ = ["CountPredictive"]

_REACH_SD = 40.0  # standard deviations of the latent covered by the predictive CDF's rule
_COUNT_CHUNK = 200_000  # (row, count) pairs evaluated at once for the tail's sums


class CountPredictive:
    r"""The predictive of a count at a Gaussian latent (module docstring): :meth:`predict_y`,
    :meth:`predict_interval` and :meth:`loo_tail`."""

    def _count_cdf(self, k: Array, eta: Array) -> Array:
        r""":math:`P(Y \le k | \eta)`."""
        raise NotImplementedError

    def _conditional_second_moment(self, log_mean: Array, var: Array) -> Array:
        r""":math:`E[\operatorname{Var}(y | f)] - E[\mu]` under :math:`\log\mu \sim N(m, v)` (0 for the Poisson)."""
        return np.zeros_like(log_mean)

    def predict_y(self, mean: ArrayLike, var: ArrayLike, log_exposure: ArrayLike = 0.0) -> tuple[Array, Array]:
        r"""Mean and variance of the count :math:`y_*` under :math:`f_* \sim N(m, v)`, in closed form.

        With :math:`\mu = e^{f_* + o}` log-normal, :math:`E[y_*] = E[\mu] = e^{m + o + v/2}` and
        :math:`\operatorname{Var}[y_*] = E[\operatorname{Var}(y_*|f_*)] + \operatorname{Var}[\mu]`,
        :math:`\operatorname{Var}[\mu] = (e^v - 1)\, e^{2(m + o) + v}` (for the negative binomial
        :math:`E[\operatorname{Var}(y_*|f_*)] = E[\mu] + E[\mu^2]/r`, :math:`E[\mu^2] = e^{2(m+o) + 2v}`).
        ``log_exposure`` :math:`o` broadcasts against ``mean``.
        """
        mean, var, offset = np.broadcast_arrays(*_as_floats(mean, var, log_exposure))
        log_mean = mean + offset
        with np.errstate(over="ignore"):
            first = np.exp(log_mean + 0.5 * var)
            spread = np.expm1(var) * np.exp(2.0 * log_mean + var)
            return first, first + spread + self._conditional_second_moment(log_mean, var)

    def predict_interval(
        self, mean: ArrayLike, var: ArrayLike, level: float = 0.95, log_exposure: ArrayLike = 0.0
    ) -> tuple[Array, Array]:
        r"""Central interval of the count's predictive :math:`p(y_*) = \int p(y_* | f) N(f | m, v) df`, as counts.

        Each end is the smallest integer :math:`q` with :math:`P(y_* \le q) \ge (1 \mp \ell)/2`, so the
        interval holds at least ``level`` of the predictive.  The predictive CDF
        :math:`\int P(y \le q | f) N(f | m, v) df` is integrated by the two-centre rule of
        :mod:`relaxep.likelihoods._panels` around :math:`m` and the CDF's step, :math:`f = \log(q + 1) - o`;
        :math:`q` is bisected over the integers below the bound
        :math:`F^{-1}(1 - \alpha/2 \mid e^{m + o + s z_{1-\alpha/2}})`, :math:`\alpha = (1 - \ell)/2`.
        Returns float arrays of integer values (``inf`` where that bound overflows).
        """
        level = check_unit_interval(level, "level")
        if level >= 1.0:
            raise ValueError(f"level must lie in (0, 1), got {level!r}")
        mean, var, offset = np.broadcast_arrays(*_as_floats(mean, var, log_exposure))
        shape = mean.shape
        mean, var, offset = (np.ravel(a) for a in (mean, var, offset))
        tail = 0.5 * (1.0 - level)
        with np.errstate(over="ignore"):
            top = self._count_ppf(1.0 - 0.5 * tail, mean + offset + ndtri(1.0 - 0.5 * tail) * np.sqrt(var))
        ends = [self._cdf_quantile(p, mean, var, offset, top) for p in (tail, 1.0 - tail)]
        return ends[0].reshape(shape), ends[1].reshape(shape)

    def loo_tail(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, pointwise: ArrayLike) -> Array:
        r"""Each row's leave-one-out tail probability: the probability, under the leave-one-out predictive
        :math:`p(k) = \int p(k | f)\, N(f | h_i, \lambda_i)\, df`, of the counts no more probable than the one observed,

        .. math:: p_i = \sum_{k \le K_i,\ p(k) \le p(y_i)} p(k),\qquad K_i = \max(3 y_i,\ y_i + 50),

        each :math:`\log p(k)` the tilted :math:`\log Z` at power 1 (:meth:`log_z`), at the row's exposure; at
        most 1.

        Parameters
        ----------
        y : array_like of shape (n,) or (n, 2)
            Counts, or rows ``[count, log exposure]``.
        mean, var : array_like of shape (n,)
            The cavities :math:`h_i, \lambda_i` (the leave-one-out posteriors of the latent).
        pointwise : array_like of shape (n,)
            :math:`\log p(y_i | y_{-i})` (unused: the sum needs every count's mass).

        Returns
        -------
        ndarray of shape (n,)
            Probabilities in :math:`[0, 1]`.
        """
        y, mean, var = _as_floats(y, mean, var)
        paired = y.ndim == 2
        count = y[:, 0] if paired else y
        offset = y[:, 1] if paired else np.zeros_like(count)
        observed = self.log_z(y, mean, var, 1.0).log_z  # type: ignore[attr-defined]
        out = np.empty(count.shape[0])
        top = np.maximum(3.0 * count, count + 50.0).astype(int)
        rows = max(1, _COUNT_CHUNK // (int(top.max()) + 1))
        for start in range(0, count.shape[0], rows):
            sl = slice(start, start + rows)
            k = np.arange(int(top[sl].max()) + 1, dtype=float)
            grid = np.stack(np.broadcast_arrays(k[None, :], offset[sl, None]), axis=-1)
            log_p = self.log_z(grid, mean[sl, None], var[sl, None], 1.0).log_z  # type: ignore[attr-defined]
            log_p = np.where(k[None, :] <= top[sl, None], log_p, -np.inf)
            out[sl] = np.sum(np.where(log_p <= observed[sl, None] + 1e-12, np.exp(log_p), 0.0), axis=1)
        return np.minimum(out, 1.0)

    def _count_ppf(self, p: float, eta: Array) -> Array:
        return stats.poisson.ppf(p, np.exp(eta))

    def _cdf_quantile(self, p: float, mean: Array, var: Array, offset: Array, top: Array) -> Array:
        """The smallest integer ``q`` in ``[0, top]`` with predictive CDF ``>= p`` (bisection)."""
        lo, hi = np.full(mean.shape, -1.0), np.where(np.isfinite(top), top, np.inf)
        active = np.isfinite(hi) & (hi - lo > 1.0)
        while np.any(active):
            mid = np.floor(0.5 * (lo[active] + hi[active]))
            above = self._predictive_count_cdf(mid, mean[active], var[active], offset[active]) >= p
            lo[active] = np.where(above, lo[active], mid)
            hi[active] = np.where(above, mid, hi[active])
            active = np.isfinite(hi) & (hi - lo > 1.0) & (np.floor(0.5 * (lo + hi)) > lo)
        return hi

    def _predictive_count_cdf(self, q: Array, mean: Array, var: Array, offset: Array) -> Array:
        r""":math:`\int P(y \le q | f) N(f | m, v) df` by the two-centre rule at the CDF's step and at ``m``."""
        sd = np.sqrt(var)
        positive = sd > 0.0
        sd = np.where(positive, sd, 1.0)  # (a point mass is taken apart below)
        step_at = np.log(q + 1.0) - offset
        step_width = np.minimum(1.0 / np.sqrt(q + 1.0), 1.0)
        first = step_at <= mean  # which centre is the lower one
        c1 = np.where(first, step_at, mean)
        w1, w2 = np.where(first, step_width, sd), np.where(first, sd, step_width)
        gap = np.abs(mean - step_at)
        gap1, gap2 = split_gap(w1, w2, gap)
        reach = _REACH_SD * sd + gap
        disp, second, weights = two_centre_rule(w1, w2, gap1, gap2, reach, reach)
        f = c1[..., None] + np.where(second, gap[..., None], 0.0) + disp
        z = (f - mean[..., None]) / sd[..., None]
        density = np.exp(-0.5 * z * z) / (np.sqrt(2.0 * np.pi) * sd[..., None])
        cdf_q = self._count_cdf(q[..., None], f + offset[..., None])
        integral = np.sum(weights * density * cdf_q, axis=-1)
        return np.where(positive, integral, self._count_cdf(q, mean + offset))
