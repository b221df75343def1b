r"""Sparse EP beyond one machine: ``DaskGPClassifier`` on Dask arrays whose row chunks stay on the workers.

Following the conventions of LightGBM's and XGBoost's Dask estimators: ``client=None`` uses
the default client (``distributed.default_client()``); ``fit`` takes Dask arrays (numpy is
accepted and scattered), ``predict_proba`` returns a Dask array for a Dask array.

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
site rule (summation order aside): the fit equals the single-process one.  Learning the
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

from functools import partial
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel
from sklearn.utils.validation import check_is_fitted, check_random_state

from relaxep._typing import Array
from relaxep._validation import check_positive_int, check_positive_number
from relaxep.errors import DivergenceError, KernelNotPositiveDefiniteError
from relaxep.estimators._inducing import check_inducing_points, flat, initial_inducing_points, split_parameters
from relaxep.estimators._models import _LatentModel, _SparsePriors
from relaxep.estimators._search import _EvidenceSearch, scored, warn_unconverged
from relaxep.estimators._stochastic import StochasticOptions, learn_stochastic, stochastic_search, tied_start
from relaxep.inference.sharded import ShardedFITC, predict_block
from relaxep.likelihoods import Likelihood, NoisyProbit
from relaxep.posterior.sparse_gradient import (
    as_sparse_kernel,
)
from relaxep.sites import EP, SiteRule

__all__ = ["DaskGPClassifier"]


def _label(p1: Array, classes: Array) -> Array:
    return classes[(p1 >= 0.5).astype(int)]


# ------------------------------------------------------------------ the estimator
class DaskGPClassifier(ClassifierMixin, BaseEstimator):
    r"""Sparse (FITC) EP, Power EP or Relaxed EP classification on a Dask cluster (module docstring).

    Parameters
    ----------
    client : distributed.Client or None
        ``None``: ``distributed.default_client()``.
    kernel, likelihood, jitter, max_sweeps, tol, random_state
        As :class:`~relaxep.GPClassifier`.
    rule : SiteRule, default ``EP()``
        A site rule (``EP()``, ``PowerEP(u)``, ``RelaxedEP(c)``, ``FractionalEP(f)``), run with the
        parallel schedule; ``"auto"`` and inference methods are single-process only.
    inducing_points : int or array of shape (M, d), default 200
    learn_inducing_points, inducing_init, optimizer, optimizer_maxiter
        As :class:`~relaxep.GPClassifier`.
    optimizer_subset : int or None, default 20000
        Rows gathered from the cluster to learn the kernel and inducing inputs on (the
        evidence optimisation runs on the client); ``None``: learn on all shards (module
        docstring): by L-BFGS-B on the full evidence, or with ``optimizer="stochastic"`` (``"auto"``
        from 20 000 rows) by the stochastic search, each step one map over the shards' minibatches
        (each shard draws its share of the 1000 rows and sends back ``M x M`` sums).
        ``optimizer=None`` skips learning.

    Attributes
    ----------
    classes_, kernel_, inducing_points_, log_marginal_likelihood_value_
    status_ : str
        ``"converged"``, ``"max_sweeps"`` or ``"diverged"`` (raised as :class:`~relaxep.DivergenceError`).
    n_sweeps_ : int
    site_precision_, site_mean_precision_ : ndarray
        Gathered from the shards (only with ``fit(..., gather_sites=True)``).
    """

    def __init__(
        self,
        client: Any = None,
        kernel: Kernel | None = None,
        likelihood: Likelihood | None = None,
        rule: SiteRule | None = None,
        inducing_points: int | ArrayLike = 200,
        learn_inducing_points: bool = True,
        inducing_init: str = "kmeans",
        optimizer: str | None = "fmin_l_bfgs_b",
        optimizer_subset: int = 20_000,
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

    def fit(self, X: Any, y: Any, gather_sites: bool = False) -> DaskGPClassifier:
        """Fit on Dask arrays ``X`` (n x d, chunked by rows only) and ``y`` (n,); numpy arrays are scattered."""
        import dask.array as da

        client = self._client()
        rule = EP() if self.rule is None else self.rule
        if not isinstance(rule, SiteRule):
            raise TypeError(f"rule must be a SiteRule (the parallel schedule runs it), got {rule!r}")
        likelihood = NoisyProbit(0.01, 1.0) if self.likelihood is None else self.likelihood
        if not isinstance(likelihood, Likelihood):
            raise TypeError(f"likelihood must be a relaxep Likelihood, got {likelihood!r}")
        max_sweeps = check_positive_int(self.max_sweeps, "max_sweeps")
        tol = check_positive_number(self.tol, "tol")
        X = X if isinstance(X, da.Array) else da.from_array(np.asarray(X, dtype=float), chunks=(10_000, -1))
        y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y), chunks=X.chunks[0])
        if X.ndim != 2 or len(X.chunks[1]) != 1:
            raise ValueError(f"X must be 2-d and chunked along rows only, got chunks {X.chunks}")
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}")
        X = X.astype(float)
        y = y.rechunk(X.chunks[0])
        classes = np.unique(da.unique(y).compute())
        if classes.size != 2:
            raise ValueError(f"DaskGPClassifier needs labels of exactly two classes, got {classes.size}")
        self.classes_ = classes
        n, d = X.shape
        spec = check_inducing_points(self.inducing_points, d)
        rng = check_random_state(self.random_state)
        self.kernel_ = ConstantKernel(1.0) * RBF(1.0) if self.kernel is None else clone(self.kernel)
        Z = initial_inducing_points(_Rows(X), spec, self.inducing_init, rng)
        shards = ShardedFITC(
            client, X, y, classes, float(self.jitter), rule, likelihood, max_sweeps, tol, float(self.min_step)
        )
        search = _EvidenceSearch(self.optimizer, 0, self.optimizer_maxiter)  # restarts, -inf policy, optimiser
        learn_z = bool(self.learn_inducing_points)
        if self.optimizer is not None and (self.kernel_.n_dims > 0 or learn_z):
            as_sparse_kernel(self.kernel_, d)  # refuses, before any work, a kernel it has no gradient for
            if stochastic_search(self, n):
                Z, likelihood = self._learn_stochastic(shards, likelihood, Z, learn_z, rng)
            elif self.optimizer_subset is not None and self.optimizer_subset < n:
                # the single-process model on rows gathered from the cluster, drawn as GPClassifier draws them
                idx = np.sort(rng.choice(n, int(self.optimizer_subset), replace=False))
                X_sub, y_sub = np.asarray(X[idx]), np.asarray(y[idx])
                model = _LatentModel(
                    _SparsePriors(self.jitter), self.kernel_, likelihood, rule, search,
                    max_sweeps=self.max_sweeps, tol=self.tol, Z=Z, learn_z=learn_z,
                )  # fmt: skip
                model.learn(X_sub, np.where(y_sub == classes[1], 1.0, -1.0), rng)
                Z = model.Z
            else:
                Z = self._learn_on_shards(shards, search, Z, learn_z, d, rng)
        self.inducing_points_ = np.array(Z)
        shards.set_prior(self.kernel_, self.inducing_points_)
        run = shards.infer()
        if run["status"] == "diverged":
            raise DivergenceError(f"{rule!r} diverged on the shards; try damping or RelaxedEP")
        self.status_, self.n_sweeps_, self.trace_ = run["status"], len(run["trace"]), np.asarray(run["trace"])
        self.log_marginal_likelihood_value_ = run["log_evidence"]
        self._L_uu, self._chol_inv, self._m, self._likelihood = shards.L_uu, run["chol_inv"], run["m"], likelihood
        if gather_sites:
            self.site_precision_, self.site_mean_precision_ = shards.sites()
        if run["status"] != "converged":
            warn_unconverged(run["status"], self.n_sweeps_, run["trace"])
        return self

    def _learn_stochastic(
        self, shards: ShardedFITC, likelihood: Likelihood, Z0: Array, learn_z: bool, rng: Any
    ) -> tuple[Array, Likelihood]:
        """The stochastic search with each step one map over the shards' minibatches (back come ``M x M``
        sums); sets ``kernel_.theta``, starts the shards from the learned tied site and returns the inducing
        inputs and the likelihood."""
        n, scale = shards.feature_scale()
        options = StochasticOptions.for_steps(self.optimizer_maxiter)
        batches = shards.minibatches(options.batch_size, np.random.default_rng(rng.randint(2**31 - 1)))
        noise = float(self.jitter)
        learned = learn_stochastic(
            self.kernel_, likelihood, Z0, n, scale, noise, self.kernel_.n_dims > 0, learn_z, batches, options
        )
        self.kernel_.theta = learned.kernel.theta
        shards.likelihood = learned.likelihood
        shards.start_from_tied(tied_start(learned, noise))
        return learned.Z, learned.likelihood

    def _learn_on_shards(
        self, shards: ShardedFITC, search: _EvidenceSearch, Z0: Array, learn_z: bool, d: int, rng: Any
    ) -> Array:
        """Maximise the sparse EP evidence over all shards (the search of ``GPClassifier``'s sparse model, each
        evaluation rebuilding the shards' prior, running EP on them and mapping the gradient); sets
        ``kernel_.theta`` and returns the inducing inputs."""
        split = split_parameters(self.kernel_, Z0.shape, learn_z)

        def evidence(x: Array, eval_gradient: bool) -> tuple[float, Any]:
            theta, Z = split(x)
            kernel = self.kernel_.clone_with_theta(theta)
            try:
                shards.set_prior(kernel, Z0 if Z is None else Z)
            except KernelNotPositiveDefiniteError:
                return -np.inf, (np.zeros_like(x) if eval_gradient else None)
            run = shards.infer()  # warm-started on the shards, with a cold retry

            def gradient() -> Array:
                g_theta, g_z = shards.gradient(as_sparse_kernel(kernel, d), run)
                return flat(g_theta, g_z if learn_z else None)

            return scored(run["status"], run.get("log_evidence", np.nan), gradient if eval_gradient else None, x)

        best = search.maximise(
            evidence,
            self.kernel_.theta,
            self.kernel_.bounds,
            rng,
            pack=lambda theta0: flat(theta0, Z0 if learn_z else None),
            n_extra=Z0.size if learn_z else 0,
        )
        if best is None:
            return Z0
        theta, Z = split(best)
        self.kernel_.theta = theta
        return Z0 if Z is None else np.array(Z)

    def predict_proba(self, X: Any) -> Any:
        """Class probabilities (columns in ``classes_`` order); a Dask array for a Dask array."""
        import dask.array as da

        check_is_fitted(self, "_chol_inv")
        args = (self.kernel_, self.inducing_points_, self._L_uu, self._chol_inv, self._m, float(self.jitter))
        if isinstance(X, da.Array):
            block = partial(predict_block, kernel=args[0], Z=args[1], L_uu=args[2], chol_inv=args[3], m=args[4])
            p1 = X.astype(float).map_blocks(block, noise=args[5], likelihood=self._likelihood, drop_axis=1, dtype=float)
            return da.stack([1.0 - p1, p1], axis=1)
        p1 = predict_block(np.asarray(X, dtype=float), *args, self._likelihood)
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: Any) -> Any:
        """``classes_[1]`` where ``predict_proba[:, 1] >= 0.5``."""
        p = self.predict_proba(X)[:, 1]
        import dask.array as da

        if isinstance(p, da.Array):
            return p.map_blocks(_label, classes=self.classes_, dtype=self.classes_.dtype)
        return self.classes_[(p >= 0.5).astype(int)]


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
