"""Posterior representations behind one protocol, and the priors that make them."""

from relaxep.errors import ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.posterior.base import Posterior, Prior, SweepStats, cavity
from relaxep.posterior.dense import DensePosterior, DensePrior
from relaxep.posterior.prior import as_prior
from relaxep.posterior.sparse import SparsePosterior, SparsePrior

__all__ = [
    "DensePosterior",
    "DensePrior",
    "ImproperPosteriorError",
    "KernelNotPositiveDefiniteError",
    "Posterior",
    "Prior",
    "SparsePosterior",
    "SparsePrior",
    "SweepStats",
    "as_prior",
    "cavity",
]
