r"""The dense representation: the prior :math:`N(0, K)` (:class:`DensePrior`) and its Gaussian posterior
(:class:`~relaxep.posterior.dense_posterior.DensePosterior`, which has the equations).

This module knows nothing of likelihoods or rules.  :class:`DensePrior` checks ``K`` once and makes
posteriors.  The array library is chosen once, when the prior is made: a ``K`` (or, by :meth:`DensePrior.from_kernel`,
an ``X``) of another array library (:mod:`relaxep._xp`) makes the device twin,
:class:`~relaxep.posterior.dense_device.DeviceDensePrior`, whose posteriors run on that library's device.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from relaxep._memory import FIT_REMEDY, check_memory, dense_bytes
from relaxep._typing import Array
from relaxep._validation import check_kernel_matrix, cholesky_factor
from relaxep._xp import namespace
from relaxep.posterior._dense_linalg import kernel_matrix, posterior_mean
from relaxep.posterior.base import MatrixPrior
from relaxep.posterior.dense_device import DeviceDensePrior
from relaxep.posterior.dense_posterior import DensePosterior

__all__ = ["DensePosterior", "DensePrior", "kernel_matrix", "posterior_mean"]


class DensePrior(MatrixPrior):
    """:math:`N(0, K)` with ``K`` a dense ``n x n`` matrix, checked once here.

    ``K`` must be finite, square, symmetric, with a positive diagonal and positive
    semi-definite (its Cholesky factor exists with a relative jitter of 1e-10; a singular
    ``K`` such as the linear kernel's is fine; ``check_psd=False`` skips this factorisation,
    as the hyperparameter search's gradient evaluations do).  It is not copied and never written.

    Raises
    ------
    ValueError, TypeError
        For a matrix that is not a covariance; :class:`~relaxep.KernelNotPositiveDefiniteError`
        (a ``ValueError``) when it is indefinite.
    """

    def __new__(cls, K: ArrayLike = None, check_psd: bool = True) -> DensePrior:
        """Another array library's ``K`` (:mod:`relaxep._xp`) makes the device twin, chosen here once."""
        if cls is DensePrior and not namespace(K).on_host:
            return DeviceDensePrior(K, check_psd)  # type: ignore[return-value]
        return super().__new__(cls)

    def __init__(self, K: ArrayLike, check_psd: bool = True) -> None:
        n = int(np.shape(K)[0]) if np.ndim(K) == 2 else 0
        # beside K: its factor, the posterior covariance and a work array
        check_memory(dense_bytes(n, 3), f"dense inference on n = {n} points (beside K)", FIT_REMEDY)
        #: the ``n x n`` prior covariance
        self.K = check_kernel_matrix(K)
        if check_psd:
            cholesky_factor(self.K, relative_jitter=1e-10)

    @classmethod
    def from_kernel(
        cls, kernel: Any, X: Any, noise: float = 0.0, eval_gradient: bool = False, check_psd: bool = True
    ) -> DensePrior | DeviceDensePrior:
        r"""The prior :math:`N(0, k(X, X) + \sigma^2 I)` of a scikit-learn kernel (:func:`kernel_matrix`).

        ``noise`` :math:`\sigma^2` is latent noise (the estimator's ``jitter``); it is added to the test
        variances of :meth:`cross_covariance` too.  ``check_psd``: as in the constructor.  With
        ``eval_gradient`` the prior keeps :attr:`kernel_gradient` for
        :meth:`~relaxep.posterior.DensePosterior.evidence_gradient`.  ``X`` of another array library: the
        device twin's (:meth:`~relaxep.posterior.dense_device.DeviceDensePrior.from_kernel`).
        """
        space = namespace(X)
        if not space.on_host:
            return DeviceDensePrior.from_kernel(kernel, X, noise, check_psd=check_psd, space=space)
        K, dK = kernel_matrix(kernel, X, noise, eval_gradient)
        prior = cls(K, check_psd)
        prior.covariance_function, prior.X, prior.noise, prior.kernel_gradient = kernel, X, float(noise), dK
        return prior

    def cross_covariance(self, X_test: Any) -> tuple[Array, Array]:
        r""":math:`K_{*f} = k(X_*, X)` and :math:`k(x_*, x_*) + \sigma^2`."""
        if self.covariance_function is None:
            return super().cross_covariance(X_test)
        k = self.covariance_function
        return k(X_test, self.X), k.diag(X_test) + self.noise

    @property
    def kernel(self) -> Array:
        """The matrix :attr:`K` (deprecated: ``kernel`` is the covariance function on a sparse prior;
        use ``.K``; removed in 0.4)."""
        warnings.warn("DensePrior.kernel is the matrix K: use .K; removed in 0.4", DeprecationWarning, stacklevel=2)
        return self.K

    def _posterior_for(self, tau: Array | None, nu: Array | None, marginals_only: bool) -> DensePosterior:
        return DensePosterior(self.K, tau, nu, marginals_only=marginals_only)

    def posterior_mean(self, site_precision: Array, site_mean_precision: Array) -> Array:
        """One Cholesky and solves (:func:`~relaxep.posterior.dense.posterior_mean`), no inverse."""
        return posterior_mean(self.K, np.asarray(site_precision, float), np.asarray(site_mean_precision, float))
