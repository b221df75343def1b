r"""Double-loop EP: a provably convergent solver for EP's fixed points.

EP's fixed points are the stationary points of the expectation-consistent free energy
(Opper & Winther 2005; Heskes & Zoeter 2002).  Write :math:`\phi(f_i) = (f_i, -f_i^2/2)`
and, for natural parameters :math:`\lambda = (h, \Lambda)`,

.. math::
    \log Z_q(\lambda_q) &= \log \int N(f | 0, K) \textstyle\prod_i e^{\lambda_{q,i}\cdot\phi(f_i)}\, df
        = \tfrac12 \nu^\top\mu - \tfrac12 \log|I + K T|,\\
    \log Z_{r,i}(\eta) &= \log \int t_i(f_i)\, e^{\eta\cdot\phi(f_i)}\, df_i,\qquad
    \log Z_s(\eta) = \frac{h^2}{2\Lambda} + \frac12 \log\frac{2\pi}{\Lambda},

with :math:`\lambda_q = (\nu, \tau)` the sites.  As a function of the marginal moments
:math:`\mu`, the free energy :math:`\Phi(\mu) = F_q(\mu) + F_r(\mu) - F_s(\mu)` is a
difference of convex functions (the :math:`F` are the convex conjugates of the
log-partition functions).  Bounding :math:`-F_s` by its tangent at the current marginals
(natural parameters :math:`s`, the *anchor*) gives the outer loop; what is left, in its
dual form, is the inner problem

.. math::
    \min_{\lambda_q}\ \Psi_s(\lambda_q) = \log Z_q(\lambda_q) + \sum_i \log Z_{r,i}(s_i - \lambda_{q,i}),

convex and smooth on its domain (every r-cavity :math:`s_i - \lambda_{q,i}` and the
posterior proper).  Its stationarity condition is
moment matching between each posterior marginal and the tilted
:math:`r_i \propto t_i\, e^{(s_i - \lambda_{q,i})\cdot\phi}`: EP's condition, except that the
tilted's cavity is anchored at :math:`s_i` instead of following the moving posterior.
For a likelihood bounded away from zero (the noisy step with
:math:`\epsilon > 0`, the paper's) :math:`\Psi_s \to \infty` at the domain's edge, so the
minimum is interior.  Where :math:`t` vanishes in one tail (probit, logistic, the step with
:math:`\epsilon = 0`) :math:`\log Z_r` stays finite as an r-cavity's precision tends to 0,
the infimum can lie on the edge and moment matching is then impossible: the inner solve
is reported unsolved, its :math:`\Phi` is not used, and after three such outer
iterations in a row the run stops as ``stalled``.

The inner problem is solved by Newton's method in all :math:`2n` site parameters with the
exact Hessian :math:`\operatorname{Cov}_q[\phi] + \operatorname{blockdiag}_i \operatorname{Cov}_{r_i}[\phi]`
(tilted cumulants up to the fourth) and a backtracking line search on :math:`\Psi_s`.
One outer step is the map :math:`T(s)` = the marginals at the inner solution; each
:math:`T` step lowers :math:`\Phi` (majorisation-minimisation), so the iteration converges
to a stationary point rather than oscillating, and at its limit anchor and marginals
coincide: an EP fixed point.  Plain :math:`T` steps converge linearly and slowly where
EP is unstable (the bound is loose exactly there), so the outer loop is accelerated by
SQUAREM (Varadhan & Roland 2008) in the marginals' (mean, log variance): from :math:`s`,
:math:`s_1 = T(s)`, :math:`s_2 = T(s_1)`, an extrapolated anchor is tried and kept only if
its :math:`\Phi` is below that of :math:`s_2`.  Every outer iteration therefore lowers
:math:`\Phi` at least as much as two plain steps, and the convergence guarantee stands.

Cost: each Newton iteration factorises a :math:`2n \times 2n` matrix (about eight times an
EP sweep's :math:`n^3`), so it needs the dense posterior covariance (:class:`DoubleLoopEP`
refuses other priors).  The free energy and the inner objective are in
:mod:`relaxep.inference.free_energy`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg

from relaxep._typing import Array, Status
from relaxep.errors import ImproperPosteriorError
from relaxep.inference.free_energy import (
    ec_free_energy,
    inner_objective,
    marginal_natural,
    moment_residual,
    phi_cov,
    tilted_cumulants,
)
from relaxep.inference.ledger import RunOptions, SweepLedger
from relaxep.inference.method import InferenceMethod
from relaxep.inference.result import InferenceResult, make_result, warm_posterior
from relaxep.inference.start import reachable_start
from relaxep.inference.warm import Sites
from relaxep.likelihoods import Likelihood
from relaxep.posterior import DensePosterior, DensePrior, Prior, as_prior

__all__ = ["DoubleLoopEP", "DoubleLoopRun", "double_loop", "solve_inner"]


def solve_inner(
    prior: DensePrior,
    y: Array,
    likelihood: Likelihood,
    anchor: tuple[Array, Array],
    start: DensePosterior,
    max_iter: int = 100,
) -> tuple[DensePosterior, int, bool]:
    r"""Minimise :math:`\Psi_s` by Newton's method from the feasible posterior ``start``.

    Gradient and Hessian in :math:`x = (\nu, \tau)`, with :math:`A` the posterior
    covariance, :math:`\mu` its mean and :math:`\kappa` the tilted cumulants:

    .. math::
        \nabla\Psi = E_q[\phi] - E_r[\phi],\qquad
        \nabla^2\Psi = \begin{pmatrix} A & -A\,\mathrm{diag}(\mu) \\
            -\mathrm{diag}(\mu) A & \tfrac12 A\circ A + (\mu\mu^\top)\circ A \end{pmatrix}
            + \operatorname{blockdiag}_i \operatorname{Cov}_{r_i}[\phi].

    Steps are backtracked (Armijo) on :math:`\Psi` while the Newton decrement
    :math:`-\nabla\Psi^\top d` exceeds ``1e-8`` nats; below that, in the quadratic regime and
    under what :math:`\Psi`'s rounding lets a line search see, full steps are taken.  Stops
    when the gradient in scale-free units (:func:`~relaxep.inference.free_energy.moment_residual`'s)
    is below ``1e-13``, when the decrement is no longer positive or no longer shrinks fourfold a
    step (the rounding floor), or when no step lowers :math:`\Psi` any more.

    Returns
    -------
    post : DensePosterior
        The posterior at the inner solution.
    iterations : int
        Newton steps taken.
    solved : bool
        Whether the gradient in scale-free units is below ``1e-6`` at the returned point
        (``False`` when ``max_iter`` ran out, or the line search stalled away from a
        stationary point, as where the infimum lies on the domain's edge).
    """
    n = prior.n
    s_h, s_lam = anchor
    tau, nu = start.site_precision.copy(), start.site_mean_precision.copy()
    value, post = inner_objective(prior, y, likelihood, tau, nu, anchor)
    if post is None:
        raise ImproperPosteriorError("the inner problem's start is outside its domain")
    idx = np.arange(n)
    last_decrement = math.inf
    for it in range(max_iter):
        cov, mean = post.cov, post.mean
        var = np.diagonal(cov)
        k1, k2, k3, k4 = tilted_cumulants(likelihood, y, s_h - nu, s_lam - tau)
        grad = np.concatenate([mean - k1, 0.5 * (k2 + k1 * k1 - var - mean * mean)])
        c11, c12, c22 = phi_cov(k1, k2, k3, k4)
        hess = np.empty((2 * n, 2 * n))
        hess[:n, :n] = cov
        hess[:n, n:] = -cov * mean[None, :]
        hess[n:, :n] = hess[:n, n:].T
        hess[n:, n:] = (0.5 * cov + np.outer(mean, mean)) * cov
        hess[idx, idx] += c11
        hess[idx, idx + n] += c12
        hess[idx + n, idx] += c12
        hess[idx + n, idx + n] += c22
        scale_free = max(np.max(np.abs(grad[:n]) / np.sqrt(var)), np.max(2.0 * np.abs(grad[n:]) / var))
        solved = bool(scale_free < _SOLVED)
        step = _newton_step(hess, grad)
        if step is None:
            return post, it, solved
        decrement = -float(grad @ step)
        if not (decrement > 0.0) or scale_free < 1e-13:
            return post, it, solved
        if decrement < 1e-8:  # quadratic regime, below what a line search on Psi can resolve
            if decrement > 0.25 * last_decrement:  # no longer shrinking quadratically: rounding floor
                return post, it, solved
            last_decrement = decrement
            new_value, new_post = inner_objective(prior, y, likelihood, tau + step[n:], nu + step[:n], anchor)
            if new_post is None:
                return post, it, solved
            tau, nu, value, post = tau + step[n:], nu + step[:n], new_value, new_post
            continue
        t = 1.0
        for _ in range(50):
            new_value, new_post = inner_objective(prior, y, likelihood, tau + t * step[n:], nu + t * step[:n], anchor)
            if new_post is not None and new_value <= value - 1e-4 * t * decrement:
                break
            t *= 0.5
        else:  # no decrease along the Newton direction: flat to rounding, or stalled
            return post, it, solved
        tau, nu, value, post = tau + t * step[n:], nu + t * step[:n], new_value, new_post
    return post, max_iter, False


_SOLVED = 1e-6  # scale-free gradient below which an inner problem counts as solved


def _newton_step(hess: Array, grad: Array) -> Array | None:
    """``-hess^-1 grad`` by Cholesky; where rounding in the high cumulants makes ``hess``
    indefinite, with a growing relative diagonal shift (Levenberg); ``None`` if all fail."""
    diag = np.abs(np.diagonal(hess)).copy()
    for shift in (0.0, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2, 1.0):
        matrix = hess if shift == 0.0 else hess + np.diag(shift * diag)
        try:
            factor = linalg.cho_factor(matrix, check_finite=False)
        except linalg.LinAlgError:
            continue
        step = -linalg.cho_solve(factor, grad, check_finite=False)
        if np.all(np.isfinite(step)):
            return step
    return None


@dataclass
class DoubleLoopRun:
    """State and record of :func:`double_loop`."""

    post: DensePosterior
    converged: bool = False
    stalled: bool = False  # the inner problems stopped being solvable (see double_loop)
    trace: list[float] = field(default_factory=list)  # R per outer iteration
    free_energy: list[float] = field(default_factory=list)  # Phi per outer iteration
    residual: list[float] = field(default_factory=list)  # EP moment residual per outer iteration
    unsolved: int = 0  # plain inner solves that ended unsolved (scale-free gradient above 1e-6)
    newton_iterations: int = 0
    extrapolated: int = 0  # outer iterations whose SQUAREM step was kept


def double_loop(
    prior: DensePrior | ArrayLike,
    y: Array,
    likelihood: Likelihood,
    *,
    max_outer: int = 200,
    tol: float = 1e-3,
    accelerate: bool = True,
    start: DensePosterior | None = None,
    criterion: str = "alpha",
    callback: Callable[[int, DensePosterior], None] | None = None,
) -> DoubleLoopRun:
    r"""Run double-loop EP to an EP fixed point.

    Converged when, in one outer iteration, the change ``R`` (``criterion``, see
    :mod:`relaxep.inference.method`) is below ``tol`` and the EP moment residual
    (:func:`~relaxep.inference.free_energy.moment_residual` at anchor = marginals) is below ``tol``.

    Parameters
    ----------
    prior : DensePrior or array_like
        The prior (a matrix ``K`` is wrapped in a :class:`~relaxep.posterior.DensePrior`).
    max_outer : int
        Outer iterations (each two inner solves, three with an extrapolation).
    accelerate : bool
        SQUAREM extrapolation of the anchors, kept only where it lowers :math:`\Phi` more
        than the two plain steps (``False``: plain steps, one inner solve per iteration).
    start : DensePosterior, optional
        Initial sites; used only if their cavities are proper and the tilted family reaches their
        marginals (else the prior, or where the prior's moments are out of reach, as for a likelihood
        more informative than the prior, an iterate of parallel EP: :mod:`relaxep.inference.start`).
    criterion : {"alpha", "relative", "marginals"}
        The change between outer iterations (:class:`~relaxep.inference.ledger.SweepLedger`).
    callback : callable, optional
        ``callback(outer_iteration, posterior)`` after each outer iteration.
    """
    prior = as_prior(prior)
    if start is not None and not (np.all(start.marginal_var > 0.0) and np.all(start.cavities()[1] > 0.0)):
        start = None
    # the start, else the prior, else an EP iterate: the first whose moments the tilted family reaches
    reached, r = reachable_start(prior, y, likelihood, start)
    post = prior.posterior()
    if r.ok and reached is start:
        post = start
    elif r.ok and reached.site_precision.any():
        candidate = prior.posterior(reached.site_precision, reached.site_mean_precision)
        post = candidate if np.all(candidate.cavities()[1] > 0.0) else post
    run = DoubleLoopRun(post)

    def step(anchor: tuple[Array, Array], warm: DensePosterior, plain: bool = True) -> tuple[DensePosterior, float]:
        """Inner solve at ``anchor``; its Phi, or nan (plain) / inf (extrapolated) if unsolved."""
        if not np.all(anchor[1] - warm.site_precision > 0.0):
            # the warm sites leave an r-cavity improper: lower those sites' precisions, else start flat
            tau = np.minimum(warm.site_precision, 0.5 * anchor[1])
            _, warm = inner_objective(prior, y, likelihood, tau, warm.site_mean_precision, anchor)
            warm = prior.posterior() if warm is None else warm
        try:
            new, iterations, solved = solve_inner(prior, y, likelihood, anchor, warm)
        except ImproperPosteriorError:
            new, iterations, solved = warm, 0, False
        run.newton_iterations += iterations
        if not solved:  # Phi is only a bound there: never compared, never recorded as Phi
            if plain:
                run.unsolved += 1
            return new, math.nan if plain else math.inf
        return new, ec_free_energy(new, y, likelihood, anchor)

    monitor = SweepLedger(RunOptions(max_sweeps=max_outer, tol=tol, criterion=criterion), post)
    unsolved_in_a_row = 0
    for _ in range(max_outer):
        anchor = marginal_natural(post)
        unsolved_before = run.unsolved
        if accelerate:
            p1, _ = step(anchor, post)
            a1 = marginal_natural(p1)
            best, best_phi = step(a1, p1)
            x0, x1, x2 = _to_moments(anchor), _to_moments(a1), _to_moments(marginal_natural(best))
            r, v = x1 - x0, x2 - 2.0 * x1 + x0
            extrapolation = -float(np.linalg.norm(r)) / max(float(np.linalg.norm(v)), np.finfo(float).tiny)
            extrapolation = max(extrapolation, -_MAX_EXTRAPOLATION)
            for _ in range(4):
                if extrapolation >= -1.0:
                    break
                trial = _from_moments(x0 - 2.0 * extrapolation * r + extrapolation**2 * v)
                try:
                    p3, phi3 = step(trial, best, plain=False)
                except ImproperPosteriorError:
                    p3, phi3 = None, math.inf
                if phi3 < best_phi:
                    best, best_phi = p3, phi3
                    run.extrapolated += 1
                    break
                extrapolation = 0.5 * (extrapolation - 1.0)  # halfway back towards the plain step
            post, phi = best, best_phi
        else:
            post, phi = step(anchor, post)
        run.trace.append(monitor.record(post))
        run.free_energy.append(phi)
        run.residual.append(moment_residual(post, y, likelihood, marginal_natural(post)))
        run.post = post
        if callback is not None:
            callback(len(run.trace) - 1, post)
        if run.trace[-1] < tol and run.residual[-1] < tol:
            run.converged = True
            break
        unsolved_in_a_row = unsolved_in_a_row + 1 if run.unsolved > unsolved_before else 0
        if unsolved_in_a_row >= _UNSOLVED_LIMIT:
            run.stalled = True
            break
    return run


_MAX_EXTRAPOLATION = 16.0  # SQUAREM's step length is capped (its first try; then halved)
_UNSOLVED_LIMIT = 3  # outer iterations in a row with an unsolved plain inner problem: stalled


def _to_moments(anchor: tuple[Array, Array]) -> Array:
    """Natural parameters -> (mean, log variance), the space SQUAREM extrapolates in."""
    h, lam = anchor
    return np.concatenate([h / lam, -np.log(lam)])


def _from_moments(x: Array) -> tuple[Array, Array]:
    n = x.shape[0] // 2
    lam = np.exp(-x[n:])
    return x[:n] * lam, lam


class DoubleLoopEP(InferenceMethod):
    r"""Double-loop EP (Heskes & Zoeter 2002; Opper & Winther 2005): EP's fixed points, convergently.

    Minimises the expectation-consistent free energy by an outer loop over anchored cavities
    and a convex inner problem solved by Newton's method (:func:`double_loop`); a "sweep" is
    one outer iteration.  Its answer, where it converges, is an EP fixed point with proper
    cavities; each outer iteration lowers the free energy, so it does not oscillate.  Needs a
    dense prior and a likelihood with :meth:`~relaxep.likelihoods.Likelihood.tilted_cumulants`.

    Parameters
    ----------
    accelerate : bool
        SQUAREM extrapolation of the outer loop, kept only where it lowers the free energy
        more than the plain steps (default ``True``; ``False`` is the textbook double loop,
        often hundreds of outer iterations where EP is unstable).
    """

    convergent: ClassVar[bool] = True

    def __init__(self, accelerate: bool = True) -> None:
        if not isinstance(accelerate, bool | np.bool_):
            raise TypeError(f"accelerate must be a bool, got {accelerate!r}")
        self.accelerate = accelerate

    def supports(self, prior: Prior, likelihood: Likelihood | None = None) -> bool:
        """Only a :class:`~relaxep.posterior.DensePrior` (the Newton steps use the ``n x n`` covariance) and a
        scalar likelihood with tilted cumulants (``has_cumulants``)."""
        scalar = likelihood is None or (likelihood.latent_dim == 1 and likelihood.has_cumulants)
        return isinstance(prior, DensePrior) and scalar

    def run(
        self, prior: Prior, y: Array, likelihood: Likelihood, options: RunOptions, init: Sites | None = None
    ) -> InferenceResult:
        if not prior.space.on_host:
            raise TypeError(
                "DoubleLoopEP runs on numpy arrays only: on another array library use EP(), PowerEP(u) or "
                "FractionalEP(fraction) with the parallel schedule (their sites stay on the device)"
            )
        if not isinstance(prior, DensePrior):
            raise TypeError(
                f"DoubleLoopEP needs a DensePrior (its Newton steps use the n x n covariance), got {prior!r}"
            )
        if not (likelihood.latent_dim == 1 and likelihood.has_cumulants):
            raise TypeError(f"DoubleLoopEP needs tilted cumulants, which {likelihood!r} does not provide")
        run = double_loop(
            prior,
            y,
            likelihood,
            max_outer=options.max_sweeps,
            tol=options.tol,
            accelerate=bool(self.accelerate),
            start=warm_posterior(prior, init),
            criterion=options.criterion,
            callback=options.callback,
        )
        status: Status = "converged" if run.converged else "stalled" if run.stalled else "max_sweeps"
        skipped = [0] * len(run.trace)  # the double loop skips no site
        relaxation = np.zeros(prior.n)
        return make_result(
            self, run.post, y, likelihood, status, run.trace, skipped, relaxation, n_inner=run.newton_iterations
        )
