"""Data generators: the paper's synthetic label-noise problem (Section 7.2).

The paper does not give the Gaussians' parameters; ours are stated here and fixed:
class +1 is :math:`N((0, 0), 0.8^2 I)`, class -1 an equal mixture of
:math:`N((-1.5, 1.5), 0.75^2 I)` and :math:`N((1.5, 1.5), 0.75^2 I)`, so the Bayes
boundary is curved.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["make_synthetic"]

_POS_MEAN = np.array([0.0, 0.0])
_POS_SD = 0.8
_NEG_MEANS = np.array([[-1.5, 1.5], [1.5, 1.5]])
_NEG_SD = 0.75


def make_synthetic(
    n_per_class: int = 200,
    flip_rate: float = 0.0,
    random_state: int | np.random.Generator | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Draw the paper's two-class problem and flip a fraction of the labels.

    Parameters
    ----------
    n_per_class : int
        Points per class (paper: 200).
    flip_rate : float
        Fraction of labels flipped, chosen uniformly without replacement (in [0, 0.5)).
    random_state : int, Generator or None

    Returns
    -------
    X : ndarray, shape (2 n_per_class, 2)
    y : ndarray, shape (2 n_per_class,)
        Observed labels in {-1, +1} (after flipping).
    flipped : ndarray of bool
        Which labels were flipped.
    """
    if n_per_class < 1:
        raise ValueError(f"n_per_class must be >= 1, got {n_per_class}")
    if not (0.0 <= flip_rate < 0.5):
        raise ValueError(f"flip_rate must lie in [0, 0.5), got {flip_rate}")
    rng = np.random.default_rng(random_state)
    pos = _POS_MEAN + _POS_SD * rng.standard_normal((n_per_class, 2))
    component = rng.integers(0, 2, size=n_per_class)
    neg = _NEG_MEANS[component] + _NEG_SD * rng.standard_normal((n_per_class, 2))
    X = np.vstack([pos, neg])
    y = np.concatenate([np.ones(n_per_class), -np.ones(n_per_class)])
    n = y.size
    flipped = np.zeros(n, dtype=bool)
    flipped[rng.choice(n, size=round(flip_rate * n), replace=False)] = True
    y[flipped] *= -1.0
    perm = rng.permutation(n)
    return X[perm], y[perm], flipped[perm]
