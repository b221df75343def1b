r"""The hyperparameter vector a search moves: the kernel's log-hyperparameters, the likelihood's, the inducing inputs.

.. math::
    x = (\log\theta_{\text{kernel}},\ \log\theta_{\text{likelihood}},\ \operatorname{vec}(Z))

in that order (``Z`` row by row, only where it is learned).  The kernel's and the likelihood's
entries are bounded (their ``bounds``, in log space); the inducing inputs are not.  Written once
for every search (the dense and sparse EP evidence, the closed-form Gaussian model, the stochastic
search, Dask's search over shards): a new learned block (a mean function, ordinal cut-points) is
one more field here.
"""

from __future__ import annotations

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep.likelihoods import Likelihood

__all__ = ["HyperVector"]

#: scikit-learn's words, so that code matching its error matches ours
RESTARTS_NEED_BOUNDS = "Multiple optimizer restarts (n_restarts_optimizer>0) requires that all bounds are finite."


class HyperVector:
    """The optimiser's vector of ``kernel``, ``likelihood`` (``None``: no likelihood block) and, where learned, ``Z``.

    Parameters
    ----------
    kernel : Kernel
    likelihood : Likelihood or None
    Z : ndarray of shape (M, d) or None
        The inducing inputs where they are learned (their current value: the start's).
    """

    def __init__(self, kernel: Kernel, likelihood: Likelihood | None = None, Z: Array | None = None) -> None:
        self.kernel, self.likelihood = kernel, likelihood
        self.Z = None if Z is None else np.asarray(Z, dtype=float)
        self.n_kernel = kernel.theta.size
        self.n_likelihood = 0 if likelihood is None else likelihood.theta.size
        self.n_theta = self.n_kernel + self.n_likelihood

    @property
    def size(self) -> int:
        return self.n_theta + (0 if self.Z is None else self.Z.size)

    @property
    def theta(self) -> Array:
        """The bounded part: the kernel's and the likelihood's log-hyperparameters."""
        lik = np.zeros(0) if self.likelihood is None else self.likelihood.theta
        return np.concatenate([self.kernel.theta, lik])

    @property
    def theta_bounds(self) -> Array:
        """``(n_theta, 2)`` log-space bounds of :attr:`theta` (a kernel with all its hyperparameters fixed has
        bounds of shape ``(0,)``, not ``(0, 2)``)."""
        lik = np.zeros((0, 2)) if self.likelihood is None else np.reshape(self.likelihood.bounds, (-1, 2))
        return np.vstack([np.reshape(self.kernel.bounds, (-1, 2)), lik])

    @property
    def bounds(self) -> Array:
        """``(size, 2)`` bounds of the whole vector, NaN for the (unbounded) inducing inputs."""
        extra = 0 if self.Z is None else self.Z.size
        return np.vstack([self.theta_bounds, np.full((extra, 2), np.nan)])

    @property
    def x0(self) -> Array:
        """The start: the current hyperparameters and inducing inputs."""
        return self.pack(self.theta, self.Z)

    def pack(self, theta: Array, Z: Array | None = None) -> Array:
        """The vector of ``theta`` (kernel, then likelihood) and ``Z`` (``None``: not learned)."""
        parts = [np.asarray(theta, dtype=float)]
        if self.Z is not None:
            parts.append(np.asarray(self.Z if Z is None else Z, dtype=float).ravel())
        return np.concatenate(parts)

    def split(self, x: Array) -> tuple[Kernel, Likelihood | None, Array | None]:
        """``x`` as (kernel, likelihood, ``Z`` or ``None`` where not learned), each a new object."""
        kernel = self.kernel.clone_with_theta(x[: self.n_kernel])
        likelihood = self.likelihood
        if likelihood is not None and self.n_likelihood:
            likelihood = likelihood.clone_with_theta(x[self.n_kernel : self.n_theta])
        Z = None if self.Z is None else np.reshape(x[self.n_theta :], self.Z.shape)
        return kernel, likelihood, Z

    def starts(self, n_restarts: int, rng: np.random.RandomState) -> list[Array]:
        """The start :attr:`x0` and ``n_restarts`` more, ``theta`` uniform within its (finite) log-space bounds
        and ``Z`` as it is."""
        self.check_restarts(n_restarts)
        bounds = self.theta_bounds
        return [self.x0] + [self.pack(rng.uniform(bounds[:, 0], bounds[:, 1])) for _ in range(n_restarts)]

    def check_restarts(self, n_restarts: int) -> None:
        """Refuse restarts without finite bounds before any work (scikit-learn's error)."""
        if n_restarts > 0 and self.n_theta and not np.all(np.isfinite(self.theta_bounds)):
            raise ValueError(RESTARTS_NEED_BOUNDS)
