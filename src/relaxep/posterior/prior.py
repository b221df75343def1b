r"""Priors: what a representation is built from.

A prior object stands for :math:`N(f | 0, K)` at the training inputs in some representation
and makes the posterior of that representation for given sites.  :class:`DensePrior` wraps
a dense ``K``; :class:`~relaxep.posterior.sparse.SparsePrior` (FITC) holds :math:`K_{uu}`,
:math:`K_{uf}` (whitened) and :math:`\operatorname{diag} K_{ff}` instead, and nothing that consumes
priors changes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from numpy.typing import ArrayLike

from relaxep._typing import Array
from relaxep._validation import check_kernel_matrix, cholesky_factor
from relaxep.posterior.base import Posterior
from relaxep.posterior.dense import DensePosterior, posterior_mean

__all__ = ["DensePrior", "Prior", "as_prior"]


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


class DensePrior(Prior):
    """:math:`N(0, K)` with ``K`` a dense ``n x n`` matrix, checked once here.

    ``K`` must be finite, square, symmetric, with a positive diagonal and positive
    semi-definite (its Cholesky factor exists with a relative jitter of 1e-10; a singular
    ``K`` such as the linear kernel's is fine).  It is not copied and never written.

    Raises
    ------
    ValueError, TypeError
        For a matrix that is not a covariance; :class:`~relaxep.KernelNotPositiveDefiniteError`
        (a ``ValueError``) when it is indefinite.
    """

    def __init__(self, K: ArrayLike) -> None:
        self.kernel = check_kernel_matrix(K)
        cholesky_factor(self.kernel, relative_jitter=1e-10)

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
