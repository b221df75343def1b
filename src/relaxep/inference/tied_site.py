r"""The tied site of the stochastic search (:mod:`relaxep.inference.stochastic_ep`) in any array space.

The site :math:`t(v) = \exp(-\tfrac12 v^\top\Lambda v + \eta^\top v)` shared by every row, in the whitened
inducing values :math:`v \sim N(0, I)`, and the Gaussians :math:`N(0, I)\,t^k \propto N(m, S)`,
:math:`P = I + k\Lambda = LL^\top`, :math:`S = L^{-\top}L^{-1}`, :math:`m = S\,k\eta`, with their log-partitions
:math:`g(P, h) = \tfrac12 h^\top P^{-1}h - \sum_i \log L_{ii}` (:math:`h = k\eta`; the :math:`2\pi` terms cancel).
Its arrays live in one :class:`~relaxep._xp.ArraySpace`, numpy's or another library's device: there the test
":math:`I + n\Lambda` positive definite" of the damped step is a flag of the library's Cholesky
(:func:`~relaxep._xp.cholesky_flagged`), read with the step's other scalars in one transfer
(:func:`read_scalars`), so that a step moves no :math:`M \times M` array.  numpy's one fast path is SciPy's
``potrf`` (:func:`flagged_cholesky`: numpy's own LAPACK rounds differently, and the tied site at the edge of
properness amplifies it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from relaxep._typing import Array
from relaxep._xp import HOST, ArraySpace, cholesky_flagged, cholesky_lower, read_scalars, solve_lower, to_numpy

__all__ = ["Proposal", "TiedSites", "flagged_cholesky", "read_scalars"]


def flagged_cholesky(space: ArraySpace, a: Array) -> tuple[Array | None, Any]:
    r"""The lower Cholesky factor of :math:`A` and its flag, unread (:func:`~relaxep._xp.cholesky_flagged`);
    ``(None, False)`` where the library raises.  numpy: SciPy's ``potrf`` (:func:`~relaxep._xp.cholesky_lower`)."""
    if space.on_host:
        chol = cholesky_lower(space.xp, a)
        return chol, chol is not None
    chol, ok = cholesky_flagged(space.xp, a)
    return chol, ok if chol is not None else False


def _cho_inverse(space: ArraySpace, lower: Array, eye: Array) -> Array:
    r""":math:`P^{-1} = L^{-\top}L^{-1}` from :math:`P = LL^\top` by two triangular solves (LAPACK's ``potrs``)."""
    return solve_lower(space.xp, lower, solve_lower(space.xp, lower, eye), trans=True)


def _log_partition(space: ArraySpace, lower: Array, h: Array) -> Any:
    r""":math:`\tfrac12 h^\top P^{-1}h - \sum_i\log L_{ii}` from :math:`P = LL^\top` (0-d)."""
    xp = space.xp
    w = solve_lower(xp, lower, h[:, None])[:, 0]
    return 0.5 * xp.sum(w * w) - xp.sum(xp.log(xp.linalg.diagonal(lower)))


@dataclass(frozen=True)
class Proposal:
    r"""A candidate :math:`\Lambda` of the damped step at step size ``eps``, with the Cholesky factor of
    :math:`I + n\Lambda` (``None`` where the library raised) and its flag, unread (a 0-d array, or a bool)."""

    lam: Array
    chol: Array | None
    ok: Any
    eps: float


@dataclass
class TiedSites:
    r"""The shared site :math:`(\Lambda, \eta)` in the whitened inducing values (module docstring), in ``space``;
    ``chol_q`` is the Cholesky factor of :math:`I + n\Lambda` that the last accepted step found."""

    lam: Array
    eta: Array
    n: int
    space: ArraySpace = HOST
    chol_q: Array | None = None

    @classmethod
    def zero(cls, M: int, n: int, space: ArraySpace = HOST) -> TiedSites:
        xp, where = space.xp, {"dtype": space.xp.float64, "device": space.device}
        return cls(xp.zeros((M, M), **where), xp.zeros(M, **where), n, space, xp.eye(M, **where))

    @cached_property
    def eye(self) -> Array:
        xp = self.space.xp
        return xp.eye(self.lam.shape[0], dtype=self.lam.dtype, device=self.space.device)

    def gaussian(self, copies: float) -> tuple[Array | None, Array | None, Any, Any]:
        r""":math:`N(0, I)\,t^{copies}` as ``(S, m, g, ok)``: covariance (symmetrised), mean, log-partition
        :math:`g = \tfrac12 h^\top P^{-1} h - \tfrac12\log|P|` (0-d; the :math:`2\pi` terms cancel) and the flag
        of the precision :math:`P`'s Cholesky factor, unread (``(None, None, None, False)`` where it raised)."""
        xp, eye = self.space.xp, self.eye
        L, ok = flagged_cholesky(self.space, eye + copies * self.lam)
        if L is None:
            return None, None, None, False
        S = _cho_inverse(self.space, L, eye)
        h = copies * self.eta
        m = S @ h
        return 0.5 * (S + S.T), m, 0.5 * xp.sum(h * m) - xp.sum(xp.log(xp.linalg.diagonal(L))), ok

    def log_partition_q(self) -> Any:
        r""":math:`g(q)`, :math:`q = N(0, I)\,t^n`, from the factor of the last accepted step (0-d)."""
        chol = self.eye if self.chol_q is None else self.chol_q
        return _log_partition(self.space, chol, float(self.n) * self.eta)

    def propose(self, lam_sum: Array, eta_sum: Array, b: int, eps: float) -> Proposal:
        r""":math:`(1-\epsilon)\Lambda + \epsilon\bar\Lambda` (``lam_sum`` symmetrised, over ``b`` rows) and the
        Cholesky factor of :math:`I + n\Lambda` there, nothing read."""
        new = (1.0 - eps) * self.lam + eps * 0.5 * (lam_sum + lam_sum.T) / b
        chol, ok = flagged_cholesky(self.space, self.eye + self.n * new)
        return Proposal(new, chol, ok, eps)

    def move_towards(
        self, lam_sum: Array, eta_sum: Array, b: int, eps: float, halvings: int = 30, first: tuple | None = None
    ) -> float:
        r"""The damped step :math:`(\Lambda, \eta) \leftarrow (1-\epsilon)(\Lambda, \eta) + \epsilon(\bar\Lambda,
        \bar\eta)` towards the mean of a minibatch's ``b`` rank-one sites (``lam_sum``, ``eta_sum``: their sums;
        :math:`\bar\Lambda` symmetrised), with :math:`\epsilon` halved until
        :math:`q = N(0, I)\,t^n` stays proper (:math:`I + n\Lambda` positive definite, so every cavity
        :math:`I + (n-1)\Lambda` is too); returns the step taken (0: none after ``halvings``).  ``first``: the
        first try's :class:`Proposal` and its flag already read (:func:`read_scalars`); each later try reads its
        flag once.

        A likelihood that is not log-concave (the label-noise default) gives the rows on the wrong side negative
        precisions :math:`w_i`; a minibatch's mean of :math:`w_i a_i a_i^\top` can then be indefinite, and the
        ``n`` copies of the tied site amplify a direction that few rows of the minibatch span past
        :math:`-1/n`, where full EP would balance the row by every other row spanning it.  Damping until the
        posterior stays proper is EP's usual remedy for negative sites (Minka 2001; Jylänki et al. 2011).
        Where the full step keeps ``q`` proper the arithmetic is the undamped update's, bit for bit.
        """
        for attempt in range(halvings):
            if attempt == 0 and first is not None:
                proposal, ok = first
            else:
                proposal = self.propose(lam_sum, eta_sum, b, eps)
                ok = read_scalars(self.space, [proposal.ok])[0]
            if not ok:
                eps *= 0.5
                continue
            self.lam, self.chol_q = proposal.lam, proposal.chol
            self.eta = (1.0 - eps) * self.eta + eps * eta_sum / b
            return eps
        return 0.0

    def to_host(self) -> TiedSites:
        """The sites as numpy arrays (two transfers, once a fit)."""
        if self.space.on_host:
            return self
        return TiedSites(to_numpy(self.lam), to_numpy(self.eta), self.n)
