r"""The automatic cascade: EP where EP converges, else a convergent method that reaches the same fixed point.

All stages aim at the same EP fixed point, so the cascade always answers "the EP
approximation", whichever stage got there.  The policy lives here, in one place: each stage
runs with the caller's budget and a tolerance tightened by its damping step (a step
:math:`s` shortens every change by :math:`s`; Minka), and an early stage is abandoned as soon
as :math:`R` has set no new minimum in ``stall_window`` sweeps (oscillation, not slow
convergence).  The default stages are EP, :class:`~relaxep.inference.ConvergentEP` (descent on
the EC free energy: a few factorisations an outer iteration) and, should that stall,
:class:`~relaxep.inference.DoubleLoopEP` (Newton on :math:`2n \times 2n` systems, slow but the
last resort).  Damped EP is not a stage: where plain EP oscillates it mostly oscillates too, at
the cost of another stall window (:doc:`the benchmark tables </benchmarks>`).

For a heavy-tailed likelihood (``likelihood.heavy_tailed``: the Student-t) the default cascade
tries double-loop EP before convergent EP: there convergent EP's line search solves the
r-cavities of heavy-tailed tilteds by quadrature again and again, and on the 15-point problem
of ``tests/test_robust_inference.py`` it did not converge in 100 outer iterations (86 s) where
double-loop EP converged in 49 (12 s).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import numpy as np

from relaxep._typing import Array
from relaxep._validation import check_positive_int
from relaxep.inference.convergent import ConvergentEP
from relaxep.inference.double_loop import DoubleLoopEP
from relaxep.inference.method import InferenceMethod, RunOptions
from relaxep.inference.result import Attempt, InferenceResult
from relaxep.inference.schedules import Schedule
from relaxep.inference.site_updates import SweepOptions
from relaxep.inference.warm import Sites
from relaxep.likelihoods import Likelihood
from relaxep.posterior import Prior
from relaxep.sites import EP, SiteRule

__all__ = ["Auto"]

#: the stages of ``Auto()`` (and ``rule="auto"``), tried in this order
DEFAULT_STAGES: tuple[SiteRule | InferenceMethod, ...] = (EP(), ConvergentEP(), DoubleLoopEP())
#: the default stages' order for a heavy-tailed likelihood (``likelihood.heavy_tailed``)
HEAVY_TAILED_STAGES: tuple[SiteRule | InferenceMethod, ...] = (EP(), DoubleLoopEP(), ConvergentEP())


class Auto(InferenceMethod):
    """Try ``stages`` in turn; return the first that converges, else the one with the smallest final ``R``.

    Parameters
    ----------
    stages : tuple of SiteRule or InferenceMethod
        Default: EP, convergent EP, double-loop EP (for a heavy-tailed likelihood: EP, double-loop
        EP, convergent EP).  A site rule runs as
        :class:`~relaxep.inference.SiteUpdates` with this cascade's ``schedule``, ``order`` and
        ``random_state``.
    stall_window : int
        An early stage (every stage but the last) is abandoned when ``R`` has set no new
        minimum in this many sweeps.
    schedule, order, random_state, on_improper
        For the site-rule stages (see :class:`~relaxep.inference.SiteUpdates`).

    A convergent stage (:class:`~relaxep.inference.ConvergentEP`, :class:`~relaxep.inference.DoubleLoopEP`)
    that runs out of sweeps ends the cascade: it was still lowering its free energy, and the
    next stage would do the same more slowly; one that stalls hands over.  A stage that cannot
    run on the prior's representation (:meth:`~relaxep.inference.InferenceMethod.supports`:
    double-loop EP needs a dense ``K``) is left out, so on a sparse prior the cascade is EP, then
    convergent EP.

    A warm start (``init``) is given to the first stage; where that stage is not convergent and does not converge
    from it, it runs once more from flat sites before the cascade moves on (the later stages start flat too).
    Measured: a Student-t regression whose final fit, warm-started from its hyperparameter search's last sites,
    did not converge by EP went on to 330 s in the convergent stages on 40 rows; EP from flat sites converged in
    13 sweeps (0.03 s).

    The result's ``attempts`` lists every stage tried (:class:`~relaxep.inference.Attempt`);
    its ``method`` is the stage whose posterior it returns, and its ``status`` that stage's (so an
    unconverged cascade can end ``"abandoned"``, ``"stuck"``, ``"stalled"`` or ``"max_sweeps"``).
    """

    def __init__(
        self,
        stages: tuple[SiteRule | InferenceMethod, ...] = DEFAULT_STAGES,
        stall_window: int = 10,
        schedule: Schedule | str = "blocked",
        order: Literal["fixed", "random"] = "fixed",
        random_state: int | np.random.Generator | None = None,
        on_improper: Literal["skip", "raise"] = "skip",
    ) -> None:
        stages = tuple(stages)
        if not stages or not all(isinstance(s, SiteRule | InferenceMethod) for s in stages):
            raise TypeError(f"stages must be a non-empty tuple of site rules and inference methods, got {stages!r}")
        check_positive_int(stall_window, "stall_window")
        SweepOptions(schedule, order, random_state, on_improper)  # validates them
        self.stages = stages
        self.stall_window = stall_window
        self.schedule = schedule
        self.order = order
        self.random_state = random_state
        self.on_improper = on_improper

    def _method(self, stage: SiteRule | InferenceMethod) -> InferenceMethod:
        if isinstance(stage, SiteRule):
            return SweepOptions(self.schedule, self.order, self.random_state, self.on_improper).site_updates(stage)
        return stage

    def run(
        self, prior: Prior, y: Array, likelihood: Likelihood, options: RunOptions, init: Sites | None = None
    ) -> InferenceResult:
        stages = HEAVY_TAILED_STAGES if self.stages == DEFAULT_STAGES and likelihood.heavy_tailed else self.stages
        methods = [m for m in map(self._method, stages) if m.supports(prior, likelihood)]
        if not methods:
            raise TypeError(f"no stage of {self!r} runs on {type(prior).__name__}")
        results = []
        window = (
            int(self.stall_window) if options.stall_window is None else min(self.stall_window, options.stall_window)
        )
        for k, method in enumerate(methods):
            last = k == len(methods) - 1
            stage_options = replace(
                options, tol=method.tolerance(options.tol), stall_window=options.stall_window if last else window
            )
            result = method.run(prior, y, likelihood, stage_options, init if k == 0 else None)
            if k == 0 and init is not None and not result.converged and not method.convergent:
                results.append(result)  # a warm start in a basin where EP cycles: EP again from flat sites first
                result = method.run(prior, y, likelihood, stage_options, None)
            results.append(result)
            if result.converged or (method.convergent and result.status == "max_sweeps"):
                break  # (a convergent stage out of budget was still descending: a later one would be slower)
        best = results[-1] if results[-1].converged else min(results, key=lambda r: r.trace[-1])
        attempts = tuple(Attempt(r.method, r.status, r.n_sweeps) for r in results)
        return replace(best, attempts=attempts)
