r"""The gamma likelihood for positive, right-skewed targets: a log link on the mean and a learned shape.

.. math::
    p(y | f) = \frac{(\alpha/\mu)^\alpha}{\Gamma(\alpha)}\, y^{\alpha - 1} e^{-\alpha y/\mu},\qquad \mu = e^f,

so :math:`E[y | f] = \mu` and :math:`\operatorname{Var}[y | f] = \mu^2/\alpha` (the GLM's gamma with a log link;
:math:`\alpha` the shape, :math:`1/\alpha` the squared coefficient of variation).  In :math:`f`,

.. math::
    \ell = \alpha\log\alpha - \log\Gamma(\alpha) + (\alpha - 1)\log y - \alpha f - \alpha y e^{-f},\qquad
    \ell' = \alpha(y e^{-f} - 1),\qquad \ell'' = -\alpha y e^{-f} < 0:

log-concave, with a linear tail on the right and a double-exponential wall on the left (the Poisson's mirror
image), its tilted integrals the sinh rule's (:mod:`relaxep.likelihoods.smooth`).  The evidence gradient in
:math:`\log\alpha` uses
:math:`\partial_{\log\alpha}\ell = \alpha(\log\alpha + 1 - \psi(\alpha) + \log y - f - y e^{-f})`.
GP regression with a gamma likelihood: GPML's ``likGamma`` (Rasmussen & Nickisch 2010), GPflow's ``Gamma``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import digamma, gammainc, gammaln

from relaxep._typing import Array
from relaxep._validation import check_target_vector
from relaxep.likelihoods.base import _as_floats, check_hyperparameter
from relaxep.likelihoods.smooth import BEND, Columns, SmoothLikelihood, central_interval, two_sided_tail

__all__ = ["Gamma"]


class Gamma(SmoothLikelihood):
    r"""Positive targets: :math:`y \sim \operatorname{Gamma}(\text{shape } \alpha, \text{mean } e^{f})`.

    Parameters
    ----------
    shape : float
        :math:`\alpha > 0`; :math:`\operatorname{Var}[y | f] = e^{2f}/\alpha` (1: exponential).
    shape_bounds : pair of float or "fixed"
        Bounds for learning ``shape`` (in log space, scikit-learn's kernel convention).

    Notes
    -----
    Targets positive and finite.  ``GPRegressor(likelihood=Gamma())``'s ``predict`` is the predictive mean
    :math:`E[e^{f_*}] = e^{m + v/2}`; the latent is the mean's logarithm.  See :mod:`relaxep.likelihoods.gamma`.

    References
    ----------
    McCullagh, P. & Nelder, J. A. (1989). Generalized Linear Models, 2nd ed., ch. 8. Chapman & Hall.
    Rasmussen, C. E. & Nickisch, H. (2010). Gaussian processes for machine learning (GPML) toolbox. JMLR 11.
    """

    hyperparameter_names = ("shape",)
    latent_is_link: ClassVar[bool] = True

    def __init__(self, shape: float = 1.0, shape_bounds: tuple[float, float] | str = (1e-3, 1e4)) -> None:
        self.shape, self.shape_bounds = check_hyperparameter(shape, shape_bounds, "shape")

    def check_targets(self, y: ArrayLike, n: int | None = None) -> Array:
        """Positive finite targets; a ``ValueError`` naming ``y`` otherwise."""
        values = check_target_vector(y, n, "targets", "positive numbers for Gamma")
        if np.any(values <= 0.0):
            bad = np.unique(values[values <= 0.0])[:5].tolist()
            raise ValueError(
                f"y must be positive for Gamma (found {bad}; with normalize_y=True the targets are centred: leave it "
                "off)"
            )
        return values

    def _log_lik_of(self, cols: Columns, f: Array) -> Array:
        (y,) = cols
        alpha = float(self.shape)
        norm = alpha * np.log(alpha) - gammaln(alpha)
        return norm + (alpha - 1.0) * np.log(y) - alpha * f - alpha * np.exp(np.log(y) - f)

    def _dlog_lik_of(self, cols: Columns, f: Array) -> tuple[Array, Array]:
        (y,) = cols
        alpha = float(self.shape)
        ratio = np.exp(np.log(y) - f)
        return alpha * (ratio - 1.0), -alpha * ratio

    def _bend_of(self, cols: Columns, power: float) -> tuple[Array, Array, float]:
        r"""Where :math:`u\alpha y e^{-f} \ge` ``BEND`` (the wall, to the left of :math:`\log(u\alpha y/\epsilon)`),
        width 1/2."""
        (y,) = cols
        return np.full(np.shape(y), -np.inf), np.log(power * float(self.shape) * y / BEND), 0.5

    def _dtheta_of(self, cols: Columns, f: Array) -> Array:
        (y,) = cols
        alpha = float(self.shape)
        log_y = np.log(y)
        grad = alpha * (np.log(alpha) + 1.0 - digamma(alpha) + log_y - f - np.exp(log_y - f))
        return grad[..., None]

    # ------------------------------------------------------------ predictive
    def predict(self, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""The predictive mean :math:`E[e^{f_*}] = e^{m + v/2}`."""
        mean, var = np.broadcast_arrays(*_as_floats(mean, var))
        with np.errstate(over="ignore"):
            return np.exp(mean + 0.5 * var)

    def predict_y(self, mean: ArrayLike, var: ArrayLike) -> tuple[Array, Array]:
        r"""Mean and variance of the predictive: :math:`E[y_*] = e^{m + v/2}`,
        :math:`\operatorname{Var}[y_*] = E[\mu^2](1 + 1/\alpha) - E[\mu]^2 = e^{2m + 2v}(1 + 1/\alpha) - e^{2m + v}`."""
        mean, var = np.broadcast_arrays(*_as_floats(mean, var))
        with np.errstate(over="ignore"):
            first = np.exp(mean + 0.5 * var)
            second = np.exp(2.0 * mean + 2.0 * var)
            return first, second / float(self.shape) + first**2 * np.expm1(var)

    def _cdf(self, q: Array, f: Array) -> Array:
        alpha = float(self.shape)
        with np.errstate(over="ignore"):
            return gammainc(alpha, alpha * np.exp(np.log(q) - f))

    def predict_interval(self, mean: ArrayLike, var: ArrayLike, level: float = 0.95) -> tuple[Array, Array]:
        r"""Central interval of :math:`\int \operatorname{Gamma}(y | \alpha, e^f/\alpha) N(f | m, v) df`: its
        quantiles by bisection in :math:`\log y`."""
        mean, var = np.broadcast_arrays(*_as_floats(mean, var))
        reach = 40.0 * (1.0 + float(np.sqrt(np.max(var, initial=0.0)))) + 10.0 / min(float(self.shape), 1.0)
        centre = float(np.max(np.abs(mean), initial=0.0))
        return central_interval(self._cdf, mean, var, level, np.exp, (-centre - reach, centre + reach))

    def loo_tail(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, pointwise: ArrayLike) -> Array:
        """Two-sided tail of each target under its leave-one-out predictive
        (:func:`~relaxep.likelihoods.smooth.two_sided_tail`)."""
        return two_sided_tail(self._cdf, y, mean, var)
