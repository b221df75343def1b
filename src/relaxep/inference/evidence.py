r"""The EP approximation to the log evidence and its gradient in the prior's hyperparameters.

Representation-free: only the cavities, the marginals and :math:`\log Z_q` of the
:class:`~relaxep.posterior.Posterior` protocol enter the evidence; the gradient needs the
posterior covariance (dense priors) and :math:`\partial K / \partial\theta`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Protocol

import numpy as np

from relaxep._typing import Array
from relaxep.likelihoods import Likelihood
from relaxep.posterior import DensePosterior, Posterior

__all__ = ["evidence_gradient", "likelihood_evidence_gradient", "log_evidence", "site_evidence_terms"]


def log_evidence(post: Posterior, likelihood: Likelihood, y: Array) -> float:
    r"""EP approximation to :math:`\log p(y)` at the posterior's sites.

    With each site written :math:`s_i \exp(-\tau_i f^2/2 + \nu_i f)` and :math:`s_i` chosen
    so that site times cavity integrates to the tilted normaliser :math:`\hat Z_i`,

    .. math::
        \log Z_{EP} = \sum_i \Big[\log\hat Z_i + \tfrac12\log(1 + \lambda_i\tau_i)
          + \tfrac12\Big(\frac{h_i^2}{\lambda_i} - \frac{\mu_i^2}{A_{ii}}\Big)\Big]
          + \log Z_q,\qquad \log Z_q = \tfrac12 \nu^\top\mu - \tfrac12\log|I + K T|,

    :math:`(h_i, \lambda_i)` the full cavities and :math:`\hat Z_i` at ``u = 1`` whatever
    rule produced the sites (the same formula serves Power EP and REP).  Equal to
    Rasmussen & Williams eq. 3.65 when all :math:`\tau_i > 0`; ``nan`` when a cavity is
    improper.
    """
    h, lam = post.cavities()
    if np.any(~(lam > 0.0)) or np.any(~np.isfinite(lam)):
        return float("nan")
    per_site = site_evidence_terms(likelihood, y, h, lam, post.site_precision, post.mean, post.marginal_var)
    return float(np.sum(per_site) + post.log_partition())


def site_evidence_terms(
    likelihood: Likelihood,
    y: Array,
    cavity_mean: Array,
    cavity_var: Array,
    site_precision: Array,
    mean: Array,
    marginal_var: Array,
    xp: ModuleType | None = None,
) -> Array:
    r"""The per-site terms of :func:`log_evidence`, for proper full cavities :math:`(h_i, \lambda_i)`:

    .. math::
        \log\hat Z_i + \tfrac12\log(1 + \lambda_i\tau_i)
        + \tfrac12\Big(\frac{h_i^2}{\lambda_i} - \frac{\mu_i^2}{A_{ii}}\Big).

    Elementwise, so a block of sites (a Dask shard) sums its own share.  ``xp``: the namespace of the arrays where
    they are another library's (:math:`\log\hat Z_i` from :meth:`Likelihood.log_z_on
    <relaxep.likelihoods.Likelihood.log_z_on>` there, the device loop's); ``None``, numpy's
    (:meth:`~relaxep.likelihoods.Likelihood.log_z`).
    """
    if xp is None:
        xp, log_zhat = np, likelihood.log_z(y, cavity_mean, cavity_var).log_z
    else:
        log_zhat = likelihood.log_z_on(xp, y, cavity_mean, cavity_var, 1.0).log_z
    return (
        log_zhat
        + 0.5 * xp.log1p(cavity_var * site_precision)
        + 0.5 * (cavity_mean**2 / cavity_var - mean**2 / marginal_var)
    )


class _DenseFit(Protocol):
    """A fit on a dense prior (an :class:`~relaxep.inference.InferenceResult`, say)."""

    posterior: DensePosterior


def evidence_gradient(result: _DenseFit, kernel_gradient: Array) -> Array:
    r"""Gradient of the EP log evidence in the kernel's hyperparameters at ``result``'s sites (dense priors):
    :meth:`DensePosterior.evidence_gradient <relaxep.posterior.DensePosterior.evidence_gradient>`.

    ``kernel_gradient`` has shape ``(n, n, n_hyperparameters)`` (scikit-learn's).
    """
    return result.posterior.evidence_gradient(kernel_gradient)


def likelihood_evidence_gradient(post: Posterior, likelihood: Likelihood, y: Array) -> Array:
    r"""Gradient of the EP log evidence in the likelihood's hyperparameters (:attr:`Likelihood.theta
    <relaxep.likelihoods.Likelihood.theta>`), any representation.

    At an EP fixed point :math:`\log Z_{EP}` is stationary in the sites, and with the sites (so the
    cavities) held fixed only :math:`\log\hat Z_i` depends on the likelihood (Seeger 2005, "Expectation
    propagation for exponential families"):

    .. math::
        \frac{\partial \log Z_{EP}}{\partial\theta} = \sum_i \frac{\partial \log\hat Z_i}{\partial\theta}
        = \sum_i E_{\hat p_i}\Big[\frac{\partial \log p(y_i | f_i)}{\partial\theta}\Big].

    Zero-length where the likelihood has no learned hyperparameters.
    """
    if likelihood.n_dims == 0:
        return np.zeros(0)
    h, lam = post.cavities()
    return np.sum(likelihood.dlog_z_dtheta(y, h, lam), axis=0)
