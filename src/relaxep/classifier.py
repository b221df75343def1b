r"""``GPClassifier``: a scikit-learn estimator for EP, Power EP and Relaxed EP.

The estimator is thin: it validates input, maps the two classes to ``{-1, +1}``,
builds kernel matrices with scikit-learn's own kernels, learns the kernel's
hyperparameters by maximising the EP evidence (or leaves that to ``GridSearchCV``),
and delegates inference to :func:`relaxep.infer`.  With ``inducing_points`` it fits the
sparse (FITC) posterior of :mod:`relaxep.posterior.sparse` instead, learning the inducing
inputs with the kernel (:mod:`relaxep._gpc_sparse`); with more than two classes the joint
multi-class model or one-vs-rest (:mod:`relaxep._gpc_multiclass`).
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, CompoundKernel, ConstantKernel, Kernel
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from relaxep._gpc_common import input_format, warn_at_bounds
from relaxep._gpc_multiclass import MulticlassFit
from relaxep._gpc_sparse import SparseFit
from relaxep._inducing import split_parameters
from relaxep._typing import Array
from relaxep._validation import check_positive_int, check_positive_number
from relaxep.errors import DivergenceError
from relaxep.inference import InferenceMethod, InferenceResult, evidence_gradient, infer
from relaxep.likelihoods import Likelihood, NoisyProbit
from relaxep.multiclass import evidence_gradient as multiclass_evidence_gradient
from relaxep.posterior.sparse import CHUNK
from relaxep.schedules import Schedule
from relaxep.sites import SiteRule

__all__ = ["GPClassifier"]


class GPClassifier(SparseFit, MulticlassFit, ClassifierMixin, BaseEstimator):
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
        Passed to :func:`relaxep.infer` (the change of the posterior marginals that ends a run).
        EP's evidence is stationary at its fixed point, so its error is of order ``tol**2``
        and its gradient's of order ``tol``: the default ``1e-4`` gives an evidence
        reproducible to about 1e-8 and gradients good to 1e-4 for the optimiser, for two to
        three sweeps more than ``1e-3`` (scikit-learn's own tests ask this of the evidence).
    jitter : float
        Added to the kernel matrix's diagonal (and to test variances): latent noise.
        The noise-free step likelihood needs some.
    warm_start : bool
        Start each evidence evaluation of the optimiser from the last converged sites.
    random_state : int, RandomState or None
        For the optimiser's restarts, ``optimizer_subset``'s draw and the placement of the
        inducing inputs.
    inducing_points : int, array of shape (M, d) or None
        ``None`` (default): the dense posterior (:math:`O(n^3)`, up to a few thousand points).
        An int ``M`` or an ``(M, d)`` array: the sparse FITC posterior with ``M`` inducing
        inputs (:mod:`relaxep.posterior.sparse`; :math:`O(nM^2)` a sweep, :math:`O(nM)` memory),
        placed by ``inducing_init`` or as given.  With an optimizer the kernel and the inducing
        inputs are learned together by maximising the sparse EP evidence (gradient:
        :mod:`relaxep.inference.sparse_evidence`; the kernel must then be ``RBF`` or
        ``ConstantKernel * RBF``); ``optimizer=None`` keeps both as given.  ``M = 200`` with
        k-means placement is the measured choice at :math:`10^5` points
        (``benchmarks/results/sparse.md``).
    learn_inducing_points : bool, default True
        With an optimizer and ``inducing_points``: learn the inducing inputs (else only the kernel).
    inducing_init : {"kmeans", "random"}, default "kmeans"
        Placement of ``M`` initial inducing inputs: k-means centres of a subsample, or a random
        subset of the training inputs.
    optimizer_subset : int or None, default None
        Sparse and joint multi-class fits: learn the hyperparameters (and the inducing inputs) on
        a random subset of this many training points (stratified by class for the multi-class
        model: ``O(C m^3)`` per evidence evaluation instead of ``O(C n^3)``), then fit the
        posterior on all of them (``None``: on all points).
    optimizer_maxiter : int or None, default None
        Iterations of L-BFGS-B (``None``: scipy's default).
    multi_class : {"joint", "one_vs_rest"}, default ``"joint"``
        For more than two classes: ``"joint"`` is one model of ``C`` latent functions with a
        shared kernel, by nested EP for the multinomial probit (Riihimaki, Jylanki & Vehtari
        2013, JMLR 14) or dense EP for the robust max (:mod:`relaxep.multiclass`); its
        ``likelihood`` is a :class:`~relaxep.multiclass.MulticlassLikelihood` (default
        :class:`~relaxep.multiclass.MultinomialProbit`) and ``rule``/``schedule`` do not apply.
        ``"one_vs_rest"``: one binary model per class (this estimator, cloned), probabilities
        renormalised, as scikit-learn's ``GaussianProcessClassifier``.  Two classes always fit
        the binary model.
    n_jobs : int or None, default None
        One-vs-rest with more than two classes: fit the binary models in parallel (joblib's
        convention: ``None`` one job unless in a ``joblib.parallel_config`` context, ``-1`` all
        cores).  The answer does not depend on it.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    kernel_ : Kernel with the learned hyperparameters
    result_ : InferenceResult (binary) or MulticlassResult (joint multi-class) of the final fit
    estimators_ : list of GPClassifier (``multi_class="one_vs_rest"`` with more than two classes)
    log_marginal_likelihood_value_ : float
    X_train_ : ndarray
    inducing_points_ : ndarray of shape (M, d)
        Sparse fits only: the (learned) inducing inputs.
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
        tol: float = 1e-4,
        jitter: float = 1e-6,
        warm_start: bool = True,
        random_state: int | np.random.RandomState | None = None,
        inducing_points: int | ArrayLike | None = None,
        learn_inducing_points: bool = True,
        inducing_init: str = "kmeans",
        optimizer_subset: int | None = None,
        optimizer_maxiter: int | None = None,
        multi_class: str = "joint",
        n_jobs: int | None = None,
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
        self.inducing_points = inducing_points
        self.learn_inducing_points = learn_inducing_points
        self.inducing_init = inducing_init
        self.optimizer_subset = optimizer_subset
        self.optimizer_maxiter = optimizer_maxiter
        self.multi_class = multi_class
        self.n_jobs = n_jobs

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        tags.classifier_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ fit
    def fit(self, X: ArrayLike, y: ArrayLike) -> GPClassifier:
        """Learn hyperparameters (if ``optimizer``) and run inference on ``(X, y)``."""
        if self.kernel is not None and not isinstance(self.kernel, Kernel):
            raise TypeError(
                f"kernel must be a scikit-learn Kernel (sklearn.gaussian_process.kernels), got {self.kernel!r}"
            )
        if isinstance(self.kernel, CompoundKernel):
            raise ValueError("kernel cannot be a CompoundKernel: it holds one kernel per output")
        X, y = validate_data(self, X, y, ensure_min_samples=2, **input_format(self.kernel))
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.size == 1:
            raise ValueError(
                f"GPClassifier needs samples of two classes; the data contain only one class: {classes[0]!r}"
            )
        self._check_parameters()
        if self.multi_class not in ("joint", "one_vs_rest"):
            raise ValueError(f"multi_class must be 'joint' or 'one_vs_rest', got {self.multi_class!r}")
        if classes.size > 2:
            if self.multi_class == "joint" and self.inducing_points is not None:
                raise ValueError(
                    "inducing_points: the joint multi-class model has no sparse posterior yet; "
                    "use multi_class='one_vs_rest' for a sparse fit per class"
                )
            return self._fit_multiclass(X, y, classes)
        self._mode = "binary"
        self.classes_ = classes
        self.X_train_ = np.array(X, copy=True)
        self._y = np.where(y == classes[1], 1.0, -1.0)
        self._likelihood = NoisyProbit(0.01, 1.0) if self.likelihood is None else self.likelihood
        self._rule = "auto" if self.rule is None else self.rule
        self.kernel_ = ConstantKernel(1.0) * RBF(1.0) if self.kernel is None else clone(self.kernel)
        self._warm: InferenceResult | None = None
        self._sparse = self.inducing_points is not None
        if self._sparse:
            self._fit_sparse()
            return self

        if self.optimizer is not None and self.kernel_.n_dims > 0:
            self._optimize()

        self._finish(self._infer(self.kernel_.theta))
        return self

    def _finish(self, result: InferenceResult) -> None:
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

    def _check_parameters(self) -> None:
        """The numeric parameters, checked in ``fit`` (scikit-learn's convention), each named."""
        check_positive_int(self.max_sweeps, "max_sweeps")
        check_positive_number(self.tol, "tol")
        if isinstance(self.n_restarts_optimizer, bool) or not isinstance(self.n_restarts_optimizer, numbers.Integral):
            raise TypeError(f"n_restarts_optimizer must be an integer >= 0, got {self.n_restarts_optimizer!r}")
        if self.n_restarts_optimizer < 0:
            raise ValueError(f"n_restarts_optimizer must be an integer >= 0, got {self.n_restarts_optimizer!r}")
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, numbers.Real):
            raise TypeError(f"jitter must be a real number >= 0, got {self.jitter!r}")
        if not (np.isfinite(self.jitter) and self.jitter >= 0.0):
            raise ValueError(f"jitter must be finite and >= 0, got {self.jitter!r}")

    def _kernel_matrix(self, theta: Array, eval_gradient: bool, X: Array | None = None) -> tuple[Array, Array | None]:
        """The kernel at ``theta`` on ``X`` (default the training inputs) plus the jitter, and its gradient."""
        X = self.X_train_ if X is None else X
        kernel = self.kernel_.clone_with_theta(theta)
        if eval_gradient:
            K, dK = kernel(X, eval_gradient=True)
        else:
            K, dK = kernel(X), None
        K[np.diag_indices_from(K)] += float(self.jitter)
        if not (np.all(np.isfinite(K)) and (dK is None or np.all(np.isfinite(dK)))):
            scale = (
                f" (largest |X| = {np.abs(self.X_train_).max():.3g})"
                if np.issubdtype(self.X_train_.dtype, np.number)
                else ""
            )
            raise ValueError(
                f"the kernel {kernel} (or its gradient) evaluated at X is not finite{scale}: "
                "X's scale overflows it; rescale X (e.g. sklearn.preprocessing.StandardScaler)"
            )
        return K, dK

    def _infer(self, theta: Array, K: Array | None = None) -> InferenceResult:
        if K is None:
            K, _ = self._kernel_matrix(theta, eval_gradient=False)
        return self._warm_run("_warm", lambda init: self._run_infer(K, init))

    def _warm_run(self, slot: str, run: Callable[[Any], Any], usable: Callable[[Any], bool] | None = None) -> Any:
        """``run(init)`` from the last converged result kept in ``slot`` (with ``warm_start``).

        A warm start that diverges is retried from zero sites; a converged result becomes the
        next warm start.
        """
        init = getattr(self, slot) if self.warm_start else None
        if init is not None and usable is not None and not usable(init):
            init = None
        result = run(init)
        if result.status == "diverged" and init is not None:
            result = run(None)
        if result.status == "converged":
            setattr(self, slot, result)
        return result

    def _run_infer(self, K: Array, init: InferenceResult | None) -> InferenceResult:
        # an inference method carries its own schedule (infer refuses one beside it)
        schedule = {} if isinstance(self._rule, InferenceMethod) else {"schedule": self.schedule}
        return infer(
            K, self._y, self._likelihood, self._rule, max_sweeps=self.max_sweeps, tol=self.tol, init=init, **schedule
        )

    def _evidence(self, theta: Array, eval_gradient: bool) -> tuple[float, Array | None]:
        """Evidence (and gradient) at ``theta``; ``-inf`` where inference does not converge.

        Away from a fixed point EP's evidence formula is not an evidence (it can exceed the
        fixed points' values), so an unconverged run is a region the optimiser must leave,
        not a value it may climb.
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

        try:
            rng = check_random_state(self.random_state)
        except ValueError as exc:
            raise ValueError(f"random_state: {exc}") from None
        best_theta = self._best_of_restarts(obj_func, self.kernel_.bounds, rng)
        if best_theta is not None:
            self.kernel_.theta = best_theta
        warn_at_bounds(self.kernel_)

    def _best_of_restarts(
        self,
        obj_func: Callable,
        bounds: Array,
        rng: np.random.RandomState,
        pack: Callable[[Array], Array] | None = None,
        options: dict | None = None,
    ) -> Array | None:
        """The best end point of the optimiser from ``kernel_.theta`` and ``n_restarts_optimizer``
        starts drawn uniformly (in log space) within ``kernel_.bounds``.

        ``pack`` maps a start's hyperparameters to the optimiser's variables (the sparse fit
        appends the inducing inputs); ``None`` if no start gave a finite value.
        """
        theta_bounds = self.kernel_.bounds
        starts = [self.kernel_.theta]
        if self.n_restarts_optimizer > 0:
            if not np.all(np.isfinite(theta_bounds)):
                raise ValueError("multiple optimizer restarts need finite hyperparameter bounds")
            starts += [rng.uniform(theta_bounds[:, 0], theta_bounds[:, 1]) for _ in range(self.n_restarts_optimizer)]
        best, best_value = None, np.inf
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for theta0 in starts:
                x, value = self._run_optimizer(obj_func, theta0 if pack is None else pack(theta0), bounds, options)
                if value < best_value:
                    best, best_value = x, value
        return best

    def _run_optimizer(
        self, obj_func: Callable, theta0: Array, bounds: Array, options: dict | None = None
    ) -> tuple[Array, float]:
        if self.optimizer == "fmin_l_bfgs_b":
            lower = np.where(np.isnan(bounds[:, 0]), -np.inf, bounds[:, 0])
            upper = np.where(np.isnan(bounds[:, 1]), np.inf, bounds[:, 1])
            theta0 = np.clip(theta0, lower, upper)  # as L-BFGS-B itself starts
            start_value = obj_func(theta0, eval_gradient=False)
            options = dict(options or {})
            if self.optimizer_maxiter is not None:
                options["maxiter"] = int(self.optimizer_maxiter)
            if np.any(np.isnan(bounds)):  # the inducing inputs (sparse fits) are unbounded
                bounds = [(None if np.isnan(lo) else lo, None if np.isnan(hi) else hi) for lo, hi in bounds]
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
        self, theta: ArrayLike | None = None, eval_gradient: bool = False, clone_kernel: bool = True
    ) -> float | tuple[float, Array]:
        r"""EP log evidence at ``theta`` (log-hyperparameters), optionally with its gradient.

        ``theta=None`` returns the fitted value.  The gradient is :func:`evidence_gradient`.
        Each evaluation starts from the fitted sites and runs to ``tol``, so the value is a
        function of ``theta`` alone to about ``tol**2``.  With
        ``clone_kernel=False`` the fitted ``kernel_`` is set to ``theta`` (scikit-learn's
        convention; faster for kernels that are expensive to copy).
        """
        check_is_fitted(self)
        if theta is None:
            if eval_gradient:
                raise ValueError("gradient can only be evaluated for theta != None")
            return np.float64(self.log_marginal_likelihood_value_)
        theta = np.asarray(theta, dtype=float)
        if theta.shape != self.kernel_.theta.shape:
            raise ValueError(f"theta must have shape {self.kernel_.theta.shape} (kernel_.theta), got {theta.shape}")
        mode = getattr(self, "_mode", "binary")
        if mode == "ovr":
            raise ValueError("log_marginal_likelihood(theta) is not defined for one-vs-rest (one evidence per class)")
        if not clone_kernel:
            self.kernel_.theta = theta
        if mode == "joint":
            saved_mc = self._warm_mc
            try:
                K, dK = self._kernel_matrix(theta, eval_gradient)
                result = self._mc_infer(K, self._y)
            finally:
                self._warm_mc = saved_mc
            lml = np.float64(result.log_evidence)
            return (lml, multiclass_evidence_gradient(result, dK)) if eval_gradient else lml
        saved = self._warm
        try:
            if getattr(self, "_sparse", False):
                split = split_parameters(self.kernel_, self.inducing_points_.shape, False)
                lml, grad = self._sparse_evidence(theta, self.X_train_, split, eval_gradient, False)
            else:
                lml, grad = self._evidence(theta, eval_gradient)
        finally:
            self._warm = saved
        lml = np.float64(lml)  # a NumPy scalar, as scikit-learn's (compares in float64 with float32 operands)
        return (lml, grad) if eval_gradient else lml

    # ------------------------------------------------------------ predict
    def latent_mean_and_variance(self, X: ArrayLike) -> tuple[Array, Array]:
        """Posterior mean and variance of the latent ``f`` (for ``classes_[1]``) at ``X``.

        Joint multi-class: mean ``(n, C)`` and covariance ``(n, C, C)`` of the ``C`` latents;
        one-vs-rest: means and variances ``(n, C)`` of the ``C`` binary latents.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, **input_format(self.kernel_))
        mode = getattr(self, "_mode", "binary")
        if mode == "ovr":
            pairs = [e.latent_mean_and_variance(X) for e in self.estimators_]
            return np.column_stack([p[0] for p in pairs]), np.column_stack([p[1] for p in pairs])
        return self._predict_with(self.result_.predict_latent, X)

    def decision_function(self, X: ArrayLike) -> Array:
        """Latent posterior mean: positive favours ``classes_[1]`` (multi-class: ``(n, C)``, one column per class)."""
        return self.latent_mean_and_variance(X)[0]

    def predict_proba(self, X: ArrayLike) -> Array:
        r"""Class probabilities, columns in ``classes_`` order.

        :math:`P(y_* = c_1) = \int t(f) N(f | \mu_*, s^2_*)\, df` (the likelihood's predictive).
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, **input_format(self.kernel_))
        mode = getattr(self, "_mode", "binary")
        if mode == "joint":
            return self._predict_with(self.result_.predict_proba, X)
        if mode == "ovr":
            p = np.column_stack([e.predict_proba(X)[:, 1] for e in self.estimators_])
            return p / p.sum(axis=1, keepdims=True)
        p1 = self._predict_with(self.result_.predict_proba, X)
        return np.column_stack([1.0 - p1, p1])

    def _predict_with(self, predict: Callable[[Array, Array], Any], X: Array) -> Any:
        """``predict(K_*, k_** + jitter)`` of the fitted result, ``K_*`` the covariances of ``X``
        to the training inputs (dense) or, in row chunks of ``CHUNK`` (memory ``O(chunk M)``), to
        the inducing inputs (sparse)."""
        jitter = float(self.jitter)
        if not getattr(self, "_sparse", False):
            return predict(self.kernel_(X, self.X_train_), self.kernel_.diag(X) + jitter)
        parts = [
            predict(self.kernel_(X[s : s + CHUNK], self.inducing_points_), self.kernel_.diag(X[s : s + CHUNK]) + jitter)
            for s in range(0, X.shape[0], CHUNK)
        ]
        if isinstance(parts[0], tuple):
            return tuple(np.concatenate(column) for column in zip(*parts, strict=True))
        return np.concatenate(parts)

    def predict(self, X: ArrayLike) -> NDArray:
        """``classes_[1]`` where ``predict_proba[:, 1] >= 0.5``, else ``classes_[0]``.

        Multi-class: the most probable class.
        """
        if getattr(self, "_mode", "binary") != "binary":
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        positive = self.predict_proba(X)[:, 1] >= 0.5
        return self.classes_[positive.astype(int)]
