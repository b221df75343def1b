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
from typing import ClassVar

import numpy as np

from relaxep._params import ParamsMixin
from relaxep._typing import Array
from relaxep._validation import check_positive_int, check_unit_interval
from relaxep.errors import ImproperPosteriorError
from relaxep.likelihoods import Likelihood
from relaxep.posterior.base import Posterior, SweepStats, is_proper
from relaxep.sites import SiteProposal, SiteRule, propose_sites

__all__ = ["Blocked", "Parallel", "Schedule", "Sequential", "SiteUpdater", "as_schedule"]


class SiteUpdater:
    """A rule, a likelihood and the targets: proposes new sites in ``f``.

    Called per site by the sequential schedules, or for many sites at once
    (:meth:`propose_all`); records each site's relaxation ``b`` in ``proposed_relaxation``.
    """

    def __init__(self, rule: SiteRule, likelihood: Likelihood, labels: Array) -> None:
        self.rule = rule
        self.likelihood = likelihood
        self.labels = labels
        self.fraction = float(rule.cavity_fraction)
        self.proposed_relaxation = np.zeros(labels.shape[0])

    def __call__(
        self, i: int, cavity_mean: float, cavity_var: float, tau: float, nu: float, marginal_var: float
    ) -> tuple[float, float]:
        prop = propose_sites(self.rule, self.likelihood, self.labels[i], cavity_mean, cavity_var, tau, nu, marginal_var)
        self.proposed_relaxation[i] = float(prop.relaxation)
        return float(prop.precision), float(prop.mean_precision)

    def propose_all(
        self, index: Array, cavity_mean: Array, cavity_var: Array, tau: Array, nu: Array, marginal_var: Array
    ) -> SiteProposal:
        prop = propose_sites(
            self.rule, self.likelihood, self.labels[index], cavity_mean, cavity_var, tau, nu, marginal_var
        )
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


class Parallel(Schedule):
    r"""Every site from one set of cavities, then one refresh, with an adaptive step.

    The proposals :math:`(\tau^*, \nu^*)` are applied with step :math:`s`:
    :math:`\tau \leftarrow \tau + s (\tau^* - \tau)` (likewise :math:`\nu`); if the resulting
    posterior is improper or not finite, :math:`s` is halved (for the rest of the run) and the
    step retried, down to ``min_step`` (then :class:`~relaxep.ImproperPosteriorError`).  Sites
    with improper cavities keep their parameters.  Only the marginals are refreshed each sweep.

    With ``damp_oscillation`` the step is also halved when two sweeps in a row propose a change
    that points against the one before (their inner product, in the sites' own units
    :math:`\Delta\tau\, A_{ii}` and :math:`\Delta\nu \sqrt{A_{ii}}`, is negative): the signature of
    the period-two oscillation parallel EP falls into where it overshoots (one reversal alone is
    the ordinary first overshoot of a converging run).  Damping removes the oscillation without
    moving the fixed points (Minka 2001).
    """

    refreshes: ClassVar[bool] = True

    def __init__(self, step: float = 1.0, min_step: float = 1.0 / 1024, damp_oscillation: bool = True) -> None:
        check_unit_interval(step, "parallel step")
        check_unit_interval(min_step, "min_step")
        if not isinstance(damp_oscillation, bool | np.bool_):
            raise TypeError(f"damp_oscillation must be a bool, got {damp_oscillation!r}")
        self.step = step
        self.min_step = min_step
        self.damp_oscillation = damp_oscillation
        self._size = float(step)
        self._last_direction: Array | None = None
        self._reversals = 0

    def start(self) -> Parallel:
        run = copy.copy(self)
        run._size = float(self.step)
        run._last_direction = None
        run._reversals = 0
        return run

    def _damp_if_reversed(self, index: Array, d_tau: Array, d_nu: Array, marginal_var: Array) -> None:
        direction = np.zeros(2 * marginal_var.size)
        direction[index] = d_tau * marginal_var[index]
        direction[marginal_var.size + index] = d_nu * np.sqrt(marginal_var[index])
        last, self._last_direction = self._last_direction, direction
        # a reversal: the change points back (cosine below -1/2) at the last one
        bounced = last is not None and float(direction @ last) < -0.5 * np.linalg.norm(direction) * np.linalg.norm(last)
        self._reversals = self._reversals + 1 if bounced else 0
        if self._reversals >= 2 and self._size / 2 >= self.min_step:  # twice in a row
            self._size /= 2

    def sweep(self, post: Posterior, updater: SiteUpdater, order: Array) -> SweepStats:
        a = post.marginal_var.copy()
        tau, nu = post.site_precision.copy(), post.site_mean_precision.copy()
        cav_mean, cav_var = post.cavities(slice(None), updater.fraction)
        ok = is_proper(cav_var)
        improper = np.flatnonzero(~ok)
        idx = np.flatnonzero(ok)
        prop = updater.propose_all(idx, cav_mean[idx], cav_var[idx], tau[idx], nu[idx], a[idx])
        prop_tau = np.asarray(prop.precision, dtype=float)
        prop_nu = np.asarray(prop.mean_precision, dtype=float)
        finite = np.isfinite(prop_tau) & np.isfinite(prop_nu)
        nonfinite = idx[~finite]
        idx, prop_tau, prop_nu = idx[finite], prop_tau[finite], prop_nu[finite]
        if self.damp_oscillation:
            self._damp_if_reversed(idx, prop_tau - tau[idx], prop_nu - nu[idx], a)
        while True:
            s = self._size
            post.set_sites(idx, tau[idx] + s * (prop_tau - tau[idx]), nu[idx] + s * (prop_nu - nu[idx]))
            try:
                post.refresh(marginals_only=True)
                if np.all(np.isfinite(post.mean)):
                    break
            except ImproperPosteriorError:
                pass
            post.set_sites(slice(None), tau, nu)
            if self._size / 2 < self.min_step:
                post.refresh()
                raise ImproperPosteriorError("the parallel step fell below its minimum without a proper posterior")
            self._size /= 2
        skipped = np.sort(np.concatenate([improper, nonfinite]))
        return SweepStats(skipped, int(improper.size), int(nonfinite.size), step=s)


_NAMED = {"sequential": Sequential, "blocked": Blocked, "parallel": Parallel}


def as_schedule(schedule: Schedule | str) -> Schedule:
    """A schedule object, or the default one of that name (``"sequential"``, ``"blocked"``, ``"parallel"``)."""
    if isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, str) and schedule in _NAMED:
        return _NAMED[schedule]()
    raise ValueError(f"schedule must be 'blocked', 'sequential', 'parallel' or a Schedule, got {schedule!r}")
