r"""Binary classification likelihoods: a function :math:`t(g)` of the label-folded latent :math:`g = y f`.

With labels :math:`y \in \{-1, +1\}`, :math:`p(y | f) = t(y f)`, so every question about the
cavity :math:`N(f | \mu, s^2)` is a question about :math:`N(g | y\mu, s^2)`:

.. math::
    \log Z(y, \mu) = \log Z_t(y\mu),\qquad
    \partial_\mu \log Z = y\, Z_t'(y\mu),\qquad \partial^2_\mu \log Z = Z_t''(y\mu),

and the tilted cumulants of :math:`f` are those of :math:`g` with the odd ones times :math:`y`.
:class:`BinaryLikelihood` folds here, once; its subclasses answer for :math:`t(g)` alone.
"""

from __future__ import annotations

import numbers
from abc import abstractmethod
from types import ModuleType
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike

from relaxep._typing import Array
from relaxep._validation import check_binary_labels
from relaxep.likelihoods.base import Likelihood, TiltedLogZ

__all__ = ["BinaryLikelihood", "check_level"]


def check_level(level: object, floor: float = 0.0) -> float:
    r"""``level`` as a float in :math:`(\epsilon, 1 - \epsilon)`, ``floor`` :math:`\epsilon` (a likelihood's
    label-noise floor, outside which its predictive probability never lies); ``ValueError`` naming ``level``."""
    if isinstance(level, bool | np.bool_) or not isinstance(level, numbers.Real):
        raise TypeError(f"level must be a real number in (0, 1), got {level!r}")
    if not (floor < float(level) < 1.0 - floor):
        where = "(0, 1)" if floor == 0.0 else f"({floor}, {1.0 - floor}), the predictive's range under eps={floor}"
        raise ValueError(f"level must lie in {where}, got {level!r}")
    return float(level)


class BinaryLikelihood(Likelihood):
    r"""A binary likelihood :math:`p(y | f) = t(y f)`, labels :math:`y \in \{-1, +1\}`.

    Subclasses implement :meth:`_folded_log_lik` (:math:`\log t(g)`) and ``log Z`` of
    :math:`t(g)^u N(g | \mu, s^2)` with its derivatives in :math:`\mu`: once, in the array namespace
    (:meth:`_folded_log_z_in`, called with numpy on the host), or on numpy only (:meth:`_folded_log_z`);
    closed forms of :meth:`_folded_expected_log_lik` and :meth:`_folded_cumulants` override the quadrature
    defaults where they exist.
    """

    kind: ClassVar[str] = "binary"
    is_density: ClassVar[bool] = False  # P(y = +-1 | f): a probability
    class_targets: ClassVar[bool] = True

    def check_targets(self, y: ArrayLike, n: int | None = None, both_classes: bool = True) -> Array:
        """Labels in {-1, +1} (both present unless ``both_classes=False``), of length ``n`` if given."""
        return check_binary_labels(y, n, both_classes=both_classes)

    def loo_tail(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, pointwise: ArrayLike) -> Array:
        r"""Each row's leave-one-out tail probability: the leave-one-out probability of its label,
        :math:`p(y_i | y_{-i}) = \exp(\text{pointwise}_i)` (``y``, ``mean``, ``var`` unused)."""
        return np.exp(np.asarray(pointwise, dtype=float))

    def predict(self, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""Predictive :math:`P(y_* = +1) = \int t(f) N(f | \mu_*, s^2_*)\, df`."""
        mean, var = np.asarray(mean, dtype=float), np.asarray(var, dtype=float)
        return np.exp(self._folded_log_z(mean, var, 1.0).log_z)

    def predict_log_odds(self, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""Log-odds of the predictive, :math:`\log P(y_* = +1) - \log P(y_* = -1)`.

        Both terms are ``log Z`` of the folded likelihood at power 1 (:math:`\log Z_t(\mu_*)` and
        :math:`\log Z_t(-\mu_*)`), so the difference keeps its digits where one probability is
        within rounding of 1 (probit: :math:`\log\Phi(z) - \log\Phi(-z)`,
        :math:`z = \mu_*/\sqrt{1 + s^2_*}`, by ``log_ndtr``).  A monotone function of
        :meth:`predict`: it ranks test points as the probabilities do.
        """
        mean, var = np.asarray(mean, dtype=float), np.asarray(var, dtype=float)
        return self._folded_log_z(mean, var, 1.0).log_z - self._folded_log_z(-mean, var, 1.0).log_z

    def predict_log_odds_slopes(self, mean: ArrayLike, var: ArrayLike) -> tuple[Array, Array, Array]:
        r""":meth:`predict_log_odds` :math:`d` and its derivatives in the latent mean and variance, from ``log Z`` of
        :math:`y = \pm 1`: :math:`\partial_\mu d` their ``dlog_z``, and :math:`\partial_{s^2} \log Z = \tfrac12
        (\partial^2_\mu \log Z + (\partial_\mu \log Z)^2)` by the heat equation of a Gaussian smoothing."""
        mean, var = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(var, dtype=float))
        ones = np.ones_like(mean)
        up, down = self.log_z(ones, mean, var), self.log_z(-ones, mean, var)
        d_var = 0.5 * (up.d2log_z + up.dlog_z**2) - 0.5 * (down.d2log_z + down.dlog_z**2)
        return up.log_z - down.log_z, up.dlog_z - down.dlog_z, d_var

    def latent_threshold(self, level: float, var: ArrayLike) -> Array:
        r"""The latent mean :math:`t` at which the predictive equals ``level``: the root of
        :math:`P(y_* = +1 | \mu_* = t, s^2_*) = \int t(f) N(f | t, s^2_*) df = \ell`, for each variance
        :math:`s^2_*` in ``var`` (at ``var = 0`` the link's inverse, :math:`t^{-1}(\ell)`).

        The predictive increases with :math:`\mu_*`, so the root is unique; by default it is bracketed (doubling
        from :math:`\pm(1 + |\mathrm{logit}\,\ell|)\sqrt{1 + s^2}`) and found by Newton's method on
        :meth:`predict_log_odds` (its slope :math:`\partial_\mu \log Z_t(\mu) + \partial_\mu \log Z_t(-\mu)`)
        safeguarded by bisection, to :math:`10^{-12}` relative; the probit, the noisy probit and the noisy step
        answer in closed form.  ``ValueError`` where ``level`` is outside :math:`(0, 1)` or the predictive's range
        (a label-noise floor :math:`\epsilon` bounds it to :math:`(\epsilon, 1 - \epsilon)`).
        """
        level = check_level(level)
        var = np.asarray(var, dtype=float)
        target = float(np.log(level) - np.log1p(-level))
        hi = (1.0 + abs(target)) * np.sqrt(1.0 + np.maximum(var, 0.0))
        lo = -hi
        for _ in range(64):  # (the bracket: the log-odds below the target at lo, above at hi)
            low, high = self._threshold_odds(lo, var)[0] > target, self._threshold_odds(hi, var)[0] < target
            if not (low.any() or high.any()):
                break
            lo, hi = np.where(low, 2.0 * lo, lo), np.where(high, 2.0 * hi, hi)
        else:
            raise ValueError(f"level={level!r} is outside the range of {type(self).__name__}'s predictive probability")
        t = 0.5 * (lo + hi)
        for _ in range(200):
            gap, slope = self._threshold_odds(t, var)
            gap = gap - target
            lo, hi = np.where(gap < 0.0, t, lo), np.where(gap < 0.0, hi, t)
            with np.errstate(divide="ignore", invalid="ignore"):
                newton = t - gap / slope
            inside = np.isfinite(newton) & (newton >= lo) & (newton <= hi)
            done = (gap == 0.0) | (inside & (np.abs(newton - t) <= 1e-12 * (1.0 + np.abs(t))))
            done |= hi - lo <= 1e-12 * (1.0 + np.abs(t))
            t = np.where(gap == 0.0, t, np.where(inside, newton, 0.5 * (lo + hi)))
            if np.all(done):
                break
        return t

    def _threshold_odds(self, t: Array, var: Array) -> tuple[Array, Array]:
        """The predictive's log-odds at mean ``t`` and variance ``var`` and their slope in ``t``; at ``var = 0``
        the link's log-odds and a NaN slope (bisection)."""
        odds, slope = np.empty(np.shape(t)), np.full(np.shape(t), np.nan)
        point = var <= 0.0
        odds[point] = self._folded_log_lik(t[point]) - self._folded_log_lik(-t[point])
        up, down = self._folded_log_z(t[~point], var[~point], 1.0), self._folded_log_z(-t[~point], var[~point], 1.0)
        odds[~point], slope[~point] = up.log_z - down.log_z, up.dlog_z + down.dlog_z
        return odds, slope

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        return _unfold(y, self._folded_log_z(y * mean, var, power))

    def _log_z_in(self, xp: ModuleType, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        return _unfold(y, self._folded_log_z_in(xp, y * mean, var, power))

    def _folded_log_z(self, mean: Array, var: Array, power: float) -> TiltedLogZ:
        r"""``log Z`` of :math:`t(g)^u N(g | \mu, s^2)` and its derivatives in :math:`\mu`, on numpy: by default the
        namespaced form (:meth:`_folded_log_z_in`) with numpy; a likelihood with a numpy form only overrides this."""
        return self._folded_log_z_in(np, mean, var, power)

    def _folded_log_z_in(self, xp: ModuleType, mean: Array, var: Array, power: float) -> TiltedLogZ:
        r""":meth:`_folded_log_z` in the array namespace ``xp`` (where :attr:`closed_form_on_device` at ``u = 1``,
        where :attr:`tilted_on_device` at every power)."""
        raise NotImplementedError(f"{type(self).__name__} has no tilted log Z in an array namespace")

    def _expected_log_lik_in(self, xp: ModuleType, y: Array, mean: Array, var: Array) -> Array:
        return self._folded_expected_log_lik_in(xp, y * mean, var)

    def log_z_and_expected_on(self, xp: ModuleType, y: Array, mean: Array, var: Array) -> tuple[TiltedLogZ, Array]:
        lz, expected = self._folded_log_z_and_expected_in(xp, y * mean, var)
        return _unfold(y, lz), expected

    def _folded_expected_log_lik_in(self, xp: ModuleType, mean: Array, var: Array) -> Array:
        r""":math:`E[\log t(g)]` under :math:`\hat p(g) \propto t(g) N(g | \mu, s^2)`, in ``xp`` (where
        :attr:`relaxed_on_device`)."""
        raise NotImplementedError(f"{type(self).__name__} has no tilted E[log t] in an array namespace")

    def _folded_log_z_and_expected_in(self, xp: ModuleType, mean: Array, var: Array) -> tuple[TiltedLogZ, Array]:
        r""":meth:`_folded_log_z_in` at ``u = 1`` and :meth:`_folded_expected_log_lik_in`, together."""
        return self._folded_log_z_in(xp, mean, var, 1.0), self._folded_expected_log_lik_in(xp, mean, var)

    def _log_lik(self, y: Array, f: Array) -> Array:
        return self._folded_log_lik(y * f)

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        return self._folded_expected_log_lik(y * mean, var)

    def _tilted_cumulants(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        k1, k2, k3, k4 = self._folded_cumulants(y * mean, var)
        return y * k1, k2, y * k3, k4

    @abstractmethod
    def _folded_log_lik(self, g: Array) -> Array:
        r""":math:`\log t(g)`."""

    def _folded_expected_log_lik(self, mean: Array, var: Array) -> Array:
        return Likelihood._expected_log_lik(self, np.ones_like(mean), mean, var)

    def _folded_cumulants(self, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        return Likelihood._tilted_cumulants(self, np.ones_like(mean), mean, var)


def _unfold(y: Array, lz: TiltedLogZ) -> TiltedLogZ:
    r"""``log Z`` in :math:`f` from the folded one at :math:`y\mu`: the first derivative times :math:`y`."""
    return TiltedLogZ(lz.log_z, y * lz.dlog_z, lz.d2log_z)
