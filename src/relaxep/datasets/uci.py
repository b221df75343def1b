"""Reading the benchmark datasets: the user's folder if it holds them, else the packaged copies.

:func:`load_dataset` reads ``<folder>/<file>.csv`` (a header row, the feature columns, then a
last column ``label`` of -1/+1): ``data_home`` when given, else ``$RELAXEP_DATA`` or
``~/.cache/relaxep`` when the file is there, else the copy inside the package
(:func:`~relaxep.datasets.registry.find_data_file`).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
from numpy.typing import NDArray

from relaxep.datasets._download import fetch
from relaxep.datasets.registry import dataset_info, find_data_file, get_data_home

__all__ = ["load_dataset"]


def load_dataset(
    name: str,
    data_home: str | os.PathLike | None = None,
    *,
    download: bool = False,
    strict: bool = True,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Load one of the paper's datasets as ``X`` (float) and ``y`` in {-1, +1}.

    Reads ``<folder>/<file>.csv``: a header row, the feature columns, then a last column
    ``label`` of -1/+1.  The folder is ``data_home`` when given, else ``$RELAXEP_DATA`` or
    ``~/.cache/relaxep`` if the file is there, else the copy shipped in the package.

    Parameters
    ----------
    name : str
        A key of :data:`DATASETS`.
    data_home : path-like or None
        Folder holding the CSV (only it is read); ``None``: the data home if it holds a copy,
        else the packaged one.
    download : bool
        If the file is missing from ``data_home``, download it with :func:`fetch` instead of raising.
    strict : bool
        If the table's shape differs from :data:`DATASETS`, raise a ``ValueError`` (default:
        the paper's splits index the rows); ``False`` warns and returns the table as it is.

    Returns
    -------
    X : ndarray of float64, shape (n_samples, n_features)
    y : ndarray of float64, shape (n_samples,)
        Labels in {-1, +1}.

    Raises
    ------
    FileNotFoundError
        If the file is missing and ``download`` is false.
    ValueError
        For an unknown name or a file that is not in the expected layout.
    """
    info = dataset_info(name)
    home = get_data_home(data_home)
    path = find_data_file(info.file, data_home)
    if not path.is_file():
        if not download:
            raise FileNotFoundError(
                f"dataset {name!r} not found at {path}. Download it with "
                f"relaxep.datasets.fetch({name!r}, data_home={str(home)!r}) (or load_dataset(..., download=True)), "
                f"or pass data_home=... / set RELAXEP_DATA to a folder holding {info.file}"
            )
        fetch(name, home)
    try:
        table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"{path}: expected a numeric CSV with one header row ({exc})") from exc
    if table.shape[0] == 0 or table.shape[1] < 2:
        raise ValueError(f"{path}: expected a header row, then rows of features and a last column label")
    if not np.all(np.isfinite(table)):
        row, col = np.argwhere(~np.isfinite(table))[0]
        raise ValueError(
            f"{path}: non-finite value {table[row, col]} in data row {row + 1}, column {col + 1}; "
            "the datasets have no missing values, so the file is damaged (fetch it again)"
        )
    X, y = np.ascontiguousarray(table[:, :-1]), table[:, -1].copy()
    if not np.all(np.isin(y, (-1.0, 1.0))):
        raise ValueError(f"{path}: the last column must hold labels -1/+1")
    expected = (info.n_samples, info.n_features)
    if X.shape != expected:
        message = (
            f"{path}: dataset {name!r} should have {expected[0]} rows x {expected[1]} features, "
            f"the file has {X.shape[0]} x {X.shape[1]}"
        )
        if strict:
            raise ValueError(message)
        warnings.warn(message, UserWarning, stacklevel=2)
    return X, y
