r"""The stochastic search (:func:`~relaxep.estimators._stochastic.learn_stochastic`) with its steps in another
array library (:mod:`relaxep._xp`): the tied site, the cavity, :math:`K_{uu}` and its factor, the gradient's
:math:`M \times M` completion (:mod:`relaxep.inference.stochastic_device`) and the Adam steps of the kernel's
log-hyperparameters and of :math:`Z` stay on the rows' device; the host reads one short vector a step.

A step of the host's loop reads three things before it goes on: whether :math:`K_{uu}` at the new
hyperparameters has a Cholesky factor (else the Adam step is undone and its rates halved), whether the
cavity :math:`I + (n-1)\Lambda` has one, and whether the site step keeps :math:`I + n\Lambda` positive
definite (else :math:`\epsilon` is halved).  Here step :math:`t` computes the candidate site step, the Adam
step and :math:`K_{uu}` at step :math:`t+1`'s hyperparameters without waiting, then reads their flags with
the evidence estimate's three log-partitions in one transfer (:func:`~relaxep.inference.stochastic_device.
read_scalars`): a failed :math:`K_{uu}` is handled at the top of step :math:`t+1`, as the host's loop does,
before a minibatch is drawn, and the rare failed site step halves :math:`\epsilon` with one read a try.  A
library whose Cholesky raises (array-api-strict) says so at once.  Steps that do not move the hyperparameters
(the warm-up) keep :math:`K_{uu}` and its factor.  The likelihood's own hyperparameters, where it has any,
stay on the host (their gradient needs the rows' cavities there).  Every operation is the host loop's, in its
order: on array-api-strict the search repeats numpy's to rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep._xp import ArraySpace, to_numpy
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._stochastic_steps import Adam, Learned, StochasticOptions, annealed
from relaxep.inference.stochastic_device import DeviceTiedSites, inducing_factor_on, read_scalars, view_on
from relaxep.inference.stochastic_ep import MinibatchSums, TiedStep
from relaxep.likelihoods import Likelihood
from relaxep.posterior.rbf import as_scaled_rbf

__all__ = ["learn_on_device"]


class _State:
    """Where the search stands: the kernel's log-hyperparameters and ``Z`` (``space``'s arrays), the likelihood's
    (numpy), and :math:`K_{uu}` at them with its factor and the factor's flag (read: a float)."""

    def __init__(self, theta: Any, lik_theta: Array, Z: Any, factor: tuple[Any, Any, Any]) -> None:
        self.theta, self.lik_theta, self.Z, self.factor = theta, lik_theta, Z, factor


def learn_on_device(
    kernel: Kernel,
    likelihood: Likelihood,
    Z: Array,
    n: int,
    scale: Array,
    noise: float,
    learn_theta: bool,
    learn_z: bool,
    evaluate: Callable[[TiedStep], MinibatchSums],
    options: StochasticOptions,
    report: Callable[[int, Array, float], None] | None,
    space: ArraySpace,
) -> Learned:
    """:func:`~relaxep.estimators._stochastic.learn_stochastic` with its steps in ``space`` (module docstring);
    ``evaluate`` gives a minibatch's sums there (:func:`~relaxep.estimators._stochastic.local_batches` on
    ``space``'s rows).  The same arguments, the same answer to rounding; the learned sites come back to the host
    once, at the end."""
    xp = space.xp
    M, dim = Z.shape
    hyper = HyperVector(kernel, likelihood, Z)
    n_kernel, n_theta, bounds, x0 = hyper.n_kernel, hyper.n_theta, hyper.theta_bounds, hyper.x0
    scale = np.where(np.asarray(scale) > 0, scale, 1.0)
    free = np.concatenate([np.full(n_theta, 1.0 if learn_theta else 0.0), np.full(M * dim, 1.0 if learn_z else 0.0)])
    rates = options.learning_rate * free * np.concatenate([np.ones(n_theta), np.tile(scale, M)])
    adams = (  # the host's Adam split by blocks (it is elementwise): the kernel's, the likelihood's, Z's
        Adam(space.put(rates[:n_kernel]), xp=xp),
        Adam(rates[n_kernel:n_theta]),
        Adam(space.put(np.reshape(rates[n_theta:], (M, dim))), xp=xp),
    )
    low, high = space.put(bounds[:n_kernel, 0]), space.put(bounds[:n_kernel, 1])
    template = as_scaled_rbf(kernel, dim)
    template = replace(template, length_scale=space.put(template.length_scale))  # (a fixed one, moved once)

    def factor_at(theta: Any, Z: Any) -> tuple[Any, Any, Any]:
        return inducing_factor_on(space, view_on(template, theta, xp), Z)

    theta, Z_dev = space.put(x0[:n_kernel]), space.put(np.reshape(x0[n_theta:], (M, dim)))
    factor = factor_at(theta, Z_dev)
    state = _State(theta, x0[n_kernel:n_theta], Z_dev, (*factor[:2], read_scalars(space, [factor[2]])[0]))
    previous = state
    learning = learn_theta or learn_z
    sites = DeviceTiedSites.zero(space, M, n)
    ema, trace = np.nan, []
    step = 0
    for step in range(1, options.max_steps + 1):
        K_uu, L_uu, kuu_ok = state.factor
        S_c, m_c, g_cav, cavity_ok = sites.gaussian(n - 1.0) if kuu_ok else (None, None, None, False)
        if not kuu_ok or cavity_ok is False:  # K_uu not PD (q stays proper): halve the step
            _halve(adams)
            state = previous
            continue
        wants_gradient = learning and step > options.warmup
        lik_t = likelihood.clone_with_theta(state.lik_theta) if hyper.n_likelihood else likelihood
        view = view_on(template, state.theta, xp)
        sums = evaluate(TiedStep(view, lik_t, state.Z, K_uu, L_uu, noise, S_c, m_c, wants_gradient, space))
        b = sums.count
        eps = 1.0 / step if step <= options.warmup else options.damping
        proposal = sites.propose(sums.lam, sums.eta, b, eps)
        moments = [(adam.m, adam.v, adam.t) for adam in adams]
        after = state
        if wants_gradient:
            after = _adam_step(state, adams, sums, b, annealed(step, options), bounds, low, high, xp)
            if step < options.max_steps:  # K_uu at the next step's point, its flag read with this step's
                after.factor = factor_at(after.theta, after.Z)
        g_q = sites.log_partition_q()
        ok, next_ok, cavity, g_q, log_z, g_cav = read_scalars(
            space, [proposal.ok, after.factor[2], cavity_ok, g_q, sums.log_z, g_cav]
        )  # the step's one read
        if not cavity:  # (a library whose Cholesky flags, not raises: as the host, this step undone)
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
    low: Any,
    high: Any,
    xp: Any,
) -> _State:
    """The Adam steps of the three blocks on the minibatch's mean gradient, the log-hyperparameters clipped to their
    bounds (numpy's ``clip``: a maximum, then a minimum); :math:`K_{uu}` at the new point is the caller's."""
    adam_k, adam_l, adam_z = adams
    theta = adam_k.step(state.theta, sums.g_theta / b, factor)
    theta = xp.minimum(xp.maximum(theta, low), high)
    lik_theta = state.lik_theta
    if lik_theta.size:
        n_kernel = bounds.shape[0] - lik_theta.size
        lik_theta = np.clip(adam_l.step(lik_theta, sums.g_lik / b, factor), bounds[n_kernel:, 0], bounds[n_kernel:, 1])
    return _State(theta, lik_theta, adam_z.step(state.Z, sums.g_z / b, factor), state.factor)


def _halve(adams: tuple[Adam, ...]) -> None:
    """Halve every block's rates (the host's ``adam.rates *= 0.5``)."""
    for adam in adams:
        adam.rates = adam.rates * 0.5


def _host_x(state: _State, space: ArraySpace) -> Array:
    """The search's vector ``(theta, likelihood theta, vec Z)`` on the host, the device's part in one transfer."""
    xp = space.xp
    both = to_numpy(xp.concat([state.theta, xp.reshape(state.Z, (-1,))]))
    n_kernel = state.theta.shape[0]
    return np.concatenate([both[:n_kernel], state.lik_theta, both[n_kernel:]])
