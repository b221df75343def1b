r"""Nested EP for the multinomial probit under a low-rank (subset-of-regressors / DTC) prior.

The prior of class ``c`` is :math:`f_c = \Phi_c v_c`, :math:`v_c \sim N(0, I_m)`, with the features
:math:`\Phi_c = K_{nm} L_{mm}^{-T}` (:math:`L_{mm}` the Cholesky factor of :math:`K_{mm}` plus jitter), so that
:math:`\operatorname{cov} f_c = Q_{nn} = K_{nm} K_{mm}^{-1} K_{mn}` (Quinonero-Candela & Rasmussen 2005, JMLR 6,
the subset of regressors; Titsias 2009's inducing inputs).  The sites are nested EP's (Riihimaki, Jylanki &
Vehtari 2013, JMLR 14; :mod:`relaxep.posterior.multiclass.nested`):
:math:`\tilde t_i(f_i) \propto \exp(-\tfrac12 f_i^T \Pi_i f_i + b_i^T f_i)`,
:math:`\Pi_i = \operatorname{diag}(\pi_i) - \pi_i \pi_i^T / S_i`.  With :math:`A_i` the :math:`C \times Cm` map
:math:`v \mapsto f_i` (row ``c``: :math:`\phi_{ci}^T` in block ``c``) the posterior of
:math:`v = (v_1, \dots, v_C)` is :math:`N(P^{-1} h, P^{-1})`,

.. math::
    P = I_{Cm} + \sum_i A_i^T \Pi_i A_i, \qquad
    P_{cc'} = \delta_{cc'} (I_m + \Phi_c^T D_c \Phi_c) - \Phi_c^T \operatorname{diag}(\pi_{\cdot c}\pi_{\cdot c'} / S)
    \Phi_{c'}, \qquad h_c = \Phi_c^T b_{\cdot c},

(:math:`D_c = \operatorname{diag}(\pi_{\cdot c})`), and the marginals are :math:`\mu_i = A_i P^{-1} h`,
:math:`\Sigma_{i,cc'} = \phi_{ci}^T (P^{-1})_{cc'} \phi_{c'i}`: :math:`O(n C^2 m^2)` a sweep and
:math:`O((Cm)^3)` for the factor, no :math:`n \times n` array.  As :math:`K = A A^T` (block-diagonal over the
classes), Sylvester's identity gives :math:`|I + K \Pi| = |I + A^T \Pi A| = |P|` and
:math:`\mu = K (I + \Pi K)^{-1} b = A P^{-1} h`, so EP's evidence is the dense one's with :math:`\log|P|`:

.. math::
    \log Z_{EP} = \sum_{ij} \log \tilde s_{ij} + \sum_i c_i - \tfrac12 \log|P| + \tfrac12 h^T P^{-1} h.

The cavities and the inner-EP sweep are nested EP's own (:class:`~relaxep.posterior.multiclass.nested.NestedSweep`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg
from scipy.linalg import blas

from relaxep._threads import each_block, fold_blocks, small_matrix_threads
from relaxep._typing import Array
from relaxep.posterior.multiclass.nested import NestedSweep, outer_sites

__all__ = ["LowRankFeatures", "SparseNestedPosterior", "low_rank_features", "low_rank_marginals", "precision_and_shift"]

#: rows per block of the sums over the training points (bounds the (rows, C m) temporaries; fixed by the data,
#: never by the thread count, so that the sums do not depend on it)
ROW_BLOCK = 4096


@dataclass(frozen=True)
class LowRankFeatures:
    """The prior of :class:`SparseNestedPosterior`: ``features``, one ``(n, m)`` array per class (the same array
    repeated where the classes share it), and ``n_jobs``, the threads of the row blocks (:mod:`relaxep._threads`:
    one BLAS thread each; ``None``: the machine's cores)."""

    features: list[Array]
    n_jobs: int | None = None

    @property
    def shared(self) -> bool:
        return all(f is self.features[0] for f in self.features)


def low_rank_features(K_nm: ArrayLike, K_mm: ArrayLike) -> Array:
    r""":math:`\Phi = K_{nm} L_{mm}^{-T}`, :math:`L_{mm} L_{mm}^T = K_{mm}` (add the jitter to ``K_mm`` first), so
    that :math:`\Phi\Phi^T = K_{nm} K_{mm}^{-1} K_{mn}`.  Raises ``numpy.linalg.LinAlgError`` where ``K_mm`` is
    not positive definite."""
    K_mm = np.asarray(K_mm, dtype=float)
    L = linalg.cholesky(0.5 * (K_mm + K_mm.T), lower=True, check_finite=False)
    return linalg.solve_triangular(L, np.asarray(K_nm, dtype=float).T, lower=True, check_finite=False).T


def _row_blocks(n: int) -> list[slice]:
    return [slice(s, min(s + ROW_BLOCK, n)) for s in range(0, n, ROW_BLOCK)]


def _block_sums(prior: LowRankFeatures, pi: Array, S: Array, b: Array, rows: slice) -> tuple[Array, Array, Array]:
    """One row block's :math:`-U^T U` (lower triangle), diagonal blocks and shift (:func:`precision_and_shift`)."""
    features, C = prior.features, len(prior.features)
    m = features[0].shape[1]
    w = pi[rows] / np.sqrt(S[rows])[:, None]
    if prior.shared:
        F0 = features[0][rows]
        U = (w[:, :, None] * F0[:, None, :]).reshape(-1, C * m)
        diag = F0.T @ (pi[rows][:, :, None] * F0[:, None, :]).reshape(-1, C * m)  # [Phi^T D_c Phi]_c, (m, C m)
        h = b[rows].T @ F0
    else:
        F = np.stack([f[rows] for f in features], 1)  # (r, C, m)
        U = (w[:, :, None] * F).reshape(-1, C * m)
        diag = np.einsum("rcm,rc,rck->cmk", F, pi[rows], F)  # (C, m, m)
        h = np.einsum("rcm,rc->cm", F, b[rows])
    return blas.dsyrk(-1.0, U.T, trans=0, lower=1), diag, h  # - sum_i u_i u_i^T


def precision_and_shift(prior: LowRankFeatures, pi: Array, S: Array, b: Array) -> tuple[Array, Array]:
    r""":math:`P = I + \sum_i A_i^T \Pi_i A_i` (``(C m, C m)``) and :math:`h = \sum_i A_i^T b_i` (``(C m,)``),
    block ``(c, c')`` of :math:`P` as in the module docstring: :math:`-U^T U` with the rows
    :math:`u_i = (\pi_{ic} \phi_{ci}^T / \sqrt{S_i})_c` (a rank-one update per point, BLAS's ``syrk``), plus the
    diagonal blocks :math:`\Phi_c^T D_c \Phi_c`; summed over row blocks of :data:`ROW_BLOCK` on
    ``prior.n_jobs`` threads."""
    C, (n, m) = len(prior.features), prior.features[0].shape

    def part(rows: slice) -> tuple[Array, Array, Array]:
        return _block_sums(prior, pi, S, b, rows)

    def add(x: tuple[Array, Array, Array], y: tuple[Array, Array, Array]) -> tuple[Array, Array, Array]:
        return x[0] + y[0], x[1] + y[1], x[2] + y[2]

    P, diag, h = fold_blocks(part, _row_blocks(n), prior.n_jobs, add)
    P = np.tril(P) + np.tril(P, -1).T
    for c in range(C):
        P[c * m : (c + 1) * m, c * m : (c + 1) * m] += diag[:, c * m : (c + 1) * m] if prior.shared else diag[c]
    P[np.diag_indices(C * m)] += 1.0
    return P, h.ravel()


def low_rank_marginals(prior: LowRankFeatures, v: Array, P_inv: Array) -> tuple[Array, Array]:
    r"""Means :math:`\mu_{ci} = \phi_{ci}^T v_c` ``(C, n)`` and covariances
    :math:`\Sigma_{i,cc'} = \phi_{ci}^T (P^{-1})_{cc'} \phi_{c'i}` ``(n, C, C)`` of ``f`` under
    :math:`N(v, P^{-1})`, in row blocks on ``prior.n_jobs`` threads."""
    features, C = prior.features, len(prior.features)
    n, m = features[0].shape
    vc = v.reshape(C, m)
    mu = np.empty((C, n))
    Sig = np.empty((n, C, C))

    def work(rows: slice) -> None:
        for c in range(C):
            Fc = features[c][rows]
            mu[c, rows] = Fc @ vc[c]
            T = Fc @ P_inv[c * m : (c + 1) * m, c * m :]  # (r, (C - c) m): the blocks c2 >= c
            for c2 in range(c, C):
                Sig[rows, c, c2] = np.einsum("rk,rk->r", T[:, (c2 - c) * m : (c2 - c + 1) * m], features[c2][rows])
                Sig[rows, c2, c] = Sig[rows, c, c2]

    each_block(work, _row_blocks(n), prior.n_jobs)
    return mu, Sig


class SparseNestedPosterior(NestedSweep):
    r"""Nested EP's posterior under the low-rank prior :math:`f_c = \Phi_c v_c` (module docstring), in ``v``-space.

    Built as :class:`~relaxep.posterior.multiclass.base.JointPosteriorBase` says, with the features in place of
    the kernels: ``kernels`` is a :class:`LowRankFeatures`, ``C`` arrays ``(n, m)`` (the same array repeated where
    the classes share their inducing inputs and kernel) and the threads of the row blocks.  The inner sites
    ``(tau, nu)``, the cavities, the inner-EP sweep and the evidence are
    :class:`~relaxep.posterior.multiclass.nested.NestedSweep`'s; here are the factor of :math:`P`, the marginals
    and the predictions.  The hyperparameters are not learned through this posterior: :meth:`evidence_gradient`
    raises ``NotImplementedError`` (the estimator learns them with the dense model on a subset).

    Raises ``numpy.linalg.LinAlgError`` where the sites make :math:`P` indefinite.
    """

    def _set_sites(self, tau: Array, nu: Array) -> None:
        prior: LowRankFeatures = self.kernels  # type: ignore[assignment]
        self.tau, self.nu = tau, nu
        self._B = self._prior
        self._pi, self._S, self._b, self._c = outer_sites(tau, nu, self.labels, self.n_classes)
        self._bT = self._b.T.copy()
        P, h = precision_and_shift(prior, self._pi, self._S, self._b)
        with small_matrix_threads():  # (a C m x C m factor: OpenBLAS's threads cost more than they give on it)
            L, info = linalg.lapack.dpotrf(P, lower=1, clean=1)
            if info != 0:
                raise np.linalg.LinAlgError(f"the precision of v is not positive definite (dpotrf info {info})")
            L_inv = linalg.solve_triangular(L, np.eye(L.shape[0]), lower=True, check_finite=False)
            self.P_inv = L_inv.T @ L_inv  # (LAPACK's dpotri is unblocked and ten times slower here)
        self.v = self.P_inv @ h
        self.logdet = float(2.0 * np.sum(np.log(np.diag(L))))
        self.mu, self.Sig = low_rank_marginals(prior, self.v, self.P_inv)

    def _for_rows(self, work: Callable[[slice], None]) -> None:
        """:meth:`propose`'s per-point work in row blocks of :data:`ROW_BLOCK` on the prior's threads."""
        each_block(work, _row_blocks(self.labels.size), self.kernels.n_jobs)

    def predict_latent(self, K_star: ArrayLike | list[Array], k_diag: ArrayLike | None = None) -> tuple[Array, Array]:
        r"""Predictive mean ``(n_*, C)`` and covariance ``(n_*, C, C)`` of the latents at test points.

        :math:`\mu_{*c} = \phi_{*c}^T v_c`,
        :math:`\Sigma_{*,cc'} = \phi_{*c}^T (P^{-1})_{cc'} \phi_{*c'} + \delta_{cc'} (k_{**c} - \phi_{*c}^T\phi_{*c})`:
        the subset of regressors' where ``k_diag`` is ``None``, else DTC's (the prior variance the features miss,
        clipped at 0, added per class).

        Parameters
        ----------
        K_star : array_like (n_*, m) or (C, n_*, m)
            The test points' features :math:`\Phi_* = K_{*m} L_{mm}^{-T}` (shared or per class).
        k_diag : array_like (n_*,) or (C, n_*), optional
            Prior variances at the test points.
        """
        C, m = self.n_classes, self.kernels.features[0].shape[1]
        F = np.asarray(K_star, dtype=float) if not isinstance(K_star, list) else np.stack(K_star)
        F = np.broadcast_to(F, (C, *F.shape)) if F.ndim == 2 else F
        if F.ndim != 3 or F.shape[0] != C or F.shape[2] != m:
            raise ValueError(f"K_star (test features) must have shape (n_*, {m}) or ({C}, n_*, {m}), got {F.shape}")
        test = LowRankFeatures([F[0]] * C if F.strides[0] == 0 else [F[c] for c in range(C)], self.kernels.n_jobs)
        mean, cov = low_rank_marginals(test, self.v, self.P_inv)
        if k_diag is not None:
            kd = np.broadcast_to(np.asarray(k_diag, dtype=float), (C, F.shape[1]))
            for c in range(C):
                cov[:, c, c] += np.maximum(kd[c] - np.einsum("ik,ik->i", F[c], F[c]), 0.0)
        return mean.T.copy(), cov

    def evidence_gradient(self, dK: ArrayLike) -> Array:
        """Not implemented under the low-rank prior (learn the hyperparameters with the dense model on a subset)."""
        raise NotImplementedError(
            "the sparse joint multi-class posterior has no evidence gradient: learn the kernel with the dense "
            "model (infer_multiclass) on a subset"
        )
