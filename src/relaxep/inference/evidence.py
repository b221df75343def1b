r"""The EP approximation to the log evidence and its gradient in the prior's hyperparameters.

Representation-free: only the cavities, the marginals and :math:`\log Z_q` of the
:class:`~relaxep.posterior.Posterior` protocol enter the evidence; the gradient needs the
posterior covariance (dense priors) and :math:`\partial K / \partial\theta`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from relaxep._typing import Array
from relaxep.likelihoods import Likelihood
from relaxep.posterior import Posterior

if TYPE_CHECKING:
    from relaxep.inference.result import InferenceResult

__all__ = ["evidence_gradient", "log_evidence"]


def log_evidence(post: Posterior, likelihood: Likelihood, labels: Array) -> float:
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
    a_ii = post.marginal_var
    log_zhat = likelihood.log_z(labels * h, lam).log_z
    tau, mu = post.site_precision, post.mean
    per_site = log_zhat + 0.5 * np.log1p(lam * tau) + 0.5 * (h**2 / lam - mu**2 / a_ii)
    return float(np.sum(per_site) + post.log_partition())


def evidence_gradient(result: InferenceResult, kernel_gradient: Array) -> Array:
    r"""Gradient of the EP log evidence in the kernel's hyperparameters at ``result``'s sites (dense priors):
    :meth:`DensePosterior.evidence_gradient <relaxep.posterior.DensePosterior.evidence_gradient>`.

    ``kernel_gradient`` has shape ``(n, n, n_hyperparameters)`` (scikit-learn's).
    """
    return result.posterior.evidence_gradient(kernel_gradient)
