r"""Schedules: the order and grouping in which sites are updated within one sweep.

:class:`Sequential` is the paper's schedule: visit every site once, each update followed by
a rank-one correction of the posterior.  :class:`Blocked` gives the same iterates (to
rounding) but lets the representation apply them in blocks (the dense posterior touches its
``n x n`` covariance once per block, as one BLAS-3 update).  :class:`Parallel` updates every
site from one set of cavities (a different iteration with the same fixed points) with an
adaptive step.  Schedules speak only the :class:`~relaxep.posterior.Posterior` protocol.
Sequential sweeps do not refresh the posterior; the caller refreshes once per sweep
(GPML: repeated rank-one updates lose precision).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from relaxep._params import ParamsMixin
from relaxep._typing import Array
from relaxep._validation import check_positive_int, check_unit_interval
from relaxep.errors import ImproperPosteriorError
from relaxep.inference.method import marginal_change
from relaxep.likelihoods import Likelihood
from relaxep.posterior.base import Posterior, SweepStats, cavity, is_proper
from relaxep.sites import SiteProposal, SiteRule, propose_sites

__all__ = [
    "AdaptiveStep",
    "Blocked",
    "Parallel",
    "ParallelProposals",
    "Schedule",
    "Sequential",
    "SiteUpdater",
    "as_schedule",
    "parallel_proposals",
]


class SiteUpdater:
    """A rule, a likelihood and the targets: proposes new sites in ``f``.

    Called per site by the sequential schedules, or for many sites at once
    (:meth:`propose_all`); records each site's relaxation ``b`` in ``proposed_relaxation``.
    """

    def __init__(self, rule: SiteRule, likelihood: Likelihood, y: Array) -> None:
        self.rule = rule
        self.likelihood = likelihood
        self.y = y
        self.fraction = float(rule.cavity_fraction)
        self.proposed_relaxation = np.zeros(y.shape[0])

    def __call__(
        self, i: int, cavity_mean: float, cavity_var: float, tau: float, nu: float, marginal_var: float
    ) -> tuple[float, float]:
        prop = propose_sites(self.rule, self.likelihood, self.y[i], cavity_mean, cavity_var, tau, nu, marginal_var)
        self.proposed_relaxation[i] = float(prop.relaxation)
        return float(prop.precision), float(prop.mean_precision)

    def propose_all(
        self, index: Array, cavity_mean: Array, cavity_var: Array, tau: Array, nu: Array, marginal_var: Array
    ) -> SiteProposal:
        prop = propose_sites(self.rule, self.likelihood, self.y[index], cavity_mean, cavity_var, tau, nu, marginal_var)
        self.proposed_relaxation[index] = prop.relaxation
        return prop


class Schedule(ParamsMixin, ABC):
    """How one sweep visits the sites."""

    #: whether :meth:`sweep` leaves the posterior refreshed (else the caller refreshes it)
    refreshes: ClassVar[bool] = False

    def start(self) -> Schedule:
        """The schedule for a new run (a fresh copy where it keeps state between sweeps)."""
        return self

    @abstractmethod
    def sweep(self, post: Posterior, updater: SiteUpdater, order: Array) -> SweepStats:
        """Update the sites in ``order`` once."""


class Sequential(Schedule):
    """The paper's schedule: one site at a time, each update a rank-one correction."""

    def __init__(self) -> None:
        pass

    def sweep(self, post: Posterior, updater: SiteUpdater, order: Array) -> SweepStats:
        return post.apply_sequential(order, updater, updater.fraction)


class Blocked(Schedule):
    """The sequential iterates, applied ``block_size`` sites at a time where the representation can.

    For the dense posterior: one rank-``block_size`` BLAS-3 update per block instead of
    ``block_size`` rank-one passes (faster from a few hundred sites on); same iterates to rounding.
    """

    def __init__(self, block_size: int = 64) -> None:
        check_positive_int(block_size, "block_size")
        self.block_size = block_size

    def sweep(self, post: Posterior, updater: SiteUpdater, order: Array) -> SweepStats:
        return post.apply_sequential(order, updater, updater.fraction, int(self.block_size))


@dataclass(frozen=True)
class ParallelProposals:
    r"""What :func:`parallel_proposals` returns for a block of sites (indices local to the block).

    ``index``, ``precision``, ``mean_precision``: the sites with a proper cavity and a finite
    proposal, and their proposals :math:`(\tau^*, \nu^*)`; ``improper``: the sites with an improper
    cavity; ``nonfinite``: those with a non-finite proposal.  ``direction``: the proposed change in
    the sites' own units, :math:`(\Delta\tau\, A_{ii},\ \Delta\nu \sqrt{A_{ii}})` (zero where
    skipped), and its inner products with itself (``norm_sq``) and with the last sweep's
    (``dot``, ``last_norm_sq``; ``None`` on the first sweep): sums over blocks give the whole
    sweep's, for :meth:`AdaptiveStep.observe`.
    """

    index: Array
    precision: Array
    mean_precision: Array
    improper: Array
    nonfinite: Array
    direction: Array
    norm_sq: float
    dot: float | None
    last_norm_sq: float | None

    @property
    def n_improper(self) -> int:
        return int(self.improper.size)

    @property
    def n_nonfinite(self) -> int:
        return int(self.nonfinite.size)


def parallel_proposals(
    updater: SiteUpdater, mean: Array, marginal_var: Array, tau: Array, nu: Array, last_direction: Array | None = None
) -> ParallelProposals:
    r"""One parallel sweep's proposals for a block of sites, from its marginals and sites (a pure kernel).

    Every site with a proper cavity (:func:`~relaxep.posterior.base.cavity` at the rule's
    fraction) gets the rule's proposal; improper cavities and non-finite proposals are left
    out and listed.  ``updater`` holds the block's targets (``updater.y[i]`` is site
    ``i``'s).  :class:`Parallel` calls it on all sites, :mod:`relaxep.inference.sharded` on each shard.
    """
    cav_mean, cav_var = cavity(mean, marginal_var, tau, nu, updater.fraction)
    ok = is_proper(cav_var)
    improper = np.flatnonzero(~ok)
    idx = np.flatnonzero(ok)
    prop = updater.propose_all(idx, cav_mean[idx], cav_var[idx], tau[idx], nu[idx], marginal_var[idx])
    prop_tau = np.asarray(prop.precision, dtype=float)
    prop_nu = np.asarray(prop.mean_precision, dtype=float)
    finite = np.isfinite(prop_tau) & np.isfinite(prop_nu)
    nonfinite = idx[~finite]
    idx, prop_tau, prop_nu = idx[finite], prop_tau[finite], prop_nu[finite]
    n = marginal_var.size
    direction = np.zeros(2 * n)
    direction[idx] = (prop_tau - tau[idx]) * marginal_var[idx]
    direction[n + idx] = (prop_nu - nu[idx]) * np.sqrt(marginal_var[idx])
    last = last_direction
    return ParallelProposals(
        idx,
        prop_tau,
        prop_nu,
        improper,
        nonfinite,
        direction,
        float(direction @ direction),
        None if last is None else float(direction @ last),
        None if last is None else float(last @ last),
    )


#: sweeps in a row without a reversal after which a halved parallel step doubles back
RECOVER_AFTER = 2


class AdaptiveStep:
    r"""The parallel schedule's step :math:`s`: halved after two reversals in a row, or when a step fails;
    doubled (up to its initial value) after :data:`RECOVER_AFTER` sweeps in a row without one.

    A reversal: the proposed change points back at the last one, cosine below :math:`-1/2`.
    The step never falls below ``min_step``.  Doubling back matters: two reversals early in a run
    (the first overshoots) halve the step, and a run kept at half the step converges at half speed
    (at n = 2000 with 10% flipped labels, 15 sweeps instead of 9; ``benchmarks/results/defaults.md``).
    """

    def __init__(self, step: float, min_step: float) -> None:
        self.size = float(step)
        self.initial = float(step)
        self.min_step = min_step
        self.reversals = 0
        self.calm = 0  # sweeps in a row without a reversal since the step last changed

    def halve(self) -> bool:
        """Halve the step; ``False`` (unchanged) where that would take it below ``min_step``."""
        if self.size / 2 < self.min_step:
            return False
        self.size /= 2
        return True

    def observe(self, dot: float | None, norm_sq: float, last_norm_sq: float | None) -> None:
        """Count a reversal from the sweep's :class:`ParallelProposals` inner products; damp after two in a row."""
        bounced = dot is not None and dot < -0.5 * np.sqrt(norm_sq) * np.sqrt(last_norm_sq)
        self.reversals = self.reversals + 1 if bounced else 0
        self.calm = 0 if bounced else self.calm + 1
        if self.reversals >= 2:
            self.halve()
            self.calm = 0
        elif self.calm >= RECOVER_AFTER and self.size < self.initial:
            self.size = min(2.0 * self.size, self.initial)  # the oscillation has ended: step back up
            self.calm = 0


class Parallel(Schedule):
    r"""Every site from one set of cavities, then one refresh, with an adaptive step.

    The proposals :math:`(\tau^*, \nu^*)` (:func:`parallel_proposals`) are applied with step :math:`s`:
    :math:`\tau \leftarrow \tau + s (\tau^* - \tau)` (likewise :math:`\nu`); if the resulting
    posterior is improper or not finite, :math:`s` is halved and the step retried, down to
    ``min_step`` (then :class:`~relaxep.ImproperPosteriorError`); a halved step stays so until
    :class:`AdaptiveStep` doubles it back (with ``damp_oscillation`` only).  Sites
    with improper cavities keep their parameters.  Only the marginals are refreshed each sweep;
    until a sweep first moves them by less than :data:`COARSE_ABOVE` (and for at most
    :data:`COARSE_SWEEPS` sweeps), the refresh may factorise in
    single precision (:attr:`Posterior.coarse <relaxep.posterior.base.Posterior.coarse>`), and
    such a sweep never ends a run as converged.

    With ``damp_oscillation`` the step is also halved when two sweeps in a row propose a change
    that points against the one before (their inner product, in the sites' own units
    :math:`\Delta\tau\, A_{ii}` and :math:`\Delta\nu \sqrt{A_{ii}}`, is negative): the signature of
    the period-two oscillation parallel EP falls into where it overshoots (one reversal alone is
    the ordinary first overshoot of a converging run).  Damping removes the oscillation without
    moving the fixed points (Minka 2001).  The step control is :class:`AdaptiveStep`.
    """

    refreshes: ClassVar[bool] = True

    def __init__(self, step: float = 1.0, min_step: float = 1.0 / 1024, damp_oscillation: bool = True) -> None:
        check_unit_interval(step, "step")
        check_unit_interval(min_step, "min_step")
        if not isinstance(damp_oscillation, bool | np.bool_):
            raise TypeError(f"damp_oscillation must be a bool, got {damp_oscillation!r}")
        self.step = step
        self.min_step = min_step
        self.damp_oscillation = damp_oscillation
        self._step = AdaptiveStep(step, min_step)
        self._last_direction: Array | None = None
        self._coarse_left = COARSE_SWEEPS  # sweeps that may still be coarse (0 once one moved less than COARSE_ABOVE)

    def start(self) -> Parallel:
        run = copy.copy(self)
        run._step = AdaptiveStep(self.step, self.min_step)
        run._last_direction = None
        run._coarse_left = COARSE_SWEEPS
        return run

    def sweep(self, post: Posterior, updater: SiteUpdater, order: Array) -> SweepStats:
        a = post.marginal_var.copy()
        tau, nu = post.site_precision.copy(), post.site_mean_precision.copy()
        props = parallel_proposals(updater, post.mean, a, tau, nu, self._last_direction)
        idx, prop_tau, prop_nu = props.index, props.precision, props.mean_precision
        step = self._step
        if self.damp_oscillation:
            self._last_direction = props.direction
            step.observe(props.dot, props.norm_sq, props.last_norm_sq)
        mean = post.mean.copy()
        while True:
            s = step.size
            post.set_sites(idx, tau[idx] + s * (prop_tau - tau[idx]), nu[idx] + s * (prop_nu - nu[idx]))
            try:
                post.coarse = self._coarse_left > 0
                post.refresh(marginals_only=True)
                if np.all(np.isfinite(post.mean)):
                    break
            except ImproperPosteriorError:
                pass
            post.set_sites(slice(None), tau, nu)
            if not step.halve():
                post.refresh()
                raise ImproperPosteriorError("the parallel step fell below its minimum without a proper posterior")
        coarse, post.coarse = post.coarse, False
        with np.errstate(divide="ignore", invalid="ignore"):
            moved = marginal_change(mean, a, post.mean, post.marginal_var)
        # one way: near the fixed point, or after COARSE_SWEEPS sweeps (a run that cycles), double precision
        self._coarse_left = self._coarse_left - 1 if moved > COARSE_ABOVE else 0
        skipped = np.sort(np.concatenate([props.improper, props.nonfinite]))
        return SweepStats(skipped, props.n_improper, props.n_nonfinite, step=s, coarse=coarse)


#: the last sweep moved a marginal mean by over 1% of its standard deviation, or a variance by over 1%:
#: far from the fixed point, the next refresh may be coarse (:attr:`Posterior.coarse`).  Single precision
#: moves the statistic by 1-2e-4 (measured at the fixed point, n = 1000-2000): 50-100 times below this
COARSE_ABOVE = 1e-2
#: at most this many sweeps of a run may be coarse (converging runs cross COARSE_ABOVE in 5-8)
COARSE_SWEEPS = 10

_NAMED = {"sequential": Sequential, "blocked": Blocked, "parallel": Parallel}


def as_schedule(schedule: Schedule | str) -> Schedule:
    """A schedule object, or the default one of that name (``"sequential"``, ``"blocked"``, ``"parallel"``)."""
    if isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, str) and schedule in _NAMED:
        return _NAMED[schedule]()
    raise ValueError(f"schedule must be 'blocked', 'sequential', 'parallel' or a Schedule, got {schedule!r}")
