r"""``GPClassifier``: a scikit-learn estimator for EP, Power EP and Relaxed EP.

The estimator is thin: it validates input, maps the two classes to ``{-1, +1}``,
builds kernel matrices with scikit-learn's own kernels, learns the kernel's
hyperparameters by maximising the EP evidence (or leaves that to ``GridSearchCV``),
and delegates inference to :func:`relaxep.infer`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel
from sklearn.model_selection import train_test_split
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from relaxep._typing import Array
from relaxep.errors import DivergenceError
from relaxep.inference import InferenceMethod, InferenceResult, evidence_gradient, infer
from relaxep.likelihoods import Likelihood, NoisyProbit
from relaxep.multiclass import MulticlassLikelihood, MulticlassResult, MultinomialProbit, infer_multiclass
from relaxep.multiclass import evidence_gradient as multiclass_evidence_gradient
from relaxep.schedules import Schedule
from relaxep.sites import SiteRule

__all__ = ["GPClassifier"]


class GPClassifier(ClassifierMixin, BaseEstimator):
    r"""Gaussian process classification by EP, Power EP or Relaxed EP.

    Parameters
    ----------
    kernel : sklearn Kernel, default ``ConstantKernel(1.0) * RBF(1.0)``
        Prior covariance; its hyperparameters are learned unless ``optimizer=None``.
    likelihood : Likelihood, default ``NoisyProbit(eps=0.01, scale=1.0)``
        The default is the label-noise step seen through unit Gaussian latent noise,
        :math:`0.01 + 0.98\,\Phi(yf)`: smooth like the probit, so EP converges in a few
        parallel sweeps, and with a floor, so a mislabelled point far from the boundary costs
        at most :math:`\log 100` instead of pulling the latent function.  Measured against the
        noise-free step, the probit and larger floors in ``benchmarks/results/defaults.md``.
        The paper's ``NoisyStep(eps)`` stays available (it needs ``rule="auto"``'s convergent
        stages on dense data, where EP on it oscillates).
    rule : SiteRule, InferenceMethod or "auto", default ``"auto"``
        ``"auto"`` (the default): EP, and where EP does not converge
        :class:`~relaxep.inference.ConvergentEP`, which reaches the same fixed point by descent on
        its free energy (:class:`~relaxep.inference.Auto`); where EP converges it is EP, at the
        same cost.  Or a fixed rule: ``EP()``, ``PowerEP(u)``, ``RelaxedEP(c)``,
        ``FractionalEP(fraction)`` (``rule__c`` etc. for grid search), or an inference method
        such as ``ConvergentEP()`` or ``DoubleLoopEP()``.
    optimizer : "fmin_l_bfgs_b", callable or None
        Maximise the EP log evidence over ``kernel.theta`` within its bounds.  A callable
        is called as ``optimizer(obj_func, initial_theta, bounds)`` and returns
        ``(theta_opt, func_min)`` (scikit-learn's convention).
    n_restarts_optimizer : int
        Extra optimiser starts, log-uniform within the bounds.
    schedule : Schedule or {"parallel", "blocked", "sequential"}, default ``"parallel"``
        How a site rule (or ``"auto"``'s EP stage) sweeps (:mod:`relaxep.schedules`).
        ``"parallel"``: every site from one set of cavities, one factorisation a sweep, the
        fastest where EP converges; ``"blocked"``: the paper's sequential iterates in BLAS-3
        blocks.  Not used when ``rule`` is an inference method.
    max_sweeps, tol : int, float
        Passed to :func:`relaxep.infer`.
    jitter : float
        Added to the kernel matrix's diagonal (and to test variances): latent noise.
        The noise-free step likelihood needs some.
    warm_start : bool
        Start each evidence evaluation of the optimiser from the last converged sites.
    random_state : int, RandomState or None
        For the optimiser's restarts (and ``optimizer_subset``'s draw).
    multi_class : {"joint", "one_vs_rest"}, default ``"joint"``
        For more than two classes: ``"joint"`` is one model of ``C`` latent functions with a
        shared kernel, by nested EP for the multinomial probit (Riihimaki, Jylanki & Vehtari
        2013, JMLR 14) or dense EP for the robust max (:mod:`relaxep.multiclass`); its
        ``likelihood`` is a :class:`~relaxep.multiclass.MulticlassLikelihood` (default
        :class:`~relaxep.multiclass.MultinomialProbit`) and ``rule``/``schedule`` do not apply.
        ``"one_vs_rest"``: one binary model per class (this estimator, cloned), probabilities
        renormalised, as scikit-learn's ``GaussianProcessClassifier``.  Two classes always fit
        the binary model.
    optimizer_subset : int or None, default None
        Joint multi-class only: learn the hyperparameters on a stratified random subset of this
        many training points (``O(C m^3)`` per evidence evaluation instead of ``O(C n^3)``), then
        run inference on all of them.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    kernel_ : Kernel with the learned hyperparameters
    result_ : InferenceResult (binary) or MulticlassResult (joint multi-class) of the final fit
    estimators_ : list of GPClassifier (``multi_class="one_vs_rest"`` with more than two classes)
    log_marginal_likelihood_value_ : float
    X_train_ : ndarray
    """

    def __init__(
        self,
        kernel: Kernel | None = None,
        likelihood: Likelihood | None = None,
        rule: SiteRule | InferenceMethod | str | None = None,
        optimizer: str | Callable | None = "fmin_l_bfgs_b",
        n_restarts_optimizer: int = 0,
        schedule: Schedule | str = "parallel",
        max_sweeps: int = 200,
        tol: float = 1e-3,
        jitter: float = 1e-6,
        warm_start: bool = True,
        random_state: int | np.random.RandomState | None = None,
        multi_class: str = "joint",
        optimizer_subset: int | None = None,
    ) -> None:
        self.kernel = kernel
        self.likelihood = likelihood
        self.rule = rule
        self.optimizer = optimizer
        self.n_restarts_optimizer = n_restarts_optimizer
        self.schedule = schedule
        self.max_sweeps = max_sweeps
        self.tol = tol
        self.jitter = jitter
        self.warm_start = warm_start
        self.random_state = random_state
        self.multi_class = multi_class
        self.optimizer_subset = optimizer_subset

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        tags.classifier_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ fit
    def fit(self, X: ArrayLike, y: ArrayLike) -> GPClassifier:
        """Learn hyperparameters (if ``optimizer``) and run inference on ``(X, y)``."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.size == 1:
            raise ValueError(
                f"GPClassifier needs samples of two classes; the data contain only one class: {classes[0]!r}"
            )
        if self.multi_class not in ("joint", "one_vs_rest"):
            raise ValueError(f"multi_class must be 'joint' or 'one_vs_rest', got {self.multi_class!r}")
        if not (float(self.jitter) >= 0.0):
            raise ValueError(f"jitter must be >= 0, got {self.jitter!r}")
        if classes.size > 2:
            return self._fit_multiclass(X, y, classes)
        self._mode = "binary"
        self.classes_ = classes
        self.X_train_ = np.array(X, copy=True)
        self._y = np.where(y == classes[1], 1.0, -1.0)
        self._likelihood = NoisyProbit(0.01, 1.0) if self.likelihood is None else self.likelihood
        self._rule = "auto" if self.rule is None else self.rule
        self.kernel_ = ConstantKernel(1.0) * RBF(1.0) if self.kernel is None else clone(self.kernel)
        self._warm: InferenceResult | None = None

        if self.optimizer is not None and self.kernel_.n_dims > 0:
            self._optimize()

        result = self._infer(self.kernel_.theta)
        if result.status == "diverged":
            raise DivergenceError(
                f"{self._rule!r} diverged after {result.n_sweeps} sweeps with {self._likelihood!r}. "
                "Try damping (e.g. EP(damping=0.5)), a larger jitter / latent noise (WhiteKernel), "
                "or RelaxedEP with a smaller c."
            )
        if result.status != "converged":
            warnings.warn(
                f"inference did not converge: status {result.status!r} after {result.n_sweeps} sweeps "
                f"(last change {result.trace[-1]:.3g}, {result.n_skipped} site visits skipped). "
                "Consider damping, more max_sweeps or a larger tol.",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.result_ = result
        self.log_marginal_likelihood_value_ = result.log_evidence
        return self

    # ------------------------------------------------------- multi-class fit
    def _fit_multiclass(self, X: Array, y: NDArray, classes: NDArray) -> GPClassifier:
        self.classes_ = classes
        self.X_train_ = np.array(X, copy=True)
        y_idx = np.searchsorted(classes, y)
        if self.multi_class == "one_vs_rest":
            self._mode = "ovr"
            params = self.get_params(deep=False)
            self.estimators_ = []
            for c in range(classes.size):
                est = GPClassifier(**params)
                est.fit(X, (y_idx == c).astype(int))
                self.estimators_.append(est)
            self.kernel_ = self.estimators_[0].kernel_
            self.log_marginal_likelihood_value_ = float(sum(e.log_marginal_likelihood_value_ for e in self.estimators_))
            return self
        self._mode = "joint"
        lik = MultinomialProbit() if self.likelihood is None else self.likelihood
        if not isinstance(lik, MulticlassLikelihood):
            raise TypeError(
                "with more than two classes and multi_class='joint', likelihood must be a multi-class likelihood "
                f"(relaxep.multiclass.MultinomialProbit or RobustMax), got {lik!r}; "
                "use multi_class='one_vs_rest' for a binary likelihood"
            )
        if self.rule is not None and not (isinstance(self.rule, str) and self.rule == "auto"):
            raise ValueError(
                f"rule={self.rule!r} does not apply to joint multi-class inference (nested EP); leave it None"
            )
        if self.optimizer_subset is not None and int(self.optimizer_subset) < classes.size:
            raise ValueError(f"optimizer_subset must be at least the number of classes, got {self.optimizer_subset!r}")
        self._likelihood = lik
        self._y = y_idx
        self.kernel_ = ConstantKernel(1.0) * RBF(1.0) if self.kernel is None else clone(self.kernel)
        self._warm_mc: MulticlassResult | None = None
        if self.optimizer is not None and self.kernel_.n_dims > 0:
            Xo, yo = self.X_train_, y_idx
            m = self.optimizer_subset
            if m is not None and int(m) < y_idx.size:
                # a private generator: random_state=None must not draw from numpy's global one
                seed = np.random.RandomState() if self.random_state is None else check_random_state(self.random_state)
                Xo, _, yo, _ = train_test_split(Xo, yo, train_size=int(m), stratify=yo, random_state=seed)
            self._optimize_multiclass(Xo, yo)
        K = self._mc_kernel(self.X_train_, self.kernel_.theta, False)[0]
        result = self._mc_infer(K, y_idx)
        if result.status == "diverged":
            raise DivergenceError(f"joint multi-class EP diverged after {result.n_sweeps} sweeps with {lik!r}")
        if result.status != "converged":
            warnings.warn(
                f"inference did not converge: status {result.status!r} after {result.n_sweeps} sweeps "
                f"(last change {result.trace[-1]:.3g}). Consider more max_sweeps or a larger tol.",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.result_ = result
        self.log_marginal_likelihood_value_ = result.log_evidence
        return self

    def _mc_kernel(self, X: Array, theta: Array, eval_gradient: bool) -> tuple[Array, Array | None]:
        kernel = self.kernel_.clone_with_theta(theta)
        if eval_gradient:
            K, dK = kernel(X, eval_gradient=True)
        else:
            K, dK = kernel(X), None
        K[np.diag_indices_from(K)] += float(self.jitter)
        return K, dK

    def _mc_infer(self, K: Array, y: NDArray, tol: float | None = None) -> MulticlassResult:
        tol = self.tol if tol is None else tol
        init = self._warm_mc if self.warm_start else None
        if init is not None and init.sites is not None and init.sites[0].shape[0] != y.size:
            init = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = infer_multiclass(
                K,
                y,
                self._likelihood,
                n_classes=self.classes_.size,
                max_sweeps=self.max_sweeps,
                tol=tol,
                init=init,
            )
            if result.status == "diverged" and init is not None:
                result = infer_multiclass(
                    K, y, self._likelihood, n_classes=self.classes_.size, max_sweeps=self.max_sweeps, tol=tol
                )
        if result.status == "converged":
            self._warm_mc = result
        return result

    def _optimize_multiclass(self, X: Array, y: NDArray) -> None:
        # the search runs EP to a looser tolerance (at most 1e-2; warm-started, the fixed point
        # moves little between evaluations); the final fit uses ``tol``
        search_tol = max(float(self.tol), 1e-2)

        def obj_func(theta: Array, eval_gradient: bool = True) -> Any:
            K, dK = self._mc_kernel(X, theta, eval_gradient)
            result = self._mc_infer(K, y, search_tol)
            lml = result.log_evidence
            if result.status == "diverged" or not np.isfinite(lml):
                return (np.inf, np.zeros_like(theta)) if eval_gradient else np.inf
            if eval_gradient:
                return -lml, -multiclass_evidence_gradient(result, dK)
            return -lml

        bounds = self.kernel_.bounds
        starts = [self.kernel_.theta]
        rng = check_random_state(self.random_state)
        if self.n_restarts_optimizer > 0:
            if not np.all(np.isfinite(bounds)):
                raise ValueError("multiple optimizer restarts need finite hyperparameter bounds")
            starts += [rng.uniform(bounds[:, 0], bounds[:, 1]) for _ in range(self.n_restarts_optimizer)]
        best_theta, best_value = None, np.inf
        # EP's evidence is exact only to its tolerance: stop on a relative decrease below 1e-6
        # (2e-4 nats at |log Z| = 200) rather than L-BFGS's default 2e-9, below that noise, or
        # where a factor e in any hyperparameter changes the evidence by less than 0.1 nat (the
        # amplitude's ridge: the multinomial probit hardens slowly as the amplitude grows)
        options = {"ftol": 1e-6, "gtol": 0.1, "maxiter": 50}
        for theta0 in starts:
            theta, value = self._run_optimizer(obj_func, theta0, bounds, options)
            if value < best_value:
                best_theta, best_value = theta, value
        if best_theta is not None:
            self.kernel_.theta = best_theta

    def _kernel_matrix(self, theta: Array, eval_gradient: bool) -> tuple[Array, Array | None]:
        kernel = self.kernel_.clone_with_theta(theta)
        if eval_gradient:
            K, dK = kernel(self.X_train_, eval_gradient=True)
        else:
            K, dK = kernel(self.X_train_), None
        K[np.diag_indices_from(K)] += float(self.jitter)
        return K, dK

    def _infer(self, theta: Array, K: Array | None = None) -> InferenceResult:
        if K is None:
            K, _ = self._kernel_matrix(theta, eval_gradient=False)
        init = self._warm if self.warm_start else None
        result = self._run_infer(K, init)
        if result.status == "diverged" and init is not None:
            result = self._run_infer(K, None)
        if result.status == "converged":
            self._warm = result
        return result

    def _run_infer(self, K: Array, init: InferenceResult | None) -> InferenceResult:
        # an inference method carries its own schedule (infer refuses one beside it)
        schedule = {} if isinstance(self._rule, InferenceMethod) else {"schedule": self.schedule}
        return infer(
            K, self._y, self._likelihood, self._rule, max_sweeps=self.max_sweeps, tol=self.tol, init=init, **schedule
        )

    def _evidence(self, theta: Array, eval_gradient: bool) -> tuple[float, Array | None]:
        """Evidence (and gradient) at ``theta``; ``-inf`` where inference diverges.

        A run that ran out of sweeps still gives its (approximate) evidence, so the
        optimiser can move on rather than stop at the first hard point.
        """
        K, dK = self._kernel_matrix(theta, eval_gradient)
        result = self._infer(theta, K)
        lml = result.log_evidence
        if result.status == "diverged" or not np.isfinite(lml):
            return -np.inf, (np.zeros_like(theta) if eval_gradient else None)
        return lml, (evidence_gradient(result, dK) if eval_gradient else None)

    def _optimize(self) -> None:
        def obj_func(theta: Array, eval_gradient: bool = True) -> Any:
            lml, grad = self._evidence(theta, eval_gradient)
            if eval_gradient:
                return -lml, -grad
            return -lml

        bounds = self.kernel_.bounds
        starts = [self.kernel_.theta]
        rng = check_random_state(self.random_state)
        if self.n_restarts_optimizer > 0:
            if not np.all(np.isfinite(bounds)):
                raise ValueError("multiple optimizer restarts need finite hyperparameter bounds")
            starts += [rng.uniform(bounds[:, 0], bounds[:, 1]) for _ in range(self.n_restarts_optimizer)]
        best_theta, best_value = None, np.inf
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for theta0 in starts:
                theta, value = self._run_optimizer(obj_func, theta0, bounds)
                if value < best_value:
                    best_theta, best_value = theta, value
        if best_theta is not None:
            self.kernel_.theta = best_theta

    def _run_optimizer(
        self, obj_func: Callable, theta0: Array, bounds: Array, options: dict | None = None
    ) -> tuple[Array, float]:
        if self.optimizer == "fmin_l_bfgs_b":
            start_value = obj_func(theta0, eval_gradient=False)
            res = optimize.minimize(obj_func, theta0, method="L-BFGS-B", jac=True, bounds=bounds, options=options)
            if not np.isfinite(res.fun) or res.fun > start_value:
                return theta0, start_value
            return res.x, float(res.fun)
        if callable(self.optimizer):
            theta, value = self.optimizer(obj_func, theta0, bounds)
            return np.asarray(theta, dtype=float), float(value)
        raise ValueError(f"unknown optimizer {self.optimizer!r}: use 'fmin_l_bfgs_b', a callable or None")

    # ------------------------------------------------------------ evidence
    def log_marginal_likelihood(
        self, theta: ArrayLike | None = None, eval_gradient: bool = False
    ) -> float | tuple[float, Array]:
        r"""EP log evidence at ``theta`` (log-hyperparameters), optionally with its gradient.

        ``theta=None`` returns the fitted value.  The gradient is :func:`evidence_gradient`.
        """
        check_is_fitted(self)
        if theta is None:
            if eval_gradient:
                raise ValueError("gradient can only be evaluated for theta != None")
            return self.log_marginal_likelihood_value_
        theta = np.asarray(theta, dtype=float)
        mode = getattr(self, "_mode", "binary")
        if mode == "ovr":
            raise ValueError("log_marginal_likelihood(theta) is not defined for one-vs-rest (one evidence per class)")
        if mode == "joint":
            saved_mc = self._warm_mc
            try:
                K, dK = self._mc_kernel(self.X_train_, theta, eval_gradient)
                result = self._mc_infer(K, self._y)
            finally:
                self._warm_mc = saved_mc
            lml = result.log_evidence
            return (lml, multiclass_evidence_gradient(result, dK)) if eval_gradient else lml
        saved = self._warm
        try:
            lml, grad = self._evidence(theta, eval_gradient)
        finally:
            self._warm = saved
        return (lml, grad) if eval_gradient else lml

    # ------------------------------------------------------------ predict
    def latent_mean_and_variance(self, X: ArrayLike) -> tuple[Array, Array]:
        """Posterior mean and variance of the latent ``f`` (for ``classes_[1]``) at ``X``.

        Joint multi-class: mean ``(n, C)`` and covariance ``(n, C, C)`` of the ``C`` latents;
        one-vs-rest: means and variances ``(n, C)`` of the ``C`` binary latents.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        mode = getattr(self, "_mode", "binary")
        if mode == "joint":
            return self.result_.predict_latent(
                self.kernel_(X, self.X_train_), self.kernel_.diag(X) + float(self.jitter)
            )
        if mode == "ovr":
            pairs = [e.latent_mean_and_variance(X) for e in self.estimators_]
            return np.column_stack([p[0] for p in pairs]), np.column_stack([p[1] for p in pairs])
        K_star = self.kernel_(X, self.X_train_)
        k_diag = self.kernel_.diag(X) + float(self.jitter)
        return self.result_.predict_latent(K_star, k_diag)

    def decision_function(self, X: ArrayLike) -> Array:
        """Latent posterior mean: positive favours ``classes_[1]`` (multi-class: ``(n, C)``, one column per class)."""
        return self.latent_mean_and_variance(X)[0]

    def predict_proba(self, X: ArrayLike) -> Array:
        r"""Class probabilities, columns in ``classes_`` order.

        :math:`P(y_* = c_1) = \int t(f) N(f | \mu_*, s^2_*)\, df` (the likelihood's predictive).
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        mode = getattr(self, "_mode", "binary")
        if mode == "joint":
            return self.result_.predict_proba(self.kernel_(X, self.X_train_), self.kernel_.diag(X) + float(self.jitter))
        if mode == "ovr":
            p = np.column_stack([e.predict_proba(X)[:, 1] for e in self.estimators_])
            return p / p.sum(axis=1, keepdims=True)
        p1 = self.result_.predict_proba(self.kernel_(X, self.X_train_), self.kernel_.diag(X) + float(self.jitter))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: ArrayLike) -> NDArray:
        """``classes_[1]`` where ``predict_proba[:, 1] >= 0.5``, else ``classes_[0]``.

        Multi-class: the most probable class.
        """
        if getattr(self, "_mode", "binary") != "binary":
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        positive = self.predict_proba(X)[:, 1] >= 0.5
        return self.classes_[positive.astype(int)]
