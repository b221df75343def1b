r"""The Poisson likelihood for counts, with a log link and an exposure.

.. math::
    p(y | f) = \frac{\mu^y e^{-\mu}}{y!}, \qquad \mu = e^{\eta},\ \eta = f + o,\qquad
    \log p(y | f) = y\eta - e^{\eta} - \log\Gamma(y + 1),

:math:`o = \log E` the log exposure (an offset).  :math:`\partial^2_f \log p = -e^\eta < 0`: the
likelihood is log-concave, so the tilted :math:`p(y|f)^u N(f | \mu_c, s^2)` is unimodal and EP's site
precisions stay positive; but for a small count under a wide cavity the tilted is strongly skewed (a
Gaussian tail on the left, a double-exponential wall on the right), which is why its tilted integrals
(:mod:`relaxep.likelihoods.counts`) are not by Gauss-Hermite.  Poisson GP regression by EP: Vanhatalo et
al. (2013), "GPstuff: Bayesian modeling with Gaussian processes", JMLR 14; Rasmussen & Williams (2006),
sec. 3.6.
"""

from __future__ import annotations

from types import ModuleType
from typing import ClassVar

import numpy as np
from scipy.special import gammaincc, gammaln

from relaxep._typing import Array
from relaxep.likelihoods.counts import BEND_CURVATURE, CountLikelihood
from relaxep.likelihoods.counts_on import lgamma_on, poisson_mode_on

__all__ = ["Poisson"]


class Poisson(CountLikelihood):
    r"""Poisson counts with a log link: :math:`y \sim \operatorname{Poisson}(e^{f + o})`, :math:`o` the log exposure.

    No hyperparameters.  Targets: a vector of counts, or ``(n, 2)`` rows ``[count, log exposure]``;
    :meth:`predict_y` and :meth:`predict_interval` take the exposure as ``log_exposure``.

    Notes
    -----
    :math:`\log p(y|f) = y\eta - e^\eta - \log\Gamma(y+1)`, :math:`\eta = f + o`, evaluated in log space
    (no :math:`\mu^y` or :math:`y!`), so counts of any size and latents far in either tail stay finite.
    Log-concave (:math:`\partial^2_f \log p = -e^\eta`), so site precisions are positive; the tilted
    integrals are by the mode-centred sinh rule of :mod:`relaxep.likelihoods.counts`; on another array library's
    device (:meth:`log_z_on`, every power) by the fixed-size rule of :mod:`relaxep.likelihoods.counts_on`.

    References
    ----------
    Vanhatalo, J., Riihimaki, J., Hartikainen, J., Jylanki, P., Tolvanen, V. & Vehtari, A. (2013).
    GPstuff: Bayesian modeling with Gaussian processes. JMLR 14, 1175-1179.
    """

    tilted_on_device: ClassVar[bool] = True
    curved_right: ClassVar[bool] = True  # -l'' = e^eta grows to the right (counts_on's reach)

    def __init__(self) -> None:
        pass

    def _log_pmf(self, count: Array, eta: Array) -> Array:
        with np.errstate(over="ignore"):
            return count * eta - np.exp(eta) - gammaln(count + 1.0)

    def _dlog_pmf_in(self, xp: ModuleType, count: Array, eta: Array) -> tuple[Array, Array]:
        r""":math:`y - e^\eta` and :math:`-e^\eta`, the exponent held below :data:`_EXP_MAX` (no overflow)."""
        rate = xp.exp(xp.minimum(eta, _EXP_MAX))
        return count - rate, -rate

    def _bend(self, count: Array, power: float) -> tuple[Array, Array]:
        lo = np.full(np.shape(count), np.log(BEND_CURVATURE / power))
        return lo, np.full_like(lo, np.inf)

    def _count_cdf(self, k: Array, eta: Array) -> Array:
        with np.errstate(over="ignore"):
            return gammaincc(k + 1.0, np.exp(eta))

    # ------------------------------------------------------------ in an array namespace (counts_on)
    def _log_kernel_on(self, xp: ModuleType, count: Array, eta: Array) -> Array:
        r""":math:`y\eta - e^\eta`, the exponent held below :data:`_EXP_MAX` (the density is 0 beyond either way)."""
        return count * eta - xp.exp(xp.minimum(eta, _EXP_MAX))

    def _log_norm_on(self, xp: ModuleType, count: Array) -> Array:
        return -lgamma_on(xp, count + 1.0)

    def _mode_on(self, xp: ModuleType, count: Array, mean: Array, var: Array, power: float) -> Array:
        return poisson_mode_on(xp, count, mean, var, power)

    def _bend_on(self, xp: ModuleType, count: Array, power: float) -> tuple[Array, Array]:
        lo = xp.full_like(count, float(np.log(BEND_CURVATURE / power)))
        return lo, xp.full_like(lo, float("inf"))


_EXP_MAX = 700.0
