r"""Closed-form GP regression (:mod:`relaxep.estimators._exact`) on another array library's device
(:mod:`relaxep._xp`), for an ``RBF`` or ``ConstantKernel * RBF`` kernel: the equations are
:class:`~relaxep.estimators._exact._ExactModel`'s, written once; here are only the primitives a device answers
differently: ``K`` from the RBF on the device, two triangular solves for :math:`K_\Sigma^{-1}Y` and
:math:`K_\Sigma^{-1} = L^{-\top}L^{-1}`, and the gradient in the kernel's hyperparameters in closed form
(:func:`~relaxep.posterior.dense_device.rbf_trace_gradient`, no ``n x n x p`` tensor):

.. math::
    \frac{\partial\log p(y)}{\partial\theta_j} = \tfrac12\operatorname{tr}\big((aa^\top - K_\Sigma^{-1})
    \,\partial K/\partial\theta_j\big)

(Rasmussen & Williams 2006, Algorithm 2.1 and eq. 5.9).  The targets stay on the host (they are ``O(n)``);
``X``, ``K`` and its factor live on the device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._memory import FIT_REMEDY
from relaxep._typing import Array
from relaxep._xp import ArraySpace, add_to_diagonal, check_device_memory, namespace, on_device_of, solve_lower, to_numpy
from relaxep.estimators._exact import _ExactModel
from relaxep.likelihoods import Likelihood
from relaxep.posterior.dense_device import rbf_trace_gradient
from relaxep.posterior.rbf import as_scaled_rbf, rbf

__all__ = ["_DeviceExactModel", "device_exact_model"]


class _DeviceExactModel(_ExactModel):
    """:class:`~relaxep.estimators._exact._ExactModel` with ``X`` on another library's device (``space``, chosen
    once by :func:`device_exact_model`)."""

    def __init__(
        self, kernel: Kernel, alpha: Any, likelihood: Likelihood | None, search: Any, *, space: ArraySpace
    ) -> None:
        super().__init__(kernel, alpha, likelihood, search)
        self.space = space

    def _kernel_matrix(
        self, kernel: Kernel, X: Any, noise: Any, eval_gradient: bool, n_gradients: int | None = None
    ) -> tuple[Any, Any]:
        """:math:`K + \\Sigma` on ``X``'s device and, with ``eval_gradient``, the noise-free ``K``, after the
        memory guard."""
        xp, n = self.space.xp, X.shape[0]
        check_device_memory(X, 3.0 * 8.0 * n * n, f"a dense GP on n = {n} points", FIT_REMEDY + ", or the CPU")
        K = rbf(as_scaled_rbf(kernel, X.shape[1]), X, X, self.space)
        diag = on_device_of(np.broadcast_to(np.asarray(noise, dtype=float), (n,)).copy(), K)
        return add_to_diagonal(xp, xp.asarray(K, copy=True), diag), (K if eval_gradient else None)

    def _targets(self, y: Array, like: Any) -> Any:
        return on_device_of(y.reshape(y.shape[0], -1), like)

    def _solve(self, L: Any, Y: Any) -> Any:
        xp = self.space.xp
        return solve_lower(xp, L, solve_lower(xp, L, Y), trans=True)

    def _inverse(self, L: Any) -> Any:
        xp = self.space.xp
        linv = solve_lower(xp, L, xp.eye(L.shape[0], dtype=L.dtype, device=getattr(L, "device", None)))
        return linv.T @ linv

    def _trace_gradient(self, inner: Any, gradient: Any, X: Any, kernel: Kernel) -> Array:
        return rbf_trace_gradient(self.space, inner, gradient, X, as_scaled_rbf(kernel, X.shape[1]))

    def _cross(self, X: Any) -> tuple[Any, Any]:
        X = on_device_of(to_numpy(X), self.X)
        return rbf(as_scaled_rbf(self.kernel_, self.X.shape[1]), X, self.X, self.space), X

    def _test_cov(self, X: Any, full_cov: bool) -> Any:
        kern = as_scaled_rbf(self.kernel_, self.X.shape[1])
        return rbf(kern, X, X, self.space) if full_cov else kern.constant


def device_exact_model(
    kernel: Kernel, alpha: Any, likelihood: Likelihood | None, search: Any, X: Any
) -> _ExactModel | _DeviceExactModel:
    """The closed-form model for ``X``: numpy's, or the device's (the array space chosen here, once)."""
    space = namespace(X)
    if space.on_host:
        return _ExactModel(kernel, alpha, likelihood, search)
    return _DeviceExactModel(kernel, alpha, likelihood, search, space=space)
