r"""The Tobit likelihood: Gaussian noise on values cut off at a detection limit (censored regression).

A value :math:`y^* = f + \epsilon`, :math:`\epsilon \sim N(0, \sigma^2)`, is observed as itself between the
limits; at or below ``lower`` only "at most ``lower``" is known, at or above ``upper`` only "at least ``upper``"
(Tobin 1958; a GP prior on :math:`f`: Groot & Lucas 2012, "Gaussian process regression with censored data using
expectation propagation", PGM).  Per row,

.. math::
    p(y | f) = N(y | f, \sigma^2)\ \text{(observed)},\qquad
    \Phi\Big(\frac{l - f}{\sigma}\Big)\ \text{(left-censored at } l\text{)},\qquad
    \Phi\Big(\frac{f - u}{\sigma}\Big)\ \text{(right-censored at } u\text{)}.

A censored row is a probit in the folded latent :math:`g = c(f - t)` (:math:`c = -1` left, :math:`+1` right, at
the limit :math:`t`) with scale :math:`\sigma`, so its tilted :math:`\Phi(g/\sigma)^u N(f | \mu, s^2)` is
:class:`~relaxep.likelihoods.NoisyProbit`'s at :math:`\epsilon = 0` (closed form at :math:`u = 1`: with
:math:`S = \sigma^2 + s^2`, :math:`z = c(\mu - t)/\sqrt S` and :math:`r = N(z)/\Phi(z)`,

.. math::
    \log Z = \log\Phi(z),\qquad \partial_\mu\log Z = \frac{c\,r}{\sqrt S},\qquad
    \partial^2_\mu\log Z = -\frac{r(z + r)}{S};

its mode-centred sinh rule at other powers); an observed row is :class:`~relaxep.likelihoods.Gaussian`'s.
The noise's gradient at :math:`u = 1`, for the evidence: the Gaussian's on observed rows and
:math:`\partial\log Z/\partial\log\sigma^2 = -\sigma^2 r z / (2S)` on censored ones.  The likelihood is
log-concave, so EP's site precisions stay positive.

The two kinds of row are those two likelihoods' own forms, written once in the array namespace and chosen per row
by ``xp.where`` (:meth:`Tobit._log_z_in`: numpy on the host; on another array library's device EP's closed form at
:math:`u = 1`).  Other powers stay on the host: the censored rows' fixed-size device rule
(:mod:`relaxep.likelihoods.quadrature_on`) is within 1e-8 of numpy's
adaptive one only while :math:`s^2 \lesssim 10^3\sigma^2`, and a learned noise can be far smaller than the
cavity (1e-4 off at :math:`s^2 = 10^6\sigma^2`), so :attr:`tilted_on_device` is false.
"""

from __future__ import annotations

import numbers
from types import ModuleType
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats
from scipy.special import log_ndtr

from relaxep._numerics import normal_cdf_ratio
from relaxep._typing import Array
from relaxep._validation import check_target_vector
from relaxep._xp import adaptive_or_fixed
from relaxep.likelihoods.base import Likelihood, TiltedLogZ, check_hyperparameter, refuse_off_host
from relaxep.likelihoods.binary import NoisyProbit
from relaxep.likelihoods.gaussian import Gaussian

__all__ = ["Tobit"]

_AT_ONE_ONLY = "Tobit's tilted log Z on a device is its closed form at power u = 1 only"


class Tobit(Likelihood):
    r"""Gaussian noise with values censored at ``lower`` and/or ``upper`` (module docstring).

    Parameters
    ----------
    lower, upper : float or None
        The detection limits, in ``y``'s units: a target equal to ``lower`` is read as "at most ``lower``", one
        equal to ``upper`` as "at least ``upper``"; ``None``, no limit on that side.  A target beyond a limit is
        refused (censored values are reported at the limit).
    noise : float
        The noise variance :math:`\sigma^2 > 0` of the uncensored values.
    noise_bounds : pair of float or "fixed"
        Bounds for learning ``noise`` (scikit-learn's kernel convention).

    Notes
    -----
    Per-row limits and right-censored survival times: targets as rows ``[value, code]`` (``y`` of shape
    ``(n, 2)``), ``code`` -1 for "at most ``value``", +1 for "at least ``value``" (a follow-up time), 0 for an
    observed value; ``lower`` and ``upper`` must then be ``None``.  The predictive (:meth:`predict_y`,
    :meth:`predict_interval`) is that of the uncensored value :math:`y^* = f + \epsilon`; :meth:`censored_mean`
    gives the mean of what would be reported, :math:`E[\min(\max(y^*, l), u)]`.
    """

    hyperparameter_names = ("noise",)
    output_scale_hyperparameters: ClassVar[dict[str, int]] = {"noise": 2}
    #: an observed row's term is a density of ``y``, a censored row's a probability (:math:`\Phi`): not all densities
    is_density: ClassVar[bool] = False
    target_width = 2
    closed_form_on_device = True

    def __init__(
        self,
        lower: float | None = None,
        upper: float | None = None,
        noise: float = 1.0,
        noise_bounds: tuple[float, float] | str = (1e-5, 1e5),
    ) -> None:
        for name, value in (("lower", lower), ("upper", upper)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value)
            ):
                raise TypeError(f"{name} must be a finite real number or None, got {value!r}")
        if lower is not None and upper is not None and not lower < upper:
            raise ValueError(f"lower must be below upper, got lower={lower!r} and upper={upper!r}")
        self.lower, self.upper = lower, upper
        self.noise, self.noise_bounds = check_hyperparameter(noise, noise_bounds, "noise")

    # ------------------------------------------------------------------ targets
    def check_targets(self, y: ArrayLike, n: int | None = None) -> Array:
        """Rows ``[value, code]`` (module docstring): from a vector and the limits, or given as ``(n, 2)``."""
        arr = np.asarray(y, dtype=float) if not isinstance(y, np.ndarray) else y
        if arr.ndim == 2 and arr.shape[1] == 2:
            if self.lower is not None or self.upper is not None:
                raise ValueError("lower and upper must be None when y gives each row's censoring code (n, 2)")
            values = check_target_vector(arr[:, 0], n, "targets", "finite values")
            codes = np.asarray(arr[:, 1], dtype=float)
            if not np.all(np.isin(codes, (-1.0, 0.0, 1.0))):
                raise ValueError("y's censoring codes (its second column) must be -1, 0 or +1")
            return np.column_stack([values, codes])
        values = check_target_vector(y, n, "targets", "finite values (or (n, 2) rows [value, code])")
        codes = np.zeros_like(values)
        if self.lower is not None:
            if np.any(values < self.lower):
                raise ValueError(f"targets below lower={self.lower!r}: censored values are reported at the limit")
            codes[values == self.lower] = -1.0
        if self.upper is not None:
            if np.any(values > self.upper):
                raise ValueError(f"targets above upper={self.upper!r}: censored values are reported at the limit")
            codes[values == self.upper] = 1.0
        return np.column_stack([values, codes])

    def read_targets(self, y: ArrayLike, log_exposure: ArrayLike | None = None) -> Array:
        """Rows ``[value, code]`` as given (``y`` of shape ``(n, 2)``), else values whose codes the limits give (one
        per row, as the default reads them); a ``ValueError`` naming ``y`` otherwise (:meth:`check_targets`)."""
        arr = np.asarray(y, dtype=float)
        if log_exposure is None and arr.ndim == 2 and arr.shape[1] == 2:
            self.check_targets(arr)
            return arr
        return super().read_targets(y, log_exposure)

    def loo_tail(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, pointwise: ArrayLike) -> Array:
        r"""Each row's leave-one-out tail probability: an observed row's as the Gaussian noise gives it,
        :math:`2P(y_* \le h_i - |y_i - h_i|)` (:meth:`~relaxep.likelihoods.Likelihood.loo_tail`); a censored row's the
        leave-one-out probability of its outcome, :math:`\exp \log p(y_i | y_{-i})` (``pointwise``)."""
        y, mean, var = (np.asarray(a, dtype=float) for a in (y, mean, var))
        values, codes = self._split(np, y, mean)
        p = np.exp(np.asarray(pointwise, dtype=float))
        observed = codes == 0
        p[observed] = super().loo_tail(values[observed], mean[observed], var[observed], p[observed])
        return p

    # ------------------------------------------------------------------ the two kinds of row
    def _gaussian(self) -> Gaussian:
        return Gaussian(float(self.noise))

    def _probit(self) -> NoisyProbit:
        return NoisyProbit(0.0, float(np.sqrt(float(self.noise))))

    def _split(self, xp: ModuleType, y: Array, like: Array) -> tuple[Array, Array]:
        """``(values, codes)`` in ``xp``: rows ``[value, code]`` where ``y`` has a last axis of two beyond ``like``'s
        shape (the mean's or the latent's, or its trailing dimensions; as a fit holds the checked targets), else
        values aligned with ``like`` whose codes the limits give (``-1`` at ``lower``, ``+1`` at ``upper``; not
        validated here: :meth:`check_targets` does)."""
        shape = tuple(like.shape)
        values = y.ndim <= len(shape) and tuple(y.shape) == shape[len(shape) - y.ndim :]
        if not values and tuple(y.shape[-1:]) == (2,):
            return y[..., 0], y[..., 1]
        code = xp.zeros_like(y)
        if self.lower is not None:
            code = xp.where(y == float(self.lower), -1.0, code)
        if self.upper is not None:
            code = xp.where(y == float(self.upper), 1.0, code)
        return y, code

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        return self._log_z_in(np, y, mean, var, power)

    def _log_z_in(self, xp: ModuleType, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        r""":meth:`log_z` in the namespace ``xp`` (module docstring), ``y`` as :meth:`_split` reads it.  With
        :math:`c` the code (1 where observed) and :math:`t` the value,

        .. math::
            \log Z = \begin{cases} \log\int N(t | f, \sigma^2)^u N(f | \mu, s^2)\,df & c = 0,\\
            \log\int \Phi(c(f - t)/\sigma)^u N(f | \mu, s^2)\,df & c = \pm 1, \end{cases}

        the latter the folded probit's at the cavity mean :math:`c(\mu - t)`, its derivatives times :math:`c`
        and :math:`c^2 = 1`; each kind of row by its own likelihood's form, chosen per row by ``xp.where``.  Off
        the host at ``u = 1`` only (module docstring).
        """
        if power != 1.0:
            adaptive_or_fixed(xp, lambda: None, refuse_off_host(_AT_ONE_ONLY))
        value, code = self._split(xp, y, mean)
        value, code, mean, var = xp.broadcast_arrays(value, code, mean, var)
        observed = code == 0.0
        gauss = self._gaussian()._log_z_in(xp, value, mean, var, power)
        sign = xp.where(observed, 1.0, code)
        folded = self._probit()._folded_log_z_in(xp, sign * (mean - value), var, power)
        return TiltedLogZ(
            xp.where(observed, gauss.log_z, folded.log_z),
            xp.where(observed, gauss.dlog_z, sign * folded.dlog_z),
            xp.where(observed, gauss.d2log_z, folded.d2log_z),
        )

    def _log_lik(self, y: Array, f: Array) -> Array:
        f = np.asarray(f, dtype=float)
        value, code = self._split(np, y, f)
        return self._row_log_lik(value, code, f)

    def _row_log_lik(self, value: Array, code: Array, f: Array) -> Array:
        r""":math:`\log p(y | f)` of rows given as values and codes (broadcast against ``f``)."""
        sd = np.sqrt(float(self.noise))
        censored = log_ndtr(np.where(code == 0.0, 1.0, code) * (f - value) / sd)
        return np.where(code == 0.0, stats.norm.logpdf(value, f, sd), censored)

    def dlog_z_dtheta(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
        r""":math:`\partial\log Z/\partial\log\sigma^2` at ``u = 1`` (module docstring), shape ``(..., n_dims)``;
        ``y`` as :meth:`log_z` takes it (values, or rows ``[value, code]``)."""
        mean, var = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(var, dtype=float))
        if self.n_dims == 0:
            return np.zeros((*mean.shape, 0))
        return self._dlog_z_dtheta(np.asarray(y, dtype=float), mean, var)

    def _dlog_z_dtheta(self, y: Array, mean: Array, var: Array) -> Array:
        value, code = self._split(np, y, mean)
        value, code, mean, var = np.broadcast_arrays(value, code, mean, var)
        noise = float(self.noise)
        total = var + noise
        z = np.where(code == 0.0, 1.0, code) * (mean - value) / np.sqrt(total)
        censored = -0.5 * noise * normal_cdf_ratio(z) * z / total
        observed = 0.5 * noise * ((value - mean) ** 2 / total - 1.0) / total
        return np.where(code == 0.0, observed, censored)[..., None]

    def _folded(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array, Array, Array]:
        r"""Values, codes, signs :math:`c` (1 where observed), the folded cavity mean :math:`c(\mu - t)`, variances."""
        value, code = self._split(np, y, mean)
        value, code, mean, var = np.broadcast_arrays(value, code, mean, var)
        sign = np.where(code == 0.0, 1.0, code)
        return value, code, sign, sign * (mean - value), var

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        value, code, _, folded_mean, var = self._folded(y, mean, var)
        observed = self._gaussian()._expected_log_lik(value, np.broadcast_to(mean, value.shape), var)
        return np.where(code == 0.0, observed, self._probit()._folded_expected_log_lik(folded_mean, var))

    def _tilted_cumulants(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        """The Gaussian's on observed rows; on censored ones the probit's in :math:`g = c(f - t)`, mapped back by
        :math:`f = t + cg` (the odd cumulants change sign with :math:`c`)."""
        value, code, sign, folded_mean, var = self._folded(y, mean, var)
        gauss = self._gaussian()._tilted_cumulants(value, np.broadcast_to(mean, value.shape), var)
        k1, k2, k3, k4 = self._probit()._folded_cumulants(folded_mean, var)
        censored = (value + sign * k1, k2, sign * k3, k4)
        return tuple(np.where(code == 0.0, g, c) for g, c in zip(gauss, censored, strict=True))  # type: ignore[return-value]

    # ------------------------------------------------------------------ predictive
    def _noise(self) -> stats.rv_continuous:
        return stats.norm(0.0, np.sqrt(float(self.noise)))

    def _noise_variance(self) -> float:
        return float(self.noise)

    def censored_mean(self, mean: ArrayLike, var: ArrayLike) -> Array:
        r""":math:`E[\min(\max(y^*, l), u)]` under :math:`y^* \sim N(\mu_*, s^2_* + \sigma^2)`: the mean of the value
        as it would be reported (the limits the constructor's), by the truncated-normal moments."""
        mean, var = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(var, dtype=float))
        sd = np.sqrt(var + float(self.noise))
        lo = -np.inf if self.lower is None else (self.lower - mean) / sd
        hi = np.inf if self.upper is None else (self.upper - mean) / sd
        inside = stats.norm.cdf(hi) - stats.norm.cdf(lo)
        out = mean * inside + sd * (stats.norm.pdf(lo) - stats.norm.pdf(hi))
        if self.lower is not None:
            out = out + self.lower * stats.norm.cdf(lo)
        if self.upper is not None:
            out = out + self.upper * stats.norm.sf(hi)
        return out
