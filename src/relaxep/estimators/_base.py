r"""What the estimators share: the checks of the numeric parameters, the search, the fit's epilogue and the
evidence (:class:`_GPEstimatorBase`, every estimator's), and the plan of a one-latent fit
(:class:`_LatentGPEstimator`: :class:`~relaxep.GPClassifier`, :class:`~relaxep.GPRegressor`,
:class:`~relaxep.GPOrdinalClassifier`, :class:`~relaxep.GPPreferenceLearner`).

An estimator validates its parameters and data, makes the plan (:meth:`_LatentGPEstimator._plan`), hands the
plan and the data to a model (:func:`~relaxep.estimators._latent_fit.fit_latent`, or a model of its own), and
ends ``fit`` with :meth:`_GPEstimatorBase._finish`, whose hook :meth:`_GPEstimatorBase._decode` stores what the
model learned in the estimator's own terms.  A new estimator writes its ``__init__`` (scikit-learn asks for each
parameter listed and stored as given), its checks of the data and its model; for a model of two latent
functions (:class:`~relaxep.estimators._two_latent_model._TwoLatentModel`; ``tests/test_two_latent_model.py``
holds one written so), say::

    def fit(self, X, y):
        self._check_parameters()
        X, y = validate_data(self, X, y)
        model = _TwoLatentModel(likelihood, X, y, None, rule, self.max_sweeps, self.tol)
        report = model.fit((clone(self.kernel), clone(self.scale_kernel)), ConstantMean(0.0, (-10.0, 10.0)),
                           self._search(), self._rng())
        return self._finish(model, report)
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, is_classifier
from sklearn.utils.validation import check_is_fitted

from relaxep._threads import n_threads
from relaxep._typing import Array
from relaxep._validation import check_positive_int, check_positive_number
from relaxep._xp import to_numpy
from relaxep.assessment.result import LooPrediction, LooResult, fingerprint
from relaxep.estimators._checks import check_restarts, random_state_of
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._integrate import check_integrate
from relaxep.estimators._latent_fit import LatentFit
from relaxep.estimators._markov import resolve_representation
from relaxep.estimators._model import LooTerms
from relaxep.estimators._plan import SparseFit, dense_or
from relaxep.estimators._search import FitReport, SearchPolicy, _EvidenceSearch
from relaxep.estimators._shape import ShapePlan, check_monotone
from relaxep.hyper.log_prior import DataScales, check_prior, input_scales

__all__ = ["_GPEstimatorBase", "_LatentGPEstimator"]


class _GPEstimatorBase(BaseEstimator):
    """The base of every estimator (module docstring).

    Subclasses store the parameters read here: ``optimizer``, ``n_restarts_optimizer``, ``max_sweeps``, ``tol``,
    ``random_state`` (and ``optimizer_maxiter``, ``n_jobs``, ``verbose``, ``callback`` where they take them).
    """

    #: how the search treats the runs that fail (:class:`~relaxep.estimators._search.SearchPolicy`)
    search_policy: ClassVar[SearchPolicy] = SearchPolicy()
    #: the likelihood's learned hyperparameters are the estimator's ``likelihood_`` and may follow the kernel's
    #: in ``log_marginal_likelihood(theta)``
    learns_likelihood: ClassVar[bool] = False
    #: ``log_marginal_likelihood(None, eval_gradient=True)``'s message
    no_gradient_message: ClassVar[str] = "gradient can only be evaluated for theta != None"
    #: the search's options, where an estimator takes none
    verbose: int = 0
    callback: Any = None
    optimizer_maxiter: int | None = None
    n_jobs: int | None = None
    #: the hyperparameters' prior, where an estimator takes none (type-II maximum likelihood)
    prior: Any = None
    #: integration over the hyperparameters, where an estimator takes none: the MAP's alone
    integrate: str = "map"

    optimizer: Any
    n_restarts_optimizer: int
    max_sweeps: int
    tol: float
    random_state: Any
    kernel_: Any
    model_: Any
    log_marginal_likelihood_value_: float

    # ------------------------------------------------------------------ fit
    def _check_parameters(self) -> None:
        """The numeric parameters every such estimator has, checked in ``fit`` (scikit-learn's convention), each
        named: ``max_sweeps``, ``tol``, ``n_restarts_optimizer`` and ``n_jobs`` (validated here, once)."""
        check_positive_int(self.max_sweeps, "max_sweeps")
        check_positive_number(self.tol, "tol")
        check_restarts(self.n_restarts_optimizer)
        n_threads(self.n_jobs)
        check_prior(self.prior)
        check_integrate(self.integrate)

    def _rng(self) -> np.random.RandomState:
        """``check_random_state(random_state)``, its error naming ``random_state``."""
        return random_state_of(self.random_state)

    def _search(
        self, sparse: SparseFit | None = None, X: Any = None, ml_ii: bool = False, feature_scales: Array | None = None
    ) -> _EvidenceSearch:
        """The search by a sparse plan's method and caps, else by ``optimizer`` resolved for a dense fit (the
        same ``None`` where ``optimizer`` is ``None``), with the class's policy, and ``prior`` scaled to the rows
        ``X`` (``None``: ``X_train_``; ``feature_scales``: their features' standard deviations where the caller has
        them, as a Dask fit's shards do) and :meth:`_output_scales` (``ml_ii``: ``prior="auto"`` is log-uniform, a
        model whose default is scikit-learn's type-II maximum likelihood).  The one place a search is made."""
        method = None if sparse is None else sparse.method
        caps = (self.optimizer_maxiter, None, None) if sparse is None else (sparse.maxiter, sparse.maxfun, sparse.ftol)
        auto = isinstance(self.prior, str) and self.prior == "auto"
        prior = None if auto and ml_ii else self.prior
        scales = None
        if prior is not None:
            if feature_scales is None:
                feature_scales = input_scales(getattr(self, "X_train_", None) if X is None else X)
            scales = DataScales(feature_scales, self._output_scales())
        return _EvidenceSearch(
            dense_or(method, self.optimizer, self.n_restarts_optimizer), self.n_restarts_optimizer,
            caps[0], backtrack=self.search_policy.backtrack, verbose=self.verbose,
            callback=self.callback, maxfun=caps[1], ftol=caps[2], prior=prior, scales=scales,
        )  # fmt: skip

    def _output_scales(self) -> tuple[float, ...]:
        """The scale of each kernel's latent function, for the default priors (:mod:`relaxep.hyper.log_prior`): 1,
        a classifier's latent (a regressor's: its targets')."""
        return (1.0,)

    def _finish(self, model: Any, report: FitReport) -> Any:
        """The fit's epilogue: the fitted model and what it learned stored (``model_``, ``kernel_``,
        ``likelihood_``, ``inducing_points_``, ``result_``, the evidence, then :meth:`_decode`'s), the report's
        warnings issued at the user's ``fit`` line; returns the estimator.  Called as
        ``return self._finish(model, report)``.  With ``integrate`` other than ``"map"`` the fitted (MAP) model
        becomes the mixture over the hyperparameters (:mod:`relaxep.estimators._integrate`; ``hyper_samples_``),
        whose MAP point gives what is stored."""
        if self.integrate != "map":
            model = model.integrate(self.integrate)
        samples = getattr(model, "samples", None)  # (a mixture's design; one-vs-rest: each class's own)
        if samples is not None:
            self.hyper_samples_ = samples
        elif hasattr(self, "hyper_samples_"):  # (a refit with integrate="map")
            del self.hyper_samples_
        self.kernel_ = model.kernel_
        if self.learns_likelihood:  # (a shaped fit's: the values' likelihood inside its DerivativeSites)
            shaped = getattr(model, "n_values", 0)
            self.likelihood_ = model.likelihood.likelihood if shaped else model.likelihood
        if getattr(model, "Z", None) is not None:  # a sparse model's (learned) inducing inputs
            self.inducing_points_ = model.Z
        self.result_ = model.result_
        self.log_marginal_likelihood_value_ = float(model.result_.log_evidence)
        self.model_ = model
        self._decode(model)
        report.warn(stacklevel=3)
        return self

    def _decode(self, model: Any) -> None:
        """What the model learned, in the estimator's terms, after :meth:`_finish` stored the model's own (a
        subclass's hook: the preference learner's utility kernel, the heteroscedastic regressor's noise)."""

    # ------------------------------------------------------------ evidence
    def log_marginal_likelihood(
        self, theta: ArrayLike | None = None, eval_gradient: bool = False, clone_kernel: bool = True
    ) -> float | tuple[float, Array]:
        r"""The (EP) log evidence at ``theta``, optionally with its gradient in the same entries.

        ``theta``: the kernel's log-hyperparameters (``kernel_.theta``) or, for an estimator that learns its
        likelihood's, those followed by the likelihood's (``likelihood_.theta``; else kept as fitted);
        ``None`` returns the fitted value.  Each evaluation starts from the fitted sites and runs to ``tol``,
        so the value is a function of ``theta`` alone to about ``tol**2``.  With ``clone_kernel=False`` the
        fitted ``kernel_`` is set to ``theta`` (scikit-learn's convention; faster for kernels that are
        expensive to copy).
        """
        check_is_fitted(self)
        if theta is None:
            if eval_gradient:
                raise ValueError(self.no_gradient_message)
            return np.float64(self.log_marginal_likelihood_value_)
        theta = np.asarray(theta, dtype=float)
        self._check_theta(theta)
        return self.model_.log_evidence(theta, eval_gradient, clone_kernel)

    def log_prior(self, theta: ArrayLike | None = None) -> float:
        r"""The hyperparameters' log prior density :math:`\log p(\theta)` at ``theta`` (the entries of
        :meth:`log_marginal_likelihood`'s ``theta``; the likelihood's as fitted where left out; ``None``: the fitted
        ``theta``), as a density of the log-hyperparameters (:mod:`relaxep.hyper.log_prior`): with the evidence, the
        log posterior the search climbed, up to a constant (0 under ``prior=None``)."""
        check_is_fitted(self)
        model = self.model_  # (an integrated fit's: its MAP point's search and likelihood)
        search = getattr(model, "search", None)
        if search is None:
            raise ValueError(f"log_prior: a fit by {type(model).__name__} keeps no prior (fitted without a search)")
        hyper = HyperVector(self.kernel_, getattr(model, "likelihood", None) if self.learns_likelihood else None)
        theta = hyper.theta if theta is None else np.asarray(theta, dtype=float)
        self._check_theta(theta)
        full = np.concatenate([theta, hyper.theta[theta.size :]])
        return float(search.log_prior(hyper)(full)[0])

    # ------------------------------------------------------------ leave-one-out
    def loo(self) -> LooResult:
        r"""Leave-one-out cross-validation from EP's cavities, at no refit: :math:`\log p(y_i | y_{-i})` per row
        (``pointwise``, in the units of ``y`` as passed), ``elpd_loo``, ``se``, ``p_loo``, ``outliers()``,
        ``to_arviz()`` (:class:`~relaxep.assessment.LooResult`; the maths: :mod:`relaxep.inference.loo`; exact
        Gaussian regression: Rasmussen & Williams 2006, eq. 5.12).  Compare models with :func:`relaxep.compare`."""
        return self._loo_result(self._loo_terms())

    def loo_predict(self) -> LooPrediction:
        """The leave-one-out posterior of each training row's latent (mean, variance; a regressor's in the units of
        ``y``) and, for classifiers, its leave-one-out class probabilities
        (:class:`~relaxep.assessment.LooPrediction`), at no refit."""
        terms = self._loo_terms()
        mean, var = terms.latent
        if is_classifier(self):
            return LooPrediction(mean=mean, var=var, proba=terms.proba, classes=self.classes_)  # type: ignore[attr-defined]
        scaling = self._target_scaling()
        if scaling is None:
            return LooPrediction(mean=mean, var=var)
        centre, std = scaling
        if np.ndim(mean) == 1:
            std, centre = std.reshape(-1)[0], centre.reshape(-1)[0]
        else:  # several outputs: one column each
            var = var[:, None]
        return LooPrediction(mean=mean * std + centre, var=var * std**2)

    def _loo_terms(self) -> LooTerms:
        """The fitted model's leave-one-out terms (:meth:`FittedModel.loo_terms
        <relaxep.estimators._model.FittedModel.loo_terms>`)."""
        check_is_fitted(self, "model_")  # (a regressor predicts from its prior unfitted: model_ is the test)
        return self.model_.loo_terms()

    def _loo_result(self, terms: LooTerms, rows: str | None = None) -> LooResult:
        r"""The one place a :class:`~relaxep.assessment.LooResult` is made: the model's ``terms`` in the units of
        ``y`` as passed (densities less :math:`\sum_j \log s_j` under ``normalize_y``'s scales :math:`s_j`;
        probabilities of labels or counts as they are), with the rows' fingerprint ``rows`` (default
        :meth:`_loo_fingerprint`'s)."""
        scaling = self._target_scaling()
        log_scale = float(np.sum(np.log(scaling[1]))) if terms.is_density and scaling is not None else 0.0
        return LooResult(
            pointwise=terms.loo - log_scale, in_sample=terms.in_sample - log_scale, n_improper=terms.n_improper,
            fingerprint=self._loo_fingerprint(terms) if rows is None else rows, name=self._loo_name(),
            loo_mean=terms.mean, loo_var=terms.var, likelihood=terms.tail, y=terms.y, is_density=terms.is_density,
        )  # fmt: skip

    def _target_scaling(self) -> tuple[Array, Array] | None:
        """``normalize_y``'s ``(mean, std)`` of the targets, one per output, or ``None`` where the estimator keeps
        ``y`` as passed (a regressor stores them as ``_y_train_mean`` and ``_y_train_std`` in ``fit``)."""
        std = getattr(self, "_y_train_std", None)
        if std is None:
            return None
        return np.atleast_1d(np.asarray(self._y_train_mean, dtype=float)), np.atleast_1d(np.asarray(std, dtype=float))

    def _loo_fingerprint(self, terms: LooTerms) -> str:
        """The fingerprint of the rows as the user passed them (:func:`~relaxep.assessment.result.fingerprint`):
        ``X_train_`` and the targets, a classifier's as class indices, a regressor's unnormalised."""
        X = getattr(self, "X_train_", None)
        X = to_numpy(X) if hasattr(X, "__dlpack__") else None  # (another library's rows hash as numpy's)
        if is_classifier(self):
            y = np.asarray(to_numpy(terms.y), dtype=float)
            return fingerprint(X, (y > 0).astype(float) if len(self.classes_) == 2 else y)  # type: ignore[attr-defined]
        y = np.asarray(to_numpy(self.y_train_), dtype=float)  # type: ignore[attr-defined]
        scaling = self._target_scaling()
        return fingerprint(X, y if scaling is None else y * scaling[1] + scaling[0])

    def _loo_name(self) -> str:
        """The result's name: the estimator, its likelihood and kernel."""
        likelihood = getattr(self.model_, "likelihood", None)
        what = "exact Gaussian" if likelihood is None else repr(likelihood)
        return f"{type(self).__name__}({what}, {self.kernel_})"

    def _check_theta(self, theta: Array) -> None:
        """``theta``'s shape: ``kernel_.theta``'s, or where the likelihood is learned, followed by its."""
        k = self.kernel_.theta.size
        if not self.learns_likelihood:
            if theta.shape != self.kernel_.theta.shape:
                raise ValueError(f"theta must have shape {self.kernel_.theta.shape} (kernel_.theta), got {theta.shape}")
            return
        likelihood = self.likelihood_
        full = k + (0 if likelihood is None else likelihood.n_dims)
        if theta.ndim != 1 or theta.size not in (k, full):
            raise ValueError(
                f"theta must have {k} entries (kernel_.theta) or {full} (kernel_.theta, likelihood_.theta), "
                f"got shape {theta.shape}"
            )


class _LatentGPEstimator(_GPEstimatorBase):
    """The base of the one-latent estimators (module docstring): the plan of a fit, dense or sparse.

    Subclasses store, beside :class:`_GPEstimatorBase`'s, the parameters read here: ``schedule``, ``warm_start``,
    ``inducing_points``, ``inducing_init``, ``learn_inducing_points``, ``optimizer_subset``, ``representation``.
    """

    #: the prior's representation, where an estimator takes no such parameter: dense (or sparse by inducing points)
    representation: str = "dense"
    #: ``{dim: +1 or -1}``: the latent rises (falls) in those inputs, where an estimator takes ``monotone``
    monotone: Any = None
    #: observed derivatives for the next fit (:class:`~relaxep.estimators._shape.Derivatives`, checked, scaled)
    _derivatives: Any = None

    schedule: Any
    warm_start: bool
    inducing_points: Any
    inducing_init: str
    learn_inducing_points: bool
    optimizer_subset: int | None

    def _plan(self, X: Any, n_learned: int, dense: bool = False, ml_ii: bool = False, exact: bool = False) -> LatentFit:
        """The plan of a fit on the rows ``X`` with ``n_learned`` hyperparameters: dense, or sparse where
        ``inducing_points`` is given (:meth:`SparseFit.plan <relaxep.estimators._plan.SparseFit.plan>`) and not
        ``dense`` (a sparse model that learns its kernel by a dense search first; ``exact``: scikit-learn's closed
        form), or Markov as ``representation``
        says (:func:`~relaxep.estimators._markov.resolve_representation`; stored as ``representation_``); ``ml_ii``:
        :meth:`_search`'s."""
        sparse = None
        monotone = check_monotone(self.monotone, X.shape[1] if getattr(X, "ndim", 2) == 2 else 1)
        shape = ShapePlan(monotone, self._derivatives) if monotone or self._derivatives is not None else None
        if shape is not None and (self.inducing_points is not None or self.representation == "markov"):
            raise ValueError("monotone and observed derivatives: the dense representation only (no inducing_points)")
        if shape is not None and self.integrate != "map":
            raise ValueError(f"integrate={self.integrate!r}: monotone and observed derivatives fit at the MAP only")
        if dense or shape is not None:
            chosen = "dense"
        else:
            chosen = resolve_representation(
                self.representation,
                getattr(self, "kernel_", self.kernel),
                X,
                sparse=self.inducing_points is not None,
                exact=exact,
            )
        self.representation_ = chosen
        if self.inducing_points is not None and not dense:
            sparse = SparseFit.plan(
                X, inducing_points=self.inducing_points, inducing_init=self.inducing_init,
                learn_inducing_points=self.learn_inducing_points, optimizer=self.optimizer,
                optimizer_subset=self.optimizer_subset, optimizer_maxiter=self.optimizer_maxiter,
                n_restarts=self.n_restarts_optimizer, random_state=self.random_state, n_learned=n_learned,
                n_jobs=self.n_jobs,
            )  # fmt: skip
        search = self._search(sparse, X, ml_ii)
        learn = sparse is None and self.optimizer is not None and n_learned > 0
        return LatentFit(
            self.schedule, self.max_sweeps, self.tol, self.warm_start, search, self.search_policy,
            self._rng() if learn else None, sparse, chosen == "markov", shape,
        )  # fmt: skip
