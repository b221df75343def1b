r"""``EPClassifierModel``: a binary GP classifier fitted by EP, as a BoTorch model of feasibility.

Its output is :math:`g` with :math:`P(g > 0)` the classifier's ``predict_proba(X)[:, 1]``
(:mod:`relaxep.botorch.link`): for the probit, exactly :math:`g = f + e`, :math:`e \sim N(0, 1)`,

.. math:: P(\text{feasible}) = \Phi\big(\mu/\sqrt{1 + s^2}\big) = P(g > 0),\qquad g \sim N(\mu, 1 + s^2),

so BoTorch's analytic constrained acquisitions (``LogConstrainedExpectedImprovement(model, best_f,
objective_index=0, constraints={1: (0.0, None)})`` on a ``ModelList(objective_model, ep_model)``,
``LogProbabilityOfFeasibility``) take the classifier's probability exactly, deterministically and
differentiably, with no sigmoid approximation; the Monte Carlo ones (``qLogExpectedImprovement(...,
constraints=[lambda Z: -Z[..., 1]])``) see samples of :math:`g`, whose sign is feasible with that probability.
Over the ``q`` points of a batch :math:`g` has the latent posterior's covariance plus :math:`I` (exact for the
probit; for other likelihoods the same correlations with the marginals matched).  This is the classifier-based
constraint of failure-aware Bayesian optimisation (Gelbart, Snoek & Adams 2014, *Bayesian optimization with
unknown constraints*; Houlsby et al. 2011 for the probit reduction).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from botorch.utils.datasets import SupervisedDataset
from torch import Tensor

from relaxep.botorch.base import EPModel, training_inputs
from relaxep.botorch.latent import LatentPosterior, latent_of
from relaxep.botorch.link import output_mean
from relaxep.estimators.classifier import GPClassifier
from relaxep.likelihoods import BinaryLikelihood

__all__ = ["EPClassifierModel"]


def _labels(train_Y: Tensor, n: int) -> np.ndarray:
    """``train_Y`` (shape ``(n, 1)`` or ``(n,)``, values 0 and 1) as a numpy vector."""
    if not isinstance(train_Y, Tensor):
        raise TypeError(f"train_Y must be a torch Tensor of 0/1 labels, got {type(train_Y).__name__}")
    if train_Y.shape not in ((n, 1), (n,)):
        raise ValueError(f"train_Y must have shape ({n}, 1) (one label per row of train_X), got {tuple(train_Y.shape)}")
    y = train_Y.detach().cpu().numpy().reshape(n).astype(float)
    if not np.all((y == 0.0) | (y == 1.0)):
        raise ValueError("train_Y must hold labels 0 (infeasible) and 1 (feasible)")
    return y.astype(int)


class EPClassifierModel(EPModel):
    r"""A BoTorch ``Model`` of a binary :class:`~relaxep.GPClassifier` fitted by EP (module docstring).

    Parameters
    ----------
    train_X : Tensor of shape (n, d)
        Inputs (float64 keeps the fit's precision).
    train_Y : Tensor of shape (n, 1)
        Labels 0 and 1 (1: feasible, the output's positive side), as BoTorch's models take outcomes.
    input_transform : InputTransform, optional
        A BoTorch input transform: fitted on ``train_X`` (train mode), the classifier fitted on the transformed
        inputs, and applied to every ``X`` of :meth:`posterior`, as BoTorch's models do.
    **gpc_kwargs
        Passed to :class:`~relaxep.GPClassifier` (its defaults otherwise: the kernel
        ``ConstantKernel * RBF`` learned by the EP evidence, the label-noise likelihood ``NoisyProbit(0.01)``);
        ``inducing_points=M`` for a sparse (FITC) fit.  Binary likelihoods only; ``integrate="map"``.

    Attributes
    ----------
    estimator : GPClassifier
        The fitted classifier; ``estimator.predict_proba(X)[:, 1]`` is :math:`P(g > 0)`.
    train_X, train_Y : Tensor
    """

    def __init__(self, train_X: Tensor, train_Y: Tensor, input_transform: Any = None, **gpc_kwargs: Any) -> None:
        if not isinstance(train_X, Tensor) or train_X.dim() != 2:
            raise ValueError(f"train_X must be a 2-D torch Tensor (n, d), got {getattr(train_X, 'shape', train_X)!r}")
        y = _labels(train_Y, train_X.shape[0])
        X = training_inputs(train_X, gpc_kwargs.get("kernel"), input_transform)
        estimator = GPClassifier(**gpc_kwargs).fit(X, y)
        self._attach(estimator, train_X, input_transform)

    @classmethod
    def from_estimator(cls, estimator: GPClassifier, input_transform: Any = None) -> EPClassifierModel:
        """The model of a fitted binary ``GPClassifier`` (no refit); the output's positive side is
        ``estimator.classes_[1]``.  ``input_transform``: one (in eval mode) that maps BoTorch's inputs to the
        space the classifier was fitted in."""
        model = cls.__new__(cls)
        model._attach(estimator, None, input_transform)
        return model

    def _attach(self, estimator: GPClassifier, train_X: Tensor | None, input_transform: Any) -> None:
        if not isinstance(estimator, GPClassifier) or not hasattr(estimator, "model_"):
            raise TypeError(f"a fitted binary GPClassifier is needed, got {estimator!r}")
        if len(estimator.classes_) != 2:
            raise ValueError(
                f"EPClassifierModel models a binary classifier (P(g > 0) for classes_[1]); this GPClassifier has "
                f"{len(estimator.classes_)} classes {list(estimator.classes_)}: fit one binary classifier per "
                "constraint (feasible against the rest)"
            )
        if getattr(estimator, "integrate", "map") != "map":
            raise ValueError(
                f"integrate={estimator.integrate!r}: the posterior is a mixture over hyperparameters, not one "
                "Gaussian; fit with integrate='map'"
            )
        fitted = estimator.model_
        if not isinstance(getattr(fitted, "likelihood", None), BinaryLikelihood):
            raise TypeError(f"a binary likelihood is needed, got {getattr(fitted, 'likelihood', None)!r}")
        inputs, weights, C, noise = latent_of(fitted)
        latent = LatentPosterior(fitted.kernel_, inputs, weights, C, noise)
        super().__init__(estimator, latent, estimator.n_features_in_, input_transform)
        X = torch.as_tensor(np.asarray(estimator.X_train_, dtype=float)) if train_X is None else train_X
        labels = np.asarray(fitted.y) > 0  # (+1: classes_[1])
        self.register_buffer("train_X", X)
        self.register_buffer("train_Y", torch.as_tensor(labels.astype(float)).to(X).reshape(-1, 1))

    @property
    def link_likelihood(self) -> BinaryLikelihood:
        """The classifier's fitted binary likelihood (what :math:`P(g > 0)` integrates)."""
        return self.estimator.model_.likelihood

    def _output(self, mean: Tensor, cov: Tensor) -> tuple[Tensor, Tensor]:
        r""":math:`g`'s mean :math:`\sqrt{1 + s^2}\,\Phi^{-1}(p)` and covariance :math:`\Sigma_f + I`."""
        var = cov.diagonal(dim1=-2, dim2=-1)
        eye = torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)
        return output_mean(self.link_likelihood, mean, var), cov + eye

    @classmethod
    def construct_inputs(cls, training_data: SupervisedDataset, **kwargs: Any) -> dict[str, Any]:
        """The keyword arguments from a BoTorch ``SupervisedDataset`` (for Ax): ``train_X``, ``train_Y`` (0/1
        labels), and ``kwargs`` (to the classifier); a dataset with ``Yvar`` is refused (labels have none)."""
        inputs = super().construct_inputs(training_data)
        if "train_Yvar" in inputs:
            raise ValueError("EPClassifierModel takes labels without observation noise: the dataset has Yvar")
        return {**inputs, **kwargs}
