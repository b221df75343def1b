r"""The inference-method interface, the options every method shares and the convergence monitor.

An inference method takes a prior (a :class:`~relaxep.posterior.Prior`), targets and a
likelihood and returns an :class:`~relaxep.inference.InferenceResult`.  Site updates by a
rule and a schedule (:class:`~relaxep.inference.SiteUpdates`), double-loop EP and the
automatic cascade are methods; a new algorithm is one more.

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

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from relaxep._params import ParamsMixin
from relaxep._typing import Array
from relaxep.inference.result import InferenceResult
from relaxep.inference.warm import Sites
from relaxep.likelihoods import Likelihood
from relaxep.posterior import Posterior, Prior

__all__ = [
    "CRITERIA",
    "STUCK_SWEEPS",
    "ConvergenceMonitor",
    "InferenceMethod",
    "RunOptions",
    "marginal_change",
]

CRITERIA = ("marginals", "alpha", "relative")
#: sweeps in a row with R below the tolerance and the same sites skipped before a run is "stuck"
STUCK_SWEEPS = 5


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


def marginal_change(
    mean_old: Array, var_old: Array, mean_new: Array, var_new: Array, scale: Literal["new", "old"] = "new"
) -> float:
    r"""The ``"marginals"`` statistic (module docstring) between two sets of marginals; ``inf`` if not finite.

    .. math::
        R = \max_i \max\big(|\mu_i^{new} - \mu_i^{old}| / \sqrt{A_{ii}^{new}},\
        |\log A_{ii}^{new} - \log A_{ii}^{old}|\big)

    A pure function of the block's marginals: the largest change over blocks (Dask's shards) is the
    statistic of them all.  ``scale="old"`` measures the mean's move in the old standard deviation
    :math:`\sqrt{A_{ii}^{old}}` (joint multi-class EP's statistic, kept so its traces stay as they were).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        r = float(
            max(
                np.max(np.abs(mean_new - mean_old) / np.sqrt(var_new if scale == "new" else var_old)),
                np.max(np.abs(np.log(var_new / var_old))),
            )
        )
    return r if np.isfinite(r) else float("inf")


class ConvergenceMonitor:
    """The convergence statistic after each sweep (module docstring), and the early-stop tests built on it.

    ``post=None``: statistics computed elsewhere are passed to :meth:`add` (Dask's shards).
    """

    def __init__(self, options: RunOptions, post: Posterior | None = None) -> None:
        if options.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {CRITERIA}, got {options.criterion!r}")
        self.options = options
        self.trace: list[float] = []
        self._last = None if post is None else self._snapshot(post)

    def _snapshot(self, post: Posterior) -> tuple[Array, Array | None]:
        if self.options.criterion == "marginals":
            return post.mean.copy(), post.marginal_var.copy()
        return post.alpha, None

    def record(self, post: Posterior) -> float:
        """The statistic between ``post`` and the last recorded posterior (appended to :attr:`trace`)."""
        now = self._snapshot(post)
        (before, before_var), (after, after_var) = self._last, now
        if after_var is not None:
            r = marginal_change(before, before_var, after, after_var)
        else:
            r = float(np.linalg.norm(after - before))
            if self.options.criterion == "relative":
                r /= max(float(np.linalg.norm(after)), np.finfo(float).tiny)
        self._last = now
        return self.add(r)

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


class InferenceMethod(ParamsMixin, ABC):
    """An algorithm that turns a prior, targets and a likelihood into a Gaussian posterior."""

    #: each step lowers a free energy, so running out of sweeps means slow, not stuck: a cascade
    #: does not hand such a run to a later (slower) stage of the same kind
    convergent: ClassVar[bool] = False

    @abstractmethod
    def run(
        self, prior: Prior, y: Array, likelihood: Likelihood, options: RunOptions, init: Sites | None = None
    ) -> InferenceResult:
        """Run to convergence or until ``options`` stop it; ``init`` warm-starts from its sites."""

    def supports(self, prior: Prior, likelihood: Likelihood | None = None) -> bool:
        """Whether this method can run on ``prior``'s representation with ``likelihood`` (all can but
        those that need a dense ``K`` or the tilted cumulants)."""
        return likelihood is None or likelihood.latent_dim == 1

    def tolerance(self, tol: float) -> float:
        """The tolerance this method should be run with to match an undamped method at ``tol``."""
        return tol
