"""The exceptions relaxep raises, in one place (every other module imports them from here)."""

from __future__ import annotations

__all__ = [
    "ClusterError",
    "DivergenceError",
    "ImproperPosteriorError",
    "KernelNotPositiveDefiniteError",
    "MemoryLimitError",
]


class ImproperPosteriorError(ArithmeticError):
    """The sites make the Gaussian posterior improper (not positive definite)."""


class KernelNotPositiveDefiniteError(ValueError):
    """The prior covariance matrix is not positive (semi-)definite."""


class DivergenceError(RuntimeError):
    """Inference diverged (NaN or an improper posterior) during ``fit``."""


class MemoryLimitError(MemoryError):
    """A computation would need more memory than is available; raised before allocating it, with the remedy."""


class ClusterError(RuntimeError):
    """A Dask cluster lost a fit's state (a restarted scheduler or cluster cancelled its futures) or did not
    answer within the estimator's ``timeout``; the fit is over: check the cluster and fit again."""
