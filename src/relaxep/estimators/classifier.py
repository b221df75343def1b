r"""``GPClassifier``: a scikit-learn estimator for EP, Power EP and Relaxed EP.

The estimator is thin: it validates input, maps the two classes to ``{-1, +1}``, picks one fitted model
(:mod:`relaxep.estimators._models`) and delegates to it, as scikit-learn's ``GaussianProcessClassifier`` delegates
to its ``base_estimator_``: EP on the dense prior, the Markov one (:mod:`relaxep.posterior.markov`) or with
``inducing_points`` the sparse (FITC) one, and with more than two classes the joint multi-class model or
one-vs-rest.  The hyperparameters are learned by the EP evidence (:mod:`relaxep.estimators._search`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import ClassifierMixin, clone
from sklearn.gaussian_process.kernels import RBF, CompoundKernel, ConstantKernel, Kernel
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from relaxep._threads import fit_threads, n_threads
from relaxep._typing import Array
from relaxep._xp import namespace, on_device_of, to_numpy
from relaxep.estimators._active import _ActiveLearningMixin
from relaxep.estimators._base import _LatentGPEstimator
from relaxep.estimators._checks import check_jitter, check_model, input_format, store_parameters
from relaxep.estimators._inducing import check_inducing_points
from relaxep.estimators._latent_fit import fit_latent
from relaxep.estimators._models import _BinaryModel, label_of
from relaxep.estimators._multiclass_checks import check_array_api, check_class_kernels, check_joint_options
from relaxep.estimators._multiclass_models import _JointModel, search_rows
from relaxep.estimators._one_vs_rest import _OneVsRest
from relaxep.estimators._search import ROBUST, FitReport, SearchStep
from relaxep.estimators._sparse_multiclass_model import _SparseJointModel
from relaxep.inference import InferenceMethod
from relaxep.inference.schedules import Schedule
from relaxep.likelihoods import BinaryLikelihood, Likelihood, NoisyProbit
from relaxep.likelihoods.multiclass import MulticlassLikelihood, MultinomialProbit
from relaxep.sites import SiteRule

__all__ = ["GPClassifier"]


_BINARY = "NoisyProbit, Probit, Logistic, NoisyStep or another relaxep BinaryLikelihood"
_LIKELIHOODS = (
    f"None or a relaxep likelihood instance: binary ({_BINARY}) or, with more than two classes, "
    "MultinomialProbit() or RobustMax()"
)


class GPClassifier(ClassifierMixin, _ActiveLearningMixin, _LatentGPEstimator):
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
        noise-free step, the probit and larger floors in :doc:`the benchmark tables </benchmarks>`.
        The paper's ``NoisyStep(eps)`` stays available (it needs ``rule="auto"``'s convergent
        stages on dense data, where EP on it oscillates).
    rule : SiteRule, InferenceMethod or "auto", default ``"auto"``
        ``"auto"`` (the default): EP, and where EP does not converge
        :class:`~relaxep.inference.ConvergentEP`, which reaches the same fixed point by descent on
        its free energy (:class:`~relaxep.inference.Auto`); where EP converges it is EP, at the
        same cost.  Or a fixed rule: ``EP()``, ``PowerEP(u)``, ``RelaxedEP(c)``,
        ``FractionalEP(fraction)`` (``rule__c`` etc. for grid search), or an inference method
        such as ``ConvergentEP()`` or ``DoubleLoopEP()``.
    optimizer : "auto", "fmin_l_bfgs_b", "stochastic", callable or None, default "auto"
        Maximise the EP log evidence over ``kernel.theta`` within its bounds.
        ``"fmin_l_bfgs_b"``: L-BFGS-B on the evidence and its gradient, EP run to convergence
        at every evaluation.  ``"stochastic"`` (sparse fits only): minibatch EP site updates and
        Adam steps on the evidence's minibatch gradient, interleaved (stochastic EP with tied sites,
        after Hernandez-Lobato & Hernandez-Lobato 2016; ``optimizer_maxiter`` steps of 1000 points,
        1000 by default), then EP on all points.  ``"auto"``: ``"stochastic"`` for sparse fits on
        5000 points or more without ``optimizer_subset`` or restarts, else ``"fmin_l_bfgs_b"`` (on a
        sparse model at most 50 iterations unless ``optimizer_maxiter`` says otherwise).
        A callable is called as ``optimizer(obj_func, initial_theta, bounds)`` and returns
        ``(theta_opt, func_min)`` (scikit-learn's convention).
    n_restarts_optimizer : int
        Extra optimiser starts, log-uniform within the bounds.
    schedule : Schedule or {"parallel", "blocked", "sequential"}, default ``"parallel"``
        How a site rule (or ``"auto"``'s EP stage) sweeps (:mod:`relaxep.inference.schedules`).
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
        :mod:`relaxep.posterior.sparse_gradient`; the kernel must then be ``RBF`` or
        ``ConstantKernel * RBF``); ``optimizer=None`` keeps both as given.  ``M = 200`` with
        k-means placement is the measured choice at :math:`10^5` points
        (:doc:`the benchmark tables </benchmarks>`).  With more than two classes and
        ``multi_class="joint"``: nested EP under the low-rank (DTC) prior :math:`f_c = \Phi v_c` on the
        ``M`` inducing inputs (:mod:`relaxep.estimators._sparse_multiclass_model`; :math:`O(nC^2M^2)` a
        sweep), the kernel learned by the dense joint model on ``optimizer_subset`` rows (default 500),
        the inducing inputs placed by ``inducing_init`` and not learned; ``MultinomialProbit`` only.
    learn_inducing_points : bool, default True
        With an optimizer and ``inducing_points``: learn the inducing inputs (else only the kernel).
        Not used by the sparse joint multi-class model (its inducing inputs stay where placed).
    inducing_init : {"kmeans", "random"}, default "kmeans"
        Placement of ``M`` initial inducing inputs: k-means centres of a subsample, or a random
        subset of the training inputs.
    optimizer_subset : int or None, default None
        Sparse and multi-class fits: learn the hyperparameters (and the inducing inputs) on a random
        subset of this many training points (stratified by class for more than two classes:
        ``O(C m^3)`` per evidence evaluation instead of ``O(C n^3)``), then fit the posterior on all of
        them.  ``None``: all points, except with more than two classes, where it is 500 (the
        one-vs-rest models' kernels, or the joint model's; on digits one-vs-rest errs on 1.4% either
        way, fitted in 46 s against 744 s on all 1297 rows, ``docs/decisions.md``).
    optimizer_maxiter : int or None, default None
        Iterations of L-BFGS-B (``None``: scipy's default), or steps of the stochastic search.
    multi_class : {"auto", "one_vs_rest", "joint"}, default ``"auto"``
        For more than two classes (two classes always fit the binary model):

        * ``"one_vs_rest"``: one binary model per class (this estimator, cloned; each learns its own
          kernel), the class probabilities the multinomial probit of the ``C`` binary latents taken as
          independent Gaussians, :math:`y = \arg\max_c (f_c + \tau e_c)`, with the link's noise
          :math:`\tau` chosen by EP's leave-one-out predictive (the binary models' cavities, no refit).
        * ``"joint"``: one model of ``C`` latent functions, by nested EP for the multinomial probit
          (Riihimaki, Jylanki & Vehtari 2013, JMLR 14) or dense EP for the robust max
          (:mod:`relaxep.multiclass`); its ``likelihood`` is a
          :class:`~relaxep.multiclass.MulticlassLikelihood` (default
          :class:`~relaxep.multiclass.MultinomialProbit`), ``rule``/``schedule`` do not apply, and
          its ``kernel`` may be a ``CompoundKernel`` of one kernel per class.
        * ``"auto"``: ``"joint"`` where ``likelihood`` is a multi-class likelihood or ``kernel`` a
          ``CompoundKernel``, else ``"one_vs_rest"``: on digits it is the more accurate and the better
          calibrated (error 1.4% and NLL 0.057 against the joint model's 2.0% and 0.094,
          ``docs/multiclass/report.md``).

        .. versionchanged:: 0.6
           The default was ``"joint"``; one-vs-rest probabilities were renormalised as scikit-learn's.
    n_jobs : int or None, default None
        Threads for the row blocks of a sparse fit (building the FITC rows, every :math:`O(nM^2)`
        refresh, the evidence gradient, predictions, the stochastic search's final sites), each with one
        BLAS thread (:mod:`relaxep._threads`).  scikit-learn's convention (``-1`` every core, ``-k``
        all but ``k - 1``), except that ``None`` uses the machine: ``OMP_NUM_THREADS`` where it is
        set, else every core this process may run on (threads share the data: no copies).  One-vs-rest
        with more than two classes: an integer other than 1 also fits the binary models in
        ``min(n_jobs, C)`` processes (joblib), splitting the threads between them; ``None`` fits them
        one after another.  The answer does not depend on it: the row blocks are fixed by the data and
        their sums added in order.
    verbose : int, default 0
        ``>= 1``: a line per evidence evaluation of the hyperparameter search on standard output
        (the log evidence and the best so far).
    callback : callable or None
        Called after every evidence evaluation of the search with a
        :class:`~relaxep.estimators.SearchStep` (evaluation number, start, the optimiser's vector,
        its log evidence, the best so far): to log, plot or record a long fit's progress.

    prior : "auto", None, HyperPrior or dict, default "auto"
        The hyperparameters' prior: the search climbs the log evidence plus the log prior (the MAP).  ``"auto"``:
        data-scaled half-Student-t priors that keep amplitudes and length-scales from running away; ``None``: the
        evidence alone (type-II ML); a :mod:`relaxep.hyper` prior for all, or a dict by name (the user guide).
    integrate : {"map", "ccd", "grid"}, default "map"
        Predict at the MAP hyperparameters, or integrate over them: a central composite design (Rue, Martino &
        Chopin 2009) or a grid around the MAP, scaled by the log posterior's Hessian, one EP fit per point;
        predictions and ``loo()`` are the weighted mixture, ``hyper_samples_`` the points (the user guide).

    representation : {"auto", "dense", "markov"}, default "auto"
        ``"markov"``: the Kalman smoother's posterior, :math:`O(n)`, for a kernel of one input with a state-space form
        (:mod:`relaxep.posterior.markov`); ``"auto"``: Markov where that is exact and faster
        (:mod:`relaxep.estimators._markov`).  ``representation_`` says which ran.
    monotone : dict {dim: +1 or -1} or None
        The latent rises (+1) or falls (-1) in those inputs: virtual derivative observations by EP
        (:mod:`relaxep.estimators._shape`); binary and one-vs-rest fits, dense only.

    Attributes
    ----------
    representation_ : str
        The representation the fit ran: ``"dense"``, ``"sparse"`` or ``"markov"``.
    classes_ : ndarray of shape (n_classes,)
    kernel_ : Kernel with the learned hyperparameters
        One-vs-rest: a ``CompoundKernel`` of the classes' kernels (scikit-learn's convention); the joint model
        with one kernel per class: its ``CompoundKernel``.
    result_ : InferenceResult (binary), MulticlassResult (joint multi-class) or OneVsRestResult of the final fit
        One-vs-rest's: its binary fits' results in class order (``results``; each of ``estimators_`` holds its
        own), its ``status`` the first that did not converge, ``log_evidence`` their mean.
    estimators_ : list of GPClassifier (one-vs-rest with more than two classes)
    log_marginal_likelihood_value_ : float
        One-vs-rest: the binary models' mean (scikit-learn's convention).
    X_train_ : ndarray
    model_ : the fitted model (private): binary (dense or sparse), joint multi-class or one-vs-rest
    inducing_points_ : ndarray of shape (M, d)
        Sparse fits only: the (learned) inducing inputs.
    hyper_samples_ : HyperSamples
        With ``integrate`` other than ``"map"``: the design's ``points`` (log-hyperparameters, the MAP first),
        ``weights``, ``names`` and ``log_posterior`` (absent with ``integrate="map"``).
    """

    #: the regressor's policy: a failed run is backtracked from (L-BFGS-B's first step can reach the bounds' corner,
    #: where EP fails: before, the search ended at its start, digits' "0 against the rest" at 400 rows), the
    #: search's runs are EP's alone and give up after 10 sweeps without progress (backtracking alone, each failed
    #: run through the cascade: 9.0 s against 2.6 s on that fit)
    search_policy = ROBUST

    def __init__(
        self,
        kernel: Kernel | None = None,
        likelihood: Likelihood | None = None,
        rule: SiteRule | InferenceMethod | str | None = None,
        optimizer: str | Callable | None = "auto",
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
        multi_class: str = "auto",
        n_jobs: int | None = None,
        verbose: int = 0,
        callback: Callable[[SearchStep], Any] | None = None,
        prior: Any = "auto",
        integrate: str = "map",
        representation: str = "auto",
        monotone: dict[int, int] | None = None,
    ) -> None:
        store_parameters(self, locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        tags.classifier_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ fit
    def fit(self, X: ArrayLike, y: ArrayLike) -> GPClassifier:
        """Learn hyperparameters (if ``optimizer``) and run inference on ``(X, y)``."""
        # (ordinal, count: refused; a CompoundKernel: checked against the classes below)
        check_model(self.kernel, self.likelihood, self.rule, "GPClassifier", _LIKELIHOODS, per_output=True)
        space = namespace(X)
        xp, numpy = space.xp, space.on_host
        X, y = validate_data(self, X, y, ensure_min_samples=2, **input_format(self.kernel, X))
        y = to_numpy(y)  # labels live on the host
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.size == 1:
            raise ValueError(
                f"GPClassifier needs samples of two classes; the data contain only one class: {classes[0]!r}"
            )
        self._check_parameters()
        if self.multi_class not in ("auto", "joint", "one_vs_rest"):
            raise ValueError(f"multi_class must be 'auto', 'joint' or 'one_vs_rest', got {self.multi_class!r}")
        multi_class = self._multi_class()
        if classes.size > 2 and multi_class == "joint" and self.integrate != "map":
            raise ValueError(
                f"integrate={self.integrate!r}: the joint multi-class model is fitted at its MAP hyperparameters "
                "only; use integrate='map', or multi_class='one_vs_rest' (each binary model integrated)"
            )
        if isinstance(self.kernel, CompoundKernel):
            check_class_kernels(self.kernel, classes.size, self._multi_class())
        if not numpy:
            check_array_api(self.kernel, self.n_features_in_, classes.size, self._multi_class())
        self.classes_ = classes
        self.X_train_ = np.array(X, copy=True) if numpy else xp.asarray(X, copy=True)
        if classes.size > 2 and multi_class == "one_vs_rest":
            params = self.get_params(deep=False)
            # (one process on a device: the binary fits share its arrays and its card)
            processes = 1 if self.n_jobs is None or not numpy else min(n_threads(self.n_jobs), classes.size)
            params["n_jobs"] = self.n_jobs if processes == 1 else max(1, n_threads(self.n_jobs) // processes)
            model = _OneVsRest(lambda **changes: type(self)(**{**params, **changes}), processes)
            y_index = np.searchsorted(classes, y)
            learn = self.optimizer is not None and self.inducing_points is None and numpy
            rows = search_rows(y_index, self.optimizer_subset, self.random_state) if learn else None
            report = model.fit(X, y_index, classes.size, rows)  # (each binary fit warns for itself)
            self.estimators_ = model.estimators_
            return self._finish(model, report)
        if hasattr(self, "estimators_"):  # (a one-vs-rest fit's, refitted otherwise)
            del self.estimators_
        self.kernel_ = ConstantKernel(1.0) * RBF(1.0) if self.kernel is None else clone(self.kernel)
        with fit_threads(X.shape[0], dense=self.inducing_points is None):
            model, report = self._fit_joint(y) if classes.size > 2 else self._fit_binary(y)
        return self._finish(model, report)

    def _multi_class(self) -> str:
        """``multi_class`` with ``"auto"`` resolved (the class docstring)."""
        if self.multi_class != "auto":
            return self.multi_class
        joint = isinstance(self.likelihood, MulticlassLikelihood) or isinstance(self.kernel, CompoundKernel)
        return "joint" if joint else "one_vs_rest"

    def _at(self, X: ArrayLike, method: str) -> tuple[Any, Any]:
        """``X`` validated, and the fitted model's ``method`` at it (numpy, on the host)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, **input_format(self.kernel_, X))
        return X, getattr(self.model_, method)(X)

    def _fit_binary(self, y: NDArray) -> tuple[_BinaryModel, FitReport]:
        X = self.X_train_
        y_binary = np.where(y == self.classes_[1], 1.0, -1.0)
        likelihood = NoisyProbit(0.01, 1.0) if self.likelihood is None else self.likelihood
        if not isinstance(likelihood, BinaryLikelihood):  # (a multi-class one, the other kinds refused at fit)
            raise TypeError(
                f"likelihood={likelihood!r} is for more than two classes, and the data have two: give a binary "
                f"likelihood ({_BINARY}) or None"
            )
        rule = "auto" if self.rule is None else self.rule
        plan = self._plan(X, self.kernel_.n_dims)  # (the kernel's hyperparameters decide whether to learn)
        return fit_latent(plan, _BinaryModel, self.kernel_, likelihood, rule, X, y_binary, self.jitter)

    def _fit_joint(self, y: NDArray) -> tuple[_JointModel | _SparseJointModel, FitReport]:
        likelihood = MultinomialProbit() if self.likelihood is None else self.likelihood
        check_joint_options(self, likelihood)
        n_classes = self.classes_.size
        model: _JointModel | _SparseJointModel
        if self.inducing_points is None:
            model = _JointModel(
                self.kernel_, likelihood, n_classes, self._search(), noise=self.jitter,
                max_sweeps=self.max_sweeps, tol=self.tol, warm_start=self.warm_start,
            )  # fmt: skip
        else:
            model = _SparseJointModel(
                self.kernel_, likelihood, n_classes, self._search(), noise=self.jitter,
                inducing_points=check_inducing_points(self.inducing_points, self.n_features_in_),
                inducing_init=self.inducing_init, max_sweeps=self.max_sweeps, tol=self.tol,
                warm_start=self.warm_start, n_jobs=self.n_jobs,
            )  # fmt: skip
        learn = self.optimizer is not None and self.kernel_.n_dims > 0
        y_index = np.searchsorted(self.classes_, y)
        return model, model.fit(self.X_train_, y_index, self.random_state, self.optimizer_subset, learn)

    def _check_parameters(self) -> None:
        super()._check_parameters()
        check_jitter(self.jitter)

    def _check_theta(self, theta: Array) -> None:
        """One-vs-rest: ``kernel_.theta`` (the classes' kernels in turn) or one class kernel's, every class at it
        (scikit-learn's convention); otherwise the base's."""
        if not hasattr(self, "estimators_"):
            return super()._check_theta(theta)
        sizes = {e.kernel_.theta.size for e in self.estimators_}
        if theta.ndim != 1 or not (theta.size == self.kernel_.theta.size or (len(sizes) == 1 and theta.size in sizes)):
            raise ValueError(
                f"theta must have {self.kernel_.theta.size} entries (kernel_.theta, the classes' kernels in turn) or "
                f"{min(sizes)} (one kernel's, every class at it), got shape {theta.shape}"
            )

    # ------------------------------------------------------------ predict
    def latent_mean_and_variance(self, X: ArrayLike) -> tuple[Array, Array]:
        """Posterior mean and variance of the latent ``f`` (for ``classes_[1]``) at ``X``.

        Joint multi-class: mean ``(n, C)`` and covariance ``(n, C, C)`` of the ``C`` latents;
        one-vs-rest: means and variances ``(n, C)`` of the ``C`` binary latents.
        """
        X, (mean, var) = self._at(X, "predict_latent")
        return on_device_of(mean, X), on_device_of(var, X)

    def decision_function(self, X: ArrayLike) -> Array:
        r"""Scores that rank test points as :meth:`predict_proba` does.

        Binary: the log-odds of the predictive, :math:`\log P(y_* = c_1) - \log P(y_* = c_0)`,
        shape ``(n,)``, positive where :meth:`predict` gives ``classes_[1]`` (probit:
        :math:`\log\Phi(z) - \log\Phi(-z)`, :math:`z = \mu_*/\sqrt{1 + s^2_*}`; with a label-noise
        floor :math:`\epsilon` it lies within :math:`\pm\log((1-\epsilon)/\epsilon)`).  Multi-class:
        the log predictive probabilities, shape ``(n, C)``, whose argmax is :meth:`predict`.

        .. versionchanged:: 0.3
           It was the latent posterior mean, which need not rank as the probabilities do (they
           also depend on the latent variance); that is :meth:`latent_mean_and_variance`'s first output.
        """
        X, d = self._at(X, "decision_function")
        return on_device_of(d, X)

    def predict_log_proba(self, X: ArrayLike) -> Array:
        """Log class probabilities, columns in ``classes_`` order, computed in log space."""
        X, log_p = self._at(X, "predict_log_proba")
        return on_device_of(log_p, X)

    def predict_proba(self, X: ArrayLike) -> Array:
        r"""Class probabilities, columns in ``classes_`` order.

        :math:`P(y_* = c_1) = \int t(f) N(f | \mu_*, s^2_*)\, df` (the likelihood's predictive),
        binary columns ``[expit(-d), expit(d)]`` of the log-odds ``d`` (:meth:`decision_function`).
        """
        X, p = self._at(X, "predict_proba")
        return on_device_of(p, X)

    def predict(self, X: ArrayLike) -> NDArray:
        """The most probable class: binary, ``classes_[1]`` where :meth:`decision_function` is
        positive (``predict_proba[:, 1] > 0.5``), else ``classes_[0]``; multi-class, the argmax of
        :meth:`decision_function` (and of :meth:`predict_proba`).
        """
        X, d = self._at(X, "decision_function")
        labels = self.classes_[np.argmax(d, axis=1)] if d.ndim == 2 else label_of(d, self.classes_)
        return labels if labels.dtype.kind not in "biuf" else on_device_of(labels, X, keep_dtype=True)
