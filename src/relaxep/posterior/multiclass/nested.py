r"""The posterior of nested EP for the multinomial probit (Riihimaki, Jylanki & Vehtari 2013, JMLR 14, Sections 3-4).

The prior is :math:`C` independent GPs, :math:`f_c \sim GP(0, k_c)`.  The site of point ``i`` is
the ``u``-marginal of :math:`C - 1` inner sites :math:`\exp(-\tau_{ij} z_j^2 / 2 + \nu_{ij} z_j)`
on :math:`z = u 1 + B_i^T f_i`:

.. math::
    \tilde t_i(f_i) = \int N(u | 0, 1) \prod_j \exp(-\tau_{ij} z_j^2/2 + \nu_{ij} z_j)\, du
    \propto \exp(-\tfrac12 f_i^T \Pi_i f_i + b_i^T f_i),
    \quad \Pi_i = \operatorname{diag}(\pi_i) - \pi_i \pi_i^T / S_i,

with :math:`\pi_{i y_i} = 1`, :math:`\pi_{i o_j} = \tau_{ij}`, :math:`S_i = \sum_c \pi_{ic}`,
:math:`b_i = B_i(\nu_i - \tau_i h_i / S_i)`, :math:`h_i = \sum_j \nu_{ij}`, and the constant
:math:`c_i = -\tfrac12 \log S_i + h_i^2 / (2 S_i)`.  :math:`\Pi` has the structure of the softmax
Laplace approximation's Hessian (Rasmussen & Williams 2006, Section 3.5), so with
:math:`D_c = \operatorname{diag}(\pi_{\cdot c})`,
:math:`E_c = D_c^{1/2} (I + D_c^{1/2} K_c D_c^{1/2})^{-1} D_c^{1/2}`, :math:`M = \sum_c E_c`:

.. math::
    (I + \Pi K)^{-1} \Pi = \operatorname{blkdiag}(E_c) - E R M^{-1} R^T E, \qquad
    \Sigma = \operatorname{blkdiag}(K_c - K_c E_c K_c) + K E R M^{-1} R^T E K,

:math:`\log|I + K \Pi| = \sum_c \log|I + D_c^{1/2} K_c D_c^{1/2}| + \log|M| - \sum_i \log S_i`:
:math:`O(C n^3)` a sweep.  A parallel sweep forms every cavity from the marginals and runs one
sweep of the inner EP (:mod:`relaxep.posterior.multiclass._inner`) warm-started at the current
inner sites.  The EP evidence is

.. math::
    \log Z_{EP} = \sum_{ij} \log \tilde s_{ij} + \sum_i c_i - \tfrac12 \log|I + K\Pi| + \tfrac12 b^T \mu,

and, at a fixed point, its gradient in a hyperparameter :math:`\theta` of the kernels is
:math:`\tfrac12 \sum_c \alpha_c^T \dot K_c \alpha_c - \tfrac12 \sum_c \operatorname{tr}(Q_{cc} \dot K_c)`,
:math:`Q_{cc} = E_c - E_c M^{-1} E_c`, :math:`\alpha = (I + \Pi K)^{-1} b`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg

from relaxep._typing import Array
from relaxep.likelihoods.multiclass import difference_matrices, other_classes
from relaxep.likelihoods.orthant import inner_ep, site_log_normalisers
from relaxep.posterior.multiclass.base import JointPosteriorBase, Proposal, batched_cavities, predict_in_chunks

__all__ = ["NestedPosterior", "NestedSweep", "outer_sites"]


def _chol(A: Array) -> Array:
    L, info = linalg.lapack.dpotrf(A, lower=1, clean=1, overwrite_a=0)
    if info != 0:
        raise np.linalg.LinAlgError(f"matrix not positive definite (dpotrf info {info})")
    return L


def _inv_from_chol(L: Array) -> Array:
    Ai, info = linalg.lapack.dpotri(L, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"dpotri info {info}")
    Ai = np.tril(Ai)
    return Ai + np.tril(Ai, -1).T


def outer_sites(tau: Array, nu: Array, y: Array, n_classes: int) -> tuple[Array, Array, Array, Array]:
    r"""``pi`` (n, C), ``S`` (n,), ``b`` (n, C), ``c`` (n,) of the u-marginalised sites (module docstring):
    :math:`\pi_{iy_i} = 1`, :math:`\pi_{io_j} = \tau_{ij}`, :math:`S_i = \sum_c \pi_{ic}`,
    :math:`b_i = B_i(\nu_i - \tau_i h_i / S_i)`, :math:`c_i = -\tfrac12 \log S_i + h_i^2 / (2 S_i)`."""
    n = y.size
    rows = np.arange(n)
    others = other_classes(y, n_classes)
    pi = np.zeros((n, n_classes))
    pi[rows, y] = 1.0
    pi[rows[:, None], others] = tau
    S = 1.0 + tau.sum(1)
    h = nu.sum(1)
    v = nu - tau * (h / S)[:, None]
    b = np.zeros((n, n_classes))
    b[rows, y] = v.sum(1)
    b[rows[:, None], others] = -v
    return pi, S, b, -0.5 * np.log(S) + 0.5 * h**2 / S


def _factor(Ks: list[Array], D: Array, b: Array) -> tuple[Array, Array, Array, Array, Array, float]:
    """``mu`` (C, n), ``Sig`` (n, C, C), ``alpha`` (C, n), ``E`` (C, n, n), ``L_M`` (n, n), log|I + K Pi|."""
    C, n = D.shape
    E = np.empty((C, n, n))
    Y = np.empty((C, n, n))  # E_c K_c first, then L_M^{-1} E_c K_c
    logdet = 0.0
    for c in range(C):
        sd = np.sqrt(D[c])
        Bc = sd[:, None] * Ks[c] * sd[None, :]
        Bc[np.diag_indices(n)] += 1.0
        L = _chol(Bc)
        logdet += 2.0 * np.sum(np.log(np.diag(L)))
        Binv = _inv_from_chol(L)
        E[c] = sd[:, None] * Binv * sd[None, :]
        if np.min(D[c]) > 1e-8:
            # E K = D^1/2 B^-1 D^1/2 K = D^1/2 (I - B^-1) D^-1/2, as B^-1 (D^1/2 K D^1/2) = I - B^-1: no product
            np.negative(Binv, out=Y[c])
            Y[c][np.diag_indices(n)] += 1.0
            Y[c] *= sd[:, None]
            Y[c] /= sd[None, :]
        else:
            np.matmul(E[c], Ks[c], out=Y[c])
    M = E.sum(0)
    LM = _chol(M)
    logdet += 2.0 * np.sum(np.log(np.diag(LM))) - np.sum(np.log(D.sum(0)))
    e = np.stack([Y[c] @ b[c] for c in range(C)])  # E_c K_c b_c
    s = linalg.cho_solve((LM, True), e.sum(0), check_finite=False)
    alpha = np.stack([b[c] - e[c] + E[c] @ s for c in range(C)])
    mu = np.stack([Ks[c] @ alpha[c] for c in range(C)])
    Sig = np.empty((n, C, C))
    for c in range(C):
        Sig[:, c, c] = np.diag(Ks[c]) - np.einsum("ij,ij->j", Ks[c], Y[c])
        Y[c] = linalg.solve_triangular(LM, Y[c], lower=True, check_finite=False, overwrite_b=True)
    for c in range(C):
        for c2 in range(c, C):
            v = np.einsum("ki,ki->i", Y[c], Y[c2])
            if c2 == c:
                Sig[:, c, c] += v
            else:
                Sig[:, c, c2] = v
                Sig[:, c2, c] = v
    return mu, Sig, alpha, E, LM, float(logdet)


class NestedSweep(JointPosteriorBase):
    r"""What every nested-EP posterior shares, whatever its prior: the inner sites, the cavities, one inner-EP sweep
    (:meth:`propose`) and the evidence from the prior's :math:`\log|I + K\Pi|`.

    A subclass's ``_set_sites(tau, nu)`` sets ``tau``, ``nu``, ``_B`` (the label differences), the outer sites
    ``_pi``, ``_S``, ``_b``, ``_bT`` (:func:`outer_sites`), ``_c``, and from its prior the marginals ``mu`` (C, n),
    ``Sig`` (n, C, C) and ``logdet`` (:math:`\log|I + K\Pi|`, or its equal under a low-rank prior).
    """

    default_damping: ClassVar[float] = 0.8
    tau: Array
    nu: Array
    mu: Array
    Sig: Array
    logdet: float
    _B: Array
    _pi: Array
    _S: Array
    _b: Array
    _bT: Array
    _c: Array

    @staticmethod
    def prior_of(kernels: list[Array], labels: Array, n_classes: int) -> Array:
        """The label differences :math:`B_i` (``difference_matrices``)."""
        return difference_matrices(labels, n_classes)

    @staticmethod
    def zero_sites(n: int, n_classes: int) -> tuple[Array, Array]:
        return np.zeros((n, n_classes - 1)), np.zeros((n, n_classes - 1))

    @property
    def sites(self) -> tuple[Array, Array]:
        """The inner sites ``(tau, nu)``, ``(n, C - 1)`` each."""
        return self.tau, self.nu

    @property
    def mean(self) -> Array:
        """Posterior means of ``f``, ``(n, C)`` (a view)."""
        return self.mu.T

    @property
    def marginal_var(self) -> Array:
        """Posterior variances of ``f``, ``(n, C)`` (a view)."""
        return np.diagonal(self.Sig, axis1=1, axis2=2)

    def cavities(self, rows: slice = slice(None)) -> tuple[Array, Array, Array]:
        r"""Cavities :math:`\Lambda_i = \Sigma_i^{-1} - \Pi_i`, :math:`m_i = \Lambda_i^{-1}(\Sigma_i^{-1}\mu_i - b_i)`
        (of the points ``rows``: all by default).

        ``ok`` marks the proper ones (the others keep their sites this sweep).
        """
        pi, S, C = self._pi[rows], self._S[rows], self.n_classes
        Pi = pi[:, :, None] * np.eye(C) - pi[:, :, None] * pi[:, None, :] / S[:, None, None]
        return batched_cavities(self.Sig[rows], self.mu.T[rows], Pi, self._b[rows])

    def _z_cavities(self, mcav: Array, Scav: Array, rows: slice = slice(None)) -> tuple[Array, Array]:
        """``z = u 1 + B^T f``: mean ``B^T m``, covariance ``1 1^T + B^T S B``."""
        B = self._B[rows]
        a = np.einsum("nci,nc->ni", B, mcav)
        V = np.swapaxes(B, 1, 2) @ Scav @ B + 1.0
        return a, 0.5 * (V + np.swapaxes(V, 1, 2))

    def _for_rows(self, work: Callable[[slice], None]) -> None:
        """``work(rows)`` over the points: all at once here; a representation may split them into row blocks
        (the per-point work of :meth:`propose` is independent between points)."""
        work(slice(None))

    def propose(self) -> Proposal:
        """One sweep of the inner EP at every proper cavity, warm-started at the current inner sites."""
        t_new, n_new = np.empty_like(self.tau), np.empty_like(self.nu)
        ok = np.empty(self.tau.shape[0], dtype=bool)

        def work(rows: slice) -> None:
            mcav, Scav, ok[rows] = self.cavities(rows)
            a, V = self._z_cavities(mcav, Scav, rows)
            tau, nu = self.tau[rows], self.nu[rows]
            t_rows, n_rows, _, _ = inner_ep(a, V, tau, nu, 1.0, max_sweeps=1)
            t_new[rows] = np.where(ok[rows, None], t_rows, tau)
            n_new[rows] = np.where(ok[rows, None], n_rows, nu)

        self._for_rows(work)
        return Proposal((t_new, n_new), int((~ok).sum()))

    def log_evidence(self) -> float:
        """:math:`\\log Z_{EP}` (module docstring); ``nan`` where a cavity is improper."""
        mcav, Scav, ok = self.cavities()
        if not ok.all():
            return float("nan")
        a, V = self._z_cavities(mcav, Scav)
        lc = site_log_normalisers(a, V, self.tau, self.nu, 1.0)
        return float(np.sum(lc) + np.sum(self._c) - 0.5 * self.logdet + 0.5 * np.sum(self._bT * self.mu))

    def latent_marginals(self) -> tuple[Array, Array]:
        """Mean ``(n, C)`` and covariance ``(n, C, C)`` of ``f`` at the training points."""
        return self.mu.T.copy(), self.Sig


class NestedPosterior(NestedSweep):
    """The Gaussian posterior of the ``C`` latents under nested EP's sites (class-major: ``mu[c, i]``).

    Built as :class:`~relaxep.posterior.multiclass.base.JointPosteriorBase` says, with a
    :class:`~relaxep.likelihoods.MultinomialProbit` likelihood, the inner sites ``(tau, nu)``, ``(n, C - 1)`` each,
    and the label differences as the prior's pieces (:meth:`prior_of`).

    Raises ``numpy.linalg.LinAlgError`` where the sites make the posterior improper.
    """

    def _set_sites(self, tau: Array, nu: Array) -> None:
        kernels, labels, n_classes = self.kernels, self.labels, self.n_classes
        self.tau, self.nu = tau, nu
        self._B = self._prior
        self._pi, self._S, self._b, self._c = outer_sites(tau, nu, labels, n_classes)
        self._bT = self._b.T.copy()
        self.mu, self.Sig, self.alpha, self.E, self.LM, self.logdet = _factor(kernels, self._pi.T.copy(), self._bT)

    def predict_latent(self, K_star: ArrayLike | list[Array], k_diag: ArrayLike) -> tuple[Array, Array]:
        r""":math:`\mu_{*c} = k_{*c}^T \alpha_c`,
        :math:`\Sigma_* = \operatorname{diag}(k_{**c} - k_{*c}^T E_c k_{*c}) + Y^T Y`,
        :math:`Y_c = L_M^{-1} E_c k_{*c}`.

        ``K_star`` (n_*, n) or (C, n_*, n), ``k_diag`` (n_*,) or (C, n_*).
        """
        return predict_in_chunks(self.labels.size, self.n_classes, self._predict_block, K_star, k_diag)

    def _predict_block(self, Kx: Array, kd: Array, ns: int) -> tuple[Array, Array]:
        C = self.n_classes
        cov = np.empty((ns, C, C))
        mean = np.stack([Kx[c] @ self.alpha[c] for c in range(C)], 1)
        Ys = []
        for c in range(C):
            EK = self.E[c] @ Kx[c].T
            cov[:, c, c] = kd[c] - np.einsum("ik,ki->i", Kx[c], EK)
            Ys.append(linalg.solve_triangular(self.LM, EK, lower=True, check_finite=False))
        for c in range(C):
            for c2 in range(c, C):
                v = np.einsum("ki,ki->i", Ys[c], Ys[c2])
                cov[:, c, c2] = cov[:, c, c2] + v if c2 == c else v
                cov[:, c2, c] = cov[:, c, c2]
        return mean, cov

    def evidence_gradient(self, dK: ArrayLike | list[Array]) -> Array:
        r"""The gradient in a kernel shared by the classes or in one kernel per class.

        Shared, ``dK`` (n, n, p) or (n, n):
        :math:`\tfrac12 \sum_c \alpha_c^T \dot K \alpha_c - \tfrac12 \operatorname{tr}(Q \dot K)`,
        :math:`Q = \sum_c Q_{cc}`; shape (p,).  Per class, ``dK`` a list of ``C`` arrays (n, n, p_c): class ``c``'s
        entries :math:`\tfrac12 \alpha_c^T \dot K_c \alpha_c - \tfrac12 \operatorname{tr}(Q_{cc} \dot K_c)`,
        concatenated in class order; shape (sum p_c,).  :math:`Q_{cc} = E_c - E_c M^{-1} E_c`.
        """
        C = self.n_classes
        if not isinstance(dK, list):
            return _trace_terms(self.alpha, sum(self._Q(c) for c in range(C)), dK)
        if len(dK) != C:
            raise ValueError(f"dK: one gradient per class ({C}), got {len(dK)}")
        return np.concatenate([_trace_terms(self.alpha[c : c + 1], self._Q(c), dK[c]) for c in range(C)])

    def _Q(self, c: int) -> Array:
        """:math:`Q_{cc} = E_c - E_c M^{-1} E_c`."""
        U = linalg.solve_triangular(self.LM, self.E[c], lower=True, check_finite=False)
        return self.E[c] - U.T @ U


def _trace_terms(alpha: Array, Q: Array, dK: ArrayLike) -> Array:
    r""":math:`\tfrac12 \sum_c \alpha_c^T \dot K_k \alpha_c - \tfrac12 \operatorname{tr}(Q \dot K_k)` for each
    slice ``k`` of ``dK`` (n, n, p) or (n, n)."""
    dK = np.asarray(dK, dtype=float)
    if dK.ndim == 2:
        dK = dK[:, :, None]
    Q = 0.5 * (Q + Q.T)
    out = np.empty(dK.shape[2])
    for k in range(dK.shape[2]):
        D = dK[:, :, k]
        quad = sum(float(a @ D @ a) for a in alpha)
        out[k] = 0.5 * quad - 0.5 * float(np.sum(Q * D))
    return out
