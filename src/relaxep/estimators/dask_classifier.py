r"""``DaskGPClassifier``: sparse GP classification by EP on a Dask cluster (the sharded machinery described in
:mod:`relaxep.estimators.dask`, the model of ``GPClassifier(..., inducing_points=M)``).

The labels enter the shards as the binary likelihoods take them (-1/+1); the fit is
:class:`~relaxep.estimators._dask_fit.DaskSparseFit`'s, the predictions those of the fitted ``GPClassifier``
of :meth:`~relaxep.estimators._dask_fit.DaskSparseFit.to_local`.

    from dask.distributed import Client
    client = Client("tcp://scheduler:8786")
    clf = DaskGPClassifier(client=client, inducing_points=200).fit(X, y)  # X, y: dask arrays
    proba = clf.predict_proba(X_new)  # a lazy Dask array
    local = clf.to_local()  # a fitted GPClassifier: pickle it, serve it without Dask
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import ClassifierMixin
from sklearn.gaussian_process.kernels import Kernel

from relaxep.estimators._checks import check_likelihood_for, store_parameters
from relaxep.estimators._dask_fit import DaskSparseFit, import_dask
from relaxep.estimators._inducing_model import InducingBinaryModel
from relaxep.estimators._model import LooTerms
from relaxep.estimators._models import proba_of
from relaxep.estimators.classifier import GPClassifier
from relaxep.likelihoods import BinaryLikelihood, NoisyProbit
from relaxep.sites import EP, SiteRule

__all__ = ["DaskGPClassifier"]

_LIKELIHOODS = (
    "None or a binary relaxep likelihood instance (relaxep.likelihoods.BinaryLikelihood: Probit(), Logistic(), "
    "NoisyProbit(eps, scale) or NoisyStep(eps))"
)


def _binary_targets(y: Any, classes: Any) -> Any:
    """Labels as the binary likelihoods take them: +1 for ``classes[1]``, -1 for ``classes[0]``."""
    return np.where(np.asarray(y) == classes[1], 1.0, -1.0)


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
class DaskGPClassifier(ClassifierMixin, DaskSparseFit):
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
        ``optimizer_subset=None`` on 5000 rows or more, else ``"fmin_l_bfgs_b"`` (so with the
        default ``optimizer_subset`` L-BFGS-B on the subset).  ``None`` skips learning.
    optimizer_subset : int or None, default 20000
        Rows gathered from the cluster to learn the kernel and inducing inputs on (the
        evidence optimisation runs on the client; ``GPClassifier``'s default is ``None``, all
        rows in one process); ``None``: learn on all shards (module docstring): by L-BFGS-B on
        the full evidence, or with ``optimizer="stochastic"`` (``"auto"`` from 5000 rows) by the
        stochastic search, each step one map over the shards' minibatches (each shard draws its
        share of the 1000 rows and sends back ``M x M`` sums).
    optimizer_maxiter : int or None
        As :class:`~relaxep.GPClassifier`.
    min_step : float, default 1/1024
        The parallel schedule's smallest step.
    timeout : float or None, default 600
        Seconds to wait for one map over the shards (one sweep's marginals, say) before giving up with
        :class:`~relaxep.errors.ClusterError`; the same error, at once, where the cluster cancelled the
        shards' futures (a restarted scheduler or cluster).  ``None``: wait for ever.  A lost worker is not
        an error: Dask recomputes its shards, and the answer is unchanged.

    prior : "auto", None, HyperPrior or dict, default "auto"
        The hyperparameters' prior: the search climbs the log evidence plus the log prior (the MAP).  ``"auto"``:
        data-scaled half-Student-t priors that keep amplitudes and length-scales from running away; ``None``: the
        evidence alone (type-II ML); a :mod:`relaxep.hyper` prior for all, or a dict by name (the user guide).

    Attributes
    ----------
    classes_, kernel_, inducing_points_, log_marginal_likelihood_value_
    likelihood_ : BinaryLikelihood
        The likelihood, with any hyperparameters it has learned.
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
        timeout: float | None = 600.0,
        prior: Any = "auto",
    ) -> None:
        store_parameters(self, locals())

    _owner = "DaskGPClassifier"

    def _loo_terms(self) -> LooTerms:
        """The shards' leave-one-out terms with the class probabilities at each cavity (the likelihood's
        predictive log-odds, as ``GPClassifier``'s)."""
        terms = super()._loo_terms()
        log_odds = self.likelihood_.predict_log_odds(terms.mean, np.maximum(terms.var, 1e-300))
        return replace(terms, proba=proba_of(log_odds))

    def _check_options(self) -> tuple[SiteRule, BinaryLikelihood]:
        """The rule and the likelihood (defaults filled in), and the kernel, checked before any Dask work."""
        rule = self._check_common("GPClassifier")
        check_likelihood_for(self.likelihood, "DaskGPClassifier", _LIKELIHOODS)
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
        rule, likelihood = self._check_options()  # (before importing Dask: no Dask work for a bad parameter)
        da = import_dask(self._owner)
        X = self._rows(X)
        y = self._column(y, X)
        classes = np.unique(da.unique(y).compute())
        if classes.size != 2:
            raise ValueError(f"DaskGPClassifier needs labels of exactly two classes, got {classes.size}")
        self.classes_ = classes
        targets = y.map_blocks(_binary_targets, classes=classes, dtype=float)
        report, shards = self._fit_shards(X, targets, likelihood, rule, float(self.jitter))
        if gather_sites:
            self.site_precision_, self.site_mean_precision_ = shards.sites()
        report.warn()  # (at the user's fit line)
        return self

    def _local_estimator(self, L_uu: Any, noise: float) -> Any:
        """The fitted ``GPClassifier`` of :meth:`to_local`: this estimator's parameters, its posterior at the
        inducing inputs."""
        local = self._local_of(GPClassifier, rule=EP() if self.rule is None else self.rule)
        local.classes_ = self.classes_
        return self._hand_over(local, InducingBinaryModel, L_uu, noise)

    # ------------------------------------------------------------ predict
    def decision_function(self, X: Any) -> Any:
        r"""The log-odds of the predictive, :math:`\log P(y_* = c_1) - \log P(y_* = c_0)`, as ``GPClassifier``'s.

        The likelihood's ``predict_log_odds`` at FITC's predictive mean and variance, computed in log space
        by the :meth:`to_local` estimator; positive where :meth:`predict` gives ``classes_[1]``, and ranking
        test points as :meth:`predict_proba` does.

        Parameters
        ----------
        X : dask or numpy array of shape (n, d)

        Returns
        -------
        dask or numpy array of shape (n,)
            A lazy Dask array (one block per row chunk of ``X``) for a Dask array, else a numpy array.
        """
        return self._apply(X, "decision_function")

    def predict_log_proba(self, X: Any) -> Any:
        """Log class probabilities (columns in ``classes_`` order): ``[log_expit(-d), log_expit(d)]`` of the
        log-odds ``d`` (:meth:`decision_function`); a Dask array for a Dask array."""
        return self._apply(X, "predict_log_proba", columns=2)

    def predict_proba(self, X: Any) -> Any:
        """Class probabilities (columns in ``classes_`` order): ``[expit(-d), expit(d)]`` of the log-odds ``d``
        (:meth:`decision_function`), as ``GPClassifier``'s; a Dask array for a Dask array."""
        return self._apply(X, "predict_proba", columns=2)

    def predict(self, X: Any) -> Any:
        """``classes_[1]`` where :meth:`decision_function` is positive, else ``classes_[0]`` (a probability
        of exactly 0.5 gives ``classes_[0]``, as ``GPClassifier``); a Dask array for a Dask array."""
        return self._apply(X, "predict", dtype=self.classes_.dtype)
