r"""The standardised noise of a survival model: the distribution of :math:`\epsilon` in :math:`z = \epsilon`.

An accelerated-failure-time model writes :math:`\log T = f + \sigma\epsilon` (Kalbfleisch & Prentice 2002,
"The Statistical Analysis of Failure Time Data", 2nd ed., section 2.3.4): the event time's law is the noise's
shifted and scaled, so every row's likelihood is a density or an interval mass of :math:`\epsilon`.  Three
families, each log-concave (so the tilted integrals are unimodal and EP's site precisions positive), written in
log space with their derivatives in :math:`z`:

* :class:`GumbelMin`: :math:`\log p(z) = z - e^z`, :math:`\log S(z) = -e^z` (the Weibull model; with a
  piecewise-constant baseline also the proportional-hazards model, :mod:`relaxep.likelihoods.coxph`);
* :class:`LogisticNoise`: :math:`\log p(z) = -z - 2\operatorname{sp}(-z)`, :math:`\log S(z) = -\operatorname{sp}(z)`
  (the log-logistic model), :math:`\operatorname{sp}` the softplus;
* :class:`NormalNoise`: the standard normal (the log-normal model), :math:`\log S(z) = \log\Phi(-z)`
  (``log_ndtr``) and the Mills ratio by ``erfcx``.

Each answers ``log_pdf``, ``dlog_pdf`` (first and second derivatives), ``log_sf``, ``dlog_sf``, ``log_cdf``,
``dlog_cdf`` and ``ppf``, at finite ``z``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from scipy.special import expit, log_ndtr, ndtri

from relaxep._numerics import normal_cdf_ratio
from relaxep._typing import Array

__all__ = ["GumbelMin", "LogisticNoise", "NoiseFamily", "NormalNoise"]


def _softplus(z: Array) -> Array:
    return np.logaddexp(0.0, z)


class NoiseFamily:
    """A standardised, log-concave noise law on the real line (the module docstring)."""

    name: ClassVar[str] = ""
    #: the median, :math:`F^{-1}(1/2)`
    median: ClassVar[float] = 0.0

    def log_pdf(self, z: Array) -> Array:
        raise NotImplementedError

    def dlog_pdf(self, z: Array) -> tuple[Array, Array]:
        raise NotImplementedError

    def log_sf(self, z: Array) -> Array:
        raise NotImplementedError

    def dlog_sf(self, z: Array) -> tuple[Array, Array]:
        raise NotImplementedError

    def log_cdf(self, z: Array) -> Array:
        raise NotImplementedError

    def dlog_cdf(self, z: Array) -> tuple[Array, Array]:
        raise NotImplementedError

    def ppf(self, p: Array) -> Array:
        raise NotImplementedError


class GumbelMin(NoiseFamily):
    r"""The minimum-Gumbel law, :math:`S(z) = \exp(-e^z)`: :math:`\log T` of a Weibull time, standardised.

    With :math:`x = e^z`: :math:`(\log p)' = 1 - x`, :math:`(\log p)'' = -x`; :math:`(\log S)' = (\log S)'' = -x`;
    :math:`\log F = \log(-\operatorname{expm1}(-x))`, :math:`(\log F)' = x/\operatorname{expm1}(x)` and
    :math:`(\log F)'' = x\,(\operatorname{expm1}(x) - x e^x)/\operatorname{expm1}(x)^2`.
    """

    name = "weibull"
    median = float(np.log(np.log(2.0)))

    def log_pdf(self, z: Array) -> Array:
        return z - np.exp(z)

    def dlog_pdf(self, z: Array) -> tuple[Array, Array]:
        x = np.exp(z)
        return 1.0 - x, -x

    def log_sf(self, z: Array) -> Array:
        return -np.exp(z)

    def dlog_sf(self, z: Array) -> tuple[Array, Array]:
        x = np.exp(z)
        return -x, -x

    def log_cdf(self, z: Array) -> Array:
        z = np.asarray(z, dtype=float)
        # far below, log(1 - e^{-x}) = log x - x/2 + x^2/24 - ...: z itself where e^z underflows
        # above log log 2 (F > 1/2), log1p(-e^{-x}) keeps the relative accuracy of log F near 0
        with np.errstate(divide="ignore", over="ignore"):
            x = np.exp(z)
            upper = np.log1p(-np.exp(-x))
            return np.where(z < -20.0, z - 0.5 * x, np.where(x > np.log(2.0), upper, np.log(-np.expm1(-x))))

    def dlog_cdf(self, z: Array) -> tuple[Array, Array]:
        x = np.exp(np.minimum(z, 6.0))  # beyond e^6 = 403, F = 1 to rounding: both derivatives 0
        em1 = np.expm1(x)
        with np.errstate(invalid="ignore"):
            d1 = np.where(x > 0.0, x / em1, 1.0)  # x / expm1(x) -> 1 as x -> 0 (e^z underflowing)
        # expm1(x) - x e^x = -(x^2/2 + x^3/3 + x^4/8 + ...): its series where the difference cancels
        diff = np.where(x < 1e-3, -(x**2) * (0.5 + x / 3.0 + x**2 / 8.0), em1 - x * np.exp(x))
        with np.errstate(invalid="ignore", divide="ignore"):
            # x / expm1(x) = 1 - x/2 + x^2/12 - ..., so d2 = x (-1/2 + x/6) + O(x^4) where em1^2 underflows
            d2 = np.where(x < 1e-3, x * (x / 6.0 - 0.5), x * diff / em1**2)
        far = z > 6.0
        return np.where(far, 0.0, d1), np.where(far, 0.0, d2)

    def ppf(self, p: Array) -> Array:
        return np.log(-np.log1p(-np.asarray(p, dtype=float)))


class LogisticNoise(NoiseFamily):
    r"""The standard logistic law, :math:`S(z) = \sigma(-z)`: :math:`\log T` of a log-logistic time, standardised.

    :math:`(\log p)' = 1 - 2\sigma(z)`, :math:`(\log p)'' = -2\sigma(z)\sigma(-z)`;
    :math:`(\log S)' = -\sigma(z)`, :math:`(\log F)' = \sigma(-z)`, both second derivatives
    :math:`-\sigma(z)\sigma(-z)`.
    """

    name = "loglogistic"
    median = 0.0

    def log_pdf(self, z: Array) -> Array:
        return -z - 2.0 * _softplus(-z)

    def dlog_pdf(self, z: Array) -> tuple[Array, Array]:
        s, r = expit(z), expit(-z)
        return r - s, -2.0 * s * r

    def log_sf(self, z: Array) -> Array:
        return -_softplus(z)

    def dlog_sf(self, z: Array) -> tuple[Array, Array]:
        s, r = expit(z), expit(-z)
        return -s, -s * r

    def log_cdf(self, z: Array) -> Array:
        return -_softplus(-z)

    def dlog_cdf(self, z: Array) -> tuple[Array, Array]:
        s, r = expit(z), expit(-z)
        return r, -s * r

    def ppf(self, p: Array) -> Array:
        p = np.asarray(p, dtype=float)
        return np.log(p) - np.log1p(-p)


class NormalNoise(NoiseFamily):
    r"""The standard normal law: :math:`\log T` of a log-normal time, standardised.

    :math:`(\log p)' = -z`, :math:`(\log p)'' = -1`; with the Mills ratio :math:`r(z) = N(z)/\Phi(z)`,
    :math:`(\log F)' = r(z)`, :math:`(\log F)'' = -r(z)(z + r(z))`, and :math:`\log S(z) = \log F(-z)`.
    """

    name = "lognormal"
    median = 0.0

    def log_pdf(self, z: Array) -> Array:
        return -0.5 * z**2 - 0.5 * np.log(2.0 * np.pi)

    def dlog_pdf(self, z: Array) -> tuple[Array, Array]:
        return -z, -np.ones_like(z)

    def log_sf(self, z: Array) -> Array:
        return log_ndtr(-z)

    def dlog_sf(self, z: Array) -> tuple[Array, Array]:
        r = normal_cdf_ratio(-z)
        return -r, -r * (r - z)

    def log_cdf(self, z: Array) -> Array:
        return log_ndtr(z)

    def dlog_cdf(self, z: Array) -> tuple[Array, Array]:
        r = normal_cdf_ratio(z)
        return r, -r * (z + r)

    def ppf(self, p: Array) -> Array:
        return ndtri(np.asarray(p, dtype=float))
