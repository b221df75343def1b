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
from types import ModuleType
from typing import Any

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from sklearn.gaussian_process.kernels import Kernel

from relaxep._memory import FIT_REMEDY, check_memory, dense_bytes
from relaxep._typing import Array
from relaxep._xp import HOST, ArraySpace, cholesky_lower, solve_lower
from relaxep.errors import KernelNotPositiveDefiniteError
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


def _diagonal(xp: ModuleType, a: Any) -> Any:
    """The diagonal of the matrix ``a`` (``xp.linalg.diagonal``; ``np.diagonal`` before numpy 2.0)."""
    return xp.linalg.diagonal(a) if hasattr(xp.linalg, "diagonal") else xp.diagonal(a)


def _log_ml(xp: ModuleType, L: Any, Y: Any, a: Any) -> float:
    r""":math:`\log p(Y) = -\tfrac12 \operatorname{tr}(Y^\top a) - n_{out}\,(\sum_i \log L_{ii} + \tfrac n2 \log 2\pi)`,
    :math:`a = K^{-1} Y`, :math:`K = L L^\top` (Rasmussen & Williams 2006, eq. 2.30, per output), in ``xp``."""
    log_det = float(xp.sum(xp.log(_diagonal(xp, L))))
    return float(-0.5 * float(xp.sum(Y * a)) - Y.shape[1] * (log_det + 0.5 * Y.shape[0] * _LOG_2PI))


class _ExactModel:
    r"""Closed-form GP regression (module docstring); ``likelihood`` a Gaussian (its noise learned) or ``None``.

    The equations are written once, in the array namespace of :attr:`space` (numpy's here); the primitives a
    library answers differently are methods: :meth:`_kernel_matrix`, :meth:`_solve`, :meth:`_inverse`,
    :meth:`_trace_gradient` and the test covariances (numpy's: scikit-learn's kernel and its
    :math:`\partial K/\partial\theta`, LAPACK ``potrs`` and ``potri``;
    :class:`~relaxep.estimators._exact_device._DeviceExactModel` overrides them on a device).
    """

    #: the array library and device of ``X`` (numpy's here)
    space: ArraySpace = HOST

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

    # ------------------------------------------------------------------ numpy's primitives
    def _kernel_matrix(self, kernel: Kernel, X: Any, noise: Any, eval_gradient: bool) -> tuple[Any, Any]:
        r""":math:`K + \Sigma` and, with ``eval_gradient``, what :meth:`_trace_gradient` takes
        (:math:`\partial K/\partial\theta`), after the memory guard."""
        n = X.shape[0] if hasattr(X, "shape") else len(X)
        copies = 2 + (kernel.n_dims if eval_gradient else 0)
        check_memory(dense_bytes(n, copies), f"a dense GP on n = {n} points", FIT_REMEDY)
        K, dK = kernel(X, eval_gradient=True) if eval_gradient else (kernel(X), None)
        K[np.diag_indices_from(K)] += noise
        return K, dK

    def _targets(self, y: Array, like: Any) -> Any:
        """``y`` as an ``n x n_out`` matrix, in ``like``'s library."""
        return y.reshape(y.shape[0], -1)

    def _solve(self, L: Any, Y: Any) -> Any:
        r""":math:`K_\Sigma^{-1}Y` from the factor (LAPACK ``potrs``)."""
        return linalg.cho_solve((L, True), Y, check_finite=False)

    def _inverse(self, L: Any) -> Any:
        r""":math:`K_\Sigma^{-1}` from the factor (LAPACK ``potri``; cannot fail: ``L``'s diagonal is positive)."""
        k_inv = lapack.dpotri(L, lower=1)[0]
        return np.tril(k_inv) + np.tril(k_inv, -1).T

    def _trace_gradient(self, inner: Any, gradient: Any, X: Any, kernel: Kernel) -> Array:
        r""":math:`\tfrac12\operatorname{tr}(M\,\partial K/\partial\theta_j)`, ``M`` the symmetric ``inner``."""
        return 0.5 * np.einsum("ij,jik->k", inner, gradient)

    def _cross(self, X: Any) -> tuple[Any, Any]:
        """:math:`k(X_*, X)` and ``X_*`` as :meth:`_test_cov` takes it."""
        return self.kernel_(X, self.X), X

    def _test_cov(self, X: Any, full_cov: bool) -> Any:
        """:math:`k(X_*, X_*)`, or its diagonal."""
        return self.kernel_(X) if full_cov else self.kernel_.diag(X)

    # ------------------------------------------------------------------ the equations, once
    def factor(self, kernel: Kernel, X: Any, noise: Any, eval_gradient: bool = False) -> tuple[Any, Any]:
        r"""The lower Cholesky factor of :math:`K + \text{noise}` (and what :meth:`_trace_gradient` takes);
        :class:`~relaxep.errors.KernelNotPositiveDefiniteError` (scikit-learn's message) where it has none."""
        k_sigma, gradient = self._kernel_matrix(kernel, X, noise, eval_gradient)
        L = cholesky_lower(self.space.xp, k_sigma)
        if L is None:
            raise KernelNotPositiveDefiniteError(not_positive_definite(kernel))
        return L, gradient

    def evidence(self, x: Array, eval_gradient: bool, X: Any, y: Array) -> tuple[float, Any]:
        """The log marginal likelihood (and its gradient) at the optimiser's vector ``x`` (kernel, then noise)."""
        kernel, likelihood, _ = self.hyper.split(x)
        try:
            L, gradient = self.factor(kernel, X, self._noise(likelihood), eval_gradient)
        except (linalg.LinAlgError, ValueError):
            return -np.inf, (np.zeros_like(x) if eval_gradient else None)
        xp = self.space.xp
        Y = self._targets(y, L)
        a = self._solve(L, Y)
        lml = _log_ml(xp, L, Y, a)
        if not eval_gradient:
            return lml, None
        # tr((a a^T - n_out K^-1) dK_j) / 2, without an (n, n, n_out) array
        inner = a @ a.T - Y.shape[1] * self._inverse(L)
        grad = self._trace_gradient(inner, gradient, X, kernel)
        if likelihood is not None and likelihood.n_dims:
            trace = float(xp.sum(_diagonal(xp, inner)))
            grad = np.append(grad, 0.5 * float(likelihood.noise) * trace)  # type: ignore[attr-defined]
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
        r"""Learn (``rng`` given) the hyperparameters, then factor :math:`K + \Sigma` at them
        (``LinAlgError``, scikit-learn's message, where it has no factor)."""
        report = self._learn(X, y, rng)
        try:
            self.L_, _ = self.factor(self.kernel_, X, self._noise(self.likelihood))
        except KernelNotPositiveDefiniteError as exc:
            raise np.linalg.LinAlgError(*exc.args) from exc
        Y = self._targets(y, self.L_)
        alpha = self._solve(self.L_, Y)
        self.X, self.y = X, y
        self.result_ = ExactFit(_log_ml(self.space.xp, self.L_, Y, alpha))
        self.alpha_ = alpha if y.ndim > 1 else alpha[:, 0]
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
        xp = self.space.xp
        K_trans, X = self._cross(X)
        mean = K_trans @ self.alpha_
        V = solve_lower(xp, self.L_, K_trans.T)
        if full_cov:
            return mean, self._test_cov(X, True) - V.T @ V
        return mean, self._test_cov(X, False) - xp.sum(V * V, axis=0)
