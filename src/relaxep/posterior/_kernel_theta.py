"""A scikit-learn kernel's hyperparameters as functions of its log-hyperparameters ``theta``: what the state-space
forms (:mod:`relaxep.posterior.state_space`) and the derivative blocks (:mod:`relaxep.posterior.derivatives`) build
their matrices from, so that a complex ``theta`` (the complex step) flows through."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array

__all__ = ["hyperparameter_values"]


def hyperparameter_values(kernel: Kernel, offset: int) -> tuple[dict[str, Callable[[Array], Array]], int]:
    """Each hyperparameter of a leaf ``kernel`` as a function of the full ``theta`` returning its entries (a 1-d
    array: ``exp`` of its entries of ``theta`` from ``offset`` on, in scikit-learn's order, or its fixed value), and
    the number of entries of ``theta`` it uses."""
    values: dict[str, Callable[[Array], Array]] = {}
    used = 0
    for hp in kernel.hyperparameters:
        if hp.fixed:
            value = np.atleast_1d(np.asarray(getattr(kernel, hp.name), dtype=float))
            values[hp.name] = lambda theta, v=value: v
        else:
            k = hp.n_elements
            values[hp.name] = lambda theta, j=offset + used, k=k: np.exp(theta[j : j + k])
            used += k
    return values, used
