r"""What the two BoTorch models share: one output, no model batch, inputs transformed as BoTorch's models
transform them, and a Gaussian posterior over the ``q`` points of each batch.

A BoTorch ``Model`` whose EP fit is done: :class:`EPModel` holds the fitted estimator and a
:class:`~relaxep.botorch.latent.LatentPosterior` (the latent at new points, in torch), and its ``posterior(X)``
for ``X`` of shape ``batch x q x d`` is a ``GPyTorchPosterior`` (a ``MultivariateNormal`` over the ``q`` points)
whose mean and covariance are differentiable in ``X``: what BoTorch's analytic and Monte Carlo acquisition
functions ask of a model.  The subclass says what the output is (:meth:`EPModel._output`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from botorch.models.model import Model
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal
from torch import Tensor

from relaxep.botorch.kernels import check_kernel
from relaxep.botorch.latent import LatentPosterior

__all__ = ["EPModel"]


def training_inputs(X: Tensor, kernel: Any, input_transform: Any) -> np.ndarray:
    """The training inputs as the estimator fits them, float64 numpy: ``kernel`` checked first (one that torch
    cannot evaluate is refused before the fit), then ``input_transform`` fitted on them in train mode and applied
    (as BoTorch's models apply theirs)."""
    if kernel is not None:
        check_kernel(kernel)
    if input_transform is not None:
        input_transform.train()
        X = input_transform.to(X)(X)
    return X.detach().cpu().numpy().astype(float)


class EPModel(Model):
    """A BoTorch ``Model`` of one output from a fitted relaxep estimator (module docstring).

    Attributes
    ----------
    estimator : GPClassifier or GPPreferenceLearner
        The fitted estimator (numpy; EP is not rerun here).
    latent : LatentPosterior
        Its latent posterior at new points, in torch.
    input_transform : InputTransform, optional
        Applied to ``X`` in :meth:`posterior` (``transform_inputs``), as BoTorch's models do; the estimator was
        fitted on the transformed training inputs.
    """

    _num_outputs = 1

    def __init__(self, estimator: Any, latent: LatentPosterior, n_features: int, input_transform: Any = None) -> None:
        super().__init__()
        self.estimator = estimator
        self.latent = latent
        self.n_features = int(n_features)
        if input_transform is not None:
            self.input_transform = input_transform

    # ------------------------------------------------------------ BoTorch's Model API
    @property
    def num_outputs(self) -> int:
        """One output."""
        return self._num_outputs

    @property
    def batch_shape(self) -> torch.Size:
        """``torch.Size([])``: one model (no model batch); a ``batch x q x d`` input gives a ``batch`` of joint
        posteriors."""
        return torch.Size([])

    def subset_output(self, idcs: list[int]) -> EPModel:
        """This model, for ``idcs == [0]`` (its one output); any other subset is refused."""
        if list(idcs) != [0]:
            raise ValueError(f"{type(self).__name__} has one output: subset_output takes [0], got {idcs!r}")
        return self

    def _set_transformed_inputs(self) -> None:
        """Nothing to do: the estimator was fitted on the transformed training inputs, once, at construction."""

    def _revert_to_original_inputs(self) -> None:
        """Nothing to do (:meth:`_set_transformed_inputs`)."""

    def condition_on_observations(self, X: Tensor, Y: Tensor, **kwargs: Any) -> Model:
        """Not implemented: conditioning an EP posterior on new observations is a new EP fit (in numpy), not the
        Gaussian update BoTorch's fantasies assume; refit instead.  The acquisitions this model is for (analytic
        and Monte Carlo constrained EI, probability of feasibility, EUBO, qEUBO) do not need it."""
        raise NotImplementedError(
            f"{type(self).__name__}.condition_on_observations: an EP posterior is not conditioned in closed form "
            "(new observations need a new EP fit, in numpy); refit the model on the augmented data. Look-ahead "
            "acquisitions (qKnowledgeGradient, fantasies) are not supported; analytic and Monte Carlo EI with "
            "constraints, LogProbabilityOfFeasibility, EUBO and qEUBO do not need it"
        )

    def fantasize(self, *args: Any, **kwargs: Any) -> Model:
        """Not implemented (:meth:`condition_on_observations`)."""
        return self.condition_on_observations(torch.empty(0), torch.empty(0))

    # ------------------------------------------------------------ the posterior
    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: Any = None,
    ) -> Any:
        r"""The joint Gaussian posterior of the output at the ``q`` rows of each batch of ``X``.

        Parameters
        ----------
        X : Tensor of shape (batch, q, d) or (q, d)
            Points in the original (untransformed) input space; float64 keeps the fit's precision.
        output_indices : list of int, optional
            ``None`` or ``[0]``.
        observation_noise : bool
            ``False``; ``True`` is accepted and adds nothing: the classifier's output already carries the label's
            noise, and a preference's utility is observed through comparisons only.
        posterior_transform : PosteriorTransform, optional
            Applied to the posterior.

        Returns
        -------
        GPyTorchPosterior
            A ``MultivariateNormal`` of batch shape ``batch`` over the ``q`` points (mean ``batch x q x 1``).
        """
        if output_indices is not None and list(output_indices) != [0]:
            raise ValueError(f"{type(self).__name__} has one output: output_indices None or [0], got {output_indices}")
        if isinstance(observation_noise, Tensor):
            raise NotImplementedError(f"{type(self).__name__}: observation_noise as a tensor is not supported")
        mean, cov = self._output(*self.latent_at(X))
        posterior = GPyTorchPosterior(MultivariateNormal(mean, cov))
        return posterior if posterior_transform is None else posterior_transform(posterior)

    def latent_at(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """The latent's joint posterior at the ``q`` rows of each batch of ``X`` (original input space, transformed
        here): mean ``(batch, q)`` and covariance ``(batch, q, q)``, differentiable in ``X``."""
        self.eval()
        X = self.transform_inputs(X)
        if X.dim() < 2 or X.shape[-1] != self.n_features:
            raise ValueError(
                f"X must have shape (batch, q, {self.n_features}) or (q, {self.n_features}), got {X.shape}"
            )
        return self.latent.joint(X)

    def _output(self, mean: Tensor, cov: Tensor) -> tuple[Tensor, Tensor]:
        """The output's mean ``(..., q)`` and covariance ``(..., q, q)`` from the latent's."""
        raise NotImplementedError
