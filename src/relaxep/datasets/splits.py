"""Train/test splits: the paper's seeded protocol, the fixed splits shipped with the data, random ones.

:func:`paper_splits` draws the paper's random train/test splits (its own were never published),
:func:`fixed_splits` reads the fixed splits shipped beside the data (Rätsch's heart realisations
1-10 and one diabetis split) and :func:`random_splits` draws generic ones.
"""

from __future__ import annotations

import csv
import os

import numpy as np
from numpy.typing import NDArray
from sklearn.model_selection import ShuffleSplit

from relaxep.datasets.registry import FIXED_SPLITS, dataset_info, find_data_file

__all__ = ["fixed_splits", "paper_splits", "random_splits"]

Split = tuple[NDArray[np.intp], NDArray[np.intp]]


# --------------------------------------------------------------------------- splits
def random_splits(n: int, n_train: int, n_splits: int, random_state: int = 0) -> list[Split]:
    """``n_splits`` seeded random train/test index splits (``ShuffleSplit``; train of size ``n_train``)."""
    if not 0 < n_train < n:
        raise ValueError(f"n_train must lie in (0, {n}), got {n_train}")
    shuffle = ShuffleSplit(n_splits=n_splits, train_size=n_train, test_size=n - n_train, random_state=random_state)
    return [(np.sort(train), np.sort(test)) for train, test in shuffle.split(np.zeros((n, 1)))]


def paper_splits(name: str, n_splits: int | None = None, random_state: int = 0) -> list[Split]:
    """The paper's random train/test protocol for a dataset, drawn with a fixed seed.

    Split ``i`` is drawn from ``np.random.default_rng([random_state, i])``, so the first ``k``
    splits are the same whatever ``n_splits`` is. The paper's own splits were never published.

    Parameters
    ----------
    name : str
        A key of :data:`DATASETS`; its ``n_train``, ``n_test`` and ``n_splits`` are used.
    n_splits : int or None
        Number of splits; ``None`` means the paper's count.
    random_state : int
        Non-negative seed.

    Returns
    -------
    list of (train, test)
        Sorted index arrays of dtype ``np.intp`` into the dataset's rows, of sizes ``n_train``
        and ``n_test``; they are disjoint and together cover every row.
    """
    info = dataset_info(name)
    count = info.n_splits if n_splits is None else n_splits
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f"n_splits must be a positive integer or None, got {n_splits!r}")
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)) or random_state < 0:
        raise ValueError(f"random_state must be a non-negative integer, got {random_state!r}")
    out = []
    for i in range(int(count)):
        perm = np.random.default_rng([int(random_state), i]).permutation(info.n_samples).astype(np.intp)
        out.append((np.sort(perm[: info.n_train]), np.sort(perm[info.n_train :])))
    return out


def fixed_splits(name: str, data_home: str | os.PathLike | None = None) -> list[Split]:
    """The fixed train/test splits shipped beside the data, in file order.

    ``heart``: Rätsch's IDA realisations 1-10 (``heart_raetsch_splits.csv``, 170 train / 100
    test). ``diabetes``: one Rätsch-style split of unknown realisation
    (``diabetis_split_badsns.csv``, 468 / 300). Other datasets have none.

    Parameters
    ----------
    name : str
        ``"heart"`` or ``"diabetes"``.
    data_home : path-like or None
        Folder holding the split file, as for :func:`~relaxep.datasets.load_dataset` (default: the
        data home if it holds a copy, else the packaged one).

    Returns
    -------
    list of (train, test)
        Index arrays of dtype ``np.intp`` into the dataset's rows, in the file's order.
    """
    info = dataset_info(name)
    if name not in FIXED_SPLITS:
        raise ValueError(f"there are no fixed splits for dataset {name!r}, only for {sorted(FIXED_SPLITS)}")
    file, n_train, n_test = FIXED_SPLITS[name]
    path = find_data_file(file, data_home)
    if not path.is_file():
        raise FileNotFoundError(
            f"split file for {name!r} not found at {path}; it ships inside relaxep (relaxep/datasets/data) and "
            f"cannot be downloaded: leave data_home unset to read the packaged copy, or use a folder holding {file}"
        )
    with path.open(newline="", encoding="utf-8") as handle:
        records = list(csv.DictReader(handle))
    sets: dict[str, dict[str, NDArray[np.intp]]] = {}
    for lineno, record in enumerate(records, start=2):
        try:
            realisation = (record.get("realisation") or "1").strip()
            which = record["set"].strip()
            indices = np.array(record["row_indices"].split(), dtype=np.intp)
        except (KeyError, AttributeError, ValueError) as exc:
            raise ValueError(f"{path}, line {lineno}: expected columns [realisation,]set,row_indices ({exc})") from exc
        if which not in ("train", "test") or which in sets.setdefault(realisation, {}):
            raise ValueError(f"{path}, line {lineno}: set {which!r} is not a new 'train' or 'test' set")
        sets[realisation][which] = indices
    out = []
    for realisation, pair in sets.items():
        if set(pair) != {"train", "test"}:
            raise ValueError(f"{path}: realisation {realisation} lacks a train or a test set")
        train, test = pair["train"], pair["test"]
        both = np.concatenate([train, test])
        if (
            train.size != n_train
            or test.size != n_test
            or both.min() < 0
            or both.max() >= info.n_samples
            or np.unique(both).size != both.size
        ):
            raise ValueError(
                f"{path}: realisation {realisation} must be {n_train} train / {n_test} test distinct indices "
                f"in [0, {info.n_samples}), got {train.size} / {test.size}"
            )
        out.append((train, test))
    return out
