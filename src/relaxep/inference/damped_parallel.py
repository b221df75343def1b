r"""Damped parallel EP for the joint multi-class posteriors, and its result.

One loop serves every representation of :class:`~relaxep.posterior.multiclass.base.JointPosterior`
(nested EP for the multinomial probit, dense EP in the label differences for the robust max).
A sweep

1. proposes new sites from every cavity (:meth:`~JointPosterior.propose`; a point with an
   improper cavity keeps its site),
2. moves every site a step :math:`s` toward its proposal (:meth:`~JointPosterior.with_sites`),
   halving :math:`s` while the new posterior is improper and declaring the run ``"diverged"``
   once :math:`s < 10^{-4}`,
3. records the convergence statistic (below) and, where it grew over the previous sweep after
   the second, shortens the step of the following sweeps by a quarter, down to 0.05 (EP
   oscillates).

The statistic is the largest move of a posterior marginal between sweeps:

.. math::
    R = \max_{i, c} \max\big(|\mu_{ic}^t - \mu_{ic}^{t-1}| / \sqrt{v_{ic}^{t-1}},\
    |\log v_{ic}^t - \log v_{ic}^{t-1}|\big),

the mean in standard deviations (of the previous sweep) and the variance as a log ratio.  The loop enters
it in the run's :class:`~relaxep.inference.ledger.SweepLedger`, whose rules end the run: converged when
:math:`R` is below ``tol`` in a sweep that skipped no site, diverged when no step is proper.  The result
reports its status by the names of :mod:`relaxep.inference.result` and warns about nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from relaxep._typing import Array, Status
from relaxep.inference.ledger import RunOptions, SweepLedger, marginal_change
from relaxep.posterior.multiclass.base import JointPosterior, Proposal

__all__ = ["DampedParallelOptions", "MulticlassResult", "damped_parallel_ep"]

#: smallest step a sweep tries before the run is declared diverged
MIN_STEP = 1e-4
#: floor of the step after the oscillation rule has shortened it
MIN_DAMPING = 0.05


@dataclass(frozen=True)
class DampedParallelOptions:
    """The step, the sweep budget and tolerance, and ``callback(sweep, change)`` after every sweep."""

    damping: float
    max_sweeps: int = 200
    tol: float = 1e-3
    callback: Callable[[int, float], None] | None = None


@dataclass
class MulticlassResult:
    """A joint multi-class EP fit.

    Attributes
    ----------
    likelihood : MulticlassLikelihood
    n_classes : int
    status : {"converged", "max_sweeps", "diverged"}
        How the run ended (the status names of :mod:`relaxep.inference.result`).
    n_sweeps : int
    trace : tuple of float
        Per sweep, the largest move of a posterior marginal (mean in standard deviations,
        variance as a log ratio); convergence is this below ``tol``.
    n_skipped : int
        Sites skipped in the last sweep (improper cavity).
    log_evidence : float
        EP's :math:`\\log Z_{EP}`: ``nan`` when the run diverged or a cavity is improper (as for
        :class:`~relaxep.inference.InferenceResult`).
    mean, cov : ndarray (n, C), (n, C, C)
        Posterior marginals of the latent at the training points.
    sites : tuple of ndarray
        Nested EP: the inner sites ``(tau, nu)`` (n, C-1); robust max: ``(P, beta)`` in ``w``.
    posterior : JointPosterior
        The posterior at the final sites (:class:`~relaxep.posterior.multiclass.NestedPosterior`,
        :class:`~relaxep.posterior.multiclass.SparseNestedPosterior`, whose predictions take the test points'
        features :math:`\\Phi_*` in place of ``K_star``, or
        :class:`~relaxep.posterior.multiclass.RobustMaxPosterior`).
    """

    likelihood: Any
    n_classes: int
    status: Status
    n_sweeps: int
    trace: tuple[float, ...]
    n_skipped: int
    log_evidence: float
    mean: Array
    cov: Array
    sites: tuple[Array, Array] | None
    posterior: JointPosterior | None = field(repr=False, default=None, compare=False)

    @property
    def converged(self) -> bool:
        """``status == "converged"``."""
        return self.status == "converged"

    def predict_latent(self, K_star: ArrayLike | list[Array], k_diag: ArrayLike) -> tuple[Array, Array]:
        r"""Predictive :math:`N(\mu_*, \Sigma_*)` of the ``C`` latents at test points.

        Parameters
        ----------
        K_star : array_like (n_*, n) or (C, n_*, n)
            Cross-covariances test-train (shared or per class).
        k_diag : array_like (n_*,) or (C, n_*)
            Prior variances at the test points.

        Returns
        -------
        mean (n_*, C), cov (n_*, C, C)
            Nested EP: :math:`\mu_{*c} = k_{*c}^T \alpha_c`,
            :math:`\Sigma_* = \operatorname{diag}(k_{**c} - k_{*c}^T E_c k_{*c}) + Y^T Y`,
            :math:`Y_c = L_M^{-1} E_c k_{*c}`.  Robust max:
            :math:`\mu_* = K_{*w} \gamma`, :math:`\Sigma_* = K_{**} - K_{*w} (I + T G)^{-1} T K_{w*}`.
        """
        return self._posterior().predict_latent(K_star, k_diag)

    def predict_proba(self, K_star: ArrayLike | list[Array], k_diag: ArrayLike) -> Array:
        """Class probabilities ``(n_*, C)``: the likelihood's predictive under :meth:`predict_latent`."""
        mean, cov = self.predict_latent(K_star, k_diag)
        return self.likelihood.predict_proba(mean, cov)

    def predict_log_proba(self, K_star: ArrayLike | list[Array], k_diag: ArrayLike) -> Array:
        """Log class probabilities ``(n_*, C)``, computed in log space (:meth:`predict_proba`'s logarithm)."""
        mean, cov = self.predict_latent(K_star, k_diag)
        return self.likelihood.predict_log_proba(mean, cov)

    def evidence_gradient(self, dK: ArrayLike) -> Array:
        """Gradient of :attr:`log_evidence` in the hyperparameters of a kernel shared by the classes
        (``dK``: (n, n, p), scikit-learn's ``eval_gradient`` layout; valid at a fixed point)."""
        return self._posterior().evidence_gradient(dK)

    def _posterior(self) -> JointPosterior:
        if self.posterior is None:
            raise AttributeError("this result holds no posterior")
        return self.posterior


def _backtracked(post: JointPosterior, proposal: Proposal, damping: float) -> JointPosterior | None:
    """``post.with_sites(proposal, step)`` at ``step = damping``, halved while the new posterior is
    improper (``LinAlgError``); ``None`` once the step falls below :data:`MIN_STEP` (the run diverged)."""
    step = damping
    while step >= MIN_STEP:
        try:
            return post.with_sites(proposal, step)
        except np.linalg.LinAlgError:
            step *= 0.5
    return None


def damped_parallel_ep(posterior: JointPosterior, options: DampedParallelOptions) -> MulticlassResult:
    """Run damped parallel EP from ``posterior`` (module docstring) until converged, out of sweeps or diverged.

    Parameters
    ----------
    posterior : JointPosterior
        The starting posterior (zero sites, or a warm start).
    options : DampedParallelOptions

    Returns
    -------
    MulticlassResult
        The posterior at the last proper sites; its status says how the run ended (no warning).
    """
    damping = options.damping
    # the ledger applies the stop rules (no stall window; the stuck rule needs the skipped sites, not given)
    ledger = SweepLedger(RunOptions(max_sweeps=options.max_sweeps, tol=options.tol))
    trace = ledger.trace
    skipped = 0
    for _sweep in range(options.max_sweeps):
        proposal = posterior.propose()
        skipped = proposal.n_skipped
        moved = _backtracked(posterior, proposal, damping)
        if moved is None or not np.all(np.isfinite(moved.mean)):
            ledger.diverge(skipped, record=False)  # (the trace holds the sweeps that took a step)
            break
        change = marginal_change(posterior.mean, posterior.marginal_var, moved.mean, moved.marginal_var, scale="old")
        posterior = moved
        if len(trace) >= 2 and change > trace[-1]:
            damping = max(0.75 * damping, MIN_DAMPING)  # the change grew: EP oscillates, take shorter steps
        ended = ledger.sweep(change, skipped)
        if options.callback is not None:
            options.callback(len(trace), change)
        if ended:
            break
    status = ledger.status
    log_z = posterior.log_evidence() if status != "diverged" else float("nan")
    mean, cov = posterior.latent_marginals()
    return MulticlassResult(
        likelihood=posterior.likelihood,
        n_classes=posterior.n_classes,
        status=status,
        n_sweeps=len(trace),
        trace=tuple(trace),
        n_skipped=skipped,
        log_evidence=log_z if np.isfinite(log_z) else float("nan"),
        mean=mean,
        cov=cov,
        sites=posterior.sites,
        posterior=posterior,
    )
