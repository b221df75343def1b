r"""The fitted models behind :class:`~relaxep.GPClassifier` and :class:`~relaxep.GPRegressor`, one class
per kind of model.

:class:`_LatentModel` is EP (or any rule or inference method) for one latent function (binary
classification, robust regression) on a prior made by a prior factory, :class:`_DensePriors` or
:class:`_SparsePriors` (FITC, with inducing inputs learned with the kernel); :class:`_BinaryModel` adds a
binary classifier's heads.  The multi-class models are :mod:`._multiclass_models`'s.  Each has ``fit``,
``log_evidence(theta, eval_gradient, clone_kernel)`` and
``predict_latent(X)``; the hyperparameter search and its policies are :mod:`._search`'s.  The
estimator validates its parameters, picks one model and delegates to it (as scikit-learn's
``GaussianProcessClassifier`` delegates to its ``base_estimator_``).
"""

from __future__ import annotations

import copy
from functools import partial
from typing import Any, TypeVar

import numpy as np
from scipy import linalg
from scipy.special import expit, log_expit
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep._xp import namespace, to_numpy
from relaxep.errors import DivergenceError, KernelNotPositiveDefiniteError
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._integrate import integrate_model
from relaxep.estimators._model import LooTerms
from relaxep.estimators._plan import SparseFit
from relaxep.estimators._search import FitReport, _EvidenceSearch, at_bounds, evidence_at
from relaxep.estimators._stochastic import (
    StochasticOptions,
    feature_scale,
    learn_stochastic,
    local_batches,
    row_sites,
)
from relaxep.inference import InferenceMethod, InferenceResult, infer
from relaxep.inference.evidence import likelihood_evidence_gradient
from relaxep.inference.loo import cavity_loo
from relaxep.inference.warm import Sites, WarmStarts
from relaxep.likelihoods import Likelihood
from relaxep.posterior import DensePrior, Posterior, Prior, SparsePrior
from relaxep.posterior.rbf import as_scaled_rbf
from relaxep.posterior.sparse_gradient import sparse_evidence_gradient

__all__ = [
    "_BinaryModel",
    "_DensePriors",
    "_LatentModel",
    "_SparsePriors",
    "fit_sparse_model",
    "label_of",
    "log_proba_of",
    "proba_of",
]


# ------------------------------------------------------------------ prior factories
class _DensePriors:
    """Dense priors :math:`k(X, X) + \\text{noise}\\,I` (:meth:`DensePrior.from_kernel`); no inducing inputs."""

    refused: tuple[type[Exception], ...] = ()  # construction errors that score -inf (none: they are raised)
    warns_at_bounds = True  # scikit-learn's warning for hyperparameters learned at a bound

    def __init__(self, noise: float) -> None:
        self.noise = float(noise)

    def build(self, kernel: Kernel, X: Any, Z: Array | None, eval_gradient: bool) -> DensePrior:
        """The prior at ``kernel``; ``K``'s positive semi-definiteness is tested (one Cholesky) where no gradient
        is asked for: the search's start, the final fit and ``log_marginal_likelihood(theta)``.  The search's
        gradient evaluations move within the kernel family checked at its start."""
        return DensePrior.from_kernel(kernel, X, self.noise, eval_gradient, check_psd=not eval_gradient)

    def gradient(self, prior: DensePrior, posterior: Posterior, kernel: Kernel) -> tuple[Array, None]:
        """:meth:`DensePosterior.prior_evidence_gradient
        <relaxep.posterior.DensePosterior.prior_evidence_gradient>`: from the prior's kept :math:`\\partial K`, or
        on another array library's device the RBF's closed form (the one signature both posteriors share)."""
        return posterior.prior_evidence_gradient(prior, kernel), None  # type: ignore[attr-defined]


class _SparsePriors:
    """FITC priors with inducing inputs ``Z`` (:meth:`SparsePrior.from_kernel`); the gradient in theta and Z
    is :func:`~relaxep.posterior.sparse_gradient.sparse_evidence_gradient`."""

    refused = (KernelNotPositiveDefiniteError,)  # K_uu without a Cholesky factor at the optimiser's point
    warns_at_bounds = False

    def __init__(self, noise: float, n_jobs: int | None = None) -> None:
        self.noise, self.n_jobs = float(noise), n_jobs

    def build(self, kernel: Kernel, X: Any, Z: Array | None, eval_gradient: bool) -> SparsePrior:
        return SparsePrior.from_kernel(kernel, X, Z, self.noise, n_jobs=self.n_jobs)

    def gradient(self, prior: SparsePrior, posterior: Posterior, kernel: Kernel) -> tuple[Array, Array]:
        return sparse_evidence_gradient(posterior, kernel)


# ------------------------------------------------------------------ one latent per target
class _LatentModel:
    """One latent function, one target per input (binary labels in ``{-1, +1}``, or real regression
    targets), on the priors of ``priors``, by :func:`~relaxep.infer` with ``rule``.

    The search learns the kernel's hyperparameters, the likelihood's (:attr:`Likelihood.theta
    <relaxep.likelihoods.Likelihood.theta>`: a Student-t's scale, say) and, for sparse priors
    where ``learn_z``, the inducing inputs ``Z`` (one :class:`~relaxep.estimators._hyper.HyperVector`).
    ``kernel`` is the estimator's ``kernel_`` itself (the search sets its ``theta``); the learned
    likelihood is :attr:`likelihood`.  Each run starts from the last converged sites
    (:class:`~relaxep.inference.warm.WarmStarts`, ``warm_start``).
    """

    def __init__(
        self,
        priors: _DensePriors | _SparsePriors,
        kernel: Kernel,
        likelihood: Likelihood,
        rule: Any,
        search: _EvidenceSearch,
        *,
        schedule: Any = "parallel",
        max_sweeps: int = 200,
        tol: float = 1e-4,
        Z: Array | None = None,
        learn_z: bool = False,
        search_rule: Any = None,
        search_stall_window: int | None = None,
        warm_start: bool = True,
    ) -> None:
        self.priors, self.kernel_, self.likelihood, self.rule, self.search = priors, kernel, likelihood, rule, search
        self.search_rule = rule if search_rule is None else search_rule
        self.search_stall_window = search_stall_window
        self.schedule, self.max_sweeps, self.tol = schedule, max_sweeps, tol
        self.Z, self.learn_z = Z, bool(learn_z)
        self.warm = WarmStarts(warm_start)

    def _run(self, prior: Prior, y: Array, likelihood: Likelihood, searching: bool = False) -> InferenceResult:
        """A run of inference from the warm start (``searching``: an evidence evaluation of the search, by
        ``search_rule``, which gives up on a run that stalls for ``search_stall_window`` sweeps: a region the
        optimiser must leave)."""
        rule = self.search_rule if searching else self.rule
        # an inference method carries its own schedule (infer refuses one beside it)
        options = {} if isinstance(rule, InferenceMethod) else {"schedule": self.schedule}
        if searching and self.search_stall_window is not None:
            options["stall_window"] = self.search_stall_window
        return self.warm.run(infer, prior, y, likelihood, rule, max_sweeps=self.max_sweeps, tol=self.tol, **options)

    def evidence(self, x: Array, eval_gradient: bool, X: Any, y: Array, hyper: HyperVector) -> tuple[float, Any]:
        """EP evidence (and gradient in the hyperparameters and, if learned, ``Z``) at the optimiser's ``x``."""

        def build(kernel: Kernel, Z: Array | None) -> Prior:
            return self.priors.build(kernel, X, self.Z if Z is None else Z, eval_gradient)

        def run(prior: Prior, likelihood: Likelihood) -> InferenceResult:
            return self._run(prior, y, likelihood, searching=True)

        def gradient(prior: Prior, result: InferenceResult, kernel: Kernel, likelihood: Likelihood) -> Any:
            g_theta, g_z = self.priors.gradient(prior, result.posterior, kernel)
            return np.concatenate([g_theta, self._likelihood_gradient(prior, result, likelihood, y)]), g_z

        return evidence_at(x, eval_gradient, hyper, build, run, gradient, self.priors.refused)

    def _likelihood_gradient(self, prior: Prior, result: InferenceResult, likelihood: Likelihood, y: Array) -> Array:
        """The evidence's gradient in the likelihood's ``theta`` (:func:`likelihood_evidence_gradient`)."""
        return likelihood_evidence_gradient(result.posterior, likelihood, y)

    def learn(self, X: Any, y: Array, rng: np.random.RandomState) -> None:
        """Learn the hyperparameters (and ``Z`` where ``learn_z``) on ``(X, y)`` by the search."""
        hyper = HyperVector(self.kernel_, self.likelihood, self.Z if self.learn_z else None)
        best = self.search.maximise(partial(self.evidence, X=X, y=y, hyper=hyper), hyper, rng)
        if best is not None:
            kernel, self.likelihood, Z = hyper.split(best)
            self.kernel_.theta = kernel.theta
            if Z is not None:
                self.Z = np.array(Z)

    def fit(
        self, X: Any, y: Array, rng: np.random.RandomState | None = None, subset: int | None = None,
        start: Sites | None = None,
    ) -> FitReport:  # fmt: skip
        """Learn (``rng`` given: the search's random state) on all of ``(X, y)`` or on ``subset`` random rows,
        then run inference on all of them, from ``start`` where given (a stochastic search's sites)."""
        if rng is not None:
            n = y.shape[0]
            if subset is not None and subset < n:
                idx = np.sort(rng.choice(n, int(subset), replace=False))
                self.learn(X[idx], y[idx], rng)
                self.warm.reset()  # its sites belong to the subset
            else:
                self.learn(X, y, rng)
        if start is not None:
            self.warm.reset(start)
        self.X, self.y = X, y
        self.prior_ = self.priors.build(self.kernel_, X, self.Z, False)
        result = self._run(self.prior_, y, self.likelihood)
        if result.status == "diverged":
            raise DivergenceError(
                f"{self.rule!r} diverged after {result.n_sweeps} sweeps with {self.likelihood!r}. "
                "Try damping (e.g. EP(damping=0.5)), a larger jitter / latent noise (WhiteKernel), "
                "or RelaxedEP with a smaller c."
            )
        self.result_ = result
        learned = rng is not None and self.priors.warns_at_bounds
        bounds = at_bounds(self.kernel_) + at_bounds(self.likelihood) if learned else ()
        return FitReport(result.status, result.n_sweeps, result.trace, result.n_skipped, bounds)

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        """The evidence at ``theta``: the kernel's hyperparameters (the likelihood's as fitted), or both."""
        hyper = HyperVector(self.kernel_, self.likelihood)
        x = theta if theta.size > hyper.n_kernel else hyper.pack(np.concatenate([theta, self.likelihood.theta]))
        if not clone_kernel:
            self.kernel_.theta = theta[: hyper.n_kernel]
        with self.warm.held():
            lml, grad = self.evidence(x, eval_gradient, self.X, self.y, hyper)
        lml = np.float64(lml)  # a NumPy scalar, as scikit-learn's (compares in float64 with float32 operands)
        return (lml, grad[: theta.size]) if eval_gradient else lml

    def predict_latent(self, X: Any, full_cov: bool = False) -> tuple[Array, Array]:
        """Latent mean and variances at ``X`` (in blocks of rows), or with ``full_cov`` mean and covariance (the
        posterior's ``predict_latent_cov``; the latent noise on its diagonal, as in the variances).

        .. versionchanged:: 0.7
           The covariance lacked the latent noise (``jitter``, 1e-6 by default) that the variances have.
        """
        if not full_cov:
            return self.prior_.predict_at(self.result_.predict_latent, X)
        cross_kernel, _ = self.prior_.cross_covariance(X)
        test_kernel = np.asarray(self.kernel_(to_numpy(X)), dtype=float)  # (K** on the host)
        test_kernel[np.diag_indices_from(test_kernel)] += self.priors.noise  # (the latent noise, as the variances')
        return self.result_.posterior.predict_latent_cov(cross_kernel, test_kernel)

    # ------------------------------------------------------------ after the fit
    def loo_terms(self) -> LooTerms:
        """Leave-one-out from the cavities of the fitted sites (:func:`~relaxep.inference.loo.cavity_loo`), at no
        refit; a classifier's class probabilities by :meth:`_loo_proba`."""
        r = self.result_
        t = cavity_loo(r.mean, r.marginal_var, r.site_precision, r.site_mean_precision, self.y, self.likelihood)
        return LooTerms(
            t.loo, t.in_sample, t.cavity_mean, t.cavity_var, t.n_improper, np.asarray(to_numpy(self.y)),
            tail=self.likelihood, is_density=self.likelihood.is_density,
            proba=self._loo_proba(t.cavity_mean, t.cavity_var),
        )  # fmt: skip

    def _loo_proba(self, mean: Array, var: Array) -> Array | None:
        """A classifier's class probabilities at the leave-one-out latent ``N(mean, var)`` (none here)."""
        return None

    def at_theta(self, x: Array, start: Sites | None = None) -> _LatentModel | None:
        """A fitted copy at the log-hyperparameters ``x`` (the kernel's, then the likelihood's), no search: EP from
        the converged sites ``start`` (``None``: this model's); ``None`` where it diverged or has no evidence."""
        kernel, likelihood, _ = HyperVector(self.kernel_, self.likelihood).split(np.asarray(x, dtype=float))
        point = copy.copy(self)
        point.kernel_, point.likelihood = kernel, likelihood
        point.warm = WarmStarts(self.warm.enabled)
        try:
            point.fit(self.X, self.y, None, start=self.warm.start if start is None else start)
        except (DivergenceError, KernelNotPositiveDefiniteError, linalg.LinAlgError, np.linalg.LinAlgError):
            return None
        return point if np.isfinite(point.result_.log_evidence) and point.result_.status != "diverged" else None

    def with_tol(self, tol: float) -> _LatentModel:
        """A view of this model whose EP runs stop at ``tol`` or its own ``tol`` if smaller (sharing its warm
        starts): the integration's Hessian takes its gradients from it."""
        view = copy.copy(self)
        view.tol = min(float(self.tol), tol)
        return view

    def integrate(self, method: str) -> Any:
        """The mixture over the hyperparameters around this (MAP) model (:func:`~relaxep.estimators._integrate.
        integrate_model`)."""
        return integrate_model(self, method)


class _BinaryModel(_LatentModel):
    """:class:`_LatentModel` of a binary classifier: the likelihood's predictive log-odds and probabilities."""

    def decision_function(self, X: Any) -> Array:
        """Log-odds of ``classes_[1]``: the likelihood's ``predict_log_odds`` at the latent predictive."""
        mean, var = (to_numpy(a) for a in self.predict_latent(X))  # (a dense device posterior answers there)
        return self.likelihood.predict_log_odds(mean, np.maximum(var, 1e-300))  # type: ignore[attr-defined]

    def predict_log_proba(self, X: Any) -> Array:
        return log_proba_of(self.decision_function(X))

    def predict_proba(self, X: Any) -> Array:
        return proba_of(self.decision_function(X))

    def _loo_proba(self, mean: Array, var: Array) -> Array:
        """``[P(y = -1), P(y = +1)]`` at the leave-one-out latent: the likelihood's predictive log-odds."""
        return proba_of(self.likelihood.predict_log_odds(mean, np.maximum(var, 1e-300)))  # type: ignore[attr-defined]


def proba_of(d: Array) -> Array:
    """``[expit(-d), expit(d)]`` of the log-odds ``d``: exactly the predictive probabilities, each to full
    relative precision in its own tail (``1 - p`` would lose it)."""
    return np.column_stack([expit(-d), expit(d)])


def log_proba_of(d: Array) -> Array:
    """``[log_expit(-d), log_expit(d)]`` of the log-odds ``d``."""
    return np.column_stack([log_expit(-d), log_expit(d)])


def label_of(d: Array, classes: Array) -> Array:
    """``classes[1]`` where the log-odds ``d`` are positive, else ``classes[0]`` (a tie gives ``classes[0]``)."""
    return classes[(d > 0.0).astype(int)]


M = TypeVar("M", bound=_LatentModel)


def fit_sparse_model(
    plan: SparseFit,
    model: type[M],
    kernel: Kernel,
    likelihood: Likelihood,
    rule: Any,
    search: _EvidenceSearch,
    X: Any,
    y: Array,
    latent_noise: float,
    **options: Any,
) -> tuple[M, FitReport]:
    """The FITC ``model`` of a classifier or regressor as ``plan`` says, fitted: from ``plan.Z``, with the
    hyperparameters (and ``Z``) learned by L-BFGS-B, a callable or the stochastic search."""
    priors = _SparsePriors(latent_noise, plan.n_jobs)
    fitted = model(priors, kernel, likelihood, rule, search, Z=plan.Z, learn_z=plan.learn_z, **options)
    if plan.learns:
        as_scaled_rbf(kernel, X.shape[1])  # refuses, before any work, a kernel it has no gradient for
    if not plan.stochastic:
        return fitted, fitted.fit(X, y, plan.rng if plan.learns else None, plan.subset)
    steps = StochasticOptions.for_steps(plan.maxiter)
    batches = local_batches(X, y, steps.batch_size, plan.rng, plan.n_jobs)
    learned = learn_stochastic(
        kernel, likelihood, plan.Z, y.shape[0], feature_scale(X), latent_noise, plan.learn_theta, plan.learn_z,
        batches, steps, search.report_step, namespace(X), log_prior=search.log_prior(HyperVector(kernel, likelihood)),
    )  # fmt: skip
    fitted.kernel_.theta = learned.kernel.theta
    fitted.likelihood, fitted.Z = learned.likelihood, learned.Z
    return fitted, fitted.fit(X, y, start=Sites(*row_sites(learned, X, y, latent_noise, plan.n_jobs)))
