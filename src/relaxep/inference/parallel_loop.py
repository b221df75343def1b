r"""The parallel EP sweep, written once against the array API: numpy's loop and every other library's.

:class:`~relaxep.inference.SiteUpdates` with the :class:`~relaxep.inference.schedules.Parallel` schedule runs
:func:`parallel_sweeps` on numpy arrays (:class:`HostArrays`: the rule's own update, the posterior object's
refresh, a BLAS inner product) or on another library's device (:mod:`relaxep.inference.device_ep`'s
``DeviceArrays``: :func:`~relaxep.sites.moment_match` or Relaxed EP's streamed line search there, the prior's
``device_pass``, one read of the sweep's scalars).  The helpers are chosen once, before the loop; the loop is one:

1. the cavities at the rule's fraction :math:`\eta`, :math:`\lambda_i = (1/A_{ii} - \eta\tau_i)^{-1}`,
   :math:`h_i = \lambda_i(\mu_i/A_{ii} - \eta\nu_i)` (:func:`~relaxep.posterior.base.cavity`);
2. the rule's damped proposals :math:`(\tau_i^*, \nu_i^*)` where the cavity is proper; a site whose proposal is
   not finite ends the run ``"diverged"``;
3. the step :math:`\tau \leftarrow \tau + s(\tau^* - \tau)` (likewise :math:`\nu`) with
   :class:`~relaxep.inference.schedules.AdaptiveStep` (the inner products of the proposed changes in the sites'
   own units, :math:`(\Delta\tau_i A_{ii}, \Delta\nu_i\sqrt{A_{ii}})`, are the only numbers it reads), one
   refresh of the marginals, the step halved where it is improper or not finite, down to ``min_step``;
4. the convergence statistic :math:`\max_i\max(|\Delta\mu_i|/\sqrt{A_{ii}}, |\Delta\log A_{ii}|)`
   (:func:`~relaxep.inference.method.change_statistic`), and the run's ledger
   (:class:`~relaxep.inference.ledger.SweepLedger`: the coarse rule, converged, stuck, abandoned).

Where reading a number costs a transfer (:attr:`SweepArrays.eager`), a step's refresh is read back together with
the next sweep's proposals from it (their scalars), computed before the read: one read a sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
from scipy import linalg

from relaxep._typing import Array
from relaxep.errors import ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.inference.ledger import SweepLedger, change_statistic
from relaxep.inference.schedules import AdaptiveStep, Parallel, SiteUpdater
from relaxep.posterior.base import Posterior, cavity, is_proper

__all__ = ["FATAL", "HostArrays", "Proposals", "SweepArrays", "parallel_sweeps", "proposals"]

#: what a refresh raises where no step helps (``K`` not positive semi-definite): the run ends "diverged"
FATAL = (KernelNotPositiveDefiniteError, linalg.LinAlgError)


class SweepArrays(Protocol):
    """Where a parallel sweep's arrays live and the few things that differ there (chosen once a run)."""

    xp: Any
    #: compute the next sweep's proposals before reading a step's refresh (one read a sweep)
    eager: bool

    def propose(self, state: tuple[Array, ...]) -> tuple[Array, Array, Array, Array]:
        """``(proper, tau*, nu*, b*)`` at ``state = (mean, var, tau, nu)``: the cavities that are proper and
        the rule's damped proposals there (anything elsewhere), Relaxed EP's relaxation (else 0)."""

    def refresh(self, tau: Array, nu: Array, coarse: bool, nonnegative: bool) -> tuple[Any, Any, Any, Any]:
        """``(mean, var, log|I + KT|, ok)`` from the sites (``mean`` ``None`` where improper); raises
        :data:`FATAL` where no step would help."""

    def read(self, values: list[Any]) -> list[float]:
        """``values`` (0-d arrays or numbers) as host floats."""

    def inner(self, a: tuple[Array, Array], b: tuple[Array, Array]) -> Any:
        """The inner product of two changes ``(d_tau, d_nu)``."""

    def proper_now(self, state: tuple[Array, ...]) -> bool:
        """Whether every cavity at ``state`` is proper (asked only where a run would converge)."""

    def statistic(self, moved: float) -> float:
        """The run's convergence statistic, given the ``"marginals"`` one ``moved``."""

    def swept(self, sweep: int, mean: Array, var: Array) -> tuple[Array, Array]:
        """After a sweep's step (the caller's callback): the marginals the next sweep starts from."""


@dataclass(frozen=True)
class Proposals:
    """A sweep's proposals from one state: ``tau``, ``nu`` and ``relaxation`` (full length), where they are taken,
    the change in the sites' units ``(d_tau, d_nu)`` (0 elsewhere) and the scalars its step needs, uncomputed
    (0-d arrays on a device): the squared norm of the change, the improper cavities, the non-finite proposals,
    the negative site precisions now and among those proposed (a dense device refresh needs no Woodbury term
    where there are none) and, with the last sweep's change, their inner product and that change's squared norm."""

    tau: Array
    nu: Array
    relaxation: Array
    take: Array
    change: tuple[Array, Array]
    scalars: list[Any]


def proposals(arrays: SweepArrays, state: tuple[Array, ...], last: tuple[Array, Array] | None) -> Proposals:
    """Steps 1-2 of the module docstring at ``state = (mean, var, tau, nu)``."""
    xp = arrays.xp
    _, var, tau, nu = state
    ok, prop_tau, prop_nu, relaxation = arrays.propose(state)
    with np.errstate(invalid="ignore", over="ignore"):
        take = ok & xp.isfinite(prop_tau) & xp.isfinite(prop_nu)
        zero = xp.zeros_like(tau)
        d_tau = xp.where(take, (prop_tau - tau) * var, zero)
        d_nu = xp.where(take, (prop_nu - nu) * xp.sqrt(var), zero)
    negative = _count(xp, tau < 0.0) + _count(xp, take & (prop_tau < 0.0))
    scalars = [arrays.inner((d_tau, d_nu), (d_tau, d_nu)), _count(xp, ~ok), _count(xp, ok & ~take), negative]
    if last is not None:
        scalars += [arrays.inner((d_tau, d_nu), last), arrays.inner(last, last)]
    return Proposals(prop_tau, prop_nu, relaxation, take, (d_tau, d_nu), scalars)


def _count(xp: Any, mask: Array) -> Any:
    return xp.sum(xp.astype(mask, xp.float64))


@dataclass
class LoopEnd:
    """Where :func:`parallel_sweeps` stopped: the last accepted state, its log-determinant and relaxation."""

    mean: Array
    var: Array
    tau: Array
    nu: Array
    log_det: Any
    relaxation: Array


def parallel_sweeps(
    arrays: SweepArrays,
    schedule: Parallel,
    ledger: SweepLedger,
    state: tuple[Array, Array, Array, Array, Any],
    relaxation: Array,
    on_improper: Literal["skip", "raise"] = "skip",
) -> LoopEnd:
    """Sweep from ``state = (mean, var, tau, nu, log_det)`` until ``ledger`` stops the run (module docstring);
    the status is ``ledger.status``."""
    xp = arrays.xp
    mean, var, tau, nu, log_det = state
    n = tau.shape[0]
    step = AdaptiveStep(schedule.step, schedule.min_step)
    last: tuple[Array, Array] | None = None
    props: Proposals | None = None
    values: list[float] = []
    for sweep in range(ledger.options.max_sweeps):
        if props is None:
            props = proposals(arrays, (mean, var, tau, nu), last)
            values = arrays.read(props.scalars)
        norm_sq, n_improper, n_nonfinite = values[0], int(values[1]), int(values[2])
        n_skipped = n_improper + n_nonfinite
        if schedule.damp_oscillation:
            dot, last_norm_sq = (values[4], values[5]) if last is not None else (None, None)
            step.observe(dot, norm_sq, last_norm_sq)
            last = props.change
        coarse, moved, taken, following = ledger.coarse, None, props, None
        while not n_nonfinite:  # (a proposal not finite: "diverged", no step taken)
            s = step.size
            new_tau = xp.where(taken.take, tau + s * (taken.tau - tau), tau)
            new_nu = xp.where(taken.take, nu + s * (taken.nu - nu), nu)
            try:  # (no negative precision now or proposed: none at any step; a dense device pass reads nothing)
                new_mean, new_var, new_log_det, ok = arrays.refresh(new_tau, new_nu, coarse, values[3] == 0)
            except FATAL:
                break
            if new_mean is not None:
                new_state = (new_mean, new_var, new_tau, new_nu)
                following = proposals(arrays, new_state, last) if arrays.eager else None
                with np.errstate(divide="ignore", invalid="ignore"):
                    change = change_statistic(xp, mean, var, new_mean, new_var)
                more = [] if following is None else following.scalars
                read = arrays.read([ok, xp.all(xp.isfinite(new_mean)), change, *more])
                if read[0] and read[1]:  # (proper, and every mean finite)
                    moved, values = (read[2] if np.isfinite(read[2]) else float("inf")), read[3:]
                    break
            if not step.halve():
                break
        if n_improper and on_improper == "raise" and (moved is not None or n_nonfinite):
            raise ImproperPosteriorError(f"{n_improper} improper cavities in sweep {sweep + 1}")
        if moved is None:
            ledger.diverge(n_skipped if n_nonfinite else n)
            break
        tau, nu, mean, var, log_det = new_tau, new_nu, new_mean, new_var, new_log_det
        relaxation = xp.where(taken.take, taken.relaxation, relaxation)
        mean, var = arrays.swept(sweep, mean, var)
        ledger.next_coarse(moved)
        props = following
        if following is not None:
            proper: Any = values[1] == 0  # (the next proposals' cavities)
        else:
            proper = lambda now=(mean, var, tau, nu): arrays.proper_now(now)  # noqa: E731
        if ledger.sweep(arrays.statistic(moved), n_skipped, s, skipped_sites=~taken.take, coarse=coarse,
                        proper=proper):  # fmt: skip
            break
    return LoopEnd(mean, var, tau, nu, log_det, relaxation)


class HostArrays:
    """The sweep on numpy: the rule's own update (:func:`~relaxep.sites.propose_sites`, on the proper cavities
    alone), the posterior object's refresh (single precision where the ledger allows it), BLAS inner products;
    the caller's callback after each step.  Reads are free, so the next proposals wait for the next sweep."""

    xp = np
    eager = False

    def __init__(self, post: Posterior, updater: SiteUpdater, ledger: SweepLedger) -> None:
        self.post = post
        self.updater = updater
        self.ledger = ledger

    def propose(self, state: tuple[Array, ...]) -> tuple[Array, Array, Array, Array]:
        mean, var, tau, nu = state
        cav_mean, cav_var = cavity(mean, var, tau, nu, self.updater.fraction)
        ok = is_proper(cav_var)
        idx = np.flatnonzero(ok)
        prop = self.updater.propose_all(idx, cav_mean[idx], cav_var[idx], tau[idx], nu[idx], var[idx])
        prop_tau, prop_nu = tau.copy(), nu.copy()
        prop_tau[idx], prop_nu[idx] = prop.precision, prop.mean_precision
        return ok, prop_tau, prop_nu, self.updater.proposed_relaxation.copy()

    def refresh(self, tau: Array, nu: Array, coarse: bool, nonnegative: bool) -> tuple[Any, Any, Any, Any]:
        post = self.post
        post.set_sites(slice(None), tau, nu)
        post.coarse = coarse
        try:
            post.refresh(marginals_only=True)
        except ImproperPosteriorError:
            return None, None, None, False
        finally:
            post.coarse = False
        return post.mean.copy(), post.marginal_var.copy(), None, True

    @staticmethod
    def read(values: list[Any]) -> list[float]:
        return [float(v) for v in values]

    @staticmethod
    def inner(a: tuple[Array, Array], b: tuple[Array, Array]) -> float:
        return float(np.concatenate(a) @ np.concatenate(b))

    def proper_now(self, state: tuple[Array, ...]) -> bool:
        mean, var, tau, nu = state
        return bool(np.all(is_proper(cavity(mean, var, tau, nu, self.updater.fraction)[1])))

    def statistic(self, moved: float) -> float:
        options = self.ledger.options
        if options.criterion == "marginals" and options.callback is None:
            return moved
        return self.ledger.statistic(self.post)  # (where a callback may have refreshed it: the post's own)

    def swept(self, sweep: int, mean: Array, var: Array) -> tuple[Array, Array]:
        callback = self.ledger.options.callback
        if callback is None:
            return mean, var
        callback(sweep, self.post)  # (which may refresh the post in double precision: the sweeps go on from it)
        return self.post.mean.copy(), self.post.marginal_var.copy()
