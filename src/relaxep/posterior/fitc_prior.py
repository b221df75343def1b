r"""The FITC prior's rows: :math:`K_{uu}` and its factor, :math:`V^\top` and :math:`g`, on the host or a device.

With inducing inputs :math:`Z` (``M`` of them) and the kernel :math:`k`,

.. math::
    K_{uu} = k(Z, Z) + \epsilon\,\overline{\operatorname{diag}k(Z, Z)}\,I = L_{uu}L_{uu}^\top,\qquad
    V^\top = K_{Xu}L_{uu}^{-\top},\qquad g_i = \max(k_{ii} - \|v_i\|^2, 0),

so that :math:`Q = VV^\top` and FITC's prior is :math:`Q + \operatorname{diag}(g)`
(:mod:`relaxep.posterior.sparse` has the derivation).  :class:`~relaxep.posterior.SparsePrior` builds its rows by
:func:`sparse_prior_rows`, as each Dask shard builds its own (:mod:`relaxep.inference.shards`) and the stochastic
search a minibatch's; the refresh and the test conditional that read them are :mod:`relaxep.posterior.fitc_rows`,
the rows recomputed a block at a time :mod:`relaxep.posterior.fitc_blocks`.  On numpy the rows are built in
blocks on threads (:mod:`relaxep._threads`); ``X`` of another array library (:mod:`relaxep._xp`) has the
kernel's closed-form view (``RBF`` or ``ConstantKernel * RBF``, :func:`device_cross_kernel`) evaluated on its
device, in blocks of :data:`DEVICE_ROWS` rows, after a guard on the device's memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from relaxep._threads import each_block
from relaxep._typing import Array
from relaxep._validation import NOT_PSD_ADVICE
from relaxep._xp import HOST, ArraySpace, check_device_memory, cholesky_lower, on_device_of
from relaxep.errors import KernelNotPositiveDefiniteError
from relaxep.posterior.rbf import as_scaled_rbf, rbf
from relaxep.posterior.row_algebra import CHUNK, chunks, row_squares, solve_rows

__all__ = [
    "DEVICE_ROWS",
    "KUU_JITTER",
    "cholesky_kuu",
    "conditional_variances",
    "device_cross_kernel",
    "inducing_factor",
    "matrices_prior",
    "sparse_prior_rows",
]

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
