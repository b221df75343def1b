"""The sparse (FITC) fit of :class:`~relaxep.GPClassifier`: inducing inputs placed, kernel and
inducing inputs learned by the sparse EP evidence and its gradient, predictions in row chunks.

A mixin: the estimator's state (``X_train_``, ``kernel_``, ``_y``, ...) is set by ``fit``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel
from sklearn.utils.validation import check_random_state

from relaxep._inducing import check_inducing_points, flat, initial_inducing_points, split_parameters
from relaxep._typing import Array
from relaxep.errors import KernelNotPositiveDefiniteError
from relaxep.inference.sparse_evidence import as_sparse_kernel, sparse_evidence_gradient
from relaxep.posterior import SparsePrior


class SparseFit:
    """``GPClassifier``'s methods for ``inducing_points`` (:mod:`relaxep.posterior.sparse`)."""

    def _fit_sparse(self) -> None:
        X = self.X_train_
        spec = check_inducing_points(self.inducing_points, X.shape[1])
        if not isinstance(self.learn_inducing_points, bool | np.bool_):
            raise TypeError(f"learn_inducing_points must be a bool, got {self.learn_inducing_points!r}")
        if self.optimizer_subset is not None and not (
            isinstance(self.optimizer_subset, int | np.integer) and self.optimizer_subset >= 2
        ):
            raise ValueError(f"optimizer_subset must be None or an int >= 2, got {self.optimizer_subset!r}")
        rng = check_random_state(self.random_state)
        Z = initial_inducing_points(X, spec, self.inducing_init, rng)
        self.inducing_points_ = Z
        learn_z = bool(self.learn_inducing_points)
        if self.optimizer is not None and (self.kernel_.n_dims > 0 or learn_z):
            as_sparse_kernel(self.kernel_, X.shape[1])  # refuses, before any work, a kernel it has no gradient for
            n = X.shape[0]
            if self.optimizer_subset is not None and self.optimizer_subset < n:
                idx = np.sort(rng.choice(n, int(self.optimizer_subset), replace=False))
                self._optimize_sparse(X[idx], self._y[idx], rng, learn_z)
                self._warm = None  # its sites belong to the subset
            else:
                self._optimize_sparse(X, self._y, rng, learn_z)
        self._finish(self._infer(None, self._sparse_prior(X, self.kernel_, self.inducing_points_)))

    def _sparse_prior(self, X: Array, kernel: Kernel, Z: Array) -> SparsePrior:
        return SparsePrior(X, Z, kernel, latent_noise=float(self.jitter))

    def _sparse_evidence(
        self, x: Array, X: Array, split: Callable, eval_gradient: bool, learn_z: bool
    ) -> tuple[float, Array | None]:
        """Sparse EP evidence (and gradient in ``theta`` and, if learned, ``Z``) at the optimiser's ``x``."""
        theta, Z = split(x)
        Z = self.inducing_points_ if Z is None else Z
        kernel = self.kernel_.clone_with_theta(theta)
        fail = (-np.inf, np.zeros_like(x) if eval_gradient else None)
        try:
            prior = self._sparse_prior(X, kernel, Z)
        except KernelNotPositiveDefiniteError:
            return fail
        result = self._infer(theta, prior)
        lml = result.log_evidence
        if result.status == "diverged" or not np.isfinite(lml):
            return fail
        if not eval_gradient:
            return lml, None
        g_theta, g_z = sparse_evidence_gradient(result.posterior, kernel)
        return lml, flat(g_theta, g_z if learn_z else None)

    def _optimize_sparse(self, X: Array, y: Array, rng: np.random.RandomState, learn_z: bool) -> None:
        """Learn ``kernel_.theta`` (and ``inducing_points_``) on ``(X, y)`` (labels in -1/+1)."""
        y_all, self._y = self._y, y
        split = split_parameters(self.kernel_, self.inducing_points_.shape, learn_z)

        def obj_func(x: Array, eval_gradient: bool = True) -> Any:
            lml, grad = self._sparse_evidence(x, X, split, eval_gradient, learn_z)
            return (-lml, -grad) if eval_gradient else -lml

        n_z = self.inducing_points_.size if learn_z else 0
        bounds = np.vstack([self.kernel_.bounds, np.full((n_z, 2), np.nan)]) if n_z else self.kernel_.bounds
        try:
            best_x = self._best_of_restarts(
                obj_func, bounds, rng, pack=lambda theta0: flat(theta0, self.inducing_points_ if learn_z else None)
            )
        finally:
            self._y = y_all
        if best_x is not None:
            theta, Z = split(best_x)
            self.kernel_.theta = theta
            if Z is not None:
                self.inducing_points_ = np.array(Z)
