"""Input checks at the public boundary, so the inner code can assume clean input.

Every check names the argument it rejects; a wrong type is a ``TypeError``, a wrong
value a ``ValueError``.  One positive-definiteness test (:func:`cholesky_factor`) serves
every caller, with one message.
"""

from __future__ import annotations

import numbers

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import linalg

from relaxep.errors import KernelNotPositiveDefiniteError

__all__ = [
    "check_binary_labels",
    "check_kernel_matrix",
    "check_positive_int",
    "check_positive_number",
    "check_target_vector",
    "check_unit_interval",
    "cholesky_factor",
]

#: what to do about a kernel matrix that is not positive definite, said once for every caller
NOT_PSD_ADVICE = "Add jitter or latent noise to the kernel (e.g. + WhiteKernel(1e-6), or GPClassifier(jitter=...))."


def _as_number(value: object, name: str) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    return float(value)


def check_unit_interval(value: object, name: str) -> float:
    """``value`` as a float in ``(0, 1]``; ``name`` describes it in the message."""
    number = _as_number(value, name)
    if not (0.0 < number <= 1.0):
        raise ValueError(f"{name} must lie in (0, 1], got {value!r}")
    return number


def check_positive_number(value: object, name: str) -> float:
    """``value`` as a positive, finite float."""
    number = _as_number(value, name)
    if not (np.isfinite(number) and number > 0.0):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return number


def check_positive_int(value: object, name: str) -> int:
    """``value`` as an ``int >= 1`` (an integral float such as ``5.0`` is accepted)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be an integer >= 1, got {value!r}")
    if not np.isfinite(float(value)) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def check_kernel_matrix(kernel: ArrayLike, name: str = "K") -> NDArray[np.float64]:
    """A finite, square, symmetric float matrix with positive diagonal (a copy-free view if possible)."""
    if hasattr(kernel, "toarray") and not isinstance(kernel, np.ndarray):
        raise TypeError(f"{name} must be a dense array; got {type(kernel).__name__} (call .toarray() first)")
    try:
        k = np.asarray(kernel, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array, got {type(kernel).__name__}") from exc
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
    check_prior_scale(np.diagonal(k), f"{name}'s diagonal")
    return k


#: prior variances outside this range square to (or, inverted as site precisions, overflow to)
#: numbers float64 cannot hold: EP there ended "converged" 0.2 away in probability from the same
#: problem at amplitude 1 (amplitude 1e-300)
PRIOR_VARIANCE_RANGE = (1e-150, 1e150)


def check_prior_scale(variances: ArrayLike, name: str) -> None:
    """Refuse prior variances whose squares or inverses leave float64's range (see :data:`PRIOR_VARIANCE_RANGE`)."""
    v = np.asarray(variances, dtype=float)
    low, high = PRIOR_VARIANCE_RANGE
    if v.size and (v.min() < low or v.max() > high):
        raise ValueError(
            f"{name} holds prior variances from {v.min():.3g} to {v.max():.3g}, outside [{low:g}, {high:g}], "
            "where EP's moments underflow or overflow: rescale the kernel's amplitude (a step likelihood's "
            "answer does not depend on it) or the targets (normalize_y=True)"
        )


def cholesky_factor(kernel: NDArray[np.float64], relative_jitter: float = 0.0, name: str = "K") -> NDArray[np.float64]:
    r"""Lower Cholesky factor of ``kernel + relative_jitter * mean(diag) * I``.

    With ``relative_jitter = 1e-10`` this is the positive *semi*-definiteness test of
    :func:`relaxep.infer` (a singular ``K``, such as the linear kernel's, passes); with 0 it
    asks for a positive definite matrix (elliptical slice sampling).

    Raises
    ------
    KernelNotPositiveDefiniteError
        If the factorisation fails.
    """
    n = kernel.shape[0]
    jitter = relative_jitter * float(np.trace(kernel)) / n
    matrix = kernel + jitter * np.eye(n) if jitter else kernel
    try:
        return linalg.cholesky(matrix, lower=True, check_finite=False)
    except linalg.LinAlgError as exc:
        kind = "positive semi-definite" if relative_jitter else "positive definite"
        raise KernelNotPositiveDefiniteError(f"the kernel matrix {name} is not {kind}. {NOT_PSD_ADVICE}") from exc


def check_target_vector(y: ArrayLike, n: int | None, what: str, kind: str) -> NDArray[np.float64]:
    """``y`` as a finite float vector (of length ``n`` if given); ``what`` names its entries
    ("labels", "targets") and ``kind`` what they must hold, in the messages."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {arr.shape}")
    try:
        values = arr.astype(float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"y must hold {kind}") from exc
    if not np.all(np.isfinite(values)):
        raise ValueError("y contains NaN or inf")
    if n is not None and values.shape[0] != n:
        raise ValueError(f"length mismatch: K has {n} rows but y has {values.shape[0]} {what}")
    return values


def check_binary_labels(y: ArrayLike, n: int | None = None, both_classes: bool = True) -> NDArray[np.float64]:
    """Labels in {-1, +1} (both present unless ``both_classes=False``), optionally of length ``n``."""
    labels = check_target_vector(y, n, "labels", "the numbers -1 and +1")
    bad = ~np.isin(labels, (-1.0, 1.0))
    if np.any(bad):
        raise ValueError(
            f"labels must be -1 or +1; found {np.unique(labels[bad])[:5].tolist()} "
            "(the estimator GPClassifier maps any two classes)"
        )
    if both_classes and np.unique(labels).size < 2:
        raise ValueError(f"y holds one class only ({labels[0]:+.0f}); classification needs both -1 and +1")
    return labels
