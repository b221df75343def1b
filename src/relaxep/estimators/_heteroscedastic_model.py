r"""The fitted heteroscedastic model behind :class:`~relaxep.GPHeteroscedasticRegressor`: two priors (dense or FITC
with shared inducing inputs), two-latent EP (:mod:`relaxep.inference.two_latent`), the evidence and its gradient
in the optimiser's vector, and the latents' predictions.

The optimiser's vector is

.. math:: x = (\theta_f,\ \theta_g,\ c),

the two kernels' log-hyperparameters (``kernel.theta``) and the prior mean :math:`c` of the log noise variance
:math:`g` (itself a log, so the vector is all logs), each bounded.  Each evaluation warm-starts EP from the
sites of the last evaluation that converged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep.errors import ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.estimators._hyper import RESTARTS_NEED_BOUNDS
from relaxep.inference.two_latent import TwoLatentResult, latent_gradient, two_latent_ep
from relaxep.likelihoods.heteroscedastic import tilted_moments
from relaxep.posterior import DensePrior, Prior, SparsePrior
from relaxep.sites import SiteRule

__all__ = ["HeteroscedasticModel", "TwoKernelVector"]

#: latent jitter on both priors' diagonals (and their test variances)
JITTER = 1e-8
#: the parallel step of "auto"'s first run, and of its second where the first does not converge
AUTO_STEPS = (0.5, 0.1)


class TwoKernelVector:
    """The optimiser's vector :math:`(\\theta_f, \\theta_g, c)` (module docstring) and its bounds.

    ``offset_bounds`` is a pair, or ``None`` where :math:`c` is fixed (then not in the vector).
    """

    def __init__(self, kernel_f: Kernel, kernel_g: Kernel, offset: float, offset_bounds: Any) -> None:
        self.kernel_f, self.kernel_g, self.offset, self.offset_bounds = kernel_f, kernel_g, float(offset), offset_bounds
        self.n_f, self.n_g = kernel_f.theta.size, kernel_g.theta.size

    @property
    def size(self) -> int:
        return self.n_f + self.n_g + (self.offset_bounds is not None)

    @property
    def x0(self) -> Array:
        extra = [self.offset] if self.offset_bounds is not None else []
        return np.concatenate([self.kernel_f.theta, self.kernel_g.theta, extra])

    @property
    def bounds(self) -> Array:
        parts = [np.reshape(self.kernel_f.bounds, (-1, 2)), np.reshape(self.kernel_g.bounds, (-1, 2))]
        if self.offset_bounds is not None:
            parts.append(np.reshape(np.asarray(self.offset_bounds, dtype=float), (1, 2)))
        return np.vstack(parts)

    def split(self, x: Array) -> tuple[Kernel, Kernel, float]:
        """``x`` as (kernel of f, kernel of g, offset), the kernels new objects."""
        x = np.asarray(x, dtype=float)
        kf = self.kernel_f.clone_with_theta(x[: self.n_f])
        kg = self.kernel_g.clone_with_theta(x[self.n_f : self.n_f + self.n_g])
        offset = float(x[-1]) if self.offset_bounds is not None else self.offset
        return kf, kg, offset

    def starts(self, n_restarts: int, rng: np.random.RandomState) -> list[Array]:
        """:attr:`x0` and ``n_restarts`` more, uniform within the (finite) bounds."""
        bounds = self.bounds
        if n_restarts > 0 and self.size and not np.all(np.isfinite(bounds)):
            raise ValueError(RESTARTS_NEED_BOUNDS)
        return [self.x0] + [rng.uniform(bounds[:, 0], bounds[:, 1]) for _ in range(n_restarts)]


class HeteroscedasticModel:
    """Two-latent EP on ``(X, y)`` (module docstring), dense or, with inducing inputs ``Z``, FITC for both latents.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,)
        Targets (normalised where the estimator normalises).
    Z : ndarray of shape (M, d) or None
        Inducing inputs (fixed), or ``None`` for the dense priors.
    rule : SiteRule or "auto"
    max_sweeps, tol : int, float
    """

    def __init__(self, X: Array, y: Array, Z: Array | None, rule: SiteRule | str, max_sweeps: int, tol: float):
        self.X, self.y, self.Z = X, y, Z
        self.rule, self.max_sweeps, self.tol = rule, int(max_sweeps), float(tol)
        self.sites: tuple[Array, Array, Array, Array] | None = None  # the warm start
        self.result_: TwoLatentResult | None = None

    # ------------------------------------------------------------------ EP
    def priors(self, kernel_f: Kernel, kernel_g: Kernel, gradient: bool = False) -> tuple[Prior, Prior]:
        """The priors of :math:`f` and :math:`g - c` (dense ones keep :math:`\\partial K/\\partial\\theta` if asked)."""
        if self.Z is None:
            return tuple(DensePrior.from_kernel(k, self.X, JITTER, eval_gradient=gradient, check_psd=not gradient)
                         for k in (kernel_f, kernel_g))  # type: ignore[return-value]  # fmt: skip
        return tuple(SparsePrior.from_kernel(k, self.X, self.Z, JITTER) for k in (kernel_f, kernel_g))  # type: ignore[return-value]

    def run(self, priors: tuple[Prior, Prior], offset: float, stall_window: int | None = None,
            search: bool = False) -> TwoLatentResult:  # fmt: skip
        """EP from the warm start (``search``: the search's run, one step; else ``"auto"``'s cascade).

        The search's runs (and ``log_marginal_likelihood(theta)``'s) are EP's whatever the rule: the evidence's
        gradient (:meth:`gradient`) is exact only at an EP fixed point (the evidence is stationary in the sites
        there, not at a Power EP one: measured, ``PowerEP(0.7)``'s gradient 20% off central differences in the
        noise mean).  The final fit is by the rule."""
        rule = None if isinstance(self.rule, str) or search else self.rule
        steps = AUTO_STEPS if isinstance(self.rule, str) and not search else AUTO_STEPS[:1]
        result = None
        for k, step in enumerate(steps):
            result = two_latent_ep(
                priors[0], priors[1], self.y, tilted_moments, offset=offset, rule=rule, step=step,
                max_sweeps=self.max_sweeps * (1 if k == 0 else 4), tol=self.tol,
                init=self.sites if k == 0 else None, stall_window=stall_window,
            )  # fmt: skip
            if result.converged:
                break
        assert result is not None
        return result

    def evidence(self, hyper: TwoKernelVector, x: Array, eval_gradient: bool) -> tuple[float, Array | None]:
        r"""The log evidence at ``x`` and, if asked, its gradient in ``x``; :math:`(-\infty, 0)` where EP did not
        converge or the prior is not positive definite (the search's policy).  A converged run's sites are
        the next warm start."""
        kf, kg, offset = hyper.split(x)
        failed = -np.inf, (np.zeros_like(x) if eval_gradient else None)
        try:
            priors = self.priors(kf, kg, gradient=eval_gradient)
            result = self.run(priors, offset, stall_window=10, search=True)
        except (KernelNotPositiveDefiniteError, ImproperPosteriorError, np.linalg.LinAlgError):
            return failed
        if not result.converged or not np.isfinite(result.log_evidence):
            return failed
        self.sites = result.sites
        if not eval_gradient:
            return result.log_evidence, None
        return result.log_evidence, self.gradient(result, priors, kf, kg, hyper.offset_bounds is not None)

    def gradient(self, result: TwoLatentResult, priors: tuple[Prior, Prior], kf: Kernel, kg: Kernel,
                 with_offset: bool) -> Array:  # fmt: skip
        """The evidence's gradient in :math:`(\\theta_f, \\theta_g, c)` at ``result``'s fixed point
        (:mod:`relaxep.inference.two_latent`)."""
        parts = [
            latent_gradient(result.posterior_f, priors[0], kf) if kf.theta.size else np.zeros(0),
            latent_gradient(result.posterior_g, priors[1], kg) if kg.theta.size else np.zeros(0),
        ]
        if with_offset:  # (from the run's own evidence pass: no second round of tilted moments)
            parts.append(np.array([result.offset_gradient]))
        return np.concatenate(parts)

    def fit(self, kf: Kernel, kg: Kernel, offset: float) -> TwoLatentResult:
        """The final run at the chosen hyperparameters (``"auto"``: its cascade), kept as :attr:`result_`."""
        self.kernel_f, self.kernel_g, self.offset = kf, kg, float(offset)
        self.priors_ = self.priors(kf, kg)
        self.result_ = self.run(self.priors_, offset)
        if self.result_.status == "diverged":
            from relaxep.errors import DivergenceError

            raise DivergenceError(
                "two-latent EP diverged at the learned hyperparameters (no step kept the posterior proper): "
                "try rule=EP(damping=0.5) or PowerEP(0.8), or fix the noise kernel (noise_kernel bounds)"
            )
        self.sites = self.result_.sites
        return self.result_

    # ----------------------------------------------------------- predict
    def latent(self, which: str, X: Array, full_cov: bool = False) -> tuple[Array, Array]:
        """Predictive mean and variances (or covariance) of ``"f"`` or ``"g"`` (with its prior mean) at ``X``."""
        assert self.result_ is not None
        prior, post, kernel = (
            (self.priors_[0], self.result_.posterior_f, self.kernel_f)
            if which == "f"
            else (self.priors_[1], self.result_.posterior_g, self.kernel_g)
        )
        shift = 0.0 if which == "f" else self.offset
        if not full_cov:
            mean, var = prior.predict_at(post.predict_latent, X)
            return mean + shift, var
        cross = prior.cross_covariance(X)[0]
        mean, cov = post.predict_latent_cov(cross, kernel(X) + JITTER * np.eye(X.shape[0]))
        return mean + shift, cov
