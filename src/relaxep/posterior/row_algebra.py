r"""Linear algebra on row blocks in any array library: the operations under the FITC layer.

A FITC computation (:mod:`relaxep.posterior.fitc_rows`), the sparse gradient
(:mod:`relaxep.posterior.sparse_gradient`), the stochastic search and the fitted inducing model all work on the
rows :math:`Y` of an ``n x M`` matrix, a block of rows at a time: :math:`YL^{-\top}`, :math:`YL^\top`, the row
norms :math:`\|y_i\|^2`, the weighted Gram :math:`C + Y^\top\operatorname{diag}(w)Y`.  Each function takes the
:class:`~relaxep._xp.ArraySpace` its caller holds (first argument): numpy on the host keeps its BLAS-3
specialisations (``trsm``, ``trmm``, ``syrk``: :mod:`relaxep._blas`, the GIL released, so that row blocks run on
threads: :mod:`relaxep._threads`); another array library computes the same algebra in the operations every library
has, one block on its device.  The blocks are :func:`chunks` of :func:`rows_per_block` rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from relaxep._blas import rows_solve_lower_t, rows_times_lower_t, syrk_rows
from relaxep._typing import Array
from relaxep._xp import ArraySpace, solve_lower

__all__ = [
    "CHUNK",
    "add_weighted_gram",
    "chunks",
    "log_det_of",
    "multiply_rows",
    "row_dots",
    "row_squares",
    "rows_per_block",
    "solve_rows",
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
