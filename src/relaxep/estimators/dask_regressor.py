r"""``DaskGPRegressor``: robust sparse GP regression by EP on a Dask cluster (the sharded machinery of
:mod:`relaxep.estimators.dask`, the model of ``GPRegressor(..., inducing_points=M)``).

The targets enter the shards as the likelihood takes them: real targets (centred and scaled by their
mean and standard deviation where ``normalize_y``, computed on the cluster), or for a count likelihood
rows of the count and its log exposure.  Everything else is the classifier's: the shards' FITC rows and
sites stay on the workers, each sweep is a map and a reduce of :math:`M \times M` sums, and the
hyperparameters (the likelihood's noise or scale with the kernel's) are learned on a subset, on all
shards by L-BFGS-B, or by the stochastic search.

    from dask.distributed import Client
    client = Client("tcp://scheduler:8786")
    reg = DaskGPRegressor(client=client, likelihood=StudentT(), inducing_points=200).fit(X, y)  # dask arrays
    mean, std = reg.predict(X_new, return_std=True)  # lazy Dask arrays
    local = reg.to_local()  # a fitted GPRegressor: pickle it, serve it without Dask
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import RegressorMixin
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep.estimators._checks import check_regression_likelihood, store_parameters
from relaxep.estimators._dask_fit import DaskSparseFit, import_dask, lazy_map
from relaxep.estimators._inducing_model import InducingModel
from relaxep.estimators._predictive import log_exposure
from relaxep.estimators._search import ROBUST
from relaxep.estimators.regressor import DEFAULT_NOISE, GPRegressor, resolve_normalize_y
from relaxep.likelihoods import Gaussian, Likelihood
from relaxep.sites import EP, SiteRule

__all__ = ["DaskGPRegressor"]


class DaskGPRegressor(RegressorMixin, DaskSparseFit):
    r"""Sparse (FITC) EP, Power EP or Relaxed EP regression on a Dask cluster (module docstring).

    Its fit equals ``GPRegressor(kernel, likelihood=..., rule=..., inducing_points=Z)`` on the same rows
    (summation order aside), and its predictions are those of that fitted model (:meth:`to_local`).

    Parameters
    ----------
    client : distributed.Client or None
        ``None``: ``distributed.default_client()``.
    kernel : sklearn Kernel, default ``ConstantKernel(1.0) * RBF(1.0)``
        As :class:`~relaxep.GPRegressor`; learning it needs ``RBF`` or ``ConstantKernel * RBF``.
    likelihood : Likelihood or None, default None (``Gaussian(0.1)``, its noise learned)
        A regression likelihood: ``Gaussian(noise)``, ``StudentT(df, scale)``, ``Laplace(scale)``,
        ``Poisson()``, ``NegativeBinomial(dispersion)``.  The default is ``Gaussian(0.1)``: FITC with
        Gaussian noise learned from a variance of 0.1 (of the normalised targets), by EP on the shards (one sweep
        and a check), the model of ``GPRegressor(inducing_points=M, likelihood=Gaussian(0.1), normalize_y=True)``;
        ``GPRegressor(inducing_points=M)``'s default is Titsias' collapsed bound instead, which the shards do not
        compute.
    rule : SiteRule or None, default None (``EP()``)
        ``EP()``, ``PowerEP(u)``, ``RelaxedEP(c)``, ``FractionalEP(f)``, run with the parallel schedule on the
        shards; ``"auto"`` and inference methods are refused (as :class:`~relaxep.DaskGPClassifier`).
    alpha : float, default 1e-10
        Latent jitter, as ``GPRegressor``'s with a non-Gaussian likelihood.
    normalize_y : bool or "auto", default "auto"
        Centre and scale the targets by their mean and standard deviation (not for counts).  ``"auto"``: for the
        default model (no ``kernel``, no ``likelihood``), as :class:`~relaxep.GPRegressor`'s default; not otherwise.
    inducing_points, learn_inducing_points, inducing_init, optimizer, optimizer_subset, optimizer_maxiter
        As :class:`~relaxep.DaskGPClassifier`: ``optimizer_subset`` rows (20 000) gathered to the client to
        learn on; ``None`` learns on all shards (L-BFGS-B, or the stochastic search, the default from
        20 000 rows).
    max_sweeps, tol, min_step, random_state, timeout
        As :class:`~relaxep.DaskGPClassifier`.

    prior : "auto", None, HyperPrior or dict, default "auto"
        The hyperparameters' prior: the search climbs the log evidence plus the log prior (the MAP).  ``"auto"``:
        data-scaled half-Student-t priors that keep amplitudes and length-scales from running away; ``None``: the
        evidence alone (type-II ML); a :mod:`relaxep.hyper` prior for all, or a dict by name (the user guide).

    Attributes
    ----------
    kernel_, likelihood_, inducing_points_, log_marginal_likelihood_value_
    result_ : ShardedResult
        The final run on the shards (``status``, ``n_sweeps``, ``trace``, ``log_evidence``).
    """

    _owner = "DaskGPRegressor"
    search_policy = ROBUST  # as GPRegressor's search (the stall window on the subset and on the shards)

    def __init__(
        self,
        client: Any = None,
        kernel: Kernel | None = None,
        *,
        likelihood: Likelihood | None = None,
        rule: SiteRule | None = None,
        alpha: float = 1e-10,
        normalize_y: bool | str = "auto",
        inducing_points: int | ArrayLike = 200,
        learn_inducing_points: bool = True,
        inducing_init: str = "kmeans",
        optimizer: str | Callable | None = "auto",
        optimizer_subset: int | None = 20_000,
        optimizer_maxiter: int | None = None,
        max_sweeps: int = 200,
        tol: float = 1e-4,
        min_step: float = 1.0 / 1024,
        random_state: int | np.random.RandomState | None = None,
        timeout: float | None = 600.0,
        prior: Any = "auto",
    ) -> None:
        store_parameters(self, locals())

    #: the likelihood's learned hyperparameters are ``likelihood_``'s (``log_marginal_likelihood(theta)``)
    learns_likelihood = True

    def _check_options(self) -> tuple[SiteRule, Likelihood, float]:
        """The rule, the likelihood (defaults filled in) and ``alpha``, checked before any Dask work."""
        rule = self._check_common("GPRegressor")
        check_regression_likelihood(self.likelihood, "DaskGPRegressor")
        likelihood = Gaussian(DEFAULT_NOISE) if self.likelihood is None else self.likelihood
        alpha = self.alpha
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (np.isfinite(alpha) and alpha >= 0):
            raise ValueError(f"alpha must be a finite scalar >= 0 (latent jitter), got {alpha!r}")
        normalize = resolve_normalize_y(self.normalize_y, self.kernel, self.likelihood)  # (its check, named)
        log_exposure(None, 0, likelihood, normalize)  # counts are not rescaled
        return rule, likelihood, float(alpha)

    def fit(self, X: Any, y: Any, exposure: Any = None, trials: Any = None) -> DaskGPRegressor:
        r"""Fit on Dask arrays ``X`` (n x d, chunked by rows only) and ``y`` (n,); numpy arrays are scattered.

        Parameters
        ----------
        X : dask or numpy array of shape (n, d)
        y : dask or numpy array of shape (n,)
            Real targets (counts for ``Poisson``/``NegativeBinomial``).
        exposure : dask or numpy array of shape (n,), optional
            Count likelihoods: each row's exposure, :math:`E[y_i | f] = \text{exposure}_i\,e^{f_i}`.
        trials : dask or numpy array of shape (n,), optional
            ``Binomial``: each row's number of trials (``y`` its successes).

        Returns
        -------
        self
        """
        rule, likelihood, alpha = self._check_options()  # (before importing Dask)
        da = import_dask(self._owner)
        X = self._rows(X)
        y = self._column(y, X).astype(float)
        given = [None if v is None else np.ones(1) for v in (exposure, trials)]
        log_exposure(given[0], 1, likelihood, False, given[1])  # (which of them this likelihood takes, named)
        exposure = exposure if trials is None else trials
        checks = {"finite": da.isfinite(y).all(), "square": (y * y).mean()}  # (one pass for every check and moment)
        normalize = resolve_normalize_y(self.normalize_y, self.kernel, self.likelihood)
        if normalize:
            checks.update(mean=y.mean(), std=y.std())
        if exposure is not None:
            exposure = self._column(exposure, X, "exposure").astype(float)
            checks.update(exposure_finite=da.isfinite(exposure).all(), exposure_min=exposure.min())
        got = dict(zip(checks, da.compute(*checks.values()), strict=True))
        if not got["finite"]:
            raise ValueError("y contains NaN or inf")
        if exposure is not None and not (got["exposure_finite"] and got["exposure_min"] > 0.0):
            low = got["exposure_min"]
            raise ValueError(f"exposure must be positive finite numbers (one per row of X), got min {low:.3g}")
        mean, std = (float(got["mean"]), float(got["std"]) or 1.0) if normalize else (0.0, 1.0)
        self._y_train_mean, self._y_train_std = mean, std
        # the normalised targets' root mean square, for the default priors (:meth:`_output_scales`)
        self._target_rms = 1.0 if normalize else float(np.sqrt(got["square"]))
        targets = (y - mean) / std
        if exposure is not None:
            targets = da.stack([targets, da.log(exposure)], axis=1).rechunk({1: -1})
        report, _ = self._fit_shards(X, targets, likelihood, rule, alpha)
        report.warn()  # (at the user's fit line)
        return self

    def _output_scales(self) -> tuple[float, ...]:
        """The latent's scale for the default priors: the (normalised) targets' root mean square; 1 for counts."""
        link = self.likelihood is not None and self.likelihood.latent_is_link
        return (1.0,) if link else (self._target_rms or 1.0,)

    def _local_estimator(self, L_uu: Array, noise: float) -> Any:
        """The fitted ``GPRegressor`` of :meth:`to_local`: this estimator's parameters, its posterior at the
        inducing inputs."""
        likelihood = Gaussian(DEFAULT_NOISE) if self.likelihood is None else self.likelihood
        local = self._local_of(GPRegressor, likelihood=likelihood, rule=EP() if self.rule is None else self.rule)
        local.y_train_, local.likelihood_ = None, self.likelihood_
        local._y_train_mean, local._y_train_std = np.float64(self._y_train_mean), np.float64(self._y_train_std)
        local._log_exposure = None
        return self._hand_over(local, InducingModel, L_uu, noise)

    # ------------------------------------------------------------ predict
    def predict(self, X: Any, return_std: bool = False, return_cov: bool = False) -> Any:
        """``GPRegressor.predict`` (the latent's posterior mean and, if asked, its standard deviation; a count
        model's predictive mean and sd of the count), lazily for a Dask array; ``return_cov`` for numpy only."""
        if return_cov and not isinstance(self._test_rows(X), np.ndarray):
            raise ValueError("return_cov: an n x n covariance of a Dask array's rows; ask for return_std=True")
        if return_std:
            return self._apply(X, "predict", outputs=2, return_std=True)
        return self._apply(X, "predict", return_cov=True) if return_cov else self._apply(X, "predict")

    def predict_y(self, X: Any) -> Any:
        """``GPRegressor.predict_y``: the mean and standard deviation of the predictive of a target."""
        return self._apply(X, "predict_y", outputs=2)

    def predict_interval(self, X: Any, level: float = 0.95) -> Any:
        """``GPRegressor.predict_interval``: the central ``level`` interval of the predictive of a target."""
        return self._apply(X, "predict_interval", outputs=2, level=level)

    def latent_mean_and_variance(self, X: Any) -> Any:
        """``GPRegressor.latent_mean_and_variance``: the latent's posterior mean and variance (targets' units)."""
        return self._apply(X, "latent_mean_and_variance", outputs=2)

    def log_predictive_density(self, X: Any, y: Any) -> Any:
        r"""``GPRegressor.log_predictive_density``: pointwise :math:`\log p(y_* | y)`; lazy for a Dask ``X``."""
        X = self._test_rows(X)
        if isinstance(X, np.ndarray):
            return self._local.log_predictive_density(X, np.asarray(y))
        return lazy_map(self._local, X, "log_predictive_density", self._column(y, X).astype(float))

    def sample_y(self, X: Any, n_samples: int = 1, random_state: Any = 0) -> Array:
        """``GPRegressor.sample_y`` at a numpy ``X`` (joint draws need the ``n x n`` covariance)."""
        X = self._test_rows(X)
        if not isinstance(X, np.ndarray):
            raise TypeError("X: sample_y draws jointly (an n x n covariance); pass a numpy array of test rows")
        return self._local.sample_y(X, n_samples, random_state)
