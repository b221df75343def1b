"""The inference-method interface: a prior, targets and a likelihood in, an
:class:`~relaxep.inference.InferenceResult` out.

Site updates by a rule and a schedule (:class:`~relaxep.inference.SiteUpdates`), double-loop EP and the
automatic cascade are methods; a new algorithm is one more.  The options every method is told
(:class:`RunOptions`), the convergence statistics and the ledger that applies the stop rules
(:class:`~relaxep.inference.ledger.SweepLedger`) live in :mod:`relaxep.inference.ledger`, and are re-exported here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from relaxep._params import ParamsMixin
from relaxep._typing import Array
from relaxep.inference.ledger import (
    COARSE_ABOVE,
    COARSE_SWEEPS,
    CRITERIA,
    STUCK_SWEEPS,
    ConvergenceMonitor,
    RunOptions,
    SweepLedger,
    change_statistic,
    marginal_change,
)
from relaxep.inference.result import InferenceResult
from relaxep.inference.warm import Sites
from relaxep.likelihoods import Likelihood
from relaxep.posterior import Prior

__all__ = [
    "COARSE_ABOVE",
    "COARSE_SWEEPS",
    "CRITERIA",
    "STUCK_SWEEPS",
    "ConvergenceMonitor",
    "InferenceMethod",
    "RunOptions",
    "SweepLedger",
    "change_statistic",
    "marginal_change",
]


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
