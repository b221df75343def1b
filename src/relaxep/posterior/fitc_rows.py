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
:func:`blocked_pass` is the three in one process, over rows stored (:func:`posterior_pass`) or recomputed a block
at a time (:mod:`relaxep.posterior.fitc_blocks`).  The test conditional is :func:`predict_rows`; the prior's rows
(:math:`L_{uu}`, :math:`V^\top`, :math:`g`) come from :mod:`relaxep.posterior.fitc_prior`.

Every function that branches takes the :class:`~relaxep._xp.ArraySpace` its caller holds (first argument), as
the row algebra under them does (:mod:`relaxep.posterior.row_algebra`: numpy's BLAS-3 specialisations on the
host, the operations every library has on another library's device; its names are importable from here too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
from scipy import linalg

from relaxep._threads import each_block, fold_blocks
from relaxep._typing import Array
from relaxep._xp import ArraySpace, cholesky_flagged, solve_lower
from relaxep.errors import ImproperPosteriorError

# the prior's rows and the row algebra under this layer: their names importable from here too
from relaxep.posterior.fitc_prior import (
    DEVICE_ROWS,
    KUU_JITTER,
    cholesky_kuu,
    conditional_variances,
    device_cross_kernel,
    inducing_factor,
    matrices_prior,
    sparse_prior_rows,
)
from relaxep.posterior.row_algebra import (
    CHUNK,
    add_weighted_gram,
    chunks,
    log_det_of,
    multiply_rows,
    row_dots,
    row_squares,
    rows_per_block,
    solve_rows,
    symmetric_from_lower,
)

__all__ = [
    "CHUNK",
    "DEVICE_ROWS",
    "KUU_JITTER",
    "FITCRows",
    "add_natural_sums",
    "add_weighted_gram",
    "blocked_pass",
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


#: the rows :math:`V_c^\top` of a row block ``c``
RowsOf = Callable[[slice], Array]


def blocked_pass(
    space: ArraySpace, rows_of: RowsOf, g: Array, tau: Array, nu: Array, blocks: Sequence[slice], n_jobs: int | None
) -> tuple[Array, Array, Array, Array, float, Array, Array]:
    r"""A refresh from the sites over the rows ``rows_of(c)`` of the row blocks ``c``, stored or recomputed.

    The natural sums of the blocks (:func:`natural_sums`, summed in block order), :math:`L_B`, :math:`L_B^{-1}`,
    :math:`m` (:func:`factor_b`), then a second pass for the marginals (:func:`shard_marginals`), asking
    ``rows_of`` for each block's rows again (:mod:`relaxep.posterior.fitc_blocks` recomputes them there).
    numpy: the blocks on ``n_jobs`` threads; a device: one block after another, the temporaries one block's.

    Parameters
    ----------
    space : ArraySpace
        The rows' array library; ``g``, ``tau`` and ``nu`` are its arrays of length ``n``.
    rows_of : callable
        ``rows_of(c)`` is :math:`V_c^\top`, the ``len(c) x M`` rows of the block ``c``.
    g, tau, nu : array of shape (n,)
        The conditional variances and the sites :math:`(\tau, \nu)`.
    blocks : sequence of slice
        The row blocks covering ``range(n)`` in order, fixed by ``n``, never by the threads.
    n_jobs : int or None
        Threads for the blocks on numpy (:mod:`relaxep._threads`).

    Returns
    -------
    tuple
        ``(L_B, L_B^{-1}, m, b, log|I + (Q+G)T| = sum log d_i + log|B|, mu, A_ii)``.

    Raises
    ------
    ImproperPosteriorError
        Where the sites are not finite, some :math:`d_i \le 0` (checked before the rows are asked for),
        :math:`B` is not positive definite, or a marginal variance is not positive.
    """
    xp, numpy = space.xp, space.on_host
    if not (bool(xp.all(xp.isfinite(tau))) and bool(xp.all(xp.isfinite(nu)))):
        raise ImproperPosteriorError("site parameters are not finite")
    if not bool(xp.all(1.0 + g * tau > 0.0)):  # (natural_sums' d: every block's least d is then positive)
        raise ImproperPosteriorError("1 + g_i tau_i <= 0 for some site: the FITC posterior is improper")

    def sums(c: slice) -> tuple[Array, Array, float, float]:
        return natural_sums(space, rows_of(c), g[c], tau[c], nu[c])

    gram, b, log_d, _d_min = fold_blocks(sums, blocks, n_jobs if numpy else 1, add_natural_sums)
    chol, chol_inv, m = factor_b(space, gram, b)
    if numpy:
        mean, var = np.empty(g.shape[0]), np.empty(g.shape[0])

        def marginals(c: slice) -> None:
            mean[c], var[c] = shard_marginals(space, rows_of(c), g[c], tau[c], nu[c], chol_inv, m)

        each_block(marginals, blocks, n_jobs)
    else:
        parts = [shard_marginals(space, rows_of(c), g[c], tau[c], nu[c], chol_inv, m) for c in blocks]
        mean, var = (parts[0][k] if len(parts) == 1 else xp.concat([p[k] for p in parts], axis=0) for k in (0, 1))
    if not bool(xp.all(var > 0.0)):
        raise ImproperPosteriorError("a posterior marginal variance is not positive")
    return chol, chol_inv, m, b, log_d + log_det_of(space, chol), mean, var


def posterior_pass(
    space: ArraySpace, Vt: Array, g: Array, tau: Array, nu: Array, size: int, n_jobs: int | None
) -> tuple[Array, Array, Array, Array, float, Array, Array]:
    r""":func:`blocked_pass` over the stored rows :math:`V^\top`: numpy in row blocks of ``size`` on ``n_jobs``
    threads, summed in block order; another array library in one block, its own scheduling."""
    blocks = list(chunks(Vt.shape[0], size)) if space.on_host else [slice(None)]
    return blocked_pass(space, lambda c: Vt[c, :], g, tau, nu, blocks, n_jobs)


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
