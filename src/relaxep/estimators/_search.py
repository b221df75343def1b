r"""The search for the hyperparameters that maximise the EP evidence plus their log prior (the MAP; the evidence
alone, type-II maximum likelihood, under a log-uniform prior), written once for every model.

:class:`_EvidenceSearch` holds the policies the estimators share: the optimiser and its restarts
(scikit-learn's ``optimizer(obj_func, theta0, bounds)`` convention, L-BFGS-B by default) over a
:class:`~relaxep.estimators._hyper.HyperVector`, its progress reports, and the rule that a run
that diverged or whose evidence is not finite (``-inf`` or ``nan``) scores :math:`-\infty` with a
zero gradient: away from a fixed point EP's evidence formula is not an evidence (it can exceed the
fixed points' values), so an unconverged run is a region the optimiser must leave, not a value it
may climb.  The warm starts between runs are the models' (:class:`~relaxep.inference.warm.WarmStarts`).
A model reports how its fit went (:class:`FitReport`: the non-convergence message of every fit and
scikit-learn's for hyperparameters at a bound); the estimator's ``fit`` warns.
"""

from __future__ import annotations

import numbers
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._plan import check_maxiter
from relaxep.hyper.log_prior import DataScales, LogPrior, resolve_prior
from relaxep.sites import EP

__all__ = ["FitReport", "SearchPolicy", "SearchStep", "_EvidenceSearch", "at_bounds", "evidence_at", "scored"]

#: what an evidence evaluation returns: the value and, if asked, its gradient in the optimiser's vector
Evidence = Callable[[Array, bool], tuple[float, Array | None]]


@dataclass(frozen=True)
class SearchStep:
    """One evaluation of the evidence during a fit's search, as ``callback`` receives it.

    Attributes
    ----------
    evaluation : int
        1, 2, ... over the whole search (every start).
    start : int
        0 for the initial hyperparameters, ``k`` for the ``k``-th of ``n_restarts_optimizer``.
    parameters : ndarray
        The optimiser's vector: the kernel's log-hyperparameters, then the likelihood's, then (a
        sparse fit learning them) the inducing inputs, flattened.
    log_evidence : float
        The log evidence there (``-inf`` where the run did not converge: a region the search leaves).
    best : float
        The largest ``log_evidence + log_prior`` so far (what the search maximises).
    log_prior : float
        The hyperparameters' log prior density there (0 under ``prior=None``: type-II maximum likelihood).
    """

    evaluation: int
    start: int
    parameters: Array
    log_evidence: float
    best: float
    log_prior: float = 0.0


def check_progress_options(verbose: Any, callback: Any) -> None:
    """``verbose`` an int >= 0 (or bool), ``callback`` ``None`` or callable; each named."""
    if not isinstance(verbose, numbers.Integral):
        raise TypeError(f"verbose must be an integer >= 0 (or a bool), got {verbose!r}")
    if verbose < 0:
        raise ValueError(f"verbose must be >= 0, got {verbose!r}")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be None or a callable taking a SearchStep, got {callback!r}")


def evidence_at(
    x: Array,
    eval_gradient: bool,
    hyper: HyperVector,
    build: Callable[[Kernel, Array | None], Any],
    run: Callable[[Any, Any], Any],
    gradient: Callable[[Any, Any, Kernel, Any], tuple[Array, Array | None]],
    refused: tuple[type[Exception], ...] = (),
) -> tuple[float, Any]:
    r"""The evidence at the optimiser's ``x`` (and, if asked, its gradient in ``x``), written once for every model
    that learns a :class:`~relaxep.estimators._hyper.HyperVector`: one process or the shards of a cluster.

    ``build(kernel, Z)`` makes the prior at ``x``'s kernel and inducing inputs (``Z=None``: not learned); a
    construction error in ``refused`` scores :math:`(-\infty, 0)`.  ``run(prior, likelihood)`` runs inference
    from the warm start; ``gradient(prior, result, kernel, likelihood)`` returns the gradient in the kernel's
    and then the likelihood's hyperparameters, and in ``Z`` (or ``None``).  The run is :func:`scored`.
    """
    kernel, likelihood, Z = hyper.split(x)
    try:
        prior = build(kernel, Z)
    except refused:
        return -np.inf, (np.zeros_like(x) if eval_gradient else None)
    result = run(prior, likelihood)
    if not eval_gradient:
        return scored(result.status, result.log_evidence, None, x)

    def packed() -> Array:
        return hyper.pack(*gradient(prior, result, kernel, likelihood))

    return scored(result.status, result.log_evidence, packed, x)


def scored(status: str, log_evidence: float, gradient: Callable[[], Array] | None, x: Array) -> tuple[float, Any]:
    r"""The optimiser's view of one run: ``(log_evidence, gradient())``, or :math:`(-\infty, 0)` where
    the run diverged or its evidence is not finite (module docstring); ``gradient=None``: no gradient."""
    if status == "diverged" or not np.isfinite(log_evidence):
        return -np.inf, (np.zeros_like(x) if gradient is not None else None)
    return log_evidence, (gradient() if gradient is not None else None)


@dataclass(frozen=True)
class FitReport:
    """How a model's final fit went, for the estimator to warn about (models report, estimators warn).

    Attributes
    ----------
    status : str
        The final run's status (:mod:`relaxep.inference.result`).
    n_sweeps : int
    trace : ndarray
        Its convergence statistic after each sweep.
    n_skipped : int or None
        Site visits it skipped (``None``: not counted).
    at_bounds : tuple of str
        scikit-learn's message for each learned log-hyperparameter that ended at a bound.
    """

    status: str
    n_sweeps: int = 0
    trace: Any = ()
    n_skipped: int | None = None
    at_bounds: tuple[str, ...] = ()

    @property
    def warnings(self) -> list[str]:
        """The ``ConvergenceWarning`` messages of this fit: hyperparameters at a bound, then non-convergence."""
        messages = list(self.at_bounds)
        if self.status not in ("converged", "diverged"):
            last = f"last change {self.trace[-1]:.3g}" if len(self.trace) else "no sweep completed"
            skipped = "" if self.n_skipped is None else f", {self.n_skipped} site visits skipped"
            messages.append(
                f"inference did not converge: status {self.status!r} after {self.n_sweeps} sweeps ({last}{skipped}). "
                "Consider damping, more max_sweeps or a larger tol."
            )
        return messages

    def warn(self, stacklevel: int = 2) -> None:
        """Each of :attr:`warnings` as a ``ConvergenceWarning``; ``stacklevel`` as the caller's own
        ``warnings.warn`` would take it (2: the caller's caller, the user's ``fit`` line)."""
        for message in self.warnings:
            warnings.warn(message, ConvergenceWarning, stacklevel=stacklevel + 1)


@dataclass(frozen=True)
class SearchPolicy:
    """How an estimator's search treats the runs of inference that fail, declared once per estimator class.

    Attributes
    ----------
    backtrack : bool
        L-BFGS-B sees a failed run as a finite value above every one seen (:class:`_Backtracking`), so that it
        backtracks from it: the regressors' search (a likelihood's scale has gradients of order ``n``).
    stall_window : int or None
        The search gives a run up after this many sweeps without progress (a region the optimiser must
        leave); ``None``: runs go on to ``max_sweeps``.
    ep_for_auto : bool
        With ``rule="auto"`` the search's runs are EP's alone; the final fit at the learned hyperparameters
        has the whole cascade.
    """

    backtrack: bool = False
    stall_window: int | None = None
    ep_for_auto: bool = False

    def search_rule(self, rule: Any) -> Any:
        """The rule of the search's runs for a fit by ``rule``."""
        if self.ep_for_auto and isinstance(rule, str) and rule == "auto":
            return EP()
        return rule


#: the robust regressors' policy (and the ordinal classifier's): backtrack, give a stalled run up after 10
#: sweeps, search ``"auto"`` by EP alone
ROBUST = SearchPolicy(backtrack=True, stall_window=10, ep_for_auto=True)


def at_bounds(kernel: Kernel) -> tuple[str, ...]:
    """scikit-learn's message for each learned log-hyperparameter of ``kernel`` (or a likelihood) at a bound.

    "At a bound": within 1e-4 of the bounds' log-width of it (or ``np.isclose`` in log space,
    scikit-learn's test, which is tight near a bound of 1 and loose near 1e5).  On a flat evidence
    the optimiser stops a few 1e-5 of a log-unit inside a bound it started on.  The wording is
    scikit-learn's, so that code filtering its warnings filters ours.
    """
    theta, bounds = kernel.theta, np.reshape(kernel.bounds, (-1, 2))
    slack = 1e-4 * (bounds[:, 1] - bounds[:, 0])
    at_lower = np.isclose(theta, bounds[:, 0]) | (theta - bounds[:, 0] <= slack)
    at_upper = np.isclose(theta, bounds[:, 1]) | (bounds[:, 1] - theta <= slack)
    messages, index = [], 0
    for hyperparameter in kernel.hyperparameters:
        if hyperparameter.fixed:
            continue
        limits = np.atleast_2d(hyperparameter.bounds)  # as given, not exp(log(bound))
        for dim in range(hyperparameter.n_elements):
            for hit, side, advice in ((at_lower, "lower", "Decreasing"), (at_upper, "upper", "Increasing")):
                if hit[index]:
                    messages.append(
                        f"The optimal value found for dimension {dim} of parameter {hyperparameter.name} "
                        f"is close to the specified {side} bound {limits[dim, 0 if side == 'lower' else 1]}. "
                        f"{advice} the bound and calling fit again may find a better value."
                    )
            index += 1
    return tuple(messages)


class _Objective:
    r"""What the optimiser minimises: minus the log posterior of ``x``, :math:`\log p(y | \theta) + \log p(\theta)`
    (the evidence alone under a flat prior), and its gradient, each evaluation reported.  The prior is of the
    ``theta`` part (not of learned inducing inputs); a failed run stays :math:`-\infty`."""

    def __init__(self, evidence: Evidence, search: _EvidenceSearch, log_prior: LogPrior | None = None) -> None:
        self.evidence, self.search, self.start = evidence, search, 0
        self.log_prior = None if log_prior is None or log_prior.flat else log_prior

    def __call__(self, x: Array, eval_gradient: bool = True) -> Any:
        lml, grad = self.evidence(x, eval_gradient)
        if eval_gradient and not np.all(np.isfinite(grad)):  # (a run whose gradient failed is a failed run)
            lml, grad = -np.inf, np.zeros(np.shape(grad))
        lp = 0.0
        if self.log_prior is not None and np.isfinite(lml):
            n_theta = len(self.log_prior.priors)
            lp, g_prior = self.log_prior(x[:n_theta])
            if eval_gradient:
                grad = np.array(grad, dtype=float)
                grad[:n_theta] += g_prior
        self.search._report(self.start, x, lml, lp)
        value = lml + lp
        return (-value, -grad) if eval_gradient else -value


class _Backtracking:
    r"""The objective as L-BFGS-B sees it: an infinite value (a run that failed) stands in as a finite one.

    L-BFGS-B's line search cannot step back from an infinite value: it stops where it stands.
    With a value above every one seen so far (by :math:`10^3 (1 + |f|)`) and a zero gradient in
    its place, the line search backtracks towards the last good point instead, as it does from a
    large finite value (GPML's ``minimize`` halves its step on a non-finite value for this reason).
    A first step of :math:`-\nabla f` (L-BFGS-B's Cauchy point) can reach far into a region where
    EP does not converge: the gradient of the evidence in a likelihood's scale is of order ``n``.
    """

    def __init__(self, obj_func: Callable, start_value: float) -> None:
        self.obj_func = obj_func
        self.worst = float(start_value) if np.isfinite(start_value) else 0.0
        self.stand_ins: list[float] = []
        self.best_x: Array | None = None  # the best point evaluated: where a search that ends failed returns
        self.best_value = np.inf

    def __call__(self, x: Array) -> tuple[float, Array]:
        value, grad = self.obj_func(x, eval_gradient=True)
        if np.isfinite(value):
            self.worst = max(self.worst, float(value))
            if value < self.best_value:
                self.best_x, self.best_value = np.array(x, dtype=float), float(value)
            return value, grad
        stand_in = self.worst + 1e3 * (1.0 + abs(self.worst))
        self.stand_ins.append(stand_in)
        return stand_in, np.zeros_like(x)

    def failed(self, value: float) -> bool:
        """Whether ``value`` stood in for a failed run."""
        return value in self.stand_ins


class _EvidenceSearch:
    """Restarts of the optimiser and the ``-inf`` policy (module docstring), with progress reports.

    Parameters
    ----------
    optimizer : "fmin_l_bfgs_b" or callable
        ``"auto"`` is resolved before (:func:`~relaxep.estimators._plan.resolve_optimizer`).
    n_restarts : int
        Extra starts, uniform within the (finite) hyperparameter bounds in log space.
    maxiter : int or None
        L-BFGS-B's iterations (``None``: scipy's default).
    backtrack : bool
        L-BFGS-B sees a failed run as a finite value above every one seen (:class:`_Backtracking`);
        the regressor's search (a likelihood's scale has gradients of order ``n``).  Off for the
        classifier: there its fallback stages make each failed evaluation expensive, and going on
        through such regions cost minutes in scikit-learn's estimator checks.
    verbose : int
        ``>= 1``: one line per evidence evaluation on standard output (the estimate, the best so far).
    callback : callable or None
        Called with a :class:`SearchStep` after every evidence evaluation.
    maxfun, ftol : int, float or None
        L-BFGS-B's cap on evaluations and its relative stop on the evidence (``None``: scipy's defaults).
    prior : "auto", None, HyperPrior or dict
        The hyperparameters' prior (:func:`~relaxep.hyper.log_prior.resolve_prior`; ``None``: log-uniform, the
        evidence alone), resolved over each search's vector with the data's ``scales``.
    """

    def __init__(
        self,
        optimizer: Any,
        n_restarts: int = 0,
        maxiter: int | None = None,
        backtrack: bool = False,
        verbose: int = 0,
        callback: Callable[[SearchStep], Any] | None = None,
        maxfun: int | None = None,
        ftol: float | None = None,
        prior: Any = None,
        scales: DataScales | None = None,
    ):
        self.prior, self.scales = prior, DataScales() if scales is None else scales
        self.optimizer, self.n_restarts, self.maxiter = optimizer, n_restarts, check_maxiter(maxiter)
        self.maxfun, self.ftol = maxfun, ftol
        self.backtrack = backtrack
        check_progress_options(verbose, callback)
        self.verbose, self.callback = int(verbose), callback
        self.evaluations, self.best = 0, -np.inf

    # ------------------------------------------------------------ search
    def maximise(
        self, evidence: Evidence, hyper: HyperVector, rng: np.random.RandomState, options: dict | None = None
    ) -> Array | None:
        """The optimiser's best end point from ``hyper``'s start and ``n_restarts`` starts drawn uniformly (in
        log space) within its bounds; ``None`` if no start gave a finite value.  ``options`` go to L-BFGS-B."""
        objective = _Objective(evidence, self, self.log_prior(hyper))
        best, best_value = None, np.inf
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for k, x0 in enumerate(hyper.starts(self.n_restarts, rng)):
                objective.start = k
                x, value = self.optimise(objective, x0, hyper.bounds, options)
                if value < best_value:
                    best, best_value = x, value
        return best

    def log_prior(self, hyper: HyperVector) -> LogPrior:
        """The prior over ``hyper``'s ``theta`` (its entries named, the defaults scaled by :attr:`scales`)."""
        return resolve_prior(self.prior, hyper.entries(), self.scales)

    def report_step(self, step: int, x: Array, log_evidence: float) -> None:
        """A stochastic search's report (its estimate of the log evidence at step ``step``)."""
        self._report(0, x, log_evidence)

    def _report(self, start: int, x: Array, log_evidence: float, log_prior: float = 0.0) -> None:
        """The ``verbose`` line and the ``callback`` of one evaluation."""
        self.evaluations += 1
        value, prior = float(log_evidence), float(log_prior)
        if value + prior > self.best:
            self.best = value + prior
        if self.verbose:
            with_prior = f" + log prior {prior:.6g}" if prior else ""
            print(
                f"[relaxep] start {start}, evaluation {self.evaluations}: log evidence {value:.6g}{with_prior} "
                f"(best {self.best:.6g})",
                file=sys.stdout,
                flush=True,
            )
        if self.callback is not None:
            self.callback(SearchStep(self.evaluations, start, np.array(x, dtype=float), value, self.best, prior))

    def optimise(
        self, obj_func: Callable, x0: Array, bounds: Array, options: dict | None = None
    ) -> tuple[Array, float]:
        """One run of the optimiser from ``x0``: its end point and value (the start where L-BFGS-B ends worse;
        with ``backtrack``, the best point it evaluated where it ends on a failed run)."""
        if isinstance(self.optimizer, str) and self.optimizer == "fmin_l_bfgs_b":
            lower = np.where(np.isnan(bounds[:, 0]), -np.inf, bounds[:, 0])
            upper = np.where(np.isnan(bounds[:, 1]), np.inf, bounds[:, 1])
            x0 = np.clip(x0, lower, upper)  # as L-BFGS-B itself starts
            start_value = obj_func(x0, eval_gradient=False)
            options = dict(options or {})
            if self.maxiter is not None:
                options["maxiter"] = int(self.maxiter)
            if self.maxfun is not None:
                options["maxfun"] = int(self.maxfun)
            if self.ftol is not None:
                options["ftol"] = float(self.ftol)
            if np.any(np.isnan(bounds)):  # the inducing inputs (sparse fits) are unbounded
                bounds = [(None if np.isnan(lo) else lo, None if np.isnan(hi) else hi) for lo, hi in bounds]
            objective = _Backtracking(obj_func, start_value) if self.backtrack else obj_func
            res = optimize.minimize(objective, x0, method="L-BFGS-B", jac=True, bounds=bounds, options=options)
            failed = self.backtrack and objective.failed(res.fun)  # type: ignore[union-attr]
            if failed and objective.best_value < start_value:  # type: ignore[union-attr]
                return objective.best_x, objective.best_value  # type: ignore[union-attr,return-value]
            if not np.isfinite(res.fun) or failed or res.fun > start_value:
                return x0, start_value
            return res.x, float(res.fun)
        if callable(self.optimizer):
            x, value = self.optimizer(obj_func, x0, bounds)
            return np.asarray(x, dtype=float), float(value)
        raise ValueError(f"unknown optimizer {self.optimizer!r}: use 'fmin_l_bfgs_b' or a callable")
