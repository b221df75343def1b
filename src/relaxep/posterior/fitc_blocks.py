r"""The FITC prior's rows recomputed in row blocks: a refresh in :math:`O(n + M^2)` memory plus one block.

:class:`~relaxep.posterior.SparsePrior` holds :math:`V^\top = K_{Xu}L_{uu}^{-\top}` (``n x M``) by default
(``rows="stored"``).  At :math:`n = 10^8`, :math:`M = 200` that is 160 GB, more than one GPU holds; with
``rows="recomputed"`` the prior holds :math:`X`, :math:`Z`, :math:`L_{uu}`, :math:`k_{ii}` and :math:`g` only,
and every pass over the rows rebuilds them a block :math:`c` at a time,

.. math::
    V_c^\top = k(X_c, Z)\,L_{uu}^{-\top},

by the same kernel evaluation and triangular solve as :func:`~relaxep.posterior.fitc_prior.sparse_prior_rows`
on numpy (blocks of ``chunk_size`` rows), so a block's rows are the stored rows there; on a device (blocks of
:data:`~relaxep.posterior.fitc_prior.DEVICE_ROWS`) by one product with :math:`L_{uu}^{-\top}` (:func:`row_factors`),
the stored rows to about 2e-14.  A refresh (:func:`~relaxep.posterior.fitc_rows.blocked_pass` over
:func:`kernel_rows`) is then two passes, each computing the kernel again: the natural sums

.. math::
    d_i = 1 + g_i\tau_i,\qquad B = I + \textstyle\sum_c \sum_{i \in c} \frac{\tau_i}{d_i} v_iv_i^\top,\qquad
    b = \textstyle\sum_c \sum_{i \in c} \frac{\nu_i}{d_i} v_i,

one Cholesky :math:`B = L_BL_B^\top`, :math:`m = B^{-1}b`, and the marginals

.. math::
    \mu_i = \frac{v_i^\top m + g_i\nu_i}{d_i},\qquad A_{ii} = \frac{g_i}{d_i} + \frac{\|L_B^{-1}v_i\|^2}{d_i^2},
    \qquad \log|I + (Q+G)T| = \textstyle\sum_i \log d_i + \log|B|:

:func:`~relaxep.posterior.fitc_rows.posterior_pass`'s answer by the same function, with twice the kernel's
work.  ``rows="auto"`` (:func:`choose_rows`) stores the rows where the memory guards let it and recomputes them
otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from relaxep._threads import each_block, n_threads
from relaxep._typing import Array
from relaxep._xp import ArraySpace, check_device_memory, solve_lower
from relaxep.errors import MemoryLimitError
from relaxep.posterior import fitc_prior
from relaxep.posterior.fitc_prior import conditional_variances, device_cross_kernel
from relaxep.posterior.row_algebra import chunks, solve_rows

__all__ = [
    "ROW_MODES",
    "choose_rows",
    "kernel_rows",
    "recomputed_bytes",
    "recomputed_prior_rows",
    "row_blocks",
    "stored_bytes",
]

#: ``SparsePrior(rows=...)``: store :math:`V^\top`, recompute it block by block, or choose by memory
ROW_MODES = ("auto", "stored", "recomputed")


def row_blocks(space: ArraySpace, n: int, size: int) -> list[slice]:
    """The row blocks of a pass over ``n`` recomputed rows: ``size`` rows on numpy (the prior's ``chunk_size``,
    the blocks :func:`~relaxep.posterior.fitc_prior.sparse_prior_rows` builds), else
    :data:`~relaxep.posterior.fitc_prior.DEVICE_ROWS` (those of its device path)."""
    return list(chunks(n, size if space.on_host else fitc_prior.DEVICE_ROWS))


def row_factors(space: ArraySpace, Z: Array, L_uu: Array) -> tuple[Array, Array]:
    r"""What a device's recomputed rows reuse every block: ``Z`` on the device and :math:`L_{uu}^{-\top}` (one
    triangular solve of :math:`I_M`), so that a block is one product :math:`K_{cu}L_{uu}^{-\top}` instead of a
    triangular solve: on one H200 at 2^18 x 200 rows, 0.54 ms against 3.3 ms, the rows agreeing to 2e-14
    relative (``benchmarks/results/gpu.md``)."""
    eye = space.xp.eye(L_uu.shape[0], dtype=L_uu.dtype, device=space.device)
    return space.put(np.asarray(Z, dtype=float)), solve_lower(space.xp, L_uu, eye).T


def kernel_rows(
    space: ArraySpace, kernel: Any, X: Array, Z: Array, L_uu: Array, c: slice, factors: tuple | None = None
) -> Array:
    r""":math:`V_c^\top = k(X_c, Z)L_{uu}^{-\top}` for the rows ``c`` of ``X``, computed as
    :func:`~relaxep.posterior.fitc_prior.sparse_prior_rows` computes them (``L_uu`` in ``X``'s library; a device:
    the kernel's closed form, :func:`~relaxep.posterior.fitc_prior.device_cross_kernel`), or on a device with
    ``factors`` (:func:`row_factors`) by one product with :math:`L_{uu}^{-\top}`."""
    if not space.on_host and factors is not None:
        return device_cross_kernel(space, kernel, X[c, :], factors[0])[0] @ factors[1]
    if not space.on_host:
        return solve_rows(space, L_uu, device_cross_kernel(space, kernel, X[c, :], Z)[0])
    return solve_rows(space, L_uu, np.asarray(kernel(X[c], Z), dtype=float))


def recomputed_prior_rows(
    space: ArraySpace, kernel: Any, X: Array, Z: Array, L_uu: Array, latent_noise: float, size: int, n_jobs: int | None
) -> tuple[Array, Array]:
    r""":math:`k_{ii}` + ``latent_noise`` and :math:`g_i = \max(k_{ii} - \|v_i\|^2, 0)` at ``X`` from the row blocks
    of :func:`row_blocks` (numpy: on ``n_jobs`` threads), :math:`V^\top` never held whole: one pass, memory
    :math:`O(n)` and a block."""
    n = X.shape[0]
    blocks = row_blocks(space, n, size)
    if space.on_host:
        k_diag, g = np.asarray(kernel.diag(X), dtype=float) + latent_noise, np.empty(n)

        def block(c: slice) -> None:
            g[c] = conditional_variances(space, k_diag[c], kernel_rows(space, kernel, X, Z, L_uu, c))

        each_block(block, blocks, n_jobs)
        return k_diag, g
    diag, gs = [], []
    for c in blocks:
        cross, k_cc = device_cross_kernel(space, kernel, X[c, :], Z)
        diag.append(k_cc + latent_noise)
        gs.append(conditional_variances(space, diag[-1], solve_rows(space, L_uu, cross)))
    k_diag, g = (parts[0] if len(parts) == 1 else space.xp.concat(parts, axis=0) for parts in (diag, gs))
    return k_diag, g


# ------------------------------------------------------------------ the memory each mode needs
def _block_and_threads(space: ArraySpace, n: int, size: int, n_jobs: int | None) -> float:
    """Rows of the blocks in flight at once: one device block, or a block per thread on numpy."""
    if not space.on_host:
        return float(min(n, fitc_prior.DEVICE_ROWS))
    return float(min(n, size) * min(n_threads(n_jobs), -(-n // size)))


def stored_bytes(space: ArraySpace, n: int, m: int, size: int, n_jobs: int | None) -> float:
    r"""Bytes of a prior with its rows stored.  A device: :math:`V^\top`, a refresh's two ``n x M`` temporaries
    and a block of :math:`K_{Xu}` (the guard of ``sparse_prior_rows``' device path); numpy: :math:`V^\top`, ten
    length-``n`` vectors and three ``block x M`` temporaries a thread."""
    if not space.on_host:
        return 8.0 * m * (3.0 * n + 2.0 * min(n, fitc_prior.DEVICE_ROWS))
    return 8.0 * (n * m + 10.0 * n + 3.0 * m * _block_and_threads(space, n, size, n_jobs) + 6.0 * m * m)


def recomputed_bytes(space: ArraySpace, n: int, m: int, size: int, n_jobs: int | None) -> float:
    r"""Bytes of a prior with its rows recomputed: ten length-``n`` vectors (:math:`k_{ii}`, :math:`g`, the sites,
    :math:`d`, the marginals and their blocks), five ``block x M`` temporaries per block in flight (the kernel's,
    the rows, a refresh's) and a few :math:`M \times M` factors."""
    return 8.0 * (10.0 * n + 5.0 * m * _block_and_threads(space, n, size, n_jobs) + 6.0 * m * m)


def choose_rows(space: ArraySpace, X: Array, m: int, rows: str, size: int, n_jobs: int | None) -> str:
    """``"stored"`` or ``"recomputed"`` for ``SparsePrior(rows=rows)`` on ``X`` with ``m`` inducing inputs.

    ``"stored"`` is taken as asked (its device guard is ``sparse_prior_rows``'); ``"auto"`` is ``"stored"`` where
    :func:`~relaxep._xp.check_device_memory` (on numpy :func:`relaxep._memory.check_memory`) passes
    :func:`stored_bytes`, else ``"recomputed"``; ``"recomputed"`` (asked, or chosen) must pass
    :func:`recomputed_bytes`, else :class:`~relaxep.MemoryLimitError` naming the mode and the remedy.
    """
    if rows not in ROW_MODES:
        raise ValueError(f"rows must be one of {ROW_MODES}, got {rows!r}")
    if rows == "stored":
        return rows
    n = X.shape[0]
    what = f"a sparse GP on n = {n} rows with M = {m} inducing inputs"
    if rows == "auto":
        try:
            check_device_memory(X, stored_bytes(space, n, m, size, n_jobs), what, "")
            return "stored"
        except MemoryLimitError:
            pass
    block = int(min(n, size if space.on_host else fitc_prior.DEVICE_ROWS))
    check_device_memory(
        X,
        recomputed_bytes(space, n, m, size, n_jobs),
        f'{what}, its rows recomputed (rows="recomputed", checked after rows="stored" did not fit: V^T is '
        f"never held, memory O(n + M^2) and blocks of {block} rows)"
        if rows == "auto"
        else f'{what}, its rows recomputed (rows="recomputed": memory O(n + M^2) and blocks of {block} rows)',
        "use fewer inducing inputs (M) or fewer rows, shard the rows over Dask workers (relaxep.dask), or "
        + ("a smaller chunk_size" if space.on_host else "fit on the CPU with numpy arrays"),
    )
    return "recomputed"
