r"""``GPRegressor``: scikit-learn's ``GaussianProcessRegressor``, with robust likelihoods by EP.

``GPRegressor()`` as typed (no kernel, no likelihood) is GP regression with its noise learned: the targets
standardised, :math:`(y - \bar y)/s_y = f(x) + \varepsilon`, :math:`f \sim GP(0, c\,k_{RBF}(x, x'; \ell))`,
:math:`\varepsilon \sim N(0, \sigma^2)`, with :math:`c`, :math:`\ell` and :math:`\sigma^2` learned by the evidence
under the default hyperpriors (the MAP), dense or with ``inducing_points`` sparse: one model at every size.  Given a
kernel and no likelihood it is scikit-learn's model and algorithm (:mod:`relaxep.estimators._exact`, in closed
form; sparse: Titsias' collapsed bound, :mod:`relaxep.estimators._sparse_gaussian`).  With another likelihood
(:class:`~relaxep.likelihoods.StudentT`, counts, ...) the latent posterior is EP's (or any rule's; ``rule="auto"``
converges where EP does not), its hyperparameters learned with the kernel's by the EP evidence (Jylanki, Vanhatalo
& Vehtari 2011, JMLR 12), dense, sparse (FITC) or Markov (one input, :mod:`relaxep.posterior.markov`).
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import MultiOutputMixin, RegressorMixin, clone
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel
from sklearn.preprocessing._data import _handle_zeros_in_scale
from sklearn.utils.validation import check_is_fitted, validate_data

from relaxep._memory import check_memory, dense_bytes
from relaxep._threads import fit_threads
from relaxep._typing import Array
from relaxep._xp import namespace, on_device_of, to_numpy
from relaxep.estimators._base import _LatentGPEstimator
from relaxep.estimators._checks import (
    check_device_kernel,
    check_kernel,
    check_regression_likelihood,
    check_rule,
    input_format,
    resolve_normalize_y,
    store_parameters,
)
from relaxep.estimators._draws import PriorAndDraws
from relaxep.estimators._exact_device import device_exact_model
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._latent_fit import fit_latent
from relaxep.estimators._markov import resolve_representation
from relaxep.estimators._models import _LatentModel
from relaxep.estimators._predictive import TargetPredictive, log_exposure
from relaxep.estimators._search import ROBUST, FitReport, SearchStep
from relaxep.estimators._shape import Derivatives, observed_derivatives
from relaxep.estimators._sparse_gaussian import _SparseGaussianModel
from relaxep.inference import InferenceMethod
from relaxep.inference.schedules import Schedule
from relaxep.likelihoods import Gaussian, Likelihood
from relaxep.sites import SiteRule

__all__ = ["DEFAULT_NOISE", "GPRegressor", "resolve_normalize_y"]

#: the default model's noise variance at the search's start, in normalised units (scikit-learn's users' ``WhiteKernel``)
DEFAULT_NOISE = 0.1


class GPRegressor(TargetPredictive, PriorAndDraws, MultiOutputMixin, RegressorMixin, _LatentGPEstimator):
    r"""Gaussian process regression, robust to outliers with a Student-t or Laplace likelihood (by EP).

    The first eight parameters, the methods and the fitted attributes are scikit-learn's
    ``GaussianProcessRegressor``'s, with the same meaning where a kernel is given; with a kernel and
    ``likelihood=None`` the model is scikit-learn's too (scikit-learn's own tests run against this class).

    **The default model** (``kernel=None, likelihood=None``) is not scikit-learn's default, which interpolates
    noisy data with a fixed kernel: its Gaussian noise is learned (``likelihood_``, a
    :class:`~relaxep.likelihoods.Gaussian` from a variance of 0.1), the targets are centred and scaled
    (``normalize_y="auto"``), the kernel is ``ConstantKernel(1.0) * RBF(1.0)`` with one (isotropic) length-scale
    (``docs/decisions.md``, "The default regressor"), all learned under ``prior="auto"``, dense or sparse alike.
    It is scikit-learn's ``GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), normalize_y=True)``
    with hyperpriors; for ARD length-scales pass ``kernel=C(1.0) * RBF(np.ones(d)), likelihood=Gaussian(0.1),
    normalize_y=True``.

    Parameters
    ----------
    kernel : sklearn Kernel, default ``ConstantKernel(1.0) * RBF(1.0)``
        The latent function's prior covariance; its hyperparameters are learned unless ``optimizer=None``.
        ``None`` with ``likelihood=None``: the default model (above), its noise learned.
    alpha : float or array of shape (n_samples,), default 1e-10
        Added to the diagonal of the kernel matrix in fitting (Gaussian noise of that variance, or
        jitter); not in the predicted variances.  With a likelihood, or in the default model, it is
        jitter added to the learned noise (latent jitter, a scalar, for a non-Gaussian likelihood).
    optimizer : "auto", "fmin_l_bfgs_b", "stochastic", callable or None, default "auto"
        Maximise the (EP) log marginal likelihood over the kernel's and the likelihood's
        hyperparameters within their bounds: L-BFGS-B, or for sparse fits the stochastic search
        (``"auto"``: from 5000 points; as :class:`~relaxep.GPClassifier`'s); a callable
        ``optimizer(obj_func, initial_theta, bounds)`` returns ``(theta_opt, func_min)``.
    n_restarts_optimizer : int
        Extra optimiser starts, log-uniform within the (finite) bounds.
    normalize_y : bool or "auto", default "auto"
        Centre and scale the targets by their mean and standard deviation before fitting (the
        likelihood's scale is then in units of that standard deviation).  ``"auto"``: for the default
        model (no kernel, no likelihood) only; scikit-learn's ``False`` otherwise.
    copy_X_train : bool
    n_targets : int or None
        The number of outputs, for sampling from the prior before ``fit``.
    random_state : int, RandomState or None
        For the optimiser's restarts and the placement of inducing inputs.
    likelihood : Likelihood or None
        ``None`` with a kernel: Gaussian noise through ``alpha`` (and a ``WhiteKernel`` if the kernel has one),
        scikit-learn's model; without a kernel or with ``inducing_points``, a learned ``Gaussian`` (above).
        :class:`~relaxep.likelihoods.Gaussian` ``(noise)``: its noise learned with the kernel (dense:
        closed form unless ``rule`` is given; sparse: EP).
        :class:`~relaxep.likelihoods.StudentT` ``(df, scale)`` or
        :class:`~relaxep.likelihoods.Laplace` ``(scale)``: robust regression by EP.
    rule : SiteRule, InferenceMethod, "auto" or None
        The approximate inference (``None``: ``"auto"``, EP and where EP does not converge a
        convergent method aimed at the same fixed point; :class:`~relaxep.inference.Auto`).
        Or ``EP()``, ``FractionalEP(0.5)``, ``RelaxedEP(c)``, ``ConvergentEP()``, ...  Given with a
        Gaussian likelihood, EP runs instead of the closed form (the same answer).  The
        hyperparameter search scores a run that does not converge as :math:`-\infty` (a region to
        leave) and gives a run up after 10 sweeps without progress; with ``"auto"`` its runs are
        EP's, and the final fit at the learned hyperparameters has the whole cascade.
    inducing_points : int, array of shape (M, d) or None
        Sparse FITC posterior with ``M`` inducing inputs (for ``n`` beyond a few thousand; as
        :class:`~relaxep.GPClassifier`'s).  With ``likelihood=None``: sparse regression with Gaussian
        noise in closed form, learned by Titsias' (2009) collapsed bound, GPflow's and GPyTorch's SGPR
        (:mod:`relaxep.estimators._sparse_gaussian`; ``likelihood=Gaussian()`` is FITC by EP), the noise a
        :class:`~relaxep.likelihoods.Gaussian` learned with the kernel from a variance of 0.1 in ``y``'s units
        (normalised where ``normalize_y``, as in the default model), ``likelihood_`` after ``fit``; ``alpha``
        is then latent jitter (a scalar) and ``y`` has one output.
    learn_inducing_points, inducing_init, optimizer_subset, optimizer_maxiter
        As :class:`~relaxep.GPClassifier`'s.
    schedule, max_sweeps, tol, warm_start
        EP's sweeps (:func:`relaxep.infer`), as :class:`~relaxep.GPClassifier`'s.
    n_jobs : int or None, default None
        Threads for a sparse fit's row blocks, as :class:`~relaxep.GPClassifier`'s (``None``: the machine).
    verbose, callback
        The search's progress, as :class:`~relaxep.GPClassifier`'s.

    prior : "auto", None, HyperPrior or dict, default "auto"
        The hyperparameters' prior: the search climbs the log evidence plus the log prior (the MAP).  ``"auto"``:
        data-scaled half-Student-t priors that keep amplitudes and length-scales from running away (with a kernel
        and no likelihood, scikit-learn's model: none, its type-II ML); ``None``: the evidence alone (type-II ML);
        a :mod:`relaxep.hyper` prior for all, or a dict by name (the user guide).
    integrate : {"map", "ccd", "grid"}, default "map"
        Predict at the MAP hyperparameters, or integrate over them: a central composite design (Rue, Martino &
        Chopin 2009) or a grid around the MAP, scaled by the log posterior's Hessian, one EP fit per point;
        predictions and ``loo()`` are the weighted mixture, ``hyper_samples_`` the points (the user guide).

    representation : {"auto", "dense", "markov"}, default "auto"
        ``"markov"``: the Kalman smoother's posterior, :math:`O(n)`, for a kernel of one input with a state-space form
        (:mod:`relaxep.posterior.markov`); ``"auto"``: Markov where that is exact and faster
        (:mod:`relaxep.estimators._markov`).  ``representation_`` says which ran.
    monotone : dict {dim: +1 or -1} or None
        The latent rises (+1) or falls (-1) in those inputs: virtual derivative observations by EP, placed where the
        posterior's slope has the wrong sign (:mod:`relaxep.estimators._shape`); every likelihood, dense only.

    Attributes
    ----------
    representation_ : str
        The representation the fit ran: ``"dense"``, ``"sparse"`` or ``"markov"``.
    kernel_ : Kernel, with the learned hyperparameters
    likelihood_ : Likelihood or None, with the learned hyperparameters
    result_ : the final fit's record: ``status`` (``"converged"``, ...), ``n_sweeps``, ``log_evidence``
        (an :class:`~relaxep.InferenceResult` for EP fits)
    log_marginal_likelihood_value_ : float
    X_train_, y_train_ : the training data (``y_train_`` normalised where ``normalize_y``)
    L_, alpha_ : the closed-form model's Cholesky factor and weights (Gaussian model only)
    inducing_points_ : ndarray of shape (M, d) (sparse fits)
    hyper_samples_ : HyperSamples
        With ``integrate`` other than ``"map"``: the design's ``points`` (log-hyperparameters, the MAP first),
        ``weights``, ``names`` and ``log_posterior`` (absent with ``integrate="map"``).
    """

    search_policy = ROBUST  # (a likelihood's scale has gradients of order n: backtrack from a failed run)
    learns_likelihood = True
    no_gradient_message = "Gradient can only be evaluated for theta!=None"  # (scikit-learn's words)

    def __init__(
        self,
        kernel: Kernel | None = None,
        *,
        alpha: float | ArrayLike = 1e-10,
        optimizer: str | Callable | None = "auto",
        n_restarts_optimizer: int = 0,
        normalize_y: bool | str = "auto",
        copy_X_train: bool = True,
        n_targets: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        likelihood: Likelihood | None = None,
        rule: SiteRule | InferenceMethod | str | None = None,
        inducing_points: int | ArrayLike | None = None,
        learn_inducing_points: bool = True,
        inducing_init: str = "kmeans",
        optimizer_subset: int | None = None,
        optimizer_maxiter: int | None = None,
        schedule: Schedule | str = "parallel",
        max_sweeps: int = 200,
        tol: float = 1e-4,
        warm_start: bool = True,
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
        tags.requires_fit = False  # predict and sample_y from the prior before fit, as scikit-learn's
        return tags

    # ------------------------------------------------------------------ fit
    def fit(
        self, X: ArrayLike, y: ArrayLike, exposure: ArrayLike | None = None, trials: ArrayLike | None = None,
        derivatives: Derivatives | None = None,
    ) -> GPRegressor:  # fmt: skip
        """Learn the hyperparameters (if ``optimizer``) and the posterior of the latent function on ``(X, y)``;
        ``exposure`` (count likelihoods): each row's exposure, :math:`E[y_i | f] = \\text{exposure}_i\\,e^{f_i}`;
        ``trials`` (``Binomial``): each row's number of trials, ``y`` its successes; ``derivatives``: observed
        partial derivatives of the latent (:class:`~relaxep.Derivatives`, in ``y``'s units), beside the values."""
        check_kernel(self.kernel)
        likelihood = self._check_likelihood()
        check_rule(self.rule)
        self._check_parameters()
        space = namespace(X)
        xp, numpy = space.xp, space.on_host
        self.kernel_ = ConstantKernel(1.0) * RBF(1.0) if self.kernel is None else clone(self.kernel)
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, **input_format(self.kernel_, X))
        y = np.asarray(to_numpy(y), dtype=float)  # the targets live on the host (O(n))
        if not numpy:
            check_device_kernel(self.kernel_, X.shape[1], "GPRegressor")
        n_targets = y.shape[1] if y.ndim > 1 else 1
        if self.n_targets is not None and n_targets != self.n_targets:
            raise ValueError(
                "The number of targets seen in `y` is different from the parameter "
                f"`n_targets`. Got {n_targets} != {self.n_targets}."
            )
        default = self.kernel is None and likelihood is None  # (the default model: its noise learned, y scaled)
        normalize = resolve_normalize_y(self.normalize_y, self.kernel, likelihood)
        self._log_exposure = log_exposure(exposure, y.shape[0], likelihood, normalize, trials)
        # (a likelihood whose targets are rows, a Tobit's [value, code], reads y's columns as one target each)
        rows = likelihood is not None and y.ndim == 2 and y.shape[1] == likelihood.target_width > 1
        if likelihood is not None and not likelihood.is_density and normalize:
            raise ValueError(
                f"normalize_y=True: {likelihood!r} gives some rows a probability, not a density of y (a censored "
                "value at its limit), so y is not rescaled; fit with normalize_y=False (the default), or scale y "
                "(and the limits) yourself"
            )
        if normalize:
            self._y_train_mean = np.mean(y, axis=0)
            self._y_train_std = _handle_zeros_in_scale(np.std(y, axis=0), copy=False)
            y = (y - self._y_train_mean) / self._y_train_std
        else:
            shape = (y.shape[1],) if y.ndim == 2 and not rows else 1
            self._y_train_mean, self._y_train_std = np.zeros(shape), np.ones(shape)
        alpha = self._check_alpha(y.shape[0])
        self._derivatives = observed_derivatives(derivatives, X, float(np.ravel(self._y_train_std)[0]))
        self.X_train_ = (np.copy(X) if numpy else xp.asarray(X, copy=True)) if self.copy_X_train else X
        self.y_train_ = np.copy(y) if self.copy_X_train else y
        sparse_default = likelihood is None and self.inducing_points is not None
        ml_ii = likelihood is None and not default  # (scikit-learn's model: its type-II maximum likelihood)
        if default or sparse_default:  # Gaussian noise learned with the kernel (sparse: Titsias' bound)
            likelihood = Gaussian(DEFAULT_NOISE)  # (a variance in y's units, normalised where normalize_y)
        n_learned = self.kernel_.n_dims + (0 if likelihood is None else likelihood.n_dims)
        if self.optimizer is not None and n_learned > 0:
            HyperVector(self.kernel_, likelihood).check_restarts(self.n_restarts_optimizer)
        exact = (likelihood is None or isinstance(likelihood, Gaussian)) and self.rule is None
        sparse = self.inducing_points is not None
        markov = resolve_representation(self.representation, self.kernel_, X, sparse=sparse, exact=exact) == "markov"
        by_ep = markov or self.monotone is not None or derivatives is not None  # (not the closed form: EP's sites)
        if by_ep and likelihood is None:  # (scikit-learn's model by EP, Kalman or shaped: its noise alpha, fixed)
            if np.ndim(alpha) > 0:
                raise ValueError("alpha must be a scalar with representation='markov', monotone or derivatives")
            likelihood, alpha = Gaussian(alpha, "fixed"), 0.0
        with fit_threads(self.X_train_.shape[0], dense=not sparse):
            if exact and not sparse and not by_ep:
                plan = self._plan(self.X_train_, n_learned, ml_ii=ml_ii, exact=True)
                model: Any = device_exact_model(self.kernel_, alpha, likelihood, plan.search, self.X_train_)
                report = model.fit(self.X_train_, self.y_train_, plan.rng)
                self.L_, self.alpha_ = model.L_, model.alpha_
            else:
                model, report = self._fit_latent(likelihood, alpha, n_learned, sparse_default, ml_ii)
        return self._finish(model, report)

    def _fit_latent(
        self, likelihood: Likelihood, alpha: Any, n_learned: int, sparse_default: bool = False, ml_ii: bool = False
    ) -> tuple[_LatentModel, FitReport]:
        """A latent model's fit (EP, dense or FITC), or with ``sparse_default`` sparse Gaussian regression in
        closed form (:class:`~relaxep.estimators._sparse_gaussian._SparseGaussianModel`)."""
        y = self.y_train_
        if sparse_default and y.ndim > 1 and y.shape[1] > 1:
            raise ValueError(
                f"y has {y.shape[1]} outputs: with inducing_points fit one GPRegressor per output (multi-output y "
                "needs the dense default Gaussian model)"
            )
        y = likelihood.read_targets(y, self._log_exposure)  # (a Tobit's rows [value, code]; counts' exposures)
        if np.ndim(alpha) > 0:
            what = "with inducing_points" if sparse_default else "with a non-Gaussian likelihood"
            raise ValueError(f"alpha must be a scalar {what} (it is latent jitter)")
        rule = None if sparse_default else ("auto" if self.rule is None else self.rule)
        plan = self._plan(self.X_train_, n_learned, ml_ii=ml_ii)
        model = _SparseGaussianModel if sparse_default else _LatentModel
        return fit_latent(plan, model, self.kernel_, likelihood, rule, self.X_train_, y, alpha)

    def _output_scales(self) -> tuple[float, ...]:
        """The latent's scale for the default priors: the targets' root mean square (as fitted: normalised where
        ``normalize_y``; about the zero prior mean, so a large mean counts), 1 for a count model's log-rate."""
        if self.likelihood is not None and self.likelihood.latent_is_link:
            return (1.0,)
        y = np.asarray(self.y_train_, dtype=float)
        values = y[:, 0] if y.ndim == 2 else y
        return (float(np.sqrt(np.mean(values**2))),)

    def _check_likelihood(self) -> Likelihood | None:
        check_regression_likelihood(self.likelihood)
        return self.likelihood

    def _check_alpha(self, n: int) -> Any:
        alpha = np.asarray(self.alpha, dtype=float)
        if alpha.ndim > 1 or not np.all(np.isfinite(alpha)) or np.any(alpha < 0):
            raise ValueError(f"alpha must be a finite scalar >= 0 or an array of shape (n_samples,), got {alpha}")
        if alpha.ndim == 1 and alpha.shape[0] != n:
            if alpha.shape[0] != 1:
                raise ValueError(
                    f"alpha must be a scalar or an array with same number of entries as y. ({alpha.shape[0]} != {n})"
                )
            alpha = alpha[0]
        return float(alpha) if alpha.ndim == 0 else alpha

    def _check_parameters(self) -> None:
        super()._check_parameters()
        if self.n_targets is not None and (
            isinstance(self.n_targets, bool) or not isinstance(self.n_targets, numbers.Integral) or self.n_targets < 1
        ):
            raise ValueError(f"n_targets must be None or an integer >= 1, got {self.n_targets!r}")
        resolve_normalize_y(self.normalize_y, self.kernel, self.likelihood)  # (checked before any work)
        if self.rule is not None and self.likelihood is None:
            raise ValueError("rule: give a likelihood too (e.g. Gaussian(noise) or StudentT()); the default is exact")

    # ------------------------------------------------------------ predict
    def _latent(self, X: Any, full_cov: bool) -> tuple[Array, Array]:
        """Latent mean and variances (or covariance), normalised units, one column per output (exact model)."""
        return self.model_.predict_latent(X, full_cov)

    def predict(self, X: ArrayLike, return_std: bool = False, return_cov: bool = False) -> Array | tuple[Array, Array]:
        """Posterior mean of the latent function at ``X`` and, if asked, its standard deviation or covariance.

        As scikit-learn's: the likelihood's noise (``alpha``, a Student-t's scale) is not in them;
        the predictive of a target is :meth:`predict_y` / :meth:`predict_interval`.  Before ``fit``:
        the prior.  With a count likelihood (``Poisson``, ``NegativeBinomial``) it is the predictive mean
        (and sd) of the count at unit exposure, as scikit-learn's ``PoissonRegressor``'s ``predict``; the
        latent's moments are :meth:`latent_mean_and_variance`'s.
        """
        out = self._predict(X, return_std, return_cov)
        if namespace(X).on_host:
            return out
        return tuple(on_device_of(a, X) for a in out) if isinstance(out, tuple) else on_device_of(out, X)

    def _predict(self, X: ArrayLike, return_std: bool = False, return_cov: bool = False, latent: bool = False) -> Any:
        """:meth:`predict` on the host (numpy), whatever ``X``'s library (``latent``: the latent's, for any model)."""
        if return_std and return_cov:
            raise RuntimeError("At most one of return_std or return_cov can be requested.")
        if not latent and _predicts_a_mean(getattr(self, "likelihood_", None)):
            if return_cov:
                raise ValueError("return_cov: a count's predictive has no covariance here; use return_std=True")
            mean, std = self._predict(X, return_std=True, latent=True)
            m, v = self.likelihood_.predict_y(mean, std**2)
            return (m, np.sqrt(v)) if return_std else m
        kernel = self.kernel_ if hasattr(self, "X_train_") else self.kernel
        X = validate_data(self, X, reset=False, **input_format(kernel, X))
        if return_cov:
            m = X.shape[0] if hasattr(X, "shape") else len(X)
            targets = self.y_train_.shape[1] if np.ndim(getattr(self, "y_train_", None)) == 2 else 1
            check_memory(
                dense_bytes(m, 3 * targets),
                f"a predictive covariance at {m} test points",
                "ask for return_std=True (the variances) instead, or predict fewer points at a time",
            )
        if not hasattr(self, "X_train_"):
            return self._predict_prior(to_numpy(X), return_std, return_cov)
        mean, second = (to_numpy(a) for a in self._latent(X, full_cov=return_cov))
        y_mean = self._y_train_std * mean.reshape(mean.shape[0], -1) + self._y_train_mean
        if y_mean.ndim > 1 and y_mean.shape[1] == 1:
            y_mean = np.squeeze(y_mean, axis=1)
        if not (return_std or return_cov):
            return y_mean
        if return_cov:
            cov = np.outer(second, self._y_train_std**2).reshape(*second.shape, -1)
            return y_mean, np.squeeze(cov, axis=2) if cov.shape[2] == 1 else cov
        var = np.array(second, dtype=float)
        if np.any(var < 0):
            warnings.warn("Predicted variances smaller than 0. Setting those variances to 0.", stacklevel=2)
            var[var < 0] = 0.0
        var = np.outer(var, self._y_train_std**2).reshape(*var.shape, -1)
        return y_mean, np.sqrt(np.squeeze(var, axis=1) if var.shape[1] == 1 else var)

    def latent_mean_and_variance(self, X: ArrayLike) -> tuple[Array, Array]:
        """Posterior mean and variance of the latent ``f`` at ``X``, in the targets' units (any likelihood)."""
        check_is_fitted(self)
        mean, std = self._predict(X, return_std=True, latent=True)
        return mean, std**2


def _predicts_a_mean(likelihood: Likelihood | None) -> bool:
    """Whether ``predict`` gives the predictive mean of the target (a link's latent: counts, binomial, beta, gamma)."""
    return likelihood is not None and likelihood.latent_is_link
