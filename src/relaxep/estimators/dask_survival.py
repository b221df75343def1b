r"""``DaskGPSurvivalRegressor``: sparse GP survival analysis by EP on a Dask cluster (the sharded machinery of
:mod:`relaxep.estimators.dask`, the model of ``GPSurvivalRegressor(..., inducing_points=M)``).

The targets enter the shards as the survival likelihoods take them: rows :math:`[\log l_i, \log u_i]` of
log-times, :math:`\pm\infty` for open ends (:mod:`relaxep.likelihoods.survival_targets`).  The shards never sum
the rows; they enter the likelihood's row terms only, which read an infinite end as an open one.  ``y`` is either
a numpy array of any form :func:`~relaxep.likelihoods.survival_targets.survival_targets` reads (scikit-survival's
structured array, :func:`relaxep.right_censored`, :func:`relaxep.interval_censored`, a numeric ``(time, event)``
array: read on the client, then scattered as float rows), or a Dask array of shape ``(n, 2)`` of columns
``(time, event)`` (a structured dtype does not chunk well in Dask), read on each row chunk.

Before the search, on the client, from sums over the shards (the empirical-Bayes start
:class:`~relaxep.GPSurvivalRegressor` takes in one process):

- an AFT likelihood's location :math:`c` and shape at the intercept-only model's maximum likelihood,
  :math:`\max_{c,\theta}\sum_i\log p(y_i | f_i = 0)`: the same L-BFGS-B run as in one process
  (:meth:`~relaxep.likelihoods.SurvivalLikelihood.start_from`), each evaluation one map over the row chunks that
  sends back one number a chunk, summed in chunk order;
- a Cox PH likelihood without a baseline gets one from ``with_baseline(rows)``, which reads the rows: they are
  gathered to the client once (16 bytes a row; give ``breaks`` and ``hazards`` to avoid it).

One pass over the rows checks them and brings back their count of events, mean finite log-time and distinct event
times (:attr:`unique_times_`, the predictions' default times: :math:`O(\text{distinct event times})` numbers).
The fit is then :class:`~relaxep.estimators._dask_fit.DaskSparseFit`'s; the predictions are those of the fitted
``GPSurvivalRegressor`` of :meth:`to_local`, lazily a row chunk at a time for a Dask ``X`` (survival and cumulative
hazard functions as ``(n, T)`` Dask arrays); :meth:`score` gathers the risk scores and targets (Harrell's
concordance compares every pair); ``loo()`` is the one-process estimator's, from the shards' cavities
(:mod:`relaxep.estimators._dask_loo`).

    from dask.distributed import Client
    client = Client("tcp://scheduler:8786")
    model = DaskGPSurvivalRegressor(client, inducing_points=200).fit(X, y)  # y: dask (n, 2) of (time, event)
    risk = model.predict(X_new)  # a lazy Dask array
    local = model.to_local()  # a fitted GPSurvivalRegressor: pickle it, serve it without Dask
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep.assessment.survival_metrics import concordance_index
from relaxep.estimators._checks import check_jitter, store_parameters
from relaxep.estimators._dask_fit import DaskSparseFit, check_timeout, import_dask, lazy_map
from relaxep.estimators._inducing_model import InducingModel
from relaxep.estimators._search import ROBUST
from relaxep.estimators.survival import GPSurvivalRegressor, survival_likelihood
from relaxep.inference.sharded import gather_in_order
from relaxep.likelihoods import SurvivalLikelihood
from relaxep.likelihoods.survival_targets import SurvivalRows
from relaxep.sites import EP, SiteRule

__all__ = ["DaskGPSurvivalRegressor"]


# ------------------------------------------------------------------ the row chunks' pure functions
def _time_event_rows(block: Array) -> Array:
    r"""Columns ``(time, event)`` as rows :math:`[\log t, \log t]` (event) or :math:`[\log t, \infty]` (censored);
    the values were checked by :func:`_block_checks` in the same pass."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_time = np.log(block[:, 0])
    return np.column_stack((log_time, np.where(block[:, 1] == 1.0, log_time, np.inf)))


def _block_checks(block: Array) -> Array:
    """A ``(time, event)`` chunk's counts of bad times (not finite and positive), of bad events (not 0/1), of
    events, as one row of shape (1, 3)."""
    time, event = block[:, 0], block[:, 1]
    bad_time = ~(np.isfinite(time) & (time > 0))
    bad_event = ~((event == 0.0) | (event == 1.0))
    return np.array([[bad_time.sum(), bad_event.sum(), (event == 1.0).sum()]], dtype=float)


def _block_moments(rows: Array) -> Array:
    """A chunk of rows' count and sum of its finite log-times (each row's lower end, or its upper where the lower is
    open), as one row of shape (1, 2)."""
    finite = np.where(np.isfinite(rows[:, 0]), rows[:, 0], rows[:, 1])
    return np.array([[rows.shape[0], finite.sum()]])


def _block_event_times(rows: Array) -> Array:
    """A chunk's distinct event times (rows whose ends are equal), as ``GPSurvivalRegressor`` reads them."""
    return np.unique(np.exp(rows[rows[:, 0] == rows[:, 1], 0]))


def _log_lik_at_zero(rows: Array, likelihood: SurvivalLikelihood) -> float:
    r""":math:`\sum_i \log p(y_i | f_i = 0)` over a chunk of rows (the intercept-only model's share)."""
    return float(np.sum(likelihood.log_lik(rows, np.zeros(rows.shape[0]))))


@dataclass(frozen=True)
class _Bands:
    """A fitted ``GPSurvivalRegressor`` whose survival (or cumulative hazard) function and band come back side by
    side, ``(rows, 3T)``, so that one lazy block holds all three."""

    local: GPSurvivalRegressor

    def side_by_side(self, X: Array, times: Array, level: float, cumulative: bool) -> Array:
        local = self.local
        method = local.predict_cumulative_hazard_function if cumulative else local.predict_survival_function
        return np.hstack(method(X, times, True, level))


# ------------------------------------------------------------------ the estimator
class DaskGPSurvivalRegressor(DaskSparseFit):
    r"""Sparse (FITC) GP survival regression by EP on a Dask cluster (module docstring), scikit-survival's interface.

    Its fit equals ``GPSurvivalRegressor(kernel, likelihood=..., rule=EP(), inducing_points=Z)`` on the same rows
    (summation order aside), and its predictions are those of that fitted model (:meth:`to_local`).

    Parameters
    ----------
    client : distributed.Client or None
        ``None``: ``distributed.default_client()``.
    kernel : sklearn Kernel, default ``ConstantKernel(1.0) * RBF(1.0)``
        As :class:`~relaxep.GPSurvivalRegressor`'s; learning it needs ``RBF`` or ``ConstantKernel * RBF``.
    likelihood : {"weibull", "loglogistic", "lognormal", "coxph"} or SurvivalLikelihood, default "weibull"
        As :class:`~relaxep.GPSurvivalRegressor`'s.
    rule : SiteRule or None, default None (``EP()``)
        Run with the parallel schedule on the shards; ``"auto"`` and inference methods are refused (as
        :class:`~relaxep.DaskGPClassifier`).
    jitter : float, default 1e-6
        Latent jitter, as ``GPSurvivalRegressor``'s.
    inducing_points, learn_inducing_points, inducing_init, optimizer, optimizer_subset, optimizer_maxiter,
    max_sweeps, tol, min_step, random_state, timeout, prior
        As :class:`~relaxep.DaskGPClassifier`'s (``optimizer_subset`` rows gathered to learn on; ``None``: on all
        shards); ``prior`` scaled as ``GPSurvivalRegressor``'s.

    Attributes
    ----------
    kernel_, likelihood_, inducing_points_, log_marginal_likelihood_value_, unique_times_
        As :class:`~relaxep.GPSurvivalRegressor`'s.
    result_ : ShardedResult
        The final run on the shards.
    """

    _owner = "DaskGPSurvivalRegressor"
    search_policy = ROBUST  # as GPSurvivalRegressor's

    def __init__(
        self,
        client: Any = None,
        kernel: Kernel | None = None,
        likelihood: str | SurvivalLikelihood = "weibull",
        *,
        rule: SiteRule | None = None,
        jitter: float = 1e-6,
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

    def _check_options(self) -> tuple[SiteRule, SurvivalLikelihood]:
        """The rule and a fresh likelihood, and the numeric parameters, checked before any Dask work."""
        rule = self._check_common("GPSurvivalRegressor")
        likelihood = survival_likelihood(self.likelihood)
        check_jitter(self.jitter)
        return rule, likelihood

    def fit(self, X: Any, y: Any) -> DaskGPSurvivalRegressor:
        """Fit on a Dask array ``X`` (n x d, chunked by rows only) and survival targets ``y``; numpy is scattered.

        Parameters
        ----------
        X : dask or numpy array of shape (n, d)
        y : numpy survival targets or dask array of shape (n, 2)
            numpy: any form :func:`~relaxep.likelihoods.survival_targets.survival_targets` reads (scikit-survival's
            structured array, ``(time, event)`` columns, :func:`relaxep.interval_censored`); Dask: float or bool
            columns ``(time, event)``, the event 0/1 (right-censored rows).

        Returns
        -------
        self
        """
        rule, likelihood = self._check_options()  # (before importing Dask)
        da = import_dask(self._owner)
        X = self._rows(X)
        client = self._client()
        rows, checks = self._targets(y, X, da, client, likelihood)
        rows = client.persist(rows)  # (the checks, the start and the shards read it: computed once)
        unknown = ((np.nan,) * rows.numblocks[0],)
        checks.update(moments=rows.map_blocks(_block_moments, chunks=(1, 2), dtype=float))
        checks.update(times=rows.map_blocks(_block_event_times, drop_axis=1, chunks=unknown, dtype=float))
        got = dict(zip(checks, client.compute(list(checks.values()), sync=True), strict=True))
        if "checks" in got:
            self._raise_bad_time_event(got["checks"].sum(axis=0))
        count, total = got["moments"].sum(axis=0)
        self.unique_times_ = np.unique(got["times"])
        likelihood = self._start_likelihood(likelihood, rows, float(total / count), client)
        self._latent_scale = likelihood.latent_scale
        report, _ = self._fit_shards(X, rows, likelihood, rule, float(self.jitter))
        report.warn()  # (at the user's fit line)
        return self

    def _targets(self, y: Any, X: Any, da: Any, client: Any, likelihood: SurvivalLikelihood) -> tuple[Any, dict]:
        """``y`` as a Dask array of rows chunked as ``X``'s rows, and the lazy checks of a Dask ``y`` (persisted)."""
        n = X.shape[0]
        if not isinstance(y, da.Array):
            rows = likelihood.read_targets(y)  # (every check, on the client)
            if rows.shape[0] != n:
                raise ValueError(f"y has {rows.shape[0]} rows but X has {n}")
            return da.from_array(rows, chunks=(X.chunks[0], 2)), {}
        if y.dtype.names is not None or y.ndim != 2 or y.shape[1] != 2:
            raise ValueError(
                f"y: a Dask array of targets must have shape (n, 2), columns (time, event); got shape {y.shape} and "
                f"dtype {y.dtype} (a structured dtype does not chunk well in Dask: pass a numpy structured array, or "
                "da.stack([time, event], axis=1))"
            )
        if not (y.dtype == np.bool_ or np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)):
            raise TypeError(f"y: the (time, event) columns must be real numbers; got dtype {y.dtype}")
        if y.shape[0] != n:
            raise ValueError(f"y has {y.shape[0]} rows but X has {n}")
        y = client.persist(y.astype(float).rechunk((X.chunks[0], -1)))
        checks = {"checks": y.map_blocks(_block_checks, chunks=(1, 3), dtype=float)}
        return y.map_blocks(_time_event_rows, dtype=float), checks

    @staticmethod
    def _raise_bad_time_event(counts: Array) -> None:
        bad_time, bad_event, events = counts
        if bad_time:
            raise ValueError(
                f"y[:, 0] (the time) must be finite and positive (times > 0); {int(bad_time)} rows are not"
            )
        if bad_event:
            raise ValueError(
                f"y[:, 1] (the event) must be boolean or 0/1 (columns (time, event)); {int(bad_event)} rows"
            )
        if not events:
            raise ValueError("y: every row is censored (no event); the event times are not identified")

    def _start_likelihood(
        self, likelihood: SurvivalLikelihood, rows: Any, mean_log_time: float, client: Any
    ) -> SurvivalLikelihood:
        """The likelihood's own start (:meth:`~relaxep.likelihoods.SurvivalLikelihood.start_from`) from the rows where
        they are: :math:`\\sum_i \\log p(y_i | f_i = 0)` as a sum over the row chunks (computed on the first
        evaluation), the rows gathered only where the likelihood asks (a PH model's baseline)."""
        blocks: list[Any] = []

        def total(at: SurvivalLikelihood) -> float:
            if not blocks:
                blocks.extend(client.compute(rows.to_delayed().ravel().tolist()))
            timeout = check_timeout(self.timeout)
            parts = gather_in_order(
                client, [client.submit(_log_lik_at_zero, b, at, pure=False) for b in blocks], timeout
            )
            return float(sum(parts))  # (in chunk order)

        def gather() -> Array:
            return np.asarray(client.compute(rows, sync=True))

        return likelihood.start_from(SurvivalRows(mean_log_time, total, gather))

    def _output_scales(self) -> tuple[float, ...]:
        """The latent's scale for the default priors: the intercept-only model's :math:`\\sigma` (AFT), else 1."""
        return (getattr(self, "_latent_scale", 1.0),)

    def _local_estimator(self, L_uu: Array, noise: float) -> Any:
        """The fitted ``GPSurvivalRegressor`` of :meth:`to_local`: this estimator's parameters, its posterior at the
        inducing inputs, the distinct event times."""
        local = self._local_of(GPSurvivalRegressor, rule=EP() if self.rule is None else self.rule)
        local.y_train_, local.likelihood_, local.unique_times_ = None, self.likelihood_, self.unique_times_
        local._latent_scale = self._latent_scale
        return self._hand_over(local, InducingModel, L_uu, noise)

    # ------------------------------------------------------------ predict
    def latent_mean_and_variance(self, X: Any) -> Any:
        """``GPSurvivalRegressor.latent_mean_and_variance``; two lazy Dask arrays for a Dask ``X``."""
        return self._apply(X, "latent_mean_and_variance", outputs=2)

    def predict(self, X: Any) -> Any:
        """``GPSurvivalRegressor.predict``: a risk score per row (higher: an earlier event); lazy for a Dask ``X``."""
        return self._apply(X, "predict")

    def predict_median(self, X: Any) -> Any:
        """``GPSurvivalRegressor.predict_median``: the predictive median survival time; lazy for a Dask ``X``."""
        return self._apply(X, "predict_median")

    def score(self, X: Any, y: Any) -> float:
        """Harrell's concordance of :meth:`predict` on ``(X, y)``: the risk scores computed on the cluster and
        gathered with ``y`` (a numpy target, or a Dask ``(time, event)`` array) to the client."""
        risk = self.predict(X)
        if not isinstance(risk, np.ndarray):
            risk = np.asarray(self._client().compute(risk, sync=True))
        if not isinstance(y, np.ndarray) and hasattr(y, "dask"):
            y = np.asarray(self._client().compute(y, sync=True))
        return concordance_index(y, risk)

    def predict_survival_function(
        self, X: Any, times: ArrayLike | None = None, return_band: bool = False, level: float = 0.95
    ) -> Any:
        r"""``GPSurvivalRegressor.predict_survival_function``: :math:`S_*(t | x)`, shape ``(n, len(times))`` (with
        ``return_band``, ``(S, lower, upper)``); ``(n, T)`` Dask arrays for a Dask ``X``, a row chunk a block."""
        return self._functions(X, times, return_band, level, cumulative=False)

    def predict_cumulative_hazard_function(
        self, X: Any, times: ArrayLike | None = None, return_band: bool = False, level: float = 0.95
    ) -> Any:
        r"""``GPSurvivalRegressor.predict_cumulative_hazard_function``: :math:`H_*(t) = -\log S_*(t)`, as
        :meth:`predict_survival_function`."""
        return self._functions(X, times, return_band, level, cumulative=True)

    def _functions(self, X: Any, times: Any, return_band: bool, level: float, cumulative: bool) -> Any:
        method = "predict_cumulative_hazard_function" if cumulative else "predict_survival_function"
        X = self._test_rows(X)
        if isinstance(X, np.ndarray):
            return getattr(self._local, method)(X, times, return_band, level)
        t = self._local._times(times)
        if not return_band:
            return lazy_map(self._local, X, method, columns=t.size, times=t)
        check_unit_interval(level, "level")  # (here, not when a block is computed)
        out = lazy_map(
            _Bands(self._local), X, "side_by_side", columns=3 * t.size, times=t, level=level, cumulative=cumulative
        )
        return tuple(out[:, k * t.size : (k + 1) * t.size] for k in range(3))

    def __sklearn_tags__(self):
        tags = BaseEstimator.__sklearn_tags__(self)
        tags.target_tags.required = True
        return tags
