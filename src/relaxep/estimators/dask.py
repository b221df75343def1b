r"""Sparse EP beyond one machine: ``DaskGPClassifier`` on Dask arrays whose row chunks stay on the workers.

Following the conventions of LightGBM's and XGBoost's Dask estimators: ``client=None`` uses
the default client (``distributed.default_client()``); ``fit`` takes Dask arrays (numpy is
accepted and scattered), ``decision_function``, ``predict_proba``, ``predict_log_proba`` and ``predict``
return a lazy Dask array for a Dask array.

The posterior is the FITC posterior of :mod:`relaxep.posterior.sparse` with the parallel
schedule of :class:`~relaxep.inference.schedules.Parallel`, reorganised so that nothing of size
:math:`n` leaves a worker.  Each shard (one row chunk) holds its inputs, labels,
:math:`V_s^\top = K_{s,u}L_{uu}^{-\top}`, :math:`g_s` (both from
:func:`~relaxep.posterior._sparse_linalg.sparse_prior_rows`, as ``SparsePrior`` builds its own),
its sites and its last proposals.  The shards run the same pure block functions as the
single-process sweep; one sweep is

1. **map** (broadcast :math:`L_B^{-1}` and :math:`m`, :math:`O(M^2)`): the shard's marginals
   (:func:`~relaxep.posterior._sparse_linalg.shard_marginals`), the convergence statistic
   against its previous marginals (:func:`~relaxep.inference.method.marginal_change`), its
   terms of the EP evidence (:func:`~relaxep.inference.evidence.site_evidence_terms`) and the
   rule's proposals (:func:`~relaxep.inference.schedules.parallel_proposals`); back come scalars
   (largest change, counts of improper cavities, the inner products of the damping rule,
   the evidence terms' sum);
2. **map** (broadcast the step :math:`s`): the candidate sites
   :math:`\tau + s(\tau^* - \tau)` and their natural-parameter sums
   :math:`\sum_i w_i v_iv_i^\top` (:math:`M \times M`), :math:`\sum_i\beta_i v_i` (:math:`M`),
   :math:`\sum_i\log d_i`;
3. **reduce** on the client: :math:`B = I + \sum_s C_s`, its Cholesky factor and
   :math:`m = B^{-1}b` (an improper :math:`B` halves the step and repeats 2; the step is the
   parallel schedule's :class:`~relaxep.inference.schedules.AdaptiveStep`, the statistic goes to a
   :class:`~relaxep.inference.method.ConvergenceMonitor`).

So the traffic per sweep is :math:`O(M^2)` per shard, never :math:`O(n)`, and the iterates
are those of ``GPClassifier(..., inducing_points=..., schedule="parallel")`` with the same
site rule (summation order aside): the fit equals the single-process one, and so do the predictions
(the same log-odds, through the likelihood's ``predict_log_odds``, and the same class at a tie).  Learning the
kernel and the inducing inputs either runs on the client on ``optimizer_subset`` rows drawn
from the cluster (the single-process code on the same rows), or, with
``optimizer_subset=None``, on all shards: each evaluation of the evidence rebuilds the shards'
prior rows (a map), runs EP on them (warm-started from the last converged sites, as
``GPClassifier`` does) and maps the gradient (:mod:`relaxep.posterior.sparse_gradient`; back
come :math:`M \times M`, :math:`M \times d` and scalars per shard).

Pointing it at an existing cluster::

    from dask.distributed import Client
    client = Client("tcp://scheduler:8786")
    clf = DaskGPClassifier(client=client, inducing_points=200).fit(X, y)  # X, y: dask arrays
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel
from sklearn.utils.validation import check_is_fitted

from relaxep._typing import Array
from relaxep._validation import check_positive_int, check_positive_number
from relaxep.errors import DivergenceError, KernelNotPositiveDefiniteError
from relaxep.estimators._checks import check_kernel, check_likelihood
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._models import _LatentModel, _SparsePriors, label_of, log_proba_of, proba_of
from relaxep.estimators._plan import SparseFit, resolve_optimizer
from relaxep.estimators._search import FitReport, _EvidenceSearch, scored
from relaxep.estimators._stochastic import StochasticOptions, learn_stochastic, tied_start
from relaxep.inference.sharded import ShardedFITC, ShardedResult, log_odds_block
from relaxep.likelihoods import BinaryLikelihood, Likelihood, NoisyProbit
from relaxep.posterior.sparse_gradient import as_sparse_kernel
from relaxep.sites import EP, SiteRule

__all__ = ["DaskGPClassifier"]

_LIKELIHOODS = (
    "None or a binary relaxep likelihood instance (relaxep.likelihoods.BinaryLikelihood: Probit(), Logistic(), "
    "NoisyProbit(eps, scale) or NoisyStep(eps))"
)


def _two_columns(d: Any, columns: Callable[[Array], Array]) -> Any:
    """``columns(d)``, block by block for a Dask array (a lazy ``(n, 2)`` Dask array)."""
    if isinstance(d, np.ndarray):
        return columns(d)
    return d.map_blocks(columns, new_axis=1, chunks=(d.chunks[0], (2,)), dtype=float)


def _deprecated(name: str, field: str) -> property:
    """A fitted attribute that became ``result_.<field>`` (a ``FutureWarning``; removed in 0.4)."""

    def get(self: DaskGPClassifier) -> Any:
        result = self.result_  # (unfitted: AttributeError, so hasattr is False)
        warnings.warn(
            f"DaskGPClassifier.{name} is deprecated since 0.3: use result_.{field} instead; removed in 0.4",
            FutureWarning,
            stacklevel=2,
        )
        return getattr(result, field)

    get.__doc__ = f"Deprecated since 0.3 (removed in 0.4): ``result_.{field}``."
    return property(get)


# ------------------------------------------------------------------ the estimator
class DaskGPClassifier(ClassifierMixin, BaseEstimator):
    r"""Sparse (FITC) EP, Power EP or Relaxed EP classification on a Dask cluster (module docstring).

    Parameters
    ----------
    client : distributed.Client or None
        ``None``: ``distributed.default_client()``.
    kernel : sklearn Kernel, default ``ConstantKernel(1.0) * RBF(1.0)``
        As :class:`~relaxep.GPClassifier`; learning it needs ``RBF`` or ``ConstantKernel * RBF``.
    likelihood : BinaryLikelihood, default ``NoisyProbit(eps=0.01, scale=1.0)``
        As :class:`~relaxep.GPClassifier`, binary likelihoods only (``Probit()``, ``Logistic()``,
        ``NoisyProbit(eps, scale)``, ``NoisyStep(eps)``).
    rule : SiteRule or None, default None (``EP()``)
        A site rule (``EP()``, ``PowerEP(u)``, ``RelaxedEP(c)``, ``FractionalEP(f)``), run with the
        parallel schedule on the shards.  The one default that differs from ``GPClassifier``'s
        (``"auto"``): ``"auto"`` and inference methods (``ConvergentEP()``, ``DoubleLoopEP()``) are
        refused with a ``TypeError``.  ``"auto"`` is EP with convergent fallback stages, and those
        stages are inference methods that update one posterior held in one process; the shards
        run parallel site updates, so ``"auto"`` here could only mean EP without its fallback.
        Where EP does not converge, damp it (``EP(damping=0.5)``) or relax it (``RelaxedEP(c)``),
        or fit ``GPClassifier`` on one machine.
    inducing_points : int or array of shape (M, d), default 200
    learn_inducing_points, inducing_init, max_sweeps, tol, jitter, random_state
        As :class:`~relaxep.GPClassifier`.
    optimizer : "auto", "fmin_l_bfgs_b", "stochastic", callable or None, default "auto"
        As :class:`~relaxep.GPClassifier`: ``"auto"`` is ``"stochastic"`` with
        ``optimizer_subset=None`` on 20 000 rows or more, else ``"fmin_l_bfgs_b"`` (so with the
        default ``optimizer_subset`` L-BFGS-B on the subset).  ``None`` skips learning.
    optimizer_subset : int or None, default 20000
        Rows gathered from the cluster to learn the kernel and inducing inputs on (the
        evidence optimisation runs on the client; ``GPClassifier``'s default is ``None``, all
        rows in one process); ``None``: learn on all shards (module docstring): by L-BFGS-B on
        the full evidence, or with ``optimizer="stochastic"`` (``"auto"`` from 20 000 rows) by the
        stochastic search, each step one map over the shards' minibatches (each shard draws its
        share of the 1000 rows and sends back ``M x M`` sums).
    optimizer_maxiter : int or None
        As :class:`~relaxep.GPClassifier`.
    min_step : float, default 1/1024
        The parallel schedule's smallest step.

    Attributes
    ----------
    classes_, kernel_, inducing_points_, log_marginal_likelihood_value_
    result_ : ShardedResult
        The final run on the shards: ``status`` (``"converged"`` or ``"max_sweeps"``; a
        ``"diverged"`` run raises :class:`~relaxep.DivergenceError`), ``converged``, ``trace``,
        ``n_sweeps``, ``log_evidence`` and the ``M x M`` factor the predictions use.
    status_, n_sweeps_, trace_
        Deprecated since 0.3 (a ``FutureWarning``; removed in 0.4): ``result_.status``,
        ``result_.n_sweeps``, ``result_.trace``.
    site_precision_, site_mean_precision_ : ndarray
        Gathered from the shards (only with ``fit(..., gather_sites=True)``).
    """

    status_ = _deprecated("status_", "status")
    n_sweeps_ = _deprecated("n_sweeps_", "n_sweeps")
    trace_ = _deprecated("trace_", "trace")

    def __init__(
        self,
        client: Any = None,
        kernel: Kernel | None = None,
        likelihood: BinaryLikelihood | None = None,
        rule: SiteRule | None = None,
        inducing_points: int | ArrayLike = 200,
        learn_inducing_points: bool = True,
        inducing_init: str = "kmeans",
        optimizer: str | Callable | None = "auto",
        optimizer_subset: int | None = 20_000,
        optimizer_maxiter: int | None = None,
        max_sweeps: int = 200,
        tol: float = 1e-4,
        jitter: float = 1e-6,
        min_step: float = 1.0 / 1024,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        self.client = client
        self.kernel = kernel
        self.likelihood = likelihood
        self.rule = rule
        self.inducing_points = inducing_points
        self.learn_inducing_points = learn_inducing_points
        self.inducing_init = inducing_init
        self.optimizer = optimizer
        self.optimizer_subset = optimizer_subset
        self.optimizer_maxiter = optimizer_maxiter
        self.max_sweeps = max_sweeps
        self.tol = tol
        self.jitter = jitter
        self.min_step = min_step
        self.random_state = random_state

    def _client(self) -> Any:
        if self.client is not None:
            return self.client
        from distributed import default_client

        return default_client()

    def _check_parameters(self) -> tuple[SiteRule, BinaryLikelihood]:
        """The rule and the likelihood (defaults filled in), and the kernel, checked before any Dask work."""
        rule = EP() if self.rule is None else self.rule
        if not isinstance(rule, SiteRule):
            raise TypeError(
                "rule must be a SiteRule (EP(), PowerEP(u), RelaxedEP(c) or FractionalEP(f)), run by parallel site "
                f"updates on the shards; got {rule!r}: 'auto' and inference methods such as ConvergentEP update "
                "one posterior in one process (use GPClassifier for them)"
            )
        check_likelihood(self.likelihood, _LIKELIHOODS, (BinaryLikelihood,))
        check_kernel(self.kernel)
        resolve_optimizer(self.optimizer, sparse=True, n=0, subset=None, n_restarts=0)  # a known name
        likelihood = NoisyProbit(0.01, 1.0) if self.likelihood is None else self.likelihood
        return rule, likelihood

    def fit(self, X: Any, y: Any, gather_sites: bool = False) -> DaskGPClassifier:
        """Fit on Dask arrays ``X`` (n x d, chunked by rows only) and ``y`` (n,); numpy arrays are scattered.

        Parameters
        ----------
        X : dask or numpy array of shape (n, d)
        y : dask or numpy array of shape (n,)
            Labels of exactly two classes.
        gather_sites : bool, default False
            Gather the sites from the shards (``site_precision_``, ``site_mean_precision_``; ``O(n)``).

        Returns
        -------
        self
        """
        rule, likelihood = self._check_parameters()  # (before importing Dask: no Dask work for a bad parameter)
        max_sweeps = check_positive_int(self.max_sweeps, "max_sweeps")
        tol = check_positive_number(self.tol, "tol")
        import dask.array as da

        X = X if isinstance(X, da.Array) else da.from_array(np.asarray(X, dtype=float), chunks=(10_000, -1))
        y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y), chunks=X.chunks[0])
        if X.ndim != 2 or len(X.chunks[1]) != 1:
            raise ValueError(f"X must be 2-d and chunked along rows only, got chunks {X.chunks}")
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}")
        n, d = X.shape
        kernel = ConstantKernel(1.0) * RBF(1.0) if self.kernel is None else clone(self.kernel)
        plan = SparseFit.plan(
            _Rows(X), inducing_points=self.inducing_points, inducing_init=self.inducing_init,
            learn_inducing_points=self.learn_inducing_points, optimizer=self.optimizer,
            optimizer_subset=self.optimizer_subset, optimizer_maxiter=self.optimizer_maxiter, n_restarts=0,
            random_state=self.random_state, n_learned=kernel.n_dims,
        )  # fmt: skip
        if plan.learns:
            as_sparse_kernel(kernel, d)  # refuses, before any work, a kernel it has no gradient for
        client = self._client()
        X = X.astype(float)
        y = y.rechunk(X.chunks[0])
        classes = np.unique(da.unique(y).compute())
        if classes.size != 2:
            raise ValueError(f"DaskGPClassifier needs labels of exactly two classes, got {classes.size}")
        self.classes_ = classes
        self.kernel_ = kernel
        Z = plan.Z
        shards = ShardedFITC(
            client, X, y, classes, float(self.jitter), rule, likelihood, max_sweeps, tol, float(self.min_step)
        )
        search = _EvidenceSearch(plan.method, 0, plan.maxiter)  # the -inf policy and the optimiser
        if plan.stochastic:
            Z, likelihood = self._learn_stochastic(shards, likelihood, plan)
        elif plan.learns and plan.subset is not None and plan.subset < n:
            # the single-process model on rows gathered from the cluster, drawn as GPClassifier draws them
            idx = np.sort(plan.rng.choice(n, plan.subset, replace=False))
            X_sub, y_sub = np.asarray(X[idx]), np.asarray(y[idx])
            model = _LatentModel(
                _SparsePriors(self.jitter), self.kernel_, likelihood, rule, search,
                max_sweeps=self.max_sweeps, tol=self.tol, Z=Z, learn_z=plan.learn_z,
            )  # fmt: skip
            model.learn(X_sub, np.where(y_sub == classes[1], 1.0, -1.0), plan.rng)
            Z = model.Z
        elif plan.learns:
            Z = self._learn_on_shards(shards, search, plan, d)
        self.inducing_points_ = np.array(Z)
        shards.set_prior(self.kernel_, self.inducing_points_)
        run = shards.infer()
        if run.status == "diverged":
            raise DivergenceError(f"{rule!r} diverged on the shards; try damping or RelaxedEP")
        self.result_: ShardedResult = run
        self.log_marginal_likelihood_value_ = run.log_evidence
        self._L_uu, self._likelihood, self._noise = shards.L_uu, likelihood, float(self.jitter)
        if gather_sites:
            self.site_precision_, self.site_mean_precision_ = shards.sites()
        for message in FitReport(run.status, run.n_sweeps, run.trace).warnings:
            warnings.warn(message, ConvergenceWarning, stacklevel=2)
        return self

    def _learn_stochastic(self, shards: ShardedFITC, likelihood: Likelihood, plan: SparseFit) -> tuple[Array, Any]:
        """The stochastic search with each step one map over the shards' minibatches (back come ``M x M``
        sums); sets ``kernel_.theta``, starts the shards from the learned tied site and returns the inducing
        inputs and the likelihood."""
        n, scale = shards.feature_scale()
        options = StochasticOptions.for_steps(plan.maxiter)
        batches = shards.minibatches(options.batch_size, np.random.default_rng(plan.rng.randint(2**31 - 1)))
        noise = float(self.jitter)
        learned = learn_stochastic(
            self.kernel_, likelihood, plan.Z, n, scale, noise, plan.learn_theta, plan.learn_z, batches, options
        )
        self.kernel_.theta = learned.kernel.theta
        shards.likelihood = learned.likelihood
        shards.start_from_tied(tied_start(learned, noise))
        return learned.Z, learned.likelihood

    def _learn_on_shards(self, shards: ShardedFITC, search: _EvidenceSearch, plan: SparseFit, d: int) -> Array:
        """Maximise the sparse EP evidence over all shards (the search of ``GPClassifier``'s sparse model, each
        evaluation rebuilding the shards' prior, running EP on them and mapping the gradient); sets
        ``kernel_.theta`` and returns the inducing inputs."""
        hyper = HyperVector(self.kernel_, None, plan.Z if plan.learn_z else None)  # (the shards' likelihood is fixed)
        best = search.maximise(partial(_shards_evidence, shards=shards, hyper=hyper, Z0=plan.Z, d=d), hyper, plan.rng)
        if best is None:
            return plan.Z
        kernel, _, Z = hyper.split(best)
        self.kernel_.theta = kernel.theta
        return plan.Z if Z is None else np.array(Z)

    # ------------------------------------------------------------ predict
    def _test_rows(self, X: Any) -> Any:
        """``X`` as floats: a Dask array in one column chunk, or a numpy array; ``d`` columns either way."""
        import dask.array as da

        check_is_fitted(self, "result_")
        d = self.inducing_points_.shape[1]
        X = X.astype(float).rechunk({1: -1}) if isinstance(X, da.Array) else np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != d:
            raise ValueError(f"X must have shape (n, {d}) (the training inputs' {d} features), got {X.shape}")
        return X

    def decision_function(self, X: Any) -> Any:
        r"""The log-odds of the predictive, :math:`\log P(y_* = c_1) - \log P(y_* = c_0)`, as ``GPClassifier``'s.

        The likelihood's ``predict_log_odds`` at FITC's predictive mean and variance
        (:func:`~relaxep.inference.sharded.log_odds_block`), computed in log space; positive where
        :meth:`predict` gives ``classes_[1]``, and ranking test points as :meth:`predict_proba` does.

        Parameters
        ----------
        X : dask or numpy array of shape (n, d)

        Returns
        -------
        dask or numpy array of shape (n,)
            A lazy Dask array (one block per row chunk of ``X``) for a Dask array, else a numpy array.
        """
        X = self._test_rows(X)
        result = self.result_
        block = partial(
            log_odds_block, kernel=self.kernel_, Z=self.inducing_points_, L_uu=self._L_uu,
            chol_inv=result.chol_inv, m=result.m, noise=self._noise, likelihood=self._likelihood,
        )  # fmt: skip
        if isinstance(X, np.ndarray):
            return block(X)
        return X.map_blocks(block, drop_axis=1, dtype=float)

    def predict_log_proba(self, X: Any) -> Any:
        """Log class probabilities (columns in ``classes_`` order): ``[log_expit(-d), log_expit(d)]`` of the
        log-odds ``d`` (:meth:`decision_function`); a Dask array for a Dask array."""
        return _two_columns(self.decision_function(X), log_proba_of)

    def predict_proba(self, X: Any) -> Any:
        """Class probabilities (columns in ``classes_`` order): ``[expit(-d), expit(d)]`` of the log-odds ``d``
        (:meth:`decision_function`), as ``GPClassifier``'s; a Dask array for a Dask array."""
        return _two_columns(self.decision_function(X), proba_of)

    def predict(self, X: Any) -> Any:
        """``classes_[1]`` where :meth:`decision_function` is positive, else ``classes_[0]`` (a probability
        of exactly 0.5 gives ``classes_[0]``, as ``GPClassifier``); a Dask array for a Dask array."""
        d = self.decision_function(X)
        if isinstance(d, np.ndarray):
            return label_of(d, self.classes_)
        return d.map_blocks(label_of, classes=self.classes_, dtype=self.classes_.dtype)


def _shards_evidence(
    x: Array, eval_gradient: bool, shards: ShardedFITC, hyper: HyperVector, Z0: Array, d: int
) -> tuple[float, Any]:
    """The sparse EP evidence over the shards at the optimiser's ``x`` (the shards' prior rebuilt, EP run on them
    from the warm start) and, if asked, its gradient (one map)."""
    kernel, _, Z = hyper.split(x)
    try:
        shards.set_prior(kernel, Z0 if Z is None else Z)
    except KernelNotPositiveDefiniteError:
        return -np.inf, (np.zeros_like(x) if eval_gradient else None)
    run = shards.infer()
    if not eval_gradient:
        return scored(run.status, run.log_evidence, None, x)

    def gradient() -> Array:
        g_theta, g_z = shards.gradient(as_sparse_kernel(kernel, d), run)
        return hyper.pack(g_theta, g_z)

    return scored(run.status, run.log_evidence, gradient, x)


class _Rows:
    """What :func:`initial_inducing_points` needs of a Dask array: ``shape`` and rows by index, as numpy."""

    def __init__(self, X: Any) -> None:
        self._X = X
        self.shape = X.shape

    def __getitem__(self, index: Array) -> Array:
        order = np.argsort(index)
        rows = np.asarray(self._X[np.asarray(index)[order]])
        out = np.empty_like(rows)
        out[order] = rows
        return out
