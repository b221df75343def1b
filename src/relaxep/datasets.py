"""Datasets: the paper's toy and synthetic problems and the five UCI benchmarks of Section 7.3.

Synthetic data
--------------
:func:`make_toy` is the five-point toy of Section 7.1 (one mislabelled point) and
:func:`make_synthetic` the label-noise problem of Section 7.2. The paper does not give the
latter's Gaussians' parameters; ours are stated here and fixed: class +1 is
:math:`N((0, 0), 0.8^2 I)`, class -1 an equal mixture of :math:`N((-1.5, 1.5), 0.75^2 I)` and
:math:`N((1.5, 1.5), 0.75^2 I)`, so the Bayes boundary is curved. :func:`flip_labels` flips a
fraction of any -1/+1 labels.

Benchmark data
--------------
:data:`DATASETS` lists ``heart``, ``pima``, ``diabetes``, ``haberman`` and ``spambase`` with
their sizes and the paper's split protocol. :func:`load_dataset` reads them from a data home
(``data_home``, else ``$RELAXEP_DATA``, else ``~/.cache/relaxep``; see :func:`get_data_home`)
holding one CSV per dataset: a header row, the feature columns, then a last column ``label`` of
-1/+1. :func:`fetch` downloads the original files (UCI, Rdatasets), converts them to that layout
and checks their content against a fixed checksum.

Splits
------
:func:`paper_splits` draws the paper's random train/test splits (its own were never published),
:func:`fixed_splits` reads the fixed splits shipped beside the data (Rätsch's heart realisations
1-10 and one diabetis split) and :func:`random_splits` draws generic ones.
:func:`standardize` z-scores with the training set's statistics.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import http.client
import io
import os
import tempfile
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "DATASETS",
    "DatasetInfo",
    "fetch",
    "fixed_splits",
    "flip_labels",
    "get_data_home",
    "load_dataset",
    "make_synthetic",
    "make_toy",
    "paper_splits",
    "random_splits",
    "standardize",
]

_POS_MEAN = np.array([0.0, 0.0])
_POS_SD = 0.8
_NEG_MEANS = np.array([[-1.5, 1.5], [1.5, 1.5]])
_NEG_SD = 0.75

Split = tuple[NDArray[np.intp], NDArray[np.intp]]


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


# --------------------------------------------------------------------------- UCI data
@dataclass(frozen=True)
class DatasetInfo(Mapping):
    """One benchmark dataset: its CSV file, its size and the paper's split protocol.

    Read the fields as attributes (``info.n_splits``) or as keys (``info["n_splits"]``):
    it is also a read-only mapping from field name to value.

    Attributes
    ----------
    file : str
        File name in the data home.
    n_samples, n_features : int
        Rows and feature columns of the file (the ``label`` column not counted).
    n_train, n_test, n_splits : int
        The paper's protocol: ``n_splits`` random splits of ``n_train`` training and ``n_test``
        test points.
    columns : tuple of str
        Names of the feature columns, as in the CSV header.
    """

    file: str
    n_samples: int
    n_features: int
    n_train: int
    n_test: int
    n_splits: int
    columns: tuple[str, ...]

    def __getitem__(self, key: str) -> object:
        if key not in self.__dataclass_fields__:
            raise KeyError(f"{key!r} is not a dataset field; the fields are {list(self.__dataclass_fields__)}")
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.__dataclass_fields__)

    def __len__(self) -> int:
        return len(self.__dataclass_fields__)


_SPAM_WORDS = (
    "make address all 3d our over remove internet order mail receive will people report addresses free business "
    "email you credit your font 000 money hp hpl george 650 lab labs telnet 857 data 415 85 technology 1999 parts "
    "pm direct cs meeting original project re edu table conference"
).split()

DATASETS: Mapping[str, DatasetInfo] = MappingProxyType(
    {
        "heart": DatasetInfo(
            "heart.csv",
            270,
            13,
            81,
            189,
            20,
            (
                "age",
                "sex",
                "chest_pain_type",
                "resting_blood_pressure",
                "serum_cholesterol",
                "fasting_blood_sugar_gt120",
                "resting_ecg",
                "max_heart_rate",
                "exercise_induced_angina",
                "oldpeak",
                "slope_peak_exercise_st",
                "num_major_vessels",
                "thal",
            ),
        ),
        "pima": DatasetInfo("pima.csv", 532, 7, 319, 213, 20, ("npreg", "glu", "bp", "skin", "bmi", "ped", "age")),
        "diabetes": DatasetInfo(
            "diabetes_uci768.csv",
            768,
            8,
            468,
            300,
            100,
            (
                "pregnancies",
                "plasma_glucose",
                "diastolic_bp",
                "triceps_skinfold",
                "serum_insulin",
                "bmi",
                "diabetes_pedigree",
                "age",
            ),
        ),
        "haberman": DatasetInfo(
            "haberman.csv",
            306,
            3,
            183,
            123,
            100,
            ("age_at_operation", "year_of_operation_1900", "positive_axillary_nodes"),
        ),
        "spambase": DatasetInfo(
            "spambase.csv",
            4601,
            57,
            276,
            4325,
            100,
            (
                *(f"word_freq_{word}" for word in _SPAM_WORDS),
                *(f"char_freq_{char}" for char in ";([!$#"),
                "capital_run_length_average",
                "capital_run_length_longest",
                "capital_run_length_total",
            ),
        ),
    }
)
"""The paper's benchmark datasets by name (read-only): file, size and split protocol."""

# sha256 of np.ascontiguousarray(np.column_stack([X, y]), dtype="<f8").tobytes() with X, y from
# load_dataset(name, "shared/data"), i.e. the project's checked copies (see shared/data/README.md).
# It checks the parsed content, not the downloaded bytes, whose checksums we do not know.
_CONTENT_SHA256 = {
    "heart": "f93653e9830b333019080961188baa4682ef5e04688dc474e86e5bee52280e34",
    "pima": "770e81d5056530450453c38ffb4b891b1157d38668e5693717b4adf28cdc5061",
    "diabetes": "5f9d4abb4c2e31582f3f09f7a8eb83ef9c157c67da99cdc55c64ab8fcabcf47f",
    "haberman": "3e49e6153716cbdf3130b2a1673170b457abff0b3177ff2539b07a923f850d3b",
    "spambase": "57dc4670a703ed187ea9e46fadbb031d74649e2dc4ba1c24949cd1e53dc64f9f",
}

_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases/"
_RDATASETS = "https://vincentarelbundock.github.io/Rdatasets/csv/MASS/"
# The original files, in the order their rows are concatenated.
_SOURCES: dict[str, tuple[str, ...]] = {
    "heart": (_UCI + "statlog/heart/heart.dat",),
    "pima": (_RDATASETS + "Pima.tr.csv", _RDATASETS + "Pima.te.csv"),
    "diabetes": ("https://raw.githubusercontent.com/jbrownlee/Datasets/master/pima-indians-diabetes.data.csv",),
    "haberman": (_UCI + "haberman/haberman.data",),
    "spambase": (_UCI + "spambase/spambase.data",),
}

# Fixed splits shipped beside the data: file, training and test set sizes.
_FIXED_SPLITS = {
    "heart": ("heart_raetsch_splits.csv", 170, 100),
    "diabetes": ("diabetis_split_badsns.csv", 468, 300),
}


def _info(name: str) -> DatasetInfo:
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {sorted(DATASETS)}")
    return DATASETS[name]


def get_data_home(path: str | os.PathLike | None = None) -> Path:
    """Where datasets are read from: ``path``, else ``$RELAXEP_DATA``, else ``~/.cache/relaxep``."""
    if path is not None:
        return Path(path)
    env = os.environ.get("RELAXEP_DATA")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "relaxep"


def load_dataset(
    name: str,
    data_home: str | os.PathLike | None = None,
    *,
    download: bool = False,
    strict: bool = True,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Load one of the paper's datasets as ``X`` (float) and ``y`` in {-1, +1}.

    Reads ``<data_home>/<file>.csv``: a header row, the feature columns, then a last
    column ``label`` of -1/+1 (the layout of the project's ``shared/data``).

    Parameters
    ----------
    name : str
        A key of :data:`DATASETS`.
    data_home : path-like or None
        Folder holding the CSV; ``None`` means ``$RELAXEP_DATA``, else ``~/.cache/relaxep``.
    download : bool
        If the file is missing, download it with :func:`fetch` instead of raising.
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
    info = _info(name)
    home = get_data_home(data_home)
    path = home / info.file
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


# --------------------------------------------------------------------------- download
def _mirrored(url: str, mirror: str | None) -> str:
    if mirror is None:
        return url
    base = mirror if mirror.endswith("/") else mirror + "/"
    return base + url.rsplit("/", 1)[1]


def _download(url: str, timeout: float, name: str, home: Path) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read()
    except (OSError, http.client.HTTPException) as exc:  # URLError, HTTPError and timeouts are OSErrors
        raise ConnectionError(
            f"downloading dataset {name!r} failed: {url}: {exc}. Without network access, place "
            f"{DATASETS[name].file} (a CSV with a header row, the features and a last column label of -1/+1) "
            f"in the data home {home}, or set RELAXEP_DATA to a folder holding it"
        ) from exc


def _parse_plain(
    text: str, url: str, sep: str | None, n_columns: int, classes: dict[float, float]
) -> tuple[list[list[float]], list[float]]:
    """Rows of ``n_columns`` numbers, the last one a class in ``classes`` (mapped to -1/+1)."""
    rows: list[list[float]] = []
    labels: list[float] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split(sep)
        if len(fields) != n_columns:
            raise ValueError(f"{url}, line {lineno}: expected {n_columns} columns, got {len(fields)}: {line[:80]!r}")
        try:
            values = [float(field) for field in fields]
        except ValueError as exc:
            raise ValueError(f"{url}, line {lineno}: not a number ({exc}): {line[:80]!r}") from exc
        if values[-1] not in classes:
            raise ValueError(f"{url}, line {lineno}: class {fields[-1].strip()!r} is not one of {sorted(classes)}")
        rows.append(values[:-1])
        labels.append(classes[values[-1]])
    return rows, labels


def _parse_rdatasets_pima(text: str, url: str) -> tuple[list[list[float]], list[float]]:
    """Rdatasets' ``MASS/Pima.tr.csv`` / ``Pima.te.csv``: named columns, ``type`` Yes/No."""
    columns = DATASETS["pima"].columns
    reader = csv.reader(io.StringIO(text))
    header = [field.strip() for field in next(reader, [])]
    missing = [column for column in (*columns, "type") if column not in header]
    if missing:
        raise ValueError(f"{url}: header {header} lacks the columns {missing}")
    where = [header.index(column) for column in columns]
    type_at = header.index("type")
    rows: list[list[float]] = []
    labels: list[float] = []
    for lineno, fields in enumerate(reader, start=2):
        if not fields:
            continue
        if len(fields) != len(header):
            raise ValueError(f"{url}, line {lineno}: expected {len(header)} columns, got {len(fields)}")
        try:
            rows.append([float(fields[i]) for i in where])
        except ValueError as exc:
            raise ValueError(f"{url}, line {lineno}: not a number ({exc})") from exc
        kind = fields[type_at].strip()
        if kind not in ("Yes", "No"):
            raise ValueError(f"{url}, line {lineno}: type {kind!r} is not 'Yes' or 'No'")
        labels.append(1.0 if kind == "Yes" else -1.0)
    return rows, labels


_Parser = Callable[[str, str], tuple[list[list[float]], list[float]]]
_PARSERS: dict[str, _Parser] = {
    # Statlog heart.dat: whitespace separated; class 1 absence -> -1, 2 presence -> +1.
    "heart": lambda text, url: _parse_plain(text, url, None, 14, {1.0: -1.0, 2.0: 1.0}),
    "pima": _parse_rdatasets_pima,
    # Pima Indians Diabetes: 8 features and the outcome, 1 -> +1, 0 -> -1.
    "diabetes": lambda text, url: _parse_plain(text, url, ",", 9, {1.0: 1.0, 0.0: -1.0}),
    # haberman.data: class 1 survived 5 years or longer -> +1, 2 died within 5 years -> -1.
    "haberman": lambda text, url: _parse_plain(text, url, ",", 4, {1.0: 1.0, 2.0: -1.0}),
    # spambase.data: 57 features and the class, 1 spam -> +1, 0 -> -1.
    "spambase": lambda text, url: _parse_plain(text, url, ",", 58, {1.0: 1.0, 0.0: -1.0}),
}


def _content_sha256(X: NDArray, y: NDArray) -> str:
    return hashlib.sha256(np.ascontiguousarray(np.column_stack([X, y]), dtype="<f8").tobytes()).hexdigest()


def _format_number(value: float) -> str:
    """Shortest text that reads back as exactly ``value``: ``70`` for 70.0, ``2.4`` for 2.4."""
    if value.is_integer() and abs(value) < 2.0**53:
        return str(int(value))
    return repr(value)


def fetch(
    name: str,
    data_home: str | os.PathLike | None = None,
    *,
    mirror: str | None = None,
    timeout: float = 30.0,
) -> Path:
    """Download a dataset's original files, check them and write the CSV :func:`load_dataset` reads.

    The sources are UCI's ``heart.dat`` (Statlog), ``haberman.data`` and ``spambase.data``,
    the Pima Indians Diabetes file of ``jbrownlee/Datasets`` for ``diabetes`` and Rdatasets'
    ``MASS/Pima.tr.csv`` followed by ``Pima.te.csv`` for ``pima``. The parsed table must match a
    fixed checksum of the project's checked copy; only then is the CSV written, atomically. An
    existing file is replaced.

    Parameters
    ----------
    name : str
        A key of :data:`DATASETS`.
    data_home : path-like or None
        Folder to write to (created if needed); ``None`` means ``$RELAXEP_DATA``, else
        ``~/.cache/relaxep``.
    mirror : str or None
        Base URL replacing everything up to the last ``/`` of each source URL, the file name
        being kept (e.g. ``"http://127.0.0.1:8765/"``).
    timeout : float
        Seconds to wait for each connection.

    Returns
    -------
    Path
        The CSV written.

    Raises
    ------
    ConnectionError
        If a download fails.
    ValueError
        For an unknown name, a file not in the original format, or a checksum mismatch.
    """
    info = _info(name)
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    home = get_data_home(data_home)
    urls = [_mirrored(url, mirror) for url in _SOURCES[name]]
    rows: list[list[float]] = []
    labels: list[float] = []
    for url in urls:
        try:
            text = _download(url, timeout, name, home).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{url}: not a text file ({exc})") from exc
        more_rows, more_labels = _PARSERS[name](text, url)
        rows.extend(more_rows)
        labels.extend(more_labels)
    if not rows:
        raise ValueError(f"dataset {name!r}: no data rows in {', '.join(urls)}")
    X = np.array(rows, dtype=np.float64)
    y = np.array(labels, dtype=np.float64)
    got = _content_sha256(X, y)
    if got != _CONTENT_SHA256[name]:
        raise ValueError(
            f"checksum mismatch for dataset {name!r} downloaded from {', '.join(urls)}: expected content sha256 "
            f"{_CONTENT_SHA256[name]}, got {got} (table {X.shape[0]} x {X.shape[1]}, expected "
            f"{info.n_samples} x {info.n_features}); nothing was written"
        )
    table = np.column_stack([X, y]).tolist()
    lines = [",".join((*info.columns, "label"))]
    lines.extend(",".join(_format_number(value) for value in row) for row in table)
    home.mkdir(parents=True, exist_ok=True)
    path = home / info.file
    fd, tmp = tempfile.mkstemp(prefix=f".{info.file}.", suffix=".part", dir=home)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write("\n".join(lines) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


# --------------------------------------------------------------------------- splits
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
    info = _info(name)
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
        Folder holding the split file, as for :func:`load_dataset`.

    Returns
    -------
    list of (train, test)
        Index arrays of dtype ``np.intp`` into the dataset's rows, in the file's order.
    """
    info = _info(name)
    if name not in _FIXED_SPLITS:
        raise ValueError(f"there are no fixed splits for dataset {name!r}, only for {sorted(_FIXED_SPLITS)}")
    file, n_train, n_test = _FIXED_SPLITS[name]
    home = get_data_home(data_home)
    path = home / file
    if not path.is_file():
        raise FileNotFoundError(
            f"split file for {name!r} not found at {path}; it ships with the project's shared/data and cannot be "
            f"downloaded: pass data_home=... or set RELAXEP_DATA to a folder holding {file}"
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


def standardize(X_train: NDArray, X_test: NDArray) -> tuple[NDArray, NDArray]:
    """z-score both sets with the training set's mean and standard deviation."""
    mean = X_train.mean(axis=0)
    sd = X_train.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (X_train - mean) / sd, (X_test - mean) / sd
