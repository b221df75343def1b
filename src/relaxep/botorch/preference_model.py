r"""``EPPreferenceModel``: a utility learned from pairwise comparisons by EP, with BoTorch's ``PairwiseGP``
interface.

The fitted :class:`~relaxep.GPPreferenceLearner` conditions on the comparisons' differences
:math:`d = f(x_a) - f(x_b)` (:mod:`relaxep.posterior.comparisons`), so the utility at new items is the latent of
a row ``[x_*, 0, 0]`` with

.. math:: k(x_*, (a, b)) = k(x_*, x_a) - k(x_*, x_b),

evaluated in torch (:mod:`relaxep.botorch.latent`); a sparse fit conditions on inducing items, :math:`k(x_*, z)`.
``posterior(X)`` is the utility's joint Gaussian over the ``q`` items of each batch, its mean and variances
``GPPreferenceLearner.predict(X, return_std=True)``'s.  BoTorch's preference acquisitions run on it unchanged:
``AnalyticExpectedUtilityOfBestOption`` (EUBO, Lin et al. 2022, *Preference exploration for efficient Bayesian
optimization with multiple outcomes*, AISTATS), :math:`E[\max(f(x_1), f(x_2))]` in closed form, and
``qExpectedUtilityOfBestOption`` (qEUBO, Astudillo et al. 2023, *qEUBO: a decision-theoretic acquisition function
for preferential Bayesian optimization*, AISTATS), its Monte Carlo form over ``q`` items.  BoTorch's
``PairwiseGP`` fits the same model by the Laplace approximation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from relaxep.botorch.base import EPModel, training_inputs
from relaxep.botorch.latent import LatentPosterior, latent_of
from relaxep.estimators.preference import GPPreferenceLearner
from relaxep.posterior.comparisons import ComparisonKernel

__all__ = ["EPPreferenceModel"]


class EPPreferenceModel(EPModel):
    r"""A BoTorch ``Model`` of the utility of a :class:`~relaxep.GPPreferenceLearner` (module docstring).

    Parameters
    ----------
    datapoints : Tensor of shape (n, d)
        The items (float64 keeps the fit's precision).
    comparisons : Tensor of shape (m, 2)
        Row indices into ``datapoints``, each row ``[winner, loser]``: ``PairwiseGP``'s convention, and
        ``GPPreferenceLearner``'s ``(preferred, other)``.
    input_transform : InputTransform, optional
        Fitted on ``datapoints`` (train mode), the learner fitted on the transformed items, and applied to every
        ``X`` of :meth:`posterior`, as BoTorch's models do.
    **learner_kwargs
        Passed to :class:`~relaxep.GPPreferenceLearner` (its defaults otherwise: the probit likelihood, the
        kernel ``ConstantKernel * RBF`` learned by the EP evidence).

    Attributes
    ----------
    datapoints, comparisons : Tensor
        As given (``comparisons`` as ``long``).
    estimator : GPPreferenceLearner

    Notes
    -----
    ``condition_on_observations`` and ``fantasize`` raise ``NotImplementedError`` (as ``PairwiseGP`` has
    neither, https://github.com/pytorch/botorch/issues/733): a new comparison needs a new EP fit; EUBO and qEUBO
    do not need them.
    """

    def __init__(
        self, datapoints: Tensor, comparisons: Tensor, input_transform: Any = None, **learner_kwargs: Any
    ) -> None:
        if not isinstance(datapoints, Tensor) or datapoints.dim() != 2:
            raise ValueError(f"datapoints must be a 2-D torch Tensor (n, d), got {getattr(datapoints, 'shape', None)}")
        if not isinstance(comparisons, Tensor) or comparisons.dim() != 2 or comparisons.shape[-1] != 2:
            raise ValueError(
                f"comparisons must be an (m, 2) torch Tensor of [winner, loser] rows, got "
                f"{getattr(comparisons, 'shape', None)}"
            )
        X = training_inputs(datapoints, learner_kwargs.get("kernel"), input_transform)
        learner = GPPreferenceLearner(**learner_kwargs).fit(X, comparisons.detach().cpu().numpy().astype(np.intp))
        self._attach(learner, datapoints, comparisons, input_transform)

    @classmethod
    def from_estimator(cls, estimator: GPPreferenceLearner, input_transform: Any = None) -> EPPreferenceModel:
        """The model of a fitted ``GPPreferenceLearner`` (no refit).  ``input_transform``: one (in eval mode)
        that maps BoTorch's inputs to the space the learner was fitted in."""
        model = cls.__new__(cls)
        model._attach(estimator, None, None, input_transform)
        return model

    def _attach(
        self, learner: GPPreferenceLearner, datapoints: Tensor | None, comparisons: Tensor | None, transform: Any
    ) -> None:
        if not isinstance(learner, GPPreferenceLearner) or not hasattr(learner, "model_"):
            raise TypeError(f"a fitted GPPreferenceLearner is needed, got {learner!r}")
        fitted = learner.model_
        kernel = fitted.kernel_
        if not isinstance(kernel, ComparisonKernel):  # pragma: no cover - the learner always fits one
            raise TypeError(f"the learner's model has no ComparisonKernel: {kernel!r}")
        rows, weights, C, noise = latent_of(fitted)
        D = kernel.n_features
        first, second, sign = rows[:, :D], rows[:, D : 2 * D], rows[:, 2 * D]
        if np.any(sign != 0.0):
            latent = LatentPosterior(kernel.kernel, first, weights, C, noise, second=second, sign=sign)
        else:  # (a sparse fit: inducing items [z, 0, 0])
            latent = LatentPosterior(kernel.kernel, first, weights, C, noise)
        super().__init__(learner, latent, D, transform)
        X = torch.as_tensor(learner.X_train_) if datapoints is None else datapoints
        pairs = torch.as_tensor(learner.comparisons_) if comparisons is None else comparisons
        self.register_buffer("datapoints", X)
        self.register_buffer("comparisons", pairs.to(dtype=torch.long, device=X.device))

    def _output(self, mean: Tensor, cov: Tensor) -> tuple[Tensor, Tensor]:
        """The utility's latent posterior itself."""
        return mean, cov
