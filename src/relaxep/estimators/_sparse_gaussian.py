r"""Sparse (FITC) GP regression with Gaussian noise in closed form: the model behind
``GPRegressor(inducing_points=M)`` with the default likelihood.

The prior is the FITC prior of :mod:`relaxep.posterior.sparse` (Snelson & Ghahramani 2006, "Sparse Gaussian
processes using pseudo-inputs", NIPS; Quiñonero-Candela & Rasmussen 2005, "A unifying view of sparse
approximate Gaussian process regression", JMLR 6), :math:`f \sim N(0, Q + G)`.  With
:math:`p(y_i | f_i) = N(y_i | f_i, \sigma^2)` the EP sites are the likelihood terms themselves,

.. math::
    \tau_i = 1/\sigma^2,\qquad \nu_i = y_i/\sigma^2,

so EP's fixed point is reached without a sweep: one refresh of the FITC posterior at these sites
(:class:`~relaxep.posterior.SparsePosterior`, :math:`O(nM^2)`, no ``n x n`` array) is the exact posterior of
the FITC model, and its evidence the FITC marginal likelihood, from :math:`\mu = K(K + \sigma^2 I)^{-1}y`
(:math:`K = Q + G`):

.. math::
    \log p(y) = -\tfrac12 y^\top(K + \sigma^2 I)^{-1}y - \tfrac12\log|K + \sigma^2 I| - \tfrac n2\log 2\pi
    = \log Z_q - \frac{y^\top y}{2\sigma^2} - \frac n2\log(2\pi\sigma^2),

:math:`\log Z_q = \tfrac12\nu^\top\mu - \tfrac12\log|I + KT|` the posterior's
:meth:`~relaxep.posterior.base.RefreshedPosterior.log_partition` (:math:`(K + \sigma^2 I)^{-1}y =
(y - \mu)/\sigma^2` and :math:`|K + \sigma^2 I| = \sigma^{2n}|I + KT|`).  The gradient in the kernel's
hyperparameters and the inducing inputs is the FITC evidence gradient at fixed sites
(:func:`~relaxep.posterior.sparse_gradient.sparse_evidence_gradient`: exact here, the sites being the
likelihood's), and in :math:`\log\sigma^2` the likelihood's term
(:func:`~relaxep.inference.evidence.likelihood_evidence_gradient`),

.. math::
    \frac{\partial\log p(y)}{\partial\log\sigma^2}
      = \sum_i \frac{\sigma^2}{2S_i}\Big(\frac{(y_i - h_i)^2}{S_i} - 1\Big),\qquad S_i = \lambda_i + \sigma^2,

:math:`(h_i, \lambda_i)` the cavities.  Everything else (the search, the stochastic search, predictions) is
:class:`~relaxep.estimators._models._LatentModel`'s: this model only replaces its run of EP.
"""

from __future__ import annotations

import numpy as np

from relaxep._typing import Array
from relaxep.errors import ImproperPosteriorError
from relaxep.estimators._models import _LatentModel
from relaxep.inference import InferenceResult
from relaxep.likelihoods import Likelihood
from relaxep.posterior import Prior

__all__ = ["_SparseGaussianModel", "sparse_gaussian_fit"]

_LOG_2PI = np.log(2.0 * np.pi)


def sparse_gaussian_fit(prior: Prior, y: Array, likelihood: Likelihood) -> InferenceResult:
    r"""The exact posterior and evidence of the FITC ``prior`` under Gaussian noise (module docstring): the
    posterior at the sites :math:`\tau = 1/\sigma^2`, :math:`\nu = y/\sigma^2` after one refresh, as an
    :class:`~relaxep.inference.InferenceResult` (``"converged"`` in 0 sweeps; ``"diverged"``, evidence
    ``nan``, where the posterior is improper: some :math:`d_i \le 0` from a negative conditional variance)."""
    noise = float(likelihood.noise)  # type: ignore[attr-defined]
    n = y.shape[0]
    tau, nu = np.full(n, 1.0 / noise), y / noise
    try:
        post = prior.posterior(tau, nu)
        mean = post.mean
        log_evidence = post.log_partition() - 0.5 * float(y @ y) / noise - 0.5 * n * (_LOG_2PI + np.log(noise))
        status = "converged"
    except ImproperPosteriorError:
        post, mean, log_evidence, status = None, np.full(n, np.nan), float("nan"), "diverged"
    return InferenceResult(
        mean=mean.copy(), alpha=nu - tau * mean, site_precision=tau, site_mean_precision=nu,
        relaxation=np.zeros(n), status=status, n_sweeps=0, n_skipped=0, trace=np.zeros(0),
        log_evidence=float(log_evidence), likelihood=likelihood, method=None,
        skipped_per_sweep=np.zeros(0, dtype=int), step_sizes=np.zeros(0), posterior=post,
    )  # fmt: skip


class _SparseGaussianModel(_LatentModel):
    """FITC regression with Gaussian noise (module docstring): :class:`_LatentModel` whose every run, the
    search's and the final fit's, is :func:`sparse_gaussian_fit` (no sweeps, no warm start, no rule)."""

    def _run(self, prior: Prior, y: Array, likelihood: Likelihood, searching: bool = False) -> InferenceResult:
        return sparse_gaussian_fit(prior, y, likelihood)
