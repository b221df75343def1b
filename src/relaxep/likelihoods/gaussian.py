r"""The Gaussian likelihood: GP regression's own noise model, every answer in closed form."""

from __future__ import annotations

from types import ModuleType
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats
from scipy.special import ndtr, ndtri

from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep.likelihoods.base import Likelihood, TiltedLogZ, check_hyperparameter

__all__ = ["Gaussian"]


class Gaussian(Likelihood):
    r"""Gaussian noise, :math:`p(y | f) = N(y | f, \sigma^2)`, :math:`\sigma^2` the ``noise`` variance.

    ``noise`` is a variance, as scikit-learn's ``WhiteKernel(noise_level)`` and
    ``GaussianProcessRegressor(alpha)`` are.  At a power :math:`u`,
    :math:`p(y|f)^u = (2\pi\sigma^2)^{(1-u)/2} u^{-1/2} N(y | f, \sigma^2/u)`, so with
    :math:`S = s^2 + \sigma^2/u` and :math:`r = y - \mu`

    .. math::
        \log Z = \tfrac{1-u}{2}\log(2\pi\sigma^2) - \tfrac12\log u - \tfrac12\log(2\pi S) - \frac{r^2}{2S},
        \qquad \partial_\mu \log Z = \frac{r}{S}, \qquad \partial^2_\mu \log Z = -\frac{1}{S}

    (Rasmussen & Williams 2006, eq. 3.58 at :math:`u = 1`).  The tilted is Gaussian, so its third and
    fourth cumulants vanish.

    Parameters
    ----------
    noise : float
        The noise variance :math:`\sigma^2 > 0`.
    noise_bounds : pair of float or "fixed"
        Bounds for learning ``noise`` (scikit-learn's kernel convention).
    """

    hyperparameter_names = ("noise",)
    output_scale_hyperparameters: ClassVar[dict[str, int]] = {"noise": 2}

    def __init__(self, noise: float = 1.0, noise_bounds: tuple[float, float] | str = (1e-5, 1e5)) -> None:
        self.noise, self.noise_bounds = check_hyperparameter(noise, noise_bounds, "noise")

    def _log_lik(self, y: Array, f: Array) -> Array:
        noise = float(self.noise)
        return -0.5 * np.log(2.0 * np.pi * noise) - 0.5 * (y - f) ** 2 / noise

    closed_form_on_device = True
    tilted_on_device = True
    relaxed_on_device = True

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        return self._log_z_in(np, y, mean, var, power)

    def _log_z_in(self, xp: ModuleType, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        noise = float(self.noise)
        total = var + noise / power
        resid = y - mean
        log_z = (
            float(0.5 * (1.0 - power) * np.log(2.0 * np.pi * noise))
            - float(0.5 * np.log(power))
            - 0.5 * xp.log(2.0 * np.pi * total)
            - 0.5 * resid**2 / total
        )
        return TiltedLogZ(log_z, resid / total, xp.broadcast_to(-1.0 / total, log_z.shape))

    def _tilted(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array]:
        """Tilted mean, variance and the residual ``y - E f`` (at ``u = 1``)."""
        noise = float(self.noise)
        total = var + noise
        resid = y - mean
        return mean + var * resid / total, var * noise / total, resid * noise / total

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        return self._expected_log_lik_in(np, y, mean, var)

    def _expected_log_lik_in(self, xp: ModuleType, y: Array, mean: Array, var: Array) -> Array:
        r""":meth:`expected_log_lik` in ``xp`` (one closed form; with numpy, the host's):
        :math:`E[\log N(y | f, \sigma^2)] = -\tfrac12\log(2\pi\sigma^2) - ((y - \hat m)^2 + \hat v)/(2\sigma^2)`,
        :math:`\hat m, \hat v` the tilted mean and variance."""
        _, t_var, t_resid = self._tilted(y, mean, var)
        noise = float(self.noise)
        return float(-0.5 * np.log(2.0 * np.pi * noise)) - 0.5 * (t_resid**2 + t_var) / noise

    def _tilted_cumulants(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        t_mean, t_var, _ = self._tilted(*np.broadcast_arrays(y, mean, var))
        zero = np.zeros_like(t_mean)
        return t_mean, t_var, zero, zero.copy()

    def _dlog_z_dtheta(self, y: Array, mean: Array, var: Array) -> Array:
        # d log Z / d log noise = noise (r^2 / S - 1) / (2 S), S = s^2 + noise
        noise = float(self.noise)
        total = var + noise
        return (0.5 * noise * ((y - mean) ** 2 / total - 1.0) / total)[..., None]

    def _dlog_lik_dtheta(self, y: Array, f: Array) -> Array:
        noise = float(self.noise)
        return (0.5 * (y - f) ** 2 / noise - 0.5)[..., None]

    def _noise(self) -> stats.rv_continuous:
        return stats.norm(0.0, np.sqrt(float(self.noise)))

    def _noise_variance(self) -> float:
        return float(self.noise)

    def predict_interval(self, mean: ArrayLike, var: ArrayLike, level: float = 0.95) -> tuple[Array, Array]:
        r"""Central interval :math:`\mu_* \pm z_{(1+\ell)/2}\sqrt{s^2_* + \sigma^2}` of the Gaussian predictive."""
        level = check_unit_interval(level, "level")
        if level >= 1.0:
            raise ValueError(f"level must lie in (0, 1), got {level!r}")
        mean, var = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(var, dtype=float))
        half = ndtri(0.5 + 0.5 * level) * np.sqrt(var + float(self.noise))
        return mean - half, mean + half

    def predictive_cdf(self, q: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
        r""":math:`P(y_* \le q) = \Phi((q - \mu)/\sqrt{s^2 + \sigma^2})`, the Gaussian predictive's closed form."""
        q, mean, var = (np.asarray(a, dtype=float) for a in (q, mean, var))
        return ndtr((q - mean) / np.sqrt(var + float(self.noise)))
