r"""Stochastic EP with tied sites on a sparse (FITC) model: the minibatch maths of the stochastic search.

Hernandez-Lobato & Hernandez-Lobato (2016, "Scalable Gaussian process classification via
expectation propagation", AISTATS) learn the kernel and the inducing inputs of an EP model from
minibatches, never running EP to convergence inside the optimiser; the sites are tied as in
stochastic EP (Li, Hernandez-Lobato & Turner 2015, "Stochastic expectation propagation", NIPS),
so memory does not grow with ``n``.  Here, in the whitened inducing values
:math:`v = L_{uu}^{-1}u \sim N(0, I)` with :math:`f_i \mid v \sim N(a_i^\top v, g_i)`,
:math:`a_i = L_{uu}^{-1}k_{u i}`, :math:`g_i = k_{ii} - \|a_i\|^2`, every likelihood term shares
one site :math:`t(v) = \exp(-\tfrac12 v^\top\Lambda v + \eta^\top v)`:

.. math::
    q(v) \propto N(v \mid 0, I)\,t(v)^n,\qquad q^{\setminus}(v) \propto N(v \mid 0, I)\,t(v)^{n-1}
    = N(m_c, S_c).

For the rows :math:`i` of a minibatch :math:`B`, the cavity of :math:`f_i` is
:math:`N(\mu_i, s_i)`, :math:`\mu_i = a_i^\top m_c`, :math:`s_i = r_i + g_i`,
:math:`r_i = a_i^\top S_c a_i`; with :math:`d_1, d_2` the derivatives of
:math:`\log Z_i = \log\int p(y_i|f) N(f|\mu_i, s_i) df` in :math:`\mu_i`, moment matching in
:math:`v` gives the rank-one site :math:`w_i a_i a_i^\top`, :math:`\beta_i a_i`,

.. math::
    w_i = \frac{-d_2}{1 + d_2 r_i},\qquad \beta_i = \frac{d_1 - \mu_i d_2}{1 + d_2 r_i},

and the tied site moves towards their minibatch mean with step :math:`\epsilon`:
:math:`\Lambda \leftarrow (1-\epsilon)\Lambda + \epsilon\,\overline{w a a^\top}`.  The EP energy
:math:`\log Z_{EP} = g(q) - g(p_0) + \sum_i [\log Z_i + g(q^{\setminus}) - g(q)]` (:math:`g` the
log-partition function) depends on the kernel and ``Z`` only through the :math:`\log Z_i` at
fixed (whitened) sites, so

.. math::
    \frac{\partial \log Z_{EP}}{\partial\theta} \approx \frac{n}{|B|}\sum_{i\in B}
    \frac{\partial\log Z_i}{\partial\theta},\qquad
    \frac{\partial\log Z_i}{\partial a_i} = d_1 m_c + (d_2 + d_1^2)(S_c - I)a_i,\quad
    \frac{\partial\log Z_i}{\partial k_{ii}} = \tfrac12(d_2 + d_1^2),

taken to :math:`K_{uf}`, :math:`K_{uu}` (through :math:`a_i = L_{uu}^{-1}k_{ui}` and the
Cholesky factor's adjoint, Murray 2016) and to :math:`\theta, Z`
(:func:`~relaxep.posterior.sparse_gradient.cross_terms`,
:func:`~relaxep.posterior.sparse_gradient.inducing_terms`).  A minibatch costs
:math:`O(|B|M^2 + M^3)`; the sums of minibatches drawn on different shards add up (Dask).  The sites
of every row (:math:`\tilde\tau_i = -d_2/(1 + d_2 s_i)`, :math:`\tilde\nu_i = (d_1 - \mu_i d_2)/(1 + d_2 s_i)`)
start full EP on all rows.  The learning loop (Adam, the schedule) is
:mod:`relaxep.estimators._stochastic`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import linalg

from relaxep._blas import rows_solve_lower
from relaxep._threads import each_block, fold_blocks
from relaxep._typing import Array
from relaxep._xp import HOST, ArraySpace, namespace, on_device_of, solve_lower, to_numpy
from relaxep.likelihoods import Likelihood
from relaxep.posterior.fitc_rows import CHUNK, DEVICE_ROWS, chunks, row_dots, row_squares, solve_rows
from relaxep.posterior.rbf import rbf
from relaxep.posterior.sparse_gradient import cross_terms, in_theta_order, inducing_terms
from relaxep.sites import site_from_tilted

__all__ = [
    "MinibatchSums",
    "MinibatchTerms",
    "TiedSites",
    "TiedStep",
    "energy_gradient",
    "minibatch_sums",
    "minibatch_terms",
    "sites_of_rows",
]


@dataclass
class TiedSites:
    r"""The shared site :math:`(\Lambda, \eta)` in the whitened inducing values (module docstring)."""

    lam: Array
    eta: Array
    n: int

    @classmethod
    def zero(cls, M: int, n: int) -> TiedSites:
        return cls(np.zeros((M, M)), np.zeros(M), n)

    def gaussian(self, copies: float) -> tuple[Array, Array, Array, float]:
        r""":math:`N(0, I)\,t^{copies}` as ``(L, S, m, g)``: Cholesky factor of the precision, covariance,
        mean and log-partition :math:`\tfrac12 h^\top P^{-1} h - \tfrac12\log|P|` (the :math:`2\pi` terms cancel)."""
        P = np.eye(self.lam.shape[0]) + copies * self.lam
        L = linalg.cholesky(P, lower=True, check_finite=False)  # LinAlgError: an improper q
        S = linalg.cho_solve((L, True), np.eye(P.shape[0]), check_finite=False)
        h = copies * self.eta
        m = S @ h
        return L, 0.5 * (S + S.T), m, 0.5 * float(h @ m) - float(np.sum(np.log(np.diagonal(L))))

    def move_towards(self, lam_sum: Array, eta_sum: Array, b: int, eps: float, halvings: int = 30) -> float:
        r"""The damped step :math:`(\Lambda, \eta) \leftarrow (1-\epsilon)(\Lambda, \eta) + \epsilon(\bar\Lambda,
        \bar\eta)` towards the mean of a minibatch's ``b`` rank-one sites (``lam_sum``, ``eta_sum``: their sums;
        :math:`\bar\Lambda` symmetrised), with :math:`\epsilon` halved until
        :math:`q = N(0, I)\,t^n` stays proper (:math:`I + n\Lambda` positive definite, so every cavity
        :math:`I + (n-1)\Lambda` is too); returns the step taken (0: none after ``halvings``).

        A likelihood that is not log-concave (the label-noise default) gives the rows on the wrong side negative
        precisions :math:`w_i`; a minibatch's mean of :math:`w_i a_i a_i^\top` can then be indefinite, and the
        ``n`` copies of the tied site amplify a direction that few rows of the minibatch span past
        :math:`-1/n`, where full EP would balance the row by every other row spanning it.  Damping until the
        posterior stays proper is EP's usual remedy for negative sites (Minka 2001; Jylänki et al. 2011).
        Where the full step keeps ``q`` proper the arithmetic is the undamped update's, bit for bit.
        """
        eye = np.eye(self.lam.shape[0])
        for _ in range(halvings):
            new = (1.0 - eps) * self.lam + eps * 0.5 * (lam_sum + lam_sum.T) / b
            try:
                linalg.cholesky(eye + self.n * new, lower=True, check_finite=False)
            except linalg.LinAlgError:
                eps *= 0.5
                continue
            self.lam, self.eta = new, (1.0 - eps) * self.eta + eps * eta_sum / b
            return eps
        return 0.0

    def log_partition(self, copies: float) -> float:
        """:meth:`gaussian`'s log-partition alone: one Cholesky and one solve, no covariance."""
        L = linalg.cholesky(np.eye(self.lam.shape[0]) + copies * self.lam, lower=True, check_finite=False)
        w = linalg.solve_triangular(L, copies * self.eta, lower=True, check_finite=False)
        return 0.5 * float(w @ w) - float(np.sum(np.log(np.diagonal(L))))


@dataclass(frozen=True)
class MinibatchTerms:
    """One minibatch at the current hyperparameters: the cavities, the tilted derivatives, the sites."""

    log_z: Array
    mu: Array
    s: Array
    r: Array
    d1: Array
    d2: Array
    A: Array
    AS: Array  # A S, shared by the cavity variances and the gradient
    K_bu: Array  # k(X, Z), reused by the gradient's chain rule


def minibatch_terms(step: TiedStep, X: Array, y: Array) -> MinibatchTerms:
    """Cavities :math:`N(\\mu_i, s_i)` of the rows ``X`` under the cavity :math:`N(m, S)` of the whitened
    inducing values, and :math:`\\log Z_i` with its derivatives (module docstring); ``step`` in ``X``'s array
    space (another array library: the rows' algebra there, and the likelihood's moments too where it has
    :attr:`~relaxep.likelihoods.Likelihood.closed_form_on_device` or ``tilted_on_device``, else on the host); ``y``
    numpy's or there."""
    space, kern, S, m = step.space, step.view, step.S, step.m
    K_bu = rbf(kern, X, step.Z, space)
    A = solve_rows(space, step.L_uu, K_bu)
    g = kern.constant + step.noise - row_squares(space, A)
    g = space.xp.maximum(g, space.xp.zeros_like(g))
    AS = A @ S
    r = row_dots(space, AS, A)
    mu = A @ m
    s = r + g
    lik = step.likelihood
    if not space.on_host and (lik.closed_form_on_device or lik.tilted_on_device):  # the moments there (device_ep)
        labels = (
            on_device_of(np.asarray(y, dtype=float), mu) if isinstance(y, np.ndarray) else space.xp.astype(y, mu.dtype)
        )
        t = step.likelihood.log_z_on(space.xp, labels, mu, s)
        return MinibatchTerms(t.log_z, mu, s, r, t.dlog_z, t.d2log_z, A, AS, K_bu)
    mu, s, r = to_numpy(mu), to_numpy(s), to_numpy(r)
    t = step.likelihood.log_z(to_numpy(y), mu, s)
    return MinibatchTerms(t.log_z, mu, s, r, t.dlog_z, t.d2log_z, A, AS, K_bu)


def _row_sites(terms: MinibatchTerms, var: Array) -> tuple[Array, Array]:
    """:func:`~relaxep.sites.site_from_tilted` of the rows' moments at cavity variances ``var``, in the moments'
    array library (the host's function, or its formula on the device)."""
    if isinstance(terms.d1, np.ndarray):
        return site_from_tilted(terms.d1, terms.d2, terms.mu, var)
    denom = 1.0 + var * terms.d2
    return -terms.d2 / denom, (terms.d1 - terms.mu * terms.d2) / denom


def energy_gradient(step: TiedStep, terms: MinibatchTerms, X: Array) -> tuple[Array, Array]:
    r"""The mean over the minibatch of :math:`\partial\log Z_i` in the kernel's ``theta`` and ``Z`` at fixed
    whitened sites (module docstring), ``(grad_theta, grad_Z)``."""
    rows = _row_gradient(step, terms, X)
    grad_theta, grad_z = _inducing_gradient(step.view, step.Z, step.K_uu, step.L_uu, *rows)
    return grad_theta / terms.A.shape[0], grad_z / terms.A.shape[0]


def _row_gradient(step: TiedStep, terms: MinibatchTerms, X: Array) -> tuple[Array, float, Array, Array]:
    r"""The rows' sums of :func:`energy_gradient`, linear in the rows: :math:`H^\top A` (``M x M``,
    :math:`H = \partial E/\partial K_{bu} = G_A L_{uu}^{-1}`) and the constant's, the length scales' and
    ``Z``'s terms through :math:`K_{bu}` and :math:`k_{ii}`."""
    space, kern, Z, L_uu, m = step.space, step.view, step.Z, step.L_uu, step.m
    ds = 0.5 * (terms.d2 + terms.d1**2)
    if space.on_host:
        G_A = np.outer(terms.d1, m) + 2.0 * ds[:, None] * (terms.AS - terms.A)
        H = rows_solve_lower(L_uu, G_A)  # G_A L^-1 = dE/dK_bu
        return (H.T @ terms.A, *cross_terms(space, kern, X, Z, H, ds, terms.K_bu))
    d1, ds = on_device_of(terms.d1, terms.A), on_device_of(ds, terms.A)
    G_A = d1[:, None] * m[None, :] + 2.0 * ds[:, None] * (terms.AS - terms.A)
    H = solve_lower(space.xp, L_uu, G_A.T, trans=True).T
    return (to_numpy(H.T @ terms.A), *cross_terms(space, kern, X, Z, H, ds, terms.K_bu))


def _inducing_gradient(
    kern: Any, Z: Array, K_uu: Array, L_uu: Array, hta: Array, g_const: float, g_ls: Array, g_z: Array
) -> tuple[Array, Array]:
    r"""The rows' sums (:func:`_row_gradient`) completed by the :math:`K_{uu}` terms, once per minibatch:
    :math:`a_i = L^{-1}k_{ui}` moves with :math:`L`, :math:`\partial E/\partial L = -H^\top A`, and the
    Cholesky factor's adjoint (Murray 2016) takes it to :math:`K_{uu}`.  Sums, not means."""
    M = K_uu.shape[0]
    phi = np.tril(L_uu.T @ -hta)
    phi[np.diag_indices(M)] *= 0.5
    inner = 0.5 * (phi + phi.T)
    g_uu = linalg.solve_triangular(
        L_uu, linalg.solve_triangular(L_uu, inner, lower=True, trans=1).T, lower=True, trans=1
    )
    g_uu = 0.5 * (g_uu + g_uu.T)
    u_const, u_ls, u_z = inducing_terms(kern, Z, g_uu, K_uu)
    return in_theta_order(kern, g_const + u_const, g_ls + u_ls), g_z + u_z


@dataclass
class MinibatchSums:
    r"""A minibatch's sums: rows, :math:`\log Z_i`, the rank-one sites, and (if asked) the energy's gradient."""

    count: int
    log_z: float
    lam: Array
    eta: Array
    g_theta: Array | None = None
    g_z: Array | None = None
    g_lik: Array | None = None

    def __add__(self, other: MinibatchSums) -> MinibatchSums:
        def add(a: Array | None, b: Array | None) -> Array | None:
            return None if a is None or b is None else a + b

        return MinibatchSums(
            self.count + other.count,
            self.log_z + other.log_z,
            self.lam + other.lam,
            self.eta + other.eta,
            add(self.g_theta, other.g_theta),
            add(self.g_z, other.g_z),
            add(self.g_lik, other.g_lik),
        )


@dataclass(frozen=True)
class TiedStep:
    """What a minibatch needs at a step of the tied-site search: the kernel's closed-form view, the likelihood,
    ``Z``, :math:`K_{uu}` and its factor, the latent noise, the cavity :math:`N(m, S)` of the tied site, whether
    the gradient is wanted, and the array space its arrays live in (:meth:`in_space_of` moves them)."""

    view: Any
    likelihood: Likelihood
    Z: Array
    K_uu: Array
    L_uu: Array
    noise: float
    S: Array
    m: Array
    gradient: bool
    space: ArraySpace = HOST

    def in_space_of(self, X: Array) -> TiedStep:
        """This step with its arrays in ``X``'s array space (:mod:`relaxep._xp`), chosen once for a minibatch."""
        space = namespace(X)
        if space == self.space:
            return self
        Z, K_uu, L_uu, S, m = (
            space.put(np.asarray(a, dtype=float)) for a in (self.Z, self.K_uu, self.L_uu, self.S, self.m)
        )
        return TiedStep(self.view, self.likelihood, Z, K_uu, L_uu, self.noise, S, m, self.gradient, space)


#: rows of a minibatch per block (one thread's share, :mod:`relaxep._threads`); fixed, so that the sums do
#: not depend on the number of threads
MINIBATCH_BLOCK = 256


def minibatch_sums(step: TiedStep, X: Array, y: Array, n_jobs: int | None = 1) -> MinibatchSums:
    """:class:`MinibatchSums` of the rows ``(X, y)`` at ``step`` (module docstring): the row blocks' sums on ``n_jobs``
    threads, added in block order, then the minibatch's :math:`M \times M` terms once, on the host.  A ``step``
    whose arrays live in another array library keeps them there:
    :func:`~relaxep.inference.stochastic_device.device_minibatch_sums`, which
    :func:`~relaxep.estimators._stochastic.local_batches` calls for such rows."""
    on = step.in_space_of(X)
    blocks = list(chunks(y.shape[0], MINIBATCH_BLOCK)) if on.space.on_host else [slice(0, y.shape[0])]
    parts = fold_blocks(lambda c: _block_sums(on, X[c, :], y[c]), blocks, n_jobs, _add_sums)
    count, log_z, lam, eta, gradient = parts
    out = MinibatchSums(count, log_z, 0.5 * (lam + lam.T), eta)
    if step.gradient:
        out.g_theta, out.g_z = _inducing_gradient(step.view, step.Z, step.K_uu, step.L_uu, *gradient[:4])
        out.g_lik = gradient[4]
    return out


def _block_sums(step: TiedStep, X: Array, y: Array) -> tuple:
    """One row block's sums: rows, :math:`\\sum\\log Z_i`, :math:`\\sum w_i a_ia_i^\top`, :math:`\\sum\beta_i a_i`,
    and (if asked) the gradient's row sums with the likelihood's."""
    terms = minibatch_terms(step, X, y)
    w, beta = _row_sites(terms, terms.r)  # the site of f_i with cavity variance r_i
    gradient = None
    if step.gradient:
        likelihood = step.likelihood
        g_lik = (
            np.sum(likelihood.dlog_z_dtheta(y, to_numpy(terms.mu), to_numpy(terms.s)), axis=0)
            if likelihood.n_dims
            else np.zeros(0)
        )
        gradient = (*_row_gradient(step, terms, X), g_lik)
    w, beta = on_device_of(w, terms.A), on_device_of(beta, terms.A)
    lam, eta = (terms.A * w[:, None]).T @ terms.A, terms.A.T @ beta
    log_z = float(np.sum(terms.log_z)) if isinstance(terms.log_z, np.ndarray) else float(step.space.xp.sum(terms.log_z))
    return y.shape[0], log_z, to_numpy(lam), to_numpy(eta), gradient


def _add_sums(a: tuple, b: tuple) -> tuple:
    gradient = None if a[4] is None else tuple(x + y for x, y in zip(a[4], b[4], strict=True))
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], gradient


def sites_of_rows(step: TiedStep, X: Array, y: Array, n_jobs: int | None = 1) -> tuple[Array, Array]:
    r"""Every row's site :math:`(\tilde\tau_i, \tilde\nu_i)` from the cavity of ``step`` (module docstring),
    in row chunks on ``n_jobs`` threads (:mod:`relaxep._threads`): :math:`O(nM^2)`."""
    tau, nu = np.empty(y.shape[0]), np.empty(y.shape[0])
    on = step.in_space_of(X)
    numpy = on.space.on_host

    def block(c: slice) -> None:
        t = minibatch_terms(on, X[c, :], y[c])
        tau[c], nu[c] = (to_numpy(a) for a in _row_sites(t, t.s))

    each_block(block, list(chunks(y.shape[0], CHUNK if numpy else DEVICE_ROWS)), n_jobs if numpy else 1)
    return tau, nu
