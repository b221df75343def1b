r"""Priors on a Gaussian process's hyperparameters, as densities of the log-parameters a search moves.

A hyperparameter :math:`v > 0` (a kernel's ``length_scale``, ``constant_value``, a likelihood's ``scale``) is
searched as :math:`\theta = \log v` (scikit-learn's ``Kernel.theta``).  A prior :math:`p_u` on
:math:`u = v^{p}` (``p = 1``; ``p = 1/2`` with ``sqrt=True``: a prior on the standard deviation of a variance
parameter, such as an amplitude :math:`\sigma_f` of ``ConstantKernel``'s :math:`\sigma_f^2`) is, as a density of
:math:`\theta`,

.. math::
    \log p(\theta) = g(p\,\theta) + \log p, \qquad g(s) = \log p_u(e^{s}) + s,

where :math:`g` is the density of :math:`s = \log u` (the Jacobian :math:`du/ds = u` included), so that a MAP
in :math:`\theta` is the mode of the posterior of the parameters the search moves, as GPstuff's (Vanhatalo et al.
2013, JMLR 14) and Stan's are.  Each family writes :math:`g` and :math:`g'` in :math:`s` (no overflow where
:math:`u` does), and ``log_density(theta)`` returns the value and the derivative in :math:`\theta`.

:class:`LogUniform` (:math:`p(v) \propto 1/v`: flat in :math:`\theta`, improper) is type-II maximum likelihood,
the search's objective without a prior.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import gammaln

from relaxep._typing import Array

__all__ = ["Gamma", "HalfStudentT", "HyperPrior", "InverseGamma", "LogNormal", "LogUniform", "Uniform"]


def _positive(value: float, name: str, owner: str) -> float:
    value = float(value) if isinstance(value, (int, float, np.floating, np.integer)) else np.nan
    if not np.isfinite(value) or value <= 0.0:
        raise ValueError(f"{owner}: {name} must be a finite number > 0")
    return value


@dataclass(frozen=True)
class HyperPrior:
    """A prior on one positive hyperparameter (module docstring); ``sqrt=True``: on its square root."""

    sqrt: bool = field(default=False, kw_only=True)
    #: whether the density integrates to one (:class:`LogUniform` and :class:`Uniform` do not)
    proper = True

    @property
    def power(self) -> float:
        return 0.5 if self.sqrt else 1.0

    def log_density(self, theta: ArrayLike, xp: Any = np) -> tuple[Array, Array]:
        r""":math:`\log p(\theta)` and :math:`d\log p/d\theta` at the log-parameters ``theta`` (elementwise), in
        the array library ``xp`` (numpy by default; a device's for the stochastic search's steps)."""
        theta = np.asarray(theta, dtype=float) if xp is np else theta
        p = self.power
        value, slope = self._log_density_of_log(p * theta, xp)
        return value + float(np.log(p)), p * slope

    def _log_density_of_log(self, s: Array, xp: Any) -> tuple[Array, Array]:  # pragma: no cover - abstract
        """:math:`g(s)` and :math:`g'(s)`: the density of :math:`s = \\log u` and its derivative."""
        raise NotImplementedError


@dataclass(frozen=True)
class LogUniform(HyperPrior):
    r""":math:`p(v) \propto 1/v` within the hyperparameter's bounds: flat in :math:`\theta = \log v`, improper; the
    search maximises the evidence alone (type-II maximum likelihood), as before priors."""

    proper = False

    def _log_density_of_log(self, s: Array, xp: Any) -> tuple[Array, Array]:
        return xp.zeros_like(s), xp.zeros_like(s)


@dataclass(frozen=True)
class Uniform(HyperPrior):
    r""":math:`p(u) \propto 1` (improper): :math:`g(s) = s`.  With ``sqrt=True`` on an amplitude's variance, GPstuff's
    ``prior_sqrtunif`` (uniform on :math:`\sigma_f`), the prior of its classification demos."""

    proper = False

    def _log_density_of_log(self, s: Array, xp: Any) -> tuple[Array, Array]:
        return s + 0.0, xp.ones_like(s)


@dataclass(frozen=True)
class HalfStudentT(HyperPrior):
    r"""Half-Student-t on :math:`u`, ``df`` :math:`\nu` and ``scale`` :math:`s`:
    :math:`p(u) = 2\,t_\nu(u/s)/s`, so :math:`g(s_u) = c - \tfrac{\nu+1}{2}\log(1 + e^{2s_u}/(\nu s^2)) + s_u`.
    Heavy tailed (:math:`\log p(\theta) \approx -\nu\,p\,\theta` far above the scale), weakly informative near it:
    GPstuff's default on length-scales (``prior_t``, :math:`\nu = 4`), Gelman (2006) on a scale parameter."""

    df: float = 4.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        _positive(self.df, "df", "HalfStudentT")
        _positive(self.scale, "scale", "HalfStudentT")

    def _log_density_of_log(self, s: Array, xp: Any) -> tuple[Array, Array]:
        nu, scale = float(self.df), float(self.scale)
        const = float(np.log(2.0) + gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * np.log(nu * np.pi) - np.log(scale))
        r = 2.0 * (s - float(np.log(scale))) - float(np.log(nu))  # log(u^2 / (nu scale^2))
        log1p_r = xp.logaddexp(xp.zeros_like(r), r)
        return const - (nu + 1) / 2 * log1p_r + s, 1.0 - (nu + 1) * xp.exp(r - log1p_r)


@dataclass(frozen=True)
class LogNormal(HyperPrior):
    r"""Log-normal on :math:`u`: :math:`\log u \sim N(\mu, \sigma^2)` (``mu``, ``sigma``), so
    :math:`g(s) = -(s - \mu)^2 / (2\sigma^2) - \log\sigma - \tfrac12\log 2\pi` (BoTorch's length-scale prior
    after Hvarfner, Hellsten & Nardi 2024 is one)."""

    mu: float = 0.0
    sigma: float = 1.0

    def __post_init__(self) -> None:
        if not np.isfinite(float(self.mu)):
            raise ValueError("LogNormal: mu must be finite")
        _positive(self.sigma, "sigma", "LogNormal")

    def _log_density_of_log(self, s: Array, xp: Any) -> tuple[Array, Array]:
        mu, sigma = float(self.mu), float(self.sigma)
        z = (s - mu) / sigma
        return -0.5 * z**2 - float(np.log(sigma) + 0.5 * np.log(2 * np.pi)), -z / sigma


@dataclass(frozen=True)
class Gamma(HyperPrior):
    r"""Gamma on :math:`u`, ``shape`` :math:`a` and ``rate`` :math:`b`:
    :math:`g(s) = a\log b - \log\Gamma(a) + a s - b e^{s}` (GPyTorch's classic length-scale and output-scale
    priors are gammas)."""

    shape: float = 2.0
    rate: float = 1.0

    def __post_init__(self) -> None:
        _positive(self.shape, "shape", "Gamma")
        _positive(self.rate, "rate", "Gamma")

    def _log_density_of_log(self, s: Array, xp: Any) -> tuple[Array, Array]:
        a, b = float(self.shape), float(self.rate)
        bu = b * xp.exp(s)
        return float(a * np.log(b) - gammaln(a)) + a * s - bu, a - bu


@dataclass(frozen=True)
class InverseGamma(HyperPrior):
    r"""Inverse gamma on :math:`u`, ``shape`` :math:`a` and ``scale`` :math:`b`:
    :math:`g(s) = a\log b - \log\Gamma(a) - a s - b e^{-s}`: a light left tail (no length-scale below the data's
    resolution), Stan's recommendation for GP length-scales (Betancourt 2017)."""

    shape: float = 2.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        _positive(self.shape, "shape", "InverseGamma")
        _positive(self.scale, "scale", "InverseGamma")

    def _log_density_of_log(self, s: Array, xp: Any) -> tuple[Array, Array]:
        a, b = float(self.shape), float(self.scale)
        b_over_u = b * xp.exp(-s)
        return float(a * np.log(b) - gammaln(a)) - a * s - b_over_u, -a + b_over_u
