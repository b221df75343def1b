"""A latent model's fit, dense or sparse, as its plan says: the plan (:class:`LatentFit`) is the estimator's
decision (``_plan`` of :class:`~relaxep.estimators._base._LatentGPEstimator`), and the fit reads the plan and the
data, never the estimator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep.estimators._markov import _MarkovPriors
from relaxep.estimators._models import _DensePriors, _LatentModel, fit_sparse_model
from relaxep.estimators._plan import SparseFit
from relaxep.estimators._search import FitReport, SearchPolicy, _EvidenceSearch
from relaxep.estimators._shape import ShapePlan, fit_shaped
from relaxep.likelihoods import Likelihood

__all__ = ["LatentFit", "fit_latent"]

M = TypeVar("M", bound=_LatentModel)


@dataclass(frozen=True)
class LatentFit:
    """How a latent model is fitted, decided once by the estimator from its parameters.

    Attributes
    ----------
    schedule, max_sweeps, tol, warm_start
        Each run of inference's (:func:`relaxep.infer`; the warm start between the search's runs).
    search : _EvidenceSearch
        The search that learns the hyperparameters (``optimizer`` resolved).
    policy : SearchPolicy
        How the search treats runs that fail (the estimator class's).
    rng : RandomState or None
        A dense fit's search random state; ``None``: nothing is learned (a sparse fit's is its plan's).
    sparse : SparseFit or None
        A sparse (FITC) fit's plan; ``None``: the dense prior, or the Markov one.
    markov : bool
        The Markov (state-space) prior (:mod:`relaxep.estimators._markov`).
    shape : ShapePlan or None
        Observed derivatives or monotonicity (:mod:`relaxep.estimators._shape`); ``None``: neither.
    """

    schedule: Any
    max_sweeps: int
    tol: float
    warm_start: bool
    search: _EvidenceSearch
    policy: SearchPolicy
    rng: np.random.RandomState | None = None
    sparse: SparseFit | None = None
    markov: bool = False
    shape: ShapePlan | None = None

    def options(self, rule: Any) -> dict[str, Any]:
        """The model's options for a fit by ``rule``: the runs' and the search policy's."""
        return dict(
            schedule=self.schedule, max_sweeps=self.max_sweeps, tol=self.tol, warm_start=self.warm_start,
            search_rule=self.policy.search_rule(rule), search_stall_window=self.policy.stall_window,
        )  # fmt: skip


def fit_latent(
    plan: LatentFit,
    model: type[M],
    kernel: Kernel,
    likelihood: Likelihood,
    rule: Any,
    X: Any,
    y: Array,
    latent_noise: float,
) -> tuple[M, FitReport]:
    """``model`` fitted on ``(X, y)`` as ``plan`` says: dense, Markov, or sparse (FITC) from ``plan.sparse``'s inducing
    inputs (the fitted model's ``Z``: the learned ones); the hyperparameters learned where the plan learns them.

    The search scores a run that does not converge as ``-inf`` (a region to leave); the policy's
    ``search_rule`` and stall window apply to the search's runs only, the final fit is by ``rule``.
    """
    options = plan.options(rule)
    if plan.shape is not None:
        shape = plan.shape
        return fit_shaped(shape, model, kernel, likelihood, rule, plan.search, X, y, latent_noise, plan.rng, **options)
    if plan.sparse is None:
        priors = _MarkovPriors(latent_noise) if plan.markov else _DensePriors(latent_noise)
        fitted = model(priors, kernel, likelihood, rule, plan.search, **options)
        return fitted, fitted.fit(X, y, plan.rng)
    return fit_sparse_model(plan.sparse, model, kernel, likelihood, rule, plan.search, X, y, latent_noise, **options)
