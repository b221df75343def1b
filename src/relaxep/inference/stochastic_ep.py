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
:mod:`relaxep.estimators._stochastic`'s, the tied site :mod:`relaxep.inference.tied_site`'s.

Every formula is written once in the namespace of the step's :class:`~relaxep._xp.ArraySpace`, numpy's one of
them (scikit-learn's rule): on another library's device (PyTorch on a GPU, array-api-strict in the tests) the
rows' algebra, the likelihood's moments (where it has them there) and the gradient's :math:`M \times M`
completion stay there.  numpy's fast paths are helpers chosen by the space: BLAS-3 ``trsm`` on the rows
(:func:`_rows_solve_lower` and :mod:`relaxep.posterior.fitc_rows`' row helpers), and a minibatch's row blocks on
threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from relaxep._blas import rows_solve_lower
from relaxep._threads import each_block, fold_blocks
from relaxep._typing import Array
from relaxep._xp import HOST, ArraySpace, namespace, solve_lower, to_numpy
from relaxep.likelihoods import Likelihood
from relaxep.posterior.fitc_rows import CHUNK, DEVICE_ROWS, chunks, row_dots, row_squares, solve_rows
from relaxep.posterior.rbf import ScaledRBF, rbf
from relaxep.posterior.sparse_gradient import _contract
from relaxep.sites import site_from_tilted

__all__ = [
    "MinibatchSums",
    "MinibatchTerms",
    "TiedStep",
    "energy_gradient",
    "minibatch_sums",
    "minibatch_terms",
    "sites_of_rows",
    "theta_order",
]


def _there(space: ArraySpace, values: Any) -> Any:
    """``values`` in ``space``: a host likelihood's numpy rows moved there, the space's own as they are."""
    return values if space.on_host or not isinstance(values, np.ndarray) else space.put(values)


def _total(space: ArraySpace, values: Any) -> Any:
    """:math:`\\sum_i v_i`, in the library of ``values`` (a host likelihood's rows: numpy's)."""
    return np.sum(values) if isinstance(values, np.ndarray) else space.xp.sum(values)


def _rows_solve_lower(space: ArraySpace, lower: Array, rows: Array) -> Array:
    r"""Rows of :math:`Y L^{-1}` (numpy: one BLAS-3 ``trsm``, :func:`~relaxep._blas.rows_solve_lower`)."""
    if space.on_host:
        return rows_solve_lower(lower, rows)
    return solve_lower(space.xp, lower, rows.T, trans=True).T


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
        labels = space.put(y) if isinstance(y, np.ndarray) else space.xp.astype(y, mu.dtype)
        t = step.likelihood.log_z_on(space.xp, labels, mu, s)
        return MinibatchTerms(t.log_z, mu, s, r, t.dlog_z, t.d2log_z, A, AS, K_bu)
    mu, s, r = to_numpy(mu), to_numpy(s), to_numpy(r)
    t = step.likelihood.log_z(to_numpy(y), mu, s)
    return MinibatchTerms(t.log_z, mu, s, r, t.dlog_z, t.d2log_z, A, AS, K_bu)


def energy_gradient(step: TiedStep, terms: MinibatchTerms, X: Array) -> tuple[Array, Array]:
    r"""The mean over the minibatch of :math:`\partial\log Z_i` in the kernel's ``theta`` and ``Z`` at fixed
    whitened sites (module docstring), ``(grad_theta, grad_Z)``."""
    grad_theta, grad_z = _inducing_gradient(step, *_row_gradient(step, terms, X))
    return grad_theta / terms.A.shape[0], grad_z / terms.A.shape[0]


def _row_gradient(step: TiedStep, terms: MinibatchTerms, X: Array) -> tuple[Array, Any, Array, Array]:
    r"""The rows' sums of :func:`energy_gradient`, linear in the rows: :math:`H^\top A` (``M x M``,
    :math:`H = \partial E/\partial K_{bu} = G_A L_{uu}^{-1}`, :math:`G_A = d_1 m^\top + (d_2 + d_1^2)(AS - A)`)
    and the constant's, the length scales' and ``Z``'s terms through :math:`K_{bu}` and
    :math:`\partial E/\partial k_{ii} = (d_2 + d_1^2)/2` (:func:`~relaxep.posterior.sparse_gradient.cross_terms`'
    formulas, kept in ``step``'s space)."""
    space, xp, kern = step.space, step.space.xp, step.view
    ds = 0.5 * (terms.d2 + terms.d1**2)
    d1, ds = _there(space, terms.d1), _there(space, ds)
    G_A = d1[:, None] * step.m[None, :] + 2.0 * ds[:, None] * (terms.AS - terms.A)
    H = _rows_solve_lower(space, step.L_uu, G_A)
    gk = H * terms.K_bu
    sq, dz = _contract(space, kern, gk, X, step.Z, xp.sum(gk, axis=1), xp.sum(gk, axis=0), gk.T @ X)
    return H.T @ terms.A, xp.sum(gk) + xp.sum(ds) * kern.constant, sq, dz


def _inducing_gradient(step: TiedStep, hta: Array, g_const: Any, g_ls: Array, g_z: Array) -> tuple[Array, Array]:
    r"""The rows' sums (:func:`_row_gradient`) completed by the :math:`K_{uu}` terms, once per minibatch: with
    :math:`\bar L = \partial E/\partial L_{uu} = -H^\top A` (``hta`` is :math:`H^\top A`) and :math:`L = L_{uu}`,
    the Cholesky factor's adjoint (Murray 2016, "Differentiation of the Cholesky decomposition",
    arXiv:1602.07527)

    .. math::
        P = \Phi(L^\top\bar L),\qquad \bar K_{uu} = \operatorname{sym}\big(L^{-\top}\,\tfrac12(P + P^\top)\,L^{-1}\big),

    :math:`\Phi` the lower triangle with its diagonal halved, then through :math:`K_{uu} = k(Z, Z) +
    \epsilon\,\overline{\operatorname{diag} k}\,I` to :math:`c`, :math:`\ell` and :math:`Z`
    (:func:`~relaxep.posterior.sparse_gradient.inducing_terms`' formulas: :math:`\partial K_{uu}/\partial\log c =
    K_{uu}`, the jitter scaling with :math:`c`).  ``(grad_theta, grad_Z)`` in ``step``'s space; sums, not means."""
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
    return theta_order(xp, kern, g_const + u_const, g_ls + u_ls), g_z + 2.0 * u_z


def theta_order(xp: Any, kern: ScaledRBF, g_const: Any, g_ls: Array) -> Array:
    """The constant's and the length scales' gradients (an isotropic kernel's summed) as one vector of ``xp`` in
    the order of the kernel's ``theta`` (:func:`~relaxep.posterior.sparse_gradient.in_theta_order`)."""
    scales = iter([xp.sum(g_ls)] if kern.isotropic else [g_ls[j] for j in range(g_ls.shape[0])])
    parts = [g_const if entry == "constant" else next(scales) for entry in kern.entries]
    if not parts:
        return xp.zeros(0, dtype=g_ls.dtype, device=getattr(g_ls, "device", None))
    return xp.stack(parts)


@dataclass
class MinibatchSums:
    r"""A minibatch's sums: rows, :math:`\log Z_i`, the rank-one sites, and (if asked) the energy's gradient."""

    count: int
    log_z: Any
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


#: rows of a minibatch per block on the host (one thread's share, :mod:`relaxep._threads`); fixed, so that the
#: sums do not depend on the number of threads
MINIBATCH_BLOCK = 256


def minibatch_sums(step: TiedStep, X: Array, y: Array, n_jobs: int | None = 1) -> MinibatchSums:
    """:class:`MinibatchSums` of the rows ``(X, y)`` at ``step`` (module docstring), in ``X``'s array space: on
    the host the row blocks' sums on ``n_jobs`` threads, added in block order; on another library's device one
    block, the sums left there (:math:`\\sum\\log Z_i` a 0-d array); then the minibatch's :math:`M \\times M`
    terms once.  ``y`` numpy's or ``X``'s; a host ``step`` gets numpy's sums back.  The likelihood's own
    hyperparameters' gradient (where it has any) is the host's, from the rows' cavities brought there."""
    on = step.in_space_of(X)
    if on.space.on_host:
        blocks = list(chunks(y.shape[0], MINIBATCH_BLOCK))
        parts = fold_blocks(lambda c: _block_sums(on, X[c, :], y[c]), blocks, n_jobs, _add_sums)
    else:  # (one block: no thread pool, no BLAS limits a step)
        parts = _block_sums(on, X, y)
    count, log_z, lam, eta, gradient = parts
    out = MinibatchSums(count, log_z, 0.5 * (lam + lam.T), eta)
    if step.gradient:
        out.g_theta, out.g_z = _inducing_gradient(on, *gradient[:4])
        out.g_lik = gradient[4]
    if on.space != step.space:  # (the rows on a device, the steps on the host)
        for name in ("log_z", "lam", "eta", "g_theta", "g_z"):
            value = getattr(out, name)
            setattr(out, name, None if value is None else to_numpy(value))
        out.log_z = float(out.log_z)
    return out


def _block_sums(step: TiedStep, X: Array, y: Array) -> tuple:
    """One row block's sums: rows, :math:`\\sum\\log Z_i`, :math:`\\sum w_i a_ia_i^\\top`, :math:`\\sum\\beta_i a_i`,
    and (if asked) the gradient's row sums with the likelihood's."""
    terms = minibatch_terms(step, X, y)
    w, beta = site_from_tilted(terms.d1, terms.d2, terms.mu, terms.r)  # the site of f_i, cavity variance r_i
    w, beta = _there(step.space, w), _there(step.space, beta)
    gradient = None
    if step.gradient:
        likelihood = step.likelihood
        g_lik = np.zeros(0)
        if likelihood.n_dims:
            g_lik = np.sum(likelihood.dlog_z_dtheta(to_numpy(y), to_numpy(terms.mu), to_numpy(terms.s)), axis=0)
        gradient = (*_row_gradient(step, terms, X), g_lik)
    lam, eta = (terms.A * w[:, None]).T @ terms.A, terms.A.T @ beta
    return y.shape[0], _total(step.space, terms.log_z), lam, eta, gradient


def _add_sums(a: tuple, b: tuple) -> tuple:
    gradient = None if a[4] is None else tuple(x + y for x, y in zip(a[4], b[4], strict=True))
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], gradient


def sites_of_rows(step: TiedStep, X: Array, y: Array, n_jobs: int | None = 1) -> tuple[Array, Array]:
    r"""Every row's site :math:`(\tilde\tau_i, \tilde\nu_i)` from the cavity of ``step`` (module docstring),
    in row chunks on ``n_jobs`` threads (:mod:`relaxep._threads`): :math:`O(nM^2)`; numpy's arrays."""
    tau, nu = np.empty(y.shape[0]), np.empty(y.shape[0])
    on = step.in_space_of(X)
    numpy = on.space.on_host

    def block(c: slice) -> None:
        t = minibatch_terms(on, X[c, :], y[c])
        tau[c], nu[c] = (to_numpy(a) for a in site_from_tilted(t.d1, t.d2, t.mu, t.s))

    each_block(block, list(chunks(y.shape[0], CHUNK if numpy else DEVICE_ROWS)), n_jobs if numpy else 1)
    return tau, nu
