"""A one-latent estimator's fit, dense or sparse: the model of :mod:`relaxep.estimators._models` built from the
estimator's parameters (``GPRegressor`` with a non-Gaussian likelihood, ``GPOrdinalClassifier``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from relaxep._typing import Array
from relaxep.estimators._models import _DensePriors, _LatentModel, fit_sparse_model
from relaxep.estimators._plan import SparseFit
from relaxep.estimators._search import FitReport
from relaxep.likelihoods import Likelihood
from relaxep.sites import EP

__all__ = ["fit_latent"]


def fit_latent(
    estimator: Any,
    model: type[_LatentModel],
    likelihood: Likelihood,
    rule: Any,
    y: Array,
    latent_noise: float,
    n_learned: int,
    rng: Callable[[], np.random.RandomState],
) -> tuple[_LatentModel, FitReport]:
    """``model`` fitted on ``(estimator.X_train_, y)`` as the estimator's parameters say: dense, or sparse where
    ``inducing_points`` is given (:meth:`SparseFit.plan <relaxep.estimators._plan.SparseFit.plan>`, which sets
    ``estimator.inducing_points_``); the hyperparameters learned where ``optimizer`` is set (``rng()``: the
    dense search's random state).

    The search scores a run that does not converge as ``-inf`` (a region to leave): with ``"auto"`` it runs EP
    alone, given up after 10 sweeps without progress, and the final fit has the whole cascade.
    """
    search_rule = EP() if isinstance(rule, str) and rule == "auto" else rule
    options = dict(
        schedule=estimator.schedule, max_sweeps=estimator.max_sweeps, tol=estimator.tol, search_rule=search_rule,
        search_stall_window=10, warm_start=estimator.warm_start,
    )  # fmt: skip
    if estimator.inducing_points is None:
        fitted = model(_DensePriors(latent_noise), estimator.kernel_, likelihood, rule, estimator._search(), **options)
        learn = estimator.optimizer is not None and n_learned > 0
        return fitted, fitted.fit(estimator.X_train_, y, rng() if learn else None)
    plan = SparseFit.plan(
        estimator.X_train_, inducing_points=estimator.inducing_points, inducing_init=estimator.inducing_init,
        learn_inducing_points=estimator.learn_inducing_points, optimizer=estimator.optimizer,
        optimizer_subset=estimator.optimizer_subset, optimizer_maxiter=estimator.optimizer_maxiter,
        n_restarts=estimator.n_restarts_optimizer, random_state=estimator.random_state, n_learned=n_learned,
        n_jobs=estimator.n_jobs,
    )  # fmt: skip
    fitted, report = fit_sparse_model(
        plan, model, estimator.kernel_, likelihood, rule, estimator._search(plan.method), estimator.X_train_, y,
        latent_noise, **options,
    )  # fmt: skip
    estimator.inducing_points_ = fitted.Z
    return fitted, report
