"""Run a grid of independent cells, in parallel, with an on-disk cache.

A *cell* is one call of a module-level function with JSON-serialisable keyword
arguments that returns one JSON-serialisable ``dict`` (a table row, possibly with a few
list-valued extras such as a convergence trace).  Each finished cell is written at once
to ``<cache>/<key>.json`` (atomically: a temporary file, then :func:`os.replace`), so a
run that is killed midway resumes without recomputing finished cells; a cache file that
cannot be read as a row is named in a warning, discarded and recomputed.  The key hashes
the function and its arguments, so a ``--quick`` run and a full run never share cells.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relaxep._io import atomic_write_text

__all__ = ["Cell", "run_cells"]


@dataclass(frozen=True)
class Cell:
    """One unit of work: ``func(**kwargs)``, labelled ``name`` (readable part of its key)."""

    name: str
    func: Callable[..., dict]
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """File-name-safe key: ``name`` plus a hash of the function and its arguments."""
        blob = json.dumps([self.func.__module__, self.func.__qualname__, self.kwargs], sort_keys=True, default=str)
        digest = hashlib.sha1(blob.encode()).hexdigest()[:12]
        safe = "".join(ch if ch.isalnum() or ch in "-_.=" else "_" for ch in self.name)
        return f"{safe}-{digest}"


def _read_cached(path: Path) -> dict | None:
    """A cached row, or ``None`` after discarding (with a warning naming it) a file that is not one."""
    try:
        with open(path) as fh:
            row = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    else:
        if isinstance(row, dict) and row:
            return row
        reason = f"expected a JSON object with the cell's row, found {type(row).__name__} {str(row)[:40]}"
    warnings.warn(f"discarding the corrupted cache file {path} ({reason}); the cell is recomputed", stacklevel=3)
    path.unlink(missing_ok=True)
    return None


def _call(cell: Cell) -> tuple[str, dict]:
    return cell.key, cell.func(**cell.kwargs)


def run_cells(
    cells: Iterable[Cell],
    cache_dir: str | os.PathLike | None,
    *,
    n_jobs: int = 1,
    scheduler: str | None = None,
    desc: str = "cells",
    progress: bool = True,
    stats: dict[str, int] | None = None,
) -> list[dict]:
    """Compute every cell not already in ``cache_dir``; return all rows in cell order.

    Parameters
    ----------
    cells : iterable of Cell
    cache_dir : path or None
        Finished cells are read from and written to ``cache_dir/<key>.json``; ``None``
        disables the cache.
    n_jobs : int
        Worker processes (joblib, ``loky`` backend); 1 runs in this process.
    scheduler : str or None
        Address of a running Dask scheduler (``tcp://host:port``): the cells run on that
        cluster through joblib's ``dask`` backend (needs ``dask[distributed]``).
    desc : str
        Label of the progress bar.
    progress : bool
        Show a tqdm progress bar.
    stats : dict, optional
        Incremented in place: ``"cached"`` (cells read from the cache) and ``"computed"``.
    """
    cells = list(cells)
    keys = [c.key for c in cells]
    if len(set(keys)) != len(keys):
        raise ValueError("two cells have the same key (same name, function and arguments)")
    cache = Path(cache_dir) if cache_dir is not None else None
    rows: dict[str, dict] = {}
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        for stale in (*cache.glob(".tmp-*"), *cache.glob(".*.part")):  # writes cut short by a killed run
            stale.unlink(missing_ok=True)
        for key in keys:
            path = cache / f"{key}.json"
            row = _read_cached(path) if path.is_file() else None
            if row is not None:
                rows[key] = row
    todo = [c for c in cells if c.key not in rows]
    if stats is not None:
        stats["cached"] = stats.get("cached", 0) + len(cells) - len(todo)
        stats["computed"] = stats.get("computed", 0) + len(todo)
    from tqdm.auto import tqdm  # the studies' extra, relaxep[studies]: imported here, not with the library

    bar = tqdm(total=len(cells), initial=len(cells) - len(todo), desc=desc, disable=not progress, leave=False)

    def record(key: str, row: dict) -> None:
        rows[key] = row
        if cache is not None:
            atomic_write_text(cache / f"{key}.json", json.dumps(row))
        bar.update(1)

    try:
        if todo and (n_jobs == 1 and scheduler is None):
            for cell in todo:
                record(*_call(cell))
        elif todo:
            import joblib

            if scheduler is not None:
                from distributed import Client  # optional dependency: pip install "relaxep[dask]"

                client = Client(scheduler)
                context = joblib.parallel_config(backend="dask")
            else:
                client = None
                context = nullcontext()
            try:
                with context:
                    results = joblib.Parallel(
                        n_jobs=n_jobs if scheduler is None else -1, return_as="generator_unordered"
                    )(joblib.delayed(_call)(cell) for cell in todo)
                    for key, row in results:  # recorded as each finishes, in any order
                        record(key, row)
            finally:
                if client is not None:
                    client.close()
    finally:
        bar.close()
    return [rows[k] for k in keys]
