r"""The predictive of a target under additive noise :math:`y = f + \epsilon`, :math:`\epsilon` symmetric about zero:
its moments, its distribution function, its central interval and a training row's leave-one-out tail.

:class:`AdditiveNoise` is the part of :class:`~relaxep.likelihoods.Likelihood` that reads the noise (a subclass's
:meth:`~AdditiveNoise._noise`, a frozen ``scipy.stats`` distribution): the regression likelihoods (Gaussian,
Student-t, Laplace, a Tobit's uncensored value) answer through it, the others override what they answer
(:class:`~relaxep.likelihoods.BinaryLikelihood`, the counts, the ordinal and survival likelihoods).  The predictive
distribution function is

.. math:: P(y_* \le q) = \int F(q - f)\, N(f | \mu, s^2)\, df,

:math:`F` the noise's CDF (:meth:`~AdditiveNoise._cdf`), integrated by the two-centre rule of
:mod:`relaxep.likelihoods._panels` around :math:`q` and :math:`\mu` for :math:`q \le \mu`, and by its mirror image
above :math:`\mu`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtri

from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep.likelihoods._panels import split_gap, two_centre_rule

__all__ = ["AdditiveNoise"]

_PREDICTIVE_ITERATIONS = 100
_REACH_SD = 40.0  # standard deviations of the latent covered by the predictive's rule
_TINY_VAR = 1e-300  # a leave-one-out variance floor (a cavity may be a point)


class AdditiveNoise:
    r"""The predictive of :math:`y_* = f + \epsilon` at a Gaussian latent :math:`N(f | \mu, s^2)`, the noise
    :math:`\epsilon` symmetric about zero (module docstring); a mixin of
    :class:`~relaxep.likelihoods.Likelihood`, whose :meth:`_log_z` gives the predictive density."""

    def predict_y(self, mean: ArrayLike, var: ArrayLike) -> tuple[Array, Array]:
        r"""Mean and variance of :math:`p(y_*) = \int p(y_*|f) N(f | \mu_*, s^2_*) df` for additive noise.

        With :math:`y_* = f + \epsilon`, :math:`\epsilon` symmetric about zero (:meth:`_noise`):
        :math:`E[y_*] = \mu_*` and :math:`\operatorname{Var}[y_*] = s^2_* + \operatorname{Var}[\epsilon]`
        (infinite where the noise has none, e.g. a Student-t with :math:`\nu \le 2`; where the noise
        has no mean, :math:`\nu \le 1`, the first entry is the predictive's centre, its median).
        """
        mean, var = np.broadcast_arrays(*_as_floats(mean, var))
        return mean.copy(), var + self._noise_variance()

    def predict_interval(self, mean: ArrayLike, var: ArrayLike, level: float = 0.95) -> tuple[Array, Array]:
        r"""Central interval of :math:`p(y_*)`: the quantiles :math:`(1 \mp \ell)/2` of the predictive.

        The predictive CDF :math:`P(y_* \le q) = \int F(q - f)\, N(f | \mu_*, s^2_*)\, df`
        (:math:`F` the noise's CDF, :meth:`_cdf`) is integrated by the two-centre rule around
        :math:`q` and :math:`\mu_*`; the lower quantile is found by Newton's method safeguarded by
        bisection on the bracket :math:`[\mu_* - s_* z_{1-\alpha/4} - F^{-1}(1-\alpha/4),\ \mu_*]`,
        :math:`\alpha = (1-\ell)/2` (the union bound), the predictive density being
        :math:`\exp \log Z` at :math:`y = q`.  The noise is symmetric, so the upper end is the
        lower's mirror image in :math:`\mu_*`.
        """
        level = check_unit_interval(level, "level")
        if level >= 1.0:
            raise ValueError(f"level must lie in (0, 1), got {level!r}")
        mean, var = np.broadcast_arrays(*_as_floats(mean, var))
        shape = mean.shape
        mean, var = mean.ravel(), var.ravel()
        tail = 0.5 * (1.0 - level)
        noise = self._noise()
        width = float(noise.ppf(0.75))  # half the noise's interquartile range
        reach = ndtri(1.0 - 0.5 * tail) * np.sqrt(var) + float(noise.ppf(1.0 - 0.5 * tail))
        lo, hi = mean - reach, mean.copy()
        q = 0.5 * (lo + hi)
        active = np.ones(q.shape, dtype=bool)
        for _ in range(_PREDICTIVE_ITERATIONS):
            qa, ma, va = q[active], mean[active], var[active]
            gap = self._predictive_cdf(qa, ma, va, width) - tail
            below = gap < 0.0
            lo[active] = np.where(below, qa, lo[active])
            hi[active] = np.where(below, hi[active], qa)
            density = np.exp(self._log_z(qa, ma, va, 1.0).log_z)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = qa - gap / density
            inside = np.isfinite(step) & (step >= lo[active]) & (step <= hi[active])
            step = np.where(inside, step, 0.5 * (lo[active] + hi[active]))
            converged = np.abs(step - qa) <= 1e-12 * (np.abs(qa) + reach[active])
            q[active] = step
            active[active] = ~converged
            if not np.any(active):
                break
        return q.reshape(shape), (2.0 * mean - q).reshape(shape)

    def predictive_cdf(self, q: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
        r""":math:`P(y_* \le q) = \int F(q - f)\, N(f | \mu, s^2)\, df`, the predictive distribution function.

        Below the mean by the two-centre rule at ``q`` and ``mean`` (:meth:`_predictive_cdf`), above it by the same
        rule's mirror image, :math:`1 - P(y_* \le 2\mu - q)` (the noise is symmetric); a likelihood with a closed
        form overrides it (:class:`~relaxep.likelihoods.Gaussian`).

        Parameters
        ----------
        q : array_like
            Values of the target (broadcast against ``mean`` and ``var``).
        mean, var : array_like
            The latent's mean :math:`\mu` and variance :math:`s^2 > 0`.
        """
        q, mean, var = np.broadcast_arrays(*_as_floats(q, mean, var))
        width = float(self._noise().ppf(0.75))  # type: ignore[attr-defined]
        below = q <= mean
        reflected = np.where(below, q, 2.0 * mean - q)
        cdf = self._predictive_cdf(reflected, mean, var, width)
        return np.where(below, cdf, 1.0 - cdf)

    def loo_tail(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, pointwise: ArrayLike) -> Array:
        r"""Each row's leave-one-out tail probability: under the predictive at the cavity :math:`N(h_i, \lambda_i)`,
        the probability of a target at least as far from its centre :math:`h_i` as :math:`y_i`,

        .. math:: p_i = 2 P(y_* \le h_i - |y_i - h_i|) = 2\int F(h_i - |y_i - h_i| - f)\, N(f | h_i, \lambda_i)\, df,

        at most 1 (the noise is symmetric, so the predictive is symmetric about :math:`h_i`).

        Parameters
        ----------
        y : array_like of shape (n,)
            The targets, in the likelihood's units (as fitted).
        mean, var : array_like of shape (n,)
            The cavities :math:`h_i, \lambda_i` (the leave-one-out posteriors of the latent).
        pointwise : array_like of shape (n,)
            :math:`\log p(y_i | y_{-i})` (unused here; a likelihood of probabilities reads it).

        Returns
        -------
        ndarray of shape (n,)
            Probabilities in :math:`[0, 1]`.
        """
        y, mean, var = _as_floats(y, mean, var)
        q = mean - np.abs(y - mean)
        width = float(self._noise().ppf(0.75))  # type: ignore[attr-defined]
        return np.minimum(1.0, 2.0 * self._predictive_cdf(q, mean, np.maximum(var, _TINY_VAR), width))

    def _predictive_cdf(self, q: Array, mean: Array, var: Array, width: float) -> Array:
        r""":math:`\int F(q - f) N(f | \mu, s^2) df` for ``q <= mean`` (two-centre rule at ``q`` and ``mean``)."""
        sd = np.sqrt(var)
        gap = mean - q
        w1, w2 = np.full_like(sd, width), sd
        gap1, gap2 = split_gap(w1, w2, gap)
        disp, second, weights = two_centre_rule(w1, w2, gap1, gap2, _REACH_SD * sd, _REACH_SD * sd)
        e = np.where(second, 0.0, -gap[..., None]) + disp  # offset from the mean
        density = np.exp(-0.5 * e**2 / var[..., None]) / np.sqrt(2.0 * np.pi * var[..., None])
        return np.sum(weights * density * self._cdf(q[..., None], mean[..., None] + e), axis=-1)

    def _noise(self) -> object:
        r"""The noise :math:`\epsilon = y - f` as a frozen ``scipy.stats`` distribution (regression likelihoods)."""
        raise NotImplementedError(f"{type(self).__name__} does not define a predictive of y")

    def _noise_variance(self) -> float:
        return float(self._noise().var())  # type: ignore[attr-defined]

    def _cdf(self, y: Array, f: Array) -> Array:
        r""":math:`P(Y \le y | f)`, by default the noise's CDF at :math:`y - f`."""
        return self._noise().cdf(y - f)  # type: ignore[attr-defined]


def _as_floats(*arrays: ArrayLike) -> tuple[Array, ...]:
    return tuple(np.asarray(a, dtype=float) for a in arrays)
