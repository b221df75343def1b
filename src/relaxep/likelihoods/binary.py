r"""Binary-classification likelihoods: the paper's noisy step, the noisy probit, probit and logistic.

Each is a function :math:`t(g)` of the label-folded latent :math:`g = y f`.  The noisy probit
:math:`\epsilon + (1 - 2\epsilon)\Phi(g / \sigma)` is the noisy step seen through Gaussian latent
noise of scale :math:`\sigma`: it contains the step (:math:`\sigma \to 0`) and the probit
(:math:`\epsilon = 0, \sigma = 1`).
"""

from __future__ import annotations

import numbers
from types import ModuleType

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtri, xlogy

from relaxep._numerics import normal_cdf_ratio, safe_log
from relaxep._typing import Array
from relaxep._xp import expit, inverse_mills, log_expit, normal_tail
from relaxep._xp import log_ndtr as log_ndtr_in
from relaxep.likelihoods.base import TiltedLogZ
from relaxep.likelihoods.binary_base import BinaryLikelihood, check_level
from relaxep.likelihoods.quadrature import QuadratureLikelihood

__all__ = ["Logistic", "NoisyProbit", "NoisyStep", "Probit"]


def _check_eps(eps: object) -> float:
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"label-noise rate eps must be a real number in [0, 0.5), got {eps!r}")
    return float(eps)


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


class NoisyStep(BinaryLikelihood):
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
        value = _check_eps(eps)
        if not np.isfinite(value) or not (0.0 <= value < 0.5):
            raise ValueError(f"label-noise rate eps must lie in [0, 0.5), got {eps!r}")
        self.eps = eps  # stored as given (scikit-learn's clone checks identity)
        eps = value
        self._log_eps = float(safe_log(eps))
        self._log1m2eps = float(np.log1p(-2.0 * eps))
        self._xlogx = (float(xlogy(1.0 - eps, 1.0 - eps)), float(xlogy(eps, eps)))

    closed_form_on_device = True
    tilted_on_device = True
    relaxed_on_device = True

    def _folded_log_z_in(self, xp: ModuleType, mean: Array, var: Array, power: float) -> TiltedLogZ:
        eps = float(self.eps)
        sd = xp.sqrt(var)
        z = mean / sd
        log_floor = float(power * safe_log(eps))  # u log eps, -inf for eps = 0
        log_jump = float(np.log((1.0 - eps) ** power - eps**power))
        log_cdf, ratio = normal_tail(xp, z)
        log_z = xp.logaddexp(xp.full_like(log_cdf, log_floor), log_jump + log_cdf)
        weight = xp.exp(log_jump + log_cdf - log_z)
        dlog_z = weight * ratio / sd
        d2log_z = -dlog_z * (dlog_z + z / sd)
        return TiltedLogZ(log_z, dlog_z, d2log_z)

    def latent_threshold(self, level: float, var: ArrayLike) -> Array:
        r""":math:`t = s\,\Phi^{-1}((\ell - \epsilon)/(1 - 2\epsilon))` (the predictive
        :math:`\epsilon + (1 - 2\epsilon)\Phi(t/s)` equal to :math:`\ell`; 0 at ``var = 0``, the step)."""
        eps = float(self.eps)
        q = (check_level(level, eps) - eps) / (1.0 - 2.0 * eps)
        return ndtri(q) * np.sqrt(np.maximum(np.asarray(var, dtype=float), 0.0))

    def _folded_cumulants(self, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        # Z(mu) = eps + (1 - 2 eps) Phi(mu / s): sigma = s
        return _step_cumulants(mean, var, np.sqrt(var), self._folded_log_z(mean, var, 1.0).dlog_z)

    def _folded_log_lik(self, g: Array) -> Array:
        # t(0) = eps + (1 - 2 eps) / 2 = 1/2 (Theta(0) = 1/2; a null set under any Gaussian)
        eps = float(self.eps)
        return np.where(g > 0, np.log1p(-eps), np.where(g < 0, self._log_eps, np.log(0.5)))

    def _folded_expected_log_lik(self, mean: Array, var: Array) -> Array:
        return self._folded_expected_log_lik_in(np, mean, var)

    def _folded_expected_log_lik_in(self, xp: ModuleType, mean: Array, var: Array) -> Array:
        r""":math:`E[\log t] = [(1-\epsilon)\log(1-\epsilon)\Phi(z) + \epsilon\log\epsilon\,(1 - \Phi(z))]/Z`,
        :math:`\log\Phi(\pm z)` from one :func:`~relaxep._xp.log_ndtr` call."""
        z = mean / xp.sqrt(var)
        both = log_ndtr_in(xp, xp.stack([z, -z]))
        log_cdf = both[0, ...]
        log_z = xp.logaddexp(xp.full_like(log_cdf, self._log_eps), self._log1m2eps + log_cdf)
        hi, lo = self._xlogx
        upper = xp.exp(log_cdf - log_z) * hi
        return upper + xp.exp(both[1, ...] - log_z) * lo if lo != 0.0 else upper


class Probit(QuadratureLikelihood):
    r"""Probit likelihood :math:`t(g) = \Phi(g)`.

    At ``u = 1`` the answer is closed form: with :math:`z = \mu / \sqrt{1 + s^2}`,
    :math:`\log Z = \log\Phi(z)`, :math:`\partial_\mu \log Z = r / \sqrt{1+s^2}` and
    :math:`\partial^2_\mu \log Z = -r (z + r) / (1 + s^2)`, :math:`r = N(z)/\Phi(z)`.
    Other powers use the mode-centred sinh quadrature rule.
    """

    closed_form_on_device = True

    def _folded_log_lik_in(self, xp: ModuleType, g: Array) -> Array:
        return log_ndtr_in(xp, g)

    def _folded_dlog_lik_in(self, xp: ModuleType, g: Array) -> tuple[Array, Array]:
        r = inverse_mills(xp, g)
        return r, -r * (g + r)

    def _folded_log_z_in(self, xp: ModuleType, mean: Array, var: Array, power: float) -> TiltedLogZ:
        if power != 1.0:
            return super()._folded_log_z_in(xp, mean, var, power)
        scale = xp.sqrt(1.0 + var)
        z = mean / scale
        log_cdf, r = normal_tail(xp, z)
        return TiltedLogZ(log_cdf, r / scale, -r * (z + r) / scale**2)

    def latent_threshold(self, level: float, var: ArrayLike) -> Array:
        r""":math:`t = \Phi^{-1}(\ell)\sqrt{1 + s^2}` (the predictive :math:`\Phi(t/\sqrt{1 + s^2})` equal to
        :math:`\ell`)."""
        return ndtri(check_level(level)) * np.sqrt(1.0 + np.asarray(var, dtype=float))

    def _folded_cumulants(self, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        # Z(mu) = Phi(mu / sqrt(1 + s^2)): the step's form with eps = 0, sigma^2 = 1 + s^2
        scale = np.sqrt(1.0 + var)
        return _step_cumulants(mean, var, scale, normal_cdf_ratio(mean / scale) / scale)


class Logistic(QuadratureLikelihood):
    r"""Logistic likelihood :math:`t(g) = \sigma(g) = 1 / (1 + e^{-g})`.

    All quantities by the mode-centred sinh quadrature rule;
    :math:`(\log\sigma)' = \sigma(-g)` and :math:`(\log\sigma)'' = -\sigma(g)\sigma(-g)`, each once in the
    array namespace (:func:`relaxep._xp.log_expit`, :func:`relaxep._xp.expit`: SciPy's on numpy); the device
    rule's Newton search starts at :math:`g = 0`.
    """

    _newton_start = 0.0  # (the inflection point of sigma(-g): Newton approaches the mode from one side)

    def _folded_log_lik_in(self, xp: ModuleType, g: Array) -> Array:
        return log_expit(xp, g)

    def _folded_dlog_lik_in(self, xp: ModuleType, g: Array) -> tuple[Array, Array]:
        s_neg = expit(xp, -g)
        return s_neg, -expit(xp, g) * s_neg


class NoisyProbit(QuadratureLikelihood):
    r"""Label noise with latent noise: the noisy step seen through :math:`N(0, \sigma^2)` noise on ``f``.

    .. math:: t(g) = \epsilon + (1 - 2\epsilon)\,\Phi(g / \sigma), \qquad 0 \le \epsilon < 1/2,\ \sigma > 0,

    the probability of label :math:`y` when the sign of :math:`f + e`, :math:`e \sim N(0, \sigma^2)`, is
    flipped with probability :math:`\epsilon`.  ``NoisyProbit(0, 1)`` is :class:`Probit`; as
    :math:`\sigma \to 0` it tends to :class:`NoisyStep`.  It is smooth, so EP on it behaves like EP
    on the probit, while the floor :math:`\epsilon` keeps a flipped label from dragging the latent
    function: a far-away wrong label costs at most :math:`\log(1/\epsilon)`.

    At ``u = 1`` everything is closed form: with :math:`\varsigma = \sqrt{\sigma^2 + s^2}` and
    :math:`z = \mu/\varsigma`, :math:`Z = \epsilon + (1 - 2\epsilon)\Phi(z)` (the noisy step's
    formulas with :math:`s` replaced by :math:`\varsigma`), so the tilted cumulants follow as for the
    step.  Powers ``u < 1`` and :math:`E[\log t]` use the mode-centred sinh rule with transition
    width :math:`\sigma`.
    """

    def __init__(self, eps: float = 0.05, scale: float = 1.0) -> None:
        value = _check_eps(eps)
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
            raise TypeError(f"latent noise scale must be a real number, got {scale!r}")
        if not np.isfinite(value) or not (0.0 <= value < 0.5):
            raise ValueError(f"label-noise rate eps must lie in [0, 0.5), got {eps!r}")
        if not (np.isfinite(float(scale)) and float(scale) > 0.0):
            raise ValueError(f"latent noise scale must be positive and finite, got {scale!r}")
        self.eps = eps
        self.scale = scale
        self._log_eps = float(safe_log(value))
        self._log_jump = float(np.log1p(-2.0 * value))

    @property
    def _transition_width(self) -> float:
        return float(self.scale)

    def _folded_log_lik_in(self, xp: ModuleType, g: Array) -> Array:
        log_cdf = log_ndtr_in(xp, g / float(self.scale))
        return xp.logaddexp(xp.full_like(log_cdf, self._log_eps), self._log_jump + log_cdf)

    def _folded_dlog_lik_in(self, xp: ModuleType, g: Array) -> tuple[Array, Array]:
        return self._step(xp, g / float(self.scale), float(self.scale))[1:]

    def _step(self, xp: ModuleType, z: Array, sigma: Array | float) -> tuple[Array, Array, Array]:
        r""":math:`\log t`, :math:`(\log t)'` and :math:`(\log t)''` of :math:`t = \epsilon + (1 - 2\epsilon)
        \Phi(g/\sigma)` at :math:`z = g/\sigma`: :math:`w N(z)/(\sigma\Phi(z))` with the weight
        :math:`w = (1 - 2\epsilon)\Phi(z)/t` in log space, and :math:`-d_1(d_1 + z/\sigma)`."""
        log_cdf, ratio = normal_tail(xp, z)
        log_t = xp.logaddexp(xp.full_like(log_cdf, self._log_eps), self._log_jump + log_cdf)
        d1 = xp.exp(self._log_jump + log_cdf - log_t) * ratio / sigma
        return log_t, d1, -d1 * (d1 + z / sigma)

    closed_form_on_device = True

    def _folded_log_z_in(self, xp: ModuleType, mean: Array, var: Array, power: float) -> TiltedLogZ:
        r"""At ``u = 1`` the closed form, :math:`Z = t(\mu)` with :math:`\sigma` replaced by
        :math:`\varsigma = \sqrt{\sigma^2 + s^2}` (:meth:`_step`); the sinh rule at other powers."""
        if power != 1.0:
            return super()._folded_log_z_in(xp, mean, var, power)
        sigma = xp.sqrt(float(self.scale) ** 2 + var)
        return TiltedLogZ(*self._step(xp, mean / sigma, sigma))

    def latent_threshold(self, level: float, var: ArrayLike) -> Array:
        r""":math:`t = \varsigma\,\Phi^{-1}((\ell - \epsilon)/(1 - 2\epsilon))`, :math:`\varsigma =
        \sqrt{\sigma^2 + s^2}` (the predictive :math:`\epsilon + (1 - 2\epsilon)\Phi(t/\varsigma)` equal to
        :math:`\ell`)."""
        eps = float(self.eps)
        q = (check_level(level, eps) - eps) / (1.0 - 2.0 * eps)
        return ndtri(q) * np.sqrt(float(self.scale) ** 2 + np.asarray(var, dtype=float))

    def _folded_cumulants(self, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        # Z(mu) = eps + (1 - 2 eps) Phi(mu / varsigma): the step's form with sigma^2 = scale^2 + s^2
        sigma = np.sqrt(float(self.scale) ** 2 + var)
        return _step_cumulants(mean, var, sigma, self._folded_log_z_in(np, mean, var, 1.0).dlog_z)
