r"""The stochastic search's :math:`M \times M` algebra in the inputs' array library (:mod:`relaxep._xp`).

:mod:`relaxep.inference.stochastic_ep` computes a minibatch's rows on the device of another array
library (PyTorch on a GPU, array-api-strict in the tests); this module keeps there too what every
step does once with :math:`M \times M` matrices, so that a step moves none of them to the host:

* the tied site :math:`(\Lambda, \eta)` (:class:`DeviceTiedSites`): the cavity
  :math:`N(m_c, S_c)`, :math:`P_c = I + (n-1)\Lambda = L_cL_c^\top`, :math:`S_c = L_c^{-\top}L_c^{-1}`,
  :math:`m_c = S_c (n-1)\eta`, the log-partitions
  :math:`g(P, h) = \tfrac12 h^\top P^{-1}h - \sum_i \log (L_P)_{ii}`, and the damped step with its
  halvings, whose test ":math:`I + n\Lambda` positive definite" is a flag of the library's Cholesky
  (:func:`~relaxep._xp.cholesky_flagged`) read once a step, with the step's other scalars
  (:func:`read_scalars`);
* :math:`K_{uu}` and its factor from the kernel's closed form (:func:`inducing_factor_on`), with the
  hyperparameters on the device (:func:`view_on`);
* the minibatch's sums (:func:`device_minibatch_sums`) and the gradient's completion by the
  :math:`K_{uu}` terms (:func:`inducing_gradient_on`): with :math:`\bar L = \partial E/\partial L_{uu}
  = -H^\top A` (:mod:`relaxep.inference.stochastic_ep`), the Cholesky factor's adjoint (Murray 2016,
  "Differentiation of the Cholesky decomposition", arXiv:1602.07527),

  .. math::
      \Phi(X) = \operatorname{tril}(X) - \tfrac12\operatorname{diag}(X),\qquad
      P = \Phi(L^\top\bar L),\qquad
      \bar K_{uu} = \tfrac12 L^{-\top}(P + P^\top)L^{-1},

  symmetrised, then taken to the constant, the length scales and :math:`Z` through
  :math:`K_{uu} = k(Z, Z) + \epsilon\,\overline{\operatorname{diag} k}\,I`.

Every formula is the host's (:class:`~relaxep.inference.stochastic_ep.TiedSites`,
:func:`~relaxep.inference.stochastic_ep._inducing_gradient`) in the same order of operations, so that
array-api-strict (numpy underneath) repeats numpy's step to rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from relaxep._xp import ArraySpace, cholesky_flagged, solve_lower, to_numpy
from relaxep.inference.stochastic_ep import (
    MinibatchSums,
    MinibatchTerms,
    TiedSites,
    TiedStep,
    _row_sites,
    minibatch_terms,
)
from relaxep.posterior.fitc_rows import KUU_JITTER
from relaxep.posterior.rbf import ScaledRBF, rbf
from relaxep.posterior.sparse_gradient import _contract

__all__ = [
    "DeviceTiedSites",
    "Proposal",
    "device_minibatch_sums",
    "inducing_factor_on",
    "inducing_gradient_on",
    "read_scalars",
    "view_on",
]


def read_scalars(space: ArraySpace, values: Sequence[Any]) -> list[float]:
    """``values`` (0-d arrays of ``space``, flags among them, or Python numbers) as Python floats, the arrays
    brought to the host in one transfer (one wait for the device)."""
    out: list[Any] = list(values)
    held = [i for i, v in enumerate(out) if not isinstance(v, (bool, int, float, np.generic))]
    if held:
        xp = space.xp
        column = xp.stack([xp.astype(xp.reshape(out[i], ()), xp.float64) for i in held])
        for i, value in zip(held, to_numpy(column).tolist(), strict=True):
            out[i] = value
    return [float(v) for v in out]


def _there(space: ArraySpace, values: Any) -> Any:
    """``values`` in ``space`` (a host likelihood's numpy rows moved there; the device's own as they are, without
    :func:`~relaxep._xp.on_device_of`'s look-up of their namespace, a step's Python overhead)."""
    return space.put(np.asarray(values, dtype=float)) if isinstance(values, np.ndarray) else values


def _cho_inverse(xp: Any, lower: Any, eye: Any) -> Any:
    r""":math:`P^{-1} = L^{-\top}L^{-1}` from :math:`P = LL^\top` by two triangular solves (LAPACK's ``potrs``)."""
    return solve_lower(xp, lower, solve_lower(xp, lower, eye), trans=True)


def _log_partition(xp: Any, lower: Any, h: Any) -> Any:
    r""":math:`\tfrac12 h^\top P^{-1}h - \sum_i\log L_{ii}` from :math:`P = LL^\top`, a 0-d array."""
    w = solve_lower(xp, lower, h[:, None])[:, 0]
    return 0.5 * xp.sum(w * w) - xp.sum(xp.log(xp.linalg.diagonal(lower)))


@dataclass(frozen=True)
class Proposal:
    r"""A candidate :math:`\Lambda` of the damped step, at step size ``eps``, with the Cholesky factor of
    :math:`I + n\Lambda` (``None`` where the library raised) and its flag (a 0-d array, or ``False``)."""

    lam: Any
    chol: Any | None
    ok: Any
    eps: float


@dataclass
class DeviceTiedSites:
    r""":class:`~relaxep.inference.stochastic_ep.TiedSites` with :math:`(\Lambda, \eta)` in ``space`` (module
    docstring); ``chol_q`` is the factor of :math:`I + n\Lambda` the last accepted step found."""

    lam: Any
    eta: Any
    n: int
    space: ArraySpace
    eye: Any
    chol_q: Any

    @classmethod
    def zero(cls, space: ArraySpace, M: int, n: int) -> DeviceTiedSites:
        xp = space.xp
        eye = xp.eye(M, dtype=xp.float64, device=space.device)
        zeros = xp.zeros((M, M), dtype=xp.float64, device=space.device)
        return cls(zeros, xp.zeros(M, dtype=xp.float64, device=space.device), n, space, eye, eye)

    def gaussian(self, copies: float) -> tuple[Any, Any, Any, Any]:
        r""":math:`N(0, I)\,t^{copies}` as ``(S, m, g, ok)``: covariance (symmetrised), mean, log-partition (0-d) and
        the Cholesky factor's flag (``False`` where the library raised: nothing else is computed then)."""
        xp = self.space.xp
        L, ok = cholesky_flagged(xp, self.eye + copies * self.lam)
        if L is None:
            return None, None, None, False
        S = _cho_inverse(xp, L, self.eye)
        h = copies * self.eta
        m = S @ h
        return 0.5 * (S + S.T), m, 0.5 * xp.sum(h * m) - xp.sum(xp.log(xp.linalg.diagonal(L))), ok

    def log_partition_q(self) -> Any:
        r""":math:`g(q)`, :math:`q = N(0, I)\,t^n`, from the factor the last accepted step computed (0-d)."""
        return _log_partition(self.space.xp, self.chol_q, float(self.n) * self.eta)

    def propose(self, lam_sum: Any, eta_sum: Any, b: int, eps: float) -> Proposal:
        r""":math:`(1-\epsilon)\Lambda + \epsilon\bar\Lambda` (``lam_sum`` symmetrised, over ``b`` rows) and the
        Cholesky factor of :math:`I + n\Lambda` there, nothing read."""
        new = (1.0 - eps) * self.lam + eps * 0.5 * (lam_sum + lam_sum.T) / b
        chol, ok = cholesky_flagged(self.space.xp, self.eye + self.n * new)
        return Proposal(new, chol, ok if chol is not None else False, eps)

    def move_towards(
        self, lam_sum: Any, eta_sum: Any, b: int, eps: float, halvings: int = 30, first: tuple | None = None
    ) -> float:
        r""":meth:`~relaxep.inference.stochastic_ep.TiedSites.move_towards` in ``space``: :math:`\epsilon` halved
        until :math:`I + n\Lambda` is positive definite, ``halvings`` tries; returns the step taken (0: none).
        ``first``: the first try's :class:`Proposal` and its flag already read (:func:`read_scalars`); each later
        try reads its flag once."""
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
        """The sites as numpy's :class:`~relaxep.inference.stochastic_ep.TiedSites` (two transfers, once a fit)."""
        return TiedSites(to_numpy(self.lam), to_numpy(self.eta), self.n)


def view_on(template: ScaledRBF, theta: Any, xp: Any) -> ScaledRBF:
    r"""The closed-form view (:func:`~relaxep.posterior.rbf.as_scaled_rbf`) at the kernel's log-hyperparameters
    ``theta`` held in ``xp`` (in ``template.entries``' order): :math:`c = e^{\theta_c}`, :math:`\ell = e^{\theta_\ell}`,
    a 0-d array and a vector there; a fixed one is ``template``'s (its length scales moved there once by the
    caller)."""
    entries = template.entries
    constant = xp.exp(theta[entries.index("constant")]) if "constant" in entries else template.constant
    length_scale = template.length_scale
    if "length_scale" in entries:
        first = entries.index("length_scale")
        length_scale = xp.exp(theta[first : first + entries.count("length_scale")])
        if template.isotropic:
            length_scale = xp.broadcast_to(length_scale, (template.length_scale.shape[0],))
    return ScaledRBF(constant, length_scale, template.isotropic, entries)


def inducing_factor_on(space: ArraySpace, kern: ScaledRBF, Z: Any) -> tuple[Any, Any | None, Any]:
    r""":func:`~relaxep.posterior.fitc_rows.inducing_factor` in ``space``: :math:`K_{uu} = k(Z, Z) +
    \epsilon\,\overline{\operatorname{diag} k}\,I` (symmetrised), its Cholesky factor (``None`` where the library
    raised) and the factor's flag, unread."""
    xp = space.xp
    k_uu = rbf(kern, Z, Z, space)
    jitter = KUU_JITTER * xp.mean(xp.linalg.diagonal(k_uu))
    k_uu = k_uu + jitter * xp.eye(k_uu.shape[0], dtype=k_uu.dtype, device=space.device)
    k_uu = 0.5 * (k_uu + k_uu.T)
    chol, ok = cholesky_flagged(xp, k_uu)
    return k_uu, chol, ok if chol is not None else False


def device_minibatch_sums(step: TiedStep, X: Any, y: Any) -> MinibatchSums:
    r""":func:`~relaxep.inference.stochastic_ep.minibatch_sums` where ``step`` lives in ``X``'s array space: the
    sums stay there (:math:`\sum\log Z_i` a 0-d array), the gradient completed there (:func:`inducing_gradient_on`);
    ``y`` there too, or numpy's.  The likelihood's own hyperparameters' gradient (where it has any) is the host's,
    from the rows' cavities brought there."""
    xp = step.space.xp
    terms = minibatch_terms(step, X, y)
    w, beta = _row_sites(terms, terms.r)  # the site of f_i with cavity variance r_i
    w, beta = _there(step.space, w), _there(step.space, beta)
    lam, eta = (terms.A * w[:, None]).T @ terms.A, terms.A.T @ beta
    log_z = float(np.sum(terms.log_z)) if isinstance(terms.log_z, np.ndarray) else xp.sum(terms.log_z)
    out = MinibatchSums(y.shape[0], log_z, 0.5 * (lam + lam.T), eta)
    if step.gradient:
        likelihood = step.likelihood
        if likelihood.n_dims:
            labels, mu, s = to_numpy(y), to_numpy(terms.mu), to_numpy(terms.s)
            out.g_lik = np.sum(likelihood.dlog_z_dtheta(labels, mu, s), axis=0)
        else:
            out.g_lik = np.zeros(0)
        out.g_theta, out.g_z = inducing_gradient_on(step, *_row_gradient_on(step, terms, X))
    return out


def _row_gradient_on(step: TiedStep, terms: MinibatchTerms, X: Any) -> tuple[Any, Any, Any, Any]:
    r""":func:`~relaxep.inference.stochastic_ep._row_gradient` kept in ``step``'s space: :math:`H^\top A`
    (:math:`H = G_AL_{uu}^{-1}`) and the constant's, the length scales' and ``Z``'s terms from
    :math:`\partial E/\partial K_{bu} = H` and :math:`\partial E/\partial k_{ii} = (d_2 + d_1^2)/2`
    (:func:`~relaxep.posterior.sparse_gradient.cross_terms`' formulas, unread)."""
    space, xp, kern = step.space, step.space.xp, step.view
    ds = 0.5 * (terms.d2 + terms.d1**2)
    d1, ds = _there(space, terms.d1), _there(space, ds)
    G_A = d1[:, None] * step.m[None, :] + 2.0 * ds[:, None] * (terms.AS - terms.A)
    H = solve_lower(xp, step.L_uu, G_A.T, trans=True).T
    gk = H * terms.K_bu
    sq, dz = _contract(space, kern, gk, X, step.Z, xp.sum(gk, axis=1), xp.sum(gk, axis=0), gk.T @ X)
    return H.T @ terms.A, xp.sum(gk) + xp.sum(ds) * kern.constant, sq, dz


def inducing_gradient_on(step: TiedStep, hta: Any, g_const: Any, g_ls: Any, g_z: Any) -> tuple[Any, Any]:
    r"""The rows' sums completed by the :math:`K_{uu}` terms in ``step``'s space (the host's
    :func:`~relaxep.inference.stochastic_ep._inducing_gradient`): with :math:`\bar L = -H^\top A` (``hta`` is
    :math:`H^\top A`) and :math:`L = L_{uu}`, Murray's (2016) adjoint

    .. math::
        P = \Phi(L^\top\bar L),\qquad \bar K_{uu} = \operatorname{sym}\big(L^{-\top}\,\tfrac12(P + P^\top)\,L^{-1}\big),

    :math:`\Phi` the lower triangle with its diagonal halved, then through :math:`K_{uu}`'s dependence on
    :math:`c`, :math:`\ell` and :math:`Z` (:func:`~relaxep.posterior.sparse_gradient.inducing_terms`' formulas:
    :math:`\partial K_{uu}/\partial\log c = K_{uu}`, the jitter scaling with :math:`c`).  Returns the gradient in
    the kernel's ``theta`` (a vector in ``step``'s space, :func:`theta_order_on`) and in ``Z``; sums, not means."""
    space, xp, kern, Z, L = step.space, step.space.xp, step.view, step.Z, step.L_uu
    P = L.T @ -hta
    eye = xp.eye(P.shape[0], dtype=P.dtype, device=space.device)
    phi = xp.tril(P, k=-1) + 0.5 * (P * eye)
    inner = 0.5 * (phi + phi.T)
    g_uu = solve_lower(xp, L, solve_lower(xp, L, inner, trans=True).T, trans=True)
    g_uu = 0.5 * (g_uu + g_uu.T)
    gk = g_uu * rbf(kern, Z, Z, space)
    col = xp.sum(gk, axis=0)
    u_ls, u_z = _contract(space, kern, gk, Z, Z, col, col, gk.T @ Z)
    u_const = xp.sum(g_uu * step.K_uu)
    return theta_order_on(xp, kern, g_const + u_const, g_ls + u_ls), g_z + 2.0 * u_z


def theta_order_on(xp: Any, kern: ScaledRBF, g_const: Any, g_ls: Any) -> Any:
    """:func:`~relaxep.posterior.sparse_gradient.in_theta_order` in ``xp``: the constant's and the length scales'
    gradients (an isotropic kernel's summed) as one vector in the order of the kernel's ``theta``."""
    scales = iter([xp.sum(g_ls)] if kern.isotropic else [g_ls[j] for j in range(g_ls.shape[0])])
    parts = [g_const if entry == "constant" else next(scales) for entry in kern.entries]
    if not parts:
        return xp.zeros(0, dtype=g_ls.dtype, device=getattr(g_ls, "device", None))
    return xp.stack(parts)
