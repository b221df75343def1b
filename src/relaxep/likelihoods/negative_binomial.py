r"""The negative binomial (NB2) likelihood for overdispersed counts, with a log link and an exposure.

.. math::
    p(y | f) = \frac{\Gamma(y + r)}{\Gamma(r)\, y!}\Big(\frac{r}{r + \mu}\Big)^r \Big(\frac{\mu}{r + \mu}\Big)^y,
    \qquad \mu = e^{\eta},\ \eta = f + o,

the NB2 parametrisation (Hilbe 2011): :math:`E[y|f] = \mu`, :math:`\operatorname{Var}[y|f] = \mu + \mu^2/r`,
:math:`r > 0` the dispersion (size) parameter; :math:`r \to \infty` is the Poisson.  In log space, with
:math:`\operatorname{sp}(z) = \log(1 + e^z)`,

.. math::
    \log p = \log\Gamma(y + r) - \log\Gamma(r) - \log\Gamma(y + 1)
    - r\,\operatorname{sp}(\eta - \log r) - y\,\operatorname{sp}(\log r - \eta),

each term without overflow or cancellation.  With :math:`\sigma = \sigma(\eta - \log r) = \mu/(r + \mu)`,

.. math::
    \partial_f \log p = y - (y + r)\sigma,\qquad
    \partial^2_f \log p = -(y + r)\,\sigma(1 - \sigma) = -\frac{r\mu(y + r)}{(r + \mu)^2} < 0 :

the likelihood is log-concave in :math:`f` for every count and dispersion (so EP's site precisions stay
positive and the tilted is unimodal), with linear tails in :math:`f` on both sides (slope :math:`y` below,
:math:`-r` above).  The caution usually given for Laplace, variational and EP approximations with this
likelihood therefore concerns other things: the tilted (and the posterior) is skewed for small counts
under wide cavities, and the dispersion is awkward: :math:`\log p` is not concave in :math:`\log r`
(e.g. for :math:`y = 0`, or :math:`y \gg \mu`) and for underdispersed data it grows all the way to
:math:`r \to \infty` (the Poisson), so a learned :math:`r` may run to its upper bound.  The tilted
integrals are those of :class:`~relaxep.likelihoods.counts.CountLikelihood`.

The evidence gradient in :math:`\log r` uses

.. math::
    \frac{\partial \log p}{\partial \log r} = r\big(\psi(y + r) - \psi(r) - \operatorname{sp}(\eta - \log r)\big)
    + (y + r)\sigma - y.
"""

from __future__ import annotations

from types import ModuleType
from typing import ClassVar

import numpy as np
from scipy import stats
from scipy.special import betainc, digamma, expit, gammaln

from relaxep._typing import Array
from relaxep._xp import expit as expit_in
from relaxep._xp import log_expit
from relaxep.likelihoods.base import check_hyperparameter
from relaxep.likelihoods.counts import BEND_CURVATURE, CountLikelihood
from relaxep.likelihoods.counts_on import bracketed_mode_on, lgamma_on

__all__ = ["NegativeBinomial"]


def _softplus(z: Array) -> Array:
    return np.logaddexp(0.0, z)


class NegativeBinomial(CountLikelihood):
    r"""Negative binomial (NB2) counts with a log link: mean :math:`\mu = e^{f + o}`, variance :math:`\mu + \mu^2/r`.

    Parameters
    ----------
    dispersion : float
        The dispersion (size) :math:`r > 0`; small values mean strong overdispersion, large values
        approach the Poisson.  It is scipy's ``nbinom`` with ``n = r``, ``p = r / (r + mu)``.
    dispersion_bounds : pair of float or "fixed"
        Bounds for learning ``dispersion`` (in log space, scikit-learn's kernel convention).

    Notes
    -----
    Targets: a vector of counts, or ``(n, 2)`` rows ``[count, log exposure]`` (:math:`o` = log exposure);
    :meth:`predict_y` and :meth:`predict_interval` take the exposure as ``log_exposure``.  Log-concave in
    :math:`f` (see :mod:`relaxep.likelihoods.negative_binomial`), so not ``heavy_tailed``.  On another array
    library's device (:meth:`log_z_on`, every power) the tilted integrals are by the fixed-size rule of
    :mod:`relaxep.likelihoods.counts_on`.

    References
    ----------
    Hilbe, J. M. (2011). Negative Binomial Regression, 2nd ed. Cambridge University Press.
    Vanhatalo, J. et al. (2013). GPstuff: Bayesian modeling with Gaussian processes. JMLR 14, 1175-1179.
    """

    hyperparameter_names = ("dispersion",)
    tilted_on_device: ClassVar[bool] = True

    def __init__(self, dispersion: float = 1.0, dispersion_bounds: tuple[float, float] | str = (1e-3, 1e3)) -> None:
        self.dispersion, self.dispersion_bounds = check_hyperparameter(dispersion, dispersion_bounds, "dispersion")

    def _log_pmf(self, count: Array, eta: Array) -> Array:
        r = float(self.dispersion)
        log_r = np.log(r)
        norm = gammaln(count + r) - gammaln(r) - gammaln(count + 1.0)
        return norm - r * _softplus(eta - log_r) - count * _softplus(log_r - eta)

    def _dlog_pmf_in(self, xp: ModuleType, count: Array, eta: Array) -> tuple[Array, Array]:
        r = float(self.dispersion)
        log_r = float(np.log(r))
        sigma = expit_in(xp, eta - log_r)  # mu / (r + mu)
        rest = expit_in(xp, log_r - eta)  # r / (r + mu), without 1 - sigma's cancellation
        return count * rest - r * sigma, -(count + r) * sigma * rest

    def _dlog_pmf_dtheta(self, count: Array, eta: Array) -> Array:
        if not self.n_dims:
            return np.zeros((*np.broadcast_shapes(np.shape(count), np.shape(eta)), 0))
        r = float(self.dispersion)
        log_r = np.log(r)
        sigma, rest = expit(eta - log_r), expit(log_r - eta)
        grad = r * (digamma(count + r) - digamma(r) - _softplus(eta - log_r)) + r * sigma - count * rest
        return grad[..., None]

    def _bend(self, count: Array, power: float) -> tuple[Array, Array]:
        r"""Where :math:`u(y + r)\sigma(1 - \sigma) \ge \epsilon`: :math:`\sigma` between the roots of
        :math:`\sigma(1 - \sigma) = q`, :math:`q = \epsilon / (u(y + r))`, symmetric in logit."""
        r = float(self.dispersion)
        q = BEND_CURVATURE / (power * (count + r))
        empty = q > 0.25
        q = np.minimum(q, 0.25)
        low = 2.0 * q / (1.0 + np.sqrt(1.0 - 4.0 * q))  # the smaller root, without cancellation
        width = np.log1p(-low) - np.log(low)  # -logit(low) >= 0
        log_r = np.log(r)
        return np.where(empty, np.inf, log_r - width), np.where(empty, -np.inf, log_r + width)

    def _count_cdf(self, k: Array, eta: Array) -> Array:
        r = float(self.dispersion)
        return betainc(r, k + 1.0, expit(np.log(r) - eta))

    def _count_ppf(self, p: float, eta: Array) -> Array:
        r = float(self.dispersion)
        return stats.nbinom.ppf(p, r, expit(np.log(r) - eta))

    def _conditional_second_moment(self, log_mean: Array, var: Array) -> Array:
        with np.errstate(over="ignore"):
            return np.exp(2.0 * log_mean + 2.0 * var) / float(self.dispersion)

    # ------------------------------------------------------------ in an array namespace (counts_on)
    def _log_kernel_on(self, xp: ModuleType, count: Array, eta: Array) -> Array:
        r""":math:`-r\,\operatorname{sp}(\eta - \log r) - y\,\operatorname{sp}(\log r - \eta)`, the softplus
        :math:`\operatorname{sp}(z) = -\log\sigma(-z)`."""
        log_r = float(np.log(float(self.dispersion)))
        return float(self.dispersion) * log_expit(xp, log_r - eta) + count * log_expit(xp, eta - log_r)

    def _log_norm_on(self, xp: ModuleType, count: Array) -> Array:
        r = float(self.dispersion)
        return lgamma_on(xp, count + r) - float(gammaln(r)) - lgamma_on(xp, count + 1.0)

    def _mode_on(self, xp: ModuleType, count: Array, mean: Array, var: Array, power: float) -> Array:
        return bracketed_mode_on(xp, self, count, mean, var, power)

    def _bend_on(self, xp: ModuleType, count: Array, power: float) -> tuple[Array, Array]:
        r = float(self.dispersion)
        q = BEND_CURVATURE / (power * (count + r))
        empty = q > 0.25
        q = xp.minimum(q, 0.25)
        low = 2.0 * q / (1.0 + xp.sqrt(1.0 - 4.0 * q))
        width = xp.log1p(-low) - xp.log(low)
        log_r = float(np.log(r))
        # (where the curvature stays below 0.01, the point log r: its kink, slight, still bends a wide tilted)
        return xp.where(empty, log_r, log_r - width), xp.where(empty, log_r, log_r + width)
