"""The exceptions relaxep raises, in one place (every other module imports them from here)."""

from __future__ import annotations

__all__ = ["DivergenceError", "ImproperPosteriorError", "KernelNotPositiveDefiniteError", "MemoryLimitError"]


class ImproperPosteriorError(ArithmeticError):
    """The sites make the Gaussian posterior improper (not positive definite)."""


class KernelNotPositiveDefiniteError(ValueError):
    """The prior covariance matrix is not positive (semi-)definite."""


class DivergenceError(RuntimeError):
    """Inference diverged (NaN or an improper posterior) during ``fit``."""


class MemoryLimitError(MemoryError):
    """A computation would need more memory than is available; raised before allocating it, with the remedy."""
