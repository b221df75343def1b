r"""Likelihoods for binary GP classification.

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
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, log_expit, logsumexp

from relaxep._numerics import log_ndtr, normal_cdf_ratio, safe_log, xlogx
from relaxep._params import ParamsMixin

__all__ = ["Likelihood", "Logistic", "NoisyStep", "Probit", "TiltedLogZ"]

Array = NDArray[np.float64]


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


def _check_power(power: float) -> float:
    power = float(power)
    if not (0.0 < power <= 1.0):
        raise ValueError(f"power u must lie in (0, 1], got {power!r}")
    return power


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
        return self._log_z(mean, var, _check_power(power))

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


def _step_cumulants(mean: Array, var: Array, scale: Array, dlog_z: Array) -> tuple[Array, Array, Array, Array]:
    r"""Tilted cumulants when :math:`Z(\mu) = \epsilon + D\,\Phi(\mu/\sigma)` (step and probit).

    With :math:`z = \mu/\sigma` and :math:`L^{(1)} = D N(z) / (\sigma Z)` (``dlog_z``), the
    derivatives of :math:`Z` relative to :math:`Z` are
    :math:`Z^{(k)}/Z = (-1)^{k-1} He_{k-1}(z)\, L^{(1)} / \sigma^{k-1}` (Hermite
    polynomials); those of :math:`L = \log Z` follow by Faa di Bruno's formula.
    """
    z = mean / scale
    r1 = dlog_z
    q2 = -z * r1 / scale  # Z^(2) / Z
    q3 = (z * z - 1.0) * r1 / scale**2  # Z^(3) / Z
    q4 = (3.0 * z - z**3) * r1 / scale**3  # Z^(4) / Z
    l2 = q2 - r1**2
    l3 = q3 - 3.0 * q2 * r1 + 2.0 * r1**3
    l4 = q4 - 4.0 * q3 * r1 - 3.0 * q2**2 + 12.0 * q2 * r1**2 - 6.0 * r1**4
    return mean + var * r1, var + var**2 * l2, var**3 * l3, var**4 * l4


class NoisyStep(Likelihood):
    r"""The paper's label-noise step likelihood (eq. ``clslik``).

    .. math:: t(g) = \epsilon + (1 - 2\epsilon)\,\Theta(g), \qquad 0 \le \epsilon < 1/2.

    With :math:`z = \mu / s` and :math:`D = (1-\epsilon)^u - \epsilon^u`,

    .. math::
        \log Z = \operatorname{logaddexp}\big(u \log\epsilon,\; \log D + \log\Phi(z)\big),\quad
        \partial_\mu \log Z = \frac{w}{s} \frac{N(z)}{\Phi(z)},\quad
        \partial^2_\mu \log Z = -\partial_\mu \log Z\,\Big(\partial_\mu \log Z + \frac{z}{s}\Big),

    where :math:`w = D\,\Phi(z) / Z` is computed in log space and the ratio
    :math:`N(z)/\Phi(z)` through ``erfcx``.
    """

    def __init__(self, eps: float = 0.1) -> None:
        value = float(eps)
        if not np.isfinite(value) or not (0.0 <= value < 0.5):
            raise ValueError(f"label-noise rate eps must lie in [0, 0.5), got {eps!r}")
        self.eps = eps  # stored as given (scikit-learn's clone checks identity)
        eps = value
        self._log_eps = float(safe_log(eps))
        self._log1m2eps = float(np.log1p(-2.0 * eps))
        self._xlogx = (float(xlogx(1.0 - eps)), float(xlogx(eps)))

    def _log_z(self, mean: Array, var: Array, power: float) -> TiltedLogZ:
        eps = float(self.eps)
        sd = np.sqrt(var)
        z = mean / sd
        log_floor = power * safe_log(eps)  # u log eps, -inf for eps = 0
        log_jump = np.log((1.0 - eps) ** power - eps**power)
        log_cdf = log_ndtr(z)
        log_z = np.logaddexp(log_floor, log_jump + log_cdf)
        weight = np.exp(log_jump + log_cdf - log_z)
        dlog_z = weight * normal_cdf_ratio(z) / sd
        d2log_z = -dlog_z * (dlog_z + z / sd)
        return TiltedLogZ(log_z, dlog_z, d2log_z)

    def _tilted_cumulants(self, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        # Z(mu) = eps + (1 - 2 eps) Phi(mu / s): sigma = s
        return _step_cumulants(mean, var, np.sqrt(var), self._log_z(mean, var, 1.0).dlog_z)

    def _log_lik(self, g: Array) -> Array:
        # t(0) = eps + (1 - 2 eps) / 2 = 1/2 (Theta(0) = 1/2; a null set under any Gaussian)
        eps = float(self.eps)
        return np.where(g > 0, np.log1p(-eps), np.where(g < 0, self._log_eps, np.log(0.5)))

    def _expected_log_lik(self, mean: Array, var: Array) -> Array:
        # E[log t] = [(1-eps) log(1-eps) Phi(z) + eps log(eps) (1 - Phi(z))] / Z
        z = mean / np.sqrt(var)
        log_cdf = log_ndtr(z)
        log_z = np.logaddexp(self._log_eps, self._log1m2eps + log_cdf)
        hi, lo = self._xlogx
        upper = np.exp(log_cdf - log_z) * hi
        return upper + np.exp(log_ndtr(-z) - log_z) * lo if lo != 0.0 else upper


class _QuadratureLikelihood(Likelihood):
    r"""A log-concave, increasing likelihood integrated by a mode-centred sinh rule.

    The tilted density :math:`p(g) \propto t(g)^u N(g | \mu, s^2)` is log-concave; its
    mode :math:`\hat g` solves :math:`u\,(\log t)'(\hat g) = (\hat g - \mu)/s^2` and lies
    in :math:`[\mu, \mu + s^2 u (\log t)'(\mu)]`, where a safeguarded Newton iteration
    finds it.  The integrals are then taken by the trapezoid rule in :math:`x` after the
    substitution :math:`g = \hat g + a \sinh x`, with :math:`a = \min(\ell, 1)`
    (:math:`\ell` the Laplace standard deviation, 1 the width of the likelihood's
    transition): nodes are dense at the mode and spread geometrically into the tails,
    so both scales are resolved.  The step is chosen so that the transition at
    :math:`g = 0` is sampled at least every 0.25.  Against adaptive quadrature the
    error stays below 1e-10 for :math:`|\mu| \le 200`, :math:`10^{-4} \le s^2 \le 10^4`,
    :math:`u \in [0.3, 1]` (see ``tests/test_likelihoods.py``).
    """

    _newton_iterations: int = 60
    _max_nodes: int = 4096

    @abstractmethod
    def _log_lik(self, g: Array) -> Array: ...

    @abstractmethod
    def _dlog_lik(self, g: Array) -> tuple[Array, Array]:
        """First and second derivative of ``log t``."""

    def _laplace(self, mean: Array, var: Array, power: float) -> tuple[Array, Array]:
        """Mode of the tilted density and the inverse curvature there."""
        d1_mu, _ = self._dlog_lik(mean)
        lo = mean.copy()
        hi = mean + var * power * d1_mu
        g = 0.5 * (lo + hi)
        for _ in range(self._newton_iterations):
            d1, d2 = self._dlog_lik(g)
            grad = power * d1 - (g - mean) / var
            hess = power * d2 - 1.0 / var
            lo = np.where(grad > 0, g, lo)
            hi = np.where(grad > 0, hi, g)
            step = g - grad / hess
            outside = ~((step >= lo) & (step <= hi))
            g_new = np.where(outside, 0.5 * (lo + hi), step)
            done = np.all(np.abs(g_new - g) <= 1e-10 * (1.0 + np.abs(g)))
            g = g_new
            if done:
                break
        _, d2 = self._dlog_lik(g)
        return g, 1.0 / (1.0 / var - power * d2)

    def _tilted_nodes(self, mean: Array, var: Array, power: float) -> tuple[Array, Array, Array]:
        """Nodes ``g_k``, normalised tilted weights and ``log Z`` (nodes on the last axis)."""
        mean, var = np.broadcast_arrays(mean, var)
        mode, lap_var = self._laplace(mean, var, power)
        lap_sd = np.sqrt(lap_var)
        scale = np.minimum(lap_sd, 1.0)
        half_width = np.arcsinh(14.0 * np.maximum(np.sqrt(var), lap_sd) / scale)
        max_step = np.minimum(0.08, 0.25 / np.maximum(np.abs(mode), scale))
        n_nodes = int(np.clip(np.max(np.ceil(2.0 * half_width / max_step), initial=1) + 1, 64, self._max_nodes))
        x = np.linspace(-1.0, 1.0, n_nodes) * half_width[..., None]
        step = (2.0 * half_width / (n_nodes - 1))[..., None]
        g = mode[..., None] + scale[..., None] * np.sinh(x)
        m, v = mean[..., None], var[..., None]
        log_terms = (
            np.log(step * scale[..., None] * np.cosh(x))
            + power * self._log_lik(g)
            - 0.5 * (g - m) ** 2 / v
            - 0.5 * np.log(2.0 * np.pi * v)
        )
        log_z = logsumexp(log_terms, axis=-1)
        weights = np.exp(log_terms - log_z[..., None])
        return g, weights, log_z

    def _log_z(self, mean: Array, var: Array, power: float) -> TiltedLogZ:
        g, weights, log_z = self._tilted_nodes(mean, var, power)
        mean_b, var_b = np.broadcast_arrays(mean, var)
        tilted_mean = np.sum(weights * g, axis=-1)
        tilted_var = np.sum(weights * (g - tilted_mean[..., None]) ** 2, axis=-1)
        dlog_z = (tilted_mean - mean_b) / var_b
        d2log_z = (tilted_var - var_b) / var_b**2
        return TiltedLogZ(log_z, dlog_z, d2log_z)

    def _tilted_cumulants(self, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        g, weights, _ = self._tilted_nodes(mean, var, 1.0)
        k1 = np.sum(weights * g, axis=-1)
        d = g - k1[..., None]
        k2 = np.sum(weights * d**2, axis=-1)
        k3 = np.sum(weights * d**3, axis=-1)
        k4 = np.sum(weights * d**4, axis=-1) - 3.0 * k2**2
        return k1, k2, k3, k4

    def _expected_log_lik(self, mean: Array, var: Array) -> Array:
        g, weights, _ = self._tilted_nodes(mean, var, 1.0)
        return np.sum(weights * self._log_lik(g), axis=-1)


class Probit(_QuadratureLikelihood):
    r"""Probit likelihood :math:`t(g) = \Phi(g)`.

    At ``u = 1`` the answer is closed form: with :math:`z = \mu / \sqrt{1 + s^2}`,
    :math:`\log Z = \log\Phi(z)`, :math:`\partial_\mu \log Z = r / \sqrt{1+s^2}` and
    :math:`\partial^2_\mu \log Z = -r (z + r) / (1 + s^2)`, :math:`r = N(z)/\Phi(z)`.
    Other powers use the mode-centred sinh quadrature rule.
    """

    def _log_lik(self, g: Array) -> Array:
        return log_ndtr(g)

    def _dlog_lik(self, g: Array) -> tuple[Array, Array]:
        r = normal_cdf_ratio(g)
        return r, -r * (g + r)

    def _log_z(self, mean: Array, var: Array, power: float) -> TiltedLogZ:
        if power != 1.0:
            return super()._log_z(mean, var, power)
        scale = np.sqrt(1.0 + var)
        z = mean / scale
        r = normal_cdf_ratio(z)
        return TiltedLogZ(log_ndtr(z), r / scale, -r * (z + r) / scale**2)

    def _tilted_cumulants(self, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        # Z(mu) = Phi(mu / sqrt(1 + s^2)): the step's form with eps = 0, sigma^2 = 1 + s^2
        scale = np.sqrt(1.0 + var)
        return _step_cumulants(mean, var, scale, normal_cdf_ratio(mean / scale) / scale)


class Logistic(_QuadratureLikelihood):
    r"""Logistic likelihood :math:`t(g) = \sigma(g) = 1 / (1 + e^{-g})`.

    All quantities by the mode-centred sinh quadrature rule;
    :math:`(\log\sigma)' = \sigma(-g)` and :math:`(\log\sigma)'' = -\sigma(g)\sigma(-g)`.
    """

    def _log_lik(self, g: Array) -> Array:
        return log_expit(g)

    def _dlog_lik(self, g: Array) -> tuple[Array, Array]:
        s_neg = expit(-g)
        return s_neg, -expit(g) * s_neg
