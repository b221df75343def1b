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
from typing import Any, ClassVar

import numpy as np
from joblib import Parallel, delayed
from numpy.typing import NDArray
from scipy.special import expit, log_expit, logsumexp
from sklearn.gaussian_process.kernels import Kernel
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_random_state

from relaxep._typing import Array
from relaxep.errors import DivergenceError, KernelNotPositiveDefiniteError
from relaxep.estimators._inducing import check_inducing_points, check_sparse_options, flat, initial_inducing_points
from relaxep.estimators._search import _EvidenceSearch, scored, warn_at_bounds, warn_unconverged
from relaxep.estimators._stochastic import (
    SiteStart,
    StochasticOptions,
    learn_stochastic,
    local_batches,
    row_sites,
    stochastic_search,
)
from relaxep.inference import InferenceMethod, InferenceResult, infer
from relaxep.inference.evidence import likelihood_evidence_gradient
from relaxep.likelihoods import Likelihood
from relaxep.multiclass import MulticlassLikelihood, MulticlassResult, infer_multiclass
from relaxep.multiclass import evidence_gradient as multiclass_evidence_gradient
from relaxep.posterior import DensePrior, Posterior, Prior, SparsePrior
from relaxep.posterior.prior import kernel_matrix
from relaxep.posterior.sparse_gradient import as_sparse_kernel, sparse_evidence_gradient

__all__ = ["_DensePriors", "_JointModel", "_LatentModel", "_OneVsRest", "_SparsePriors", "fit_sparse_model"]


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
        """:meth:`DensePosterior.evidence_gradient <relaxep.posterior.DensePosterior.evidence_gradient>`."""
        return posterior.evidence_gradient(prior.kernel_gradient), None


class _SparsePriors:
    """FITC priors with inducing inputs ``Z`` (:meth:`SparsePrior.from_kernel`); the gradient in theta and Z
    is :func:`~relaxep.posterior.sparse_gradient.sparse_evidence_gradient`."""

    refused = (KernelNotPositiveDefiniteError,)  # K_uu without a Cholesky factor at the optimiser's point
    warns_at_bounds = False

    def __init__(self, noise: float) -> None:
        self.noise = float(noise)

    def build(self, kernel: Kernel, X: Any, Z: Array | None, eval_gradient: bool) -> SparsePrior:
        return SparsePrior.from_kernel(kernel, X, Z, self.noise)

    def gradient(self, prior: SparsePrior, posterior: Posterior, kernel: Kernel) -> tuple[Array, Array]:
        return sparse_evidence_gradient(posterior, kernel)


# ------------------------------------------------------------------ one latent per target
class _LatentModel:
    """One latent function, one target per input (binary labels in ``{-1, +1}``, or real regression
    targets), on the priors of ``priors``, by :func:`~relaxep.infer` with ``rule``.

    The search learns the kernel's hyperparameters, the likelihood's (:attr:`Likelihood.theta
    <relaxep.likelihoods.Likelihood.theta>`: a Student-t's scale, say) and, for sparse priors
    where ``learn_z``, the inducing inputs ``Z``: the optimiser's vector is the kernel's ``theta``,
    then the likelihood's, then ``Z`` row by row.  ``kernel`` is the estimator's ``kernel_`` itself
    (the search sets its ``theta``); the learned likelihood is :attr:`likelihood`.
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
    ) -> None:
        self.priors, self.kernel_, self.likelihood, self.rule, self.search = priors, kernel, likelihood, rule, search
        self.search_rule = rule if search_rule is None else search_rule
        self.search_stall_window = search_stall_window
        self.schedule, self.max_sweeps, self.tol = schedule, max_sweeps, tol
        self.Z, self.learn_z = Z, bool(learn_z)

    def _run(self, prior: Prior, y: Array, likelihood: Likelihood | None = None, searching: bool = False) -> Any:
        """A run of inference (``searching``: an evidence evaluation of the search, by ``search_rule``, which gives
        up on a run that stalls for ``search_stall_window`` sweeps: a region the optimiser must leave)."""
        rule = self.search_rule if searching else self.rule
        # an inference method carries its own schedule (infer refuses one beside it)
        schedule = {} if isinstance(rule, InferenceMethod) else {"schedule": self.schedule}
        if searching and self.search_stall_window is not None:
            schedule["stall_window"] = self.search_stall_window
        likelihood = self.likelihood if likelihood is None else likelihood

        def run(init: InferenceResult | None) -> InferenceResult:
            options = dict(max_sweeps=self.max_sweeps, tol=self.tol, init=init, **schedule)
            return infer(prior, y, likelihood, rule, **options)

        return self.search.run(run)

    @property
    def theta(self) -> Array:
        """The kernel's and the likelihood's hyperparameters, in the optimiser's order."""
        return np.concatenate([self.kernel_.theta, self.likelihood.theta])

    @property
    def bounds(self) -> Array:
        # (a kernel whose hyperparameters are all fixed has bounds of shape (0,), not (0, 2))
        return np.vstack([np.reshape(self.kernel_.bounds, (-1, 2)), np.reshape(self.likelihood.bounds, (-1, 2))])

    def _split(self, x: Array, learn_z: bool) -> tuple[Kernel, Likelihood, Array | None]:
        """The optimiser's vector as (kernel, likelihood, ``Z`` or ``None`` where not learned)."""
        k, n_theta = self.kernel_.theta.size, self.theta.size
        likelihood = self.likelihood.clone_with_theta(x[k:n_theta]) if n_theta > k else self.likelihood
        Z = x[n_theta:].reshape(self.Z.shape) if learn_z else None
        return self.kernel_.clone_with_theta(x[:k]), likelihood, Z

    def evidence(self, x: Array, eval_gradient: bool, X: Any, y: Array, learn_z: bool) -> tuple[float, Any]:
        """EP evidence (and gradient in the hyperparameters and, if learned, ``Z``) at the optimiser's ``x``."""
        kernel, likelihood, Z = self._split(x, learn_z)
        Z = self.Z if Z is None else Z
        try:
            prior = self.priors.build(kernel, X, Z, eval_gradient)
        except self.priors.refused:
            return -np.inf, (np.zeros_like(x) if eval_gradient else None)
        result = self._run(prior, y, likelihood, searching=True)

        def gradient() -> Array:
            g_theta, g_z = self.priors.gradient(prior, result.posterior, kernel)
            g_lik = likelihood_evidence_gradient(result.posterior, likelihood, y)
            return flat(np.concatenate([g_theta, g_lik]), g_z if learn_z else None)

        return scored(result.status, result.log_evidence, gradient if eval_gradient else None, x)

    def learn(self, X: Any, y: Array, rng: np.random.RandomState) -> None:
        """Learn the hyperparameters (and ``Z`` where ``learn_z``) on ``(X, y)`` by the search."""
        learn_z = self.learn_z
        best = self.search.maximise(
            lambda x, g: self.evidence(x, g, X, y, learn_z),
            self.theta,
            self.bounds,
            rng,
            pack=lambda theta0: flat(theta0, self.Z if learn_z else None),
            n_extra=self.Z.size if learn_z else 0,
        )
        if best is not None:
            kernel, self.likelihood, Z = self._split(best, learn_z)
            self.kernel_.theta = kernel.theta
            if Z is not None:
                self.Z = np.array(Z)
        if self.priors.warns_at_bounds:
            warn_at_bounds(self.kernel_, stacklevel=6)  # the user's call of fit
            warn_at_bounds(self.likelihood, stacklevel=6)

    def fit(self, X: Any, y: Array, rng: Callable[[], np.random.RandomState] | None, subset: int | None = None) -> None:
        """Learn (``rng`` given: the search's random state) on all of ``(X, y)`` or on ``subset`` random rows,
        then run inference on all of them."""
        if rng is not None:
            generator = rng()
            n = y.shape[0]
            if subset is not None and subset < n:
                idx = np.sort(generator.choice(n, int(subset), replace=False))
                self.learn(X[idx], y[idx], generator)
                self.search.warm = None  # its sites belong to the subset
            else:
                self.learn(X, y, generator)
        self.X, self.y = X, y
        self.prior_ = self.priors.build(self.kernel_, X, self.Z, False)
        result = self._run(self.prior_, y)
        if result.status == "diverged":
            raise DivergenceError(
                f"{self.rule!r} diverged after {result.n_sweeps} sweeps with {self.likelihood!r}. "
                "Try damping (e.g. EP(damping=0.5)), a larger jitter / latent noise (WhiteKernel), "
                "or RelaxedEP with a smaller c."
            )
        if result.status != "converged":
            warn_unconverged(result.status, result.n_sweeps, result.trace, result.n_skipped, stacklevel=5)
        self.result_ = result

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        """The evidence at ``theta``: the kernel's hyperparameters (the likelihood's as fitted), or both."""
        k = self.kernel_.theta.size
        x = theta if theta.size > k else np.concatenate([theta, self.likelihood.theta])
        if not clone_kernel:
            self.kernel_.theta = theta[:k]
        lml, grad = self.search.evaluate_at(lambda x, g: self.evidence(x, g, self.X, self.y, False), x, eval_gradient)
        lml = np.float64(lml)  # a NumPy scalar, as scikit-learn's (compares in float64 with float32 operands)
        return (lml, grad[: theta.size]) if eval_gradient else lml

    def predict_latent(self, X: Any) -> tuple[Array, Array]:
        return self.prior_.predict_at(self.result_.predict_latent, X)

    def predict_latent_cov(self, X: Any) -> tuple[Array, Array]:
        """Latent mean and covariance at ``X`` (the posterior's ``predict_latent_cov``)."""
        cross_kernel, _ = self.prior_.cross_covariance(X)
        return self.result_.posterior.predict_latent_cov(cross_kernel, self.kernel_(X))

    def decision_function(self, X: Any) -> Array:
        """Log-odds of ``classes_[1]`` (the likelihood's ``predict_log_odds`` at the latent predictive)."""
        return self.prior_.predict_at(self.result_.predict_log_odds, X)

    def predict_log_proba(self, X: Any) -> Array:
        d = self.decision_function(X)
        return np.column_stack([log_expit(-d), log_expit(d)])

    def predict_proba(self, X: Any) -> Array:
        """``[expit(-d), expit(d)]`` of the log-odds ``d``: exactly the predictive probabilities,
        each to full relative precision in its own tail (``1 - p`` would lose it)."""
        d = self.decision_function(X)
        return np.column_stack([expit(-d), expit(d)])


def fit_sparse_model(
    estimator: Any,
    likelihood: Likelihood,
    rule: Any,
    search: _EvidenceSearch,
    X: Any,
    y: Array,
    latent_noise: float,
    learn_theta: bool,
    **options: Any,
) -> _LatentModel:
    """The FITC model of a classifier or regressor (``estimator``'s ``inducing_points``, ``inducing_init``,
    ``learn_inducing_points``, ``optimizer``, ``optimizer_subset``, ``random_state``), fitted: ``Z`` placed,
    then learned with the hyperparameters (``learn_theta``) where the optimiser is on."""
    spec = check_inducing_points(estimator.inducing_points, X.shape[1])
    check_sparse_options(estimator.learn_inducing_points, estimator.optimizer_subset)
    # a private generator: random_state=None must not draw from numpy's global one
    state = estimator.random_state
    rng = np.random.RandomState() if state is None else check_random_state(state)
    Z = initial_inducing_points(X, spec, estimator.inducing_init, rng)
    learn_z = bool(estimator.learn_inducing_points) and estimator.optimizer is not None
    model = _LatentModel(
        _SparsePriors(latent_noise), estimator.kernel_, likelihood, rule, search, Z=Z, learn_z=learn_z, **options
    )
    learn = learn_theta or learn_z
    if learn:
        as_sparse_kernel(estimator.kernel_, X.shape[1])  # refuses, before any work, a kernel it has no gradient for
    if learn and stochastic_search(estimator, y.shape[0]):
        options = StochasticOptions.for_steps(estimator.optimizer_maxiter)
        batches = local_batches(X, y, options.batch_size, rng)
        scale = np.std(X, axis=0)
        learned = learn_stochastic(
            model.kernel_, likelihood, Z, y.shape[0], scale, latent_noise, learn_theta, learn_z, batches, options,
            search.report_step,
        )  # fmt: skip
        model.kernel_.theta = learned.kernel.theta
        model.likelihood, model.Z = learned.likelihood, learned.Z
        search.warm = SiteStart(*row_sites(learned, X, y, latent_noise))  # the final EP starts at the tied site
        learn = False
    model.fit(X, y, (lambda: rng) if learn else None, estimator.optimizer_subset)
    return model


# ------------------------------------------------------------------ joint multi-class
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
    ) -> None:
        self.kernel_, self.likelihood, self.n_classes, self.search = kernel, likelihood, n_classes, search
        self.noise, self.max_sweeps, self.tol = float(noise), max_sweeps, tol

    def _run(self, K: Array, y: NDArray, tol: float | None = None) -> MulticlassResult:
        tol = self.tol if tol is None else tol

        def run(init: MulticlassResult | None) -> MulticlassResult:  # (reports a status, never warns)
            return infer_multiclass(
                K, y, self.likelihood, n_classes=self.n_classes, max_sweeps=self.max_sweeps, tol=tol, init=init
            )

        # sites from the search's subset do not fit the whole training set
        return self.search.run(run, lambda init: init.sites is None or init.sites[0].shape[0] == y.size)

    def evidence(self, theta: Array, eval_gradient: bool, X: Any, y: NDArray, tol: float | None = None) -> Any:
        K, dK = kernel_matrix(self.kernel_.clone_with_theta(theta), X, self.noise, eval_gradient)
        result = self._run(K, y, tol)
        gradient = (lambda: multiclass_evidence_gradient(result, dK)) if eval_gradient else None
        return scored(result.status, result.log_evidence, gradient, theta)

    def fit(self, X: Any, y: NDArray, random_state: Any, subset: int | None, learn: bool) -> None:
        if learn:
            Xo, yo = X, y
            if subset is not None and int(subset) < y.size:
                # a private generator: random_state=None must not draw from numpy's global one
                seed = np.random.RandomState() if random_state is None else check_random_state(random_state)
                Xo, _, yo, _ = train_test_split(Xo, yo, train_size=int(subset), stratify=yo, random_state=seed)
            search_tol = max(float(self.tol), 1e-2)
            best = self.search.maximise(
                lambda theta, g: self.evidence(theta, g, Xo, yo, search_tol),
                self.kernel_.theta,
                self.kernel_.bounds,
                check_random_state(random_state),
                options=self.OPTIONS,
            )
            if best is not None:
                self.kernel_.theta = best
            warn_at_bounds(self.kernel_, stacklevel=5)  # the user's call of GPClassifier.fit
        self.X, self.y = X, y
        self.prior_ = DensePrior.from_kernel(self.kernel_, X, self.noise)
        result = self._run(self.prior_.kernel, y)
        if result.status == "diverged":
            raise DivergenceError(
                f"joint multi-class EP diverged after {result.n_sweeps} sweeps with {self.likelihood!r}"
            )
        if result.status != "converged":
            warn_unconverged(result.status, result.n_sweeps, result.trace, stacklevel=5)
        self.result_ = result

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        if not clone_kernel:
            self.kernel_.theta = theta
        saved = self.search.warm
        try:  # the value as infer_multiclass reports it (not scored: a nan stays nan)
            K, dK = kernel_matrix(self.kernel_.clone_with_theta(theta), self.X, self.noise, eval_gradient)
            result = self._run(K, self.y)
        finally:
            self.search.warm = saved
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
