r"""Closed-form GP regression (:mod:`relaxep.estimators._exact`) on another array library's device
(:mod:`relaxep._xp`), for an ``RBF`` or ``ConstantKernel * RBF`` kernel: the same equations in the operations
every library has, with the gradient in the kernel's hyperparameters in closed form
(:func:`~relaxep.posterior.dense_device.rbf_trace_gradient`, no ``n x n x p`` tensor):

.. math::
    L = \operatorname{chol}(K + \Sigma),\quad a = L^{-\top}L^{-1}y,\quad
    \frac{\partial\log p(y)}{\partial\theta_j} = \tfrac12\operatorname{tr}\big((aa^\top - K_\Sigma^{-1})
    \,\partial K/\partial\theta_j\big),\quad K_\Sigma^{-1} = L^{-\top}L^{-1}

(Rasmussen & Williams 2006, Algorithm 2.1 and eq. 5.9).  The targets stay on the host (they are ``O(n)``);
``X``, ``K`` and its factor live on the device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._memory import FIT_REMEDY
from relaxep._typing import Array
from relaxep._xp import (
    ArraySpace,
    add_to_diagonal,
    check_device_memory,
    cholesky_lower,
    namespace,
    on_device_of,
    solve_lower,
    to_numpy,
)
from relaxep.estimators._exact import _LOG_2PI, ExactFit, _ExactModel, not_positive_definite
from relaxep.estimators._search import FitReport
from relaxep.likelihoods import Likelihood
from relaxep.posterior.dense_device import rbf_trace_gradient
from relaxep.posterior.rbf import as_scaled_rbf, rbf

__all__ = ["_DeviceExactModel"]


class _DeviceExactModel(_ExactModel):
    """:class:`~relaxep.estimators._exact._ExactModel` with ``X`` on another library's device (``space``, chosen
    once by :func:`device_exact_model`)."""

    def __init__(
        self, kernel: Kernel, alpha: Any, likelihood: Likelihood | None, search: Any, *, space: ArraySpace
    ) -> None:
        super().__init__(kernel, alpha, likelihood, search)
        self.space = space

    def _kernel_matrix(self, kernel: Kernel, X: Any, noise: Any) -> tuple[Any, Any]:
        """:math:`K` (noise-free) and :math:`K + \\Sigma` on ``X``'s device, after the memory guard."""
        xp, n = self.space.xp, X.shape[0]
        check_device_memory(X, 3.0 * 8.0 * n * n, f"a dense GP on n = {n} points", FIT_REMEDY + ", or the CPU")
        K = rbf(as_scaled_rbf(kernel, X.shape[1]), X, X, self.space)
        diag = on_device_of(np.broadcast_to(np.asarray(noise, dtype=float), (n,)).copy(), K)
        return K, add_to_diagonal(xp, xp.asarray(K, copy=True), diag)

    def factor(self, kernel: Kernel, X: Any, noise: Any, eval_gradient: bool = False) -> tuple[Array, Any]:
        """The lower Cholesky factor of :math:`K + \\Sigma` on the device (``ValueError`` where it has none) and,
        with ``eval_gradient``, the noise-free ``K``."""
        K, k_sigma = self._kernel_matrix(kernel, X, noise)
        L = cholesky_lower(self.space.xp, k_sigma)
        if L is None:
            raise ValueError(not_positive_definite(kernel))
        return L, (K if eval_gradient else None)

    def evidence(self, x: Array, eval_gradient: bool, X: Any, y: Array) -> tuple[float, Any]:
        kernel, likelihood, _ = self.hyper.split(x)
        try:
            L, K = self.factor(kernel, X, self._noise(likelihood), eval_gradient)
        except ValueError:
            return -np.inf, (np.zeros_like(x) if eval_gradient else None)
        xp = self.space.xp
        Y = on_device_of(y.reshape(y.shape[0], -1), L)
        a = solve_lower(xp, L, solve_lower(xp, L, Y), trans=True)
        lml = self._log_ml(xp, L, Y, a)
        if not eval_gradient:
            return lml, None
        n = L.shape[0]
        linv = solve_lower(xp, L, xp.eye(n, dtype=L.dtype, device=getattr(L, "device", None)))
        inner = a @ a.T - Y.shape[1] * (linv.T @ linv)
        grad = rbf_trace_gradient(self.space, inner, K, X, as_scaled_rbf(kernel, X.shape[1]))
        if likelihood is not None and likelihood.n_dims:
            trace = float(xp.sum(xp.linalg.diagonal(inner)))
            grad = np.append(grad, 0.5 * float(likelihood.noise) * trace)  # type: ignore[attr-defined]
        return lml, grad

    @staticmethod
    def _log_ml(xp: Any, L: Any, Y: Any, a: Any) -> float:
        log_det = float(xp.sum(xp.log(xp.linalg.diagonal(L))))
        return float(-0.5 * float(xp.sum(Y * a)) - Y.shape[1] * (log_det + 0.5 * Y.shape[0] * _LOG_2PI))

    def fit(self, X: Any, y: Array, rng: np.random.RandomState | None) -> FitReport:
        report = self._learn(X, y, rng)
        xp = self.space.xp
        try:
            self.L_, _ = self.factor(self.kernel_, X, self._noise(self.likelihood))
        except ValueError as exc:
            raise np.linalg.LinAlgError(*exc.args) from exc  # (as the numpy path: scikit-learn's message)
        Y = on_device_of(y.reshape(y.shape[0], -1), self.L_)
        self.alpha_ = solve_lower(xp, self.L_, solve_lower(xp, self.L_, Y), trans=True)
        self.X, self.y = X, y
        self.result_ = ExactFit(self._log_ml(xp, self.L_, Y, self.alpha_))
        self.alpha_ = self.alpha_ if y.ndim > 1 else self.alpha_[:, 0]
        return report

    def predict_latent(self, X: Any, full_cov: bool) -> tuple[Array, Array]:
        xp = self.space.xp
        kern = as_scaled_rbf(self.kernel_, self.X.shape[1])
        X = on_device_of(to_numpy(X), self.X)
        K_trans = rbf(kern, X, self.X, self.space)
        V = solve_lower(xp, self.L_, K_trans.T)
        if full_cov:
            return K_trans @ self.alpha_, rbf(kern, X, X, self.space) - V.T @ V
        return K_trans @ self.alpha_, kern.constant - xp.sum(V * V, axis=0)


def device_exact_model(
    kernel: Kernel, alpha: Any, likelihood: Likelihood | None, search: Any, X: Any
) -> _ExactModel | _DeviceExactModel:
    """The closed-form model for ``X``: numpy's, or the device's (the array space chosen here, once)."""
    space = namespace(X)
    if space.on_host:
        return _ExactModel(kernel, alpha, likelihood, search)
    return _DeviceExactModel(kernel, alpha, likelihood, search, space=space)
