r"""Likelihoods of two latent functions per target: :math:`p(y | f, g)`, GPflow's ``latent_dim = 2``.

EP with factorised sites :math:`\tilde t_i(f_i)\,\tilde t_i(g_i)` (:mod:`relaxep.inference.two_latent`) asks one
question of such a likelihood, the two-dimensional form of GPML's: for a target :math:`y`, the cavities
:math:`N(f | m_f, v_f)` and :math:`N(g | m_g, v_g)` and a power :math:`\alpha \in (0, 1]`, the tilted normaliser and
each latent's tilted marginal moments,

.. math::
    \hat Z = \iint p(y | f, g)^{\alpha}\, N(f | m_f, v_f)\, N(g | m_g, v_g)\, df\, dg,\qquad
    E_{\hat p}[f],\ \operatorname{Var}_{\hat p}[f],\ E_{\hat p}[g],\ \operatorname{Var}_{\hat p}[g]

(:meth:`TwoLatentLikelihood.tilted`, a :class:`TiltedPair`).  The predictive of a new target under
:math:`q(f_*)\,q(g_*)` is the same integral at :math:`\alpha = 1` (:meth:`TwoLatentLikelihood.predictive_log_density`).
A new two-latent model is one subclass: :meth:`~TwoLatentLikelihood.tilted` and
:meth:`~TwoLatentLikelihood.log_lik`, and, for intervals, :meth:`~TwoLatentLikelihood.predictive_cdf`.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike

from relaxep._typing import Array
from relaxep.likelihoods.base import Likelihood, TiltedLogZ

__all__ = ["TiltedPair", "TwoLatentLikelihood"]


@dataclass(frozen=True)
class TiltedPair:
    r"""The tilted normaliser and the moments of each latent (arrays over rows).

    ``log_z`` is :math:`\log\hat Z`; ``mean_f, var_f`` and ``mean_g, var_g`` the tilted marginal moments of
    :math:`f` and :math:`g`.
    """

    log_z: Array
    mean_f: Array
    var_f: Array
    mean_g: Array
    var_g: Array


def _rows(*arrays: ArrayLike) -> list[Array]:
    return list(np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in arrays)))


class TwoLatentLikelihood(Likelihood):
    r"""A factorising likelihood :math:`p(y | f, g) = \prod_i p(y_i | f_i, g_i)` of two latents per target.

    Subclasses implement :meth:`tilted` (the tilted normaliser and moments, module docstring) and :meth:`_log_lik2`
    (:math:`\log p(y | f, g)`).  Hooks, with their defaults: :meth:`predictive_log_density` (:meth:`tilted` at
    :math:`\alpha = 1`), :meth:`predictive_cdf` (none) and :meth:`predictive_quantiles` (bisection on
    :meth:`predictive_cdf`).  The one-latent question (:meth:`log_z`) is refused: there is no scalar cavity.
    """

    kind: ClassVar[str] = "two_latent"
    latent_dim: ClassVar[int] = 2
    has_cumulants: ClassVar[bool] = False

    @abstractmethod
    def tilted(
        self, y: Array, mean_f: Array, var_f: Array, mean_g: Array, var_g: Array, power: float = 1.0
    ) -> TiltedPair:
        r""":math:`\log\hat Z` and the tilted moments of :math:`p(y | f, g)^{\alpha} N(f | m_f, v_f) N(g | m_g, v_g)`
        (arrays broadcast over rows)."""

    @abstractmethod
    def _log_lik2(self, y: Array, f: Array, g: Array) -> Array:
        r""":math:`\log p(y | f, g)` (arrays broadcast)."""

    def log_lik(self, y: ArrayLike, f: ArrayLike, g: ArrayLike | None = None) -> Array:  # type: ignore[override]
        r""":math:`\log p(y | f, g)`; with ``g`` omitted, ``f`` holds both latents on a last axis of 2 (GPflow's
        ``F``)."""
        if g is None:
            F = np.asarray(f, dtype=float)
            if F.shape[-1:] != (2,):
                raise ValueError(
                    f"f must hold both latents on a last axis of length 2 where g is omitted, got {F.shape}"
                )
            f, g = F[..., 0], F[..., 1]
        return self._log_lik2(*_rows(y, f, g))

    def _log_lik(self, y: Array, f: Array) -> Array:
        return self.log_lik(y, f)

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        raise TypeError(
            f"{type(self).__name__} has two latents per target: ask tilted(y, mean_f, var_f, mean_g, var_g, power) "
            "(relaxep.inference.two_latent), not the one-latent log_z"
        )

    # ----------------------------------------------------------- predictive
    def predictive_log_density(self, y: ArrayLike, mean_f: ArrayLike, var_f: ArrayLike, mean_g: ArrayLike,
                               var_g: ArrayLike) -> Array:  # fmt: skip
        r""":math:`\log\iint p(y | f, g)\, N(f | \mu_f, v_f)\, N(g | \mu_g, v_g)\, df\, dg` per row: the tilted
        normaliser at :math:`\alpha = 1`."""
        return self.tilted(*_rows(y, mean_f, var_f, mean_g, var_g), 1.0).log_z

    def predictive_cdf(self, y: ArrayLike, mean_f: ArrayLike, var_f: ArrayLike, mean_g: ArrayLike,  # type: ignore[override]
                       var_g: ArrayLike) -> Array:  # fmt: skip
        r""":math:`P(y_* \le y)` under :math:`q(f_*)\,q(g_*)` (a subclass's hook)."""
        raise NotImplementedError(f"{type(self).__name__} has no predictive_cdf")

    def loo_tail(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, pointwise: ArrayLike) -> Array:
        r"""Each row's leave-one-out tail probability, for a noise symmetric about :math:`f` (a subclass whose
        predictive is not overrides it): :math:`2 P(y_* \le h^f_i - |y_i - h^f_i|)` under :meth:`predictive_cdf` at
        the two cavities, at most 1.

        Parameters
        ----------
        y : array_like of shape (n,)
            The targets (model units).
        mean, var : array_like of shape (n, 2)
            The cavities of both latents, :math:`(h^f_i, h^g_i)` and :math:`(\lambda^f_i, \lambda^g_i)`, on a last
            axis of 2 (as :meth:`log_lik`'s ``f`` holds them).
        pointwise : array_like of shape (n,)
            :math:`\log p(y_i | y_{-i})` (unused).
        """
        y, mean, var = (np.asarray(a, dtype=float) for a in (y, mean, var))
        if mean.shape[-1:] != (2,) or var.shape[-1:] != (2,):
            raise ValueError(f"mean and var must hold both latents' cavities on a last axis of 2, got {mean.shape}")
        mean_f, var_f = mean[..., 0], var[..., 0]
        q = mean_f - np.abs(y - mean_f)
        return np.minimum(1.0, 2.0 * self.predictive_cdf(q, mean_f, var_f, mean[..., 1], var[..., 1]))

    def predictive_bracket(self, q: float, mean_f: Array, var_f: Array, mean_g: Array,
                           var_g: Array) -> tuple[Array, Array]:  # fmt: skip
        """Rows' brackets of the ``q`` quantile for :meth:`predictive_quantiles` (a subclass's hook)."""
        raise NotImplementedError(f"{type(self).__name__} has no predictive_bracket")

    def predictive_quantiles(self, q: float, mean_f: ArrayLike, var_f: ArrayLike, mean_g: ArrayLike,
                             var_g: ArrayLike) -> Array:  # fmt: skip
        r"""The ``q`` quantile of the predictive of a new target: bisection on :meth:`predictive_cdf`, vectorised
        over rows, in :meth:`predictive_bracket`, to :math:`2^{-60}` of the bracket."""
        mean_f, var_f, mean_g, var_g = _rows(mean_f, var_f, mean_g, var_g)
        lo, hi = self.predictive_bracket(float(q), mean_f, var_f, mean_g, var_g)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            below = self.predictive_cdf(mid, mean_f, var_f, mean_g, var_g) < q
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return 0.5 * (lo + hi)
