r"""Inducing inputs for the sparse fit: their checks and their initial placement.

Shared by :class:`~relaxep.GPClassifier` and :class:`relaxep.DaskGPClassifier`.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.cluster import KMeans

from relaxep._typing import Array

__all__ = [
    "INITS",
    "check_inducing_points",
    "check_sparse_options",
    "initial_inducing_points",
]

#: the ways to place the initial inducing inputs
INITS = ("kmeans", "random")


def check_inducing_points(inducing_points: object, n_features: int) -> int | Array:
    """``inducing_points`` as an ``int >= 1`` or an ``(M, n_features)`` float array (a copy)."""
    if isinstance(inducing_points, bool | np.bool_):
        raise TypeError(f"inducing_points must be an int or an (M, d) array, got {inducing_points!r}")
    if isinstance(inducing_points, numbers.Integral):
        if inducing_points < 1:
            raise ValueError(f"inducing_points must be >= 1, got {inducing_points!r}")
        return int(inducing_points)
    try:
        Z = np.array(inducing_points, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"inducing_points must be an int or an (M, d) array, got {inducing_points!r}") from exc
    if Z.ndim != 2 or Z.shape[0] < 1 or Z.shape[1] != n_features:
        raise ValueError(f"inducing_points must have shape (M, {n_features}), got {Z.shape}")
    if not np.all(np.isfinite(Z)):
        raise ValueError("inducing_points contains NaN or inf")
    return Z


def check_sparse_options(learn_inducing_points: object, optimizer_subset: object) -> None:
    """The sparse fit's ``learn_inducing_points`` (a bool) and ``optimizer_subset`` (``None`` or an int >= 2)."""
    if not isinstance(learn_inducing_points, bool | np.bool_):
        raise TypeError(f"learn_inducing_points must be a bool, got {learn_inducing_points!r}")
    subset = optimizer_subset
    if subset is not None and not (isinstance(subset, int | np.integer) and subset >= 2):
        raise ValueError(f"optimizer_subset must be None or an int >= 2, got {subset!r}")


def initial_inducing_points(
    X: Array, inducing_points: int | Array, init: str, rng: np.random.RandomState | np.random.Generator
) -> Array:
    r"""The starting inducing inputs: the given array, or ``M`` chosen from ``X``.

    ``"kmeans"``: the centres of k-means (one start, 50 Lloyd iterations) on a random subset of
    :math:`\min(n, 20M)` rows; ``"random"``: a random subset of ``M`` rows.  ``M`` is capped at ``n``,
    and at the number of distinct rows: where the inputs repeat (a covariate with few values), two inducing
    inputs at one point would make :math:`K_{uu}` singular, so the distinct rows (of the subset) are returned
    instead, fewer than ``M`` (the sparse model is then exact at those inputs).
    """
    if not isinstance(inducing_points, int):
        return np.array(inducing_points, dtype=float)
    if init not in INITS:
        raise ValueError(f"inducing_init must be one of {INITS}, got {init!r}")
    n = X.shape[0]
    M = min(inducing_points, n)
    gen = np.random.default_rng(rng.randint(2**31 - 1) if isinstance(rng, np.random.RandomState) else rng)
    if init == "random" or M == n:
        chosen = X[np.sort(gen.choice(n, M, replace=False))]
        distinct = np.unique(chosen, axis=0)
        return chosen.copy() if distinct.shape[0] == M else distinct
    sub = X[gen.choice(n, min(n, 20 * M), replace=False)]
    distinct = np.unique(sub, axis=0)
    if distinct.shape[0] <= M:  # (k-means would return repeated centres)
        return distinct
    seed = int(gen.integers(2**31 - 1))
    return KMeans(n_clusters=M, n_init=1, max_iter=50, random_state=seed).fit(sub).cluster_centers_.copy()
