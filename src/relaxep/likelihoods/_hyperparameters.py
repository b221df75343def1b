"""The checks of a likelihood's hyperparameters and their bounds (scikit-learn's kernel convention)."""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from relaxep._validation import check_positive_number

__all__ = ["ValueEquality", "check_bounds", "check_hyperparameter"]

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


def _frozen(value: object) -> object:
    """A parameter as a hashable value: ``None``, strings and scalars as they are, arrays as tuples of floats."""
    if value is None or isinstance(value, str) or np.ndim(value) == 0:
        return value
    return tuple(np.asarray(value, dtype=float).ravel().tolist())


class ValueEquality:
    """Equality and hashing by the constructor's parameters, arrays compared by value (a likelihood whose
    parameters include vectors: ``OrdinalProbit``'s cut-points, ``CoxPH``'s breaks and hazards)."""

    def _key(self) -> tuple[object, ...]:
        return tuple((k, _frozen(v)) for k, v in sorted(self.get_params().items()))  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))
