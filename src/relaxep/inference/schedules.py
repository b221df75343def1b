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

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from relaxep._params import ParamsMixin
from relaxep._typing import Array
from relaxep._validation import check_positive_int, check_unit_interval
from relaxep.inference.ledger import COARSE_ABOVE, COARSE_SWEEPS
from relaxep.likelihoods import Likelihood
from relaxep.posterior.base import Posterior, SweepStats, cavity, is_proper
from relaxep.sites import SiteProposal, SiteRule, propose_sites

__all__ = [
    "COARSE_ABOVE",
    "COARSE_SWEEPS",
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
    ``min_step`` (then the run ends ``"diverged"``); a halved step stays so until
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

    The sweeps run as :func:`~relaxep.inference.parallel_loop.parallel_sweeps`, one loop for numpy's arrays and
    another library's; this object holds the options.
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

    def sweep(self, post: Posterior, updater: SiteUpdater, order: Array) -> SweepStats:
        """Not one sweep alone: the parallel schedule keeps a step, a last change and the coarse rule across
        sweeps, and runs as :func:`relaxep.inference.parallel_loop.parallel_sweeps` (numpy's or a device's)."""
        raise TypeError("the parallel schedule runs through relaxep.inference.parallel_loop.parallel_sweeps")


_NAMED = {"sequential": Sequential, "blocked": Blocked, "parallel": Parallel}


def as_schedule(schedule: Schedule | str) -> Schedule:
    """A schedule object, or the default one of that name (``"sequential"``, ``"blocked"``, ``"parallel"``)."""
    if isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, str) and schedule in _NAMED:
        return _NAMED[schedule]()
    raise ValueError(f"schedule must be 'blocked', 'sequential', 'parallel' or a Schedule, got {schedule!r}")
