"""Helpers shared by :class:`~relaxep.GPClassifier`'s fits: how far to validate ``X``,
scikit-learn's bound warnings, one binary model of one-vs-rest."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array

if TYPE_CHECKING:
    from relaxep.classifier import GPClassifier

__all__ = ["fit_binary", "input_format", "warn_at_bounds"]


def input_format(kernel: Kernel | None) -> dict[str, Any]:
    """How far to validate ``X``: a float matrix for vector kernels, as given for structured ones.

    A kernel on sequences, strings or graphs (``requires_vector_input`` false, e.g. a string
    kernel) receives ``X`` as the user passed it, a list or 1-D array of objects.
    """
    if kernel is None or kernel.requires_vector_input:
        return {"dtype": np.float64, "ensure_2d": True}
    return {"dtype": None, "ensure_2d": False}


def warn_at_bounds(kernel: Kernel) -> None:
    """A ``ConvergenceWarning`` for each learned log-hyperparameter that ended at one of its bounds.

    "At a bound": within 1e-4 of the bounds' log-width of it (or ``np.isclose`` in log space,
    scikit-learn's test, which is tight near a bound of 1 and loose near 1e5).  On a flat evidence
    the optimiser stops a few 1e-5 of a log-unit inside a bound it started on.  The wording is
    scikit-learn's, so that code filtering its warnings filters ours.
    """
    theta, bounds = kernel.theta, kernel.bounds
    slack = 1e-4 * (bounds[:, 1] - bounds[:, 0])
    at_lower = np.isclose(theta, bounds[:, 0]) | (theta - bounds[:, 0] <= slack)
    at_upper = np.isclose(theta, bounds[:, 1]) | (bounds[:, 1] - theta <= slack)
    index = 0
    for hyperparameter in kernel.hyperparameters:
        if hyperparameter.fixed:
            continue
        limits = np.atleast_2d(hyperparameter.bounds)  # as given, not exp(log(bound))
        for dim in range(hyperparameter.n_elements):
            for hit, side, advice in ((at_lower, "lower", "Decreasing"), (at_upper, "upper", "Increasing")):
                if hit[index]:
                    warnings.warn(
                        f"The optimal value found for dimension {dim} of parameter {hyperparameter.name} "
                        f"is close to the specified {side} bound {limits[dim, 0 if side == 'lower' else 1]}. "
                        f"{advice} the bound and calling fit again may find a better value.",
                        ConvergenceWarning,
                        stacklevel=3,
                    )
            index += 1


def fit_binary(estimator: GPClassifier, X: Array, y: NDArray) -> GPClassifier:
    """One one-vs-rest model (a module-level function, so joblib can send it to a worker)."""
    return estimator.fit(X, y)
