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
(:class:`~relaxep.inference.SiteUpdates`' numpy arrays, the rows' algebra still on the device).

The sweep is :func:`~relaxep.inference.parallel_loop.parallel_sweeps`, numpy's own loop; this module holds what
is truly the device's (:class:`DeviceArrays`): the proposals of every site at once where the cavity is proper
(:func:`~relaxep.sites.moment_match` with :meth:`Likelihood.log_z_on <relaxep.likelihoods.Likelihood.log_z_on>` at
the rule's :attr:`~relaxep.sites.SiteRule.moment_powers`, or Relaxed EP's relaxation :math:`b_i^*` by numpy's grid
and zooms, :func:`~relaxep.sites.relaxed_on.relaxed_sites_on`, then EP's moments at the relaxed cavity), the
prior's refresh on the device (:meth:`SparsePrior.device_pass <relaxep.posterior.SparsePrior.device_pass>`,
:meth:`DeviceDensePrior.device_pass <relaxep.posterior.dense_device.DeviceDensePrior.device_pass>`), and one read of
the sweep's scalars.

A sweep reads back scalars only (the statistic, the step's inner products, the counts of skipped sites); the
sites and marginals reach the host once, when the run ends, with the evidence :math:`\log Z_{EP}`
(:func:`~relaxep.inference.evidence.log_evidence`) summed on the device.  The loop is the host's, so the
result equals numpy's to rounding where the moments are closed forms, and to the device quadrature's accuracy
(1e-8) where they are not (tested to 1e-8 with ``array-api-strict``).  The evidence takes :math:`\log\hat Z_i`
at ``u = 1`` and the full cavities whatever the rule, as :func:`~relaxep.inference.evidence.log_evidence` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from relaxep._typing import Array
from relaxep._xp import read_scalars, to_numpy
from relaxep.inference.evidence import site_evidence_terms
from relaxep.inference.ledger import RunOptions, SweepLedger
from relaxep.inference.parallel_loop import LoopEnd, parallel_sweeps
from relaxep.inference.result import InferenceResult, warm_posterior
from relaxep.inference.schedules import Parallel
from relaxep.inference.warm import Sites
from relaxep.likelihoods import Likelihood, NoisyStep
from relaxep.posterior import Prior, SparsePrior
from relaxep.posterior.base import cavity
from relaxep.posterior.dense_device import DeviceDensePrior
from relaxep.sites import RelaxedEP, SiteRule, damped, moment_match
from relaxep.sites.relaxed_on import relaxed_sites_on

__all__ = ["DeviceArrays", "on_device", "run_on_device"]


def on_device(prior: Prior, likelihood: Likelihood, rule: SiteRule, schedule: Any, options: RunOptions) -> bool:
    """Whether :func:`run_on_device` runs this fit (module docstring): a prior on another library's device,
    a moment-matching rule (:attr:`~relaxep.sites.SiteRule.moment_powers`: EP, Power EP, fractional EP, any
    damping), or Relaxed EP where its line search runs there too (:func:`_relaxed_on`), the parallel schedule, a
    likelihood whose tilted moments are computed there (:attr:`~relaxep.likelihoods.Likelihood.tilted_on_device`,
    or its closed form at ``u = 1``), the ``"marginals"`` statistic and no per-sweep callback (which is handed a
    host posterior)."""
    powers = rule.moment_powers
    return (
        isinstance(prior, SparsePrior | DeviceDensePrior)
        and not prior.space.on_host
        and (_relaxed_on(rule, likelihood) or powers is not None)
        and isinstance(schedule, Parallel)
        and (likelihood.tilted_on_device or (likelihood.closed_form_on_device and (powers or (1.0,))[0] == 1.0))
        and options.criterion == "marginals"
        and options.callback is None
    )


def _relaxed_on(rule: SiteRule, likelihood: Likelihood) -> bool:
    """Whether ``rule`` is Relaxed EP and its line search runs on the device (:mod:`relaxep.sites.relaxed_on`):
    the likelihood's :attr:`~relaxep.likelihoods.Likelihood.relaxed_on_device`, and the paper's printed Q only
    where it is defined (the noisy step; elsewhere the host loop raises its error)."""
    return (
        type(rule) is RelaxedEP
        and likelihood.relaxed_on_device
        and (rule.variant != "paper" or isinstance(likelihood, NoisyStep))
    )


class DeviceArrays:
    """The parallel sweep's helpers on another library's device (module docstring); ``prior`` refreshes,
    ``y`` the targets there."""

    eager = True

    def __init__(self, prior: SparsePrior | DeviceDensePrior, rule: SiteRule, likelihood: Likelihood, y: Array):
        self.space, self.prior, self.rule, self.likelihood, self.y = prior.space, prior, rule, likelihood, y
        self.xp = self.space.xp
        self.powers = rule.moment_powers or (1.0, float(rule.cavity_fraction))

    def propose(self, state: tuple[Array, ...]) -> tuple[Array, Array, Array, Array]:
        xp = self.xp
        _, var, tau, nu = state
        ok, safe_mean, safe_var = proper_cavities(xp, state, self.powers[1])
        if isinstance(self.rule, RelaxedEP):  # (b* by numpy's line search, EP's moments at the relaxed cavity)
            prop_tau, prop_nu, relaxation = relaxed_sites_on(xp, self.rule, self.likelihood, self.y,
                                                             (safe_mean, safe_var), (tau, nu, var), ok)  # fmt: skip
        else:
            prop_tau, prop_nu, _ = moment_match(xp, self.likelihood, self.y, safe_mean, safe_var, self.powers[0])
            relaxation = xp.zeros_like(tau)
        prop_tau, prop_nu = damped(float(self.rule.damping), tau, nu, prop_tau, prop_nu)
        return ok, prop_tau, prop_nu, relaxation

    def refresh(self, tau: Array, nu: Array, coarse: bool, nonnegative: bool) -> tuple[Any, Any, Any, Any]:
        return self.prior.device_pass(tau, nu, nonnegative=nonnegative)

    def read(self, values: list[Any]) -> list[float]:
        """``values`` (0-d arrays on the device, or Python numbers) on the host, in one transfer
        (:func:`~relaxep._xp.read_scalars`)."""
        return read_scalars(self.space, values)

    def inner(self, a: tuple[Array, Array], b: tuple[Array, Array]) -> Any:
        return self.xp.sum(a[0] * b[0]) + self.xp.sum(a[1] * b[1])

    def proper_now(self, state: tuple[Array, ...]) -> bool:  # pragma: no cover - eager: the read answers
        return bool(self.xp.all(proper_cavities(self.xp, state, self.powers[1])[0]))

    @staticmethod
    def statistic(moved: float) -> float:
        return moved

    @staticmethod
    def swept(sweep: int, mean: Array, var: Array) -> tuple[Array, Array]:
        return mean, var


def proper_cavities(xp: Any, state: tuple[Array, ...], fraction: float) -> tuple[Array, Array, Array]:
    """Whether each cavity at ``fraction`` is proper, and its mean and variance there (0 and 1 elsewhere: the
    likelihood is never asked about an improper one)."""
    cav_mean, cav_var = cavity(*state, fraction)
    ok = xp.isfinite(cav_var) & (cav_var > 0.0)
    return ok, xp.where(ok, cav_mean, xp.zeros_like(cav_mean)), xp.where(ok, cav_var, xp.ones_like(cav_var))


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
    schedule: Parallel = method.schedule if isinstance(method.schedule, Parallel) else Parallel()
    warm = warm_posterior(prior, init)
    if warm is not None:
        tau, nu = space.put(warm.site_precision), space.put(warm.site_mean_precision)
    else:
        tau, nu = space.put(np.zeros(n)), space.put(np.zeros(n))
    relaxation = space.put(init.relaxation if warm is not None and init is not None else np.zeros(n))
    yd = space.put(np.asarray(y, dtype=float))
    mean, var, log_det, _ = prior.device_pass(tau, nu)  # (proper: flat sites, or a warm start checked above)
    ledger = SweepLedger(options)
    arrays = DeviceArrays(prior, method.site_rule, likelihood, yd)
    end = parallel_sweeps(arrays, schedule, ledger, (mean, var, tau, nu, log_det), relaxation, method.on_improper)
    return _result(method, prior, y, likelihood, end, ledger, yd)


def _result(
    method: Any,
    prior: SparsePrior | DeviceDensePrior,
    y: Array,
    likelihood: Likelihood,
    end: LoopEnd,
    ledger: SweepLedger,
    yd: Array,
) -> InferenceResult:
    r"""The run's :class:`InferenceResult`, its arrays on the host; :math:`\log Z_{EP}` (converged runs) summed on
    the device: :math:`\sum_i[\log\hat Z_i + \frac12\log(1 + \lambda_i\tau_i) + \frac12(h_i^2/\lambda_i -
    \mu_i^2/A_{ii})] + \frac12\nu^\top\mu - \frac12\log|I + KT|` (:func:`~relaxep.inference.evidence.log_evidence`,
    :func:`~relaxep.inference.evidence.site_evidence_terms` in the device's namespace), at the full cavities and
    ``u = 1`` whatever the rule, NaN where a full cavity is improper (the host's answer)."""
    xp = prior.space.xp
    log_z = float("nan")
    if ledger.status == "converged":
        state = (end.mean, end.var, end.tau, end.nu)
        ok, h, lam = proper_cavities(xp, state, 1.0)
        terms = site_evidence_terms(likelihood, yd, h, lam, end.tau, end.mean, end.var, xp=xp)
        terms = xp.where(ok, terms, xp.full_like(terms, float("nan")))
        log_z = float(xp.sum(terms) + 0.5 * xp.sum(end.nu * end.mean)) - 0.5 * float(end.log_det)
    host_tau, host_nu = to_numpy(end.tau), to_numpy(end.nu)
    post = prior.posterior(host_tau, host_nu)
    return InferenceResult(
        mean=to_numpy(end.mean).copy(),
        alpha=post.alpha,
        site_precision=host_tau.copy(),
        site_mean_precision=host_nu.copy(),
        relaxation=to_numpy(end.relaxation).copy(),
        status=ledger.status,
        n_sweeps=len(ledger.trace),
        n_skipped=int(sum(ledger.skipped)),
        trace=np.asarray(ledger.trace),
        log_evidence=log_z if np.isfinite(log_z) else float("nan"),
        likelihood=likelihood,
        method=method,
        skipped_per_sweep=np.asarray(ledger.skipped, dtype=int),
        step_sizes=np.asarray(ledger.steps),
        posterior=post,
    )
