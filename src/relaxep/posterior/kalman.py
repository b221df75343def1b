r"""The Kalman filter and Rauch-Tung-Striebel smoother over Gaussian sites, in blocks that numpy runs fast.

The prior is the state-space chain of :mod:`relaxep.posterior.state_space`: :math:`x_0 \sim N(0, P_\infty)`,
:math:`x_k = A_k x_{k-1} + q_k`, :math:`q_k \sim N(0, Q_k)`; held here as one step per point, the first with
:math:`A_0 = 0`, :math:`Q_0 = P_\infty`.  Site :math:`k` is the Gaussian factor
:math:`\exp(-\tau_k f_k^2/2 + \nu_k f_k)` of :math:`f_k = H x_k`, written with its natural parameters so that a
flat site (:math:`\tau = 0`) and a negative one need no special case.  The filter's update at point :math:`k`,
with predictive :math:`N(m^-_k, P^-_k)`, :math:`h_k = H m^-_k`, :math:`s_k = H P^-_k H^\top`,
:math:`c_k = P^-_k H^\top`, :math:`d_k = 1 + \tau_k s_k`, is

.. math::
    m^+_k = m^-_k + c_k\,(\nu_k - \tau_k h_k)/d_k,\qquad P^+_k = P^-_k - c_k c_k^\top\,\tau_k/d_k,

and the smoother's :math:`G_k = P^+_k A_{k+1}^\top (P^-_{k+1})^{-1}`, :math:`m^s_k = m^+_k + G_k(m^s_{k+1} -
m^-_{k+1})`, :math:`P^s_k = P^+_k + G_k (P^s_{k+1} - P^-_{k+1}) G_k^\top`.  By the chain rule of Gaussian
conditioning, with :math:`K` the prior covariance of :math:`f` and :math:`T = \operatorname{diag}(\tau)`,

.. math::
    \log|I + KT| = \sum_k \log d_k,\qquad
    \nu^\top\mu = \sum_k \frac{\nu_k^2 s_k + 2\nu_k h_k - \tau_k h_k^2}{d_k},

the two terms of :math:`\log Z_q` (:mod:`relaxep.posterior.base`), from the filter alone.

**Blocks.**  A Python loop per point is slow in numpy, so the points are cut into :math:`B` blocks of
:math:`L \approx \sqrt n` and every pass runs three loops, each over at most :math:`\max(B, L)` iterations of
whole-array operations across the blocks.  For the filter (Särkkä & García-Fernández 2021, "Temporal
parallelization of Bayesian smoothers"): (1) each block's conditional of its last state given the state before
it and its sites, the associative element :math:`(A, b, C, \eta, J)`, folded point by point across all blocks at
once (a point's element has a rank-one :math:`J`, so the fold needs no inverse); (2) the filtered state at each
block's start, from block to block; (3) the ordinary filter inside every block from its start, across the blocks
at once.  The smoother likewise, backwards, with its affine elements :math:`(E, g, L)`.  Work
:math:`O(n m^3)`, memory :math:`O(n m^2)`, about :math:`3\sqrt n` loop iterations per pass.

Matrices are "structure of arrays", shape ``(m, m, ...)`` with the points last (one small matrix product is then
one vectorised ``einsum``).  Complex arrays flow through (the evidence's gradient by the complex step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from relaxep._typing import Array
from relaxep.errors import ImproperPosteriorError

__all__ = ["FilterPass", "SmootherPass", "block_length", "kalman_filter", "kalman_smoother"]


def _mv(a: Array, x: Array) -> Array:
    return np.einsum("...ijb,...jb->...ib", a, x)


def _mm(a: Array, b: Array) -> Array:
    return np.einsum("...ijb,...jkb->...ikb", a, b)


def _mmt(a: Array, b: Array) -> Array:
    """:math:`a b^\\top`."""
    return np.einsum("...ijb,...kjb->...ikb", a, b)


def _sym(p: Array) -> Array:
    return 0.5 * (p + np.swapaxes(p, -3, -2))


def block_length(n: int) -> int:
    """Points per block: about :math:`\\sqrt n` (at least 8), so that both loops are short."""
    return max(8, int(np.ceil(np.sqrt(n))))


@dataclass(frozen=True)
class FilterPass:
    r"""The filter's predictive of each :math:`f_k` (``h``, ``s``) and :math:`\log|I + KT|`, :math:`\nu^\top\mu`."""

    h: Array
    s: Array
    log_det: Array
    quad: Array


@dataclass(frozen=True)
class SmootherPass:
    """The posterior marginals of each :math:`f_k` and the filter's terms."""

    mean: Array
    var: Array
    log_det: float
    quad: float


def _blocks(a: Array, q: Array, tau: Array, nu: Array, length: int | None) -> tuple[Any, ...]:
    """The steps padded to ``B * L`` (padding: :math:`A = I`, :math:`Q = 0`, flat sites) and laid out point in
    block first, ``(L, m, m, B)`` and ``(L, B)``, so that each loop iteration reads contiguous arrays."""
    m, n = a.shape[0], a.shape[2]
    L = block_length(n) if length is None else int(length)
    B = -(-n // L)
    pad = B * L - n
    if pad:
        eye = np.broadcast_to(np.eye(m)[:, :, None], (m, m, pad))
        a = np.concatenate([a, eye], axis=2)
        q = np.concatenate([q, np.zeros((m, m, pad), dtype=q.dtype)], axis=2)
        tau = np.concatenate([tau, np.zeros(pad, dtype=tau.dtype)])
        nu = np.concatenate([nu, np.zeros(pad, dtype=nu.dtype)])

    def lay(x: Array) -> Array:
        return np.ascontiguousarray(np.moveaxis(x.reshape(*x.shape[:-1], B, L), -1, 0))

    return lay(a), lay(q), lay(tau), lay(nu), B, L


def _flat(x: Array, n: int) -> Array:
    """``(L, ..., B)`` back to the points' order, ``(..., n)``."""
    return np.moveaxis(x, 0, -1).reshape(*x.shape[1:-1], -1)[..., :n]


def _block_starts(a: Array, q: Array, h: Array, tau: Array, nu: Array, B: int, L: int) -> tuple[Array, Array]:
    """Loops (1) and (2) of the filter: the filtered state before each block, ``(m, B)`` and ``(m, m, B)``."""
    m = a.shape[1]
    dtype = np.result_type(a, q, tau, nu)
    for j in range(L):
        at, qt, t, v = a[j], q[j], tau[j], nu[j]
        c = np.einsum("ijb,j->ib", qt, h)
        d = 1.0 + t * (h @ c)
        w = t / d
        row = np.einsum("i,ijb->jb", h, at)  # the rank-one J's vector, A^T H^T
        Ae = at - c[:, None, :] * row[None, :, :] * w  # the point's element: A, b, C, eta, J
        Ce = qt - c[:, None, :] * c[None, :, :] * w
        if j == 0:  # the block's first point
            A, b, C = Ae, c * (v / d), Ce
            eta = row * (v / d)
            J = row[:, None, :] * row[None, :, :] * w
            continue
        u = np.einsum("ijb,jb->ib", C, row)
        ua = np.einsum("ib,ib->b", row, u)
        g = w / (1.0 + w * ua)
        shrink = 1.0 / (1.0 + w * ua)
        rA = np.einsum("ib,ijb->jb", row, A)  # (A_i^T a)
        vb = b + u * (v / d)
        new_A = _mm(Ae, A - u[:, None, :] * rA[None, :, :] * g)
        new_b = _mv(Ae, vb - u * (g * np.einsum("ib,ib->b", row, vb))) + c * (v / d)
        new_C = _mmt(_mm(Ae, C - u[:, None, :] * u[None, :, :] * g), Ae) + Ce
        r = v / d - w * np.einsum("ib,ib->b", row, b)
        eta = eta + rA * (r * shrink)
        J = J + rA[:, None, :] * rA[None, :, :] * (w * shrink)
        A, b, C = new_A, new_b, _sym(new_C)
    starts_m = np.zeros((m, B), dtype=dtype)
    starts_p = np.zeros((m, m, B), dtype=dtype)
    mean, cov = np.zeros(m, dtype=dtype), np.zeros((m, m), dtype=dtype)
    eye = np.eye(m)
    for blk in range(1, B):  # block 0's first step forgets any start (A_0 = 0)
        prev = blk - 1
        Ab, bb, Cb, eb, Jb = A[..., prev], b[:, prev], C[..., prev], eta[:, prev], J[..., prev]
        if prev == 0:
            mean, cov = bb, Cb
        else:
            M = np.linalg.solve(eye + cov @ Jb, np.column_stack([mean + cov @ eb, cov]))
            mean = Ab @ M[:, 0] + bb
            cov = Ab @ M[:, 1:] @ Ab.T + Cb
            cov = 0.5 * (cov + cov.T)
        starts_m[:, blk], starts_p[..., blk] = mean, cov
    return starts_m, starts_p


def _terms(h_pred: Array, s: Array, tau: Array, nu: Array) -> tuple[Array, Array]:
    r"""The filter's terms; :math:`\log|I + KT|` from :math:`\sum\log|d_k|`, refused where its sign is negative (a
    negative site may make some :math:`d_k < 0` while the whole posterior is proper: the recursions are identities
    wherever :math:`d_k \ne 0`; the smoother's variances are the final test)."""
    d = 1.0 + tau * s
    real = np.real(d)
    if np.any(~np.isfinite(d)) or np.any(real == 0.0) or np.count_nonzero(real < 0.0) % 2:
        raise ImproperPosteriorError("the sites make the state-space posterior improper (det(I + K T) <= 0)")
    quad = np.sum((nu**2 * s + 2.0 * nu * h_pred - tau * h_pred**2) / d)
    return np.sum(np.log(d * np.sign(real))), quad


def kalman_filter(
    a: Array, q: Array, h: Array, tau: Array, nu: Array, length: int | None = None, keep: bool = False
) -> FilterPass | tuple[FilterPass, tuple[Array, ...]]:
    r"""The filter over the sites ``(tau, nu)`` (module docstring): ``a``, ``q`` of shape ``(m, m, n)``,
    ``h`` of shape ``(m,)``.  ``keep``: also the predicted and filtered states, padded to the blocks, for the
    smoother."""
    n = tau.shape[0]
    ab, qb, tb, vb, B, L = _blocks(a, q, tau, nu, length)
    m = a.shape[0]
    mean, cov = _block_starts(ab, qb, h, tb, vb, B, L)
    dtype = mean.dtype
    hs, ss = np.empty((L, B), dtype=dtype), np.empty((L, B), dtype=dtype)
    if keep:
        mp_all, pp_all = np.empty((L, m, B), dtype=dtype), np.empty((L, m, m, B), dtype=dtype)
        mf_all, pf_all = np.empty((L, m, B), dtype=dtype), np.empty((L, m, m, B), dtype=dtype)
    for j in range(L):
        at, t, v = ab[j], tb[j], vb[j]
        mp = _mv(at, mean)
        pp = _mmt(_mm(at, cov), at) + qb[j]
        c = np.einsum("ijb,j->ib", pp, h)
        hm, s = h @ mp, h @ c
        d = 1.0 + t * s
        mean = mp + c * ((v - t * hm) / d)
        cov = _sym(pp - c[:, None, :] * c[None, :, :] * (t / d))
        hs[j], ss[j] = hm, s
        if keep:
            mp_all[j], pp_all[j], mf_all[j], pf_all[j] = mp, pp, mean, cov
    h_pred, s = _flat(hs, n), _flat(ss, n)
    log_det, quad = _terms(h_pred, s, tau, nu)
    out = FilterPass(h_pred, s, log_det, quad)
    if keep:
        return out, (ab, mp_all, pp_all, mf_all, pf_all, B, L)
    return out


def _inverse(p: Array) -> Array:
    """Inverses of symmetric matrices ``(..., m, m, B)``: closed forms for ``m <= 2``, else batched LAPACK."""
    m = p.shape[-2]
    if m == 1:
        return 1.0 / p
    if m == 2:
        a, b, d = p[..., 0, 0, :], p[..., 0, 1, :], p[..., 1, 1, :]
        det = a * d - b * b
        return np.stack([np.stack([d, -b], -2), np.stack([-b, a], -2)], -3) / det[..., None, None, :]
    return np.moveaxis(np.linalg.inv(np.moveaxis(p, -1, -3)), -3, -1)


def kalman_smoother(a: Array, q: Array, h: Array, tau: Array, nu: Array, length: int | None = None) -> SmootherPass:
    r"""The posterior marginals of :math:`f_k = H x_k` under the sites ``(tau, nu)``, and :math:`\log|I + KT|`,
    :math:`\nu^\top\mu` (module docstring).

    Raises
    ------
    ImproperPosteriorError
        Where the sites make the posterior improper.
    """
    n = tau.shape[0]
    filt, (ab, mp, pp, mf, pf, B, L) = kalman_filter(a, q, h, tau, nu, length, keep=True)  # type: ignore[misc]
    m = a.shape[0]
    # per point k: the map from the smoothed state k+1 to k, G_k, g_k, L_k (the last point's: G = 0); point k's
    # next is (l + 1, b), or (0, b + 1) at a block's end
    a_next, mp_next, pp_next = _next(ab), _next(mp), _next(pp)
    G = _mm(_mmt(pf, a_next), _inverse(pp_next))
    G[-1, ..., -1] = 0.0
    g = mf - _mv(G, mp_next)
    Lk = _sym(pf - _mmt(_mm(G, pp_next), G))
    # (1) each block's composite map, backwards across all blocks at once
    E, gg, LL = G[L - 1], g[L - 1], Lk[L - 1]
    for j in range(L - 2, -1, -1):
        Gl = G[j]
        E, gg, LL = _mm(Gl, E), _mv(Gl, gg) + g[j], _mmt(_mm(Gl, LL), Gl) + Lk[j]
    # (2) the smoothed state after each block (at its next block's first point), from the last block back
    next_m = np.zeros((m, B), dtype=pf.dtype)
    next_p = np.zeros((m, m, B), dtype=pf.dtype)
    sm, sp = np.zeros(m, dtype=pf.dtype), np.zeros((m, m), dtype=pf.dtype)
    for blk in range(B - 1, 0, -1):
        sm = E[..., blk] @ sm + gg[:, blk]
        sp = E[..., blk] @ sp @ E[..., blk].T + LL[..., blk]
        next_m[:, blk - 1], next_p[..., blk - 1] = sm, sp
    # (3) the smoother inside every block from its end
    means, varis = np.empty((L, B), dtype=pf.dtype), np.empty((L, B), dtype=pf.dtype)
    sm, sp = next_m, next_p
    for j in range(L - 1, -1, -1):
        Gl = G[j]
        sm = _mv(Gl, sm) + g[j]
        sp = _mmt(_mm(Gl, sp), Gl) + Lk[j]
        means[j] = h @ sm
        varis[j] = np.einsum("i,ijb,j->b", h, sp, h)
    mean, var = _flat(means, n), _flat(varis, n)
    if not np.all(np.isfinite(var)) or np.any(np.real(var) <= 0.0):
        raise ImproperPosteriorError("the state-space posterior has a non-positive marginal variance")
    return SmootherPass(mean, var, filt.log_det, filt.quad)


def _next(x: Array) -> Array:
    """Each point's next point's ``x``, layout ``(L, ..., B)`` (the very last point's: its own)."""
    out = np.empty_like(x)
    out[:-1] = x[1:]
    out[-1, ..., :-1] = x[0, ..., 1:]
    out[-1, ..., -1] = x[-1, ..., -1]
    return out
