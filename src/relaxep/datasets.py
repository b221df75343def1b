"""Datasets: the paper's synthetic label-noise problem (Section 7.2) and UCI loaders.

The paper does not give the Gaussians' parameters; ours are stated here and fixed:
class +1 is :math:`N((0, 0), 0.8^2 I)`, class -1 an equal mixture of
:math:`N((-1.5, 1.5), 0.75^2 I)` and :math:`N((1.5, 1.5), 0.75^2 I)`, so the Bayes
boundary is curved.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = ["get_data_home", "load_dataset", "make_synthetic", "random_splits", "standardize"]

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


# --------------------------------------------------------------------------- UCI data
_FILES = {
    "heart": "heart.csv",
    "pima": "pima.csv",
    "diabetes": "diabetes_uci768.csv",
    "haberman": "haberman.csv",
    "spambase": "spambase.csv",
}


def get_data_home(path: str | os.PathLike | None = None) -> Path:
    """Where datasets are read from: ``path``, else ``$RELAXEP_DATA``, else ``~/.cache/relaxep``."""
    if path is not None:
        return Path(path)
    env = os.environ.get("RELAXEP_DATA")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "relaxep"


def load_dataset(name: str, data_home: str | os.PathLike | None = None) -> tuple[NDArray, NDArray]:
    """Load one of the paper's datasets as ``X`` (float) and ``y`` in {-1, +1}.

    Reads ``<data_home>/<file>.csv``: a header row, the feature columns, then a last
    column ``label`` of -1/+1 (the layout of the project's ``shared/data``).
    """
    if name not in _FILES:
        raise ValueError(f"unknown dataset {name!r}; choose one of {sorted(_FILES)}")
    path = get_data_home(data_home) / _FILES[name]
    if not path.is_file():
        raise FileNotFoundError(
            f"dataset {name!r} not found at {path}; pass data_home=... or set RELAXEP_DATA to a folder holding "
            f"{_FILES[name]}"
        )
    table = np.loadtxt(path, delimiter=",", skiprows=1)
    X, y = table[:, :-1], table[:, -1]
    if not np.all(np.isin(y, (-1.0, 1.0))):
        raise ValueError(f"{path}: the last column must hold labels -1/+1")
    return X, y


def random_splits(
    n: int, n_train: int, n_splits: int, random_state: int = 0
) -> list[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """``n_splits`` seeded random train/test index splits (train of size ``n_train``, test the rest)."""
    if not 0 < n_train < n:
        raise ValueError(f"n_train must lie in (0, {n}), got {n_train}")
    rng = np.random.default_rng(random_state)
    out = []
    for _ in range(n_splits):
        perm = rng.permutation(n)
        out.append((np.sort(perm[:n_train]), np.sort(perm[n_train:])))
    return out


def standardize(X_train: NDArray, X_test: NDArray) -> tuple[NDArray, NDArray]:
    """z-score both sets with the training set's mean and standard deviation."""
    mean = X_train.mean(axis=0)
    sd = X_train.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (X_train - mean) / sd, (X_test - mean) / sd
