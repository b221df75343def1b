r"""The classifier's output :math:`g` for BoTorch: a Gaussian whose :math:`P(g > 0)` is the predictive probability.

For the probit likelihood :math:`\Phi(f)` the label is the sign of :math:`g = f + e`, :math:`e \sim N(0, 1)`, so
with the latent predictive :math:`N(\mu, s^2)`,

.. math:: P(y = 1) = \Phi\big(\mu / \sqrt{1 + s^2}\big) = P(g > 0),\qquad g \sim N(\mu, 1 + s^2).

For every other binary likelihood :math:`t` the same variance :math:`v = 1 + s^2` is kept and the mean is chosen so
that the probability is the likelihood's own predictive :math:`p = \int t(f) N(f | \mu, s^2) df`:

.. math:: m = \sqrt{v}\, z,\qquad z = \Phi^{-1}(p),

(``NoisyProbit``: :math:`p = \epsilon + (1 - 2\epsilon)\Phi(\mu/\sqrt{\sigma^2 + s^2})`; ``Logistic`` and
``NoisyStep``: their ``log Z`` at power 1).  :math:`p` is computed exactly as ``GPClassifier.predict_proba``
computes it, from the log-odds :math:`d = \log Z_t(\mu) - \log Z_t(-\mu)` (the likelihood's
``predict_log_odds``, in numpy), and :math:`z` from :math:`\log p` or :math:`\log(1 - p)`, whichever is the
smaller (``scipy.special.ndtri_exp``: full precision in either tail).  Its gradient in :math:`(\mu, s^2)` is
exact: :math:`\partial_\mu \log Z` is the likelihood's ``dlog_z``, and, since a Gaussian smoothing obeys the heat
equation :math:`\partial Z/\partial s^2 = \tfrac12 \partial^2 Z/\partial\mu^2`,

.. math::
    \frac{\partial \log Z}{\partial s^2} = \tfrac12\big(\partial^2_\mu \log Z + (\partial_\mu \log Z)^2\big),\qquad
    \frac{\partial z}{\partial d} = \frac{p\,(1 - p)}{N(z)} .

Houlsby et al. (2011, *Bayesian active learning for classification and preference learning*) use the same
reduction of the probit predictive to a Gaussian integral.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from scipy.special import log_expit, ndtri_exp
from torch import Tensor

from relaxep.likelihoods import BinaryLikelihood, Probit

__all__ = ["output_mean", "probit_score"]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def _score_and_slopes(
    likelihood: BinaryLikelihood, mean: np.ndarray, var: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``z = Phi^{-1}(p)`` and its derivatives in the latent mean and variance (module docstring), in numpy."""
    d, dd_dmean, dd_dvar = likelihood.predict_log_odds_slopes(mean, var)
    log_p, log_q = log_expit(d), log_expit(-d)  # (exactly predict_proba's [expit(-d), expit(d)], in logs)
    z = np.where(d < 0.0, ndtri_exp(log_p), -ndtri_exp(log_q))
    dz_dd = np.exp(log_p + log_q + 0.5 * z * z + _LOG_SQRT_2PI)
    return z, dz_dd * dd_dmean, dz_dd * dd_dvar


class _Score(torch.autograd.Function):
    """:math:`z(\\mu, s^2)` with its exact first derivatives (the numpy forward, the chain rule backward)."""

    @staticmethod
    def forward(ctx: Any, mean: Tensor, var: Tensor, likelihood: BinaryLikelihood) -> Tensor:
        m = mean.detach().cpu().numpy().astype(float)
        v = var.detach().cpu().numpy().astype(float)
        z, dz_dmean, dz_dvar = _score_and_slopes(likelihood, m.ravel(), np.maximum(v, 1e-300).ravel())
        ctx.save_for_backward(
            torch.as_tensor(dz_dmean.reshape(m.shape)).to(mean), torch.as_tensor(dz_dvar.reshape(m.shape)).to(mean)
        )
        return torch.as_tensor(z.reshape(m.shape)).to(mean)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        dz_dmean, dz_dvar = ctx.saved_tensors
        return grad * dz_dmean, grad * dz_dvar, None


def probit_score(likelihood: BinaryLikelihood, mean: Tensor, var: Tensor) -> Tensor:
    r""":math:`z = \Phi^{-1}(p)` of the predictive probability :math:`p` of class 1 at the latent
    :math:`N(\mu, s^2)`, differentiable in ``mean`` and ``var`` (module docstring).  For ``Probit`` exactly
    :math:`\mu/\sqrt{1 + s^2}`, in torch (twice differentiable); for any other binary likelihood from its
    ``log Z`` in numpy, with exact first derivatives (one backward pass; no second derivatives)."""
    if type(likelihood) is Probit:
        return mean / torch.sqrt(1.0 + var)
    if not isinstance(likelihood, BinaryLikelihood):
        raise TypeError(f"a binary likelihood is needed, got {likelihood!r}")
    return _Score.apply(mean, var, likelihood)


def output_mean(likelihood: BinaryLikelihood, mean: Tensor, var: Tensor) -> Tensor:
    r"""The mean :math:`m = \sqrt{1 + s^2}\, z` of the output :math:`g \sim N(m, 1 + s^2)` with
    :math:`P(g > 0) = p` (:func:`probit_score`); for ``Probit`` the latent mean :math:`\mu` itself (exactly:
    :math:`g = f + e`)."""
    if type(likelihood) is Probit:
        return mean
    return torch.sqrt(1.0 + var) * probit_score(likelihood, mean, var)
