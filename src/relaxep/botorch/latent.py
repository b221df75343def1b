r"""A fitted relaxep model's latent posterior at new points, in torch: EP stays in numpy, prediction is torch.

Every fitted posterior, dense or sparse, is linear in the covariances :math:`K_*` of the test points to the
inputs it conditions on (the training inputs, or FITC's inducing inputs):

.. math::
    \mu_* = K_* a,\qquad \Sigma_* = K_{**} + \sigma^2_\text{jitter} I - K_* C K_*^\top .

The vector :math:`a` and the matrix :math:`C` are read once, in numpy, from the fitted posterior's own
``predict_latent_cov`` at the cross-covariance :math:`I` (which answers :math:`(a, -C)`): dense
(:math:`C = (K + T^{-1})^{-1}`, negative site precisions included) and sparse
(:math:`C = K_{uu}^{-1} - L_{uu}^{-\top}B^{-1}L_{uu}^{-1}`) alike.  :math:`K_*` and :math:`K_{**}` are
evaluated in torch (:mod:`relaxep.botorch.kernels`), so the mean and covariance are differentiable in the test
points.  The inputs conditioned on may be linear functionals of the process, rows ``[p, q, s]`` standing for
:math:`f(p) - s\,f(q)` (a preference's comparisons, :mod:`relaxep.posterior.comparisons`):
:math:`k(x_*, [p, q, s]) = k(x_*, p) - s\,k(x_*, q)`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.gaussian_process.kernels import Kernel
from torch import Tensor

from relaxep.botorch.kernels import check_kernel, kernel_matrix

__all__ = ["LatentPosterior", "latent_of"]


class LatentPosterior(torch.nn.Module):
    r"""The latent posterior :math:`N(K_* a,\ K_{**} + \sigma^2 I - K_* C K_*^\top)` at new points (module
    docstring), held as float64 buffers.

    Parameters
    ----------
    kernel : sklearn Kernel
        The fitted kernel :math:`k` (checked by :func:`~relaxep.botorch.kernels.check_kernel`).
    first : ndarray of shape (n, d)
        The inputs :math:`p` conditioned on.
    weights, C : ndarray of shape (n,) and (n, n)
        :math:`a` and :math:`C`.
    noise : float
        The latent noise (``jitter``) on the test covariance's diagonal, as the fitted model's variances have it.
    second, sign : ndarray of shape (n, d) and (n,), optional
        Rows that are functionals :math:`f(p) - s f(q)`: :math:`q` and :math:`s`.
    """

    def __init__(
        self,
        kernel: Kernel,
        first: np.ndarray,
        weights: np.ndarray,
        C: np.ndarray,
        noise: float,
        second: np.ndarray | None = None,
        sign: np.ndarray | None = None,
    ) -> None:
        super().__init__()
        check_kernel(kernel)
        self.kernel, self.noise = kernel, float(noise)

        def buffer(name: str, values: np.ndarray | None) -> None:
            self.register_buffer(name, None if values is None else torch.as_tensor(np.asarray(values, dtype=float)))

        buffer("first", first)
        buffer("weights", weights)
        buffer("C", 0.5 * (C + C.T))
        buffer("second", second)
        buffer("sign", sign)

    def cross(self, X: Tensor) -> Tensor:
        r""":math:`K_*`, shape ``(..., q, n)``: :math:`k(x_*, p) - s\,k(x_*, q)`."""
        K = kernel_matrix(self.kernel, X, self.first.to(X))
        if self.second is not None:
            K = K - kernel_matrix(self.kernel, X, self.second.to(X)) * self.sign.to(X)
        return K

    def joint(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """Mean ``(..., q)`` and covariance ``(..., q, q)`` of the latent at the rows of ``X`` (``(..., q, d)``)."""
        cross = self.cross(X)
        mean = cross @ self.weights.to(X)
        test = kernel_matrix(self.kernel, X) + self.noise * torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
        cov = test - cross @ self.C.to(X) @ cross.transpose(-1, -2)
        return mean, 0.5 * (cov + cov.transpose(-1, -2))


def latent_of(model: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    r"""``(inputs, a, C, noise)`` of a fitted one-latent model (an estimator's ``model_``, dense or sparse FITC):
    the rows it conditions on (its training inputs, or FITC's inducing inputs ``Z``), the posterior's
    :math:`a, C` from ``predict_latent_cov(I, 0)`` (module docstring) and its latent noise (``jitter``)."""
    prior = getattr(model, "prior_", None)
    posterior = getattr(getattr(model, "result_", None), "posterior", None)
    if prior is None or posterior is None or not hasattr(posterior, "predict_latent_cov"):
        raise TypeError(
            f"{type(model).__name__}: a fitted one-latent EP model (dense or sparse) is needed, with a posterior "
            "that answers predict_latent_cov; a mixture over hyperparameters (integrate='ccd'/'grid'), a Dask "
            "fit or a multi-class model is not one"
        )
    inputs = getattr(prior, "Z", None)
    if inputs is None:
        inputs = getattr(prior, "X", None)
    if inputs is None or not isinstance(inputs, np.ndarray):
        raise TypeError(
            f"{type(model).__name__}: its prior holds no numpy inputs (a fit on another array library's device? "
            "fit on numpy arrays for BoTorch)"
        )
    n = inputs.shape[0]
    weights, minus_c = posterior.predict_latent_cov(np.eye(n), np.zeros((n, n)))
    noise = float(model.priors.noise)
    return np.asarray(inputs, dtype=float), np.asarray(weights, dtype=float), -np.asarray(minus_c, dtype=float), noise
