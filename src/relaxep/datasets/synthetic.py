"""Generated data: the paper's toy and synthetic problems, label flipping, the seeded study draws.

:func:`make_toy` is the five-point toy of Section 7.1 (one mislabelled point) and
:func:`make_synthetic` the label-noise problem of Section 7.2.  The paper does not give the
latter's Gaussians' parameters; ours are stated here and fixed: class +1 is
:math:`N((0, 0), 0.8^2 I)`, class -1 an equal mixture of :math:`N((-1.5, 1.5), 0.75^2 I)` and
:math:`N((1.5, 1.5), 0.75^2 I)`, so the Bayes boundary is curved.  :func:`flip_labels` flips a
fraction of any -1/+1 labels; :func:`synthetic_data` is one seeded repeat of the study.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["flip_labels", "make_synthetic", "make_toy", "synthetic_data"]

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
    y, flipped = flip_labels(y, flip_rate, rng)
    perm = rng.permutation(y.size)
    return X[perm], y[perm], flipped[perm]


def make_toy() -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    """The paper's Section 7.1 toy problem: five 2-D points, one of them mislabelled.

    Returns
    -------
    X : ndarray of float64, shape (5, 2)
    y : ndarray of float64, shape (5,)
        Labels in {-1, +1}: two points of class +1, three of class -1.
    mislabelled : int
        Index of the mislabelled point (the rightmost one, labelled -1 among the +1 points).
    """
    X = np.array([[1.0, 1.5], [1.5, 0.4], [-1.2, -0.8], [-0.4, -1.5], [2.2, -0.3]])
    y = np.array([1.0, 1.0, -1.0, -1.0, -1.0])
    return X, y, 4


def flip_labels(
    y: ArrayLike, rate: float, random_state: int | np.random.Generator | None = None
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Flip ``round(rate * n)`` of the -1/+1 labels ``y``, chosen uniformly without replacement.

    Parameters
    ----------
    y : array_like, shape (n,)
        Labels in {-1, +1}. Not modified.
    rate : float
        Fraction of labels to flip, in [0, 0.5).
    random_state : int, Generator or None
        Seed or generator choosing the labels.

    Returns
    -------
    y_flipped : ndarray of float64, shape (n,)
        A copy of ``y`` with the chosen labels negated.
    flipped : ndarray of bool, shape (n,)
        Which labels were flipped.
    """
    labels = np.array(y, dtype=np.float64, copy=True)
    if labels.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {labels.shape}")
    if not np.all(np.isin(labels, (-1.0, 1.0))):
        raise ValueError(f"y must hold labels -1/+1 only, got values {np.unique(labels)[:10]}")
    if not (0.0 <= rate < 0.5):
        raise ValueError(f"rate must lie in [0, 0.5), got {rate}")
    rng = np.random.default_rng(random_state)
    n = labels.size
    flipped = np.zeros(n, dtype=bool)
    flipped[rng.choice(n, size=round(rate * n), replace=False)] = True
    labels[flipped] *= -1.0
    return labels, flipped


def synthetic_data(
    repeat: int, rate: float, n_test: int, seed: int = 2014
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """One repeat of the synthetic study: 400 training points (``rate`` flipped) and ``n_test`` clean
    test points, seeded by ``(seed, repeat, rate)`` so every process draws the same."""
    rng_train = np.random.default_rng([seed, repeat, round(1000 * rate), 0])
    rng_test = np.random.default_rng([seed, repeat, round(1000 * rate), 1])
    X, y, _ = make_synthetic(200, rate, random_state=rng_train)
    X_test, y_test, _ = make_synthetic(n_test // 2, 0.0, random_state=rng_test)
    return X, y, X_test, y_test
