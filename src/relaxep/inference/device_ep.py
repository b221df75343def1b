r"""Parallel EP with the sites on the device: a sparse fit on another array library's arrays, end to end.

:class:`~relaxep.inference.SiteUpdates` with the :class:`~relaxep.inference.schedules.Parallel` schedule runs
here when the prior lives on another array library's device (a :class:`~relaxep.posterior.SparsePrior` of
PyTorch, CuPy, JAX or ``array-api-strict`` arrays, or a dense prior's device twin
:class:`~relaxep.posterior.dense_device.DeviceDensePrior`), the rule is :class:`~relaxep.sites.EP` and the
likelihood has its tilted moments in closed form there (:attr:`Likelihood.closed_form_on_device
<relaxep.likelihoods.Likelihood.closed_form_on_device>`: probit, the label-noise step and probit, Gaussian).
Every :math:`O(n)` step of a sweep stays where the rows are:

1. the cavities :math:`\lambda_i = (1/A_{ii} - \tau_i)^{-1}`, :math:`h_i = \lambda_i(\mu_i/A_{ii} - \nu_i)`;
2. the tilted :math:`\log\hat Z_i` and its derivatives :math:`d_1, d_2` in the cavity mean
   (:meth:`Likelihood.log_z_on <relaxep.likelihoods.Likelihood.log_z_on>`), the proposals
   :math:`\tau_i^* = -d_2/(1 + \lambda_i d_2)`, :math:`\nu_i^* = (d_1 - h_i d_2)/(1 + \lambda_i d_2)`
   (Rasmussen & Williams eq. 3.59), damped by the rule;
3. the parallel step :math:`\tau \leftarrow \tau + s(\tau^* - \tau)` with the schedule's
   :class:`~relaxep.inference.schedules.AdaptiveStep` (its inner products of the proposed changes
   :math:`(\Delta\tau_i A_{ii}, \Delta\nu_i\sqrt{A_{ii}})` are the only numbers it reads), one refresh
   (:meth:`SparsePrior.posterior_pass <relaxep.posterior.SparsePrior.posterior_pass>`: its rows stored, or
   recomputed in blocks where they do not fit; :meth:`DeviceDensePrior.posterior_pass
   <relaxep.posterior.dense_device.DeviceDensePrior.posterior_pass>`: one Cholesky factor of
   :math:`I + S^{1/2}KS^{1/2}`), the step halved where it is improper;
4. the convergence statistic :math:`\max_i\max(|\Delta\mu_i|/\sqrt{A_{ii}}, |\Delta\log A_{ii}|)`.

A sweep reads back scalars only (the statistic, the step's inner products, the counts of skipped sites); the
sites and marginals reach the host once, when the run ends, with the evidence :math:`\log Z_{EP}`
(:func:`~relaxep.inference.evidence.log_evidence`) summed on the device.  The iterates are those of the host
loop (:meth:`SiteUpdates.run <relaxep.inference.SiteUpdates.run>` with ``Parallel``), rule for rule, so the
result equals it to rounding (tested to 1e-8 with ``array-api-strict``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from relaxep._typing import Array, Status
from relaxep._xp import ArraySpace, to_numpy
from relaxep.errors import ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.inference.method import STUCK_SWEEPS, RunOptions
from relaxep.inference.result import InferenceResult, warm_posterior
from relaxep.inference.schedules import COARSE_ABOVE, COARSE_SWEEPS, AdaptiveStep, Parallel
from relaxep.inference.warm import Sites
from relaxep.likelihoods import Likelihood
from relaxep.posterior import Prior, SparsePrior
from relaxep.posterior.dense_device import DeviceDensePrior
from relaxep.sites import EP, SiteRule

__all__ = ["on_device", "run_on_device"]


def on_device(prior: Prior, likelihood: Likelihood, rule: SiteRule, schedule: Any, options: RunOptions) -> bool:
    """Whether :func:`run_on_device` runs this fit (module docstring): a prior on another library's device,
    plain EP (any damping), the parallel schedule, a likelihood with a closed form there, the ``"marginals"``
    statistic and no per-sweep callback (which is handed a host posterior)."""
    space = getattr(prior, "space", None)
    return (
        isinstance(prior, SparsePrior | DeviceDensePrior)
        and isinstance(space, ArraySpace)
        and not space.on_host
        and type(rule) is EP
        and isinstance(schedule, Parallel)
        and likelihood.closed_form_on_device
        and options.criterion == "marginals"
        and options.callback is None
    )


class _Refresh:
    """The prior's posterior pass at device sites (its ``posterior_pass``, whose last three entries are
    ``log|I + KT|``, the means and the variances): ``(mean, var, log|I + KT|)`` or its exception."""

    def __init__(self, prior: SparsePrior | DeviceDensePrior) -> None:
        self.prior = prior

    def __call__(self, tau: Array, nu: Array) -> tuple[Array, Array, float]:
        log_det, mean, var = self.prior.posterior_pass(tau, nu)[-3:]
        return mean, var, float(log_det)


def _change(xp: Any, mean_old: Array, var_old: Array, mean: Array, var: Array) -> float:
    """:func:`~relaxep.inference.method.marginal_change` in ``xp`` (one scalar read back)."""
    r = float(xp.maximum(xp.max(xp.abs(mean - mean_old) / xp.sqrt(var)), xp.max(xp.abs(xp.log(var / var_old)))))
    return r if np.isfinite(r) else float("inf")


def run_on_device(
    method: Any,
    prior: SparsePrior | DeviceDensePrior,
    y: Array,
    likelihood: Likelihood,
    options: RunOptions,
    init: Sites | None,
) -> InferenceResult:
    """:meth:`SiteUpdates.run <relaxep.inference.SiteUpdates.run>` with the parallel schedule, the sites on the
    prior's device (module docstring); ``method`` is the :class:`~relaxep.inference.SiteUpdates` that runs."""
    space, n = prior.space, prior.n
    xp = space.xp
    schedule: Parallel = method.schedule if isinstance(method.schedule, Parallel) else Parallel()
    damping = float(method.site_rule.damping)
    refresh = _Refresh(prior)
    warm = warm_posterior(prior, init)
    if warm is not None:
        tau, nu = space.put(warm.site_precision), space.put(warm.site_mean_precision)
    else:
        tau, nu = space.put(np.zeros(n)), space.put(np.zeros(n))
    yd = space.put(np.asarray(y, dtype=float))
    mean, var, log_det = refresh(tau, nu)
    step = AdaptiveStep(schedule.step, schedule.min_step)
    last: tuple[Array, Array] | None = None
    coarse_left = COARSE_SWEEPS
    trace: list[float] = []
    skipped: list[int] = []
    steps: list[float] = []
    status: Status = "max_sweeps"
    stuck_for, last_mask = 0, None
    for _sweep in range(options.max_sweeps):
        cav_var = 1.0 / (1.0 / var - tau)
        cav_mean = cav_var * (mean / var - nu)
        ok = xp.isfinite(cav_var) & (cav_var > 0.0)
        safe_var = xp.where(ok, cav_var, xp.ones_like(cav_var))
        safe_mean = xp.where(ok, cav_mean, xp.zeros_like(cav_mean))
        lz = likelihood.log_z_on(xp, yd, safe_mean, safe_var)
        denom = 1.0 + safe_var * lz.d2log_z
        prop_tau, prop_nu = -lz.d2log_z / denom, (lz.dlog_z - safe_mean * lz.d2log_z) / denom
        if damping != 1.0:
            prop_tau, prop_nu = (1.0 - damping) * tau + damping * prop_tau, (1.0 - damping) * nu + damping * prop_nu
        take = ok & xp.isfinite(prop_tau) & xp.isfinite(prop_nu)
        zero = xp.zeros_like(tau)
        d_tau = xp.where(take, (prop_tau - tau) * var, zero)
        d_nu = xp.where(take, (prop_nu - nu) * xp.sqrt(var), zero)
        sums = [
            xp.sum(d_tau * d_tau) + xp.sum(d_nu * d_nu),
            xp.sum(xp.astype(~ok, xp.float64)),
            xp.sum(xp.astype(ok & ~take, xp.float64)),
        ]
        if last is not None:
            sums += [xp.sum(d_tau * last[0]) + xp.sum(d_nu * last[1]), xp.sum(last[0] ** 2) + xp.sum(last[1] ** 2)]
        scalars = [float(v) for v in to_numpy(xp.stack(sums))]  # (the sweep's one read-back of its proposals)
        norm_sq, n_improper, n_nonfinite = scalars[0], int(scalars[1]), int(scalars[2])
        n_skipped = n_improper + n_nonfinite
        dot, last_norm_sq = (scalars[3], scalars[4]) if last is not None else (None, None)
        if schedule.damp_oscillation:
            last = (d_tau, d_nu)
            step.observe(dot, norm_sq, last_norm_sq)
        coarse = coarse_left > 0
        moved = None
        while True:
            s = step.size
            new_tau = xp.where(take, tau + s * (prop_tau - tau), tau)
            new_nu = xp.where(take, nu + s * (prop_nu - nu), nu)
            try:
                new_mean, new_var, new_log_det = refresh(new_tau, new_nu)
                change = _change(xp, mean, var, new_mean, new_var)  # (finite: so is every mean)
                if change != float("inf") or bool(xp.all(xp.isfinite(new_mean))):
                    moved = change
                    break
            except ImproperPosteriorError:
                pass
            except KernelNotPositiveDefiniteError:  # (no step helps: the host loop ends the run "diverged")
                break
            if not step.halve():
                break
        if moved is None or n_nonfinite:  # no proper step, or a proposal not finite: the host loop's "diverged"
            status = "diverged"
            trace.append(float("inf"))
            skipped.append(n if moved is None else n_skipped)
            steps.append(0.0)
            break
        tau, nu, mean, var, log_det = new_tau, new_nu, new_mean, new_var, new_log_det
        coarse_left = coarse_left - 1 if moved > COARSE_ABOVE else 0
        skipped.append(n_skipped)
        steps.append(s)
        trace.append(moved)
        mask = ~take
        if moved < options.tol and not coarse:  # (the host loop's: never on a sweep that may be coarse)
            if n_skipped == 0 and bool(xp.all(xp.isfinite(c := 1.0 / (1.0 / var - tau)) & (c > 0.0))):
                status = "converged"
                break
            same = last_mask is not None and bool(xp.all(mask == last_mask))
            stuck_for = stuck_for + 1 if same and n_skipped else 0
            if stuck_for >= STUCK_SWEEPS:
                status = "stuck"
                break
        else:
            stuck_for = 0
        last_mask = mask
        window = options.stall_window
        if window is not None and len(trace) > window and min(trace[-window:]) >= min(trace[:-window]):
            status = "abandoned"
            break
    return _result(method, prior, yd, y, likelihood, tau, nu, mean, var, log_det, status, trace, skipped, steps)


def _result(
    method: Any,
    prior: SparsePrior | DeviceDensePrior,
    yd: Array,
    y: Array,
    likelihood: Likelihood,
    tau: Array,
    nu: Array,
    mean: Array,
    var: Array,
    log_det: float,
    status: Status,
    trace: list[float],
    skipped: list[int],
    steps: list[float],
) -> InferenceResult:
    r"""The run's :class:`InferenceResult`, its arrays on the host; :math:`\log Z_{EP}` (converged runs) summed on
    the device: :math:`\sum_i[\log\hat Z_i + \frac12\log(1 + \lambda_i\tau_i) + \frac12(h_i^2/\lambda_i -
    \mu_i^2/A_{ii})] + \frac12\nu^\top\mu - \frac12\log|I + KT|` (:func:`~relaxep.inference.evidence.log_evidence`)."""
    xp = prior.space.xp
    log_z = float("nan")
    if status == "converged":
        lam = 1.0 / (1.0 / var - tau)
        h = lam * (mean / var - nu)
        terms = (
            likelihood.log_z_on(xp, yd, h, lam).log_z + 0.5 * xp.log1p(lam * tau) + 0.5 * (h**2 / lam - mean**2 / var)
        )
        log_z = float(xp.sum(terms) + 0.5 * xp.sum(nu * mean)) - 0.5 * log_det
    host_tau, host_nu = to_numpy(tau), to_numpy(nu)
    post = prior.posterior(host_tau, host_nu)
    n = prior.n
    return InferenceResult(
        mean=to_numpy(mean).copy(),
        alpha=post.alpha,
        site_precision=host_tau.copy(),
        site_mean_precision=host_nu.copy(),
        relaxation=np.zeros(n),
        status=status,
        n_sweeps=len(trace),
        n_skipped=int(sum(skipped)),
        trace=np.asarray(trace),
        log_evidence=log_z if np.isfinite(log_z) else float("nan"),
        likelihood=likelihood,
        method=method,
        skipped_per_sweep=np.asarray(skipped, dtype=int),
        step_sizes=np.asarray(steps),
        posterior=post,
    )
