r"""Convergent EP by block-coordinate descent on the EC free energy in moment coordinates.

EP's fixed points are the stationary points of the expectation-consistent free energy
(Opper & Winther 2005; Heskes & Zoeter 2002).  Written as a function of the Gaussian
posterior :math:`q = N(m, A)`, :math:`v = \operatorname{diag}A`,

.. math::
    \Phi(m, v) = \mathrm{KL}(q \,\|\, p) + \sum_i F_{r,i}(m_i, v_i) - \sum_i H[N(m_i, v_i)] + \text{const},

where :math:`F_{r,i}(m, v) = \max_{h, c}\,[hm - c(v + m^2)/2 - L_i(h, c)]` is the conjugate of the
tilted log-partition :math:`L_i(h, c) = \log\int p(y_i | f) e^{hf - cf^2/2}df`; its maximiser, the
*r-cavity*, is the cavity whose tilted distribution has the moments :math:`(m_i, v_i)`
(:func:`~relaxep.inference.free_energy.r_cavities`).  At a stationary point the posterior's own
cavities equal the r-cavities: EP's fixed point, where :math:`\Phi = -\log Z_{EP}`.

The method splits the variables as Seeger & Nickisch (2011) split theirs, means against variances,
so that the expensive part (marginal variances: one factorisation and a triangular inverse) is
paid once per outer iteration and the means are found by Laplace-like Newton steps (one
Cholesky each):

1. **Mean block** (:math:`v` fixed): minimise :math:`\tfrac12 m^\top K^{-1} m + \sum_i F_{r,i}(m_i, v_i)`
   by Newton's method, :math:`m \leftarrow (K^{-1} + W)^{-1}(Wm - F_r')` with
   :math:`W = F_r'' = u^\top \operatorname{Cov}_r[\phi]^{-1} u - c_r`, :math:`u = (1, -m)`
   (negative curvatures shrunk until the system is positive definite) and an Armijo line search.
2. **Variance block** (:math:`m` fixed): move the site precisions along the cavity mismatch
   :math:`\delta c = (1/v - \tau) - c_r` (with :math:`\nu = \alpha + \tau m` so that the mean stays),
   a descent direction (:math:`\partial\Phi/\partial\tau = -\tfrac12 (A\circ A)\,\delta c`),
   accelerated by Anderson mixing of the last few steps and accepted only where :math:`\Phi`
   decreases (else backtracking).

Every accepted step lowers :math:`\Phi`, which is bounded below, so the iteration cannot oscillate;
a point where neither block lowers it is an EP fixed point.  Unlike the double loop
(:mod:`relaxep.inference.double_loop`) no :math:`2n\times 2n` system is ever formed.  Where EP
oscillates on the noise-free step at n = 1000 this takes 15-25 outer iterations
(:doc:`the benchmark tables </benchmarks>`).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from relaxep._typing import Array, Status
from relaxep._validation import check_positive_int
from relaxep.errors import ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.inference.free_energy import (
    RCavities,
    marginal_natural,
    moment_free_energy,
    moment_residual,
    phi_cov,
    r_cavities,
)
from relaxep.inference.ledger import RunOptions, SweepLedger
from relaxep.inference.method import InferenceMethod
from relaxep.inference.result import InferenceResult, make_result, warm_posterior
from relaxep.inference.start import reachable_start
from relaxep.inference.warm import Sites
from relaxep.likelihoods import Likelihood
from relaxep.posterior import Posterior, Prior

__all__ = ["ConvergentEP"]


class ConvergentEP(InferenceMethod):
    """EP's fixed point by descent on the EC free energy: means by Newton, variances by accelerated descent.

    Needs a likelihood with :meth:`~relaxep.likelihoods.Likelihood.tilted_cumulants`.  A "sweep" is
    one outer iteration (a mean block and a variance block); converged when the change of the
    posterior (the run's ``criterion``) and EP's moment residual are both below ``tol``.  Ends as
    ``"stalled"`` if no step lowers the free energy away from a fixed point.

    Parameters
    ----------
    memory : int
        Anderson mixing of the variance block over this many past steps (0: plain descent).
    max_newton : int
        Newton steps per mean block.
    """

    convergent: ClassVar[bool] = True

    def supports(self, prior: Prior, likelihood: Likelihood | None = None) -> bool:
        """Any representation; a scalar likelihood with tilted cumulants (``has_cumulants``)."""
        return likelihood is None or (likelihood.latent_dim == 1 and likelihood.has_cumulants)

    def __init__(self, memory: int = 4, max_newton: int = 10) -> None:
        if isinstance(memory, bool) or not isinstance(memory, int | np.integer) or memory < 0:
            raise ValueError(f"memory must be an integer >= 0, got {memory!r}")
        check_positive_int(max_newton, "max_newton")
        self.memory = memory
        self.max_newton = max_newton

    def run(
        self, prior: Prior, y: Array, likelihood: Likelihood, options: RunOptions, init: Sites | None = None
    ) -> InferenceResult:
        if not self.supports(prior, likelihood):
            raise TypeError(f"ConvergentEP needs tilted cumulants, which {likelihood!r} does not provide")
        state = _State(prior, y, likelihood, warm_posterior(prior, init))
        post = state.posterior()
        monitor = SweepLedger(options, post)
        if not state.r.ok:  # no start whose moments a proper cavity reaches: nothing to descend from
            monitor.trace.append(float("inf"))
            return make_result(self, post, y, likelihood, "stalled", monitor.trace, [0], np.zeros(prior.n))
        history = _Anderson(int(self.memory))
        status: Status = "max_sweeps"
        step = 1.0
        newton = 0
        for _ in range(options.max_sweeps):
            newton += state.mean_block(int(self.max_newton), 0.1 * options.tol)
            history.push(state.tau, state.mismatch(), state.var)
            moved, step = state.variance_block(history, step)
            post = state.posterior() if not moved else state.last
            monitor.record(post)
            if options.callback is not None:
                options.callback(len(monitor.trace) - 1, post)
            residual = moment_residual(post, y, likelihood, marginal_natural(post))
            if monitor.below_tol() and residual < options.tol:
                status = "converged"
                break
            if not moved:
                status = "stalled"
                break
        return make_result(
            self,
            post,
            y,
            likelihood,
            status,
            monitor.trace,
            [0] * len(monitor.trace),
            np.zeros(prior.n),
            n_inner=newton,
        )


class _Anderson:
    """Anderson mixing for the fixed point :math:`\\tau = \\tau + \\delta c(\\tau)`, residuals weighted by ``v``."""

    def __init__(self, memory: int) -> None:
        self.memory = memory
        self.points: list[Array] = []
        self.residuals: list[Array] = []
        self.weights: Array | None = None

    def push(self, point: Array, residual: Array, weights: Array) -> None:
        if not self.memory:
            return
        self.points = [*self.points, point.copy()][-(self.memory + 1) :]
        self.residuals = [*self.residuals, residual.copy()][-(self.memory + 1) :]
        self.weights = weights

    def proposal(self) -> Array | None:
        if len(self.points) < 2:
            return None
        dx = np.column_stack([b - a for a, b in zip(self.points[:-1], self.points[1:], strict=True)])
        df = np.column_stack([b - a for a, b in zip(self.residuals[:-1], self.residuals[1:], strict=True)])
        w = self.weights
        gamma = np.linalg.lstsq(df * w[:, None], self.residuals[-1] * w, rcond=None)[0]
        return self.points[-1] + self.residuals[-1] - (dx + df) @ gamma

    def restart(self) -> None:
        self.points, self.residuals = self.points[-1:], self.residuals[-1:]


class _State:
    """The current sites (as precisions and :math:`\alpha = \nu - \tau m`), marginals, r-cavities and
    free energy; the two blocks move them, and only the variance block pays for a factorisation
    with an inverse."""

    def __init__(self, prior: Prior, y: Array, likelihood: Likelihood, start: Posterior | None) -> None:
        self.prior, self.y, self.likelihood = prior, y, likelihood
        # the warm start, else the prior, else an EP iterate: the first whose moments are reachable
        post, r = reachable_start(prior, y, likelihood, start)
        self._take(post, r)

    def _take(self, post: Posterior, r: RCavities) -> None:
        self.last = post  # the posterior the variance block accepted (its mean is the held one)
        self.tau, self.alpha, self.mean = post.site_precision.copy(), post.alpha, post.mean.copy()
        self.var = post.marginal_var.copy()
        self.log_det = float(post.site_mean_precision @ post.mean) - 2.0 * post.log_partition()  # log|I + KT|
        self.r = r
        self.phi = self._free_energy(self.alpha, self.mean, self.tau, self.var, self.log_det, r)

    @staticmethod
    def _free_energy(alpha: Array, mean: Array, tau: Array, var: Array, log_det: float, r: RCavities) -> float:
        return moment_free_energy(alpha, mean, tau, var, log_det, r.conjugate)

    def posterior(self) -> Posterior:
        """The posterior at the current sites (one more factorisation)."""
        return self.prior.posterior(self.tau, self.alpha + self.tau * self.mean, marginals_only=True)

    def _r_cavities(self, mean: Array, var: Array, start: RCavities | None) -> RCavities:
        return r_cavities(self.likelihood, self.y, mean, var, start)

    def mismatch(self) -> Array:
        r"""The cavity mismatch :math:`\delta c = (1/v - \tau) - c_r` (zero at EP's fixed points)."""
        return 1.0 / self.var - self.tau - self.r.precision

    def _derivatives(self, mean: Array) -> tuple[Array, Array]:
        """:math:`F_r'` and :math:`F_r''` at the current r-cavities and targets ``mean``."""
        h, c = self.r.precision_mean, self.r.precision
        var = 1.0 / c
        c11, c12, c22 = phi_cov(*self.likelihood.tilted_cumulants(self.y, h * var, var))
        curvature = (c22 + 2.0 * mean * c12 + mean * mean * c11) / (c11 * c22 - c12 * c12) - c
        return h - c * mean, curvature

    def mean_block(self, max_newton: int, gradient_tol: float) -> int:
        """Newton on :math:`\tfrac12 m^\top K^{-1}m + \\sum F_r(m, v)` at fixed :math:`v`; returns its steps.

        The precisions stay, so the marginal variances and :math:`\\log|I + KT|` do too: no
        factorisation beyond one Cholesky per Newton step.
        """
        v, mean, alpha = self.var, self.mean, self.alpha
        objective = 0.5 * float(alpha @ mean) + float(np.sum(self.r.conjugate))
        steps = 0
        for _ in range(max_newton):
            d1, curvature = self._derivatives(mean)
            gradient = alpha + d1
            if np.max(np.abs(gradient) * np.sqrt(v)) < gradient_tol:
                break
            proposal = None
            for shrink in (1.0, 0.5, 0.25, 0.0):
                w = np.where(curvature < 0.0, shrink * curvature, curvature)
                target = w * mean - d1
                try:
                    new_mean = self.prior.posterior_mean(w, target)
                except (ImproperPosteriorError, KernelNotPositiveDefiniteError):
                    continue
                proposal = (new_mean - mean, target - w * new_mean - alpha)  # alpha = K^-1 m = target - w m
                break
            if proposal is None:
                break
            d_mean, d_alpha = proposal
            slope = float(d_mean @ gradient)
            t, accepted = 1.0, None
            for _ in range(40):
                trial_mean, trial_alpha = mean + t * d_mean, alpha + t * d_alpha
                r = self._r_cavities(trial_mean, v, self.r)
                value = 0.5 * float(trial_alpha @ trial_mean) + float(np.sum(r.conjugate)) if r.ok else np.inf
                if value <= objective + 1e-4 * t * slope:
                    accepted = (trial_mean, trial_alpha, r, value)
                    break
                t *= 0.5
            if accepted is None:
                break
            mean, alpha, self.r, objective = accepted
            steps += 1
            if np.max(np.abs(t * d_mean) / np.sqrt(v)) < gradient_tol:
                break
        self.mean, self.alpha = mean, alpha
        self.phi = self._free_energy(alpha, mean, self.tau, v, self.log_det, self.r)
        return steps

    def _trial(self, tau: Array) -> tuple[float, Posterior | None, RCavities | None]:
        """Free energy after moving the precisions to ``tau`` with the mean held."""
        try:
            trial = self.prior.posterior(tau, self.alpha + tau * self.mean, marginals_only=True)
        except (ImproperPosteriorError, KernelNotPositiveDefiniteError):
            return np.inf, None, None
        r = self._r_cavities(trial.mean, trial.marginal_var, self.r)
        if not r.ok:
            return np.inf, None, None
        log_det = float(trial.site_mean_precision @ trial.mean) - 2.0 * trial.log_partition()
        return self._free_energy(trial.alpha, trial.mean, tau, trial.marginal_var, log_det, r), trial, r

    def variance_block(self, history: _Anderson, step: float) -> tuple[bool, float]:
        """One descent step on the precisions; returns whether it moved and the step length to try next."""
        tau, direction = self.tau, self.mismatch()
        proposal = history.proposal()
        if proposal is not None:
            phi, trial, r = self._trial(proposal)
            if phi <= self.phi:
                self._take(trial, r)
                return True, step
            history.restart()
        step = min(1.0, 2.0 * step)
        for _ in range(30):
            phi, trial, r = self._trial(tau + step * direction)
            if phi <= self.phi:
                self._take(trial, r)
                return True, step
            step *= 0.5
        return False, step
