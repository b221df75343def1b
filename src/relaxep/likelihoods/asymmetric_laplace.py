r"""The asymmetric Laplace likelihood: quantile regression by EP, the latent the :math:`\tau`-quantile.

.. math::
    p(y | f) = \frac{\tau(1 - \tau)}{\sigma}\exp\Big(-\rho_\tau\Big(\frac{y - f}{\sigma}\Big)\Big),\qquad
    \rho_\tau(r) = r\,(\tau - [r < 0]),

whose maximiser in :math:`f` is the :math:`\tau`-quantile of the targets (Koenker & Bassett's check loss); a GP
prior on :math:`f` makes it a GP quantile regression (Boukouvalas, Barillec & Cornford 2012, by EP, as GPstuff's
``lik_qgp``).  :math:`\tau = 1/2` is the Laplace with scale :math:`2\sigma`.  At a power :math:`u`, the likelihood
falls at rate :math:`\lambda_+ = u(1 - \tau)/\sigma` above :math:`y` and :math:`\lambda_- = u\tau/\sigma` below
it, so the tilted is two truncated Gaussians, :math:`N(\mu - \lambda_+ s^2, s^2)` on :math:`f > y` and
:math:`N(\mu + \lambda_- s^2, s^2)` on :math:`f < y`; with :math:`r = \mu - y`,

.. math::
    Z = \Big(\frac{\tau(1 - \tau)}{\sigma}\Big)^u\Big(e^{-\lambda_+ r + \lambda_+^2 s^2/2}\Phi(z_+)
    + e^{\lambda_- r + \lambda_-^2 s^2/2}\Phi(z_-)\Big),\qquad z_\pm = (\pm r - \lambda_\pm s^2)/s,

each side in log space by :func:`relaxep.likelihoods.laplace._log_side`.  With the shares :math:`\pi_\pm` and the
tilted density :math:`\hat p(y)` at the kink,

.. math::
    \partial_\mu\log Z = \lambda_-\pi_- - \lambda_+\pi_+,\qquad
    \partial^2_\mu\log Z = \lambda_+^2\pi_+ + \lambda_-^2\pi_- - (\lambda_+ + \lambda_-)\hat p(y)
    - (\partial_\mu\log Z)^2,

or, for a cavity wider than the likelihood (:math:`\max\lambda_\pm\, s > 1`, where those cancel), from the truncated
Gaussians' moments :math:`E[\pm(f - y)] = s\rho(z_\pm)`, :math:`s^2V(z_\pm)`
(:func:`~relaxep.likelihoods.laplace._rho_and_v`),
as the Laplace's are.  Written once in the array namespace: numpy on the host, another array library on its device.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats
from scipy.special import ndtr

from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep._xp import normal_tail
from relaxep.likelihoods.base import Likelihood, TiltedLogZ, _as_floats, check_hyperparameter
from relaxep.likelihoods.laplace import _log_side, _rho_and_v, two_sided_cumulants

__all__ = ["AsymmetricLaplace"]

_BISECTIONS = 200


class AsymmetricLaplace(Likelihood):
    r"""Asymmetric Laplace noise for quantile regression: the latent :math:`f` is the :math:`\tau`-quantile of
    :math:`y`.

    Parameters
    ----------
    quantile : float
        :math:`\tau \in (0, 1)`, the quantile estimated (0.5: the median).
    scale : float, optional
        :math:`\sigma > 0`, the check loss's scale; by default :math:`\varphi(\Phi^{-1}(\tau))`, its maximum-likelihood
        value for standard normal noise about the quantile (0.40 at the median, 0.18 at 0.1 and 0.9), learned from
        there.  (A start far above it, 1 at :math:`\tau = 0.1` on standardised targets, leaves EP's first stage
        unconverged and the search where it started.)
    scale_bounds : pair of float or "fixed"
        Bounds for learning ``scale`` (scikit-learn's kernel convention).

    Notes
    -----
    ``GPRegressor(likelihood=AsymmetricLaplace(quantile=0.9)).predict(X)`` is the posterior mean of the 0.9-quantile
    function; ``predict_interval`` and ``predict_y`` are the predictive of a new target under the asymmetric
    Laplace noise.  See :mod:`relaxep.likelihoods.asymmetric_laplace`.

    References
    ----------
    Boukouvalas, A., Barillec, R. & Cornford, D. (2012). Gaussian process quantile regression using expectation
    propagation. ICML 2012.
    Koenker, R. & Bassett, G. (1978). Regression quantiles. Econometrica 46(1), 33-50.
    """

    hyperparameter_names = ("scale",)
    output_scale_hyperparameters: ClassVar[dict[str, int]] = {"scale": 1}
    closed_form_on_device = True
    tilted_on_device = True
    relaxed_on_device = True

    def __init__(
        self, quantile: float = 0.5, scale: float | None = None, scale_bounds: tuple[float, float] | str = (1e-5, 1e5)
    ) -> None:
        self.quantile = quantile
        if scale is None:  # the check loss's mean for standard normal noise: a start on the scale of y's spread
            scale = float(stats.norm.pdf(stats.norm.ppf(self._tau())))
        self.scale, self.scale_bounds = check_hyperparameter(scale, scale_bounds, "scale")

    def _tau(self) -> float:
        tau = self.quantile
        if isinstance(tau, bool) or not isinstance(tau, (int, float, np.floating)) or not 0.0 < float(tau) < 1.0:
            raise ValueError(f"quantile must lie in (0, 1), got {tau!r}")
        return float(tau)

    def check_targets(self, y: ArrayLike, n: int | None = None) -> Array:
        self._tau()
        return super().check_targets(y, n)

    def _log_norm(self) -> float:
        tau = self._tau()
        return float(np.log(tau * (1.0 - tau) / float(self.scale)))

    def _log_lik(self, y: Array, f: Array) -> Array:
        tau, sigma = self._tau(), float(self.scale)
        r = (y - f) / sigma
        return self._log_norm() - r * (tau - (r < 0.0))

    def _dlog_lik_dtheta(self, y: Array, f: Array) -> Array:
        tau, sigma = self._tau(), float(self.scale)
        r = (y - f) / sigma
        return (r * (tau - (r < 0.0)) - 1.0)[..., None]

    def _sides(self, xp: ModuleType, y: Array, mean: Array, var: Array, power: float) -> dict[str, Any]:
        r"""The two sides (``up``: :math:`f > y`), as :meth:`Laplace._sides <relaxep.likelihoods.Laplace._sides>` with
        the rates :math:`\lambda_\pm`."""
        y, mean, var = xp.broadcast_arrays(y, mean, var)
        tau, sigma = self._tau(), float(self.scale)
        lam_up, lam_down = power * (1.0 - tau) / sigma, power * tau / sigma
        r, s = mean - y, xp.sqrt(var)
        z_up, z_down = (r - lam_up * var) / s, (-r - lam_down * var) / s
        log_cdf, ratio = normal_tail(xp, xp.stack([z_up, z_down]))
        log_up = _log_side(xp, r, lam_up, s, z_up, log_cdf[0, ...], ratio[0, ...])
        log_down = _log_side(xp, -r, lam_down, s, z_down, log_cdf[1, ...], ratio[1, ...])
        log_sum = xp.logaddexp(log_up, log_down)
        rho_up, v_up = _rho_and_v(xp, z_up, ratio[0, ...])
        rho_down, v_down = _rho_and_v(xp, z_down, ratio[1, ...])
        return dict(log_z=power * self._log_norm() + log_sum, pi_up=xp.exp(log_up - log_sum),
                    pi_down=xp.exp(log_down - log_sum), r=r, s=s, lam_up=lam_up, lam_down=lam_down, log_sum=log_sum,
                    rho_up=rho_up, v_up=v_up, rho_down=rho_down, v_down=v_down)  # fmt: skip

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        return self._log_z_in(np, y, mean, var, power)

    def _log_z_in(self, xp: ModuleType, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        """:meth:`log_z` in ``xp`` at any power (module docstring)."""
        return self._log_z_of(xp, self._sides(xp, y, mean, var, power))

    def _log_z_of(self, xp: ModuleType, sides: dict[str, Any]) -> TiltedLogZ:
        pi_up, pi_down, r, s = sides["pi_up"], sides["pi_down"], sides["r"], sides["s"]
        lam_up, lam_down = sides["lam_up"], sides["lam_down"]
        s2 = s * s
        log_density_y = -0.5 * (r / s) ** 2 - 0.5 * xp.log(2.0 * np.pi * s2) - sides["log_sum"]
        d1_lam = lam_down * pi_down - lam_up * pi_up
        d2_lam = lam_up**2 * pi_up + lam_down**2 * pi_down - (lam_up + lam_down) * xp.exp(log_density_y) - d1_lam**2
        rho_up, v_up, rho_down, v_down = sides["rho_up"], sides["v_up"], sides["rho_down"], sides["v_down"]
        mean_from_y = s * (pi_up * rho_up - pi_down * rho_down)
        t_var = s2 * (pi_up * v_up + pi_down * v_down + pi_up * pi_down * (rho_up + rho_down) ** 2)
        wide = max(lam_up, lam_down) * s > 1.0
        dlog_z = xp.where(wide, (mean_from_y - r) / s2, d1_lam)
        d2log_z = xp.where(wide, (t_var - s2) / s2**2, d2_lam)
        return TiltedLogZ(sides["log_z"], dlog_z, d2log_z)

    def _check_loss(self, sides: dict[str, Any]) -> Array:
        r""":math:`E[\rho_\tau((y - f)/\sigma)]` under the tilted at ``u = 1``:
        :math:`((1 - \tau)\pi_+ s\rho(z_+) + \tau\pi_- s\rho(z_-))/\sigma`."""
        tau, s = self._tau(), sides["s"]
        up, down = sides["pi_up"] * sides["rho_up"], sides["pi_down"] * sides["rho_down"]
        return s * ((1.0 - tau) * up + tau * down) / float(self.scale)

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        return self._expected_log_lik_in(np, y, mean, var)

    def _expected_log_lik_in(self, xp: ModuleType, y: Array, mean: Array, var: Array) -> Array:
        r""":math:`E[\log p(y|f)] = \log(\tau(1 - \tau)/\sigma) - E[\rho_\tau]` at ``u = 1``."""
        return self._log_norm() - self._check_loss(self._sides(xp, y, mean, var, 1.0))

    def log_z_and_expected_on(self, xp: ModuleType, y: Array, mean: Array, var: Array) -> tuple[TiltedLogZ, Array]:
        """Both from one :meth:`_sides` at ``u = 1``."""
        sides = self._sides(xp, y, mean, var, 1.0)
        return self._log_z_of(xp, sides), self._log_norm() - self._check_loss(sides)

    def _dlog_z_dtheta(self, y: Array, mean: Array, var: Array) -> Array:
        # d log p / d log sigma = rho_tau(r) - 1
        return (self._check_loss(self._sides(np, y, mean, var, 1.0)) - 1.0)[..., None]

    def _tilted_cumulants(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        r"""By the two-centre rule at the kink (:func:`~relaxep.likelihoods.laplace.two_sided_cumulants`, the rates
        :math:`(1 - \tau)/\sigma` above and :math:`\tau/\sigma` below :math:`y`)."""
        tau, sigma = self._tau(), float(self.scale)
        return two_sided_cumulants(y, mean, var, (1.0 - tau) / sigma, tau / sigma)

    # ------------------------------------------------------------ predictive
    def _noise_moments(self) -> tuple[float, float]:
        r"""Mean and variance of :math:`\epsilon = y - f`: :math:`\sigma(1 - 2\tau)/(\tau(1 - \tau))` and
        :math:`\sigma^2(1 - 2\tau + 2\tau^2)/(\tau(1 - \tau))^2`."""
        tau, sigma = self._tau(), float(self.scale)
        k = tau * (1.0 - tau)
        return sigma * (1.0 - 2.0 * tau) / k, sigma**2 * (1.0 - 2.0 * tau + 2.0 * tau**2) / k**2

    def predict_y(self, mean: ArrayLike, var: ArrayLike) -> tuple[Array, Array]:
        """Mean and variance of the predictive of a target: the latent's plus the noise's (:meth:`_noise_moments`)."""
        mean, var = np.broadcast_arrays(*_as_floats(mean, var))
        shift, spread = self._noise_moments()
        return mean + shift, var + spread

    def predictive_cdf(self, q: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
        r""":math:`P(y_* \le q)` under :math:`f \sim N(m, s^2)`, in closed form: with :math:`\delta = q - m`,
        :math:`a = (1 - \tau)/\sigma`, :math:`b = \tau/\sigma`,

        .. math::
            P = \tau E[e^{a d}; d \le 0] + \Phi(\delta/s) - (1 - \tau)E[e^{-b d}; d > 0],\qquad
            d \sim N(\delta, s^2),

        each expectation :math:`e^{\ldots}\Phi(\ldots)` in log space (:func:`~relaxep.likelihoods.laplace._log_side`).
        """
        q, mean, var = np.broadcast_arrays(*_as_floats(q, mean, var))
        tau, sigma = self._tau(), float(self.scale)
        a, b = (1.0 - tau) / sigma, tau / sigma
        delta, s = q - mean, np.sqrt(np.maximum(var, 1e-300))
        z_low, z_high = (-delta - a * var) / s, (delta - b * var) / s
        log_cdf, ratio = normal_tail(np, np.stack([z_low, z_high]))
        low = np.exp(_log_side(np, -delta, a, s, z_low, log_cdf[0], ratio[0]))
        high = np.exp(_log_side(np, delta, b, s, z_high, log_cdf[1], ratio[1]))
        return np.clip(tau * low + ndtr(delta / s) - (1.0 - tau) * high, 0.0, 1.0)

    def _quantile(self, p: float, mean: Array, var: Array) -> Array:
        """The predictive's ``p``-quantile by bisection on :meth:`predictive_cdf`."""
        tau, sigma = self._tau(), float(self.scale)
        reach = 40.0 * np.sqrt(var) + 40.0 * sigma / min(tau, 1.0 - tau)
        lo, hi = mean - reach, mean + reach
        for _ in range(_BISECTIONS):
            mid = 0.5 * (lo + hi)
            above = self.predictive_cdf(mid, mean, var) >= p
            lo, hi = np.where(above, lo, mid), np.where(above, mid, hi)
            if np.all(hi - lo <= 1e-13 * (1.0 + np.abs(mid))):
                break
        return 0.5 * (lo + hi)

    def predict_interval(self, mean: ArrayLike, var: ArrayLike, level: float = 0.95) -> tuple[Array, Array]:
        """The central ``level`` interval of the predictive of a target (quantiles of :meth:`predictive_cdf`)."""
        level = check_unit_interval(level, "level")
        if level >= 1.0:
            raise ValueError(f"level must lie in (0, 1), got {level!r}")
        mean, var = np.broadcast_arrays(*_as_floats(mean, var))
        tail = 0.5 * (1.0 - level)
        return self._quantile(tail, mean, var), self._quantile(1.0 - tail, mean, var)

    def loo_tail(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, pointwise: ArrayLike) -> Array:
        r"""Each row's leave-one-out tail, :math:`2\min(P(y_* \le y_i), P(y_* \ge y_i))` at its cavity, at most 1."""
        below = self.predictive_cdf(y, mean, var)
        return np.minimum(1.0, 2.0 * np.minimum(below, 1.0 - below))

    def _noise_variance(self) -> float:
        return self._noise_moments()[1]
