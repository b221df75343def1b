r"""The stochastic search for a sparse model's hyperparameters and inducing inputs (``optimizer="stochastic"``).

Minibatch EP with tied sites (:mod:`relaxep.inference.stochastic_ep`, after Hernandez-Lobato &
Hernandez-Lobato 2016, "Scalable Gaussian process classification via expectation propagation",
and Li, Hernandez-Lobato & Turner 2015, "Stochastic expectation propagation") interleaved with
Adam steps (Kingma & Ba 2015) on the minibatch estimate of the EP energy's gradient in the
kernel's and the likelihood's log-hyperparameters and the inducing inputs, for a fixed budget of
steps; then every row's site from the learned tied site starts full EP on all rows, which gives
the posterior and its status.  A step costs :math:`O(|B|M^2 + M^3)` whatever ``n``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import linalg
from sklearn.gaussian_process.kernels import Kernel

from relaxep._threads import small_matrix_threads
from relaxep._typing import Array
from relaxep._xp import HOST, ArraySpace, namespace, to_numpy
from relaxep.errors import KernelNotPositiveDefiniteError
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._stochastic_device import learn_on_device
from relaxep.estimators._stochastic_steps import Adam, Learned, StochasticOptions, annealed
from relaxep.inference.stochastic_device import device_minibatch_sums
from relaxep.inference.stochastic_ep import MinibatchSums, TiedSites, TiedStep, minibatch_sums, sites_of_rows
from relaxep.likelihoods import Likelihood
from relaxep.posterior.fitc_rows import inducing_factor
from relaxep.posterior.rbf import as_scaled_rbf

__all__ = [
    "StochasticOptions",
    "learn_stochastic",
    "local_batches",
    "row_sites",
    "tied_start",
]


#: the search's schedule where the caller gives none
DEFAULT_OPTIONS = StochasticOptions()


def local_batches(
    X: Array, y: Array, batch_size: int, rng: np.random.RandomState, n_jobs: int | None = 1
) -> Callable[[TiedStep], MinibatchSums]:
    """Minibatches of ``batch_size`` rows of in-memory ``(X, y)``, every row once an epoch (a permutation); a
    minibatch's row blocks on ``n_jobs`` threads (:func:`~relaxep.inference.stochastic_ep.minibatch_sums`).

    ``X`` of another array library and a ``step`` there too (:mod:`relaxep.inference.stochastic_device`): the
    labels (float) are moved there once, each epoch's permutation once, and a minibatch's rows are taken there,
    so that a step sends nothing to the device.
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
        return device_minibatch_sums(step, take(X, rows, axis=0), take(state["labels"], rows, axis=0))

    return evaluate


def _rows(X: Array, idx: Array, space: ArraySpace) -> Array:
    """The rows ``idx`` of ``X``, in ``X``'s array library and on its device (:mod:`relaxep._xp`)."""
    return X[idx] if space.on_host else space.xp.take(X, space.xp.asarray(idx, device=space.device), axis=0)


def feature_scale(X: Array) -> Array:
    """The features' standard deviations, on the host."""
    space = namespace(X)
    return np.std(X, axis=0) if space.on_host else to_numpy(space.xp.std(X, axis=0))


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
) -> Learned:
    """Learn the kernel's and the likelihood's hyperparameters (``learn_theta``) and ``Z`` (``learn_z``) by
    stochastic EP (module docstring) on ``n`` rows whose features have standard deviations ``scale``;
    ``evaluate(step)`` gives a minibatch's :class:`~relaxep.inference.stochastic_ep.MinibatchSums`
    (:func:`local_batches`, or a map over Dask's shards);
    ``report(step, x, log_evidence_estimate)`` every ``report_every`` steps.

    ``space``: where the steps' M x M algebra, the tied site and the Adam steps run; another array
    library's (the rows' own, :func:`local_batches` on its arrays) keeps them there
    (:func:`~relaxep.estimators._stochastic_device.learn_on_device`); numpy's (the default) runs them on the host,
    a minibatch's sums brought there each step."""
    if not space.on_host:
        return learn_on_device(
            kernel, likelihood, Z, n, scale, noise, learn_theta, learn_z, evaluate, options, report, space
        )
    M, dim = Z.shape
    hyper = HyperVector(kernel, likelihood, Z)
    n_theta, bounds, x = hyper.n_theta, hyper.theta_bounds, hyper.x0
    scale = np.where(np.asarray(scale) > 0, scale, 1.0)
    free = np.concatenate([np.full(n_theta, 1.0 if learn_theta else 0.0), np.full(M * dim, 1.0 if learn_z else 0.0)])
    adam = Adam(options.learning_rate * free * np.concatenate([np.ones(n_theta), np.tile(scale, M)]))
    learning = learn_theta or learn_z
    sites = TiedSites.zero(M, n)
    ema, trace = np.nan, []
    step, previous = 0, x
    with small_matrix_threads():  # M x M work at every step: one BLAS thread (relaxep._threads)
        for step in range(1, options.max_steps + 1):
            kern_t, lik_t, Z_t = hyper.split(x)
            try:
                K_uu, L_uu, _ = inducing_factor(kern_t, Z_t)  # SparsePrior's K_uu (its jitter) and factor
                _, S_c, m_c, g_cav = sites.gaussian(n - 1.0)
                g_q = sites.log_partition(float(n))
            except (KernelNotPositiveDefiniteError, linalg.LinAlgError):  # K_uu not PD (q stays proper): halve the step
                adam.rates *= 0.5
                x = previous
                continue
            previous = x
            wants_gradient = learning and step > options.warmup
            view = as_scaled_rbf(kern_t, dim)
            sums = evaluate(TiedStep(view, lik_t, Z_t, K_uu, L_uu, noise, S_c, m_c, wants_gradient))
            b = sums.count
            estimate = (g_q / n) + sums.log_z / b + g_cav - g_q
            ema = estimate if np.isnan(ema) else 0.98 * ema + 0.02 * estimate
            eps = 1.0 / step if step <= options.warmup else options.damping
            sites.move_towards(sums.lam, sums.eta, b, eps)
            if wants_gradient:
                g_lik = sums.g_lik if hyper.n_likelihood else np.zeros(0)
                x = adam.step(
                    x, hyper.pack(np.concatenate([sums.g_theta, g_lik]), sums.g_z) / b, annealed(step, options)
                )
                x[:n_theta] = np.clip(x[:n_theta], bounds[:, 0], bounds[:, 1])
            if step % options.report_every == 0:
                trace.append(ema)
                if report is not None:
                    report(step, x.copy(), n * ema)
    kern_t, lik_t, Z_t = hyper.split(x)
    return Learned(kern_t, lik_t, Z_t, sites, step, np.asarray(trace))


def tied_start(learned: Learned, noise: float) -> TiedStep:
    """The :class:`~relaxep.inference.stochastic_ep.TiedStep` at the learned hyperparameters and the tied site's
    cavity (no gradient)."""
    Z = learned.Z
    K_uu, L_uu, _ = inducing_factor(learned.kernel, Z)
    _, S_c, m_c, _ = learned.sites.gaussian(learned.sites.n - 1.0)
    view = as_scaled_rbf(learned.kernel, Z.shape[1])
    return TiedStep(view, learned.likelihood, Z, K_uu, L_uu, noise, S_c, m_c, False)


def row_sites(learned: Learned, X: Array, y: Array, noise: float, n_jobs: int | None = 1) -> tuple[Array, Array]:
    """The sites that start the final full EP (:func:`sites_of_rows` at :func:`tied_start`, row blocks on
    ``n_jobs`` threads)."""
    return sites_of_rows(tied_start(learned, noise), X, y, n_jobs)
