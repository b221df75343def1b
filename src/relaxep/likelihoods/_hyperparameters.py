"""The checks of a likelihood's hyperparameters and their bounds (scikit-learn's kernel convention)."""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from relaxep._validation import check_positive_number

__all__ = ["check_bounds", "check_hyperparameter"]

_Bounds = TypeVar("_Bounds")


def check_hyperparameter(value: float, bounds: _Bounds, name: str) -> tuple[float, _Bounds]:
    """A positive hyperparameter ``name`` and its ``<name>_bounds``, checked and returned as given (a constructor
    stores the very objects it was passed, for scikit-learn's ``clone``)."""
    check_positive_number(value, name)
    check_bounds(bounds, f"{name}_bounds")
    return value, bounds


def check_bounds(value: object, name: str) -> tuple[float, float] | str:
    """A hyperparameter's bounds: ``"fixed"`` or a pair ``0 < low <= high`` (``ValueError`` naming ``name``)."""
    if isinstance(value, str):
        if value != "fixed":
            raise ValueError(f"{name} must be 'fixed' or a pair (low, high), got {value!r}")
        return value
    try:
        low, high = (float(v) for v in value)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be 'fixed' or a pair (low, high), got {value!r}") from None
    if not (0.0 < low <= high < np.inf):
        raise ValueError(f"{name} must satisfy 0 < low <= high < inf, got {value!r}")
    return (low, high)
