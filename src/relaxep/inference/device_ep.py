r"""Parallel EP with the sites on the device: a sparse fit on another array library's arrays, end to end.

:class:`~relaxep.inference.SiteUpdates` with the :class:`~relaxep.inference.schedules.Parallel` schedule runs
here when the prior lives on another array library's device (a :class:`~relaxep.posterior.SparsePrior` of
PyTorch, CuPy, JAX or ``array-api-strict`` arrays, or a dense prior's device twin
:class:`~relaxep.posterior.dense_device.DeviceDensePrior`), the rule is one of the moment-matching family
(:class:`~relaxep.sites.EP`, :class:`~relaxep.sites.PowerEP`, :class:`~relaxep.sites.FractionalEP`, any damping)
or :class:`~relaxep.sites.RelaxedEP` (both variants, both penalties, any damping; its line search on the device,
:mod:`relaxep.sites.relaxed_on`, where the likelihood has :attr:`Likelihood.relaxed_on_device
<relaxep.likelihoods.Likelihood.relaxed_on_device>`: the probits, the noisy step, the logistic, the Gaussian and the
Laplace; the paper's variant with the noisy step alone, as on numpy)
and the likelihood has its tilted moments there at the rule's power (:attr:`Likelihood.tilted_on_device
<relaxep.likelihoods.Likelihood.tilted_on_device>`: the closed forms of the probit at ``u = 1``, the label-noise
step and probit at ``u = 1``, the Gaussian and the Laplace at every power, and, at ``u = 1`` only
(:attr:`~relaxep.likelihoods.Likelihood.closed_form_on_device`), ``Tobit`` and ``OrdinalProbit``; the fixed-size
sinh rule of :mod:`relaxep.likelihoods.quadrature_on` for the logistic, and for the probits at ``u < 1``; at every
power, the fixed-size two-centre rules of :mod:`relaxep.likelihoods.robust_on` for the Student-t (both modes of
its tilted) and of :mod:`relaxep.likelihoods.counts_on` for ``Poisson`` and ``NegativeBinomial``).
The other methods, and Relaxed EP on the other likelihoods, keep their sites on the host
(:class:`~relaxep.inference.SiteUpdates`' numpy loop, the rows' algebra still on the device).  Every
:math:`O(n)` step of a sweep stays where the rows are:

1. the cavities :math:`\lambda_i = (1/A_{ii} - \eta\tau_i)^{-1}`, :math:`h_i = \lambda_i(\mu_i/A_{ii} -
   \eta\nu_i)`, :math:`\eta` the fraction of the site the rule removes (1, or ``FractionalEP``'s fraction);
2. the tilted :math:`\log\hat Z_i` of :math:`p(y_i|f)^u N(f|h_i, \lambda_i)` and its derivatives
   :math:`d_1, d_2` in the cavity mean (:meth:`Likelihood.log_z_on <relaxep.likelihoods.Likelihood.log_z_on>`),
   the proposals :math:`\tau_i^* = -d_2/(1 + \lambda_i d_2)/u`, :math:`\nu_i^* = (d_1 - h_i d_2)/(1 + \lambda_i
   d_2)/u` (Rasmussen & Williams eq. 3.59; the tilted site divided by :math:`u`, as
   :mod:`relaxep.sites.power` does on numpy), damped by the rule; for Relaxed EP first its relaxation
   :math:`b_i^* = \arg\min_{b\ge0} Q(b)` (numpy's grid and zooms, :func:`~relaxep.sites.relaxed_on.relaxed_sites_on`),
   then these at the relaxed cavity :math:`((1/\lambda_i + b_i^*)^{-1}, \dots)` and ``u = 1`` (the paper's
   variant adds :math:`(b_i^*, b_i^* m_i)`), :math:`b_i^*` kept where the step takes the site;
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
result equals it to rounding where the moments are closed forms, and to the device quadrature's accuracy
(1e-8) where they are not (tested to 1e-8 with ``array-api-strict``).  The evidence takes :math:`\log\hat Z_i`
at ``u = 1`` and the full cavities whatever the rule, as :func:`~relaxep.inference.evidence.log_evidence` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from relaxep._typing import Array, Status
from relaxep._xp import ArraySpace, to_numpy
from relaxep.errors import KernelNotPositiveDefiniteError
from relaxep.inference.method import STUCK_SWEEPS, RunOptions
from relaxep.inference.result import InferenceResult, warm_posterior
from relaxep.inference.schedules import COARSE_ABOVE, COARSE_SWEEPS, AdaptiveStep, Parallel
from relaxep.inference.warm import Sites
from relaxep.likelihoods import Likelihood, NoisyStep
from relaxep.posterior import Prior, SparsePrior
from relaxep.posterior.dense_device import DeviceDensePrior
from relaxep.sites import EP, FractionalEP, PowerEP, RelaxedEP, SiteRule
from relaxep.sites.relaxed_on import relaxed_sites_on

__all__ = ["on_device", "run_on_device"]


def on_device(prior: Prior, likelihood: Likelihood, rule: SiteRule, schedule: Any, options: RunOptions) -> bool:
    """Whether :func:`run_on_device` runs this fit (module docstring): a prior on another library's device,
    EP, Power EP or fractional EP (any damping), or Relaxed EP where its line search runs there too
    (:func:`_relaxed_on`), the parallel schedule, a likelihood whose tilted moments are computed there
    (:attr:`~relaxep.likelihoods.Likelihood.tilted_on_device`, or its closed form at ``u = 1`` for EP and Relaxed
    EP), the ``"marginals"`` statistic and no per-sweep callback (which is handed a host posterior)."""
    space = getattr(prior, "space", None)
    return (
        isinstance(prior, SparsePrior | DeviceDensePrior)
        and isinstance(space, ArraySpace)
        and not space.on_host
        and (_relaxed_on(rule, likelihood) or type(rule) in _DEVICE_RULES)
        and isinstance(schedule, Parallel)
        and (likelihood.tilted_on_device or (likelihood.closed_form_on_device and _power(rule) == 1.0))
        and options.criterion == "marginals"
        and options.callback is None
    )


#: the site rules the device loop runs (the moment-matching family of :mod:`relaxep.sites.power`)
_DEVICE_RULES = (EP, PowerEP, FractionalEP)


def _relaxed_on(rule: SiteRule, likelihood: Likelihood) -> bool:
    """Whether ``rule`` is Relaxed EP and its line search runs on the device (:mod:`relaxep.sites.relaxed_on`):
    the likelihood's :attr:`~relaxep.likelihoods.Likelihood.relaxed_on_device`, and the paper's printed Q only
    where it is defined (the noisy step; elsewhere the host loop raises its error)."""
    return (
        type(rule) is RelaxedEP
        and likelihood.relaxed_on_device
        and (rule.variant != "paper" or isinstance(likelihood, NoisyStep))
    )


def _power(rule: SiteRule) -> float:
    """The power :math:`u` whose tilted moments ``rule`` matches."""
    return float(rule.tilted_power) if isinstance(rule, _DEVICE_RULES) else 1.0


@dataclass(frozen=True)
class _Update:
    r"""What a sweep's proposals need of the rule: its damping, the fraction :math:`\eta` of the site the cavity
    removes and the power :math:`u` of the tilted moments."""

    damping: float
    fraction: float
    power: float
    relaxed: RelaxedEP | None = None  # Relaxed EP: its line search (sites/relaxed_on.py) before the moments


@dataclass(frozen=True)
class _Proposals:
    """A sweep's proposals from one state, on the device, and the scalars its step needs (0-d arrays there): the
    squared norm of the change, the improper cavities, the non-finite proposals, the negative site precisions
    (now, and among those proposed: where both are 0 no step makes one, and a dense refresh needs no Woodbury
    term) and, with the last sweep's change, their inner product and that change's squared norm."""

    tau: Array
    nu: Array
    take: Array
    change: tuple[Array, Array]
    scalars: list[Any]
    cavity: tuple[Array, Array]  # (h, lambda): the true cavities where proper
    log_zhat: Array | None  # log Z_i there, which the evidence reuses (None: Relaxed EP's are at relaxed cavities)
    relaxation: Array | None = None  # Relaxed EP's b_i*


def _cavities(xp: Any, state: tuple[Array, ...], fraction: float) -> tuple[Array, Array, Array]:
    """Whether each cavity at ``fraction`` is proper, and its mean and variance there (0 and 1 elsewhere)."""
    mean, var, tau, nu = state
    if fraction == 1.0:  # (the host's cavity(), whose fraction 1 multiplies exactly)
        cav_var = 1.0 / (1.0 / var - tau)
        cav_mean = cav_var * (mean / var - nu)
    else:
        cav_var = 1.0 / (1.0 / var - fraction * tau)
        cav_mean = cav_var * (mean / var - fraction * nu)
    ok = xp.isfinite(cav_var) & (cav_var > 0.0)
    return ok, xp.where(ok, cav_mean, xp.zeros_like(cav_mean)), xp.where(ok, cav_var, xp.ones_like(cav_var))


def _propose(
    xp: Any, likelihood: Likelihood, y: Array, state: tuple[Array, ...], rule: _Update, last: tuple | None
) -> _Proposals:
    """Steps 1-2 of the module docstring at ``state = (mean, var, tau, nu)``."""
    _, var, tau, nu = state
    ok, safe_mean, safe_var = _cavities(xp, state, rule.fraction)
    log_zhat, relaxation = None, None
    if rule.relaxed is not None:  # (Relaxed EP: b* by numpy's line search, EP's moments at the relaxed cavity)
        prop_tau, prop_nu, relaxation = relaxed_sites_on(xp, rule.relaxed, likelihood, y, (safe_mean, safe_var),
                                                         (tau, nu, var), ok)  # fmt: skip
    else:
        lz = likelihood.log_z_on(xp, y, safe_mean, safe_var, rule.power)
        denom = 1.0 + safe_var * lz.d2log_z
        prop_tau, prop_nu = -lz.d2log_z / denom, (lz.dlog_z - safe_mean * lz.d2log_z) / denom
        if rule.power != 1.0:  # (the tilted site of t^u, divided by u: sites/power.py)
            prop_tau, prop_nu = prop_tau / rule.power, prop_nu / rule.power
        log_zhat = lz.log_z
    damping = rule.damping
    if damping != 1.0:
        prop_tau, prop_nu = (1.0 - damping) * tau + damping * prop_tau, (1.0 - damping) * nu + damping * prop_nu
    take = ok & xp.isfinite(prop_tau) & xp.isfinite(prop_nu)
    zero = xp.zeros_like(tau)
    d_tau = xp.where(take, (prop_tau - tau) * var, zero)
    d_nu = xp.where(take, (prop_nu - nu) * xp.sqrt(var), zero)
    negative = xp.sum(xp.astype(tau < 0.0, xp.float64)) + xp.sum(xp.astype(take & (prop_tau < 0.0), xp.float64))
    scalars = [xp.sum(d_tau * d_tau) + xp.sum(d_nu * d_nu), xp.sum(xp.astype(~ok, xp.float64)),
               xp.sum(xp.astype(ok & ~take, xp.float64)), negative]  # fmt: skip
    if last is not None:
        scalars += [xp.sum(d_tau * last[0]) + xp.sum(d_nu * last[1]), xp.sum(last[0] ** 2) + xp.sum(last[1] ** 2)]
    return _Proposals(prop_tau, prop_nu, take, (d_tau, d_nu), scalars, (safe_mean, safe_var), log_zhat, relaxation)


def _read(space: ArraySpace, values: list[Any]) -> list[float]:
    """``values`` (0-d arrays on the device, or Python numbers) on the host, in one transfer."""
    xp = space.xp
    arrays = [
        xp.asarray(float(v), dtype=xp.float64, device=space.device) if isinstance(v, bool | int | float)
        else xp.astype(v, xp.float64)
        for v in values
    ]  # fmt: skip
    return [float(v) for v in to_numpy(xp.stack(arrays))]


def _change(xp: Any, mean_old: Array, var_old: Array, mean: Array, var: Array) -> Any:
    """:func:`~relaxep.inference.method.marginal_change` in ``xp``, a 0-d array there."""
    return xp.maximum(xp.max(xp.abs(mean - mean_old) / xp.sqrt(var)), xp.max(xp.abs(xp.log(var / var_old))))


def run_on_device(
    method: Any,
    prior: SparsePrior | DeviceDensePrior,
    y: Array,
    likelihood: Likelihood,
    options: RunOptions,
    init: Sites | None,
) -> InferenceResult:
    """:meth:`SiteUpdates.run <relaxep.inference.SiteUpdates.run>` with the parallel schedule, the sites on the
    prior's device (module docstring); ``method`` is the :class:`~relaxep.inference.SiteUpdates` that runs.

    One read a sweep: a step's refresh is read back with the next sweep's proposals from it (their scalars),
    computed before the read; a step that fails drops them and is retried shorter."""
    space, n = prior.space, prior.n
    xp = space.xp
    schedule: Parallel = method.schedule if isinstance(method.schedule, Parallel) else Parallel()
    site_rule = method.site_rule
    relaxed = site_rule if isinstance(site_rule, RelaxedEP) else None
    rule = _Update(float(site_rule.damping), float(site_rule.cavity_fraction), _power(site_rule), relaxed)
    warm = warm_posterior(prior, init)
    if warm is not None:
        tau, nu = space.put(warm.site_precision), space.put(warm.site_mean_precision)
    else:
        tau, nu = space.put(np.zeros(n)), space.put(np.zeros(n))
    relaxation = None  # (Relaxed EP's b_i, the host loop's: init's where warm, updated where a step takes a site)
    if relaxed is not None:
        relaxation = space.put(init.relaxation if warm is not None and init is not None else np.zeros(n))
    yd = space.put(np.asarray(y, dtype=float))
    mean, var, log_det, _ = prior.device_pass(tau, nu)  # (proper: flat sites, or a warm start checked above)
    step = AdaptiveStep(schedule.step, schedule.min_step)
    last: tuple[Array, Array] | None = None
    props = _propose(xp, likelihood, yd, (mean, var, tau, nu), rule, last)
    values = _read(space, props.scalars)
    coarse_left = COARSE_SWEEPS
    trace: list[float] = []
    skipped: list[int] = []
    steps: list[float] = []
    status: Status = "max_sweeps"
    stuck_for, last_mask = 0, None
    for _sweep in range(options.max_sweeps):
        norm_sq, n_improper, n_nonfinite = values[0], int(values[1]), int(values[2])
        n_skipped = n_improper + n_nonfinite
        if schedule.damp_oscillation:
            dot, last_norm_sq = (values[4], values[5]) if last is not None else (None, None)
            step.observe(dot, norm_sq, last_norm_sq)
            last = props.change
        coarse, moved, taken = coarse_left > 0, None, props
        while not n_nonfinite:  # (a proposal not finite: the host loop's "diverged", after its step)
            s = step.size
            new_tau = xp.where(taken.take, tau + s * (taken.tau - tau), tau)
            new_nu = xp.where(taken.take, nu + s * (taken.nu - nu), nu)
            try:
                # (no negative precision now or proposed: none at any step, so the dense pass needs no Woodbury
                # term and reads nothing back)
                new_mean, new_var, new_log_det, ok = prior.device_pass(new_tau, new_nu, nonnegative=values[3] == 0)
            except KernelNotPositiveDefiniteError:  # (no step helps: the host loop ends the run "diverged")
                break
            if new_mean is not None:
                props = _propose(xp, likelihood, yd, (new_mean, new_var, new_tau, new_nu), rule, last)
                change = _change(xp, mean, var, new_mean, new_var)
                read = _read(space, [ok, xp.all(xp.isfinite(new_mean)), change, *props.scalars])
                if read[0] and read[1]:  # (proper, and every mean finite: the host step's test)
                    moved, values = (read[2] if np.isfinite(read[2]) else float("inf")), read[3:]
                    break
            if not step.halve():
                break
        if moved is None:
            status = "diverged"
            trace.append(float("inf"))
            skipped.append(n_skipped if n_nonfinite else n)
            steps.append(0.0)
            break
        tau, nu, mean, var, log_det = new_tau, new_nu, new_mean, new_var, new_log_det
        if relaxation is not None:
            relaxation = xp.where(taken.take, taken.relaxation, relaxation)
        coarse_left = coarse_left - 1 if moved > COARSE_ABOVE else 0
        skipped.append(n_skipped)
        steps.append(s)
        trace.append(moved)
        mask = ~taken.take
        if moved < options.tol and not coarse:  # (the host loop's: never on a sweep that may be coarse)
            if n_skipped == 0 and int(values[1]) == 0:  # (the next proposals' cavities: all proper)
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
    evidence = _evidence_terms(xp, likelihood, yd, (mean, var, tau, nu), rule, props) if status == "converged" else None
    return _result(method, prior, y, likelihood, (tau, nu, mean, var), float(log_det), evidence, status, trace,
                   skipped, steps, relaxation)  # fmt: skip


def _evidence_terms(
    xp: Any, likelihood: Likelihood, y: Array, state: tuple[Array, ...], rule: _Update, final: _Proposals
) -> Array:
    r"""The per-site terms of :math:`\log Z_{EP}` (:func:`~relaxep.inference.evidence.site_evidence_terms`):
    :math:`\log\hat Z_i + \frac12\log(1 + \lambda_i\tau_i) + \frac12(h_i^2/\lambda_i - \mu_i^2/A_{ii})` at the
    full cavities and ``u = 1`` whatever the rule, NaN where a full cavity is improper (the host's answer).  For
    EP those of ``final``, the proposals from the last state; for the others (Relaxed EP's moments were taken at
    relaxed cavities) computed here."""
    mean, var, tau, _ = state
    if rule.fraction == 1.0 and rule.power == 1.0 and final.log_zhat is not None:
        (h, lam), log_zhat, ok = final.cavity, final.log_zhat, None
    else:
        ok, h, lam = _cavities(xp, state, 1.0)
        log_zhat = likelihood.log_z_on(xp, y, h, lam, 1.0).log_z
    terms = log_zhat + 0.5 * xp.log1p(lam * tau) + 0.5 * (h**2 / lam - mean**2 / var)
    return terms if ok is None else xp.where(ok, terms, xp.full_like(terms, float("nan")))


def _result(
    method: Any,
    prior: SparsePrior | DeviceDensePrior,
    y: Array,
    likelihood: Likelihood,
    state: tuple[Array, Array, Array, Array],
    log_det: float,
    evidence: Array | None,
    status: Status,
    trace: list[float],
    skipped: list[int],
    steps: list[float],
    relaxation: Array | None = None,
) -> InferenceResult:
    r"""The run's :class:`InferenceResult`, its arrays on the host; :math:`\log Z_{EP}` (converged runs) summed on
    the device: :math:`\sum_i[\log\hat Z_i + \frac12\log(1 + \lambda_i\tau_i) + \frac12(h_i^2/\lambda_i -
    \mu_i^2/A_{ii})] + \frac12\nu^\top\mu - \frac12\log|I + KT|` (:func:`~relaxep.inference.evidence.log_evidence`),
    the per-site terms ``evidence`` (:func:`_evidence_terms`)."""
    xp = prior.space.xp
    tau, nu, mean, _ = state
    log_z = float("nan")
    if evidence is not None:
        log_z = float(xp.sum(evidence) + 0.5 * xp.sum(nu * mean)) - 0.5 * log_det
    host_tau, host_nu = to_numpy(tau), to_numpy(nu)
    post = prior.posterior(host_tau, host_nu)
    n = prior.n
    return InferenceResult(
        mean=to_numpy(mean).copy(),
        alpha=post.alpha,
        site_precision=host_tau.copy(),
        site_mean_precision=host_nu.copy(),
        relaxation=np.zeros(n) if relaxation is None else to_numpy(relaxation).copy(),
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
