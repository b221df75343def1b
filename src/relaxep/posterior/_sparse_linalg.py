r"""The sparse (FITC) posterior's linear algebra, as pure functions of row chunks of :math:`V^\top`.

Shared by :class:`~relaxep.posterior.SparsePosterior` (a loop over the chunks of one array) and
:mod:`relaxep.inference.sharded` (a map over the shards): the prior's rows (:func:`inducing_factor`,
:func:`sparse_prior_rows`), a shard's share of a refresh (:func:`natural_sums`), the
:math:`M \times M` factor (:func:`factor_b`), the marginals (:func:`shard_marginals`) and the test
conditional (:func:`predict_rows`).  Notation as in :mod:`relaxep.posterior.sparse`:
:math:`V^\top = K_{fu}L_{uu}^{-\top}` (``n x M``), :math:`g_i = k_{ii} - \|v_i\|^2`,
:math:`d_i = 1 + g_i\tau_i`, :math:`B = I + VWV^\top = L_BL_B^\top`, :math:`m = B^{-1}V\beta`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from scipy import linalg

from relaxep._blas import rows_solve_lower_t, rows_times_lower_t, syrk_rows
from relaxep._threads import each_block, fold_blocks
from relaxep._typing import Array
from relaxep._validation import NOT_PSD_ADVICE
from relaxep._xp import check_device_memory, cholesky_lower, namespace, on_device_of, solve_lower
from relaxep.errors import ImproperPosteriorError, KernelNotPositiveDefiniteError

__all__ = [
    "CHUNK",
    "KUU_JITTER",
    "add_natural_sums",
    "add_weighted_gram",
    "cholesky_kuu",
    "chunks",
    "conditional_variances",
    "device_cross_kernel",
    "factor_b",
    "inducing_factor",
    "matrices_prior",
    "multiply_rows",
    "natural_sums",
    "posterior_pass",
    "predict_rows",
    "row_squares",
    "rows_per_block",
    "shard_marginals",
    "solve_rows",
    "sparse_prior_rows",
    "symmetric_from_lower",
]

#: rows of V^T per chunk at M = 200 (and the default of the functions below): bounds the temporaries of a
#: pass to CHUNK x M, and is the row block one thread takes (relaxep._threads); 1024 rows were as fast as
#: 4096 on one thread at M = 200 (cache)
CHUNK = 1024


def rows_per_block(n_inducing: int) -> int:
    r"""Rows of a block for ``M`` inducing inputs: the work of :data:`CHUNK` rows at ``M = 200``
    (:math:`M^2` multiply-adds a row), between 256 and 4096 rows.  It depends on ``M`` alone, never on
    the thread count.  Measured on 2 cores, a learned fit at ``M = 50`` on 2 * 10^4 rows: 1024-row blocks
    3.39 s on two threads against 2.82 s on one (the pool's overhead above the blocks' work), 16384-row
    blocks (two, unequal) no gain, 4096-row blocks 2.13 s against 2.76 s."""
    return int(min(max(CHUNK * 200**2 // max(n_inducing, 1) ** 2 // 32 * 32, 256), 4096))


def chunks(n: int, size: int = CHUNK) -> Iterator[slice]:
    """Consecutive row slices of at most ``size`` rows covering ``range(n)``."""
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


def solve_rows(lower: Array, rows: Array) -> Array:
    r"""Rows of :math:`Y L^{-\top}` (that is :math:`(L^{-1}Y^\top)^\top`) by one BLAS-3 ``trsm`` (GIL released;
    another array library: its triangular solve, :mod:`relaxep._xp`)."""
    xp, numpy = namespace(lower, rows)
    if not numpy:
        return solve_lower(xp, lower, rows.T).T
    return rows_solve_lower_t(lower, rows)


def multiply_rows(lower: Array, rows: Array) -> Array:
    r"""Rows of :math:`Y L^\top` for lower-triangular :math:`L` by one BLAS-3 ``trmm`` (GIL released)."""
    xp, numpy = namespace(lower, rows)
    if not numpy:
        return rows @ xp.tril(lower).T
    return rows_times_lower_t(lower, rows)


def row_dots(left: Array, right: Array) -> Array:
    r""":math:`x_i^\top y_i` for every row (numpy: ``einsum``)."""
    xp, numpy = namespace(left, right)
    return np.einsum("ij,ij->i", left, right) if numpy else xp.sum(left * right, axis=1)


def row_squares(rows: Array) -> Array:
    r""":math:`\|y_i\|^2` for every row."""
    return row_dots(rows, rows)


def log_det_of(chol: Array) -> float:
    r""":math:`\log|LL^\top| = 2\sum_i \log L_{ii}` from a Cholesky factor, in its array library."""
    xp, numpy = namespace(chol)
    return 2.0 * float(xp.sum(xp.log(np.diagonal(chol) if numpy else xp.linalg.diagonal(chol))))


def add_weighted_gram(gram: Array, rows: Array, weights: Array) -> Array:
    r""":math:`C + Y^\top \operatorname{diag}(w) Y` in the lower triangle, weights of any sign (two ``syrk``;
    ``gram`` Fortran-ordered, updated in place; another array library: one product, the whole matrix)."""
    _, numpy = namespace(gram, rows, weights)
    if not numpy:
        return gram + (rows * weights[:, None]).T @ rows
    pos, neg = weights > 0.0, weights < 0.0
    if np.any(pos):
        y = rows * np.sqrt(weights)[:, None] if np.all(pos) else rows[pos] * np.sqrt(weights[pos])[:, None]
        gram = syrk_rows(gram, y, 1.0)
    if np.any(neg):
        gram = syrk_rows(gram, rows[neg] * np.sqrt(-weights[neg])[:, None], -1.0)
    return gram


def symmetric_from_lower(lower: Array) -> Array:
    """The symmetric matrix whose lower triangle is that of ``lower`` (exactly symmetric)."""
    xp, _ = namespace(lower)
    return xp.tril(lower) + xp.tril(lower, k=-1).T


def natural_sums(rows: Array, g: Array, tau: Array, nu: Array) -> tuple[Array, Array, float, float]:
    r"""One shard's share of the refresh: :math:`\sum_i w_i v_i v_i^\top` (lower), :math:`\sum_i \beta_i v_i`,
    :math:`\sum_i \log d_i` and :math:`\min_i d_i` (``log d`` is ``nan`` where some :math:`d_i \le 0`)."""
    xp, numpy = namespace(rows, g, tau, nu)
    d = 1.0 + g * tau
    m = rows.shape[1]
    gram = np.zeros((m, m), order="F") if numpy else xp.zeros((m, m), dtype=rows.dtype, device=_device(rows))
    if not bool(xp.all(d > 0.0)):
        return gram, xp.zeros_like(gram[0, :]), float("nan"), float(xp.min(d))
    gram = add_weighted_gram(gram, rows, tau / d)
    return gram, (nu / d) @ rows, float(xp.sum(xp.log(d))), float(xp.min(d))


def add_natural_sums(
    a: tuple[Array, Array, float, float], b: tuple[Array, Array, float, float]
) -> tuple[Array, Array, float, float]:
    """Two blocks' :func:`natural_sums` as one (the Gram sums, the ``b`` sums, the ``log d`` sums, the least ``d``)."""
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], min(a[3], b[3])


def factor_b(gram: Array, b: Array) -> tuple[Array, Array, Array]:
    r""":math:`L_B`, :math:`L_B^{-1}` and :math:`m = B^{-1}b` for :math:`B = I +` ``gram`` (lower triangle used).

    Raises :class:`~relaxep.ImproperPosteriorError` where :math:`B` is not positive definite.
    """
    xp, numpy = namespace(gram, b)
    big_b = symmetric_from_lower(gram)
    if not numpy:
        eye = xp.eye(big_b.shape[0], dtype=big_b.dtype, device=_device(big_b))
        chol = cholesky_lower(xp, big_b + eye)
        if chol is None:
            raise ImproperPosteriorError("B = I + V W V^T is not positive definite: the sites make q improper")
        chol_inv = solve_lower(xp, chol, eye)
        m = solve_lower(xp, chol, solve_lower(xp, chol, b[:, None]), trans=True)[:, 0]
        return chol, chol_inv, m
    big_b[np.diag_indices_from(big_b)] += 1.0
    try:
        chol = linalg.cholesky(big_b, lower=True, check_finite=False)
    except linalg.LinAlgError as exc:
        raise ImproperPosteriorError("B = I + V W V^T is not positive definite: the sites make q improper") from exc
    chol_inv = linalg.lapack.dtrtri(chol, lower=1)[0]
    return chol, chol_inv, linalg.cho_solve((chol, True), b, check_finite=False)


def shard_marginals(rows: Array, g: Array, tau: Array, nu: Array, chol_inv: Array, m: Array) -> tuple[Array, Array]:
    r"""Posterior means and marginal variances of a block of sites from the broadcast :math:`L_B^{-1}, m`.

    :math:`\mu_i = (v_i^\top m + g_i\nu_i)/d_i`, :math:`A_{ii} = g_i/d_i + \|L_B^{-1}v_i\|^2/d_i^2`.
    """
    s = row_squares(multiply_rows(chol_inv, rows))
    d = 1.0 + g * tau
    return (rows @ m + g * nu) / d, g / d + s / d**2


def posterior_pass(
    Vt: Array, g: Array, tau: Array, nu: Array, size: int, n_jobs: int | None
) -> tuple[Array, Array, Array, Array, float, Array, Array]:
    r"""A refresh from the sites: the Gram and ``b`` sums (:func:`natural_sums`), :math:`L_B`, :math:`L_B^{-1}`,
    :math:`m` (:func:`factor_b`) and the marginals (:func:`shard_marginals`); ``(L_B, L_B^{-1}, m, b,
    \log|I + (Q+G)T| = \sum\log d_i + \log|B|, \mu, A_{ii})``.  numpy: row blocks of ``size`` on
    ``n_jobs`` threads, summed in block order; another array library: one block, its own scheduling.
    Raises :class:`~relaxep.ImproperPosteriorError` where the sites make the posterior improper."""
    xp, numpy = namespace(Vt, tau)
    if not (bool(xp.all(xp.isfinite(tau))) and bool(xp.all(xp.isfinite(nu)))):
        raise ImproperPosteriorError("site parameters are not finite")
    blocks = list(chunks(Vt.shape[0], size)) if numpy else [slice(None)]  # fixed by n, never by the threads

    def sums(c: slice) -> tuple[Array, Array, float, float]:
        return natural_sums(Vt[c, :], g[c], tau[c], nu[c])

    gram, b, log_d, d_min = fold_blocks(sums, blocks, n_jobs, add_natural_sums)
    if not d_min > 0.0:
        raise ImproperPosteriorError("1 + g_i tau_i <= 0 for some site: the FITC posterior is improper")
    chol, chol_inv, m = factor_b(gram, b)
    if numpy:
        mean, var = np.empty(Vt.shape[0]), np.empty(Vt.shape[0])

        def marginals(c: slice) -> None:
            mean[c], var[c] = shard_marginals(Vt[c], g[c], tau[c], nu[c], chol_inv, m)

        each_block(marginals, blocks, n_jobs)
    else:
        mean, var = shard_marginals(Vt, g, tau, nu, chol_inv, m)
    if not bool(xp.all(var > 0.0)):
        raise ImproperPosteriorError("a posterior marginal variance is not positive")
    return chol, chol_inv, m, b, log_d + log_det_of(chol), mean, var


def matrices_prior(K_uu: Array, K_fu: Array, size: int) -> tuple[Array, Array, Array]:
    r""":math:`K_{uu}` symmetrised, its Cholesky factor and :math:`V^\top = K_{fu}L_{uu}^{-\top}` (numpy: in row
    blocks of ``size``), in the matrices' array library."""
    k_uu = 0.5 * (K_uu + K_uu.T)
    factor = cholesky_kuu(k_uu)
    if not namespace(K_fu)[1]:
        return k_uu, factor, solve_rows(factor, K_fu)
    rows = np.empty(K_fu.shape)
    for c in chunks(K_fu.shape[0], size):
        rows[c] = solve_rows(factor, K_fu[c])
    return k_uu, factor, rows


def predict_rows(
    L_uu: Array,
    inducing_mean: Array,
    chol_inv: Array,
    cross_kernel: Array,
    test_diag: Array,
    size: int = CHUNK,
    n_jobs: int | None = 1,
) -> tuple[Array, Array]:
    r"""FITC's test conditional (Snelson & Ghahramani 2006) from :math:`K_{*u}`, in row chunks of ``size``
    on ``n_jobs`` threads (:mod:`relaxep._threads`).

    With :math:`a_* = L_{uu}^{-1}k_{u*}`:

    .. math:: \mu_* = a_*^\top m,\qquad s^2_* = \max\big(k_{**} - \|a_*\|^2 + \|L_B^{-1}a_*\|^2,\ 0\big).
    """
    xp, numpy = namespace(L_uu, cross_kernel)

    def conditional(K: Array, diag: Array) -> tuple[Array, Array]:
        a = solve_rows(L_uu, K)
        return a @ inducing_mean, diag - row_squares(a) + row_squares(multiply_rows(chol_inv, a))

    if not numpy:  # one block on the device: the library schedules its own work
        mean, var = conditional(cross_kernel, test_diag)
        return mean, xp.maximum(var, xp.zeros_like(var))
    mean, var = np.empty(cross_kernel.shape[0]), np.empty(cross_kernel.shape[0])

    def block(c: slice) -> None:
        mean[c], var[c] = conditional(cross_kernel[c], test_diag[c])

    each_block(block, list(chunks(cross_kernel.shape[0], size)), n_jobs)
    return mean, np.maximum(var, 0.0)


# ------------------------------------------------------------------ the prior's pieces
#: relative jitter on K_uu (SparsePrior's default): K_uu + KUU_JITTER * mean(diag K_uu) I
KUU_JITTER = 1e-6


def cholesky_kuu(k_uu: Array) -> Array:
    """The lower Cholesky factor of :math:`K_{uu}`, in its array library (raises
    :class:`~relaxep.KernelNotPositiveDefiniteError`)."""
    factor = cholesky_lower(namespace(k_uu)[0], k_uu)
    if factor is None:
        raise KernelNotPositiveDefiniteError(
            f"K_uu (the kernel at the inducing inputs) has no Cholesky factor: are two inducing inputs equal? "
            f"{NOT_PSD_ADVICE}"
        )
    return factor


def inducing_factor(kernel: Any, Z: Array, jitter: float = KUU_JITTER) -> tuple[Array, Array, float]:
    r""":math:`K_{uu} = k(Z, Z) + \epsilon\,\overline{\operatorname{diag}k(Z, Z)}\,I` (symmetrised), its
    Cholesky factor :math:`L_{uu}` and the absolute jitter added, for the relative ``jitter`` :math:`\epsilon`."""
    k_uu = np.asarray(kernel(Z, Z), dtype=float)
    kuu_jitter = jitter * float(np.mean(np.diagonal(k_uu)))
    k_uu[np.diag_indices_from(k_uu)] += kuu_jitter
    k_uu = 0.5 * (k_uu + k_uu.T)
    return k_uu, cholesky_kuu(k_uu), kuu_jitter


def conditional_variances(k_diag: Array, rows: Array) -> Array:
    r""":math:`g_i = \max(k_{ii} - \|v_i\|^2, 0)`: the prior variances FITC keeps beside :math:`Q`."""
    xp, _ = namespace(k_diag, rows)
    diff = k_diag - row_squares(rows)
    return xp.maximum(diff, xp.zeros_like(diff))


def sparse_prior_rows(
    kernel: Any,
    X: Array,
    Z: Array,
    L_uu: Array,
    latent_noise: float = 0.0,
    size: int = CHUNK,
    n_jobs: int | None = 1,
) -> tuple[Array, Array, Array]:
    r"""The FITC prior's rows at ``X``: :math:`V^\top = K_{Xu}L_{uu}^{-\top}` (in chunks of ``size`` rows, on
    ``n_jobs`` threads: :mod:`relaxep._threads`),
    :math:`k_{ii}` + ``latent_noise`` and :math:`g` (:func:`conditional_variances`).

    :class:`~relaxep.posterior.SparsePrior` builds its rows by this function, as each Dask shard builds its own.
    ``X`` of another array library (:mod:`relaxep._xp`): the kernel's closed-form view (``RBF`` or
    ``ConstantKernel * RBF``) evaluated there, in blocks of :data:`DEVICE_ROWS` rows.
    """
    xp, numpy = namespace(X)
    if not numpy:
        return _device_rows(xp, kernel, X, Z, L_uu, latent_noise)
    rows = np.empty((X.shape[0], Z.shape[0]))

    def block(c: slice) -> None:
        rows[c] = solve_rows(L_uu, np.asarray(kernel(X[c], Z), dtype=float))

    each_block(block, list(chunks(X.shape[0], size)), n_jobs)
    k_diag = np.asarray(kernel.diag(X), dtype=float) + latent_noise
    return rows, k_diag, conditional_variances(k_diag, rows)


def _device(x: Array) -> object:
    """The array's device (the array API's ``device`` attribute)."""
    return getattr(x, "device", None)


#: rows of K_Xu per block on another library's device (bounds its temporaries to DEVICE_ROWS x M)
DEVICE_ROWS = 1 << 18


def _device_rows(xp: Any, kernel: Any, X: Array, Z: Array, L_uu: Array, latent_noise: float) -> tuple:
    n, m = X.shape[0], Z.shape[0]
    check_device_memory(  # V^T, a refresh's two n x M temporaries and a block of K_Xu
        X, 8.0 * m * (3.0 * n + 2.0 * min(n, DEVICE_ROWS)), f"a sparse GP on n = {n} rows with M = {m} inducing inputs",
        "use fewer inducing inputs (M), or fit on the CPU with numpy arrays (memory O(n M) there too)",
    )  # fmt: skip
    L_dev = on_device_of(L_uu, X)
    rows, diag = [], []
    for c in chunks(X.shape[0], DEVICE_ROWS):
        cross, k_cc = device_cross_kernel(kernel, X[c, :], Z)
        rows.append(solve_rows(L_dev, cross))
        diag.append(k_cc + latent_noise)
    rows_all, k_diag = (parts[0] if len(parts) == 1 else xp.concat(parts, axis=0) for parts in (rows, diag))
    return rows_all, k_diag, conditional_variances(k_diag, rows_all)


def device_cross_kernel(kernel: Any, X: Array, Z: Array) -> tuple[Array, Array]:
    r""":math:`k(X, Z)` and :math:`k(x, x)` on ``X``'s device, by the kernel's closed-form view (``RBF`` or
    ``ConstantKernel * RBF``; ``TypeError`` naming them for another kernel)."""
    from relaxep.posterior._kernels import as_sparse_kernel, rbf  # (the view reads scikit-learn's kernels)

    try:
        view = as_sparse_kernel(kernel, X.shape[1])
    except TypeError as exc:
        raise TypeError(
            f"kernel: on arrays other than numpy's the FITC prior evaluates RBF or ConstantKernel * RBF, got {kernel!r}"
        ) from exc
    xp, _ = namespace(X)
    diag = xp.full((X.shape[0],), view.constant, dtype=X.dtype, device=_device(X))
    return rbf(view, X, on_device_of(np.asarray(Z, dtype=float), X)), diag
