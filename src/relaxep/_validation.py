"""Input checks at the public boundary, so the inner code can assume clean input."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def check_kernel_matrix(kernel: ArrayLike, name: str = "K") -> NDArray[np.float64]:
    """A finite, square, symmetric float matrix with positive diagonal (a copy-free view if possible)."""
    k = np.asarray(kernel, dtype=float)
    if k.ndim != 2 or k.shape[0] != k.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {k.shape}")
    if k.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(k)):
        raise ValueError(f"{name} contains NaN or inf")
    scale = max(np.abs(k).max(), np.finfo(float).tiny)
    if np.abs(k - k.T).max() > 1e-8 * scale:
        raise ValueError(f"{name} is not symmetric (max |K - K^T| = {np.abs(k - k.T).max():.3g})")
    if np.any(np.diagonal(k) <= 0.0):
        raise ValueError(f"{name} has a non-positive diagonal entry: it is not a valid (positive definite) covariance")
    return k


def check_binary_labels(y: ArrayLike, n: int | None = None, both_classes: bool = True) -> NDArray[np.float64]:
    """Labels in {-1, +1} (both present unless ``both_classes=False``), optionally of length ``n``."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {arr.shape}")
    try:
        labels = arr.astype(float)
    except (TypeError, ValueError) as exc:
        raise ValueError("y must hold the numbers -1 and +1") from exc
    if not np.all(np.isfinite(labels)):
        raise ValueError("y contains NaN or inf")
    if n is not None and labels.shape[0] != n:
        raise ValueError(f"length mismatch: K has {n} rows but y has {labels.shape[0]} labels")
    bad = ~np.isin(labels, (-1.0, 1.0))
    if np.any(bad):
        raise ValueError(
            f"labels must be -1 or +1; found {np.unique(labels[bad])[:5].tolist()} "
            "(the estimator GPClassifier maps any two classes)"
        )
    if both_classes and np.unique(labels).size < 2:
        raise ValueError(f"y holds one class only ({labels[0]:+.0f}); classification needs both -1 and +1")
    return labels
