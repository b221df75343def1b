r"""The fitted models behind :class:`~relaxep.GPClassifier` and :class:`~relaxep.GPRegressor`, one class
per kind of model.

:class:`_LatentModel` is EP (or any rule or inference method) for one latent function (binary
classification, robust regression) on a prior made by a prior factory, :class:`_DensePriors` or
:class:`_SparsePriors` (FITC, with inducing inputs learned with the kernel); :class:`_JointModel` is
the joint multi-class model of :mod:`relaxep.multiclass`; :class:`_OneVsRest` fits one binary
estimator per class.  Each has ``fit``, ``log_evidence(theta, eval_gradient, clone_kernel)`` and
``predict_latent(X)``; the hyperparameter search and its policies are :mod:`._search`'s.  The
estimator validates its parameters, picks one model and delegates to it (as scikit-learn's
``GaussianProcessClassifier`` delegates to its ``base_estimator_``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

import numpy as np
from joblib import Parallel, delayed
from numpy.typing import NDArray
from scipy.special import expit, log_expit, logsumexp
from sklearn.gaussian_process.kernels import Kernel
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_random_state

from relaxep._typing import Array
from relaxep._xp import namespace, to_numpy
from relaxep.errors import DivergenceError, KernelNotPositiveDefiniteError
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._plan import SparseFit
from relaxep.estimators._search import FitReport, _EvidenceSearch, at_bounds, scored
from relaxep.estimators._stochastic import (
    StochasticOptions,
    feature_scale,
    learn_stochastic,
    local_batches,
    row_sites,
)
from relaxep.inference import InferenceMethod, InferenceResult, infer
from relaxep.inference.evidence import likelihood_evidence_gradient
from relaxep.inference.warm import Sites, WarmStarts
from relaxep.likelihoods import Likelihood
from relaxep.multiclass import MulticlassLikelihood, MulticlassResult, infer_multiclass
from relaxep.multiclass import evidence_gradient as multiclass_evidence_gradient
from relaxep.posterior import DensePrior, Posterior, Prior, SparsePrior
from relaxep.posterior.dense import kernel_matrix
from relaxep.posterior.sparse_gradient import as_sparse_kernel, sparse_evidence_gradient

__all__ = [
    "_BinaryModel",
    "_DensePriors",
    "_JointModel",
    "_LatentModel",
    "_OneVsRest",
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
        """:meth:`DensePosterior.evidence_gradient <relaxep.posterior.DensePosterior.evidence_gradient>` (on
        another array library's device, the RBF's closed form, without ``dK``)."""
        if prior.kernel_gradient is None:
            return posterior.evidence_gradient(prior.X, as_sparse_kernel(kernel, prior.X.shape[1]), prior.noise), None
        return posterior.evidence_gradient(prior.kernel_gradient), None


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
        if not namespace(prior.Vt)[1]:
            raise TypeError(
                "the sparse evidence gradient runs on numpy arrays only: on another array library learn a sparse "
                "model by optimizer='stochastic', or evaluate log_marginal_likelihood without eval_gradient"
            )
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
        kernel, likelihood, Z = hyper.split(x)
        try:
            prior = self.priors.build(kernel, X, self.Z if Z is None else Z, eval_gradient)
        except self.priors.refused:
            return -np.inf, (np.zeros_like(x) if eval_gradient else None)
        result = self._run(prior, y, likelihood, searching=True)
        if not eval_gradient:
            return scored(result.status, result.log_evidence, None, x)

        def gradient() -> Array:
            g_theta, g_z = self.priors.gradient(prior, result.posterior, kernel)
            g_lik = likelihood_evidence_gradient(result.posterior, likelihood, y)
            return hyper.pack(np.concatenate([g_theta, g_lik]), g_z)

        return scored(result.status, result.log_evidence, gradient, x)

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

    def predict_latent(self, X: Any) -> tuple[Array, Array]:
        return self.prior_.predict_at(self.result_.predict_latent, X)

    def predict_latent_cov(self, X: Any) -> tuple[Array, Array]:
        """Latent mean and covariance at ``X`` (the posterior's ``predict_latent_cov``)."""
        cross_kernel, _ = self.prior_.cross_covariance(X)
        return self.result_.posterior.predict_latent_cov(cross_kernel, self.kernel_(to_numpy(X)))  # (K** host)


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


def fit_sparse_model(
    plan: SparseFit,
    model: type[_LatentModel],
    kernel: Kernel,
    likelihood: Likelihood,
    rule: Any,
    search: _EvidenceSearch,
    X: Any,
    y: Array,
    latent_noise: float,
    **options: Any,
) -> tuple[_LatentModel, FitReport]:
    """The FITC ``model`` of a classifier or regressor as ``plan`` says, fitted: from ``plan.Z``, with the
    hyperparameters (and ``Z``) learned by L-BFGS-B, a callable or the stochastic search."""
    priors = _SparsePriors(latent_noise, plan.n_jobs)
    fitted = model(priors, kernel, likelihood, rule, search, Z=plan.Z, learn_z=plan.learn_z, **options)
    if plan.learns:
        as_sparse_kernel(kernel, X.shape[1])  # refuses, before any work, a kernel it has no gradient for
    if not plan.stochastic:
        return fitted, fitted.fit(X, y, plan.rng if plan.learns else None, plan.subset)
    steps = StochasticOptions.for_steps(plan.maxiter)
    batches = local_batches(X, y, steps.batch_size, plan.rng, plan.n_jobs)
    learned = learn_stochastic(
        kernel, likelihood, plan.Z, y.shape[0], feature_scale(X), latent_noise, plan.learn_theta, plan.learn_z,
        batches, steps, search.report_step,
    )  # fmt: skip
    fitted.kernel_.theta = learned.kernel.theta
    fitted.likelihood, fitted.Z = learned.likelihood, learned.Z
    return fitted, fitted.fit(X, y, start=Sites(*row_sites(learned, X, y, latent_noise, plan.n_jobs)))


# ------------------------------------------------------------------ joint multi-class
def _itself(result: MulticlassResult) -> MulticlassResult:
    return result  # (infer_multiclass starts from a result's sites)


class _JointModel:
    """One model of ``C`` latent functions with a shared kernel (:func:`relaxep.multiclass.infer_multiclass`).

    The search runs EP to a looser tolerance (at most 1e-2; warm-started, the fixed point moves
    little between evaluations); the final fit uses ``tol``.
    """

    #: EP's evidence is exact only to its tolerance: stop on a relative decrease below 1e-6 (2e-4 nats at
    #: |log Z| = 200) rather than L-BFGS's default 2e-9, below that noise, or where a factor e in any
    #: hyperparameter changes the evidence by less than 0.1 nat (the amplitude's ridge: the multinomial
    #: probit hardens slowly as the amplitude grows)
    OPTIONS: ClassVar[dict[str, float]] = {"ftol": 1e-6, "gtol": 0.1, "maxiter": 50}

    def __init__(
        self,
        kernel: Kernel,
        likelihood: MulticlassLikelihood,
        n_classes: int,
        search: _EvidenceSearch,
        *,
        noise: float,
        max_sweeps: int = 200,
        tol: float = 1e-4,
        warm_start: bool = True,
    ) -> None:
        self.kernel_, self.likelihood, self.n_classes, self.search = kernel, likelihood, n_classes, search
        self.noise, self.max_sweeps, self.tol = float(noise), max_sweeps, tol
        self.warm = WarmStarts(warm_start, keep=_itself)

    def _run(self, K: Array, y: NDArray, tol: float | None = None) -> MulticlassResult:
        """A run of nested EP from the warm start (reports a status, never warns)."""
        tol = self.tol if tol is None else tol
        n_classes, max_sweeps = self.n_classes, self.max_sweeps
        return self.warm.run(
            infer_multiclass, K, y, self.likelihood, n_classes=n_classes, max_sweeps=max_sweeps, tol=tol
        )

    def evidence(self, theta: Array, eval_gradient: bool, X: Any, y: NDArray, tol: float | None = None) -> Any:
        K, dK = kernel_matrix(self.kernel_.clone_with_theta(theta), X, self.noise, eval_gradient)
        result = self._run(K, y, tol)
        gradient = partial(multiclass_evidence_gradient, result, dK) if eval_gradient else None
        return scored(result.status, result.log_evidence, gradient, theta)

    def fit(self, X: Any, y: NDArray, random_state: Any, subset: int | None, learn: bool) -> FitReport:
        bounds: tuple[str, ...] = ()
        if learn:
            Xo, yo = X, y
            if subset is not None and int(subset) < y.size:
                # a private generator: random_state=None must not draw from numpy's global one
                seed = np.random.RandomState() if random_state is None else check_random_state(random_state)
                Xo, _, yo, _ = train_test_split(Xo, yo, train_size=int(subset), stratify=yo, random_state=seed)
            search_tol = max(float(self.tol), 1e-2)
            evidence = partial(self.evidence, X=Xo, y=yo, tol=search_tol)
            hyper = HyperVector(self.kernel_)
            best = self.search.maximise(evidence, hyper, check_random_state(random_state), options=self.OPTIONS)
            if best is not None:
                self.kernel_.theta = best
            if yo.size != y.size:
                self.warm.reset()  # its sites belong to the subset
            bounds = at_bounds(self.kernel_)
        self.X, self.y = X, y
        self.prior_ = DensePrior.from_kernel(self.kernel_, X, self.noise)
        result = self._run(self.prior_.K, y)
        if result.status == "diverged":
            raise DivergenceError(
                f"joint multi-class EP diverged after {result.n_sweeps} sweeps with {self.likelihood!r}"
            )
        self.result_ = result
        return FitReport(result.status, result.n_sweeps, result.trace, None, bounds)

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        if not clone_kernel:
            self.kernel_.theta = theta
        with self.warm.held():  # the value as infer_multiclass reports it (not scored: a nan stays nan)
            K, dK = kernel_matrix(self.kernel_.clone_with_theta(theta), self.X, self.noise, eval_gradient)
            result = self._run(K, self.y)
        lml = np.float64(result.log_evidence)
        return (lml, multiclass_evidence_gradient(result, dK)) if eval_gradient else lml

    def predict_latent(self, X: Any) -> tuple[Array, Array]:
        return self.prior_.predict_at(self.result_.predict_latent, X)

    def decision_function(self, X: Any) -> Array:
        """Log predictive probabilities ``(n, C)``."""
        return self.prior_.predict_at(self.result_.predict_log_proba, X)

    def predict_log_proba(self, X: Any) -> Array:
        return self.decision_function(X)

    def predict_proba(self, X: Any) -> Array:
        return np.exp(self.decision_function(X))


# ------------------------------------------------------------------ one-vs-rest
def _fit_binary(estimator: Any, X: Any, y: NDArray) -> Any:
    """One one-vs-rest model (a module-level function, so joblib can send it to a worker)."""
    return estimator.fit(X, y)


class _OneVsRest:
    """One binary estimator per class (``make_binary()`` makes one), probabilities renormalised."""

    def __init__(self, make_binary: Callable[[], Any], n_jobs: int | None = None) -> None:
        self.make_binary, self.n_jobs = make_binary, n_jobs

    def fit(self, X: Any, y: NDArray, n_classes: int) -> None:
        self.estimators_ = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_binary)(self.make_binary(), X, (y == c).astype(int)) for c in range(n_classes)
        )
        self.kernel_ = self.estimators_[0].kernel_
        self.log_marginal_likelihood_value_ = float(sum(e.log_marginal_likelihood_value_ for e in self.estimators_))

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        raise ValueError("log_marginal_likelihood(theta) is not defined for one-vs-rest (one evidence per class)")

    def predict_latent(self, X: Any) -> tuple[Array, Array]:
        pairs = [e.latent_mean_and_variance(X) for e in self.estimators_]
        return np.column_stack([p[0] for p in pairs]), np.column_stack([p[1] for p in pairs])

    def decision_function(self, X: Any) -> Array:
        r"""Log of the renormalised one-vs-rest probabilities ``(n, C)``: from each class's log-odds
        :math:`d_c`, :math:`\log \sigma(d_c) - \log \sum_k \sigma(d_k)` (:math:`\sigma`: the logistic function)."""
        log_p = np.column_stack([log_expit(e.decision_function(X)) for e in self.estimators_])
        return log_p - logsumexp(log_p, axis=1, keepdims=True)

    def predict_log_proba(self, X: Any) -> Array:
        return self.decision_function(X)

    def predict_proba(self, X: Any) -> Array:
        return np.exp(self.decision_function(X))
