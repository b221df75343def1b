"""Draws and the prior's predictions of :class:`~relaxep.GPRegressor`, as scikit-learn's ``GaussianProcessRegressor``
gives them: ``sample_y`` from the joint predictive, ``predict`` before ``fit`` from the prior."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.utils.validation import check_random_state

from relaxep._typing import Array
from relaxep._xp import namespace, on_device_of

__all__ = ["PriorAndDraws"]


class PriorAndDraws:
    """``sample_y`` (from ``_predict(X, return_cov=True)``) and ``_predict_prior`` (``kernel`` and ``n_targets``)."""

    kernel: Any
    n_targets: int | None

    def _predict_prior(self, X: Any, return_std: bool, return_cov: bool) -> Array | tuple[Array, Array]:
        kernel = self.kernel
        if kernel is None:
            kernel = ConstantKernel(1.0, constant_value_bounds="fixed") * RBF(1.0, length_scale_bounds="fixed")
        n_targets = self.n_targets if self.n_targets is not None else 1
        y_mean = np.zeros(shape=(X.shape[0], n_targets)).squeeze()
        if return_cov:
            cov = kernel(X)
            return y_mean, (np.repeat(cov[..., None], n_targets, axis=-1) if n_targets > 1 else cov)
        if return_std:
            var = kernel.diag(X)
            return y_mean, np.sqrt(np.repeat(var[:, None], n_targets, axis=-1) if n_targets > 1 else var)
        return y_mean

    def sample_y(self, X: ArrayLike, n_samples: int = 1, random_state: Any = 0) -> Array:
        """Draws of the latent function at ``X``: shape ``(n, n_samples)`` or ``(n, n_targets, n_samples)``."""
        rng = check_random_state(random_state)
        y_mean, y_cov = self._predict(X, return_cov=True)
        if y_mean.ndim == 1:
            draws = rng.multivariate_normal(y_mean, y_cov, n_samples).T
        else:
            draws = np.hstack([
                rng.multivariate_normal(y_mean[:, t], y_cov[..., t], n_samples).T[:, np.newaxis]
                for t in range(y_mean.shape[1])
            ])  # fmt: skip
        return draws if namespace(X).on_host else on_device_of(draws, X)
