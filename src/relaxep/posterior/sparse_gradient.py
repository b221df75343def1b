r"""The gradient of the sparse (FITC) EP evidence in the kernel hyperparameters and the inducing inputs.

At an EP fixed point the evidence is stationary in the sites, so its gradient is that of
:math:`\log Z_q = \tfrac12\nu^\top\mu - \tfrac12\log|I + KT|` at fixed sites, with
:math:`K = Q + G` the FITC prior (Naish-Guzman & Holden 2007; GPML's ``infEP`` with
``apxSparse`` computes the same, its ``dnlZ.xu``).  With :math:`\alpha = \nu - T\mu`,
:math:`R = (K + T^{-1})^{-1}` (:math:`R_{ii} = w_i - w_i^2 s_i` in the notation of
:mod:`relaxep.posterior.sparse`) and :math:`c_i = (\alpha_i^2 - R_{ii})/2`,

.. math::
    \frac{\partial\log Z_q}{\partial K} = \tfrac12(\alpha\alpha^\top - R),

and through :math:`K = K_{fu}K_{uu}^{-1}K_{uf} + \operatorname{diag}(k - q)` the chain rule gives,
with :math:`a = K_{uu}^{-1}K_{uf}\alpha = L_{uu}^{-\top}m`:

.. math::
    d\log Z_q = \sum_{mi} (G_{uf})_{mi}\, d(K_{uf})_{mi} + \sum_{mm'} (G_{uu})_{mm'}\, d(K_{uu})_{mm'}
    + \sum_i c_i\, dk_{ii},

.. math::
    G_{uf}^\top = \alpha a^\top - W V^\top B^{-1} L_{uu}^{-1} - 2\operatorname{diag}(c)V^\top L_{uu}^{-1},\qquad
    G_{uu} = -\tfrac12 aa^\top + \tfrac12 L_{uu}^{-\top}(I - B^{-1})L_{uu}^{-1}
    + L_{uu}^{-\top}V\operatorname{diag}(c)V^\top L_{uu}^{-1}.

One pass over row chunks (:math:`3nM^2` flops, no ``n x n`` array); the kernel enters only
through :math:`dK_{uf}`, :math:`dK_{uu}`, :math:`dk_{ii}`, in closed form for the squared
exponential (isotropic or ARD) times a constant, scikit-learn's default kernel.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from sklearn.gaussian_process.kernels import Kernel

from relaxep._threads import fold_blocks
from relaxep._typing import Array
from relaxep._xp import HOST, ArraySpace, on_device_of, to_numpy
from relaxep.posterior.fitc_prior import DEVICE_ROWS
from relaxep.posterior.rbf import ScaledRBF, as_scaled_rbf, rbf
from relaxep.posterior.row_algebra import add_weighted_gram, chunks, symmetric_from_lower
from relaxep.posterior.sparse_posterior import SparsePosterior

__all__ = [
    "cross_terms",
    "finish_gradient",
    "gradient_broadcast",
    "in_theta_order",
    "inducing_terms",
    "shard_gradient",
    "sparse_evidence_gradient",
]


def _contract(
    space: ArraySpace, kern: ScaledRBF, gk: Array, A: Array, B: Array, row_sum: Array, col_sum: Array, gk_b: Array
) -> tuple[Array, Array]:
    r""":math:`\sum_{ab} GK_{ab}(A_{aj} - B_{bj})^2/\ell_j^2` per feature :math:`j`, and
    :math:`\sum_a GK_{ab}(A_{aj} - B_{bj})/\ell_j^2` per row :math:`b` of ``B`` (``gk_b`` is :math:`GK^\top A`)."""
    ell2 = on_device_of(kern.length_scale**2, gk)
    cross = np.einsum("bj,bj->j", B, gk_b) if space.on_host else space.xp.sum(B * gk_b, axis=0)
    sq = (row_sum @ (A * A) - 2.0 * cross + col_sum @ (B * B)) / ell2
    return sq, (gk_b - col_sum[:, None] * B) / ell2


def gradient_broadcast(L_uu: Array, chol_b: Array, m: Array) -> dict[str, Array]:
    r"""The :math:`M \times M` pieces every row chunk needs: :math:`L_B^{-1}`, :math:`[B^{-1}L_{uu}^{-1}, L_{uu}^{-1}]`,
    :math:`a = L_{uu}^{-\top}m`, :math:`m`."""
    luu_inv = linalg.lapack.dtrtri(L_uu, lower=1)[0]
    lb_inv = linalg.lapack.dtrtri(chol_b, lower=1)[0]
    b_inv = lb_inv.T @ lb_inv
    return {
        "lb_inv": lb_inv,
        "both": np.hstack([b_inv @ luu_inv, luu_inv]),
        "a": linalg.solve_triangular(L_uu, m, lower=True, trans=1),
        "m": m,
    }


def shard_gradient(
    kern: ScaledRBF,
    rows: Array,
    g: Array,
    tau: Array,
    nu: Array,
    X: Array,
    Z: Array,
    pieces: dict[str, Array],
    marginal_var: Array | None = None,
    collapsed: bool = False,
) -> tuple[float, Array, Array, Array]:
    r"""One block of sites' share: the constant's and length scales' terms from :math:`K_{uf}` and
    :math:`k_{ii}`, the :math:`Z` gradient from :math:`K_{uf}`, and :math:`V\operatorname{diag}(c)V^\top` (lower).

    ``collapsed``: the share of Titsias' bound on a ``"dtc"`` prior (:func:`collapsed_bound_gradient`), whose
    :math:`c_i = \partial E/\partial g_i` is the trace term's :math:`-\tau_i/2`."""
    M = rows.shape[1]
    d = 1.0 + g * tau
    w = tau / d
    alpha = nu / d - w * (rows @ pieces["m"])
    if marginal_var is None:
        r = rows @ pieces["lb_inv"].T
        s = np.einsum("ij,ij->i", r, r)
    else:  # s_i = ||L_B^-1 v_i||^2 from A_ii = g_i/d_i + s_i/d_i^2, saving a pass
        s = (marginal_var - g / d) * d**2
    cc = -0.5 * tau if collapsed else 0.5 * (alpha**2 - (w - w**2 * s))
    proj = rows @ pieces["both"]
    g_uf = np.outer(alpha, pieces["a"]) - w[:, None] * proj[:, :M] - 2.0 * cc[:, None] * proj[:, M:]
    vcv = add_weighted_gram(HOST, np.zeros((M, M), order="F"), rows, cc)
    return (*cross_terms(HOST, kern, X, Z, g_uf, cc, rbf(kern, X, Z, HOST)), vcv)


def cross_terms(
    space: ArraySpace, kern: ScaledRBF, X: Array, Z: Array, g_fu: Array, c: Array, K_fu: Array
) -> tuple[float, Array, Array]:
    r"""The constant's, the length scales' and ``Z``'s terms from :math:`\partial E/\partial K_{fu}` and
    :math:`\partial E/\partial k_{ii}` (``k_ii = c``: the latent noise does not move), computed in ``space``
    (``X``'s and the matrices'; ``Z`` is moved there); the terms come back on the host."""
    gk = g_fu * K_fu
    xp = space.xp
    Z = space.put(Z)  # (another array library, relaxep._xp: Z there too)
    sq, dz = _contract(space, kern, gk, X, Z, xp.sum(gk, axis=1), xp.sum(gk, axis=0), gk.T @ X)
    return float(xp.sum(gk) + xp.sum(c) * kern.constant), to_numpy(sq), to_numpy(dz)


def inducing_terms(kern: ScaledRBF, Z: Array, g_uu: Array, K_uu: Array) -> tuple[float, Array, Array]:
    r"""The same from :math:`\partial E/\partial K_{uu}` (symmetric; the jitter scales with the constant too;
    ``K_uu`` depends on :math:`z_m` through row and column :math:`m`; on the host)."""
    gk = g_uu * rbf(kern, Z, Z, HOST)
    col = gk.sum(0)
    sq, dz = _contract(HOST, kern, gk, Z, Z, col, col, gk.T @ Z)
    return float(np.sum(g_uu * K_uu)), sq, 2.0 * dz


def in_theta_order(kern: ScaledRBF, g_const: float, g_ls: Array) -> Array:
    """The constant's and the length scales' gradients in the order of the kernel's ``theta``."""
    ls_iter = iter([float(np.sum(g_ls))] if kern.isotropic else list(g_ls))
    return np.asarray([g_const if entry == "constant" else next(ls_iter) for entry in kern.entries], dtype=float)


def finish_gradient(
    kern: ScaledRBF,
    parts: list[tuple[float, Array, Array, Array]],
    Z: Array,
    K_uu: Array,
    L_uu: Array,
    pieces: dict[str, Array],
) -> tuple[Array, Array]:
    """Sum the shards' shares (in order) and add the :math:`K_{uu}` terms; ``(grad_theta, grad_Z)``."""
    M = Z.shape[0]
    g_const = sum(p[0] for p in parts)
    g_ls = sum(p[1] for p in parts)
    g_z = sum(p[2] for p in parts)
    vcv = symmetric_from_lower(HOST, sum(p[3] for p in parts))
    luu_inv = pieces["both"][:, M:]
    b_inv = pieces["lb_inv"].T @ pieces["lb_inv"]
    a = pieces["a"]
    g_uu = -0.5 * np.outer(a, a) + luu_inv.T @ (0.5 * (np.eye(M) - b_inv) + vcv) @ luu_inv
    g_uu = 0.5 * (g_uu + g_uu.T)
    u_const, u_ls, u_z = inducing_terms(kern, Z, g_uu, K_uu)
    return in_theta_order(kern, g_const + u_const, g_ls + u_ls), g_z + u_z


def sparse_evidence_gradient(
    post: SparsePosterior, kernel: Kernel | None = None, collapsed: bool = False
) -> tuple[Array, Array]:
    r"""Gradient of :math:`\log Z_q` at ``post``'s sites in ``kernel.theta`` and in the inducing inputs ``Z``.

    At an EP fixed point this is the gradient of the EP log evidence (module docstring;
    checked against finite differences of re-converged EP in the tests).

    Parameters
    ----------
    post : SparsePosterior
        Built from a :class:`~relaxep.posterior.SparsePrior` with ``X``, ``Z`` and a kernel.
    kernel : sklearn Kernel, optional
        The prior's kernel (default): ``RBF`` or ``ConstantKernel * RBF``.
    collapsed : bool, default False
        The gradient of Titsias' (2009) collapsed bound instead, on a ``conditional="dtc"`` prior with
        Gaussian sites :math:`\tau_i = 1/\sigma_i^2`, :math:`\nu_i = y_i/\sigma_i^2`:
        :math:`F = \log N(y | 0, Q + \Sigma) - \tfrac12\sum_i \tau_i(k_{ii} - Q_{ii})`.  Its first term is
        :math:`\log Z_q` of the DTC prior plus terms free of the kernel, and the second enters as a
        :math:`g_i = k_{ii} - Q_{ii}` of weight :math:`c_i = -\tau_i/2` in the chain rule above.

    Returns
    -------
    grad_theta : ndarray of shape (len(kernel.theta),)
        In scikit-learn's log-parameters ``kernel.theta``.
    grad_Z : ndarray of shape (M, d)
    """
    if not isinstance(post, SparsePosterior):
        raise TypeError(f"post must be a SparsePosterior, got {type(post).__name__}")
    p = post.prior
    if p.kernel is None:
        raise ValueError("post: its SparsePrior was built from matrices; the gradient needs X, Z and the kernel")
    if collapsed != (p.conditional == "dtc"):
        raise ValueError(f"collapsed={collapsed} needs a {'dtc' if collapsed else 'fitc'} prior, got {p.conditional!r}")
    kern = as_scaled_rbf(p.kernel if kernel is None else kernel, p.X.shape[1])
    if not p.space.on_host:
        return _device_gradient(post, kern, collapsed)
    tau, nu = post.site_precision, post.site_mean_precision
    pieces = gradient_broadcast(p.L_uu, post.chol_b, post.inducing_mean)
    var = post.marginal_var

    def part(c: slice) -> tuple[float, Array, Array, Array]:
        rows, g = p.row_block(c)  # (a view of V^T, or its rows recomputed: rows="recomputed")
        return shard_gradient(kern, rows, g, tau[c], nu[c], p.X[c], p.Z, pieces, var[c], collapsed)

    total = fold_blocks(part, list(chunks(p.n, p.chunk_size)), p.n_jobs, _add_parts)
    return finish_gradient(kern, [total], p.Z, p.K_uu, p.L_uu, pieces)


def _device_gradient(post: SparsePosterior, kern: ScaledRBF, collapsed: bool) -> tuple[Array, Array]:
    """:func:`sparse_evidence_gradient` where the prior's rows live on another array library's device: the row
    blocks' shares (:func:`shard_gradient`'s formulas) computed there, in blocks of ``DEVICE_ROWS`` rows, and the
    :math:`M \times M` completion (:func:`finish_gradient`) on the host."""
    p, space = post.prior, post.prior.space
    L_uu, K_uu = to_numpy(p.L_uu), to_numpy(p.K_uu)
    pieces = gradient_broadcast(L_uu, to_numpy(post.chol_b), to_numpy(post.inducing_mean))
    on = {key: space.put(value) for key, value in pieces.items()}
    M = L_uu.shape[0]
    tau, nu, var = (space.put(a) for a in (post.site_precision, post.site_mean_precision, post.marginal_var))
    Z = space.put(p.Z)
    total = None
    for c in chunks(p.n, DEVICE_ROWS):
        rows, g = p.row_block(c)
        d = 1.0 + g * tau[c]
        w = tau[c] / d
        alpha = nu[c] / d - w * (rows @ on["m"])
        s = (var[c] - g / d) * d**2
        cc = -0.5 * tau[c] if collapsed else 0.5 * (alpha**2 - (w - w**2 * s))
        proj = rows @ on["both"]
        g_uf = alpha[:, None] * on["a"][None, :] - w[:, None] * proj[:, :M] - 2.0 * cc[:, None] * proj[:, M:]
        X = p.X[c, :]
        g_const, sq, dz = cross_terms(space, kern, X, Z, g_uf, cc, rbf(kern, X, Z, space))
        part = (g_const, sq, dz, to_numpy((rows * cc[:, None]).T @ rows))
        total = part if total is None else _add_parts(total, part)
        del rows, proj, g_uf
    return finish_gradient(kern, [total], p.Z, K_uu, L_uu, pieces)


def _add_parts(a: tuple, b: tuple) -> tuple:
    """Two blocks' :func:`shard_gradient` shares as one."""
    return tuple(x + y for x, y in zip(a, b, strict=True))
