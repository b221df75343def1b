r"""The likelihood interface: one question about a Gaussian cavity.

Every likelihood answers one question (the GPML design): for a Gaussian cavity
:math:`N(g | \mu, s^2)` on the *label-folded* latent :math:`g = y f` and a power
:math:`u \in (0, 1]`, return

.. math::
    \log Z = \log \int t(g)^u N(g | \mu, s^2)\, dg,
    \qquad \frac{\partial \log Z}{\partial \mu},
    \qquad \frac{\partial^2 \log Z}{\partial \mu^2}.

The tilted moments follow from these derivatives,
:math:`E[g] = \mu + s^2 \partial_\mu \log Z` and
:math:`\operatorname{Var}[g] = s^2 + s^4 \partial^2_\mu \log Z`, so every site-update
rule is generic in the likelihood.  Relaxed EP additionally needs the tilted
expectation :math:`E[\log t(g)]` (for its KL objective), and prediction needs
:math:`P(y_* = +1) = Z(\mu_*, s^2_*)` at ``u = 1``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from relaxep._params import ParamsMixin
from relaxep._typing import Array
from relaxep._validation import check_unit_interval

__all__ = ["Likelihood", "TiltedLogZ"]


@dataclass(frozen=True)
class TiltedLogZ:
    r"""``log Z`` of a tilted distribution and its first two derivatives in the cavity mean."""

    log_z: Array
    dlog_z: Array
    d2log_z: Array

    def moments(self, cavity_mean: Array, cavity_var: Array) -> tuple[Array, Array]:
        r"""Tilted mean and variance, :math:`\mu + s^2 d_1` and :math:`s^2 + s^4 d_2`."""
        return (
            cavity_mean + cavity_var * self.dlog_z,
            cavity_var + cavity_var**2 * self.d2log_z,
        )


class Likelihood(ParamsMixin, ABC):
    """A binary-classification likelihood :math:`t(g)` of the folded latent ``g = y f``."""

    def log_z(self, cavity_mean: ArrayLike, cavity_var: ArrayLike, power: float = 1.0) -> TiltedLogZ:
        r"""``log Z``, ``d log Z / d mu`` and ``d2 log Z / d mu2`` of :math:`t^u N(\mu, s^2)`.

        Parameters
        ----------
        cavity_mean, cavity_var : array_like
            Cavity mean :math:`\mu` and variance :math:`s^2 > 0` of the folded latent.
        power : float
            The power :math:`u \in (0, 1]` (Power EP); ``1`` for EP.
        """
        mean = np.asarray(cavity_mean, dtype=float)
        var = np.asarray(cavity_var, dtype=float)
        return self._log_z(mean, var, check_unit_interval(power, "power u"))

    def tilted_cumulants(self, cavity_mean: ArrayLike, cavity_var: ArrayLike) -> tuple[Array, Array, Array, Array]:
        r"""The first four cumulants of the tilted :math:`\hat p(g) \propto t(g)\, N(g | \mu, s^2)`.

        From the cumulant generating function
        :math:`K(r) = r\mu + r^2 s^2/2 + \log Z(\mu + r s^2) - \log Z(\mu)`,

        .. math::
            \kappa_1 = \mu + s^2 L^{(1)},\quad \kappa_2 = s^2 + s^4 L^{(2)},\quad
            \kappa_3 = s^6 L^{(3)},\quad \kappa_4 = s^8 L^{(4)},

        :math:`L^{(k)}` the derivatives of :math:`\log Z` in the cavity mean.  The
        double-loop EP's Newton steps need :math:`\kappa_3, \kappa_4` (the curvature of
        :math:`\log Z` in the cavity's natural parameters).
        """
        mean = np.asarray(cavity_mean, dtype=float)
        var = np.asarray(cavity_var, dtype=float)
        return self._tilted_cumulants(mean, var)

    def _tilted_cumulants(self, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        raise NotImplementedError(f"{type(self).__name__} does not provide tilted cumulants")

    def expected_log_lik(self, cavity_mean: ArrayLike, cavity_var: ArrayLike) -> Array:
        r"""Tilted expectation :math:`E_{\hat p}[\log t(g)]`, :math:`\hat p \propto t\, N(\mu, s^2)`."""
        mean = np.asarray(cavity_mean, dtype=float)
        var = np.asarray(cavity_var, dtype=float)
        return self._expected_log_lik(mean, var)

    def log_lik(self, g: ArrayLike) -> Array:
        r"""Pointwise :math:`\log t(g)` of the folded latent ``g = y f`` (for MCMC)."""
        return self._log_lik(np.asarray(g, dtype=float))

    def predict(self, latent_mean: ArrayLike, latent_var: ArrayLike) -> Array:
        r"""Predictive :math:`P(y_* = +1) = \int t(f) N(f | \mu_*, s^2_*)\, df`."""
        return np.exp(self.log_z(latent_mean, latent_var).log_z)

    @abstractmethod
    def _log_z(self, mean: Array, var: Array, power: float) -> TiltedLogZ: ...

    @abstractmethod
    def _expected_log_lik(self, mean: Array, var: Array) -> Array: ...

    @abstractmethod
    def _log_lik(self, g: Array) -> Array: ...
