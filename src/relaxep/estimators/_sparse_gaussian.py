r"""Sparse GP regression with Gaussian noise in closed form: the model behind ``GPRegressor(inducing_points=M)``
with the default likelihood.

Its hyperparameters, noise and inducing inputs maximise Titsias' (2009, "Variational learning of inducing
variables in sparse Gaussian processes", AISTATS) collapsed bound on the evidence,

.. math::
    F = \log N(y \mid 0,\ Q + \sigma^2 I) - \frac{1}{2\sigma^2}\operatorname{tr}(K - Q),
    \qquad Q = K_{fu}K_{uu}^{-1}K_{uf},

and its posterior is the bound's optimal :math:`q(u)`, the posterior of the DTC prior :math:`f \sim N(0, Q)`
(:class:`~relaxep.posterior.SparsePrior` with ``conditional="dtc"``) under the noise.  The first term is EP's
fixed point on that prior reached without a sweep: with :math:`p(y_i | f_i) = N(y_i | f_i, \sigma^2)` the
sites are the likelihood terms themselves, :math:`\tau_i = 1/\sigma^2`, :math:`\nu_i = y_i/\sigma^2`, one
refresh (:math:`O(nM^2)`, no ``n x n`` array) gives the exact posterior, and

.. math::
    \log N(y \mid 0, Q + \sigma^2 I) = \log Z_q - \frac{y^\top y}{2\sigma^2} - \frac n2\log(2\pi\sigma^2),

:math:`\log Z_q = \tfrac12\nu^\top\mu - \tfrac12\log|I + QT|` the posterior's
:meth:`~relaxep.posterior.base.RefreshedPosterior.log_partition`.  The gradient in the kernel's
hyperparameters and the inducing inputs is
:func:`~relaxep.posterior.sparse_gradient.sparse_evidence_gradient` with ``collapsed=True`` (the trace enters
the chain rule as FITC's diagonal does, with weight :math:`-\tau_i/2`), and in :math:`\log\sigma^2` the
likelihood's term (:func:`~relaxep.inference.evidence.likelihood_evidence_gradient`) plus the trace's,

.. math::
    \frac{\partial F}{\partial\log\sigma^2}
      = \sum_i \frac{\sigma^2}{2S_i}\Big(\frac{(y_i - h_i)^2}{S_i} - 1\Big)
      + \frac{\operatorname{tr}(K - Q)}{2\sigma^2},
    \qquad S_i = \lambda_i + \sigma^2,

:math:`(h_i, \lambda_i)` the cavities.  Why the bound and not FITC's marginal likelihood, which is also in closed
form: with the inducing inputs learned, FITC shrinks the noise and moves it into its heteroscedastic diagonal
(Bauer, van der Wilk & Rasmussen 2016, "Understanding probabilistic sparse Gaussian process approximations",
NIPS); measured in ``benchmarks/sparse_regression_small.py`` (FITC learned noise 0.02-0.03 sd against the
true 0.1, its test NLPD 0.15-0.28 nats behind the dense model's).  The bound is a lower bound on the exact
evidence, tight as :math:`Q \to K`: with the inducing inputs at the training inputs it is the dense model's
evidence and posterior.  The stochastic search (from 20 000 rows) and the Dask shards learn by their own EP
evidence on the FITC prior; the final fit is this one.  Everything else (the search, predictions) is
:class:`~relaxep.estimators._models._LatentModel`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep.errors import ImproperPosteriorError
from relaxep.estimators._models import _LatentModel, _SparsePriors
from relaxep.inference import InferenceResult
from relaxep.inference.evidence import likelihood_evidence_gradient
from relaxep.likelihoods import Likelihood
from relaxep.posterior import Posterior, Prior, SparsePrior
from relaxep.posterior.sparse_gradient import sparse_evidence_gradient

__all__ = ["_CollapsedPriors", "_SparseGaussianModel", "sparse_gaussian_fit"]

_LOG_2PI = np.log(2.0 * np.pi)


def sparse_gaussian_fit(prior: Prior, y: Array, likelihood: Likelihood) -> InferenceResult:
    r"""The exact posterior of the sparse ``prior`` under Gaussian noise and its evidence, less
    :math:`\operatorname{tr}(K - Q)/2\sigma^2` on a ``"dtc"`` prior (Titsias' bound, module docstring): the
    posterior at the sites :math:`\tau = 1/\sigma^2`, :math:`\nu = y/\sigma^2` after one refresh, as an
    :class:`~relaxep.inference.InferenceResult` (``"converged"`` in 0 sweeps; ``"diverged"``, evidence
    ``nan``, where the posterior is improper)."""
    noise = float(likelihood.noise)  # type: ignore[attr-defined]
    n = y.shape[0]
    tau, nu = np.full(n, 1.0 / noise), y / noise
    try:
        post = prior.posterior(tau, nu)
        mean = post.mean
        log_evidence = post.log_partition() - 0.5 * float(y @ y) / noise - 0.5 * n * (_LOG_2PI + np.log(noise))
        log_evidence -= 0.5 * float(getattr(prior, "trace_gap", 0.0)) / noise
        status = "converged"
    except ImproperPosteriorError:
        post, mean, log_evidence, status = None, np.full(n, np.nan), float("nan"), "diverged"
    return InferenceResult(
        mean=mean.copy(), alpha=nu - tau * mean, site_precision=tau, site_mean_precision=nu,
        relaxation=np.zeros(n), status=status, n_sweeps=0, n_skipped=0, trace=np.zeros(0),
        log_evidence=float(log_evidence), likelihood=likelihood, method=None,
        skipped_per_sweep=np.zeros(0, dtype=int), step_sizes=np.zeros(0), posterior=post,
    )  # fmt: skip


class _CollapsedPriors(_SparsePriors):
    """DTC priors (``SparsePrior(conditional="dtc")``) and the gradient of Titsias' bound in theta and ``Z``."""

    def build(self, kernel: Kernel, X: Any, Z: Array | None, eval_gradient: bool) -> SparsePrior:
        return SparsePrior.from_kernel(kernel, X, Z, self.noise, n_jobs=self.n_jobs, conditional="dtc")

    def gradient(self, prior: SparsePrior, posterior: Posterior, kernel: Kernel) -> tuple[Array, Array]:
        return sparse_evidence_gradient(posterior, kernel, collapsed=True)


class _SparseGaussianModel(_LatentModel):
    """Sparse regression with Gaussian noise (module docstring): :class:`_LatentModel` on DTC priors whose every
    run, the search's and the final fit's, is :func:`sparse_gaussian_fit` (no sweeps, no warm start, no rule),
    scored by Titsias' bound."""

    def __init__(self, priors: _SparsePriors, *args: Any, **kwargs: Any) -> None:
        super().__init__(_CollapsedPriors(priors.noise, priors.n_jobs), *args, **kwargs)

    def _run(self, prior: Prior, y: Array, likelihood: Likelihood, searching: bool = False) -> InferenceResult:
        return sparse_gaussian_fit(prior, y, likelihood)

    def _likelihood_gradient(self, prior: Prior, result: InferenceResult, likelihood: Likelihood, y: Array) -> Array:
        r"""The noise's gradient: the likelihood's term plus the trace's :math:`\operatorname{tr}(K-Q)/2\sigma^2`."""
        grad = likelihood_evidence_gradient(result.posterior, likelihood, y)
        if grad.size:
            grad = grad + 0.5 * float(getattr(prior, "trace_gap", 0.0)) / float(likelihood.noise)  # type: ignore[attr-defined]
        return grad
