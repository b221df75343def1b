r"""``infer``: run EP, Power EP or Relaxed EP to a fixed point, and its result.

The convergence statistic is the paper's
:math:`R(\text{iter}) = \|\alpha_{\text{iter}} - \alpha_{\text{iter}-1}\|_2` with the
predictive weights :math:`\alpha = (I + T K)^{-1}\nu` (latent mean :math:`K\alpha`);
a run has converged when :math:`R <` ``tol`` in a sweep that skipped no site.
:math:`R` scales with the kernel amplitude (as :math:`\alpha \sim 1/\sqrt{\text{amp}}`),
so a tolerance is only meaningful together with the kernel's scale.

Every run ends with one of three statuses:

``"converged"``
    the criterion above held;
``"max_sweeps"``
    the sweep budget ran out (oscillation or slow convergence; look at ``trace``);
``"diverged"``
    a site update produced NaN/inf or the sites made the posterior improper.  The
    result then holds the last proper posterior (the sites at the start of the
    failing sweep), never NaN.

``"stalled"``
    double-loop EP only: its inner problems stopped having a solution (a likelihood that
    vanishes in one tail, see :mod:`relaxep.double_loop`).  With ``rule="auto"``,
    ``attempts`` may also list ``"stalled"`` for an early stage abandoned because :math:`R`
    set no new minimum in :data:`AUTO_STALL_WINDOW` sweeps; ``auto`` itself never returns it
    (an unconverged ``auto`` is ``"max_sweeps"``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import linalg
from threadpoolctl import threadpool_limits

from relaxep._validation import check_binary_labels, check_kernel_matrix
from relaxep.double_loop import double_loop
from relaxep.likelihoods import Likelihood, NoisyStep
from relaxep.posterior import DensePosterior, ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.rules import EP, DoubleLoopEP, SiteRule
from relaxep.schedules import (
    ParallelStep,
    SweepStats,
    blocked_sweep,
    parallel_sweep,
    sequential_sweep,
)

__all__ = ["ConvergenceStatus", "InferenceResult", "infer"]

Array = NDArray[np.float64]
ConvergenceStatus = Literal["converged", "max_sweeps", "diverged", "stalled"]


@dataclass(frozen=True)
class InferenceResult:
    """The outcome of :func:`infer`: posterior, sites, convergence diagnostics.

    Attributes
    ----------
    mean, cov : ndarray
        Posterior of ``f`` at the training points, shapes ``(n,)`` and ``(n, n)``.
    alpha : ndarray
        Predictive weights, ``mean = K @ alpha``.
    site_precision, site_mean_precision : ndarray
        Natural site parameters :math:`(\\tau_i, \\nu_i)` for ``f`` (not folded).
    relaxation : ndarray
        REP's :math:`b_i` at each site's last update (zeros for EP and Power EP).
    status : {"converged", "max_sweeps", "diverged", "stalled"}
    n_sweeps : int
        Sweeps run.
    n_skipped : int
        Site visits skipped in all sweeps (improper cavity or update).
    trace : ndarray
        :math:`R` after each sweep.
    log_evidence : float
        EP approximation to :math:`\\log p(y)`; ``nan`` (undefined) when a cavity of
        the final posterior is improper, which a ``"converged"`` run never has.
    attempts : tuple of (rule, status, sweeps)
        With ``rule="auto"``: every stage tried, in order (empty otherwise).
    n_inner : int
        :class:`~relaxep.rules.DoubleLoopEP` only: Newton iterations of its inner problems
        (each one :math:`2n \times 2n` factorisation); a "sweep" is one outer iteration.
    """

    mean: Array
    alpha: Array
    site_precision: Array
    site_mean_precision: Array
    relaxation: Array
    status: ConvergenceStatus
    n_sweeps: int
    n_skipped: int
    trace: Array
    log_evidence: float
    likelihood: Likelihood
    rule: SiteRule
    skipped_per_sweep: Array = field(repr=False)
    _posterior: DensePosterior = field(repr=False, compare=False)
    attempts: tuple[tuple[str, str, int], ...] = ()
    n_inner: int = 0

    @property
    def cov(self) -> Array:
        """Posterior covariance of ``f`` at the training points, ``(n, n)``.

        Formed on first access (after the parallel schedule, whose sweeps keep only the
        marginals, that is one more factorisation); exactly symmetric, a C-ordered view
        of the posterior's array rather than a copy.
        """
        return self._posterior.cov.T

    @property
    def converged(self) -> bool:
        """``status == "converged"``."""
        return self.status == "converged"

    def predict_latent(self, cross_kernel: ArrayLike, test_diag: ArrayLike) -> tuple[Array, Array]:
        r"""Latent mean and variance at test points from ``K_star`` (``m x n``) and ``k_star_diag``."""
        ks = np.asarray(cross_kernel, dtype=float)
        kd = np.asarray(test_diag, dtype=float)
        n = self.mean.shape[0]
        if ks.ndim != 2 or ks.shape[1] != n:
            raise ValueError(f"K_star must have shape (m, {n}), got {ks.shape}")
        if kd.shape != (ks.shape[0],):
            raise ValueError(f"k_star_diag must have shape ({ks.shape[0]},), got {kd.shape}")
        if not (np.all(np.isfinite(ks)) and np.all(np.isfinite(kd))):
            raise ValueError("K_star or k_star_diag contains NaN or inf")
        return self._posterior.predict_latent(ks, kd)

    def predict_proba(self, cross_kernel: ArrayLike, test_diag: ArrayLike) -> Array:
        r""":math:`P(y_* = +1) = \int t(f) N(f | \mu_*, s^2_*)\, df` at test points.

        NoisyStep: :math:`\epsilon + (1-2\epsilon)\Phi(\mu_*/s_*)`; probit:
        :math:`\Phi(\mu_*/\sqrt{1 + s^2_*})`; logistic by quadrature.
        """
        mean, var = self.predict_latent(cross_kernel, test_diag)
        return self.likelihood.predict(mean, np.maximum(var, 1e-300))


def _check_psd(kernel: Array) -> None:
    n = kernel.shape[0]
    jitter = 1e-10 * float(np.trace(kernel)) / n
    try:
        linalg.cholesky(kernel + jitter * np.eye(n), lower=True, check_finite=False)
    except linalg.LinAlgError as exc:
        raise KernelNotPositiveDefiniteError(
            "the kernel matrix K is not positive semi-definite (its Cholesky factor fails even with "
            "1e-10 relative jitter). Check the kernel, or add jitter / latent noise (WhiteKernel)."
        ) from exc


def infer(
    K: ArrayLike,
    y: ArrayLike,
    likelihood: Likelihood | None = None,
    rule: SiteRule | Literal["auto"] | None = None,
    *,
    schedule: Literal["blocked", "sequential", "parallel"] = "blocked",
    block_size: int = 64,
    parallel_step: float = 1.0,
    max_sweeps: int = 200,
    tol: float = 1e-3,
    order: Literal["fixed", "random"] = "fixed",
    criterion: Literal["alpha", "relative"] = "alpha",
    random_state: int | np.random.Generator | None = None,
    on_improper: Literal["skip", "raise"] = "skip",
    init: InferenceResult | None = None,
    callback: Callable[[int, DensePosterior], None] | None = None,
    require_both_classes: bool = True,
) -> InferenceResult:
    r"""Approximate the GP classification posterior with EP, Power EP or Relaxed EP.

    By default it runs the paper's sequential updates (each site in turn, each followed
    by a rank-one posterior correction), applied blockwise; every sweep ends by
    recomputing the posterior from the sites with one factorisation.

    Parameters
    ----------
    K : array_like, shape (n, n)
        Prior covariance of ``f`` at the training inputs (add any jitter or latent
        noise yourself; latent noise :math:`s^2` turns the step into
        :math:`\epsilon + (1-2\epsilon)\Phi(yf/s)`).
    y : array_like, shape (n,)
        Labels in ``{-1, +1}``, both present.
    likelihood : Likelihood, default ``NoisyStep(eps=0.1)``
    rule : SiteRule or "auto", default ``EP()``
        ``EP()``, ``PowerEP(u)``, ``RelaxedEP(c)``, ``FractionalEP(alpha)``,
        ``DoubleLoopEP()`` (convergent; ``schedule`` and ``order`` do not apply, a sweep is
        one outer iteration), or ``"auto"``: try the stages of :data:`AUTO_STAGES` in turn
        (EP, damped EP, double-loop EP; all three aim at the same EP fixed point), each with
        up to ``max_sweeps`` sweeps and its tolerance multiplied by its damping step (a step
        ``s`` shortens each change by ``s``; Minka), and return the first that converges,
        else the stage with the smallest final ``R``; ``attempts`` lists them.
    schedule : {"blocked", "sequential", "parallel"}
        ``"sequential"``: the paper's, a rank-one update after each site.  ``"blocked"``
        (default): the same iterates to rounding, applied as one rank-``block_size``
        BLAS-3 update per block (faster from a few hundred sites on).  ``"parallel"``: all
        sites from one set of cavities with step ``parallel_step``, halved whenever the
        update would make the posterior improper; same fixed points, other iterates.
    block_size : int
        Sites per block of the blocked schedule.
    parallel_step : float
        Initial step of the parallel schedule, in (0, 1].
    max_sweeps : int
        Upper bound on sweeps (>= 1).
    tol : float
        Converged when :math:`R < \text{tol}` in a sweep without skipped sites.
    order : {"fixed", "random"}
        Site order within a sweep; ``"random"`` draws a permutation per sweep.
    criterion : {"alpha", "relative"}
        ``"alpha"`` (the paper): :math:`R = \|\alpha_t - \alpha_{t-1}\|_2`, which scales with
        the kernel amplitude.  ``"relative"``: :math:`R / \|\alpha_t\|_2`, scale-free.
        ``trace`` records the chosen statistic.
    random_state : int, Generator or None
        Seed for ``order="random"``.
    on_improper : {"skip", "raise"}
        An improper cavity is skipped and counted (default), or raises
        :class:`~relaxep.posterior.ImproperPosteriorError`.
    init : InferenceResult, optional
        Warm start from these sites (same ``n``); ignored when they make the posterior
        improper under this ``K``.
    callback : callable, optional
        ``callback(sweep, posterior)`` after each sweep's rank-one updates and
        before the refresh (for monitoring and tests).
    require_both_classes : bool
        Reject ``y`` with one class only (default).  ``False`` allows it, e.g. for a
        single site, whose posterior is well defined.

    Returns
    -------
    InferenceResult
    """
    kernel = check_kernel_matrix(K)
    n = kernel.shape[0]
    labels = check_binary_labels(y, n, both_classes=require_both_classes)
    likelihood = NoisyStep(eps=0.1) if likelihood is None else likelihood
    rule = EP() if rule is None else rule
    auto = isinstance(rule, str) and rule == "auto"
    if not isinstance(likelihood, Likelihood):
        raise TypeError(f"likelihood must be a relaxep Likelihood, got {likelihood!r}")
    if not auto and not isinstance(rule, SiteRule):
        raise TypeError(f"rule must be a relaxep SiteRule (EP, PowerEP, RelaxedEP), got {rule!r}")
    if isinstance(max_sweeps, bool) or int(max_sweeps) != max_sweeps or max_sweeps < 1:
        raise ValueError(f"max_sweeps must be an integer >= 1, got {max_sweeps!r}")
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be positive and finite, got {tol!r}")
    if schedule not in ("blocked", "sequential", "parallel"):
        raise ValueError(f"schedule must be 'blocked', 'sequential' or 'parallel', got {schedule!r}")
    if isinstance(block_size, bool) or int(block_size) != block_size or block_size < 1:
        raise ValueError(f"block_size must be an integer >= 1, got {block_size!r}")
    if not (0.0 < parallel_step <= 1.0):
        raise ValueError(f"parallel_step must lie in (0, 1], got {parallel_step!r}")
    if criterion not in ("alpha", "relative"):
        raise ValueError(f"criterion must be 'alpha' or 'relative', got {criterion!r}")
    if order not in ("fixed", "random"):
        raise ValueError(f"order must be 'fixed' or 'random', got {order!r}")
    if on_improper not in ("skip", "raise"):
        raise ValueError(f"on_improper must be 'skip' or 'raise', got {on_improper!r}")
    _check_psd(kernel)
    # Below ~2000 sites a second BLAS thread only adds synchronisation (measured on 2 cores,
    # EP probit: n = 400 blocked 0.21 s vs 0.72 s, n = 1000 parallel 0.85 s vs 1.31 s); at
    # n = 2000 two threads win (blocked 6.8 s vs 8.3 s, parallel 4.2 s vs 4.6 s).
    limits = 1 if n < _THREADED_MIN_N else None
    with threadpool_limits(limits=limits, user_api="blas"):
        stages = AUTO_STAGES if auto else (rule,)
        results = []
        for stage in stages:
            res = _run(
                kernel,
                labels,
                likelihood,
                stage,
                _Schedule(schedule, int(block_size), ParallelStep(float(parallel_step))),
                int(max_sweeps),
                tol * stage.damping if auto else tol,
                order,
                criterion,
                random_state,
                on_improper,
                init if stage is stages[0] else None,
                callback,
                stall_window=AUTO_STALL_WINDOW if auto and stage is not stages[-1] else None,
            )
            results.append(res)
            if res.converged:
                break
        if not auto:
            return results[0]
        best = results[-1] if results[-1].converged else min(results, key=lambda r: r.trace[-1])
        attempts = tuple((repr(r.rule), r.status, r.n_sweeps) for r in results)
        status = best.status if best.status != "stalled" else "max_sweeps"
        return replace(best, attempts=attempts, status=status)


#: an early stage of ``rule="auto"`` is abandoned ("stalled") when ``R`` has set no new
#: minimum in this many sweeps: oscillation, not slow convergence (which keeps lowering ``R``)
AUTO_STALL_WINDOW = 20

#: the stages of ``rule="auto"``, tried in this order
AUTO_STAGES: tuple[SiteRule, ...] = (EP(), EP(damping=0.5), DoubleLoopEP())


_THREADED_MIN_N = 2000


@dataclass
class _Schedule:
    name: str
    block_size: int
    step: ParallelStep

    def sweep(
        self,
        post: DensePosterior,
        labels: Array,
        likelihood: Likelihood,
        rule: SiteRule,
        relaxation: Array,
        order: Array,
    ) -> SweepStats:
        if self.name == "sequential":
            return sequential_sweep(post, labels, likelihood, rule, relaxation, order)
        if self.name == "blocked":
            return blocked_sweep(post, labels, likelihood, rule, relaxation, order, self.block_size)
        return parallel_sweep(post, labels, likelihood, rule, relaxation, self.step)


def _run(
    kernel: Array,
    labels: Array,
    likelihood: Likelihood,
    rule: SiteRule,
    schedule: _Schedule,
    max_sweeps: int,
    tol: float,
    order: str,
    criterion: str,
    random_state: int | np.random.Generator | None,
    on_improper: str,
    init: InferenceResult | None,
    callback: Callable[[int, DensePosterior], None] | None,
    stall_window: int | None = None,
) -> InferenceResult:
    n = kernel.shape[0]
    rng = np.random.default_rng(random_state)

    if init is not None and init.site_precision.shape != (n,):
        raise ValueError(f"init has {init.site_precision.shape[0]} sites, K has {n} rows")
    if isinstance(rule, DoubleLoopEP):
        return _run_double_loop(kernel, labels, likelihood, rule, max_sweeps, tol, criterion, init, callback)
    post = None
    if init is not None:
        try:
            post = DensePosterior(kernel, init.site_precision, init.site_mean_precision)
            relaxation = init.relaxation.copy()
        except ImproperPosteriorError:
            post = None  # those sites do not fit this K: start afresh
    if post is None:
        post = DensePosterior(kernel)
        relaxation = np.zeros(n)

    trace: list[float] = []
    skipped: list[int] = []
    status: ConvergenceStatus = "max_sweeps"
    alpha_prev = post.alpha
    for sweep in range(max_sweeps):
        saved = (post.site_precision.copy(), post.site_mean_precision.copy(), relaxation.copy())
        perm = rng.permutation(n) if order == "random" else np.arange(n)
        try:
            stats = schedule.sweep(post, labels, likelihood, rule, relaxation, perm)
        except ImproperPosteriorError:  # the parallel step could not keep the posterior proper
            stats = SweepStats(n, 0, 1)
        if stats.n_improper_cavities and on_improper == "raise":
            raise ImproperPosteriorError(f"{stats.n_improper_cavities} improper cavities in sweep {sweep + 1}")
        if callback is not None:
            callback(sweep, post)
        skipped.append(stats.n_skipped)
        try:
            if stats.n_nonfinite:
                raise ImproperPosteriorError("a site update was not finite")
            if schedule.name != "parallel":  # the parallel sweep refreshes itself
                post.refresh()
            alpha = post.alpha
            r = float(np.linalg.norm(alpha - alpha_prev))
            if criterion == "relative":
                r /= max(float(np.linalg.norm(alpha)), np.finfo(float).tiny)
            if not (np.isfinite(r) and np.all(np.isfinite(post.mean))):
                raise ImproperPosteriorError("the posterior is not finite")
        except (ImproperPosteriorError, KernelNotPositiveDefiniteError, linalg.LinAlgError):
            status = "diverged"
            trace.append(float("inf"))
            post = DensePosterior(kernel, saved[0], saved[1])
            relaxation = saved[2]
            break
        trace.append(r)
        alpha_prev = alpha
        if r < tol and stats.n_skipped == 0 and np.all(post.cavity(slice(None))[1] > 0):
            status = "converged"
            break
        if stall_window is not None and len(trace) > stall_window:
            if min(trace[-stall_window:]) >= min(trace[:-stall_window]):
                status = "stalled"
                break

    return _result(post, labels, likelihood, rule, status, trace, skipped, relaxation)


def _run_double_loop(
    kernel: Array,
    labels: Array,
    likelihood: Likelihood,
    rule: DoubleLoopEP,
    max_sweeps: int,
    tol: float,
    criterion: str,
    init: InferenceResult | None,
    callback: Callable[[int, DensePosterior], None] | None,
) -> InferenceResult:
    start = None
    if init is not None:
        try:
            start = DensePosterior(kernel, init.site_precision, init.site_mean_precision)
        except ImproperPosteriorError:
            start = None
    run = double_loop(
        kernel,
        labels,
        likelihood,
        max_outer=max_sweeps,
        tol=tol,
        accelerate=bool(rule.accelerate),
        start=start,
        relative=criterion == "relative",
        callback=callback,
    )
    post = run.post
    status = "converged" if run.converged else "stalled" if run.stalled else "max_sweeps"
    skipped = [0] * len(run.trace)  # the double loop skips no site
    relaxation = np.zeros(kernel.shape[0])
    return _result(post, labels, likelihood, rule, status, run.trace, skipped, relaxation, run.newton_iterations)


def _result(
    post: DensePosterior,
    labels: Array,
    likelihood: Likelihood,
    rule: SiteRule,
    status: ConvergenceStatus,
    trace: list[float],
    skipped: list[int],
    relaxation: Array,
    n_inner: int = 0,
) -> InferenceResult:
    """The result of a run ending at ``post`` (arrays copied out of the mutable posterior)."""
    return InferenceResult(
        mean=post.mean.copy(),
        alpha=post.alpha,
        site_precision=post.site_precision.copy(),
        site_mean_precision=post.site_mean_precision.copy(),
        relaxation=relaxation.copy(),
        status=status,
        n_sweeps=len(trace),
        n_skipped=int(sum(skipped)),
        trace=np.asarray(trace),
        log_evidence=post.log_evidence(likelihood, labels),
        likelihood=likelihood,
        rule=rule,
        skipped_per_sweep=np.asarray(skipped, dtype=int),
        _posterior=post,
        n_inner=n_inner,
    )
