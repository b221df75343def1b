r"""GP regression with Gaussian noise in closed form: the model behind ``GPRegressor`` with a Gaussian likelihood.

With :math:`p(y | f) = N(y | f, \sigma^2)` the EP sites are the likelihood terms themselves, so EP's
fixed point (reached in one parallel sweep) is the exact posterior and its evidence the exact
marginal likelihood; this model computes them directly (Rasmussen & Williams 2006, Algorithm 2.1
and eq. 5.9), as scikit-learn's ``GaussianProcessRegressor`` does:

.. math::
    L = \operatorname{chol}(K + \operatorname{diag}(\alpha) + \sigma^2 I),\quad
    \boldsymbol\alpha = L^{-\top}L^{-1}y,\quad
    \log p(y) = -\tfrac12 y^\top\boldsymbol\alpha - \sum_i \log L_{ii} - \tfrac n2\log 2\pi,

    \frac{\partial \log p(y)}{\partial\theta_j}
      = \tfrac12\operatorname{tr}\Big((\boldsymbol\alpha\boldsymbol\alpha^\top - (K + \Sigma)^{-1})
        \frac{\partial K}{\partial\theta_j}\Big),

summed over the columns of a multi-output ``y``.  :math:`\alpha` is scikit-learn's ``alpha`` (a
scalar or one value per sample) and :math:`\sigma^2` the noise of a
:class:`~relaxep.likelihoods.Gaussian` likelihood, learned with the kernel (its derivative in
:math:`\log\sigma^2` is the trace above with :math:`\partial K/\partial\log\sigma^2 = \sigma^2 I`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from sklearn.gaussian_process.kernels import Kernel

from relaxep._memory import FIT_REMEDY, check_memory, dense_bytes
from relaxep._typing import Array
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._search import FitReport, _EvidenceSearch, at_bounds
from relaxep.likelihoods import Likelihood

__all__ = ["ExactFit", "_ExactModel"]

_LOG_2PI = np.log(2.0 * np.pi)


@dataclass(frozen=True)
class ExactFit:
    """The closed-form fit's record, shaped like an inference result: exact, so ``"converged"`` in 0 sweeps."""

    log_evidence: float
    status: str = "converged"
    n_sweeps: int = 0

    @property
    def converged(self) -> bool:
        return True


def not_positive_definite(kernel: Kernel) -> str:
    """scikit-learn's message for a kernel matrix without a Cholesky factor (clients match on it)."""
    return (
        f"The kernel, {kernel}, is not returning a positive definite matrix. Try gradually increasing the "
        "'alpha' parameter of your GaussianProcessRegressor estimator."
    )


def _log_ml(L: Array, Y: Array, a: Array) -> float:
    r""":math:`\log p(Y) = -\tfrac12 \operatorname{tr}(Y^\top a) - n_{out}\,(\sum_i \log L_{ii} + \tfrac n2 \log 2\pi)`,
    :math:`a = K^{-1} Y`, :math:`K = L L^\top` (Rasmussen & Williams 2006, eq. 2.30, per output)."""
    return float(-0.5 * np.sum(Y * a) - Y.shape[1] * (np.log(np.diag(L)).sum() + 0.5 * Y.shape[0] * _LOG_2PI))


class _ExactModel:
    """Closed-form GP regression (module docstring); ``likelihood`` a Gaussian (its noise learned) or ``None``."""

    def __init__(self, kernel: Kernel, alpha: float | Array, likelihood: Likelihood | None, search: _EvidenceSearch):
        self.kernel_, self.alpha, self.likelihood, self.search = kernel, alpha, likelihood, search

    @property
    def _lik_theta(self) -> Array:
        return np.zeros(0) if self.likelihood is None else self.likelihood.theta

    def _noise(self, likelihood: Likelihood | None) -> Any:
        return self.alpha if likelihood is None else self.alpha + float(likelihood.noise)  # type: ignore[attr-defined]

    @property
    def hyper(self) -> HyperVector:
        """The search's vector: the kernel's log-hyperparameters, then the Gaussian's log-noise."""
        return HyperVector(self.kernel_, self.likelihood)

    def factor(self, kernel: Kernel, X: Any, noise: Any, eval_gradient: bool = False) -> tuple[Array, Any]:
        """The lower Cholesky factor of :math:`K + \\text{noise}` (and :math:`\\partial K/\\partial\\theta`)."""
        n = X.shape[0] if hasattr(X, "shape") else len(X)
        copies = 2 + (kernel.n_dims if eval_gradient else 0)
        check_memory(dense_bytes(n, copies), f"a dense GP on n = {n} points", FIT_REMEDY)
        K, dK = kernel(X, eval_gradient=True) if eval_gradient else (kernel(X), None)
        K[np.diag_indices_from(K)] += noise
        return linalg.cholesky(K, lower=True, check_finite=False), dK

    def evidence(self, x: Array, eval_gradient: bool, X: Any, y: Array) -> tuple[float, Any]:
        """The log marginal likelihood (and its gradient) at the optimiser's vector ``x`` (kernel, then noise)."""
        kernel, likelihood, _ = self.hyper.split(x)
        try:
            L, dK = self.factor(kernel, X, self._noise(likelihood), eval_gradient)
        except (linalg.LinAlgError, ValueError):
            return -np.inf, (np.zeros_like(x) if eval_gradient else None)
        Y = y.reshape(y.shape[0], -1)
        a = linalg.cho_solve((L, True), Y, check_finite=False)
        lml = _log_ml(L, Y, a)
        if not eval_gradient:
            return lml, None
        # tr((a a^T - n_out K^-1) dK_j) / 2, without an (n, n, n_out) array; K^-1 from L by LAPACK potri
        k_inv = lapack.dpotri(L, lower=1)[0]  # (cannot fail: L's diagonal is positive)
        k_inv = np.tril(k_inv) + np.tril(k_inv, -1).T
        inner = a @ a.T - Y.shape[1] * k_inv
        grad = 0.5 * np.einsum("ij,jik->k", inner, dK)
        if likelihood is not None and likelihood.n_dims:
            grad = np.append(grad, 0.5 * float(likelihood.noise) * np.trace(inner))  # type: ignore[attr-defined]
        return lml, grad

    def _learn(self, X: Any, y: Array, rng: np.random.RandomState | None) -> FitReport:
        """Learn (``rng`` given) the hyperparameters; the report names those at their bounds."""
        bounds: tuple[str, ...] = ()
        if rng is not None:
            hyper = self.hyper
            best = self.search.maximise(partial(self.evidence, X=X, y=y), hyper, rng)
            if best is not None:
                kernel, self.likelihood, _ = hyper.split(best)
                self.kernel_.theta = kernel.theta
            bounds = at_bounds(self.kernel_) + (() if self.likelihood is None else at_bounds(self.likelihood))
        return FitReport("converged", at_bounds=bounds)

    def fit(self, X: Any, y: Array, rng: np.random.RandomState | None) -> FitReport:
        """Learn (``rng`` given) the hyperparameters, then factor :math:`K + \\Sigma` at them."""
        report = self._learn(X, y, rng)
        try:
            self.L_, _ = self.factor(self.kernel_, X, self._noise(self.likelihood))
        except linalg.LinAlgError as exc:
            exc.args = (not_positive_definite(self.kernel_), *exc.args)
            raise
        self.alpha_ = linalg.cho_solve((self.L_, True), y, check_finite=False)
        self.X, self.y = X, y
        Y = y.reshape(y.shape[0], -1)
        self.result_ = ExactFit(_log_ml(self.L_, Y, self.alpha_.reshape(Y.shape)))
        return report

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        """The log marginal likelihood at the kernel's ``theta`` (the noise as fitted), or at both."""
        k = self.kernel_.theta.size
        x = theta if theta.size > k else np.concatenate([theta, self._lik_theta])
        if not clone_kernel:
            self.kernel_.theta = theta[:k]
        lml, grad = self.evidence(x, eval_gradient, self.X, self.y)
        return (np.float64(lml), grad[: theta.size]) if eval_gradient else np.float64(lml)

    def predict_latent(self, X: Any, full_cov: bool) -> tuple[Array, Array]:
        """Mean (one column per output) and variances or covariance of the latent at ``X`` (Algorithm 2.1)."""
        K_trans = self.kernel_(X, self.X)
        mean = K_trans @ self.alpha_
        V = linalg.solve_triangular(self.L_, K_trans.T, lower=True, check_finite=False)
        if full_cov:
            return mean, self.kernel_(X) - V.T @ V
        return mean, self.kernel_.diag(X) - np.einsum("ij,ij->j", V, V)
