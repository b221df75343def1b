"""Ordinal-regression benchmarks with their fixed 30 hold-out partitions, and a real count series.

* :func:`load_ordinal` reads ``pasture``, ``tae`` or ``toy`` as the ORCA toolbox ships them
  (Gutiérrez et al., *Ordinal regression methods: survey and experimental study*, IEEE TKDE 28,
  2016; GitHub ``ayrna/orca``, ``exampledata/30-holdout``): the data once, and the 30 train/test
  partitions as row indices into it, so that ``X[train], y[train]`` are exactly the rows of ORCA's
  ``train_<name>.<i>``, in ORCA's order (likewise for test).  Labels are ORCA's classes 1..K
  shifted to 0..K-1.
* :func:`load_coal_mining` reads the yearly counts of British coal-mining disasters, 1851-1962
  (Jarrett 1979, *A note on the intervals between coal-mining disasters*, Biometrika 66), binned
  from the dates of R's ``boot::coal``: 191 disasters in 112 years.
* :func:`load_broffitt` reads Broffitt's mortality table (deaths and person-years at ages 35-64), the data of
  GPstuff's monotone-GP demo: a rate known to rise with age.
* :func:`load_lynx` reads the annual Canadian lynx trappings, 1821-1934 (Elton & Nicholson 1942), R's
  ``datasets::lynx``: a count series with a cycle of about ten years.

Provenance, licences, checksums and the conversion are described in ``data/README.md``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from relaxep.datasets.registry import PACKAGED_DATA

__all__ = ["ORDINAL_DATASETS", "load_broffitt", "load_coal_mining", "load_lynx", "load_ordinal"]

#: the shipped ordinal data sets: name -> (n_samples, n_features, n_classes, n_train, n_test)
ORDINAL_DATASETS: dict[str, tuple[int, int, int, int, int]] = {
    "pasture": (36, 25, 3, 27, 9),
    "tae": (151, 54, 3, 113, 38),
    "toy": (300, 2, 5, 225, 75),
}

#: number of fixed partitions per ordinal data set (ORCA's 30-holdout design)
N_PARTITIONS = 30


def load_ordinal(
    name: str,
) -> tuple[NDArray[np.float64], NDArray[np.int64], list[tuple[NDArray[np.intp], NDArray[np.intp]]]]:
    """``(X, y, partitions)`` of an ORCA ordinal benchmark with its 30 hold-out partitions.

    Parameters
    ----------
    name : {"pasture", "tae", "toy"}
        ``pasture`` (36 x 25, 3 classes), ``tae`` (151 x 54, 3 classes; it has repeated rows,
        kept as separate rows) or ``toy`` (300 x 2, 5 classes, Herbrich et al.'s synthetic set).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
        The values as ORCA ships them (nothing scaled).
    y : ndarray of shape (n_samples,), int64
        Ordinal labels ``0..K-1`` (ORCA's ``1..K`` minus one).
    partitions : list of 30 (train_idx, test_idx) pairs
        Row indices into ``X``/``y`` for ORCA partitions ``0..29``; each pair is disjoint and
        covers every row once.
    """
    if name not in ORDINAL_DATASETS:
        raise ValueError(f"unknown ordinal data set {name!r}; choose one of {sorted(ORDINAL_DATASETS)}")
    with np.load(PACKAGED_DATA / f"ordinal_{name}.npz") as data:
        X = np.ascontiguousarray(data["X"], dtype=np.float64)
        y = data["y"].astype(np.int64)
        partitions = [
            (data[f"train_{i}"].astype(np.intp), data[f"test_{i}"].astype(np.intp)) for i in range(N_PARTITIONS)
        ]
    return X, y, partitions


def load_coal_mining() -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(years, counts)``: British coal-mining disasters per calendar year, 1851-1962.

    Jarrett's (1979) 191 explosions with ten or more deaths, 15 March 1851 to 22 March 1962,
    counted per year from the dates of R's ``boot::coal`` (year = integer part of the date).

    Returns
    -------
    years : ndarray of shape (112,), int64
        1851, 1852, ..., 1962.
    counts : ndarray of shape (112,), int64
        Disasters in each year; they sum to 191.
    """
    table = np.loadtxt(PACKAGED_DATA / "coal_mining.csv", delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
    return table[:, 0].copy(), table[:, 1].copy()


def load_lynx() -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(years, trappings)``: Canadian lynx trapped in the Mackenzie River district per year, 1821-1934.

    Returns
    -------
    years : ndarray of shape (114,), int64
        1821, 1822, ..., 1934.
    trappings : ndarray of shape (114,), int64
        Lynx trapped in each year (39 to 6991).
    """
    table = np.loadtxt(PACKAGED_DATA / "lynx.csv", delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
    return table[:, 0].copy(), table[:, 1].copy()


def load_broffitt() -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]]:
    """``(ages, exposure, deaths)``: Broffitt's (1988) mortality table, ages 35-64.

    ``deaths ~ Poisson(exposure * exp(f(age)))`` with ``f`` rising with age is the model of GPstuff's monotone-GP
    example; the table is J. D. Broffitt, *Increasing and increasing convex Bayesian graduation*, Transactions of the
    Society of Actuaries 40 (1988).

    Returns
    -------
    ages : ndarray of shape (30,), int64
    exposure : ndarray of shape (30,), float64
        Person-years at risk.
    deaths : ndarray of shape (30,), int64
    """
    table = np.loadtxt(PACKAGED_DATA / "broffitt.csv", delimiter=",", skiprows=1, ndmin=2)
    return table[:, 0].astype(np.int64), table[:, 1].copy(), table[:, 2].astype(np.int64)
