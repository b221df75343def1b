r"""The stochastic search for a sparse model's hyperparameters and inducing inputs (``optimizer="stochastic"``).

Minibatch EP with tied sites (:mod:`relaxep.inference.stochastic_ep`, after Hernandez-Lobato &
Hernandez-Lobato 2016, "Scalable Gaussian process classification via expectation propagation",
and Li, Hernandez-Lobato & Turner 2015, "Stochastic expectation propagation") interleaved with
Adam steps (Kingma & Ba 2015) on the minibatch estimate of the EP energy's gradient in the
kernel's and the likelihood's log-hyperparameters and the inducing inputs, for a fixed budget of
steps; then every row's site from the learned tied site starts full EP on all rows, which gives
the posterior and its status.  A step costs :math:`O(|B|M^2 + M^3)` whatever ``n``.

One loop for every array library (:mod:`relaxep._xp`), numpy's among them.  Its steps live in ``space``: the
tied site, the cavity, :math:`K_{uu}` and its factor, the gradient's :math:`M \times M` completion and the Adam
steps of the kernel's log-hyperparameters and of :math:`Z` stay on the rows' device, and the loop reads one short
vector a step.  Three things decide whether a step goes on: whether :math:`K_{uu}` at the new hyperparameters has
a Cholesky factor (else the Adam step is undone and its rates halved), whether the cavity
:math:`I + (n-1)\Lambda` has one, and whether the site step keeps :math:`I + n\Lambda` positive definite (else
:math:`\epsilon` is halved).  Step :math:`t` computes the candidate site step, the Adam step and :math:`K_{uu}` at
step :math:`t+1`'s hyperparameters without waiting, then reads their flags with the evidence estimate's three
log-partitions in one transfer (:func:`~relaxep.inference.tied_site.read_scalars`; on numpy, Python numbers
already): a failed :math:`K_{uu}` is handled at the top of step :math:`t+1`, before a minibatch is drawn, and
the rare failed site step halves :math:`\epsilon` with one read a try.  A library whose Cholesky raises (numpy,
array-api-strict) says so at once.  The likelihood's own hyperparameters, where it has any, and their Adam
stay on the host (their gradient needs the rows' cavities there); Adam is elementwise, so its three blocks
(the kernel's, the likelihood's, ``Z``'s) take numpy's steps.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._threads import small_matrix_threads
from relaxep._typing import Array
from relaxep._xp import HOST, ArraySpace, namespace, to_numpy
from relaxep.errors import KernelNotPositiveDefiniteError
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._stochastic_steps import Adam, Learned, StochasticOptions, annealed
from relaxep.hyper.log_prior import LogPrior
from relaxep.inference.stochastic_ep import MinibatchSums, TiedStep, minibatch_sums, sites_of_rows
from relaxep.inference.tied_site import TiedSites, flagged_cholesky, read_scalars
from relaxep.likelihoods import Likelihood
from relaxep.posterior.fitc_rows import KUU_JITTER
from relaxep.posterior.rbf import ScaledRBF, as_scaled_rbf, rbf

__all__ = [
    "StochasticOptions",
    "inducing_factor",
    "learn_stochastic",
    "local_batches",
    "row_sites",
    "tied_start",
    "view_at",
]


#: the search's schedule where the caller gives none
DEFAULT_OPTIONS = StochasticOptions()


def local_batches(
    X: Array, y: Array, batch_size: int, rng: np.random.RandomState, n_jobs: int | None = 1
) -> Callable[[TiedStep], MinibatchSums]:
    """Minibatches of ``batch_size`` rows of in-memory ``(X, y)``, every row once an epoch (a permutation); a
    minibatch's row blocks on ``n_jobs`` threads (:func:`~relaxep.inference.stochastic_ep.minibatch_sums`).

    ``X`` of another array library and a ``step`` there too: the labels (float) are moved there once, each
    epoch's permutation once, and a minibatch's rows are taken there, so that a step sends nothing to the device.
    """
    n, space = y.shape[0], namespace(X)
    b = min(batch_size, n)
    state = {"order": rng.permutation(n), "cursor": 0, "on_device": None, "labels": None}

    def evaluate(step: TiedStep) -> MinibatchSums:
        if state["cursor"] + b > n:
            state["order"], state["cursor"], state["on_device"] = rng.permutation(n), 0, None
        start = state["cursor"]
        idx = state["order"][start : start + b]
        state["cursor"] += b
        if space.on_host or step.space.on_host:
            return minibatch_sums(step, _rows(X, idx, space), y[idx], n_jobs)
        if state["on_device"] is None:  # (once an epoch; the labels once)
            state["on_device"] = space.xp.asarray(state["order"], device=space.device)
        if state["labels"] is None:
            state["labels"] = space.put(np.asarray(y, dtype=float))
        rows = state["on_device"][start : start + b]
        take = space.xp.take
        return minibatch_sums(step, take(X, rows, axis=0), take(state["labels"], rows, axis=0))

    return evaluate


def _rows(X: Array, idx: Array, space: ArraySpace) -> Array:
    """The rows ``idx`` of ``X``, in ``X``'s array library and on its device (:mod:`relaxep._xp`)."""
    return X[idx] if space.on_host else space.xp.take(X, space.xp.asarray(idx, device=space.device), axis=0)


def feature_scale(X: Array) -> Array:
    """The features' standard deviations, on the host."""
    space = namespace(X)
    return np.std(X, axis=0) if space.on_host else to_numpy(space.xp.std(X, axis=0))


def view_at(template: ScaledRBF, theta: Array, xp: Any) -> ScaledRBF:
    r"""The closed-form view (:func:`~relaxep.posterior.rbf.as_scaled_rbf`) at the kernel's log-hyperparameters
    ``theta`` held in ``xp`` (in ``template.entries``' order): :math:`c = e^{\theta_c}`, :math:`\ell = e^{\theta_\ell}`;
    a fixed one is ``template``'s (its length scales in ``xp`` already); numpy's constant a Python float."""
    entries = template.entries
    constant = xp.exp(theta[entries.index("constant")]) if "constant" in entries else template.constant
    if isinstance(constant, np.generic):  # (a Python float: a host step's view meets another library's rows)
        constant = float(constant)
    length_scale = template.length_scale
    if "length_scale" in entries:
        first = entries.index("length_scale")
        length_scale = xp.exp(theta[first : first + entries.count("length_scale")])
        if template.isotropic:
            length_scale = xp.broadcast_to(length_scale, (template.length_scale.shape[0],))
    return ScaledRBF(constant, length_scale, template.isotropic, entries)


def inducing_factor(space: ArraySpace, kern: ScaledRBF | Kernel, Z: Array) -> tuple[Array, Array | None, Any]:
    r""":func:`~relaxep.posterior.fitc_rows.inducing_factor` in ``space``: :math:`K_{uu} = k(Z, Z) +
    \epsilon\,\overline{\operatorname{diag} k}\,I` (symmetrised), its Cholesky factor (``None`` where the library
    raised) and the factor's flag, unread.  ``kern``: the closed-form view (:func:`view_at`), or on the host
    scikit-learn's kernel itself (numpy's path: its own evaluation, :class:`~relaxep.SparsePrior`'s :math:`K_{uu}`
    to the last digit)."""
    xp = space.xp
    k_uu = rbf(kern, Z, Z, space) if isinstance(kern, ScaledRBF) else np.asarray(kern(Z, Z), dtype=float)
    jitter = KUU_JITTER * xp.mean(xp.linalg.diagonal(k_uu))
    k_uu = k_uu + jitter * xp.eye(k_uu.shape[0], dtype=k_uu.dtype, device=space.device)
    k_uu = 0.5 * (k_uu + k_uu.T)
    chol, ok = flagged_cholesky(space, k_uu)
    return k_uu, chol, ok


class _State:
    """Where the search stands: the kernel's log-hyperparameters and ``Z`` (``space``'s arrays), the likelihood's
    (numpy), and :math:`K_{uu}` at them with its factor and the factor's flag (read: a float)."""

    def __init__(self, theta: Array, lik_theta: Array, Z: Array, factor: tuple[Array, Any, Any]) -> None:
        self.theta, self.lik_theta, self.Z, self.factor = theta, lik_theta, Z, factor


def learn_stochastic(
    kernel: Kernel,
    likelihood: Likelihood,
    Z: Array,
    n: int,
    scale: Array,
    noise: float,
    learn_theta: bool,
    learn_z: bool,
    evaluate: Callable[[TiedStep], MinibatchSums],
    options: StochasticOptions = DEFAULT_OPTIONS,
    report: Callable[[int, Array, float], None] | None = None,
    space: ArraySpace = HOST,
    log_prior: LogPrior | None = None,
) -> Learned:
    """Learn the kernel's and the likelihood's hyperparameters (``learn_theta``) and ``Z`` (``learn_z``) by
    stochastic EP (module docstring) on ``n`` rows whose features have standard deviations ``scale``;
    ``evaluate(step)`` gives a minibatch's :class:`~relaxep.inference.stochastic_ep.MinibatchSums` in ``space``
    (:func:`local_batches`, or a map over Dask's shards); ``report(step, x, log_evidence_estimate)`` every
    ``report_every`` steps.  ``space``: where the steps' M x M algebra, the tied site and the Adam steps run (the
    rows' own keeps them on the device; numpy's, the default, on the host, a minibatch's sums brought there).
    The learned sites come back to the host once, at the end.  ``log_prior``: the hyperparameters' prior
    (:mod:`relaxep.hyper.log_prior`), whose gradient over ``n`` joins each step's mean gradient (the MAP's; ``None``
    or flat: the evidence's alone)."""
    xp = space.xp
    M, dim = Z.shape
    hyper = HyperVector(kernel, likelihood, Z)
    n_kernel, n_theta, bounds, x0 = hyper.n_kernel, hyper.n_theta, hyper.theta_bounds, hyper.x0
    scale = np.where(np.asarray(scale) > 0, scale, 1.0)
    free = np.concatenate([np.full(n_theta, 1.0 if learn_theta else 0.0), np.full(M * dim, 1.0 if learn_z else 0.0)])
    rates = options.learning_rate * free * np.concatenate([np.ones(n_theta), np.tile(scale, M)])
    adams = (  # Adam is elementwise: by blocks, the kernel's, the likelihood's (on the host), Z's
        Adam(space.put(rates[:n_kernel]), xp=xp),
        Adam(rates[n_kernel:n_theta]),
        Adam(space.put(np.reshape(rates[n_theta:], (M, dim))), xp=xp),
    )
    low, high = space.put(bounds[:n_kernel, 0]), space.put(bounds[:n_kernel, 1])
    template = as_scaled_rbf(kernel, dim)
    template = replace(template, length_scale=space.put(template.length_scale))  # (a fixed one, moved once)

    def factor_at(theta: Array, Z: Array) -> tuple[Array, Any, Any]:
        kern = kernel.clone_with_theta(theta) if space.on_host else view_at(template, theta, xp)
        return inducing_factor(space, kern, Z)

    theta, Z_now = space.put(x0[:n_kernel]), space.put(np.reshape(x0[n_theta:], (M, dim)))
    factor = factor_at(theta, Z_now)
    state = _State(theta, x0[n_kernel:n_theta], Z_now, (*factor[:2], read_scalars(space, [factor[2]])[0]))
    previous = state
    learning = learn_theta or learn_z
    prior = None if log_prior is None or log_prior.flat else log_prior
    priors = None if prior is None else (prior.part(0, n_kernel), prior.part(n_kernel, n_theta), float(n))
    sites = TiedSites.zero(M, n, space)
    ema, trace = np.nan, []
    step = 0
    with small_matrix_threads() if space.on_host else nullcontext():  # M x M work: one BLAS thread
        for step in range(1, options.max_steps + 1):
            K_uu, L_uu, kuu_ok = state.factor
            S_c, m_c, g_cav, cavity_ok = sites.gaussian(n - 1.0) if kuu_ok else (None, None, None, False)
            if not kuu_ok or cavity_ok is False:  # K_uu not PD (q stays proper): halve the step
                _halve(adams)
                state = previous
                continue
            wants_gradient = learning and step > options.warmup
            lik_t = likelihood.clone_with_theta(state.lik_theta) if hyper.n_likelihood else likelihood
            view = view_at(template, state.theta, xp)
            sums = evaluate(TiedStep(view, lik_t, state.Z, K_uu, L_uu, noise, S_c, m_c, wants_gradient, space))
            b = sums.count
            eps = 1.0 / step if step <= options.warmup else options.damping
            proposal = sites.propose(sums.lam, sums.eta, b, eps)
            moments = [(adam.m, adam.v, adam.t) for adam in adams]
            after = state
            if wants_gradient:
                after = _adam_step(state, adams, sums, b, annealed(step, options), bounds, low, high, xp, priors)
                if step < options.max_steps:  # K_uu at the next step's point, its flag read with this step's
                    after.factor = factor_at(after.theta, after.Z)
            g_q = sites.log_partition_q()
            ok, next_ok, cavity, g_q, log_z, g_cav = read_scalars(
                space, [proposal.ok, after.factor[2], cavity_ok, g_q, sums.log_z, g_cav]
            )  # the step's one read
            if not cavity:  # (a library whose Cholesky flags, not raises: this step undone)
                for adam, (m, v, t) in zip(adams, moments, strict=True):
                    adam.m, adam.v, adam.t = m, v, t
                _halve(adams)
                state = previous
                continue
            previous, state = state, after
            state.factor = (*state.factor[:2], next_ok)
            estimate = (g_q / n) + log_z / b + g_cav - g_q
            ema = estimate if np.isnan(ema) else 0.98 * ema + 0.02 * estimate
            sites.move_towards(sums.lam, sums.eta, b, eps, first=(proposal, ok))
            if step % options.report_every == 0:
                trace.append(ema)
                if report is not None:
                    report(step, _host_x(state, space), n * ema)
    kern_t, lik_t, Z_t = hyper.split(_host_x(state, space))
    return Learned(kern_t, lik_t, Z_t, sites.to_host(), step, np.asarray(trace))


def _adam_step(
    state: _State,
    adams: tuple[Adam, Adam, Adam],
    sums: MinibatchSums,
    b: int,
    factor: float,
    bounds: Array,
    low: Array,
    high: Array,
    xp: Any,
    priors: tuple[LogPrior, LogPrior, float] | None = None,
) -> _State:
    """The Adam steps of the three blocks on the minibatch's mean gradient (with ``priors``, the kernel's and the
    likelihood's log prior and ``n``: plus the prior's gradient over ``n``), the log-hyperparameters clipped to their
    bounds (numpy's ``clip``: a maximum, then a minimum); :math:`K_{uu}` at the new point is the caller's."""
    adam_k, adam_l, adam_z = adams
    g_theta, g_lik = sums.g_theta / b, sums.g_lik / b
    if priors is not None:
        kernel_prior, likelihood_prior, n = priors
        if g_theta.shape[0]:
            g_theta = g_theta + kernel_prior.gradient_in(state.theta, xp) / n
        if state.lik_theta.size:
            g_lik = g_lik + likelihood_prior(state.lik_theta)[1] / n
    theta = adam_k.step(state.theta, g_theta, factor)
    theta = xp.minimum(xp.maximum(theta, low), high)
    lik_theta = state.lik_theta
    if lik_theta.size:
        n_kernel = bounds.shape[0] - lik_theta.size
        lik_theta = np.clip(adam_l.step(lik_theta, g_lik, factor), bounds[n_kernel:, 0], bounds[n_kernel:, 1])
    return _State(theta, lik_theta, adam_z.step(state.Z, sums.g_z / b, factor), state.factor)


def _halve(adams: tuple[Adam, ...]) -> None:
    """Halve every block's rates."""
    for adam in adams:
        adam.rates = adam.rates * 0.5


def _host_x(state: _State, space: ArraySpace) -> Array:
    """The search's vector ``(theta, likelihood theta, vec Z)`` on the host, the device's part in one transfer."""
    xp = space.xp
    both = to_numpy(xp.concat([state.theta, xp.reshape(state.Z, (-1,))]))
    n_kernel = state.theta.shape[0]
    return np.concatenate([both[:n_kernel], state.lik_theta, both[n_kernel:]])


def tied_start(learned: Learned, noise: float) -> TiedStep:
    """The :class:`~relaxep.inference.stochastic_ep.TiedStep` at the learned hyperparameters and the tied site's
    cavity (no gradient), on the host."""
    Z = learned.Z
    K_uu, L_uu, ok = inducing_factor(HOST, learned.kernel, Z)
    if not ok:
        raise KernelNotPositiveDefiniteError("K_uu at the learned hyperparameters has no Cholesky factor")
    S_c, m_c, _, _ = learned.sites.gaussian(learned.sites.n - 1.0)
    if S_c is None:
        raise np.linalg.LinAlgError("the learned tied site's cavity is improper")
    return TiedStep(
        as_scaled_rbf(learned.kernel, Z.shape[1]), learned.likelihood, Z, K_uu, L_uu, noise, S_c, m_c, False
    )


def row_sites(learned: Learned, X: Array, y: Array, noise: float, n_jobs: int | None = 1) -> tuple[Array, Array]:
    """The sites that start the final full EP (:func:`sites_of_rows` at :func:`tied_start`, row blocks on
    ``n_jobs`` threads)."""
    return sites_of_rows(tied_start(learned, noise), X, y, n_jobs)
