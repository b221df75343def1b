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

from abc import abstractmethod
from types import ModuleType
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike

from relaxep._typing import Array
from relaxep._validation import check_binary_labels
from relaxep.likelihoods.base import Likelihood, TiltedLogZ

__all__ = ["BinaryLikelihood"]


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
