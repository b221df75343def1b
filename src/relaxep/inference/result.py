r"""What an inference run returns: the posterior, the sites and how the run ended.

Every run ends with one status, each with one meaning:

``"converged"``
    the convergence criterion held in a sweep that skipped no site, all cavities proper;
``"max_sweeps"``
    the sweep budget ran out (slow convergence or oscillation; look at ``trace``);
``"diverged"``
    a site update produced NaN/inf or the sites made the posterior improper; the result
    holds the last proper posterior (the sites at the start of the failing sweep), never NaN;
``"stalled"``
    a convergent method could make no more progress away from a fixed point: double-loop
    EP's inner problems stopped having a solution (a likelihood that vanishes in one tail,
    see :mod:`relaxep.inference.double_loop`), or no step of :class:`~relaxep.inference.ConvergentEP`
    lowered its free energy;
``"abandoned"``
    stopped early because :math:`R` set no new minimum in the last ``stall_window`` sweeps
    (oscillation, not slow convergence); only where a stall window was asked for, as by
    the early stages of :class:`~relaxep.inference.Auto`;
``"stuck"``
    stopped early because :math:`R` was below the tolerance while the same sites were
    skipped in each of the last five sweeps: the sites that can be updated have settled (to
    the tolerance) and the others cannot be (their cavities or updates are improper), so
    more sweeps would not reach a fixed point.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

from relaxep._typing import Array, Status
from relaxep._xp import namespace
from relaxep.errors import ImproperPosteriorError
from relaxep.inference.evidence import log_evidence
from relaxep.inference.warm import Sites
from relaxep.likelihoods import Likelihood
from relaxep.posterior import Posterior, Prior

__all__ = ["Attempt", "InferenceResult", "RunsInference", "make_result", "warm_posterior"]


class RunsInference(Protocol):
    """What a result knows of the method that produced it; every
    :class:`~relaxep.inference.InferenceMethod` is one (a protocol, so that results need not
    import the methods)."""

    def run(
        self, prior: Prior, y: Array, likelihood: Likelihood, options: Any, init: Sites | None = None
    ) -> InferenceResult: ...


@dataclass(frozen=True)
class Attempt:
    """One stage that :class:`~relaxep.inference.Auto` tried: the method, how it ended, its sweeps."""

    method: RunsInference
    status: Status
    n_sweeps: int


@dataclass(frozen=True)
class InferenceResult:
    """The outcome of :func:`~relaxep.infer`: posterior, sites, convergence diagnostics.

    Attributes
    ----------
    mean : ndarray of shape (n,)
        Posterior mean of ``f`` at the training points (``cov``: the covariance, dense priors).
    alpha : ndarray of shape (n,)
        :math:`\\nu - T\\mu`; for a dense prior the predictive weights, ``mean = K @ alpha``.
    site_precision, site_mean_precision : ndarray of shape (n,)
        Natural site parameters :math:`(\\tau_i, \\nu_i)` for ``f`` (not folded).
    relaxation : ndarray of shape (n,)
        REP's :math:`b_i` at each site's last update (zeros for other rules).
    status : {"converged", "max_sweeps", "diverged", "stalled", "abandoned", "stuck"}
        How the run ended (module docstring).
    n_sweeps : int
        Sweeps run (double-loop EP: outer iterations).
    n_skipped : int
        Site visits skipped in all sweeps (improper cavity or update).
    trace : ndarray
        The convergence statistic after each sweep.
    log_evidence : float
        EP approximation to :math:`\\log p(y)` at the fixed point: ``nan`` unless the run
        converged (away from a fixed point the EP formula is not an evidence; on 45% flipped labels
        it gave +105 for discrete labels), and where a cavity is improper.
    likelihood : Likelihood
    method : InferenceMethod
        What produced this posterior (with :class:`~relaxep.inference.Auto`: the stage).
    skipped_per_sweep : ndarray of int
        Site visits skipped in each sweep.
    step_sizes : ndarray
        The step each sweep applied (the parallel schedule halves it where needed; else 1).
    attempts : tuple of Attempt
        With :class:`~relaxep.inference.Auto`: every stage tried, in order (empty otherwise).
    n_inner : int
        Double-loop EP: inner iterations in all (each one Newton step).
    """

    mean: Array
    alpha: Array
    site_precision: Array
    site_mean_precision: Array
    relaxation: Array
    status: Status
    n_sweeps: int
    n_skipped: int
    trace: Array
    log_evidence: float
    likelihood: Likelihood
    method: RunsInference
    skipped_per_sweep: Array = field(repr=False)
    step_sizes: Array = field(repr=False)
    posterior: Posterior = field(repr=False, compare=False)
    attempts: tuple[Attempt, ...] = ()
    n_inner: int = 0

    @property
    def rule(self) -> Any:
        """The site rule that produced the sites (the method itself where it has none)."""
        return getattr(self.method, "site_rule", self.method)

    @property
    def cov(self) -> Array:
        """Posterior covariance of ``f`` at the training points, ``(n, n)`` (dense priors).

        Formed on first access (after the parallel schedule, whose sweeps keep only the
        marginals, that is one more factorisation); exactly symmetric, a C-ordered view
        of the posterior's array rather than a copy.
        """
        cov = getattr(self.posterior, "cov", None)
        if cov is None:
            raise AttributeError(f"{type(self.posterior).__name__} holds no n x n covariance; use marginal_var")
        return cov.T

    @property
    def marginal_var(self) -> Array:
        """Posterior marginal variances of ``f`` at the training points."""
        return self.posterior.marginal_var.copy()

    @property
    def converged(self) -> bool:
        """``status == "converged"``."""
        return self.status == "converged"

    @property
    def sites(self) -> Sites:
        """The sites of this result, to start another run from (``infer(..., init=result.sites)``)."""
        return Sites(self.site_precision, self.site_mean_precision, self.relaxation)

    def predict_latent(self, cross_kernel: ArrayLike, test_diag: ArrayLike) -> tuple[Array, Array]:
        r"""Latent mean and variance at test points from ``K_star`` (``m x n``) and ``k_star_diag`` (``m``)."""
        space = namespace(cross_kernel, test_diag)  # another array library's stay there (relaxep._xp)
        xp = space.xp
        ks = np.asarray(cross_kernel, dtype=float) if space.on_host else cross_kernel
        kd = np.asarray(test_diag, dtype=float) if space.on_host else test_diag
        if ks.ndim != 2:
            raise ValueError(f"K_star must be a matrix of cross-covariances, got shape {ks.shape}")
        if kd.shape != (ks.shape[0],):
            raise ValueError(f"k_star_diag must have shape ({ks.shape[0]},), got {kd.shape}")
        if not (bool(xp.all(xp.isfinite(ks))) and bool(xp.all(xp.isfinite(kd)))):
            raise ValueError("K_star or k_star_diag contains NaN or inf")
        if bool(xp.any(kd < 0.0)):
            raise ValueError("k_star_diag holds prior variances; they must be >= 0")
        return self.posterior.predict_latent(ks, kd)

    def predict_proba(self, cross_kernel: ArrayLike, test_diag: ArrayLike) -> Array:
        r""":math:`P(y_* = +1) = \int t(f) N(f | \mu_*, s^2_*)\, df` at test points (binary likelihoods).

        .. deprecated:: 0.3
            Removed in 0.4 (a result may be a regression's): use the estimator's ``predict_proba``, or
            ``result.likelihood.predict(*result.predict_latent(K_star, k_star_diag))``.
        """
        _binary_head("predict_proba")
        mean, var = self.predict_latent(cross_kernel, test_diag)
        return np.clip(self.likelihood.predict(mean, np.maximum(var, 1e-300)), 0.0, 1.0)

    def predict_log_odds(self, cross_kernel: ArrayLike, test_diag: ArrayLike) -> Array:
        r""":math:`\log P(y_* = +1) - \log P(y_* = -1)` at test points (binary likelihoods' ``predict_log_odds``).

        .. deprecated:: 0.3
            Removed in 0.4: use the estimator's ``decision_function``, or the likelihood's
            ``predict_log_odds`` at :meth:`predict_latent`.
        """
        _binary_head("predict_log_odds")
        if not hasattr(self.likelihood, "predict_log_odds"):
            raise TypeError(f"{type(self.likelihood).__name__} is not a binary likelihood: it has no log-odds")
        mean, var = self.predict_latent(cross_kernel, test_diag)
        return self.likelihood.predict_log_odds(mean, np.maximum(var, 1e-300))


def _binary_head(name: str) -> None:
    warnings.warn(
        f"InferenceResult.{name} is binary-only and is removed in 0.4; use the estimator's "
        "predict_proba/decision_function, or likelihood.predict(...) on predict_latent",
        FutureWarning,
        stacklevel=3,
    )


def warm_posterior(prior: Prior, init: Sites | None) -> Posterior | None:
    """The posterior at ``init``'s sites, or ``None`` (no ``init``, or its sites do not fit this prior)."""
    if init is None:
        return None
    if init.site_precision.shape != (prior.n,):
        raise ValueError(f"init has {init.site_precision.shape[0]} sites, the prior has {prior.n}")
    try:
        return prior.posterior(init.site_precision, init.site_mean_precision)
    except ImproperPosteriorError:
        return None  # those sites do not fit this K: start afresh


def make_result(
    method: RunsInference,
    post: Posterior,
    y: Array,
    likelihood: Likelihood,
    status: Status,
    trace: list[float],
    skipped: list[int],
    relaxation: Array,
    step_sizes: list[float] | None = None,
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
        log_evidence=log_evidence(post, likelihood, y) if status == "converged" else float("nan"),
        likelihood=likelihood,
        method=method,
        skipped_per_sweep=np.asarray(skipped, dtype=int),
        step_sizes=np.asarray(step_sizes if step_sizes is not None else [1.0] * len(trace)),
        posterior=post,
        n_inner=n_inner,
    )
