r"""The dense representation's linear algebra: ``K`` from a kernel (:func:`kernel_matrix`), pure
functions of ``K`` and the factor of ``B``, and the blocked sequential sweep (:func:`blocked_sweep`).

:math:`B = I + S K S`, :math:`S = \operatorname{diag}(\sqrt{\max(\tau, 0)})` (``sw``), with Cholesky
factor :math:`L` (``chol``); :math:`A_+ = (K^{-1} + T_+)^{-1}` is the posterior of the
non-negative sites, and negative sites enter on top of it by Woodbury.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
from scipy import linalg
from scipy.linalg import blas, lapack
from scipy.linalg.blas import dgemm, dger

from relaxep._memory import FIT_REMEDY, check_memory, dense_bytes
from relaxep._typing import Array
from relaxep._xp import add_to_diagonal, cholesky_lower, solve_lower
from relaxep.errors import ImproperPosteriorError
from relaxep.posterior.base import SiteProposer, SweepStats, cavity, is_proper

__all__ = [
    "blocked_sweep",
    "covariance_from_inverse",
    "covariance_plus",
    "evidence_gradient",
    "evidence_r",
    "kernel_matrix",
    "marginal_mean",
    "marginals_from_inverse",
    "negative_sites_correction",
    "posterior_mean",
    "single_factors",
    "triangular_inverse",
    "woodbury_negative_sites",
]

#: tau_i A_ii under which A's column is formed directly (error <~ 1e2 eps cond(B))
DIRECT_BELOW = 1e-2
#: marginals only (the parallel schedule's sweeps): error <~ 1e3 eps cond(B), relative
DIRECT_BELOW_MARGINALS = 1e-3
TINY = np.finfo(float).tiny


def kernel_matrix(kernel: Any, X: Any, noise: float, eval_gradient: bool = False) -> tuple[Array, Array | None]:
    r""":math:`K = k(X, X) + \sigma^2 I` (``noise`` :math:`= \sigma^2`, latent noise or jitter) and, with
    ``eval_gradient``, :math:`\partial K/\partial\theta` of shape ``(n, n, n_hyperparameters)``.

    Raises
    ------
    MemoryLimitError
        Before allocating, where the dense fit would not fit in memory (:mod:`relaxep._memory`):
        ``K``, its factor, the posterior covariance and a work array, and with ``eval_gradient`` one
        more ``n x n`` per hyperparameter.
    ValueError
        Where ``K`` or its gradient is not finite (``X``'s scale overflows the kernel).
    """
    n = X.shape[0] if hasattr(X, "shape") else len(X)
    copies = 4 + (kernel.n_dims if eval_gradient else 0)
    check_memory(dense_bytes(n, copies), f"a dense GP on n = {n} points", FIT_REMEDY)
    if eval_gradient:
        K, dK = kernel(X, eval_gradient=True)
    else:
        K, dK = kernel(X), None
    K[np.diag_indices_from(K)] += float(noise)
    if not (np.all(np.isfinite(K)) and (dK is None or np.all(np.isfinite(dK)))):
        numeric = isinstance(X, np.ndarray) and np.issubdtype(X.dtype, np.number)
        scale = f" (largest |X| = {np.abs(X).max():.3g})" if numeric else ""
        raise ValueError(
            f"the kernel {kernel} (or its gradient) evaluated at X is not finite{scale}: "
            "X's scale overflows it; rescale X (e.g. sklearn.preprocessing.StandardScaler)"
        )
    return K, dK


def b_matrix(kernel: Any, sw: Any, dtype: type = np.float64, xp: ModuleType = np) -> Any:
    r""":math:`B = I + S^{1/2} K S^{1/2}`, :math:`S^{1/2} = \operatorname{diag}(` ``sw`` :math:`)`, in the
    namespace ``xp`` of ``kernel`` (numpy's in ``dtype``), one new array."""
    b = sw[:, None] * kernel
    b *= sw[None, :]
    if dtype is not np.float64:
        b = b.astype(dtype)
    return add_to_diagonal(xp, b, 1.0)


def _diagonal(xp: ModuleType, a: Any) -> Any:
    return xp.linalg.diagonal(a) if hasattr(xp.linalg, "diagonal") else xp.diagonal(a)  # (np.diagonal before 2.0)


def _cho_solve(xp: ModuleType, lower: Any, b: Any) -> Any:
    """:math:`(LL^\top)^{-1}b` for a vector ``b``: LAPACK ``potrs`` on numpy, two triangular solves elsewhere."""
    if xp is np:
        return linalg.cho_solve((lower, True), b, check_finite=False)
    return solve_lower(xp, lower, solve_lower(xp, lower, b[:, None]), trans=True)[:, 0]


def negative_sites_correction(
    xp: ModuleType, a_plus: Any, mean_plus: Any, tau: Any, negative: Any
) -> tuple[Any, Any, float]:
    r"""The negative sites :math:`N` (indices ``negative``) entered by Woodbury on top of :math:`A_+`, from its
    columns there (``a_plus``, :math:`A_{+,N}`, ``n x k``) and :math:`\mu_+`, in the namespace ``xp``
    (:func:`woodbury_negative_sites` has the equations): :math:`C = -T_N^{-1} - A_{+,NN} = L_C L_C^\top`,
    :math:`Z = L_C^{-1}A_{+,N}^\top`, :math:`\mu = \mu_+ + A_{+,N}C^{-1}\mu_{+,N}` and
    :math:`\log|C| + \sum_N\log(-\tau_i)`.  :class:`~relaxep.errors.ImproperPosteriorError` where :math:`C` is
    not positive definite."""
    neg = xp.take(tau, negative)
    c = add_to_diagonal(xp, -xp.take(a_plus, negative, axis=0), -1.0 / neg)
    lc = cholesky_lower(xp, 0.5 * (c + c.T))
    if lc is None:
        raise ImproperPosteriorError("negative site precisions make the posterior improper")
    z = solve_lower(xp, lc, a_plus.T)
    mean = mean_plus + a_plus @ _cho_solve(xp, lc, xp.take(mean_plus, negative))
    return z, mean, float(2.0 * xp.sum(xp.log(_diagonal(xp, lc)))) + float(xp.sum(xp.log(-neg)))


def triangular_inverse(chol: Array) -> Array:
    """:math:`L^{-1}` (lower triangular; ``chol``'s strict upper triangle is zero and stays so)."""
    linv, info = lapack.dtrtri(chol, lower=1)
    if info != 0:
        raise ImproperPosteriorError(f"triangular inverse of the Cholesky factor failed (info={info})")
    return linv


def marginals_from_inverse(kernel: Array, linv: Array, sw: Array, tau_plus: Array) -> Array:
    r""":math:`\operatorname{diag}(A_+)` from :math:`L^{-1}`: :math:`A_{ii} = (1 - (B^{-1})_{ii})/\tau_i`,
    :math:`(B^{-1})_{ii} = \sum_k (L^{-1})_{ki}^2`; where :math:`\tau_i A_{ii}` is below
    :data:`DIRECT_BELOW_MARGINALS` (or :math:`\tau_i = 0`) directly,
    :math:`A_{ii} = K_{ii} - \|L^{-1} S K_{\cdot i}\|^2`."""
    precision_share = 1.0 - np.einsum("ij,ij->j", linv, linv)  # tau_i A_ii
    safe = np.where(precision_share >= DIRECT_BELOW_MARGINALS, tau_plus, 1.0)
    var = precision_share / safe
    direct = np.flatnonzero((precision_share < DIRECT_BELOW_MARGINALS) | (sw == 0.0))
    if direct.size:
        # L^-1 is triangular: trmm (n^2 k flops) instead of a general product (2 n^2 k)
        w = blas.dtrmm(1.0, linv, np.asfortranarray(sw[:, None] * kernel[:, direct]), lower=1)
        var[direct] = kernel[direct, direct] - np.einsum("ij,ij->j", w, w)
    return var


def marginal_mean(
    kernel: Array, solve_b: Callable[[Array], Array], sw: Array, nu: Array, precision_share: Array
) -> Array:
    r"""The posterior mean :math:`\mu = A\nu` by two solves with ``B`` (``solve_b(x)`` :math:`= B^{-1}x`), without
    ``A``: column by column as :func:`covariance_from_inverse` forms ``A``.

    Sites holding at least :data:`DIRECT_BELOW_MARGINALS` of their posterior precision (``precision_share``
    :math:`= \tau_j A_{jj}`, the set :math:`J`) enter through :math:`A_{ij} = (\delta_{ij} - (B^{-1})_{ij}) /
    \sqrt{\tau_i\tau_j}`, the others through :math:`A_{\cdot j} = S^{-1/2}B^{-1}S^{1/2}K_{\cdot j}`; with
    :math:`z = S^{-1/2}\nu` on :math:`J` (0 elsewhere), :math:`\nu_w = \nu` off :math:`J`,
    :math:`u = B^{-1}z`, :math:`v = B^{-1}S^{1/2}K\nu_w`:

    .. math:: \mu_i = (z_i - u_i + v_i)/\sqrt{\tau_i}\ (i \in J), \qquad
              \mu_i = \big(K(S^{1/2}u + \nu_w - S^{1/2}v)\big)_i\ (i \notin J).

    GPML's :math:`\mu = K(\nu - S^{1/2}B^{-1}S^{1/2}K\nu)` subtracts two nearly equal vectors where the sites
    are strong and multiplies the difference by ``K``: measured at site noise 1e-8 of the prior variance, 12
    posterior sd off (1e-3 at 1e-6), and :math:`\mu = A\nu` from the formed ``A`` 2e-3 sd where a third of the
    sites are weak; this form 5e-9 in both (``tests/test_posterior.py``).
    """
    strong = (precision_share >= DIRECT_BELOW_MARGINALS) & (sw > 0.0)
    z = np.where(strong, nu / np.where(strong, sw, 1.0), 0.0)
    weak_nu = np.where(strong, 0.0, nu)
    u = solve_b(z)
    v = solve_b(sw * (kernel @ weak_nu)) if not np.all(strong) else np.zeros_like(u)
    mean = np.empty_like(u)
    mean[strong] = (z[strong] - u[strong] + v[strong]) / sw[strong]
    if not np.all(strong):
        mean[~strong] = kernel[~strong] @ (sw * u + weak_nu - sw * v)
    return mean


def covariance_from_inverse(kernel: Array, chol: Array, sw: Array) -> tuple[Array | None, bool]:
    r"""``A`` from :math:`B^{-1}` (LAPACK ``potri``, :math:`2n^3/3` flops), or ``None``.

    :math:`A_{ij} = (\delta_{ij} - (B^{-1})_{ij}) / \sqrt{\tau_i\tau_j}` for sites
    holding at least 1% of their posterior precision (:math:`\tau_i A_{ii} \ge 0.01`);
    the columns of the others are formed directly, as
    :math:`A_{\cdot J} = S^{-1/2} B^{-1} S^{1/2} K_{\cdot J}` in the other rows and
    :math:`K_{JJ} - K_{J\cdot} S^{1/2} B^{-1} S^{1/2} K_{\cdot J}` in theirs.  Returns
    ``(None, True)`` (use :math:`K - V^\top V`, :math:`7n^3/3` flops) when more than a quarter of
    the sites are such, ``(None, False)`` when ``potri`` fails.
    """
    n = kernel.shape[0]
    binv, info = lapack.dpotri(chol, lower=1)
    if info != 0:
        return None, False
    share = 1.0 - np.diagonal(binv)
    direct = np.flatnonzero(share < DIRECT_BELOW)
    if direct.size > n // 4:
        return None, True
    binv = np.tril(binv)
    binv += np.tril(binv, -1).T  # B^{-1}, symmetric
    cols = None
    if direct.size:
        # A = S^-1/2 B^-1 S^1/2 K (since I - B^-1 = B^-1 S^1/2 K S^1/2): no cancellation in
        # rows of well-determined sites; rows of weak sites by A = K - K S^1/2 B^-1 S^1/2 K.
        kj = kernel[:, direct]
        t = binv @ (sw[:, None] * kj)
        cols = t / np.where(share >= DIRECT_BELOW, sw, 1.0)[:, None]
        cols[direct] = kj[direct] - kernel[direct] @ (sw[:, None] * t)
    inv_sw = 1.0 / np.where(share >= DIRECT_BELOW, sw, 1.0)
    cov = binv  # overwritten in place: (I - B^{-1}) / sqrt(tau tau^T)
    cov *= -1.0
    cov[np.diag_indices(n)] += 1.0
    cov *= np.outer(inv_sw, inv_sw)  # a_i a_j == a_j a_i exactly: cov stays symmetric
    if cols is not None:
        cols[direct, :] = 0.5 * (cols[direct, :] + cols[direct, :].T)
        cov[:, direct] = cols
        cov[direct, :] = cols.T
    return cov, False


def covariance_plus(
    kernel: Array, chol: Array, sw: Array, tau_plus: Array, many_weak_sites: bool
) -> tuple[Array, bool]:
    r""":math:`A_+` by :func:`covariance_from_inverse`, else as :math:`K - V^\top V`,
    :math:`V = L^{-1} S K`, and whether over a quarter of the sites are weak.

    Sites change little between sweeps: where the last refresh found too many weak sites for the
    inverse (``many_weak_sites``), this goes straight to :math:`K - V^\top V` instead of paying
    for ``potri`` first.
    """
    cov = None
    if not many_weak_sites:
        cov, many_weak_sites = covariance_from_inverse(kernel, chol, sw)
    if cov is None:
        v = linalg.solve_triangular(chol, sw[:, None] * kernel, lower=True, check_finite=False)
        cov = kernel - v.T @ v
        share = tau_plus * np.diagonal(cov)
        many_weak_sites = np.count_nonzero(share < DIRECT_BELOW) > kernel.shape[0] // 4
    return cov, many_weak_sites


def woodbury_negative_sites(
    kernel: Array, chol: Array, sw: Array, tau: Array, nu: Array, negative: Array
) -> tuple[Array, Array, float]:
    r"""Sites with :math:`\tau_i < 0`, entered by Woodbury on top of :math:`A_+ = (K^{-1} + T_+)^{-1}`.

    ``chol`` is the Cholesky factor of :math:`B = I + S K S`, :math:`S = \operatorname{diag}(\sqrt{\max(\tau, 0)})`
    (``sw``).  With :math:`N` the negative sites and :math:`A_{+,N} = K_N - K S B^{-1} S K_N` the
    columns of :math:`A_+` there (:math:`O(n^2 k)`),

    .. math::
        A = A_+ + A_{+,N} C^{-1} A_{+,N}^\top,\qquad C = -T_N^{-1} - A_{+,NN},\qquad
        \log|I + KT| = \log|B| + \log|C| + \textstyle\sum_N \log(-\tau_i),

    the posterior proper exactly when :math:`C` is positive definite.  Returns
    :math:`Z = L_C^{-1} A_{+,N}^\top` (so :math:`A = A_+ + Z^\top Z`), the mean :math:`A\nu` and the
    log-determinant's correction :math:`\log|C| + \sum_N \log(-\tau_i)`.

    Raises
    ------
    ImproperPosteriorError
        If :math:`C` is not positive definite.
    """
    factor = (chol, True)
    k_cols = kernel[:, negative]
    a_plus = k_cols - kernel @ (sw[:, None] * linalg.cho_solve(factor, sw[:, None] * k_cols, check_finite=False))
    mean_plus = kernel @ (nu - sw * linalg.cho_solve(factor, sw * (kernel @ nu), check_finite=False))
    return negative_sites_correction(np, a_plus, mean_plus, tau, negative)


def posterior_mean(kernel: Array, site_precision: Array, site_mean_precision: Array) -> Array:
    r"""Only the mean :math:`\mu = (K^{-1} + T)^{-1}\nu`: one Cholesky and solves, no inverse.

    Negative :math:`\tau_i` by :func:`woodbury_negative_sites`.  :class:`~relaxep.posterior.ImproperPosteriorError`
    when the sites make the posterior improper (or ``K`` is not positive semi-definite).
    """
    tau, nu = site_precision, site_mean_precision
    sw = np.sqrt(np.maximum(tau, 0.0))
    b = b_matrix(kernel, sw)
    try:
        chol = linalg.cholesky(b, lower=True, overwrite_a=True, check_finite=False)
    except linalg.LinAlgError as exc:
        raise ImproperPosteriorError("I + S^1/2 K S^1/2 has no Cholesky factor") from exc
    negative = np.flatnonzero(tau < -TINY)  # (a subnormal negative precision is a flat site)
    if negative.size:
        return woodbury_negative_sites(kernel, chol, sw, tau, nu, negative)[1]
    return kernel @ (nu - sw * linalg.cho_solve((chol, True), sw * (kernel @ nu), check_finite=False))


def single_factors(K: Array, sw: Array) -> tuple[Array, Array] | None:
    r""":math:`B`'s Cholesky factor and its inverse computed in single precision (LAPACK ``spotrf``,
    ``strtri``: 1.4-1.8x faster than double at n = 1000-2000), returned in double, for sweeps far
    from the fixed point (:attr:`~relaxep.posterior.base.Posterior.coarse`), where a relative
    error of about :math:`10^{-5}` in the marginals does not matter: convergence is only ever
    declared on double-precision sweeps.  ``None`` where single precision has no factor."""
    chol, info = lapack.spotrf(b_matrix(K, sw, np.float32), lower=1, clean=1, overwrite_a=1)
    if info != 0:
        return None
    linv, info = lapack.strtri(chol, lower=1)
    if info != 0:
        return None
    return chol.astype(np.float64), linv.astype(np.float64)


def blocked_sweep(
    cov0: Array,
    mean: Array,
    tau_all: Array,
    nu_all: Array,
    order: Array,
    propose: SiteProposer,
    fraction: float,
    block_size: int,
    set_sites: Callable[[Array, Array, Array], Any],
) -> tuple[Array, Array, SweepStats]:
    r"""The sequential sweep over ``order`` in blocks of ``block_size`` sites, without writing ``cov0``
    (:meth:`~relaxep.posterior.DensePosterior.apply_sequential` says how).

    ``mean`` receives each site's rank-one step in place; each block's new sites go to
    ``set_sites(block, tau, nu)`` (``tau_all``, ``nu_all``: the current sites, read).  Returns the
    corrections :math:`(V, k)` of :math:`A \leftarrow A_0 - V \operatorname{diag}(k) V^\top`, not
    applied, and the sweep's statistics.
    """
    skipped: list[int] = []
    improper = nonfinite = 0
    vectors = np.empty((cov0.shape[0], len(order)), order="F")
    coefs = np.empty(len(order))
    used = 0
    for start in range(0, len(order), block_size):
        block = order[start : start + block_size]
        panel = np.asfortranarray(cov0[:, block])  # fancy indexing copies
        if used:
            corrections = vectors[:, :used] * coefs[:used]
            panel = dgemm(-1.0, corrections, vectors[block, :used], beta=1.0, c=panel, trans_b=1, overwrite_c=1)
        new_tau = tau_all[block].copy()
        new_nu = nu_all[block].copy()
        for t, j in enumerate(block):
            a_jj = panel[j, t]
            tau_j, nu_j = new_tau[t], new_nu[t]
            cav_mean, cav_var = cavity(mean[j], a_jj, tau_j, nu_j, fraction)
            if not is_proper(cav_var):
                skipped.append(int(j))
                improper += 1
                continue
            tau_new, nu_new = propose(int(j), cav_mean, cav_var, tau_j, nu_j, a_jj)
            if not (np.isfinite(tau_new) and np.isfinite(nu_new)):
                skipped.append(int(j))
                nonfinite += 1
                continue
            d_tau, d_nu = tau_new - tau_j, nu_new - nu_j
            denom = 1.0 + d_tau * a_jj
            if not (denom > 0.0 and np.isfinite(denom)):
                skipped.append(int(j))
                continue
            col = panel[:, t].copy()
            mean += ((d_nu - d_tau * mean[j]) / denom) * col
            k = d_tau / denom
            panel = dger(-k, col, col[block], a=panel, overwrite_a=True)
            vectors[:, used] = col
            coefs[used] = k
            used += 1
            new_tau[t], new_nu[t] = tau_new, nu_new
        set_sites(block, new_tau, new_nu)
    stats = SweepStats(np.sort(np.asarray(skipped, dtype=np.intp)), improper, nonfinite)
    return vectors[:, :used], coefs[:used], stats


def evidence_r(xp: ModuleType, tau: Any, cov: Any) -> Any:
    r""":math:`R = (K + T^{-1})^{-1} = T - TAT` (:math:`A` the posterior covariance ``cov``), in the namespace
    ``xp``: the evidence gradient's (:func:`evidence_gradient`; the device's RBF form,
    :func:`~relaxep.posterior.dense_device.rbf_evidence_gradient`)."""
    return add_to_diagonal(xp, -(tau[:, None] * cov * tau[None, :]), tau)


def evidence_gradient(alpha: Array, tau: Array, cov: Array, kernel_gradient: Array) -> Array:
    r"""Gradient of the EP log evidence in the kernel's hyperparameters (GPML's ``infEP``).

    At an EP fixed point the evidence is stationary in the sites, so only the
    explicit dependence on :math:`K` remains:

    .. math::
        \frac{\partial \log Z_{EP}}{\partial\theta_j}
        = \tfrac12 \alpha^\top \frac{\partial K}{\partial\theta_j}\alpha
          - \tfrac12 \operatorname{tr}\Big(R \frac{\partial K}{\partial\theta_j}\Big),
        \qquad R = (K + T^{-1})^{-1} = T - T A T,

    with :math:`\alpha = (I + TK)^{-1}\nu` and :math:`A` the posterior covariance (the
    Woodbury form of :math:`R` holds for negative site precisions too).  For Power EP
    and REP the same formula is evaluated at their sites; there it is the gradient of
    the EP-form evidence with the sites held fixed, not an exact derivative.

    Parameters
    ----------
    alpha, tau : ndarray of shape (n,)
        :math:`\alpha` and the site precisions :math:`\tau`.
    cov : ndarray of shape (n, n)
        The posterior covariance :math:`A`.
    kernel_gradient : ndarray of shape (n, n, n_hyperparameters)
        :math:`\partial K/\partial\theta_j` (scikit-learn's ``kernel(X, eval_gradient=True)[1]``).
    """
    r = evidence_r(np, tau, cov)
    quad = np.einsum("i,ijk,j->k", alpha, kernel_gradient, alpha)
    trace = np.einsum("ij,jik->k", r, kernel_gradient)
    return 0.5 * (quad - trace)
