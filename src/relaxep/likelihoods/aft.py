r"""Accelerated-failure-time likelihoods: :math:`\log T = f + \sigma\epsilon` with Weibull, log-logistic or
log-normal event times, censored right, left or in intervals (:mod:`relaxep.likelihoods.survival`).

With :math:`z = (b - f)/\sigma` at a log-time :math:`b` (:math:`\alpha(b) = b/\sigma`, :math:`\beta = -1/\sigma`),
an event at :math:`t = e^b` has the density :math:`p_T(t | f) = p_\epsilon(z)/(\sigma t)` and a censored row the
noise's mass over its interval (Kalbfleisch & Prentice 2002, section 3.2; GPstuff's ``lik_weibull``,
``lik_loglogistic`` and ``lik_lognormal`` model the same times, Vanhatalo et al. 2013, JMLR 14).

* :class:`WeibullAFT` (``shape`` :math:`k = 1/\sigma`): :math:`S(t | f) = \exp(-(t e^{-f})^k)`, the hazard
  :math:`k t^{k-1} e^{-kf}`: proportional hazards too, with log relative hazard :math:`-kf`.
* :class:`LogLogisticAFT` (``shape`` :math:`k = 1/\sigma`): :math:`S(t | f) = 1/(1 + (t e^{-f})^k)`.
* :class:`LogNormalAFT` (``sigma``): :math:`S(t | f) = \Phi((f - \log t)/\sigma)`; with events only, the Gaussian
  likelihood of the log-times, and its censored rows are :class:`~relaxep.likelihoods.Tobit`'s.

The hyperparameter's gradient, for the evidence: with :math:`\theta` the log of ``shape`` (:math:`\kappa = 1`) or of
``sigma`` (:math:`\kappa = -1`), :math:`\partial z/\partial\theta = \kappa z`, so

.. math::
    \frac{\partial\log p}{\partial\theta} = \kappa\,\big(z\,(\log p_\epsilon)'(z) + 1\big)\ \text{(event)},\qquad
    \kappa\,\frac{z_\upsilon p_\epsilon(z_\upsilon) - z_\ell p_\epsilon(z_\ell)}{F(z_\upsilon) - F(z_\ell)}\
    \text{(censored; } z\,p_\epsilon(z) = 0 \text{ at an infinite end)},

averaged over the tilted distribution on the tilted integral's nodes.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize
from sklearn.base import clone

from relaxep._typing import Array
from relaxep.likelihoods.base import check_hyperparameter
from relaxep.likelihoods.survival import SurvivalLikelihood, interval_dlog_mass
from relaxep.likelihoods.survival_noise import GumbelMin, LogisticNoise, NoiseFamily, NormalNoise
from relaxep.likelihoods.survival_targets import SurvivalRows

__all__ = ["LogLogisticAFT", "LogNormalAFT", "WeibullAFT", "check_location"]


def check_location(location: object) -> float | None:
    """``None`` or a finite real (``TypeError``/``ValueError`` naming ``location``), returned as given."""
    if location is None:
        return None
    if isinstance(location, bool) or not isinstance(location, int | float | np.floating | np.integer):
        raise TypeError(f"location must be a finite real number or None, got {location!r}")
    if not np.isfinite(location):
        raise ValueError(f"location must be finite, got {location!r}")
    return location


class _AFT(SurvivalLikelihood):
    """The accelerated-failure-time transform :math:`z = (b - f)/\\sigma` (module docstring)."""

    risk_sign: ClassVar[float] = -1.0
    #: the sign :math:`\kappa` of :math:`\partial z/\partial\theta`: +1 for a shape :math:`1/\sigma`, -1 for
    #: :math:`\sigma`
    _kappa: ClassVar[float] = 1.0

    @property
    def _sigma(self) -> float:
        r"""The noise's scale :math:`\sigma` on the log-time axis."""
        raise NotImplementedError

    location: float | None

    @property
    def _beta(self) -> float:
        return -1.0 / self._sigma

    @property
    def _shift(self) -> float:
        return 0.0 if self.location is None else float(self.location)

    def _alpha(self, b: Array) -> Array:
        return b / self._sigma

    def _log_dalpha(self, b: Array) -> Array:
        return np.full(np.shape(b), -np.log(self._sigma))

    def _alpha_inverse(self, a: Array) -> Array:
        return a * self._sigma

    @property
    def latent_scale(self) -> float:
        r"""The noise's scale :math:`\sigma` on the log-time axis: the latent's, for the default priors."""
        return float(self._sigma)

    def start_from(self, rows: ArrayLike | SurvivalRows) -> _AFT:
        r"""A copy with its ``location`` :math:`c` and shape at the intercept-only model's maximum likelihood,

        .. math:: \max_{c, \theta} \sum_i \log p(y_i | f_i = 0),

        by L-BFGS-B from the rows' mean finite log-time and the current shape (the shape within its bounds, kept
        where fixed; the location kept where the user gave one): the latent's prior mean on the log-time axis and
        the shape's start, as ``normalize_y`` centres a regressor's targets.

        Parameters
        ----------
        rows : array_like of shape (n, 2) or SurvivalRows
            The training rows ``[log_lower, log_upper]``, or their sums where they are elsewhere (a Dask fit's).
        """
        rows = rows if isinstance(rows, SurvivalRows) else SurvivalRows.of(np.asarray(rows, dtype=float))
        (name,) = self.hyperparameter_names
        fixed_shape = isinstance(getattr(self, f"{name}_bounds"), str)
        given = self.location is not None
        start = [self.location if given else rows.mean_log_time, float(np.log(getattr(self, name)))]

        def at(x: Array) -> _AFT:
            params = {"location": float(start[0] if given else x[0])}
            if not fixed_shape:
                params[name] = float(np.exp(x[1]))
            return clone(self).set_params(**params)

        def objective(x: Array) -> float:
            value = -rows.log_lik_at_zero(at(x))
            return value if np.isfinite(value) else 1e300

        bounds = [(None, None), tuple(np.log(getattr(self, f"{name}_bounds")))] if not fixed_shape else None
        result = minimize(objective, np.array(start), method="L-BFGS-B", bounds=bounds)
        return at(result.x)

    def _dlog_lik_dtheta(self, y: Array, f: Array) -> Array:
        if not self.n_dims:
            return np.zeros((*np.shape(f), 0))
        lo, hi = self._rows(y, f, nodes=True)
        (grad,) = self._by_kind(lo, hi, f, self._kind_dtheta, 1)
        return (self._kappa * grad)[..., None]

    def _kind_dtheta(self, kind: str, lo: Array, hi: Array, f: Array) -> tuple[Array]:
        r"""One row kind's :math:`\partial\log p/\partial\theta` over :math:`\kappa` (module docstring): with
        :math:`\partial z/\partial\theta = \kappa z`, :math:`z(\log p_\epsilon)'(z) + 1` for an event, :math:`z` times
        the log survival's or log CDF's derivative for a one-sided row, the ends' :math:`z\,p(z)/D` for an
        interval."""
        noise = self.noise
        if kind == "event":
            z = self._z(lo, f)
            return (z * noise.dlog_pdf(z)[0] + 1.0,)
        if kind == "right":
            z = self._z(lo, f)
            return (z * noise.dlog_sf(z)[0],)
        if kind == "left":
            z = self._z(hi, f)
            return (z * noise.dlog_cdf(z)[0],)
        z_lo, z_hi = self._z(lo, f), self._z(hi, f)
        _, _, q_lo, q_hi = interval_dlog_mass(noise, z_lo, z_hi)
        return (z_hi * q_hi - z_lo * q_lo,)


class _ShapeAFT(_AFT):
    r"""An AFT likelihood learned by its shape :math:`k = 1/\sigma` (the Weibull and the log-logistic)."""

    hyperparameter_names = ("shape",)

    def __init__(
        self,
        shape: float = 1.0,
        shape_bounds: tuple[float, float] | str = (1e-2, 1e2),
        location: float | None = None,
    ) -> None:
        self.shape, self.shape_bounds = check_hyperparameter(shape, shape_bounds, "shape")
        self.location = check_location(location)

    @property
    def _sigma(self) -> float:
        return 1.0 / float(self.shape)


class WeibullAFT(_ShapeAFT):
    r"""Weibull event times: :math:`S(t | f) = \exp(-(t e^{-f})^k)` (module docstring).

    Parameters
    ----------
    shape : float
        The Weibull shape :math:`k = 1/\sigma > 0` (scipy's ``weibull_min`` ``c``, lifelines' ``rho_``): below 1 a
        falling hazard, above 1 a rising one.
    shape_bounds : pair of float or "fixed"
        Bounds for learning ``shape`` (in log space).
    location : float or None
        A fixed prior mean :math:`c` of the latent on the log-time axis: the model is :math:`\log T = c + f +
        \sigma\epsilon`, :math:`f` the zero-mean GP (``None``: 0 alone; :class:`~relaxep.GPSurvivalRegressor`
        sets it from the intercept-only model).

    Notes
    -----
    The latent :math:`f` is the log of the time scale (scipy's ``scale = e^f``); a larger :math:`f`, a later
    event.  Targets: rows ``[log_lower, log_upper]`` (:mod:`relaxep.likelihoods.survival`).
    """

    noise: ClassVar[NoiseFamily] = GumbelMin()


class LogLogisticAFT(_ShapeAFT):
    r"""Log-logistic event times: :math:`S(t | f) = 1/(1 + (t e^{-f})^k)` (module docstring).

    Parameters
    ----------
    shape : float
        The shape :math:`k = 1/\sigma > 0` (scipy's ``fisk`` ``c``): above 1 the hazard rises then falls.
    shape_bounds : pair of float or "fixed"
        Bounds for learning ``shape`` (in log space).
    location : float or None
        A fixed prior mean of the latent on the log-time axis (as :class:`WeibullAFT`'s).

    Notes
    -----
    :math:`e^f` is the median time given :math:`f`.  Targets: rows ``[log_lower, log_upper]``.
    """

    noise: ClassVar[NoiseFamily] = LogisticNoise()


class LogNormalAFT(_AFT):
    r"""Log-normal event times: :math:`\log T \sim N(f, \sigma^2)` given :math:`f` (module docstring).

    Parameters
    ----------
    sigma : float
        The standard deviation :math:`\sigma > 0` of the log-time about :math:`f` (scipy's ``lognorm`` ``s``).
    sigma_bounds : pair of float or "fixed"
        Bounds for learning ``sigma`` (in log space).
    location : float or None
        A fixed prior mean of the latent on the log-time axis (as :class:`WeibullAFT`'s).

    Notes
    -----
    :math:`e^f` is the median time given :math:`f`.  Targets: rows ``[log_lower, log_upper]``.
    """

    hyperparameter_names = ("sigma",)
    noise: ClassVar[NoiseFamily] = NormalNoise()
    _kappa: ClassVar[float] = -1.0

    def __init__(
        self,
        sigma: float = 1.0,
        sigma_bounds: tuple[float, float] | str = (1e-2, 1e2),
        location: float | None = None,
    ) -> None:
        self.sigma, self.sigma_bounds = check_hyperparameter(sigma, sigma_bounds, "sigma")
        self.location = check_location(location)

    @property
    def _sigma(self) -> float:
        return float(self.sigma)
