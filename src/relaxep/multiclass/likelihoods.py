r"""Multi-class likelihoods: the multinomial probit and the robust max (multi-class label noise).

Both depend on the latent vector :math:`f \in \mathbb{R}^C` of a point with label ``y`` only
through the :math:`C - 1` differences :math:`w = B^T f`, :math:`w_j = f_y - f_{o_j}`, where
:math:`o_1 < \dots < o_{C-1}` are the other classes and :math:`B = [e_y - e_{o_j}]_j`.

* Multinomial probit (Girolami & Rogers 2006; Riihimaki, Jylanki & Vehtari 2013, JMLR 14, eq. 3):

  .. math:: p(y | f) = \int N(u | 0, 1) \prod_{j} \Phi(u + f_y - f_{o_j})\, du,

  i.e. :math:`P(z > 0)` for :math:`z = u 1 + w + \epsilon`, :math:`\epsilon \sim N(0, I)`.
* Robust max (Kim & Ghahramani 2006; Hernandez-Lobato et al. 2011; the noisy step of Qi & Guo
  for :math:`C = 2`):

  .. math:: p(y | f) = (1 - \varepsilon)\,[y = \arg\max f] + \frac{\varepsilon}{C - 1}\,[y \ne \arg\max f]
            = \varepsilon' + \kappa\, [w > 0],\quad \varepsilon' = \frac{\varepsilon}{C-1},\
            \kappa = 1 - \varepsilon - \varepsilon'.

Their tilted moments under a Gaussian :math:`N(f | m, S)` reduce to Gaussian orthant integrals
in :math:`C - 1` dimensions, which the inner EP (:mod:`relaxep.posterior.multiclass._inner`) approximates.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr, logsumexp

from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep.posterior.multiclass._inner import ep_log_z
from relaxep.posterior.multiclass.base import difference_matrices, other_classes

__all__ = ["MulticlassLikelihood", "MultinomialProbit", "RobustMax", "difference_matrices", "other_classes"]

_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(48)
_GH_LOGW = np.log(_GH_WEIGHTS / _GH_WEIGHTS.sum())


def _check_moments(mean: ArrayLike, cov: ArrayLike, y: ArrayLike) -> tuple[Array, Array, Array]:
    mean = np.atleast_2d(np.asarray(mean, dtype=float))
    cov = np.asarray(cov, dtype=float)
    if cov.ndim == 2:
        cov = cov[None]
    y = np.atleast_1d(np.asarray(y))
    n, c = mean.shape
    if c < 2:
        raise ValueError(f"mean must have at least two classes (columns), got shape {mean.shape}")
    if cov.shape != (n, c, c):
        raise ValueError(f"cov must have shape {(n, c, c)} to match mean, got {cov.shape}")
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer) or np.any((y < 0) | (y >= c)):
        raise ValueError(f"y must hold {n} integer class indices in [0, {c}), got {y!r}")
    return mean, cov, y.astype(int)


class MulticlassLikelihood:
    """A likelihood of a label ``y`` in ``{0, ..., C-1}`` given the ``C`` latent values of a point."""

    #: the scale of the inner EP's factors: 1 (probit) or 0 (step)
    inner_scale: float = 1.0

    def log_lik(self, F: ArrayLike, y: ArrayLike) -> Array:
        """Exact :math:`\\log p(y_i | F_i)` for latents ``F`` of shape ``(..., N, C)``; shape ``(..., N)``."""
        raise NotImplementedError

    def tilted_moments(self, mean: ArrayLike, cov: ArrayLike, y: ArrayLike) -> tuple[Array, Array, Array]:
        r"""EP's ``log Z``, mean and covariance of :math:`p(y_i | f) N(f | m_i, S_i)`, batched over ``i``.

        Parameters
        ----------
        mean, cov : array_like (N, C), (N, C, C)
        y : array_like (N,)
            Class indices.
        """
        raise NotImplementedError

    def predict_proba(self, mean: ArrayLike, cov: ArrayLike) -> Array:
        r""":math:`p(y_* = c) = \int p(c | f) N(f | \mu_*, \Sigma_*) df` for every class, ``(N, C)``, rows sum to 1."""
        mean = np.atleast_2d(np.asarray(mean, dtype=float))
        cov = np.asarray(cov, dtype=float)
        n, c = mean.shape
        log_p = np.empty((n, c))
        for k in range(c):
            log_p[:, k] = self.tilted_moments(mean, cov, np.full(n, k))[0]
        p = np.exp(log_p - logsumexp(log_p, axis=1, keepdims=True))
        return p

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class MultinomialProbit(MulticlassLikelihood):
    r"""The multinomial probit :math:`p(y | f) = E_{u \sim N(0,1)} \prod_{j \ne y} \Phi(u + f_y - f_j)`.

    The likelihood of nested EP (Riihimaki, Jylanki & Vehtari 2013, JMLR 14).  For :math:`C = 2`
    it is the probit :math:`\Phi((f_y - f_{\bar y}) / \sqrt 2)`.
    """

    inner_scale = 1.0

    def log_lik(self, F: ArrayLike, y: ArrayLike) -> Array:
        r"""Gauss-Hermite quadrature (48 nodes) over ``u`` of :math:`\sum_{j \ne y} \log\Phi(u + f_y - f_j)`."""
        F = np.asarray(F, dtype=float)
        y = np.asarray(y, dtype=int)
        fy = np.take_along_axis(F, np.broadcast_to(y[:, None], (*F.shape[:-1], 1)), axis=-1)
        d = fy - F  # (..., N, C); zero at y
        lp = log_ndtr(_GH_NODES.reshape((-1,) + (1,) * d.ndim) + d)  # (nodes, ..., N, C)
        mask = np.arange(F.shape[-1]) == y[:, None]
        lp = np.where(mask, 0.0, lp).sum(axis=-1)  # (nodes, ..., N)
        return logsumexp(lp + _GH_LOGW.reshape((-1,) + (1,) * (lp.ndim - 1)), axis=0)

    def tilted_moments(self, mean: ArrayLike, cov: ArrayLike, y: ArrayLike) -> tuple[Array, Array, Array]:
        r"""Inner EP on :math:`z = u 1 + B^T f \sim N(B^T m, 1 1^T + B^T S B)` with factors :math:`\Phi(z_j)`.

        The tilted :math:`f` follows from the tilted ``z`` by the regression of ``f`` on ``z``:
        :math:`E[f] = m + S B V^{-1} (m_z - a)`, :math:`Cov[f] = S + S B V^{-1} (V_z - V) V^{-1} B^T S`.
        """
        mean, cov, y = _check_moments(mean, cov, y)
        B = difference_matrices(y, mean.shape[1])
        a = np.einsum("nci,nc->ni", B, mean)
        SB = cov @ B
        V = np.swapaxes(B, 1, 2) @ SB + 1.0
        log_z, mz, Vz = ep_log_z(a, V, 1.0)
        return log_z, *_regress(mean, cov, SB, a, V, mz, Vz)


class RobustMax(MulticlassLikelihood):
    r"""The robust max: :math:`1 - \varepsilon` if :math:`y = \arg\max f`, else :math:`\varepsilon / (C - 1)`.

    Parameters
    ----------
    eps : float in [0, 1)
        The probability that a label was replaced by one of the other classes uniformly at random.

    Notes
    -----
    With :math:`w = B^T f \sim N(a, W)`, :math:`a = B^T m`, :math:`W = B^T S B`, the tilted
    distribution is the mixture :math:`(\varepsilon' N(f | m, S) + \kappa P\, N_{w > 0}(f)) / Z`,
    :math:`Z = \varepsilon' + \kappa P`, :math:`P = P(w > 0)`, whose component moments come from
    the orthant probability and the truncated-Gaussian moments of ``w`` (the inner EP with step
    factors, ``scale = 0``) regressed back to ``f``.  For :math:`C = 2` it is the noisy step
    :math:`\varepsilon + (1 - 2\varepsilon) H(f_y - f_{\bar y})` of Qi & Guo.
    """

    inner_scale = 0.0

    def __init__(self, eps: float = 0.05) -> None:
        self.eps = eps

    def _weights(self, n_classes: int) -> tuple[float, float]:
        eps = check_unit_interval(self.eps, "eps")
        if eps >= 1.0:
            raise ValueError(f"eps must be < 1, got {eps}")
        floor = eps / (n_classes - 1)
        return floor, 1.0 - eps - floor

    def log_lik(self, F: ArrayLike, y: ArrayLike) -> Array:
        """Exact: :math:`\\log(1 - \\varepsilon)` at the argmax, else :math:`\\log(\\varepsilon / (C - 1))`."""
        F = np.asarray(F, dtype=float)
        y = np.asarray(y, dtype=int)
        floor, kappa = self._weights(F.shape[-1])
        hit = np.argmax(F, axis=-1) == y
        with np.errstate(divide="ignore"):
            return np.where(hit, np.log(floor + kappa), np.log(floor))

    def tilted_moments_w(self, a: Array, W: Array) -> tuple[Array, Array, Array]:
        r"""``log Z``, mean and covariance of :math:`(\varepsilon' + \kappa [w > 0]) N(w | a, W)` (batched).

        The mixture of the untouched Gaussian (weight :math:`\varepsilon' / Z`) and the
        Gaussian truncated to the positive orthant (weight :math:`\kappa P / Z`), its moments
        and ``P`` by the inner EP with step factors.
        """
        floor, kappa = self._weights(a.shape[1] + 1)
        log_p, mw, Ww = ep_log_z(a, W, 0.0)
        with np.errstate(divide="ignore"):
            log_floor = np.log(floor)
        if kappa > 0:
            log_z = np.logaddexp(log_floor, np.log(kappa) + log_p)
            w1 = np.exp(np.log(kappa) + log_p - log_z)
        else:
            log_z, w1 = np.full_like(log_p, log_floor), np.zeros_like(log_p)
        w0 = 1.0 - w1
        m = w0[:, None] * a + w1[:, None] * mw
        d0, d1 = a - m, mw - m
        S = w0[:, None, None] * (W + d0[:, :, None] * d0[:, None, :]) + w1[:, None, None] * (
            Ww + d1[:, :, None] * d1[:, None, :]
        )
        return log_z, m, 0.5 * (S + np.swapaxes(S, 1, 2))

    def tilted_moments(self, mean: ArrayLike, cov: ArrayLike, y: ArrayLike) -> tuple[Array, Array, Array]:
        r"""The moments in ``w`` (:meth:`tilted_moments_w`) regressed back to ``f``.

        Exact for the mixture: ``f | w`` is the same Gaussian in both components.
        """
        mean, cov, y = _check_moments(mean, cov, y)
        B = difference_matrices(y, mean.shape[1])
        a = np.einsum("nci,nc->ni", B, mean)
        SB = cov @ B
        W = np.swapaxes(B, 1, 2) @ SB
        W = 0.5 * (W + np.swapaxes(W, 1, 2))
        log_z, mw, Ww = self.tilted_moments_w(a, W)
        return log_z, *_regress(mean, cov, SB, a, W, mw, Ww)

    def __repr__(self) -> str:
        return f"RobustMax(eps={self.eps!r})"


def _regress(mean: Array, cov: Array, SB: Array, a: Array, V: Array, mz: Array, Vz: Array) -> tuple[Array, Array]:
    """Moments of ``f`` when ``z`` (jointly Gaussian with ``f``, ``Cov(f, z) = S B``) moves to ``N(mz, Vz)``."""
    G = np.swapaxes(np.linalg.solve(V, np.swapaxes(SB, 1, 2)), 1, 2)  # S B V^{-1}
    m = mean + np.einsum("nci,ni->nc", G, mz - a)
    S = cov + G @ (Vz - V) @ np.swapaxes(G, 1, 2)
    return m, 0.5 * (S + np.swapaxes(S, 1, 2))
