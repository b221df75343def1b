r"""The FITC row-block layer: the sparse posterior's linear algebra as pure functions of row blocks of :math:`V^\top`.

This is the one layer under every FITC computation in relaxep:

- the one-process sweep, :class:`~relaxep.posterior.SparsePosterior` (a loop over the row blocks of one
  array, on threads: :mod:`relaxep._threads`);
- the shards of :mod:`relaxep.inference.sharded` (the same functions mapped over Dask workers, their sums
  reduced on the client);
- the stochastic search of :mod:`relaxep.inference.stochastic_ep` (a minibatch's rows);
- the fitted model that ``to_local()`` returns (:mod:`relaxep.estimators._inducing_model`, predictions by
  :func:`predict_rows` alone).

Notation (:mod:`relaxep.posterior.sparse` has the derivation): :math:`L_{uu}L_{uu}^\top = K_{uu}`,
:math:`V^\top = K_{fu}L_{uu}^{-\top}` (``n x M``, its rows :math:`v_i`), :math:`g_i = k_{ii} - \|v_i\|^2`, and for
sites :math:`(\tau, \nu)`

.. math::
    d_i = 1 + g_i\tau_i,\quad w_i = \tau_i/d_i,\quad \beta_i = \nu_i/d_i,\quad
    B = I + \textstyle\sum_i w_i v_iv_i^\top = L_BL_B^\top,\quad m = B^{-1}\sum_i\beta_i v_i,

.. math::
    \mu_i = \frac{v_i^\top m + g_i\nu_i}{d_i},\qquad A_{ii} = \frac{g_i}{d_i} + \frac{\|L_B^{-1}v_i\|^2}{d_i^2},\qquad
    \log|I + (Q+G)T| = \textstyle\sum_i\log d_i + \log|B|.

A refresh is a sum over row blocks (:func:`natural_sums`, added by :func:`add_natural_sums` in block order),
one :math:`M \times M` factorisation (:func:`factor_b`) and a map over row blocks (:func:`shard_marginals`);
:func:`posterior_pass` is the three in one process.  The prior's rows come from :func:`inducing_factor` and
:func:`sparse_prior_rows`; the test conditional from :func:`predict_rows`.

Every function that branches takes the :class:`~relaxep._xp.ArraySpace` its caller holds (first argument):
numpy on the host keeps its BLAS-3 specialisations (``syrk``, ``trsm``, ``trmm``); another array library
(:mod:`relaxep._xp`) computes the same algebra in the operations every library has, one block on its device.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np
from scipy import linalg

from relaxep._blas import rows_solve_lower_t, rows_times_lower_t, syrk_rows
from relaxep._threads import each_block, fold_blocks
from relaxep._typing import Array
from relaxep._validation import NOT_PSD_ADVICE
from relaxep._xp import (
    HOST,
    ArraySpace,
    check_device_memory,
    cholesky_flagged,
    cholesky_lower,
    on_device_of,
    solve_lower,
)
from relaxep.errors import ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.posterior.rbf import as_scaled_rbf, rbf

__all__ = [
    "CHUNK",
    "DEVICE_ROWS",
    "KUU_JITTER",
    "FITCRows",
    "add_natural_sums",
    "add_weighted_gram",
    "cholesky_kuu",
    "chunks",
    "conditional_variances",
    "device_cross_kernel",
    "device_pass",
    "factor_b",
    "inducing_factor",
    "log_det_of",
    "matrices_prior",
    "multiply_rows",
    "natural_sums",
    "posterior_pass",
    "predict_rows",
    "row_dots",
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


class FITCRows(Protocol):
    """What a FITC posterior reads from its prior (:class:`~relaxep.posterior.SparsePrior` is one): the rows
    :math:`V^\top` (``None`` where they are recomputed: ``row_block``) and :math:`g`, :math:`L_{uu}`, the row block,
    the threads, the array space they live in, and the refresh ``posterior_pass(tau, nu)``."""

    space: ArraySpace
    Vt: Array | None
    g: Array
    L_uu: Array
    chunk_size: int
    n_jobs: int | None

    @property
    def n(self) -> int: ...

    @property
    def n_inducing(self) -> int: ...

    def row_block(self, c: slice) -> tuple[Array, Array]: ...

    def posterior_pass(self, tau: Array, nu: Array) -> tuple[Array, Array, Array, Array, float, Array, Array]: ...


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


def solve_rows(space: ArraySpace, lower: Array, rows: Array) -> Array:
    r"""Rows of :math:`Y L^{-\top}` (that is :math:`(L^{-1}Y^\top)^\top`) by one BLAS-3 ``trsm`` (GIL released;
    another array library: its triangular solve, :mod:`relaxep._xp`)."""
    if not space.on_host:
        return solve_lower(space.xp, lower, rows.T).T
    return rows_solve_lower_t(lower, rows)


def multiply_rows(space: ArraySpace, lower: Array, rows: Array) -> Array:
    r"""Rows of :math:`Y L^\top` for lower-triangular :math:`L` by one BLAS-3 ``trmm`` (GIL released)."""
    if not space.on_host:
        return rows @ space.xp.tril(lower).T
    return rows_times_lower_t(lower, rows)


def row_dots(space: ArraySpace, left: Array, right: Array) -> Array:
    r""":math:`x_i^\top y_i` for every row (numpy: ``einsum``)."""
    return np.einsum("ij,ij->i", left, right) if space.on_host else space.xp.sum(left * right, axis=1)


def row_squares(space: ArraySpace, rows: Array) -> Array:
    r""":math:`\|y_i\|^2` for every row."""
    return row_dots(space, rows, rows)


def log_det_of(space: ArraySpace, chol: Array) -> float:
    r""":math:`\log|LL^\top| = 2\sum_i \log L_{ii}` from a Cholesky factor, in its array library."""
    xp = space.xp
    return 2.0 * float(xp.sum(xp.log(np.diagonal(chol) if space.on_host else xp.linalg.diagonal(chol))))


def add_weighted_gram(space: ArraySpace, gram: Array, rows: Array, weights: Array) -> Array:
    r""":math:`C + Y^\top \operatorname{diag}(w) Y` in the lower triangle, weights of any sign (two ``syrk``;
    ``gram`` Fortran-ordered, updated in place; another array library: one product, the whole matrix)."""
    if not space.on_host:
        return gram + (rows * weights[:, None]).T @ rows
    pos, neg = weights > 0.0, weights < 0.0
    if np.any(pos):
        y = rows * np.sqrt(weights)[:, None] if np.all(pos) else rows[pos] * np.sqrt(weights[pos])[:, None]
        gram = syrk_rows(gram, y, 1.0)
    if np.any(neg):
        gram = syrk_rows(gram, rows[neg] * np.sqrt(-weights[neg])[:, None], -1.0)
    return gram


def symmetric_from_lower(space: ArraySpace, lower: Array) -> Array:
    """The symmetric matrix whose lower triangle is that of ``lower`` (exactly symmetric)."""
    xp = space.xp
    return xp.tril(lower) + xp.tril(lower, k=-1).T


def natural_sums(space: ArraySpace, rows: Array, g: Array, tau: Array, nu: Array) -> tuple[Array, Array, float, float]:
    r"""One shard's share of the refresh: :math:`\sum_i w_i v_i v_i^\top` (lower), :math:`\sum_i \beta_i v_i`,
    :math:`\sum_i \log d_i` and :math:`\min_i d_i` (``log d`` is ``nan`` where some :math:`d_i \le 0`)."""
    xp = space.xp
    d = 1.0 + g * tau
    m = rows.shape[1]
    gram = np.zeros((m, m), order="F") if space.on_host else xp.zeros((m, m), dtype=rows.dtype, device=space.device)
    if not bool(xp.all(d > 0.0)):
        return gram, xp.zeros_like(gram[0, :]), float("nan"), float(xp.min(d))
    gram = add_weighted_gram(space, gram, rows, tau / d)
    return gram, (nu / d) @ rows, float(xp.sum(xp.log(d))), float(xp.min(d))


def add_natural_sums(
    a: tuple[Array, Array, float, float], b: tuple[Array, Array, float, float]
) -> tuple[Array, Array, float, float]:
    """Two blocks' :func:`natural_sums` as one (the Gram sums, the ``b`` sums, the ``log d`` sums, the least ``d``)."""
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], min(a[3], b[3])


def factor_b(space: ArraySpace, gram: Array, b: Array) -> tuple[Array, Array, Array]:
    r""":math:`L_B`, :math:`L_B^{-1}` and :math:`m = B^{-1}b` for :math:`B = I +` ``gram`` (lower triangle used).

    Raises :class:`~relaxep.ImproperPosteriorError` where :math:`B` is not positive definite.
    """
    big_b = symmetric_from_lower(space, gram)
    if not space.on_host:
        chol, chol_inv, m, ok = _factor_b_flagged(space, big_b, b)
        if chol is None or not bool(ok):
            raise ImproperPosteriorError(_B_IMPROPER)
        return chol, chol_inv, m
    big_b[np.diag_indices_from(big_b)] += 1.0
    try:
        chol = linalg.cholesky(big_b, lower=True, check_finite=False)
    except linalg.LinAlgError as exc:
        raise ImproperPosteriorError(_B_IMPROPER) from exc
    chol_inv = linalg.lapack.dtrtri(chol, lower=1)[0]
    return chol, chol_inv, linalg.cho_solve((chol, True), b, check_finite=False)


_B_IMPROPER = "B = I + V W V^T is not positive definite: the sites make q improper"


def _factor_b_flagged(space: ArraySpace, big_b: Array, b: Array) -> tuple[Array | None, Array, Array, Any]:
    """:func:`factor_b` on another library's device, its check left there: ``(L_B, L_B^{-1}, m, ok)``."""
    xp = space.xp
    eye = xp.eye(big_b.shape[0], dtype=big_b.dtype, device=space.device)
    chol, ok = cholesky_flagged(xp, big_b + eye)
    if chol is None:
        return None, None, None, ok
    chol_inv = solve_lower(xp, chol, eye)
    return chol, chol_inv, solve_lower(xp, chol, solve_lower(xp, chol, b[:, None]), trans=True)[:, 0], ok


def device_pass(space: ArraySpace, Vt: Array, g: Array, tau: Array, nu: Array) -> tuple:
    r""":func:`posterior_pass` on another library's device with nothing read back: ``(L_B, L_B^{-1}, m, b,
    \log|I + (Q+G)T|, \mu, A_{ii}, ok)``, the log-determinant and ``ok`` (finite sites, every :math:`d_i > 0`,
    :math:`B` positive definite, every :math:`A_{ii} > 0`) 0-d arrays there, for the caller to read with whatever
    else it reads (:mod:`relaxep.inference.device_ep`: one read a sweep).  ``L_B`` is ``None`` where the library
    raises on a matrix that is not positive definite."""
    xp = space.xp
    d = 1.0 + g * tau
    b = (nu / d) @ Vt
    gram = symmetric_from_lower(space, (Vt * (tau / d)[:, None]).T @ Vt)  # (posterior_pass's B, to the digit)
    chol, chol_inv, m, chol_ok = _factor_b_flagged(space, gram, b)
    if chol is None:
        return (None,) * 7 + (chol_ok,)
    mean, var = shard_marginals(space, Vt, g, tau, nu, chol_inv, m)
    ok = xp.all(xp.isfinite(tau)) & xp.all(xp.isfinite(nu)) & xp.all(d > 0.0) & chol_ok & xp.all(var > 0.0)
    log_det = xp.sum(xp.log(d)) + 2.0 * xp.sum(xp.log(xp.linalg.diagonal(chol)))
    return chol, chol_inv, m, b, log_det, mean, var, ok


def shard_marginals(
    space: ArraySpace, rows: Array, g: Array, tau: Array, nu: Array, chol_inv: Array, m: Array
) -> tuple[Array, Array]:
    r"""Posterior means and marginal variances of a block of sites from the broadcast :math:`L_B^{-1}, m`.

    :math:`\mu_i = (v_i^\top m + g_i\nu_i)/d_i`, :math:`A_{ii} = g_i/d_i + \|L_B^{-1}v_i\|^2/d_i^2`.
    """
    s = row_squares(space, multiply_rows(space, chol_inv, rows))
    d = 1.0 + g * tau
    return (rows @ m + g * nu) / d, g / d + s / d**2


def posterior_pass(
    space: ArraySpace, Vt: Array, g: Array, tau: Array, nu: Array, size: int, n_jobs: int | None
) -> tuple[Array, Array, Array, Array, float, Array, Array]:
    r"""A refresh from the sites: the Gram and ``b`` sums (:func:`natural_sums`), :math:`L_B`, :math:`L_B^{-1}`,
    :math:`m` (:func:`factor_b`) and the marginals (:func:`shard_marginals`); ``(L_B, L_B^{-1}, m, b,
    \log|I + (Q+G)T| = \sum\log d_i + \log|B|, \mu, A_{ii})``.  numpy: row blocks of ``size`` on
    ``n_jobs`` threads, summed in block order; another array library: one block, its own scheduling.
    Raises :class:`~relaxep.ImproperPosteriorError` where the sites make the posterior improper."""
    xp, numpy = space.xp, space.on_host
    if not (bool(xp.all(xp.isfinite(tau))) and bool(xp.all(xp.isfinite(nu)))):
        raise ImproperPosteriorError("site parameters are not finite")
    blocks = list(chunks(Vt.shape[0], size)) if numpy else [slice(None)]  # fixed by n, never by the threads

    def sums(c: slice) -> tuple[Array, Array, float, float]:
        return natural_sums(space, Vt[c, :], g[c], tau[c], nu[c])

    gram, b, log_d, d_min = fold_blocks(sums, blocks, n_jobs, add_natural_sums)
    if not d_min > 0.0:
        raise ImproperPosteriorError("1 + g_i tau_i <= 0 for some site: the FITC posterior is improper")
    chol, chol_inv, m = factor_b(space, gram, b)
    if numpy:
        mean, var = np.empty(Vt.shape[0]), np.empty(Vt.shape[0])

        def marginals(c: slice) -> None:
            mean[c], var[c] = shard_marginals(space, Vt[c], g[c], tau[c], nu[c], chol_inv, m)

        each_block(marginals, blocks, n_jobs)
    else:
        mean, var = shard_marginals(space, Vt, g, tau, nu, chol_inv, m)
    if not bool(xp.all(var > 0.0)):
        raise ImproperPosteriorError("a posterior marginal variance is not positive")
    return chol, chol_inv, m, b, log_d + log_det_of(space, chol), mean, var


def matrices_prior(space: ArraySpace, K_uu: Array, K_fu: Array, size: int) -> tuple[Array, Array, Array]:
    r""":math:`K_{uu}` symmetrised, its Cholesky factor and :math:`V^\top = K_{fu}L_{uu}^{-\top}` (numpy: in row
    blocks of ``size``), in the matrices' array library."""
    k_uu = 0.5 * (K_uu + K_uu.T)
    factor = cholesky_kuu(space, k_uu)
    if not space.on_host:
        return k_uu, factor, solve_rows(space, factor, K_fu)
    rows = np.empty(K_fu.shape)
    for c in chunks(K_fu.shape[0], size):
        rows[c] = solve_rows(space, factor, K_fu[c])
    return k_uu, factor, rows


def predict_rows(
    space: ArraySpace,
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

    def conditional(K: Array, diag: Array) -> tuple[Array, Array]:
        a = solve_rows(space, L_uu, K)
        return a @ inducing_mean, diag - row_squares(space, a) + row_squares(space, multiply_rows(space, chol_inv, a))

    if not space.on_host:  # one block on the device: the library schedules its own work
        mean, var = conditional(cross_kernel, test_diag)
        return mean, space.xp.maximum(var, space.xp.zeros_like(var))
    mean, var = np.empty(cross_kernel.shape[0]), np.empty(cross_kernel.shape[0])

    def block(c: slice) -> None:
        mean[c], var[c] = conditional(cross_kernel[c], test_diag[c])

    each_block(block, list(chunks(cross_kernel.shape[0], size)), n_jobs)
    return mean, np.maximum(var, 0.0)


# ------------------------------------------------------------------ the prior's pieces
#: relative jitter on K_uu (SparsePrior's default): K_uu + KUU_JITTER * mean(diag K_uu) I
KUU_JITTER = 1e-6


def cholesky_kuu(space: ArraySpace, k_uu: Array) -> Array:
    """The lower Cholesky factor of :math:`K_{uu}`, in its array library (raises
    :class:`~relaxep.KernelNotPositiveDefiniteError`)."""
    factor = cholesky_lower(space.xp, k_uu)
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
    return k_uu, cholesky_kuu(HOST, k_uu), kuu_jitter


def conditional_variances(space: ArraySpace, k_diag: Array, rows: Array) -> Array:
    r""":math:`g_i = \max(k_{ii} - \|v_i\|^2, 0)`: the prior variances FITC keeps beside :math:`Q`."""
    diff = k_diag - row_squares(space, rows)
    return space.xp.maximum(diff, space.xp.zeros_like(diff))


def sparse_prior_rows(
    space: ArraySpace,
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
    if not space.on_host:
        return _device_rows(space, kernel, X, Z, L_uu, latent_noise)
    rows = np.empty((X.shape[0], Z.shape[0]))

    def block(c: slice) -> None:
        rows[c] = solve_rows(space, L_uu, np.asarray(kernel(X[c], Z), dtype=float))

    each_block(block, list(chunks(X.shape[0], size)), n_jobs)
    k_diag = np.asarray(kernel.diag(X), dtype=float) + latent_noise
    return rows, k_diag, conditional_variances(space, k_diag, rows)


#: rows of K_Xu per block on another library's device (bounds its temporaries to DEVICE_ROWS x M)
DEVICE_ROWS = 1 << 18


def _device_rows(space: ArraySpace, kernel: Any, X: Array, Z: Array, L_uu: Array, latent_noise: float) -> tuple:
    n, m = X.shape[0], Z.shape[0]
    check_device_memory(  # V^T, a refresh's two n x M temporaries and a block of K_Xu
        X, 8.0 * m * (3.0 * n + 2.0 * min(n, DEVICE_ROWS)),
        f'a sparse GP on n = {n} rows with M = {m} inducing inputs, its rows stored (rows="stored": V^T, n x M)',
        'use rows="recomputed" (V^T rebuilt in blocks: memory O(n + M^2)), fewer inducing inputs (M), or the CPU',
    )  # fmt: skip
    L_dev = on_device_of(L_uu, X)
    rows, diag = [], []
    for c in chunks(X.shape[0], DEVICE_ROWS):
        cross, k_cc = device_cross_kernel(space, kernel, X[c, :], Z)
        rows.append(solve_rows(space, L_dev, cross))
        diag.append(k_cc + latent_noise)
    rows_all, k_diag = (parts[0] if len(parts) == 1 else space.xp.concat(parts, axis=0) for parts in (rows, diag))
    return rows_all, k_diag, conditional_variances(space, k_diag, rows_all)


def device_cross_kernel(space: ArraySpace, kernel: Any, X: Array, Z: Array) -> tuple[Array, Array]:
    r""":math:`k(X, Z)` and :math:`k(x, x)` on ``X``'s device, by the kernel's closed-form view (``RBF`` or
    ``ConstantKernel * RBF``; ``TypeError`` naming them for another kernel)."""
    try:
        view = as_scaled_rbf(kernel, X.shape[1])
    except TypeError as exc:
        raise TypeError(
            f"kernel: on arrays other than numpy's the FITC prior evaluates RBF or ConstantKernel * RBF, got {kernel!r}"
        ) from exc
    diag = space.xp.full((X.shape[0],), view.constant, dtype=X.dtype, device=space.device)
    Z = on_device_of(np.asarray(Z, dtype=float), X) if isinstance(Z, np.ndarray) else Z  # (or already there)
    return rbf(view, X, Z, space), diag
