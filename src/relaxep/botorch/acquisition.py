r"""Active learning on an :class:`~relaxep.botorch.EPClassifierModel` as BoTorch acquisition functions.

Both read the latent's posterior :math:`f_* \sim N(\mu_*, s^2_*)` at a candidate (the model's
:meth:`~relaxep.botorch.base.EPModel.latent_at`, in torch, differentiable in the candidate) and are the classifier's
own criteria of :mod:`relaxep.estimators._active`, for ``optimize_acqf`` over a continuous domain:

* :class:`InformationGain`: BALD (Houlsby, Huszar, Ghahramani & Lengyel 2011, eq. 1), the mutual information in
  bits between the label and the latent, :math:`h(\int t(f) N(f|\mu_*, s^2_*) df) - \int h(t(f)) N(f|\mu_*,
  s^2_*) df`: ``GPClassifier.information_gain`` (its exact quadrature), with its exact derivatives in
  :math:`(\mu_*, s^2_*)` (:func:`~relaxep.likelihoods.information.information_gain_slopes`);
* :class:`Straddle`: the straddle heuristic for the boundary where the predictive is ``level`` (Bryan et al.
  2005), :math:`\kappa s_* - |\mu_* - t_*|`: ``GPClassifier.straddle``; the threshold :math:`t_*` of
  ``threshold="predictive"`` moves with :math:`s^2_*` along the level set, :math:`\partial t_*/\partial s^2_* =
  -\partial_{s^2} d / \partial_\mu d` (:math:`d` the predictive's log-odds at mean :math:`t_*`).

The likelihood's quantities are computed in numpy, as the model's output mean is
(:mod:`relaxep.botorch.link`): first derivatives are exact, there are no second ones.  One candidate a batch
(``q = 1``): the information of a batch of labels is not the sum of its members'.

BoTorch's own ``qBayesianActiveLearningByDisagreement`` is another quantity, the information a regression output
carries about a fully Bayesian model's hyperparameters (SAAS), and it refuses this model (it is not fully
Bayesian); its ``PairwiseBayesianActiveLearningByDisagreement`` (a Monte Carlo BALD of the probit comparison) runs
on :class:`~relaxep.botorch.EPPreferenceModel` unchanged (``tests/test_botorch_active.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from botorch.acquisition.analytic import AnalyticAcquisitionFunction
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor

from relaxep.botorch.classifier_model import EPClassifierModel
from relaxep.likelihoods import BinaryLikelihood
from relaxep.likelihoods.information import information_gain_slopes

__all__ = ["InformationGain", "Straddle"]


def _numpy(t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(float)


class _Gain(torch.autograd.Function):
    """BALD at the latent ``N(mean, var)`` in bits, with its exact first derivatives (numpy forward)."""

    @staticmethod
    def forward(ctx: Any, mean: Tensor, var: Tensor, likelihood: BinaryLikelihood) -> Tensor:
        m, v = _numpy(mean), _numpy(var)
        gain, d_mean, d_var = information_gain_slopes(likelihood, m.ravel(), np.maximum(v, 0.0).ravel())
        ctx.save_for_backward(torch.as_tensor(d_mean.reshape(m.shape)).to(mean),
                              torch.as_tensor(d_var.reshape(m.shape)).to(mean))  # fmt: skip
        return torch.as_tensor(gain.reshape(m.shape)).to(mean)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, None]:
        d_mean, d_var = ctx.saved_tensors
        return grad * d_mean, grad * d_var, None


class _Threshold(torch.autograd.Function):
    """The latent threshold :math:`t_*(s^2)` at which the predictive is ``level``, with its slope in ``var``."""

    @staticmethod
    def forward(ctx: Any, var: Tensor, likelihood: BinaryLikelihood, level: float) -> Tensor:
        v = np.maximum(_numpy(var), 0.0)
        t = likelihood.latent_threshold(level, v)
        _, d_mean, d_var = likelihood.predict_log_odds_slopes(t, v)
        ctx.save_for_backward(torch.as_tensor(-d_var / d_mean).to(var))
        return torch.as_tensor(np.asarray(t, dtype=float)).to(var)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (slope,) = ctx.saved_tensors
        return grad * slope, None, None


class _ClassifierAcquisition(AnalyticAcquisitionFunction):
    """One candidate a batch, on a binary :class:`~relaxep.botorch.EPClassifierModel`."""

    def __init__(self, model: EPClassifierModel) -> None:
        if not isinstance(model, EPClassifierModel):
            raise TypeError(f"{type(self).__name__} needs an EPClassifierModel, got {type(model).__name__}")
        super().__init__(model=model)

    def _latent(self, X: Tensor) -> tuple[Tensor, Tensor]:
        mean, cov = self.model.latent_at(X)  # (batch, 1), (batch, 1, 1)
        return mean[..., 0], cov[..., 0, 0]


class InformationGain(_ClassifierAcquisition):
    r"""BALD in bits at each candidate: ``GPClassifier.information_gain(X)`` (module docstring).

    Parameters
    ----------
    model : EPClassifierModel
        A binary classifier's model (any binary likelihood; dense or sparse).

    Examples
    --------
    >>> acq = InformationGain(EPClassifierModel(train_X, train_Y))  # doctest: +SKIP
    >>> x_next, _ = optimize_acqf(acq, bounds, q=1, num_restarts=8, raw_samples=256)  # doctest: +SKIP
    """

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: Tensor) -> Tensor:
        """BALD at ``X`` of shape ``(batch, 1, d)``, shape ``(batch,)``."""
        mean, var = self._latent(X)
        return _Gain.apply(mean, var, self.model.link_likelihood)


class Straddle(_ClassifierAcquisition):
    r"""The straddle score :math:`\kappa s_* - |\mu_* - t_*|` at each candidate: ``GPClassifier.straddle(X, level,
    kappa, threshold)`` (module docstring).

    Parameters
    ----------
    model : EPClassifierModel
    level : float in (0, 1), default 0.5
        The predictive probability of the boundary sought.
    kappa : float >= 0, default 1.96
    threshold : {"predictive", "link"}, default "predictive"
        As ``GPClassifier.straddle``'s: the latent mean at which the predictive is ``level`` at the candidate's
        variance, or where the likelihood itself is.
    """

    def __init__(
        self, model: EPClassifierModel, level: float = 0.5, kappa: float = 1.96, threshold: str = "predictive"
    ) -> None:
        super().__init__(model)
        if threshold not in ("predictive", "link"):
            raise ValueError(f"threshold must be 'predictive' or 'link', got {threshold!r}")
        if not (isinstance(kappa, int | float) and not isinstance(kappa, bool) and np.isfinite(kappa) and kappa >= 0):
            raise ValueError(f"kappa must be a finite number >= 0, got {kappa!r}")
        model.link_likelihood.latent_threshold(level, 1.0)  # (ValueError naming level, before any candidate)
        self.level, self.kappa, self.threshold = float(level), float(kappa), threshold

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: Tensor) -> Tensor:
        """The straddle at ``X`` of shape ``(batch, 1, d)``, shape ``(batch,)``, in latent units."""
        mean, var = self._latent(X)
        likelihood = self.model.link_likelihood
        if self.threshold == "predictive":
            t = _Threshold.apply(var, likelihood, self.level)
        else:  # (the link's own threshold: a number)
            t = float(np.asarray(likelihood.latent_threshold(self.level, np.zeros(1)))[0])
        return self.kappa * torch.sqrt(var.clamp_min(0.0)) - torch.abs(mean - t)
