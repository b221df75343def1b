r"""The Laplace likelihood for robust regression: the tilted is a mixture of two truncated Gaussians.

.. math:: p(y | f) = \frac{1}{2b} e^{-|y - f| / b}, \qquad p(y|f)^u = (2b)^{-u} e^{-\lambda |y - f|},\ \lambda = u/b.

Log-concave, so EP's site precisions stay positive, but with heavier tails than the Gaussian.  On
each side of :math:`y` the tilted :math:`p(y|f)^u N(f | \mu, s^2)` is a Gaussian
:math:`N(f | \mu \mp \lambda s^2, s^2)` truncated at :math:`y`; with :math:`r = \mu - y` and
:math:`z_\pm = (\pm r - \lambda s^2)/s`,

.. math::
    Z = (2b)^{-u}\Big(e^{-\lambda r + \lambda^2 s^2/2}\,\Phi(z_+) + e^{\lambda r + \lambda^2 s^2/2}\,\Phi(z_-)\Big),

each term in log space as :math:`-r^2/(2s^2) + \log(\tfrac12\operatorname{erfcx}(-z/\sqrt2))` when
:math:`z < 0` (no overflow of :math:`\lambda^2 s^2/2` against :math:`\log\Phi(z)`).  With
:math:`\pi_\pm` the two terms' shares and :math:`\hat p(y)` the tilted density at :math:`y`,

.. math::
    \partial_\mu \log Z = \lambda(\pi_- - \pi_+),\qquad
    \partial^2_\mu \log Z = 4\lambda^2\pi_+\pi_- - 2\lambda\,\hat p(y)

(differentiate under the integral: :math:`(e^{-\lambda|x|})'' = \lambda^2 e^{-\lambda|x|} - 2\lambda\delta(x)`).
Where the cavity is wider than the likelihood (:math:`\lambda s > 1`) these cancel, and the
derivatives come from the truncated Gaussians' moments instead,
:math:`E[\pm(f - y)] = s\rho(z_\pm)`, :math:`\operatorname{Var} = s^2 V(z_\pm)` with
:math:`\rho(z) = z + N(z)/\Phi(z)` and :math:`V(z) = 1 - \rho(z)(\rho(z) - z)`, both by the
continued fraction of Mills' ratio (Laplace 1805; Abramowitz & Stegun 26.2.14) for :math:`z < -30`.

The formulas are written once, in the array namespace (:meth:`Laplace._log_z_in`: numpy on the host, another
array library on its device, every power), with :math:`\log\Phi(z_\pm)` and :math:`N(z_\pm)/\Phi(z_\pm)` from one
call of :func:`relaxep._xp.normal_tail`:
:math:`\log(\tfrac12\operatorname{erfcx}(-z/\sqrt2)) = -\tfrac12\log(2\pi) - \log(N(z)/\Phi(z))`, and both
branches of each choice evaluated, the unused one on a harmless stand-in.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, ClassVar

import numpy as np
from scipy import stats

from relaxep._typing import Array
from relaxep._xp import normal_tail
from relaxep.likelihoods._panels import split_gap, two_centre_rule
from relaxep.likelihoods.base import Likelihood, TiltedLogZ, check_hyperparameter

__all__ = ["Laplace"]

_CF_FROM = -30.0  # below this z the continued fraction replaces z + N(z)/Phi(z)
_CF_TERMS = 40
_TAIL = 40.0
_LOG_SQRT_2PI = float(0.5 * np.log(2.0 * np.pi))


def _log_side(xp: ModuleType, r: Array, lam: float, s: Array, z: Array, log_cdf: Array, ratio: Array) -> Array:
    r""":math:`\log(e^{-\lambda r + \lambda^2 s^2/2}\Phi(z))`, :math:`z = (r - \lambda s^2)/s`, given
    :math:`\log\Phi(z)` and :math:`N(z)/\Phi(z)`:

    .. math::
        \log\big(e^{-\lambda r + \lambda^2 s^2/2}\Phi(z)\big) =
        \begin{cases} -\frac{r^2}{2s^2} - \frac12\log(2\pi) - \log\frac{N(z)}{\Phi(z)} & z < 0,\\
        -\lambda r + \frac12\lambda^2 s^2 + \log\Phi(z) & z \ge 0, \end{cases}

    the first since :math:`\tfrac12\operatorname{erfcx}(-z/\sqrt2) = \Phi(z)/N(z)\cdot N(0)`; each branch is
    evaluated on a stand-in (ratio 1; :math:`r = \lambda s = 0`) where the other one answers.
    """
    neg = z < 0.0
    tail = -0.5 * (r / s) ** 2 + (-_LOG_SQRT_2PI - xp.log(xp.where(neg, ratio, 1.0)))
    r_body, ls_body = xp.where(neg, 0.0, r), xp.where(neg, 0.0, lam * s)
    body = -lam * r_body + 0.5 * ls_body**2 + xp.where(neg, 0.0, log_cdf)
    return xp.where(neg, tail, body)


def _rho_and_v(xp: ModuleType, z: Array, ratio: Array) -> tuple[Array, Array]:
    r""":math:`\rho(z) = z + N(z)/\Phi(z)` and :math:`V(z) = 1 - \rho(\rho - z)`, stable for every ``z``, given
    :math:`N(z)/\Phi(z)`.

    Below :math:`z = -30` Mills' ratio :math:`M(t) = 1/(t + 1/(t + 2/(t + \dots)))` at :math:`t = -z` gives
    :math:`\rho = 1/d_1` and :math:`V = (d_2(t - 3/d_3) + 4)/(d_1 d_2)^2` without cancellation,
    :math:`d_k = t + (k+1)/d_{k+1}`, truncated after ``_CF_TERMS``.
    """
    far = z < _CF_FROM
    rho_near = z + ratio
    v_near = 1.0 - rho_near * (rho_near - z)
    t = xp.where(far, -z, 100.0)
    d3 = t
    for k in range(_CF_TERMS, 3, -1):
        d3 = t + k / d3
    d2 = t + 3.0 / d3
    d1 = t + 2.0 / d2
    rho_far = 1.0 / d1
    v_far = (d2 * (t - 3.0 / d3) + 4.0) / (d1 * d2) ** 2
    return xp.where(far, rho_far, rho_near), xp.where(far, v_far, v_near)


class Laplace(Likelihood):
    r"""Laplace noise: :math:`y = f + \epsilon`, :math:`p(\epsilon) = e^{-|\epsilon|/b}/(2b)`.

    Parameters
    ----------
    scale : float
        The scale :math:`b > 0` (the noise's variance is :math:`2b^2`).
    scale_bounds : pair of float or "fixed"
        Bounds for learning ``scale`` (scikit-learn's kernel convention).
    """

    hyperparameter_names = ("scale",)
    output_scale_hyperparameters: ClassVar[dict[str, int]] = {"scale": 1}
    closed_form_on_device = True
    tilted_on_device = True
    relaxed_on_device = True

    def __init__(self, scale: float = 1.0, scale_bounds: tuple[float, float] | str = (1e-5, 1e5)) -> None:
        self.scale, self.scale_bounds = check_hyperparameter(scale, scale_bounds, "scale")

    def _log_lik(self, y: Array, f: Array) -> Array:
        b = float(self.scale)
        return -np.log(2.0 * b) - np.abs(y - f) / b

    def _dlog_lik_dtheta(self, y: Array, f: Array) -> Array:
        return (np.abs(y - f) / float(self.scale) - 1.0)[..., None]

    def _sides(self, xp: ModuleType, y: Array, mean: Array, var: Array, power: float) -> dict[str, Any]:
        r"""The two sides (``up``: :math:`f > y`): with :math:`\lambda = u/b`, :math:`r = \mu - y`,
        :math:`z_\pm = (\pm r - \lambda s^2)/s` and the sides' logarithms :math:`\ell_\pm` (:func:`_log_side`),
        :math:`\log Z = -u\log(2b) + \operatorname{logaddexp}(\ell_+, \ell_-)`, the shares
        :math:`\pi_\pm = e^{\ell_\pm - (\log Z + u\log 2b)}` and the truncated Gaussians' :math:`\rho(z_\pm),
        V(z_\pm)` (:func:`_rho_and_v`), from one :func:`~relaxep._xp.normal_tail` call."""
        y, mean, var = xp.broadcast_arrays(y, mean, var)
        b = float(self.scale)
        lam = power / b
        r, s = mean - y, xp.sqrt(var)
        z_up, z_down = (r - lam * var) / s, (-r - lam * var) / s
        log_cdf, ratio = normal_tail(xp, xp.stack([z_up, z_down]))  # (one call: one round trip where it takes one)
        log_up = _log_side(xp, r, lam, s, z_up, log_cdf[0, ...], ratio[0, ...])
        log_down = _log_side(xp, -r, lam, s, z_down, log_cdf[1, ...], ratio[1, ...])
        log_sum = xp.logaddexp(log_up, log_down)
        log_z = float(-power * np.log(2.0 * b)) + log_sum
        pi_up, pi_down = xp.exp(log_up - log_sum), xp.exp(log_down - log_sum)
        rho_up, v_up = _rho_and_v(xp, z_up, ratio[0, ...])
        rho_down, v_down = _rho_and_v(xp, z_down, ratio[1, ...])
        return dict(log_z=log_z, pi_up=pi_up, pi_down=pi_down, r=r, s=s, lam=lam, log_sum=log_sum, rho_up=rho_up,
                    v_up=v_up, rho_down=rho_down, v_down=v_down)  # fmt: skip

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        return self._log_z_in(np, y, mean, var, power)

    def _log_z_in(self, xp: ModuleType, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        r""":meth:`log_z` in ``xp`` at any power :math:`u` (module docstring): :meth:`_sides`, then the derivatives
        :math:`\lambda(\pi_- - \pi_+)`, :math:`4\lambda^2\pi_+\pi_- - 2\lambda\hat p(y)` where
        :math:`\lambda s \le 1`, else :math:`(E[f] - \mu)/s^2` and :math:`(\operatorname{Var}[f] - s^2)/s^4` from
        the truncated Gaussians' :math:`\rho(z_\pm)`, :math:`V(z_\pm)`: both evaluated, one kept (``xp.where``)."""
        return self._log_z_of(xp, self._sides(xp, y, mean, var, power))

    def _log_z_of(self, xp: ModuleType, sides: dict[str, Any]) -> TiltedLogZ:
        pi_up, pi_down, r, s, lam = sides["pi_up"], sides["pi_down"], sides["r"], sides["s"], sides["lam"]
        s2 = s * s
        # the formulas in lambda (a narrow cavity) ...
        log_density_y = -0.5 * (r / s) ** 2 - 0.5 * xp.log(2.0 * np.pi * s2) - sides["log_sum"]  # p_hat(y) (2b)^u
        d1_lam = lam * (pi_down - pi_up)
        d2_lam = 4.0 * lam**2 * pi_up * pi_down - 2.0 * lam * xp.exp(log_density_y)
        # ... and the moments of the two truncated Gaussians (a wide one)
        rho_up, v_up, rho_down, v_down = sides["rho_up"], sides["v_up"], sides["rho_down"], sides["v_down"]
        mean_from_y = s * (pi_up * rho_up - pi_down * rho_down)  # E[f] - y
        t_var = s2 * (pi_up * v_up + pi_down * v_down + pi_up * pi_down * (rho_up + rho_down) ** 2)
        wide = lam * s > 1.0
        dlog_z = xp.where(wide, (mean_from_y - r) / s2, d1_lam)
        d2log_z = xp.where(wide, (t_var - s2) / s2**2, d2_lam)
        return TiltedLogZ(sides["log_z"], dlog_z, d2log_z)

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        return self._expected_log_lik_in(np, y, mean, var)

    def _expected_log_lik_in(self, xp: ModuleType, y: Array, mean: Array, var: Array) -> Array:
        r""":math:`E[\log p(y|f)] = -\log(2b) - E|f - y|/b` at ``u = 1`` (:meth:`_mean_abs`)."""
        return float(-np.log(2.0 * float(self.scale))) - self._mean_abs(self._sides(xp, y, mean, var, 1.0)) / float(
            self.scale
        )

    def log_z_and_expected_on(self, xp: ModuleType, y: Array, mean: Array, var: Array) -> tuple[TiltedLogZ, Array]:
        """Both from one :meth:`_sides` at ``u = 1`` (one :func:`~relaxep._xp.normal_tail` call)."""
        sides = self._sides(xp, y, mean, var, 1.0)
        b = float(self.scale)
        return self._log_z_of(xp, sides), float(-np.log(2.0 * b)) - self._mean_abs(sides) / b

    @staticmethod
    def _mean_abs(sides: dict[str, Any]) -> Array:
        r""":math:`E|f - y|` under the tilted at ``u = 1``: :math:`s(\pi_+\rho(z_+) + \pi_-\rho(z_-))`."""
        return sides["s"] * (sides["pi_up"] * sides["rho_up"] + sides["pi_down"] * sides["rho_down"])

    def _dlog_z_dtheta(self, y: Array, mean: Array, var: Array) -> Array:
        # d log p / d log b = |y - f| / b - 1
        return (self._mean_abs(self._sides(np, y, mean, var, 1.0)) / float(self.scale) - 1.0)[..., None]

    def _tilted_cumulants(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        r"""By the two-centre rule at :math:`y` (the kink) and the upper side's mode (:func:`two_sided_cumulants`)."""
        lam = 1.0 / float(self.scale)
        return two_sided_cumulants(y, mean, var, lam, lam)

    def _noise(self) -> stats.rv_continuous:
        return stats.laplace(0.0, float(self.scale))

    def _cdf(self, y: Array, f: Array) -> Array:
        # 1/2 e^{-|x|/b} below zero, 1 - 1/2 e^{-|x|/b} above
        x = (y - f) / float(self.scale)
        half_tail = 0.5 * np.exp(-np.abs(x))
        return np.where(x < 0.0, half_tail, 1.0 - half_tail)

    def _noise_variance(self) -> float:
        return 2.0 * float(self.scale) ** 2


def two_sided_cumulants(
    y: Array, mean: Array, var: Array, lam_up: float, lam_down: float
) -> tuple[Array, Array, Array, Array]:
    r"""The first four cumulants of
    :math:`\hat p(f) \propto e^{-\lambda_+ (f - y)_+ - \lambda_- (y - f)_+} N(f | \mu, s^2)`
    (the Laplace's, :math:`\lambda_\pm = 1/b`; the asymmetric Laplace's), by the two-centre rule of
    :mod:`relaxep.likelihoods._panels` at the kink :math:`y` and the far side's mode, the problem flipped so that
    :math:`\mu \ge y` (the rates swap with it)."""
    y, mean, var = np.broadcast_arrays(y, mean, var)
    resid = mean - y
    sign = np.where(resid < 0.0, -1.0, 1.0)
    lam_hi = np.where(resid < 0.0, lam_down, lam_up)  # (the rate on the cavity's side of the kink, after the flip)
    lam_lo = np.where(resid < 0.0, lam_up, lam_down)
    r, s = np.abs(resid), np.sqrt(var)
    shift = np.minimum(lam_hi * var, r)  # the upper side's mode is at x = r - shift >= 0
    c2 = r - shift
    # at the kink the sides fall off as Gaussian tails, on the scale s^2 / (r + lambda s^2) <= 1 / lambda
    w1 = np.minimum(s, var / (r + lam_lo * var))
    gap = c2
    w2 = np.where(gap > 0.0, s, w1)
    gap1, gap2 = split_gap(w1, w2, gap)
    reach = np.sqrt(2.0 * _TAIL) * s
    disp, second, jac = two_centre_rule(w1, w2, gap1, gap2, reach, shift + reach)
    x = np.where(second, c2[..., None], 0.0) + disp  # offset from y (flipped)
    e = np.where(second, -shift[..., None], -r[..., None]) + disp  # offset from mu (flipped)
    log_terms = -lam_hi[..., None] * np.maximum(x, 0.0) - lam_lo[..., None] * np.maximum(-x, 0.0)
    log_terms = log_terms - (0.5 / var[..., None]) * e**2
    terms = jac * np.exp(log_terms - np.max(log_terms, axis=-1, keepdims=True))
    weights = terms / np.sum(terms, axis=-1, keepdims=True)
    e_mean = np.sum(weights * e, axis=-1)
    d = e - e_mean[..., None]
    wd2 = weights * d * d
    k2 = np.sum(wd2, axis=-1)
    k3 = np.sum(wd2 * d, axis=-1)
    k4 = np.sum(wd2 * d * d, axis=-1) - 3.0 * k2**2
    return mean + sign * e_mean, k2, sign * k3, k4
