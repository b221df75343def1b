r"""Priors: what a representation is built from.

A prior object stands for :math:`N(f | 0, K)` at the training inputs in some representation
and makes the posterior of that representation for given sites.  :class:`DensePrior` wraps
a dense ``K``; :class:`~relaxep.posterior.sparse.SparsePrior` (FITC) holds :math:`K_{uu}`,
:math:`K_{uf}` (whitened) and :math:`\operatorname{diag} K_{ff}` instead, and nothing that consumes
priors changes.

Every representation is built the same way from a scikit-learn kernel, the training inputs and
the latent noise, ``(kernel, X, noise)``: :meth:`DensePrior.from_kernel` and
:meth:`~relaxep.posterior.SparsePrior.from_kernel` (which adds the inducing inputs ``Z``).  A prior
built so answers :meth:`Prior.cross_covariance` (:math:`K_{*f}` dense, :math:`K_{*u}` sparse) and
:meth:`Prior.predict_at`, so that a caller predicts without knowing the representation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from relaxep._memory import FIT_REMEDY, check_memory, dense_bytes
from relaxep._typing import Array
from relaxep._validation import check_kernel_matrix, cholesky_factor
from relaxep.posterior.base import Posterior
from relaxep.posterior.dense import DensePosterior, posterior_mean

__all__ = ["DensePrior", "Prior", "as_prior", "kernel_matrix"]

T = TypeVar("T")


def kernel_matrix(kernel: Any, X: Any, noise: float, eval_gradient: bool = False) -> tuple[Array, Array | None]:
    r""":math:`K = k(X, X) + \sigma^2 I` (``noise`` :math:`= \sigma^2`, latent noise or jitter) and, with
    ``eval_gradient``, :math:`\partial K/\partial\theta` of shape ``(n, n, n_hyperparameters)``.

    Raises
    ------
    MemoryLimitError
        Before allocating, where the dense fit would not fit in memory (:mod:`relaxep._memory`):
        ``K``, its factor, the posterior covariance and a work array, and with ``eval_gradient`` one
        more ``n x n`` per hyperparameter.
    ValueError
        Where ``K`` or its gradient is not finite (``X``'s scale overflows the kernel).
    """
    n = X.shape[0] if hasattr(X, "shape") else len(X)
    copies = 4 + (kernel.n_dims if eval_gradient else 0)
    check_memory(dense_bytes(n, copies), f"a dense GP on n = {n} points", FIT_REMEDY)
    if eval_gradient:
        K, dK = kernel(X, eval_gradient=True)
    else:
        K, dK = kernel(X), None
    K[np.diag_indices_from(K)] += float(noise)
    if not (np.all(np.isfinite(K)) and (dK is None or np.all(np.isfinite(dK)))):
        numeric = isinstance(X, np.ndarray) and np.issubdtype(X.dtype, np.number)
        scale = f" (largest |X| = {np.abs(X).max():.3g})" if numeric else ""
        raise ValueError(
            f"the kernel {kernel} (or its gradient) evaluated at X is not finite{scale}: "
            "X's scale overflows it; rescale X (e.g. sklearn.preprocessing.StandardScaler)"
        )
    return K, dK


class Prior(ABC):
    """A Gaussian process prior at the training inputs, able to make its posterior."""

    @property
    @abstractmethod
    def n(self) -> int:
        """Number of training points (sites)."""

    @abstractmethod
    def posterior(
        self,
        site_precision: Array | None = None,
        site_mean_precision: Array | None = None,
        marginals_only: bool = False,
    ) -> Posterior:
        """The posterior for these sites (flat sites, i.e. the prior, when omitted)."""

    def posterior_mean(self, site_precision: Array, site_mean_precision: Array) -> Array:
        """Only the posterior mean for these sites (a representation may do this more cheaply)."""
        return self.posterior(site_precision, site_mean_precision, marginals_only=True).mean

    #: rows of ``X_test`` per block of :meth:`predict_at` (``None``: all at once)
    test_block: int | None = None

    def cross_covariance(self, X_test: Any) -> tuple[Array, Array]:
        r"""What the posterior's ``predict_latent`` takes at ``X_test``: the covariances :math:`K_*` of
        the test inputs to the inputs the representation conditions on, and the prior test variances
        :math:`k_{**}` plus the prior's noise.  Only for a prior built from a kernel."""
        raise NotImplementedError(
            f"this {type(self).__name__} was not built from a kernel (from_kernel): pass K_* and k_** yourself"
        )

    def predict_at(self, predict: Callable[[Array, Array], T], X_test: Any) -> T:
        r"""``predict(K_*, k_**)`` at ``X_test`` (:meth:`cross_covariance`), in blocks of :attr:`test_block`
        rows (memory :math:`O(\text{block} \times M)` for a sparse prior), the blocks' outputs (arrays
        or tuples of arrays) concatenated."""
        rows = self.test_block
        if rows is None:
            return predict(*self.cross_covariance(X_test))
        parts = [predict(*self.cross_covariance(X_test[s : s + rows])) for s in range(0, X_test.shape[0], rows)]
        if isinstance(parts[0], tuple):
            return tuple(np.concatenate(column) for column in zip(*parts, strict=True))  # type: ignore[return-value]
        return np.concatenate(parts)  # type: ignore[return-value]


class DensePrior(Prior):
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

    #: set by :meth:`from_kernel`: the covariance function, the training inputs, the noise on the diagonal
    #: and :math:`\partial K/\partial\theta` (with ``eval_gradient``)
    covariance_function: Any = None
    X: Any = None
    noise: float = 0.0
    kernel_gradient: Array | None = None

    def __init__(self, K: ArrayLike, check_psd: bool = True) -> None:
        n = int(np.shape(K)[0]) if np.ndim(K) == 2 else 0
        # beside K: its factor, the posterior covariance and a work array
        check_memory(dense_bytes(n, 3), f"dense inference on n = {n} points (beside K)", FIT_REMEDY)
        self.kernel = check_kernel_matrix(K)
        if check_psd:
            cholesky_factor(self.kernel, relative_jitter=1e-10)

    @classmethod
    def from_kernel(
        cls, kernel: Any, X: Any, noise: float = 0.0, eval_gradient: bool = False, check_psd: bool = True
    ) -> DensePrior:
        r"""The prior :math:`N(0, k(X, X) + \sigma^2 I)` of a scikit-learn kernel (:func:`kernel_matrix`).

        ``noise`` :math:`\sigma^2` is latent noise (the estimator's ``jitter``); it is added to the test
        variances of :meth:`cross_covariance` too.  ``check_psd``: as in the constructor.  With
        ``eval_gradient`` the prior keeps :attr:`kernel_gradient` for
        :meth:`~relaxep.posterior.DensePosterior.evidence_gradient`.
        """
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
    def n(self) -> int:
        return self.kernel.shape[0]

    def posterior(
        self,
        site_precision: Array | None = None,
        site_mean_precision: Array | None = None,
        marginals_only: bool = False,
    ) -> DensePosterior:
        return DensePosterior(self.kernel, site_precision, site_mean_precision, marginals_only=marginals_only)

    def posterior_mean(self, site_precision: Array, site_mean_precision: Array) -> Array:
        """One Cholesky and solves (:func:`~relaxep.posterior.dense.posterior_mean`), no inverse."""
        return posterior_mean(self.kernel, np.asarray(site_precision, float), np.asarray(site_mean_precision, float))


def as_prior(prior: Prior | ArrayLike) -> Prior:
    """``prior`` itself, or a :class:`DensePrior` of a matrix."""
    if isinstance(prior, Prior):
        return prior
    if isinstance(prior, str | bytes) or prior is None:
        raise TypeError(f"K must be a covariance matrix or a relaxep Prior, got {prior!r}")
    return DensePrior(prior)
