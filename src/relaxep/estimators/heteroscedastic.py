r"""``GPHeteroscedasticRegressor``: Gaussian process regression with input-dependent noise, by EP.

.. math::
    y_i = f(x_i) + \epsilon_i,\quad \epsilon_i \sim N(0, e^{g(x_i)}),\qquad
    f \sim GP(0, k_f),\quad g \sim GP(c, k_g),

both latents' posteriors by EP with factorised sites (Tolvanen, Jylänki & Vehtari 2014, "Expectation propagation
for nonstationary heteroscedastic Gaussian process regression", MLSP): the tilted moments by one-dimensional
quadrature (:class:`~relaxep.likelihoods.Heteroscedastic`), the engine :mod:`relaxep.inference.two_latent`, the
fitted model :mod:`relaxep.estimators._two_latent_model`, on the estimators' base
(:class:`~relaxep.estimators._base._GPEstimatorBase`).  The kernels' hyperparameters and :math:`c` maximise the EP
evidence by L-BFGS-B with its analytic gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import RegressorMixin, clone
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel
from sklearn.utils.validation import check_is_fitted, validate_data

from relaxep._threads import fit_threads
from relaxep._typing import Array
from relaxep._validation import check_positive_int, check_unit_interval
from relaxep.estimators._base import _GPEstimatorBase
from relaxep.estimators._checks import check_host_arrays, check_kernel, random_state_of, require_scaled_rbf
from relaxep.estimators._hyper import ConstantMean, HyperVector
from relaxep.estimators._inducing import check_inducing_points, initial_inducing_points
from relaxep.estimators._search import ROBUST
from relaxep.estimators._two_latent_model import _TwoLatentModel
from relaxep.inference.two_latent import rule_powers
from relaxep.likelihoods import Heteroscedastic
from relaxep.sites import SiteRule

__all__ = ["GPHeteroscedasticRegressor"]

#: ``inducing_points="auto"``: dense priors up to this many rows, else :data:`AUTO_INDUCING` inducing inputs
DENSE_UP_TO = 500
AUTO_INDUCING = 100


def auto_inducing(X: Array) -> int:
    """``inducing_points="auto"``'s count beyond :data:`DENSE_UP_TO` rows: :data:`AUTO_INDUCING`, or half the distinct
    rows where there are fewer than twice as many.  Inputs that repeat (a covariate of few values: Wage's 61 ages
    over 3000 rows) would otherwise put an inducing input on each value, where FITC's own term
    :math:`k_{ii} - Q_{ii}` vanishes for all the rows there, and two-latent EP can then pin each row's :math:`f` at
    its target (site precisions of 1e54 and predictions off by 20 times the targets' sd were seen on Wage)."""
    distinct = np.unique(X, axis=0).shape[0]
    return max(1, min(AUTO_INDUCING, distinct // 2))


def _default_kernel() -> Kernel:
    return ConstantKernel(1.0) * RBF(1.0)


class GPHeteroscedasticRegressor(RegressorMixin, _GPEstimatorBase):
    r"""Gaussian process regression whose noise variance is a second Gaussian process (by EP).

    :math:`y = f(x) + \epsilon`, :math:`\epsilon \sim N(0, e^{g(x)})`, :math:`f \sim GP(0, k_f)` (``kernel``),
    :math:`g \sim GP(c, k_g)` (``noise_kernel``, a learned constant mean :math:`c`).  EP approximates the posterior
    by independent Gaussian processes :math:`q(f)\,q(g)` (module docstring).

    Parameters
    ----------
    kernel : sklearn Kernel, default ``ConstantKernel(1.0) * RBF(1.0)``
        The latent function's prior covariance (learned unless ``optimizer=None``).
    noise_kernel : sklearn Kernel, default ``ConstantKernel(1.0) * RBF(1.0)``
        The prior covariance of the log noise variance :math:`g`: an amplitude of 1 lets the noise sd vary by a
        factor :math:`e^{1/2}` either way at one prior sd; learned with ``kernel``.
    noise_mean : float or None, default None
        The start (or, with ``noise_mean_bounds="fixed"``, the value) of :math:`c`, in the fitted units of
        :math:`y` (normalised where ``normalize_y``); ``None``: the log of a tenth of the targets' variance.
    noise_mean_bounds : pair of float, "auto" or "fixed", default "auto"
        Bounds of :math:`c`; ``"auto"``: the log of the targets' variance minus 25 and plus 5.
    rule : "auto", EP(), PowerEP(u) or FractionalEP(fraction), default "auto"
        The site rule.  ``"auto"``: EP with the parallel step 0.5, and where that run does not converge, EP again
        from flat sites with the step 0.1 and four times ``max_sweeps``.  A rule's ``damping`` multiplies the
        step.  ``RelaxedEP`` is refused (a ``TypeError``; :mod:`relaxep.inference.two_latent` says why).  With
        ``PowerEP``/``FractionalEP`` the evidence that the search climbs (and ``log_marginal_likelihood(theta)``)
        is EP's, whose gradient is exact at its fixed point; the final posterior is the rule's.
    optimizer : "fmin_l_bfgs_b", callable or None, default "fmin_l_bfgs_b"
        Maximise the EP evidence over :math:`(\theta_f, \theta_g, c)`; a callable
        ``optimizer(obj_func, initial_theta, bounds)`` returns ``(theta_opt, func_min)``; ``None`` keeps them.
    n_restarts_optimizer : int, default 0
        Extra starts, uniform within the (finite) bounds.
    normalize_y : bool, default True
        Centre and scale ``y`` before fitting (unlike ``GPRegressor``'s default: both default kernels have unit
        amplitude, and :math:`c` starts from the targets' variance).  Predictions are in ``y``'s units.
    inducing_points : "auto", int, array of shape (M, d) or None, default "auto"
        ``None``: dense priors.  Else FITC priors for both latents through the same inducing inputs, fixed: ``M``
        placed by k-means (as ``GPRegressor``'s), or the given array.  Learning the kernels then needs ``RBF`` or
        ``ConstantKernel * RBF`` (closed-form gradients).  ``"auto"``: dense up to 500 rows, else 100 inducing
        inputs (measured on 2 cores, 1-d inputs: 1000 rows 42 s dense against 5 s with 100; 5000 rows 29 s), or half
        the distinct rows where the inputs repeat (:func:`auto_inducing`).
    max_sweeps : int, default 200
    tol : float, default 1e-4
        On the largest change of either latent's marginals (:func:`~relaxep.inference.method.marginal_change`).
    random_state : int, RandomState or None
        For the restarts and the placement of inducing inputs.
    copy_X_train : bool, default True

    prior : "auto", None, HyperPrior or dict, default "auto"
        The hyperparameters' prior: the search climbs the log evidence plus the log prior (the MAP).  ``"auto"``:
        data-scaled half-Student-t priors that keep amplitudes and length-scales from running away; ``None``: the
        evidence alone (type-II ML); a :mod:`relaxep.hyper` prior for all, or a dict by name (the user guide).

    Attributes
    ----------
    kernel_, noise_kernel_ : Kernel, with the learned hyperparameters (normalised units of ``y``)
    noise_mean_ : float
        The learned :math:`c` (normalised units: add ``2 log(std(y))`` for ``y``'s).
    log_marginal_likelihood_value_ : float
        The EP log evidence at the learned hyperparameters (normalised units).
    result_ : :class:`~relaxep.inference.two_latent.TwoLatentResult` of the final run (``status``, ``trace``)
    n_iter_ : int
        Its sweeps.
    converged_ : bool
    X_train_, y_train_ : the training data (``y_train_`` normalised where ``normalize_y``)
    inducing_points_ : ndarray of shape (M, d) (sparse fits)
    """

    #: backtrack from a failed run, give a stalled one up (:data:`~relaxep.estimators._search.ROBUST`)
    search_policy = ROBUST
    no_gradient_message = "Gradient can only be evaluated for theta!=None"

    def __init__(
        self,
        kernel: Kernel | None = None,
        noise_kernel: Kernel | None = None,
        *,
        noise_mean: float | None = None,
        noise_mean_bounds: tuple[float, float] | str = "auto",
        rule: SiteRule | str = "auto",
        optimizer: str | Callable | None = "fmin_l_bfgs_b",
        n_restarts_optimizer: int = 0,
        normalize_y: bool = True,
        inducing_points: int | ArrayLike | str | None = "auto",
        max_sweeps: int = 200,
        tol: float = 1e-4,
        random_state: int | np.random.RandomState | None = None,
        copy_X_train: bool = True,
        prior: Any = "auto",
    ) -> None:
        self.kernel = kernel
        self.noise_kernel = noise_kernel
        self.noise_mean = noise_mean
        self.noise_mean_bounds = noise_mean_bounds
        self.rule = rule
        self.optimizer = optimizer
        self.n_restarts_optimizer = n_restarts_optimizer
        self.normalize_y = normalize_y
        self.inducing_points = inducing_points
        self.max_sweeps = max_sweeps
        self.tol = tol
        self.random_state = random_state
        self.copy_X_train = copy_X_train
        self.prior = prior

    # ------------------------------------------------------------------ fit
    def _check_parameters(self) -> None:
        super()._check_parameters()
        check_kernel(self.kernel)
        if self.noise_kernel is not None and not isinstance(self.noise_kernel, Kernel):
            raise TypeError(
                "noise_kernel must be a scikit-learn Kernel (sklearn.gaussian_process.kernels, e.g. "
                f"ConstantKernel(1.0) * RBF(1.0)) or None, got {self.noise_kernel!r}"
            )
        if not (isinstance(self.rule, str) and self.rule == "auto"):
            if not isinstance(self.rule, SiteRule):
                raise TypeError(f"rule must be 'auto', EP(), PowerEP(u) or FractionalEP(fraction), got {self.rule!r}")
            rule_powers(self.rule)  # (refuses RelaxedEP with its reason)
        if self.noise_mean is not None:
            try:
                finite = bool(np.isfinite(float(self.noise_mean)))
            except (TypeError, ValueError):
                finite = False
            if not finite:
                raise ValueError(f"noise_mean must be a finite number or None, got {self.noise_mean!r}")
        bounds = self.noise_mean_bounds
        if not (isinstance(bounds, str) and bounds in ("auto", "fixed")):
            b = np.asarray(bounds, dtype=float) if not isinstance(bounds, str) else np.zeros(0)
            if b.shape != (2,) or not b[0] < b[1]:
                raise ValueError(f"noise_mean_bounds must be 'auto', 'fixed' or a pair lo < hi, got {bounds!r}")
        if not (self.optimizer is None or callable(self.optimizer) or self.optimizer == "fmin_l_bfgs_b"):
            raise ValueError(f"optimizer must be 'fmin_l_bfgs_b', a callable or None, got {self.optimizer!r}")

    def _check_data(self, X: ArrayLike, y: ArrayLike) -> tuple[Array, Array]:
        """scikit-learn's validation, its shape errors reworded to name ``y``."""
        check_host_arrays("GPHeteroscedasticRegressor", X=X, y=y)
        try:
            X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64)
        except ValueError as exc:
            if "inconsistent numbers of samples" in str(exc):
                raise ValueError(f"y must have one target per row of X ({exc})") from exc
            if "1d array" in str(exc):
                raise ValueError(f"y must be one-dimensional, one target per row of X ({exc})") from exc
            raise
        return X, np.asarray(y, dtype=float)

    def _output_scales(self) -> tuple[float, ...]:
        """The default priors' latent scales: the (normalised) targets' root mean square for ``f``; 1 for the log
        noise variance ``g``."""
        return (float(np.sqrt(np.mean(np.asarray(self.y_train_, dtype=float) ** 2))) or 1.0, 1.0)

    def fit(self, X: ArrayLike, y: ArrayLike) -> GPHeteroscedasticRegressor:
        """Learn both kernels' hyperparameters and :math:`c` (unless ``optimizer=None``) and the two posteriors."""
        self._check_parameters()
        X, y = self._check_data(X, y)
        self.kernel_ = _default_kernel() if self.kernel is None else clone(self.kernel)
        self.noise_kernel_ = _default_kernel() if self.noise_kernel is None else clone(self.noise_kernel)
        if self.normalize_y:
            self._y_train_mean, std = float(np.mean(y)), float(np.std(y))
            self._y_train_std = std if std > 0.0 else 1.0
        else:
            self._y_train_mean, self._y_train_std = 0.0, 1.0
        self.X_train_ = np.copy(X) if self.copy_X_train else X
        self.y_train_ = (y - self._y_train_mean) / self._y_train_std
        rng = self._rng()
        Z = None
        spec = self.inducing_points
        if isinstance(spec, str) and spec == "auto":
            spec = None if X.shape[0] <= DENSE_UP_TO else auto_inducing(X)
        elif isinstance(spec, str):
            raise ValueError(f"inducing_points must be 'auto', None, an int or an (M, d) array, got {spec!r}")
        if spec is not None:
            Z = initial_inducing_points(X, check_inducing_points(spec, X.shape[1]), "kmeans", rng)
            if self.optimizer is not None:
                self._check_sparse_kernels(X.shape[1])
        variance = float(np.var(self.y_train_))
        log_var = float(np.log(variance)) if variance > 0.0 else 0.0  # (constant targets: unit scale)
        offset = log_var + np.log(0.1) if self.noise_mean is None else float(self.noise_mean)
        bounds = self.noise_mean_bounds
        if isinstance(bounds, str):
            bounds = None if bounds == "fixed" else (log_var - 25.0, log_var + 5.0)
        model = _TwoLatentModel(Heteroscedastic(), self.X_train_, self.y_train_, Z, self.rule, self.max_sweeps,
                                self.tol)  # fmt: skip
        search = self._search() if self.optimizer is not None else None
        with fit_threads(X.shape[0], dense=Z is None):
            report = model.fit((self.kernel_, self.noise_kernel_), ConstantMean(offset, bounds), search, rng)
        return self._finish(model, report)

    def _decode(self, model: _TwoLatentModel) -> None:
        self.noise_kernel_, self.noise_mean_ = model.kernels_[1], model.offset
        self.n_iter_, self.converged_ = model.result_.n_sweeps, model.result_.converged

    def _check_sparse_kernels(self, n_features: int) -> None:
        for name, kernel in (("kernel", self.kernel_), ("noise_kernel", self.noise_kernel_)):
            require_scaled_rbf(
                kernel, n_features,
                f"{name}: learning a sparse fit's kernels needs RBF or ConstantKernel * RBF (closed-form gradients), "
                f"got {kernel!r}; pass optimizer=None to keep another kernel fixed",
            )  # fmt: skip

    # ------------------------------------------------------------ predict
    def _rows(self, X: ArrayLike) -> Array:
        """``X`` checked for a fitted model: numpy, ``n_features_in_`` columns, float."""
        check_is_fitted(self)
        check_host_arrays("GPHeteroscedasticRegressor", X=X)
        return validate_data(self, X, reset=False, dtype=np.float64)

    def _latents(self, X: ArrayLike) -> tuple[Array, Array, Array, Array]:
        """Normalised-unit predictive ``(mean_f, var_f, mean_g, var_g)`` at ``X``."""
        X = self._rows(X)
        mean_f, var_f = self.model_.latent("f", X)
        mean_g, var_g = self.model_.latent("g", X)
        return mean_f, np.maximum(var_f, 1e-300), mean_g, np.maximum(var_g, 1e-300)

    def predict(self, X: ArrayLike, return_std: bool = False, return_cov: bool = False) -> Any:
        """Posterior mean of the latent :math:`f` at ``X`` and, if asked, its standard deviation or covariance
        (the noise not included: :meth:`predict_interval` and :meth:`predict_noise` have it), in ``y``'s units."""
        if return_std and return_cov:
            raise RuntimeError("At most one of return_std or return_cov can be requested.")
        X = self._rows(X)
        mean, second = self.model_.latent("f", X, full_cov=return_cov)
        mean = self._y_train_mean + self._y_train_std * mean
        if return_cov:
            return mean, self._y_train_std**2 * second
        if return_std:
            return mean, self._y_train_std * np.sqrt(np.maximum(second, 0.0))
        return mean

    def predict_noise(self, X: ArrayLike, return_std: bool = False) -> Array | tuple[Array, Array]:
        r"""Posterior mean of the noise standard deviation :math:`e^{g/2}` at ``X`` (and its sd), in ``y``'s units:
        :math:`E[e^{g/2}] = e^{\mu_g/2 + v_g/8}` (:meth:`~relaxep.likelihoods.Heteroscedastic.scale_moments`)."""
        _, _, mean_g, var_g = self._latents(X)
        mean, sd = self.model_.likelihood.scale_moments(mean_g, var_g)
        return (self._y_train_std * mean, self._y_train_std * sd) if return_std else self._y_train_std * mean

    def predict_interval(self, X: ArrayLike, level: float = 0.9) -> tuple[Array, Array]:
        r"""The central ``level`` interval of a new target at ``X``: quantiles of the mixture
        :math:`\int N(y | \mu_f, v_f + e^g)\, q(g)\, dg` (Gauss-Hermite in :math:`g`, bisection)."""
        check_unit_interval(level, "level")
        if not 0.0 < float(level) < 1.0:
            raise ValueError(f"level must be in (0, 1), got {level!r}")
        mf, vf, mg, vg = self._latents(X)
        tail = 0.5 * (1.0 - float(level))
        quantiles = self.model_.likelihood.predictive_quantiles
        low, high = quantiles(tail, mf, vf, mg, vg), quantiles(1.0 - tail, mf, vf, mg, vg)
        return self._y_train_mean + self._y_train_std * low, self._y_train_mean + self._y_train_std * high

    def log_predictive_density(self, X: ArrayLike, y: ArrayLike) -> Array:
        r"""Per row, :math:`\log\int N(y | \mu_f, v_f + e^g)\, q(g)\, dg` in ``y``'s units (the test NLPD is minus
        its mean)."""
        mf, vf, mg, vg = self._latents(X)
        y = np.asarray(y, dtype=float).reshape(-1)
        if y.shape != mf.shape:
            raise ValueError(f"y must have shape {mf.shape} (one target per row of X), got {y.shape}")
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or inf")
        y = (y - self._y_train_mean) / self._y_train_std
        return self.model_.likelihood.predictive_log_density(y, mf, vf, mg, vg) - np.log(self._y_train_std)

    def sample_y(self, X: ArrayLike, n_samples: int = 1, random_state: Any = 0) -> Array:
        r"""Draws of new targets at ``X``, shape ``(n, n_samples)``: :math:`f_*` and :math:`g_*` jointly from their
        posterior predictives, then :math:`y_* = f_* + e^{g_*/2}\,z`, :math:`z \sim N(0, I)` (unlike
        ``GPRegressor.sample_y``, the noise is in the draws: it is what this model describes)."""
        check_positive_int(n_samples, "n_samples")
        X = self._rows(X)
        rng = random_state_of(random_state)
        mean_f, cov_f = self.model_.latent("f", X, full_cov=True)
        mean_g, cov_g = self.model_.latent("g", X, full_cov=True)
        f = rng.multivariate_normal(mean_f, cov_f, n_samples).T
        g = rng.multivariate_normal(mean_g, cov_g, n_samples).T
        return self._y_train_mean + self._y_train_std * (f + np.exp(0.5 * g) * rng.standard_normal(f.shape))

    # ------------------------------------------------------------ evidence
    def _check_theta(self, theta: Array) -> None:
        """``theta`` = ``(kernel_.theta, noise_kernel_.theta, noise_mean_)``, the last entry only where :math:`c` is
        learned (``log_marginal_likelihood``: each evaluation runs EP from the fitted sites to ``tol``)."""
        model = self.model_
        size = HyperVector(model.kernels_, mean=model.mean).size
        if theta.shape != (size,):
            raise ValueError(
                f"theta must have shape ({size},): kernel_.theta, noise_kernel_.theta"
                + (", noise_mean_" if model.mean.theta.size else "")
                + f"; got {theta.shape}"
            )

    # ------------------------------------------------------------ leave-one-out
    def _loo_name(self) -> str:
        return f"GPHeteroscedasticRegressor({self.kernel_}, noise {self.noise_kernel_})"
