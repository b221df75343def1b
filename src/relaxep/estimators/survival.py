r"""Gaussian process survival analysis by EP, in scikit-survival's conventions: :class:`GPSurvivalRegressor`.

One latent function of the covariates and a survival likelihood of the (censored) event times: an
accelerated-failure-time model, :math:`\log T = c + f(x) + \sigma\epsilon` with Weibull, log-logistic or log-normal
times (:mod:`relaxep.likelihoods.aft`), or proportional hazards, :math:`h(t | x) = \lambda_0(t) e^{f(x)}` with a
piecewise-constant baseline (:mod:`relaxep.likelihoods.coxph`); the likelihood's shape or baseline learned with the
kernel by the EP evidence (Vanhatalo et al. 2013, GPstuff's survival models; Joensuu et al. 2012, "Risk of
recurrence of gastrointestinal stromal tumour after surgery: an analysis of pooled population-based cohorts",
Lancet Oncol. 13, fitted such a model by EP).  Right, left and interval censoring
(:mod:`relaxep.likelihoods.survival_targets` reads scikit-survival's structured arrays).

An AFT model's constant :math:`c` (the latent's prior mean on the log-time axis) and the likelihood's starting
shape are those of the intercept-only model fitted by maximum likelihood first (an empirical-Bayes mean, as
``normalize_y`` centres a regressor's targets); the latent's default prior scale is that model's :math:`\sigma`.
What survival users read: :meth:`~GPSurvivalRegressor.predict` is a risk score (higher: an earlier event,
:math:`-(c + m_*)` for AFT, :math:`m_*` for PH), :meth:`~GPSurvivalRegressor.score` Harrell's concordance,
:meth:`~GPSurvivalRegressor.predict_survival_function` the posterior predictive :math:`S_*(t) = E_f[S(t | f)]`
with the pointwise band of :math:`S(t | f)` under the latent's posterior.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, clone
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel
from sklearn.utils.validation import check_is_fitted, validate_data

from relaxep._threads import fit_threads
from relaxep._typing import Array
from relaxep._xp import namespace, on_device_of, to_numpy
from relaxep.assessment.survival_metrics import concordance_index
from relaxep.estimators._base import _LatentGPEstimator
from relaxep.estimators._checks import (
    check_jitter,
    check_kernel,
    check_likelihood_for,
    check_rule,
    input_format,
    store_parameters,
)
from relaxep.estimators._latent_fit import fit_latent
from relaxep.estimators._models import _LatentModel
from relaxep.estimators._search import ROBUST
from relaxep.inference import InferenceMethod
from relaxep.inference.schedules import Schedule
from relaxep.likelihoods import CoxPH, Likelihood, LogLogisticAFT, LogNormalAFT, SurvivalLikelihood, WeibullAFT
from relaxep.sites import SiteRule

__all__ = ["GPSurvivalRegressor", "survival_likelihood"]

_NAMES = ("weibull", "loglogistic", "lognormal", "coxph")
_ACCEPTED = (
    "'weibull', 'loglogistic', 'lognormal', 'coxph' or a survival likelihood instance (WeibullAFT(), "
    "LogLogisticAFT(), LogNormalAFT(), CoxPH())"
)


def survival_likelihood(likelihood: Any) -> SurvivalLikelihood:
    """``likelihood`` as a fresh instance: a name of :data:`_NAMES` or a :class:`SurvivalLikelihood` (cloned);
    else a ``TypeError``/``ValueError`` naming ``likelihood``."""
    if isinstance(likelihood, SurvivalLikelihood):
        return clone(likelihood)
    if isinstance(likelihood, Likelihood):  # (another kind's: the error names the estimator that fits it)
        check_likelihood_for(likelihood, "GPSurvivalRegressor", _ACCEPTED)
    if isinstance(likelihood, str):
        classes = {"weibull": WeibullAFT, "loglogistic": LogLogisticAFT, "lognormal": LogNormalAFT, "coxph": CoxPH}
        if likelihood in classes:
            return classes[likelihood]()
        raise ValueError(f"likelihood must be one of {_NAMES} or a survival likelihood instance, got {likelihood!r}")
    raise TypeError(f"likelihood must be {_ACCEPTED}, got {likelihood!r}")


class GPSurvivalRegressor(_LatentGPEstimator):
    r"""Gaussian process survival regression by EP (module docstring), scikit-survival's interface.

    Parameters
    ----------
    kernel : sklearn Kernel, default ``ConstantKernel(1.0) * RBF(1.0)``
        The latent function's prior covariance; learned unless ``optimizer=None``.  Standardise the covariates
        (``make_pipeline(StandardScaler(), ...)``).  Isotropic by default: on GBSG2, veterans and Rossi one
        length-scale per covariate ranked held-out patients worse (the user guide's figures).
    likelihood : {"weibull", "loglogistic", "lognormal", "coxph"} or SurvivalLikelihood, default "weibull"
        The event times' model: an accelerated-failure-time likelihood (:class:`~relaxep.WeibullAFT`,
        :class:`~relaxep.LogLogisticAFT`, :class:`~relaxep.LogNormalAFT`; shape learned) or proportional hazards
        with a piecewise-constant baseline (:class:`~relaxep.CoxPH`; the hazards learned).
    rule : SiteRule, InferenceMethod, "auto" or None
        The approximate inference (``None``: ``"auto"``; every survival likelihood here is log-concave, so EP's
        sites stay positive), as :class:`~relaxep.GPRegressor`'s.
    optimizer, n_restarts_optimizer, optimizer_maxiter, schedule, max_sweeps, tol, warm_start, random_state,
    inducing_points, inducing_init, learn_inducing_points, optimizer_subset, n_jobs, verbose, callback
        As :class:`~relaxep.GPClassifier`'s (``inducing_points``: a sparse FITC fit, for thousands of rows).
    jitter : float, default 1e-6
        Added to the kernel's diagonal.
    prior : "auto", None, HyperPrior or dict, default "auto"
        The hyperparameters' prior (the search climbs the log evidence plus the log prior); as
        :class:`~relaxep.GPRegressor`'s, the latent's scale that of the intercept-only model's log-time noise
        (1 for proportional hazards, the log relative hazard's).

    representation : {"auto", "dense", "markov"}, default "auto"
        ``"markov"``: the Kalman smoother's posterior, :math:`O(n)`, for a kernel of one input with a state-space form
        (:mod:`relaxep.posterior.markov`); ``"auto"``: Markov where that is exact and faster
        (:mod:`relaxep.estimators._markov`).  ``representation_`` says which ran.

    Attributes
    ----------
    representation_ : str
        The representation the fit ran: ``"dense"``, ``"sparse"`` or ``"markov"``.
    kernel_, likelihood_ : the fitted kernel and likelihood (an AFT's ``location`` and shape, a PH's hazards)
    unique_times_ : ndarray
        The distinct observed event times of the training data (the default ``times`` of the predictions).
    X_train_, y_train_ : the training inputs and the targets as rows ``[log_lower, log_upper]``
    result_, log_marginal_likelihood_value_, inducing_points_ : as :class:`~relaxep.GPRegressor`'s

    Examples
    --------
    >>> import numpy as np
    >>> from relaxep import GPSurvivalRegressor
    >>> from relaxep import right_censored
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 2))
    >>> time = np.exp(X[:, 0] + 0.5 * rng.gumbel(size=60))
    >>> y = right_censored(time < 3.0, np.minimum(time, 3.0))
    >>> model = GPSurvivalRegressor(random_state=0).fit(X, y)
    >>> model.predict_survival_function(X[:2], [1.0, 2.0]).shape
    (2, 2)
    """

    search_policy = ROBUST
    learns_likelihood = True

    def __init__(
        self,
        kernel: Kernel | None = None,
        likelihood: str | SurvivalLikelihood = "weibull",
        *,
        rule: SiteRule | InferenceMethod | str | None = None,
        optimizer: Any = "auto",
        n_restarts_optimizer: int = 0,
        optimizer_maxiter: int | None = None,
        schedule: Schedule | str = "parallel",
        max_sweeps: int = 200,
        tol: float = 1e-4,
        jitter: float = 1e-6,
        warm_start: bool = True,
        random_state: Any = None,
        inducing_points: int | ArrayLike | None = None,
        inducing_init: str = "kmeans",
        learn_inducing_points: bool = True,
        optimizer_subset: int | None = None,
        n_jobs: int | None = None,
        verbose: int = 0,
        callback: Any = None,
        prior: Any = "auto",
        representation: str = "auto",
    ) -> None:
        store_parameters(self, locals())

    # ------------------------------------------------------------------ fit
    def fit(self, X: ArrayLike, y: Any) -> GPSurvivalRegressor:
        """Learn the kernel and the likelihood's shape or baseline (if ``optimizer``) and the latent's posterior.

        ``y``: scikit-survival's structured array (a boolean event field and a time field, as
        ``sksurv.util.Surv.from_arrays`` or :func:`relaxep.right_censored` make it), a two-column array
        ``(time, event)``, or interval bounds (:func:`relaxep.interval_censored`)."""
        check_kernel(self.kernel)
        check_rule(self.rule)
        self._check_parameters()
        likelihood = survival_likelihood(self.likelihood)
        rows = likelihood.read_targets(y)
        X = validate_data(self, X, ensure_min_samples=2, **input_format(self.kernel, X))
        if X.shape[0] != rows.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {rows.shape[0]}")
        self.X_train_ = np.array(X, copy=True) if isinstance(X, np.ndarray) else X
        self.y_train_ = rows
        events = rows[:, 0] == rows[:, 1]
        self.unique_times_ = np.unique(np.exp(rows[events, 0]))
        self.kernel_ = ConstantKernel(1.0) * RBF(1.0) if self.kernel is None else clone(self.kernel)
        likelihood = likelihood.start_from(rows)  # (an AFT's intercept-only fit, a PH model's baseline)
        self._latent_scale = likelihood.latent_scale
        rule = "auto" if self.rule is None else self.rule
        with fit_threads(rows.shape[0], dense=self.inducing_points is None):
            plan = self._plan(self.X_train_, self.kernel_.n_dims + likelihood.n_dims)
            model, report = fit_latent(
                plan, _LatentModel, self.kernel_, likelihood, rule, self.X_train_, rows, self.jitter
            )
        return self._finish(model, report)

    def _output_scales(self) -> tuple[float, ...]:
        """The latent's scale for the default priors: the intercept-only model's :math:`\\sigma` (AFT), else 1."""
        return (getattr(self, "_latent_scale", 1.0),)

    def _check_parameters(self) -> None:
        super()._check_parameters()
        check_jitter(self.jitter)

    # ------------------------------------------------------------ predict
    def latent_mean_and_variance(self, X: ArrayLike) -> tuple[Array, Array]:
        """Posterior mean and variance of the latent :math:`f` at ``X`` (without an AFT model's ``location``)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, **input_format(self.kernel_, X))
        mean, var = self.model_.predict_latent(X)
        return np.asarray(to_numpy(mean), dtype=float), np.maximum(np.asarray(to_numpy(var), dtype=float), 0.0)

    def predict(self, X: ArrayLike) -> Array:
        r"""A risk score per row, higher for an earlier event (scikit-survival's convention): the likelihood's
        ``risk_sign`` times the latent's posterior mean, with an AFT model's location (:math:`-(c + m_*)`)."""
        mean, _ = self.latent_mean_and_variance(X)
        risk = self.likelihood_.risk(mean)
        return risk if namespace(X).on_host else on_device_of(risk, X)

    def score(self, X: ArrayLike, y: Any) -> float:
        """Harrell's concordance index of :meth:`predict` on ``(X, y)`` (right-censored targets;
        :func:`relaxep.assessment.concordance_index`)."""
        return concordance_index(y, self.predict(X))

    def _times(self, times: ArrayLike | None) -> Array:
        if times is None:
            check_is_fitted(self)
            return self.unique_times_
        t = np.asarray(times, dtype=float).ravel()
        if t.size == 0 or not np.all(np.isfinite(t)) or np.any(t <= 0):
            raise ValueError("times must be a non-empty array of finite, positive times")
        return t

    def predict_survival_function(
        self, X: ArrayLike, times: ArrayLike | None = None, return_band: bool = False, level: float = 0.95
    ) -> Array | tuple[Array, Array, Array]:
        r"""The posterior predictive survival :math:`S_*(t | x) = E_f[S(t | f)]`, shape ``(n, len(times))``.

        ``times`` default :attr:`unique_times_`.  ``return_band``: also the pointwise central ``level`` band of
        :math:`S(t | f)` under the latent's posterior, as ``(S, lower, upper)``
        (:meth:`~relaxep.likelihoods.SurvivalLikelihood.survival_band`)."""
        mean, var = self.latent_mean_and_variance(X)
        log_t = np.log(self._times(times))
        survival = self.likelihood_.survival(log_t, mean, var)
        if not return_band:
            return survival
        lower, upper = self.likelihood_.survival_band(log_t, mean, var, level)
        return survival, lower, upper

    def predict_cumulative_hazard_function(
        self, X: ArrayLike, times: ArrayLike | None = None, return_band: bool = False, level: float = 0.95
    ) -> Array | tuple[Array, Array, Array]:
        r"""The predictive cumulative hazard :math:`H_*(t) = -\log S_*(t)`, shape ``(n, len(times))``, and with
        ``return_band`` the band's ends mapped through :math:`-\log` (``(H, lower, upper)``)."""
        out = self.predict_survival_function(X, times, return_band, level)
        with np.errstate(divide="ignore"):
            if not return_band:
                return -np.log(out)  # type: ignore[arg-type]
            survival, lower, upper = out
            return -np.log(survival), -np.log(upper), -np.log(lower)

    def predict_median(self, X: ArrayLike) -> Array:
        """The predictive median survival time, :math:`S_*(t) = 1/2` (bisection on the log-time axis)."""
        mean, var = self.latent_mean_and_variance(X)
        return np.exp(self.likelihood_.median_log_time(mean, var))

    def __sklearn_tags__(self):
        tags = BaseEstimator.__sklearn_tags__(self)
        tags.target_tags.required = True
        return tags
