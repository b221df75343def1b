r"""The posterior of the robust max's dense EP on the label differences.

The robust max depends on :math:`f_i` only through :math:`w_i = B_i^T f_i` and its sites are full
:math:`(C-1) \times (C-1)` Gaussians :math:`\exp(-\tfrac12 w_i^T P_i w_i + \beta_i^T w_i)` in
:math:`w_i` (possibly indefinite: the likelihood is not log-concave), so EP runs on the
:math:`n(C-1)` vector ``w`` with prior covariance :math:`G` (:math:`G_{(i,a),(j,b)} = \sum_c
B_{i,ca} B_{j,cb} k_c(x_i, x_j)`): :math:`O(n^3 (C-1)^3)` a sweep, for small ``n`` only.  With
:math:`T = \operatorname{blkdiag}(P_i)`:

.. math::
    \mu_w = G \gamma, \quad \gamma = (I + T G)^{-1} \beta, \qquad
    \Sigma_w = G - G (I + T G)^{-1} T G,

the EP evidence is :math:`\sum_i (\log Z_i - \log \int N(w_i | a_i, V_i) \tilde t_i(w_i) dw_i)
- \tfrac12 \log|I + T G| + \tfrac12 \beta^T G \gamma` (cavities :math:`N(a_i, V_i)`), and its
gradient in a kernel hyperparameter is
:math:`\tfrac12 \gamma^T \dot G \gamma - \tfrac12 \operatorname{tr}((I + T G)^{-1} T \dot G)`.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg

from relaxep._typing import Array
from relaxep.likelihoods.multiclass import difference_matrices
from relaxep.posterior.multiclass.base import JointPosteriorBase, Proposal, batched_cavities, predict_in_chunks

__all__ = ["RobustMaxPosterior"]


def _prior_w(Ks: list[Array], Bs: list[Array], d: int) -> Array:
    r"""Prior covariance of ``w``: :math:`G = \sum_c (\beta_c \beta_c'^T) \circ (K_c \otimes 1 1^T)`.

    :math:`\beta_c[(i, a)] = B_{i, c a}`; ``Bs`` holds the row and column sets.
    """
    G = 0.0
    for c, K in enumerate(Ks):
        coef_r = Bs[0][:, c, :].ravel()
        coef_c = Bs[1][:, c, :].ravel()
        G = G + np.repeat(np.repeat(K, d, 0), Bs[1].shape[2], 1) * np.outer(coef_r, coef_c)
    return G


class RobustMaxPosterior(JointPosteriorBase):
    """The Gaussian posterior of ``w`` (the label differences) under the robust max's dense sites.

    Built as :class:`~relaxep.posterior.multiclass.base.JointPosteriorBase` says, with a
    :class:`~relaxep.likelihoods.RobustMax` likelihood (its ``tilted_moments_w`` gives the tilted moments in ``w``),
    the sites ``(P, beta)`` in ``w``, ``(n, C-1, C-1)`` and ``(n, C-1)``, and the label differences and the prior
    covariance of ``w`` as the prior's pieces (:meth:`prior_of`).

    Raises ``numpy.linalg.LinAlgError`` where the sites make the posterior improper.
    """

    default_damping: ClassVar[float] = 0.5

    @staticmethod
    def prior_of(kernels: list[Array], labels: Array, n_classes: int) -> tuple[Array, Array]:
        """The label differences :math:`B_i` and the prior covariance :math:`G` of ``w``."""
        B = difference_matrices(labels, n_classes)
        return B, _prior_w(kernels, [B, B], n_classes - 1)

    @staticmethod
    def zero_sites(n: int, n_classes: int) -> tuple[Array, Array]:
        d = n_classes - 1
        return np.zeros((n, d, d)), np.zeros((n, d))

    def _set_sites(self, P: Array, beta: Array) -> None:
        self._B, self.G = self._prior
        self.P, self.beta = P, beta
        n, d, _ = P.shape
        self.T = linalg.block_diag(*P)
        TG = np.einsum("iab,ibm->iam", P, self.G.reshape(n, d, n * d)).reshape(n * d, n * d)  # block-diagonal T G
        A = TG + np.eye(n * d)
        self.lu = linalg.lu_factor(A, check_finite=False)
        piv_diag = np.diag(self.lu[0])
        sign = np.prod(np.sign(piv_diag)) * (-1) ** int(np.sum(self.lu[1] != np.arange(n * d)))
        if sign <= 0 or not np.all(np.isfinite(piv_diag)):
            raise np.linalg.LinAlgError("improper posterior: |I + T G| <= 0")
        W = linalg.lu_solve(self.lu, TG, check_finite=False)  # (I + T G)^{-1} T G
        self.gamma = linalg.lu_solve(self.lu, beta.ravel(), check_finite=False)
        self.w_mean = (self.G @ self.gamma).reshape(n, d)
        cov = np.empty((n, d, d))
        for i in range(n):
            s = slice(i * d, (i + 1) * d)
            cov[i] = self.G[s, s] - self.G[s, :] @ W[:, s]
        self.w_cov = 0.5 * (cov + np.swapaxes(cov, 1, 2))
        if np.any(np.linalg.eigvalsh(self.w_cov)[:, 0] <= 0):
            raise np.linalg.LinAlgError("improper posterior marginal")
        self.logdet = float(np.sum(np.log(np.abs(piv_diag))))

    @property
    def sites(self) -> tuple[Array, Array]:
        """The sites ``(P, beta)`` in ``w``."""
        return self.P, self.beta

    @property
    def mean(self) -> Array:
        """Posterior means of ``w``, ``(n, C - 1)``."""
        return self.w_mean

    @property
    def marginal_var(self) -> Array:
        """Posterior variances of ``w``, ``(n, C - 1)`` (a view)."""
        return np.diagonal(self.w_cov, axis1=1, axis2=2)

    def cavities(self) -> tuple[Array, Array, Array]:
        """The cavities of ``w_i`` (``ok``: proper; the others keep their sites this sweep)."""
        return batched_cavities(self.w_cov, self.w_mean, self.P, self.beta)

    def propose(self) -> Proposal:
        """The sites that match the tilted moments in ``w`` at every proper cavity."""
        a, V, ok = self.cavities()
        _, m_hat, V_hat = self.likelihood.tilted_moments_w(a, V)
        Vh_inv = np.linalg.inv(V_hat)
        Lam = np.linalg.inv(V)
        h = np.einsum("nij,nj->ni", Lam, a)
        P_new = np.where(ok[:, None, None], Vh_inv - Lam, self.P)
        b_new = np.where(ok[:, None], np.einsum("nij,nj->ni", Vh_inv, m_hat) - h, self.beta)
        return Proposal((P_new, b_new), int((~ok).sum()))

    @staticmethod
    def _tidy(first: Array) -> Array:
        """``P`` (one ``(C-1) x (C-1)`` matrix a point) symmetrised."""
        return 0.5 * (first + np.swapaxes(first, 1, 2))

    def log_evidence(self) -> float:
        """:math:`\\log Z_{EP}` (module docstring); ``nan`` where a cavity is improper."""
        a, V, ok = self.cavities()
        if not ok.all():
            return float("nan")
        log_z, _, _ = self.likelihood.tilted_moments_w(a, V)
        # log of the Gaussian site integrals under the cavities: log int N(w | a, V) exp(-w'Pw/2 + beta'w) dw
        d = self.P.shape[1]
        IVP = np.eye(d) + V @ self.P
        _, ld = np.linalg.slogdet(IVP)
        Sinv = self.w_cov  # posterior marginal: (V^{-1} + P)^{-1}
        Lam = np.linalg.inv(V)
        h_post = np.einsum("nij,nj->ni", Lam, a) + self.beta
        quad = np.einsum("ni,nij,nj->n", h_post, Sinv, h_post) - np.einsum("ni,nij,nj->n", a, Lam, a)
        log_site = -0.5 * ld + 0.5 * quad
        log_gauss = -0.5 * self.logdet + 0.5 * float(self.beta.ravel() @ (self.G @ self.gamma))
        return float(np.sum(log_z - log_site) + log_gauss)

    def latent_marginals(self) -> tuple[Array, Array]:
        """Mean ``(n, C)`` and covariance ``(n, C, C)`` of ``f`` at the training points (as for test points at them)."""
        mean, cov = self.predict_latent(list(self.kernels), np.stack([np.diag(K) for K in self.kernels]))
        return np.ascontiguousarray(mean), np.ascontiguousarray(cov)

    def predict_latent(self, K_star: ArrayLike | list[Array], k_diag: ArrayLike) -> tuple[Array, Array]:
        r""":math:`\mu_* = K_{*w} \gamma`, :math:`\Sigma_* = K_{**} - K_{*w} (I + T G)^{-1} T K_{w*}`.

        ``K_star`` (n_*, n) or (C, n_*, n), ``k_diag`` (n_*,) or (C, n_*).
        """
        return predict_in_chunks(self.labels.size, self.n_classes, self._predict_block, K_star, k_diag)

    def _predict_block(self, Kx: Array, kd: Array, ns: int) -> tuple[Array, Array]:
        C, B = self.n_classes, self._B
        cov = np.empty((ns, C, C))
        KB = np.stack([(Kx[c][:, :, None] * B[None, :, c, :]).reshape(ns, -1) for c in range(C)])  # (C, ns, N)
        mean = np.einsum("cmn,n->mc", KB, self.gamma)
        n, d = self.P.shape[:2]
        TKB = [
            linalg.lu_solve(
                self.lu,
                np.einsum("iab,ibm->iam", self.P, KB[c].T.reshape(n, d, ns)).reshape(n * d, ns),
                check_finite=False,
            )
            for c in range(C)
        ]
        for c in range(C):
            for c2 in range(C):
                cov[:, c, c2] = -np.einsum("mn,nm->m", KB[c], TKB[c2])
            cov[:, c, c] += kd[c]
        return mean, 0.5 * (cov + np.swapaxes(cov, 1, 2))

    def evidence_gradient(self, dK: ArrayLike) -> Array:
        r""":math:`\tfrac12 \gamma^T \dot G \gamma - \tfrac12 \operatorname{tr}((I + T G)^{-1} T \dot G)`
        for ``dK`` (n, n, p) or (n, n); shape (p,)."""
        dK = np.asarray(dK, dtype=float)
        if dK.ndim == 2:
            dK = dK[:, :, None]
        C, B = self.n_classes, self._B
        A = linalg.lu_solve(self.lu, self.T, check_finite=False)  # (I + T G)^{-1} T
        out = np.empty(dK.shape[2])
        for k in range(dK.shape[2]):
            dG = _prior_w([dK[:, :, k]] * C, [B, B], C - 1)
            out[k] = 0.5 * float(self.gamma @ dG @ self.gamma) - 0.5 * float(np.sum(A * dG.T))
        return out
