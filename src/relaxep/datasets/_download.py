"""Downloading the benchmark datasets from their original sources, checked by content checksum."""

from __future__ import annotations

import csv
import hashlib
import http.client
import io
import os
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from relaxep._io import atomic_write_text
from relaxep.datasets.registry import CONTENT_SHA256, DATASETS, SOURCES, dataset_info, get_data_home

__all__ = ["fetch"]


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
    info = dataset_info(name)
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    home = get_data_home(data_home)
    urls = [_mirrored(url, mirror) for url in SOURCES[name]]
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
    if got != CONTENT_SHA256[name]:
        raise ValueError(
            f"checksum mismatch for dataset {name!r} downloaded from {', '.join(urls)}: expected content sha256 "
            f"{CONTENT_SHA256[name]}, got {got} (table {X.shape[0]} x {X.shape[1]}, expected "
            f"{info.n_samples} x {info.n_features}); nothing was written"
        )
    table = np.column_stack([X, y]).tolist()
    lines = [",".join((*info.columns, "label"))]
    lines.extend(",".join(_format_number(value) for value in row) for row in table)
    home.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(home / info.file, "\n".join(lines) + "\n")
