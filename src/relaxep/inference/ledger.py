r"""The sweep ledger every loop of site updates feeds, the convergence statistic, and the options a run is told.

A loop computes its sweep's statistic (or lets :meth:`SweepLedger.record` take it from the posterior) and enters it
with :meth:`SweepLedger.sweep` or :meth:`SweepLedger.diverge`; the ledger owns the stop rules (converged, stuck,
abandoned, diverged) and the coarse-sweep rule of a parallel loop, so every loop ends a run by the same rules:
site updates by a schedule, the device loop, two-latent EP, double-loop EP's outer loop, the joint multi-class
loop and the Dask shards' loop.

Convergence statistics (``criterion``), computed after each sweep from the posterior:

``"marginals"`` (the default)
    :math:`R = \max_i \max\big(|\mu_i^{t} - \mu_i^{t-1}| / \sqrt{A_{ii}^{t}},\
    |\log A_{ii}^{t} - \log A_{ii}^{t-1}|\big)`: the largest change of a marginal, its mean in
    units of its standard deviation and its variance as a ratio.  Scale-free: multiplying
    ``K`` by :math:`c` scales every :math:`\mu_i` by :math:`\sqrt c` and :math:`A_{ii}` by
    :math:`c` for a likelihood that sees only the sign of ``f`` (the noisy step), leaving
    :math:`R` unchanged; for any likelihood it says how far the answer still moves in its own
    units.
``"alpha"`` (the paper's)
    :math:`R = \|\alpha_t - \alpha_{t-1}\|_2` with :math:`\alpha = \nu - T\mu` (for a dense
    prior the predictive weights, latent mean :math:`K\alpha`).  It scales with the kernel
    amplitude (:math:`\alpha \sim 1/\sqrt{\text{amp}}`), so its tolerance means something only
    together with the kernel's scale: on :math:`10^{10} K` it is below 1e-3 after one sweep.
``"relative"``
    the ``"alpha"`` statistic divided by :math:`\|\alpha_t\|_2`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

import numpy as np

from relaxep._typing import Array, Status
from relaxep.posterior import Posterior

__all__ = [
    "COARSE_ABOVE",
    "COARSE_SWEEPS",
    "CRITERIA",
    "STUCK_SWEEPS",
    "ConvergenceMonitor",
    "RunOptions",
    "SweepLedger",
    "change_statistic",
    "marginal_change",
]

CRITERIA = ("marginals", "alpha", "relative")
#: sweeps in a row with R below the tolerance and the same sites skipped before a run is "stuck"
STUCK_SWEEPS = 5
#: the last sweep moved a marginal mean by over 1% of its standard deviation, or a variance by over 1%:
#: far from the fixed point, the next refresh may be coarse (:attr:`Posterior.coarse`).  Single precision
#: moves the statistic by 1-2e-4 (measured at the fixed point, n = 1000-2000): 50-100 times below this
COARSE_ABOVE = 1e-2
#: at most this many sweeps of a run may be coarse (converging runs cross COARSE_ABOVE in 5-8)
COARSE_SWEEPS = 10


@dataclass(frozen=True)
class RunOptions:
    """What every method is told: the sweep budget, the tolerance and criterion, a callback.

    ``stall_window``: stop as ``"abandoned"`` when :math:`R` has set no new minimum in this
    many sweeps (``None``: never).
    """

    max_sweeps: int = 200
    tol: float = 1e-3
    criterion: str = "marginals"
    callback: Callable[[int, Posterior], None] | None = None
    stall_window: int | None = None


def change_statistic(
    xp: ModuleType, mean_old: Array, var_old: Array, mean_new: Array, var_new: Array, scale: str = "new"
) -> Any:
    r"""The ``"marginals"`` statistic (module docstring) in the namespace ``xp`` of the arrays, a 0-d array there
    (NaN or ``inf`` where a marginal is not finite; :func:`marginal_change` reads it as a float).

    .. math::
        R = \max_i \max\big(|\mu_i^{new} - \mu_i^{old}| / \sqrt{A_{ii}^{new}},\
        |\log A_{ii}^{new} - \log A_{ii}^{old}|\big)
    """
    scaled = xp.abs(mean_new - mean_old) / xp.sqrt(var_new if scale == "new" else var_old)
    return xp.maximum(xp.max(scaled), xp.max(xp.abs(xp.log(var_new / var_old))))


def marginal_change(
    mean_old: Array, var_old: Array, mean_new: Array, var_new: Array, scale: Literal["new", "old"] = "new"
) -> float:
    r"""The ``"marginals"`` statistic (module docstring, :func:`change_statistic`) between two sets of numpy
    marginals, a float; ``inf`` if not finite.

    A pure function of the block's marginals: the largest change over blocks (Dask's shards) is the
    statistic of them all.  ``scale="old"`` measures the mean's move in the old standard deviation
    :math:`\sqrt{A_{ii}^{old}}` (joint multi-class EP's statistic, kept so its traces stay as they were).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        r = float(change_statistic(np, mean_old, var_old, mean_new, var_new, scale))
    return r if np.isfinite(r) else float("inf")


class SweepLedger:
    """The run's ledger: the convergence statistic after each sweep (module docstring), the sites each sweep
    skipped, its step, and the status the stop rules give (every loop feeds it host floats; the loops that
    measure their own statistic, as the Dask shards' largest move or joint multi-class EP's ``scale="old"``,
    hand it over as computed).

    A loop that computes its own statistic calls :meth:`sweep` once a sweep (or :meth:`diverge`); the ledger
    applies the rules of a sweep loop, in this order:

    - ``"converged"``: :math:`R` below ``tol`` on a sweep that was not coarse (single precision), skipped no
      site and left every cavity proper;
    - ``"stuck"``: :math:`R` below ``tol`` for :data:`STUCK_SWEEPS` sweeps in a row with the same sites skipped;
    - ``"abandoned"``: :math:`R` set no new minimum in ``stall_window`` sweeps (:meth:`stalled`);
    - ``"diverged"`` (:meth:`diverge`), else ``"max_sweeps"`` when the budget runs out.

    And the coarse rule of a parallel loop (:attr:`coarse`, :meth:`next_coarse`): until a sweep first moves the
    marginals by less than :data:`COARSE_ABOVE`, and for at most :data:`COARSE_SWEEPS` sweeps, a refresh may
    factorise in single precision (:attr:`Posterior.coarse <relaxep.posterior.base.Posterior.coarse>`), and such
    a sweep never ends a run as converged.

    ``post=None``: no posterior to snapshot; the statistic comes from the loop (:meth:`sweep`, :meth:`add`).
    """

    def __init__(self, options: RunOptions, post: Posterior | None = None) -> None:
        if options.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {CRITERIA}, got {options.criterion!r}")
        self.options = options
        self.trace: list[float] = []
        self.skipped: list[int] = []
        self.steps: list[float] = []
        self.status: Status = "max_sweeps"
        self._stuck_for = 0
        self._last_skipped: Any = None
        self._coarse_left = COARSE_SWEEPS
        self._last = None if post is None else self._snapshot(post)

    def _snapshot(self, post: Posterior) -> tuple[Array, Array | None]:
        if self.options.criterion == "marginals":
            return post.mean.copy(), post.marginal_var.copy()
        return post.alpha, None

    def statistic(self, post: Posterior) -> float:
        """The statistic between ``post`` and the last posterior seen (which ``post`` now is), not recorded."""
        now = self._snapshot(post)
        (before, before_var), (after, after_var) = self._last, now
        if after_var is not None:
            r = marginal_change(before, before_var, after, after_var)
        else:
            r = float(np.linalg.norm(after - before))
            if self.options.criterion == "relative":
                r /= max(float(np.linalg.norm(after)), np.finfo(float).tiny)
        self._last = now
        return r

    def record(self, post: Posterior) -> float:
        """The statistic between ``post`` and the last recorded posterior (appended to :attr:`trace`)."""
        return self.add(self.statistic(post))

    def add(self, r: float) -> float:
        """Append the statistic ``r`` (``inf`` where it is not finite) to :attr:`trace`."""
        r = r if np.isfinite(r) else float("inf")
        self.trace.append(r)
        return r

    def below_tol(self) -> bool:
        return bool(self.trace) and self.trace[-1] < self.options.tol

    def stalled(self) -> bool:
        """``R`` set no new minimum in the last ``stall_window`` sweeps (oscillation; slow
        convergence keeps setting minima)."""
        window = self.options.stall_window
        if window is None or len(self.trace) <= window:
            return False
        return min(self.trace[-window:]) >= min(self.trace[:-window])

    @property
    def coarse(self) -> bool:
        """Whether the next sweep's refresh may be coarse (class docstring)."""
        return self._coarse_left > 0

    def next_coarse(self, moved: float) -> None:
        """Count a sweep that moved the marginals by ``moved`` (the ``"marginals"`` statistic): once one moves
        them less than :data:`COARSE_ABOVE`, or after :data:`COARSE_SWEEPS` sweeps (a run that cycles), none
        is coarse again."""
        self._coarse_left = self._coarse_left - 1 if moved > COARSE_ABOVE else 0

    def sweep(
        self,
        r: float,
        n_skipped: int = 0,
        step: float = 1.0,
        *,
        skipped_sites: Any = None,
        coarse: bool = False,
        proper: bool | Callable[[], bool] = True,
    ) -> Status | None:
        """Enter a sweep that took a step: its statistic ``r``, its count of skipped sites and its ``step``; the
        status where the stop rules (class docstring) end the run here, else ``None``.

        ``skipped_sites``: which sites it skipped (indices or a mask, any library; compared with the last sweep's
        only for the stuck rule); ``coarse``: the refresh may have been in single precision (never converged);
        ``proper``: every cavity is proper now (or a callable asked only where the rest says converged).
        """
        self.add(r)
        self.skipped.append(int(n_skipped))
        self.steps.append(float(step))
        if self.below_tol() and not coarse:
            if n_skipped == 0 and (proper() if callable(proper) else proper):
                return self._end("converged")
            same = self._last_skipped is not None and _same_sites(skipped_sites, self._last_skipped)
            self._stuck_for = self._stuck_for + 1 if same and n_skipped else 0
            if self._stuck_for >= STUCK_SWEEPS:
                return self._end("stuck")
        else:
            self._stuck_for = 0
        self._last_skipped = skipped_sites
        return self._end("abandoned") if self.stalled() else None

    def diverge(self, n_skipped: int = 0, *, record: bool = True) -> Status:
        """Enter a sweep whose step found no proper, finite posterior: ``inf``, step 0, and ``"diverged"``.

        ``record=False``: end the run as ``"diverged"`` without entering the failed sweep (the joint multi-class
        and the Dask loops, whose traces hold the sweeps that took a step only).
        """
        if record:
            self.trace.append(float("inf"))
            self.skipped.append(int(n_skipped))
            self.steps.append(0.0)
        return self._end("diverged")

    def _end(self, status: Status) -> Status:
        self.status = status
        return status


#: the ledger's former name (``relaxep.inference.method.ConvergenceMonitor``)
ConvergenceMonitor = SweepLedger


def _same_sites(a: Any, b: Any) -> bool:
    """Whether two sweeps skipped the same sites (index arrays or masks, numpy's or another library's)."""
    if a is None or b is None:
        return a is b
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    import array_api_compat

    xp = array_api_compat.array_namespace(a, b)
    return tuple(a.shape) == tuple(b.shape) and bool(xp.all(a == b))
