r"""``infer``: the one call that runs an inference method on a prior and targets."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from threadpoolctl import threadpool_limits

from relaxep._threads import fit_threads
from relaxep._validation import check_positive_int, check_positive_number, check_unit_interval
from relaxep.inference.auto import Auto
from relaxep.inference.method import CRITERIA, InferenceMethod, RunOptions
from relaxep.inference.result import InferenceResult
from relaxep.inference.schedules import Blocked, Parallel, Schedule, as_schedule
from relaxep.inference.site_updates import SweepOptions
from relaxep.inference.warm import Sites
from relaxep.likelihoods import Likelihood, NoisyStep
from relaxep.posterior import Posterior, Prior, SparsePrior, as_prior
from relaxep.sites import EP, SiteRule

__all__ = ["as_method", "infer"]


def as_method(
    rule: SiteRule | InferenceMethod | str | None,
    schedule: Schedule | str = "blocked",
    order: Literal["fixed", "random"] = "fixed",
    random_state: int | np.random.Generator | None = None,
    on_improper: Literal["skip", "raise"] = "skip",
) -> InferenceMethod:
    """The inference method for ``rule``: a site rule runs as :class:`SiteUpdates` with these options,
    ``"auto"`` is :class:`Auto` with them, an inference method is used as it is (then the options
    must keep their defaults: they belong in its constructor)."""
    sweeps = SweepOptions(schedule, order, random_state, on_improper)  # validated, whatever the rule
    if isinstance(rule, InferenceMethod):
        changed = sweeps.changed()
        if changed:
            raise ValueError(
                f"{', '.join(changed)} apply to site rules and 'auto'; {type(rule).__name__} takes its own "
                f"options in its constructor (e.g. SiteUpdates(rule, schedule=...), Auto(schedule=...))"
            )
        return rule
    if isinstance(rule, str):
        if rule != "auto":
            raise ValueError(f"rule must be a SiteRule, an InferenceMethod or 'auto', got {rule!r}")
        return Auto(**sweeps.as_kwargs())
    if rule is None or isinstance(rule, SiteRule):
        return sweeps.site_updates(EP() if rule is None else rule)
    raise TypeError(
        f"rule must be a relaxep SiteRule (EP, PowerEP, RelaxedEP, ...), an InferenceMethod or 'auto', got {rule!r}"
    )


def infer(
    K: ArrayLike | Prior,
    y: ArrayLike,
    likelihood: Likelihood | None = None,
    rule: SiteRule | InferenceMethod | Literal["auto"] | None = None,
    *,
    schedule: Schedule | Literal["blocked", "sequential", "parallel"] = "blocked",
    max_sweeps: int = 200,
    tol: float = 1e-3,
    order: Literal["fixed", "random"] = "fixed",
    criterion: Literal["marginals", "alpha", "relative"] = "marginals",
    random_state: int | np.random.Generator | None = None,
    on_improper: Literal["skip", "raise"] = "skip",
    init: InferenceResult | Sites | None = None,
    callback: Callable[[int, Posterior], None] | None = None,
    require_both_classes: bool = True,
    blas_threads: int | None = None,
    block_size: int | None = None,
    parallel_step: float | None = None,
    stall_window: int | None = None,
) -> InferenceResult:
    r"""Approximate a GP posterior with EP, Power EP, Relaxed EP or a convergent method.

    With a site rule, it runs the paper's sequential updates (each site in turn, each followed
    by a rank-one posterior correction), applied blockwise; every sweep ends by recomputing
    the posterior from the sites with one factorisation.

    Parameters
    ----------
    K : array_like of shape (n, n), or Prior
        Prior covariance of ``f`` at the training inputs (add any jitter or latent noise
        yourself; latent noise :math:`s^2` turns the step into
        :math:`\epsilon + (1-2\epsilon)\Phi(yf/s)`), or a :class:`~relaxep.posterior.Prior`.
    y : array_like of shape (n,)
        Targets, checked by ``likelihood.check_targets``: labels in ``{-1, +1}``, both present,
        for the binary likelihoods; finite reals for a regression likelihood.
    likelihood : Likelihood, default ``NoisyStep(eps=0.1)``
    rule : SiteRule, InferenceMethod or "auto", default ``EP()``
        A site rule (``EP()``, ``PowerEP(u)``, ``RelaxedEP(c)``, ``FractionalEP(fraction)``) runs
        as :class:`~relaxep.inference.SiteUpdates` with ``schedule``, ``order``,
        ``random_state`` and ``on_improper``; ``"auto"`` is :class:`~relaxep.inference.Auto`
        (EP, damped EP, double-loop EP: the first that converges) with the same options; an
        inference method (``DoubleLoopEP()``, ``Auto(...)``, ``SiteUpdates(...)``) runs as it
        is.  ``infer``'s default is plain EP, the paper's baseline: this low-level call does
        what it is told, while :class:`~relaxep.GPClassifier` defaults to the robust ``"auto"``.
    schedule : Schedule or {"blocked", "sequential", "parallel"}
        :class:`~relaxep.inference.schedules.Blocked` (default: the paper's sequential iterates to
        rounding, applied as one BLAS-3 update per block of 64 sites),
        :class:`~relaxep.inference.schedules.Sequential` (a rank-one update after each site) or
        :class:`~relaxep.inference.schedules.Parallel` (all sites from one set of cavities with an
        adaptive step; same fixed points, other iterates).  Pass ``Blocked(block_size)`` or
        ``Parallel(step)`` for their options.
    max_sweeps : int
        Upper bound on sweeps (>= 1).
    tol : float
        Converged when the statistic is below ``tol`` in a sweep without skipped sites.
    order : {"fixed", "random"}
        Site order within a sweep; ``"random"`` draws a permutation per sweep.
    criterion : {"marginals", "alpha", "relative"}
        ``"marginals"`` (default): the largest change of a posterior marginal, its mean in
        standard deviations and its variance as a log-ratio; scale-free.  ``"alpha"`` (the
        paper's): :math:`R = \|\alpha_t - \alpha_{t-1}\|_2`, which scales with the kernel
        amplitude (on :math:`10^{10}K` it is below 1e-3 after one sweep).  ``"relative"``:
        :math:`R / \|\alpha_t\|_2`.  ``trace`` records the chosen statistic
        (:mod:`relaxep.inference.method`).
    random_state : int, Generator or None
        Seed for ``order="random"``.
    on_improper : {"skip", "raise"}
        An improper cavity is skipped and counted (default), or raises
        :class:`~relaxep.ImproperPosteriorError`.
    init : InferenceResult or Sites, optional
        Warm start from these sites (a result's :attr:`~relaxep.InferenceResult.sites`, or a
        :class:`~relaxep.inference.warm.Sites`; same ``n``); ignored when they make the posterior
        improper under this ``K``.
    callback : callable, optional
        ``callback(sweep, posterior)`` after each sweep's site updates and before the
        refresh (for monitoring and tests).
    require_both_classes : bool
        Reject labels of one class only (default; binary likelihoods).  ``False`` allows it, e.g. for a
        single site, whose posterior is well defined.
    blas_threads : int or None
        Run with at most this many BLAS threads (``threadpoolctl``), restored on return.  ``None``
        (default): one thread, except for a dense prior of at least
        :data:`relaxep._threads.DENSE_BLAS_FROM` (2500) sites, which keeps the caller's setting for its
        :math:`O(n^3)` factorisations (below that, on 2 cores, more threads made EP slower); a sparse
        prior's row blocks run on its own ``n_jobs`` threads.
    block_size, parallel_step : int, float, optional
        Old spellings of ``schedule=Blocked(block_size)`` and ``schedule=Parallel(parallel_step)``.
    stall_window : int or None
        Give up (status ``"abandoned"``) when the statistic has set no new minimum in this many
        sweeps (``None``, default: run to ``max_sweeps``); with ``"auto"``, its last stage too.
        A hyperparameter search uses it to leave a region where the run does not converge quickly.

    Returns
    -------
    InferenceResult
        Its ``status`` says how the run ended (:mod:`relaxep.inference.result`).
    """
    prior = as_prior(K)
    likelihood = NoisyStep(eps=0.1) if likelihood is None else likelihood
    if not isinstance(likelihood, Likelihood):
        raise TypeError(f"likelihood must be a relaxep Likelihood, got {likelihood!r}")
    classes = {"both_classes": require_both_classes} if likelihood.class_targets else {}
    y = likelihood.check_targets(y, prior.n, **classes)
    schedule = _old_schedule_options(schedule, block_size, parallel_step)
    method = as_method(rule, schedule, order, random_state, on_improper)
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    options = RunOptions(
        max_sweeps=check_positive_int(max_sweeps, "max_sweeps"),
        tol=check_positive_number(tol, "tol"),
        criterion=criterion,
        callback=callback,
        stall_window=None if stall_window is None else check_positive_int(stall_window, "stall_window"),
    )
    if blas_threads is not None:
        check_positive_int(blas_threads, "blas_threads")
    if blas_threads is None:
        limits = fit_threads(prior.n, dense=not isinstance(prior, SparsePrior))
    else:
        limits = threadpool_limits(limits=blas_threads, user_api="blas")
    with limits:
        return method.run(prior, y, likelihood, options, _start(init))


def _start(init: object) -> Sites | None:
    """``init`` as the sites to start from: a :class:`Sites`, or a result's ``sites``."""
    if init is None or isinstance(init, Sites):
        return init
    if isinstance(init, InferenceResult):
        return init.sites
    raise TypeError(f"init must be None, an InferenceResult or a relaxep.inference.warm.Sites, got {init!r}")


def _old_schedule_options(
    schedule: Schedule | str, block_size: int | None, parallel_step: float | None
) -> Schedule | str:
    """Map the old one-schedule keywords onto schedule objects (with a FutureWarning)."""
    if block_size is None and parallel_step is None:
        return schedule
    warnings.warn(
        "block_size= and parallel_step= are old spellings: pass schedule=Blocked(block_size) or "
        "schedule=Parallel(step) instead",
        FutureWarning,
        stacklevel=3,
    )
    name = as_schedule(schedule)
    if block_size is not None:
        blocked = Blocked(check_positive_int(block_size, "block_size"))
        if isinstance(name, Blocked):
            schedule = blocked
    if parallel_step is not None:
        parallel = Parallel(check_unit_interval(parallel_step, "parallel_step"))
        if isinstance(name, Parallel):
            schedule = parallel
    return schedule
