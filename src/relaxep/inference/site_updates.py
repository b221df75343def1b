r"""Site updates: a site rule swept over the sites by a schedule until the sites stop changing.

One sweep visits every site (in a fixed or random order) through the schedule; the
posterior is then refreshed from the sites by one factorisation (GPML: repeated rank-one
updates lose precision), and the convergence statistic is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np
from scipy import linalg

from relaxep._typing import Array
from relaxep.errors import ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.inference.device_ep import on_device, run_on_device
from relaxep.inference.ledger import RunOptions, SweepLedger
from relaxep.inference.method import InferenceMethod
from relaxep.inference.parallel_loop import HostArrays, parallel_sweeps
from relaxep.inference.result import InferenceResult, make_result, warm_posterior
from relaxep.inference.schedules import Parallel, Schedule, SiteUpdater, as_schedule
from relaxep.inference.warm import Sites
from relaxep.likelihoods import Likelihood
from relaxep.posterior import Posterior, Prior
from relaxep.posterior.base import is_proper
from relaxep.sites import EP, SiteRule

__all__ = ["SiteUpdates", "SweepOptions"]


#: what a failing sweep or refresh raises: the run ends as "diverged" with the last proper posterior
_FAILURES = (ImproperPosteriorError, KernelNotPositiveDefiniteError, linalg.LinAlgError)


@dataclass(frozen=True)
class SweepOptions:
    """How a site rule is swept: the schedule, the site order and its seed, and what an improper
    cavity does (the options :class:`SiteUpdates`, :class:`~relaxep.inference.Auto` and
    :func:`~relaxep.infer` share; validated here, once)."""

    schedule: Schedule | str = "blocked"
    order: Literal["fixed", "random"] = "fixed"
    random_state: int | np.random.Generator | None = None
    on_improper: Literal["skip", "raise"] = "skip"

    def __post_init__(self) -> None:
        as_schedule(self.schedule)
        if self.order not in ("fixed", "random"):
            raise ValueError(f"order must be 'fixed' or 'random', got {self.order!r}")
        if self.on_improper not in ("skip", "raise"):
            raise ValueError(f"on_improper must be 'skip' or 'raise', got {self.on_improper!r}")

    def changed(self) -> list[str]:
        """The options that differ from their defaults."""
        return [k for k, v in self.as_kwargs().items() if v is not _DEFAULT_SWEEPS[k] and v != _DEFAULT_SWEEPS[k]]

    def as_kwargs(self) -> dict[str, Any]:
        """The options by name, the objects as given (a generator is shared, not copied)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def site_updates(self, rule: SiteRule | None) -> SiteUpdates:
        """``rule`` swept with these options."""
        return SiteUpdates(rule, **self.as_kwargs())


class SiteUpdates(InferenceMethod):
    """EP-style inference: ``rule`` applied to every site, sweep after sweep, by ``schedule``.

    Parameters
    ----------
    rule : SiteRule
        ``EP()``, ``PowerEP(u)``, ``FractionalEP(fraction)``, ``RelaxedEP(c)``.
    schedule : Schedule or {"blocked", "sequential", "parallel"}
        :class:`~relaxep.inference.schedules.Blocked` (default; the paper's sequential iterates in
        BLAS-3 blocks), :class:`~relaxep.inference.schedules.Sequential` or
        :class:`~relaxep.inference.schedules.Parallel`.
    order : {"fixed", "random"}
        Site order within a sweep; ``"random"`` draws a permutation per sweep.
    random_state : int, Generator or None
        Seed for ``order="random"``.
    on_improper : {"skip", "raise"}
        An improper cavity is skipped and counted (default), or raises
        :class:`~relaxep.ImproperPosteriorError`.
    """

    def __init__(
        self,
        rule: SiteRule | None = None,
        schedule: Schedule | str = "blocked",
        order: Literal["fixed", "random"] = "fixed",
        random_state: int | np.random.Generator | None = None,
        on_improper: Literal["skip", "raise"] = "skip",
    ) -> None:
        if rule is not None and not isinstance(rule, SiteRule):
            raise TypeError(f"rule must be a relaxep SiteRule (EP, PowerEP, FractionalEP, RelaxedEP), got {rule!r}")
        SweepOptions(schedule, order, random_state, on_improper)
        self.rule = rule
        self.schedule = schedule
        self.order = order
        self.random_state = random_state
        self.on_improper = on_improper

    def tolerance(self, tol: float) -> float:
        """A damped step shortens every change by its step, so the tolerance is tightened by it (Minka)."""
        return tol * float(self.site_rule.damping)

    @property
    def site_rule(self) -> SiteRule:
        """The rule that runs (``rule``, or ``EP()`` where it is ``None``)."""
        return EP() if self.rule is None else self.rule

    def run(
        self, prior: Prior, y: Array, likelihood: Likelihood, options: RunOptions, init: Sites | None = None
    ) -> InferenceResult:
        schedule = as_schedule(self.schedule)
        if on_device(prior, likelihood, self.site_rule, schedule, options):
            return run_on_device(self, prior, y, likelihood, options, init)  # the sites where the rows are
        post = warm_posterior(prior, init)
        relaxation = init.relaxation.copy() if post is not None else np.zeros(prior.n)
        post = prior.posterior() if post is None else post
        updater = SiteUpdater(self.site_rule, likelihood, y)
        ledger = SweepLedger(options, post)
        if isinstance(schedule, Parallel):  # (the one parallel loop, on numpy's arrays)
            state = (post.mean.copy(), post.marginal_var.copy(), post.site_precision.copy(),
                     post.site_mean_precision.copy(), None)  # fmt: skip
            end = parallel_sweeps(HostArrays(post, updater, ledger), schedule, ledger, state, relaxation,
                                  self.on_improper)  # fmt: skip
            relaxation = end.relaxation
            if ledger.status == "diverged":
                try:
                    post = prior.posterior(end.tau, end.nu)
                except ImproperPosteriorError:  # (its last sites improper: the last proper posterior, diverged)
                    pass
        else:
            post, relaxation = self._sequential(prior, post, updater, ledger, relaxation)
        status = ledger.status
        return make_result(self, post, y, likelihood, status, ledger.trace, ledger.skipped, relaxation, ledger.steps)

    def _sequential(
        self, prior: Prior, post: Posterior, updater: SiteUpdater, ledger: SweepLedger, relaxation: Array
    ) -> tuple[Posterior, Array]:
        """The sequential schedules' host loop (one site after another, a refresh a sweep), into ``ledger``."""
        n, options = prior.n, ledger.options
        rng = np.random.default_rng(self.random_state)
        schedule = as_schedule(self.schedule).start()
        for sweep in range(options.max_sweeps):
            saved = (post.site_precision.copy(), post.site_mean_precision.copy(), relaxation.copy())
            order = rng.permutation(n) if self.order == "random" else np.arange(n)
            stats = None
            try:
                stats = schedule.sweep(post, updater, order)
            except _FAILURES:
                pass  # no proper posterior: diverged below, every site counted
            if stats is not None and stats.n_improper_cavities and self.on_improper == "raise":
                raise ImproperPosteriorError(f"{stats.n_improper_cavities} improper cavities in sweep {sweep + 1}")
            if stats is not None and options.callback is not None:
                options.callback(sweep, post)  # outside the try: an error in the caller's code is the caller's
            healthy = False
            if stats is not None and not stats.n_nonfinite:
                try:
                    if not schedule.refreshes:
                        post.refresh()
                    healthy = bool(np.all(np.isfinite(post.mean)))
                except _FAILURES:
                    healthy = False
            if not healthy:
                ledger.diverge(n if stats is None else stats.n_skipped)
                return prior.posterior(saved[0], saved[1]), saved[2]
            accepted = np.ones(n, dtype=bool)
            accepted[stats.skipped] = False
            relaxation[accepted] = updater.proposed_relaxation[accepted]
            proper = lambda: bool(np.all(is_proper(post.cavities(slice(None), updater.fraction)[1])))  # noqa: E731
            r = ledger.statistic(post)
            if ledger.sweep(r, stats.n_skipped, stats.step, skipped_sites=stats.skipped, coarse=stats.coarse,
                            proper=proper):  # fmt: skip
                break
        return post, relaxation


_DEFAULT_SWEEPS = SweepOptions().as_kwargs()
