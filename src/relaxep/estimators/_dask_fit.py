r"""What the Dask estimators share: the sparse fit on the shards and the predictions of the local estimator.

:class:`DaskSparseFit` is the base of :class:`~relaxep.estimators.dask_classifier.DaskGPClassifier` and
:class:`~relaxep.estimators.dask_regressor.DaskGPRegressor`.  Its :meth:`~DaskSparseFit._fit_shards` takes
the rows and the encoded targets as Dask arrays (labels in -1/+1, real targets, or a count and its log
exposure) and runs one plan for both (:class:`~relaxep.estimators._plan.SparseFit`): the inducing inputs
placed, the hyperparameters learned on ``optimizer_subset`` rows gathered to the client (the
single-process model on those rows), on all shards by L-BFGS-B (each evaluation of the evidence one run of
EP over the shards and one map for the gradient, the likelihood's included) or by the stochastic search
(each step one map over the shards' minibatches), then EP over all shards
(:class:`~relaxep.inference.sharded.ShardedFITC`).

The fitted estimator's predictions are those of its :meth:`~DaskSparseFit.to_local` estimator (a
``GPClassifier`` or ``GPRegressor`` holding :class:`~relaxep.estimators._inducing_model.InducingModel`),
applied to a numpy array, or lazily to each row chunk of a Dask array (:func:`lazy_map`).
"""

from __future__ import annotations

import copy
import inspect
from functools import partial
from typing import Any, ClassVar

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel
from sklearn.utils.validation import check_is_fitted

from relaxep._typing import Array
from relaxep.assessment.result import LooResult, rows_fingerprint
from relaxep.errors import DivergenceError, KernelNotPositiveDefiniteError
from relaxep.estimators._base import _GPEstimatorBase
from relaxep.estimators._checks import check_kernel
from relaxep.estimators._dask_loo import gather_loo, keep_rows
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._inducing_model import InducingModel
from relaxep.estimators._model import LooTerms
from relaxep.estimators._models import _LatentModel, _SparsePriors
from relaxep.estimators._plan import SparseFit, resolve_optimizer
from relaxep.estimators._search import FitReport, SearchPolicy, _EvidenceSearch, evidence_at
from relaxep.estimators._stochastic import StochasticOptions, learn_stochastic, tied_start
from relaxep.inference.sharded import ShardedFITC, ShardedResult
from relaxep.likelihoods import Likelihood
from relaxep.posterior.rbf import as_scaled_rbf
from relaxep.sites import EP, SiteRule

__all__ = ["DASK_EXTRA", "DaskSparseFit", "import_dask", "lazy_map"]

DASK_EXTRA = 'pip install "relaxep[dask]"'


def import_dask(owner: str) -> Any:
    """``dask.array``, with ``distributed`` present; without them a ``ModuleNotFoundError`` that says what to
    install (not a bare ``No module named 'dask'``)."""
    try:
        import dask.array as da
        import distributed  # noqa: F401
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"{owner} needs Dask and its distributed scheduler, which are not installed ({exc}): {DASK_EXTRA}",
            name=exc.name,
        ) from exc
    return da


def check_timeout(timeout: Any) -> float | None:
    """``timeout``: ``None`` or a positive number of seconds (a ``ValueError`` naming it)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be None or a positive number of seconds, got {timeout!r}")
    return float(timeout)


def _on_block(block: Array, local: Any, *more: Array, method: str, kwargs: dict, stack: bool) -> Array:
    out = getattr(local, method)(block, *(np.ravel(m) for m in more), **kwargs)
    return np.column_stack(out) if stack else out


def lazy_map(
    local: Any, X: Any, method: str, *more: Any, outputs: int = 1, columns: int = 0, dtype: Any = float, **kw: Any
) -> Any:
    """``local.<method>(X, *more, **kw)``: at once for a numpy ``X``; for a Dask ``X`` a lazy Dask array (or a
    tuple of ``outputs`` of them), one block per row chunk, each ``(rows,)`` or, with ``columns``,
    ``(rows, columns)``; ``more``: Dask arrays of one value per row, chunked as ``X``'s rows.  The local
    estimator enters the graph once (a delayed object), not once per block."""
    if isinstance(X, np.ndarray):
        return getattr(local, method)(X, *more, **kw)
    import dask
    import dask.array as da

    held = dask.delayed(local, pure=True)
    call = dask.delayed(partial(_on_block, method=method, kwargs=kw, stack=outputs > 1), pure=True)
    width = outputs if outputs > 1 else columns
    parts = [m.to_delayed().ravel() for m in more]
    blocks = []
    for i, (block, rows) in enumerate(zip(X.to_delayed().ravel(), X.chunks[0], strict=True)):
        shape = (rows, width) if width else (rows,)
        blocks.append(da.from_delayed(call(block, held, *(p[i] for p in parts)), shape=shape, dtype=dtype))
    out = da.concatenate(blocks, axis=0)
    return tuple(out[:, j] for j in range(outputs)) if outputs > 1 else out


class DaskSparseFit(_GPEstimatorBase):
    """The fit of a Dask estimator (module docstring), on the one estimator base
    (:class:`~relaxep.estimators._base._GPEstimatorBase`: its checks, its search, ``log_marginal_likelihood``,
    ``log_prior``, ``loo()`` and ``loo_predict()``; only the evidence differs, one map over the shards).  Subclasses
    store the parameters declared here (each ``__init__`` lists its own, as scikit-learn asks) and give the targets
    and ``_local_estimator``.  ``model_`` is the local estimator's
    (:class:`~relaxep.estimators._inducing_model.InducingModel`): the evidence at other hyperparameters needs the
    training rows, which stay on the cluster, and is refused with that message."""

    _owner: ClassVar[str] = "DaskSparseFit"
    #: how the search treats the runs that fail, on the optimiser's subset and on the shards alike (the
    #: one-process estimator's: :class:`~relaxep.estimators._search.SearchPolicy`)
    search_policy: ClassVar[SearchPolicy] = SearchPolicy()
    #: no restarts on the shards
    n_restarts_optimizer: int = 0

    client: Any
    kernel: Kernel | None
    rule: SiteRule | None
    inducing_points: Any
    learn_inducing_points: bool
    inducing_init: str
    optimizer: Any
    optimizer_subset: int | None
    optimizer_maxiter: int | None
    max_sweeps: int
    tol: float
    min_step: float
    random_state: Any
    timeout: float | None

    def _check_common(self, local: str) -> SiteRule:
        """The parameters the Dask estimators share, checked before any Dask work: the base's
        (:meth:`_check_parameters`: ``max_sweeps``, ``tol``, ``prior``), the kernel, the optimizer's name and
        ``timeout``; returns the rule (``None``: ``EP()``)."""
        rule = EP() if self.rule is None else self.rule
        if not isinstance(rule, SiteRule):
            raise TypeError(
                "rule must be a SiteRule (EP(), PowerEP(u), RelaxedEP(c) or FractionalEP(f)), run by parallel site "
                f"updates on the shards; got {rule!r}: 'auto' and inference methods such as ConvergentEP update "
                f"one posterior in one process (use {local} for them)"
            )
        check_kernel(self.kernel)
        self._check_parameters()
        resolve_optimizer(self.optimizer, sparse=True, n=0, subset=None, n_restarts=0)
        check_timeout(self.timeout)
        return rule

    def __sklearn_clone__(self) -> DaskSparseFit:
        """scikit-learn's ``clone`` (``GridSearchCV``, ``cross_val_score``): the parameters cloned, the client
        shared (a connection, which neither copies nor pickles)."""
        params = self.get_params(deep=False)
        client = params.pop("client")
        return type(self)(client=client, **{name: clone(value, safe=False) for name, value in params.items()})

    def __getstate__(self) -> dict:
        """Pickled without its client (``client=None``: the default client where it is fitted again); the fitted
        model pickles whole (:meth:`to_local` gives the plain estimator)."""
        state = dict(self.__dict__)
        state["client"] = None
        if "_loo_futures" in state:  # (futures of the cluster that fitted it)
            state["_loo_futures"] = None
        return state

    def _client(self) -> Any:
        if self.client is not None:
            return self.client
        from distributed import default_client

        return default_client()

    def _rows(self, X: Any) -> Any:
        """``X`` as a Dask array of floats chunked by rows only (a numpy array is cut into 10 000-row chunks)."""
        da = import_dask(self._owner)
        X = X if isinstance(X, da.Array) else da.from_array(np.asarray(X, dtype=float), chunks=(10_000, -1))
        if X.ndim != 2 or len(X.chunks[1]) != 1:
            raise ValueError(f"X must be 2-d and chunked along rows only, got chunks {X.chunks}")
        return X.astype(float)

    def _column(self, y: Any, X: Any, name: str = "y") -> Any:
        """``y`` (numpy or Dask, one value per row of ``X``) as a Dask array chunked as ``X``'s rows."""
        import dask.array as da

        y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y), chunks=X.chunks[0])
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"{name} must have shape ({X.shape[0]},), got {y.shape}")
        return y.rechunk(X.chunks[0])

    def _default_kernel(self, d: int) -> Kernel:
        """The kernel where ``kernel=None``: ``ConstantKernel(1.0) * RBF(1.0)``."""
        return ConstantKernel(1.0) * RBF(1.0)

    def _fit_shards(
        self, X: Any, targets: Any, likelihood: Likelihood, rule: SiteRule, noise: float
    ) -> tuple[FitReport, ShardedFITC]:
        """Plan, learn and run EP on the shards of ``(X, targets)``; sets ``kernel_``, ``likelihood_``,
        ``inducing_points_``, ``result_``, ``log_marginal_likelihood_value_`` and the local estimator, and returns
        the report and the shards (the caller drops them: their futures hold the shards' rows on the cluster)."""
        n, d = X.shape
        self.n_features_in_ = d
        kernel = self._default_kernel(d) if self.kernel is None else clone(self.kernel)
        n_learned = kernel.n_dims + likelihood.n_dims
        plan = SparseFit.plan(
            _Rows(X), inducing_points=self.inducing_points, inducing_init=self.inducing_init,
            learn_inducing_points=self.learn_inducing_points, optimizer=self.optimizer,
            optimizer_subset=self.optimizer_subset, optimizer_maxiter=self.optimizer_maxiter, n_restarts=0,
            random_state=self.random_state, n_learned=n_learned,
        )  # fmt: skip
        if plan.learns:
            as_scaled_rbf(kernel, d)  # refuses, before any work, a kernel it has no gradient for
        self.kernel_ = kernel
        shards = ShardedFITC(
            self._client(), X, targets, noise, rule, likelihood, self.max_sweeps, self.tol,
            float(self.min_step), check_timeout(self.timeout),
        )  # fmt: skip
        search = self._search(plan, feature_scales=None if self.prior is None else shards.feature_scale()[1])
        Z = plan.Z
        if plan.stochastic:
            Z = self._learn_stochastic(shards, plan, noise, search)
        elif plan.learns and plan.subset is not None:
            # the single-process model on rows gathered from the cluster, drawn as the local estimators draw them
            # (all of them where there are no more than optimizer_subset)
            idx = np.sort(plan.rng.choice(n, plan.subset, replace=False)) if plan.subset < n else np.arange(n)
            model = _LatentModel(
                _SparsePriors(noise), self.kernel_, shards.likelihood, rule, search, max_sweeps=self.max_sweeps,
                tol=self.tol, Z=Z, learn_z=plan.learn_z, search_stall_window=self.search_policy.stall_window,
            )  # fmt: skip
            model.learn(np.asarray(X[idx]), np.asarray(targets[idx], dtype=float), plan.rng)
            Z, shards.likelihood = model.Z, model.likelihood
        elif plan.learns:
            Z = self._learn_on_shards(shards, search, plan, d)
        self.inducing_points_ = np.array(Z)
        shards.set_prior(self.kernel_, self.inducing_points_)
        run = shards.infer()
        if run.status == "diverged":
            raise DivergenceError(f"{rule!r} diverged on the shards; try damping or RelaxedEP")
        self.result_: ShardedResult = run
        self._loo_futures = shards.submit(keep_rows)  # (left on the cluster: O(n) numbers, not the rows)
        self.likelihood_ = shards.likelihood
        self.log_marginal_likelihood_value_ = run.log_evidence
        self._local = self._local_estimator(shards.L_uu, noise)
        self.model_ = self._local.model_
        self.model_.search = search  # (its prior: log_prior())
        return FitReport(run.status, run.n_sweeps, run.trace), shards

    def _learn_stochastic(self, shards: ShardedFITC, plan: SparseFit, noise: float, search: Any) -> Array:
        """The stochastic search with each step one map over the shards' minibatches (back come ``M x M``
        sums); sets ``kernel_.theta`` and the shards' likelihood, starts the shards from the learned tied site
        and returns the inducing inputs."""
        n, scale = shards.feature_scale()
        options = StochasticOptions.for_steps(plan.maxiter)
        batches = shards.minibatches(options.batch_size, np.random.default_rng(plan.rng.randint(2**31 - 1)))
        learned = learn_stochastic(
            self.kernel_, shards.likelihood, plan.Z, n, scale, noise, plan.learn_theta, plan.learn_z, batches, options,
            log_prior=search.log_prior(HyperVector(self.kernel_, shards.likelihood)),
        )  # fmt: skip
        self.kernel_.theta = learned.kernel.theta
        shards.likelihood = learned.likelihood
        shards.start_from_tied(tied_start(learned, noise))
        return learned.Z

    def _learn_on_shards(self, shards: ShardedFITC, search: _EvidenceSearch, plan: SparseFit, d: int) -> Array:
        """Maximise the sparse EP evidence over all shards in the kernel's and the likelihood's hyperparameters
        (and ``Z``), each evaluation rebuilding the shards' prior, running EP on them and mapping the gradient;
        sets ``kernel_.theta`` and the shards' likelihood and returns the inducing inputs."""
        hyper = HyperVector(self.kernel_, shards.likelihood, plan.Z if plan.learn_z else None)
        evidence = partial(_shards_evidence, shards=shards, hyper=hyper, Z0=plan.Z, d=d)
        shards.stall_window = self.search_policy.stall_window  # (the search's runs only)
        try:
            best = search.maximise(evidence, hyper, plan.rng)
        finally:
            shards.stall_window = None
        if best is None:
            return plan.Z
        kernel, shards.likelihood, Z = hyper.split(best)
        self.kernel_.theta = kernel.theta
        return plan.Z if Z is None else np.array(Z)

    def _local_estimator(self, L_uu: Array, noise: float) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _local_of(self, local_class: type, **given: Any) -> Any:
        """The one-process estimator ``local_class`` (``GPClassifier``, ``GPRegressor``), unfitted, with each
        parameter of this estimator that it also takes (the client, ``min_step`` and ``timeout`` are the
        cluster's), ``given`` in place of some."""
        takes = inspect.signature(local_class).parameters
        return local_class(**{name: v for name, v in self.get_params(deep=False).items() if name in takes} | given)

    def _hand_over(self, local: Any, model: type[InducingModel], L_uu: Array, noise: float) -> Any:
        """``local`` (:meth:`_local_of`) fitted as this one is (for :meth:`to_local`): the learned kernel and
        inducing inputs, the final run and its evidence, and ``model`` of the posterior at the inducing inputs
        (none of the training rows: ``X_train_`` is ``None``)."""
        result = self.result_
        local.n_features_in_, local.X_train_ = self.n_features_in_, None
        local.kernel_, local.inducing_points_, local.result_ = self.kernel_, self.inducing_points_, result
        local.log_marginal_likelihood_value_ = self.log_marginal_likelihood_value_
        local.model_ = model(
            self.kernel_, self.likelihood_, self.inducing_points_, L_uu, result.chol_inv, result.m, noise, result
        )
        return local

    def to_local(self) -> Any:
        """The fitted single-process estimator (``GPClassifier`` or ``GPRegressor``) that predicts as this one does.

        It holds the posterior at the inducing inputs alone
        (:class:`~relaxep.estimators._inducing_model.InducingModel`: :math:`O(M^2 + Md)` numbers, none of the
        training rows, which stay on the cluster): it pickles, serves without Dask, and its predictions equal
        this estimator's.  ``X_train_`` is ``None``, and ``log_marginal_likelihood(theta)`` at other
        hyperparameters is refused (it needs the training rows); ``log_marginal_likelihood_value_`` is kept.
        """
        check_is_fitted(self, "result_")
        return copy.deepcopy(self._local)

    def _apply(self, X: Any, method: str, **kw: Any) -> Any:
        """The local estimator's ``method`` at ``X`` (:func:`lazy_map`), ``X`` checked first."""
        return lazy_map(self._local, self._test_rows(X), method, **kw)

    def _test_rows(self, X: Any) -> Any:
        """``X`` of a fitted estimator as floats: a Dask array in one column chunk, or a numpy array; ``d``
        columns either way."""
        check_is_fitted(self, "result_")
        import dask.array as da

        d = self.inducing_points_.shape[1]
        X = X.astype(float).rechunk({1: -1}) if isinstance(X, da.Array) else np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != d:
            raise ValueError(f"X must have shape (n, {d}) (the training inputs' {d} features), got {X.shape}")
        return X

    def _loo_rows(self) -> list:
        """The futures of the shards' :class:`~relaxep.estimators._dask_loo.ShardRows`, kept on the cluster."""
        check_is_fitted(self, "result_")
        if getattr(self, "_loo_futures", None) is None:
            raise RuntimeError(
                f"{type(self).__name__}.loo(): the leave-one-out terms stay on the cluster that fitted this estimator, "
                "and a pickled or copied estimator has none; fit it again (or call loo() before pickling)"
            )
        return self._loo_futures

    def loo(self) -> LooResult:
        r"""Leave-one-out cross-validation from EP's cavities on the shards, at no refit
        (:mod:`relaxep.estimators._dask_loo`): :math:`\log p(y_i | y_{-i})` of each training row, in shard order.

        The same :class:`~relaxep.assessment.LooResult` as the one-process estimator's on the same rows (``pointwise``
        in the units of ``y`` as passed, ``normalize_y`` undone; the same ``fingerprint``, so that
        :func:`relaxep.compare` compares the two): one map over the shards, ``O(n)`` numbers back.  The terms stay on
        the cluster from the fit; a pickled estimator has none (fit again).
        """
        terms, rows = self._gathered()
        return self._loo_result(terms, rows)

    def _loo_terms(self) -> LooTerms:
        return self._gathered()[0]

    def _gathered(self) -> tuple[LooTerms, str]:
        """The shards' leave-one-out terms (:func:`~relaxep.estimators._dask_loo.gather_loo`) and the fingerprint
        of the rows and the targets as the one-process estimator takes them: class indices, ``y`` unnormalised (a
        count's without its log exposure), or a survival model's rows as they are."""
        terms, shape, hashes = gather_loo(self._loo_rows(), self._client(), self.likelihood_, self.timeout)
        y, scaling = terms.y, self._target_scaling()
        if is_classifier(self):
            y = (y > 0).astype(float)
        elif scaling is not None:
            y = (y[:, 0] if y.ndim == 2 else y) * scaling[1] + scaling[0]
        return terms, rows_fingerprint((shape, hashes), y)


def _shards_evidence(
    x: Array, eval_gradient: bool, shards: ShardedFITC, hyper: HyperVector, Z0: Array, d: int
) -> tuple[float, Any]:
    """The sparse EP evidence over the shards at the optimiser's ``x`` (the shards' prior rebuilt, EP run on them
    from the warm start) and, if asked, its gradient (the kernel's and ``Z``'s in one map, the likelihood's in
    another): :func:`~relaxep.estimators._search.evidence_at`, as ``_LatentModel.evidence`` in one process."""

    def build(kernel: Kernel, Z: Array | None) -> None:
        shards.set_prior(kernel, Z0 if Z is None else Z)

    def run(prior: None, likelihood: Likelihood) -> ShardedResult:
        shards.likelihood = likelihood
        return shards.infer()

    def gradient(prior: None, run: ShardedResult, kernel: Kernel, likelihood: Likelihood) -> tuple[Array, Array]:
        g_theta, g_z = shards.gradient(as_scaled_rbf(kernel, d), run)
        return np.concatenate([g_theta, shards.likelihood_gradient()]), g_z

    return evidence_at(x, eval_gradient, hyper, build, run, gradient, (KernelNotPositiveDefiniteError,))


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
