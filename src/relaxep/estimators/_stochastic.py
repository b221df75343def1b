r"""Stochastic learning of a sparse (FITC) model: minibatch EP site updates and evidence gradients, interleaved.

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
(:func:`~relaxep.posterior.sparse_gradient.kernel_vjp`).  Adam (Kingma & Ba 2015) ascends the
per-point energy; a step costs :math:`O(|B|M^2 + M^3)`.  At the end, the sites of every row
(:math:`\tilde\tau_i = -d_2/(1 + d_2 s_i)`, :math:`\tilde\nu_i = (d_1 - \mu_i d_2)/(1 + d_2 s_i)`)
start full EP on all rows, which gives the posterior and its status.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import linalg
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep.likelihoods import Likelihood
from relaxep.posterior._sparse_linalg import KUU_JITTER, chunks
from relaxep.posterior.sparse_gradient import _rbf, as_sparse_kernel, kernel_vjp

__all__ = [
    "STOCHASTIC_FROM",
    "SiteStart",
    "StochasticOptions",
    "TiedSites",
    "learn_stochastic",
    "minibatch_terms",
    "row_sites",
    "stochastic_search",
]

#: ``optimizer="auto"`` learns a sparse model stochastically from this many training rows (measured:
#: benchmarks/results/sparse.md); below it, L-BFGS-B on the full EP evidence
STOCHASTIC_FROM = 20_000


def stochastic_search(estimator: Any, n: int) -> bool:
    """Whether a sparse fit learns stochastically: ``optimizer="stochastic"``, or ``"auto"`` on at least
    :data:`STOCHASTIC_FROM` rows with neither ``optimizer_subset`` nor restarts asked for."""
    optimizer = estimator.optimizer
    if isinstance(optimizer, str) and optimizer == "stochastic":
        if estimator.n_restarts_optimizer:
            raise ValueError("n_restarts_optimizer: optimizer='stochastic' has no restarts; set it to 0")
        return True
    auto = isinstance(optimizer, str) and optimizer == "auto"
    plain = estimator.optimizer_subset is None and not estimator.n_restarts_optimizer
    return auto and plain and n >= STOCHASTIC_FROM


@dataclass(frozen=True)
class SiteStart:
    """Sites to start inference from (what :func:`~relaxep.infer` reads of its ``init``)."""

    site_precision: Array
    site_mean_precision: Array

    @property
    def relaxation(self) -> Array:
        return np.zeros_like(self.site_precision)


@dataclass(frozen=True)
class StochasticOptions:
    r"""The schedule: a fixed budget of steps, no tuning (defaults measured at ``n = 10^5``, ``M = 200``:
    benchmarks/results/sparse.md).

    ``batch_size`` rows a step; ``max_steps`` steps; Adam's ``learning_rate`` for the
    log-hyperparameters (the inducing inputs': times each feature's standard deviation), constant,
    then down linearly to a tenth over the last ``anneal`` fraction of the steps; ``damping`` the
    site step :math:`\epsilon` once ``warmup`` steps at the initial hyperparameters (site step
    :math:`1/t`, an average) have brought the sites near their fixed point; ``report_every``
    steps between reports of the evidence estimate (its exponential average over about 50 steps).
    """

    batch_size: int = 1000
    max_steps: int = 1000
    learning_rate: float = 0.02
    damping: float = 0.1
    warmup: int = 20
    anneal: float = 0.5
    report_every: int = 50


@dataclass
class TiedSites:
    r"""The shared site :math:`(\Lambda, \eta)` in the whitened inducing values (module docstring)."""

    lam: Array
    eta: Array
    n: int
    history: list[float] = field(default_factory=list)

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


@dataclass(frozen=True)
class Terms:
    """One minibatch at the current hyperparameters: the cavities, the tilted derivatives, the sites."""

    log_z: Array
    mu: Array
    s: Array
    r: Array
    d1: Array
    d2: Array
    A: Array
    K_bu: Array


def _whitened_rows(kern: Any, X: Array, Z: Array, L_uu: Array) -> tuple[Array, Array]:
    K_bu = _rbf(kern, X, Z)
    return linalg.solve_triangular(L_uu, K_bu.T, lower=True, check_finite=False).T, K_bu


def minibatch_terms(
    kern: Any, likelihood: Likelihood, X: Array, y: Array, Z: Array, L_uu: Array, noise: float, S: Array, m: Array
) -> Terms:
    """Cavities :math:`N(\\mu_i, s_i)` of the rows ``X`` under the cavity :math:`N(m, S)` of the whitened
    inducing values, and :math:`\\log Z_i` with its derivatives (module docstring)."""
    A, K_bu = _whitened_rows(kern, X, Z, L_uu)
    g = np.maximum(kern.constant + noise - np.einsum("ij,ij->i", A, A), 0.0)
    r = np.einsum("ij,ij->i", A @ S, A)
    mu = A @ m
    s = r + g
    t = likelihood.log_z(y, mu, s)
    return Terms(t.log_z, mu, s, r, t.dlog_z, t.d2log_z, A, K_bu)


def energy_gradient(
    kern: Any, terms: Terms, X: Array, Z: Array, K_uu: Array, L_uu: Array, S: Array, m: Array
) -> tuple[Array, Array]:
    r"""The mean over the minibatch of :math:`\partial\log Z_i` in the kernel's ``theta`` and ``Z`` at fixed
    whitened sites (module docstring), ``(grad_theta, grad_Z)``."""
    b, M = terms.A.shape
    ds = 0.5 * (terms.d2 + terms.d1**2)
    G_A = np.outer(terms.d1, m) + 2.0 * ds[:, None] * (terms.A @ S - terms.A)
    H = linalg.solve_triangular(L_uu, G_A.T, lower=True, trans=1, check_finite=False).T  # G_A L^-1 = dE/dK_bu
    # a_i = L^-1 k_ui moves with L: dE/dL = -H^T A; the Cholesky adjoint (Murray 2016) takes it to K_uu
    phi = L_uu.T @ (-H.T @ terms.A)
    phi = np.tril(phi)
    phi[np.diag_indices(M)] *= 0.5
    inner = 0.5 * (phi + phi.T)
    g_uu = linalg.solve_triangular(
        L_uu, linalg.solve_triangular(L_uu, inner, lower=True, trans=1).T, lower=True, trans=1
    )
    g_uu = 0.5 * (g_uu + g_uu.T)
    grad_theta, grad_z = kernel_vjp(kern, X, Z, H, ds, g_uu, K_uu)
    return grad_theta / b, grad_z / b


def site_targets(terms: Terms) -> tuple[Array, Array]:
    r"""The minibatch mean of the rank-one sites, :math:`\overline{w a a^\top}` and :math:`\overline{\beta a}`."""
    denom = 1.0 + terms.d2 * terms.r
    w = -terms.d2 / denom
    beta = (terms.d1 - terms.mu * terms.d2) / denom
    b = w.size
    lam = (terms.A * w[:, None]).T @ terms.A / b
    return 0.5 * (lam + lam.T), terms.A.T @ beta / b


class _Adam:
    """Adam ascending an objective (Kingma & Ba 2015), per-coordinate step sizes ``rates``."""

    def __init__(self, rates: Array, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
        self.rates, self.beta1, self.beta2, self.eps = rates, beta1, beta2, eps
        self.m = np.zeros_like(rates)
        self.v = np.zeros_like(rates)
        self.t = 0

    def step(self, x: Array, grad: Array, factor: float = 1.0) -> Array:
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad**2
        m_hat = self.m / (1 - self.beta1**self.t)
        v_hat = self.v / (1 - self.beta2**self.t)
        return x + factor * self.rates * m_hat / (np.sqrt(v_hat) + self.eps)


@dataclass
class Learned:
    """What :func:`learn_stochastic` returns."""

    kernel: Kernel
    likelihood: Likelihood
    Z: Array
    sites: TiedSites
    steps: int
    trace: Array  # the per-point evidence estimate every report_every steps


def learn_stochastic(
    kernel: Kernel,
    likelihood: Likelihood,
    X: Array,
    y: Array,
    Z: Array,
    noise: float,
    learn_theta: bool,
    learn_z: bool,
    rng: np.random.RandomState,
    options: StochasticOptions = StochasticOptions(),
    report: Callable[[int, Array, float], None] | None = None,
) -> Learned:
    """Learn the kernel's and the likelihood's hyperparameters (``learn_theta``) and ``Z`` (``learn_z``) by
    stochastic EP (module docstring); ``report(step, x, log_evidence_estimate)`` every ``report_every`` steps."""
    n, dim = X.shape
    M = Z.shape[0]
    k, n_lik = kernel.theta.size, likelihood.theta.size
    bounds = np.vstack([np.reshape(kernel.bounds, (-1, 2)), np.reshape(likelihood.bounds, (-1, 2))])
    x = np.concatenate([kernel.theta, likelihood.theta, Z.ravel()])
    scale = np.std(X, axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    free = np.concatenate([np.full(k + n_lik, 1.0 if learn_theta else 0.0), np.full(M * dim, 1.0 if learn_z else 0.0)])
    rates = options.learning_rate * free * np.concatenate([np.ones(k + n_lik), np.tile(scale, M)])
    adam = _Adam(rates)
    sites = TiedSites.zero(M, n)
    b = min(options.batch_size, n)
    order = rng.permutation(n)
    cursor = 0
    ema, trace = np.nan, []
    step, previous = 0, x
    for step in range(1, options.max_steps + 1):
        if cursor + b > n:
            order, cursor = rng.permutation(n), 0
        idx = order[cursor : cursor + b]
        cursor += b
        kern_t, lik_t, Z_t = _split(kernel, likelihood, x, k, n_lik, M, dim)
        view = as_sparse_kernel(kern_t, dim)
        K_uu = _rbf(view, Z_t, Z_t)
        K_uu[np.diag_indices(M)] += KUU_JITTER * view.constant
        try:
            L_uu = linalg.cholesky(K_uu, lower=True, check_finite=False)
            _, S_c, m_c, g_cav = sites.gaussian(n - 1.0)
            _, _, _, g_q = sites.gaussian(float(n))
        except linalg.LinAlgError:  # the step left the region where K_uu or q is proper: halve it
            adam.rates *= 0.5
            x = previous
            continue
        previous = x
        terms = minibatch_terms(view, lik_t, X[idx], y[idx], Z_t, L_uu, noise, S_c, m_c)
        estimate = (g_q / n) + float(np.mean(terms.log_z)) + g_cav - g_q
        ema = estimate if np.isnan(ema) else 0.98 * ema + 0.02 * estimate
        eps = 1.0 / step if step <= options.warmup else options.damping
        lam_b, eta_b = site_targets(terms)
        sites.lam = (1.0 - eps) * sites.lam + eps * lam_b
        sites.eta = (1.0 - eps) * sites.eta + eps * eta_b
        if step > options.warmup and (learn_theta or learn_z):
            g_theta, g_z = energy_gradient(view, terms, X[idx], Z_t, K_uu, L_uu, S_c, m_c)
            g_lik = np.mean(lik_t.dlog_z_dtheta(y[idx], terms.mu, terms.s), axis=0) if n_lik else np.zeros(0)
            x = adam.step(x, np.concatenate([g_theta, g_lik, g_z.ravel()]), _annealed(step, options))
            x[: k + n_lik] = np.clip(x[: k + n_lik], bounds[:, 0], bounds[:, 1])
        if step % options.report_every == 0:
            trace.append(ema)
            if report is not None:
                report(step, x.copy(), n * ema)
    kern_t, lik_t, Z_t = _split(kernel, likelihood, x, k, n_lik, M, dim)
    return Learned(kern_t, lik_t, Z_t, sites, step, np.asarray(trace))


def _annealed(step: int, options: StochasticOptions) -> float:
    """The learning rate's factor: 1, then down linearly to 0.1 over the last ``anneal`` fraction of the steps."""
    start = (1.0 - options.anneal) * options.max_steps
    if step <= start:
        return 1.0
    return 1.0 - 0.9 * (step - start) / max(options.max_steps - start, 1.0)


def _split(
    kernel: Kernel, likelihood: Likelihood, x: Array, k: int, n_lik: int, M: int, dim: int
) -> tuple[Kernel, Likelihood, Array]:
    kern = kernel.clone_with_theta(x[:k])
    lik = likelihood.clone_with_theta(x[k : k + n_lik]) if n_lik else likelihood
    return kern, lik, x[k + n_lik :].reshape(M, dim)


def row_sites(learned: Learned, X: Array, y: Array, noise: float) -> tuple[Array, Array]:
    r"""Every row's site :math:`(\tilde\tau_i, \tilde\nu_i)` from the tied site's cavity (module docstring):
    the start of the final full EP.  One pass over row chunks, :math:`O(nM^2)`."""
    dim = X.shape[1]
    view = as_sparse_kernel(learned.kernel, dim)
    Z = learned.Z
    K_uu = _rbf(view, Z, Z)
    K_uu[np.diag_indices(Z.shape[0])] += KUU_JITTER * view.constant
    L_uu = linalg.cholesky(K_uu, lower=True, check_finite=False)
    _, S_c, m_c, _ = learned.sites.gaussian(learned.sites.n - 1.0)
    tau, nu = np.empty(X.shape[0]), np.empty(X.shape[0])
    for c in chunks(X.shape[0], 4096):
        t = minibatch_terms(view, learned.likelihood, X[c], y[c], Z, L_uu, noise, S_c, m_c)
        denom = 1.0 + t.d2 * t.s
        tau[c] = -t.d2 / denom
        nu[c] = (t.d1 - t.mu * t.d2) / denom
    return tau, nu
