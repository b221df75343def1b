r"""Refuse before allocating: what a dense computation needs, against the memory available.

A dense fit holds a few :math:`n \times n` float64 matrices (the kernel, its Cholesky factor, the
posterior covariance, a work array) and, while learning, the kernel's gradient, one more per
hyperparameter.  Before the first of them is allocated, :func:`check_memory` compares an
estimate of the total with the memory available and raises :class:`~relaxep.MemoryLimitError`
naming ``n``, the bytes needed and the remedy, instead of swapping for minutes or meeting the
out-of-memory killer.

The memory available is the environment variable ``RELAXEP_MAX_MEMORY`` where it is set (bytes,
or a number with a unit: ``"8GiB"``, ``"500MB"``; ``"inf"`` turns the check off), else the
operating system's available memory (Linux: ``MemAvailable`` in ``/proc/meminfo``, capped by the
cgroup's ``memory.max`` less its ``memory.current``); where neither can be read the check passes.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from relaxep.errors import MemoryLimitError

__all__ = ["ENV_VAR", "available_memory", "check_memory", "dense_bytes", "format_bytes", "parse_bytes"]

ENV_VAR = "RELAXEP_MAX_MEMORY"
_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})

#: what a sparse or one-vs-rest fit needs instead: said in every refusal of a fit
FIT_REMEDY = (
    "fit a sparse model instead (inducing_points=M: memory O(n M)); with more than two classes, "
    "multi_class='one_vs_rest' needs one n x n model at a time; or learn the hyperparameters on "
    "fewer rows (optimizer_subset)"
)


def parse_bytes(text: str) -> float:
    """``"8GiB"``, ``"500 MB"``, ``"1e9"`` or ``"inf"`` as a number of bytes."""
    match = re.fullmatch(r"\s*([0-9.eE+]+|inf)\s*([a-zA-Z]*)\s*", str(text))
    if match is None or match.group(2).lower() not in _UNITS:
        raise ValueError(f"{ENV_VAR} must be a number of bytes, optionally with a unit (8GiB, 500MB), got {text!r}")
    try:
        value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    except ValueError:
        raise ValueError(f"{ENV_VAR} must be a number of bytes, got {text!r}") from None
    if not value > 0:
        raise ValueError(f"{ENV_VAR} must be positive, got {text!r}")
    return value


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_memory() -> tuple[float, str] | None:
    """The bytes a computation may use, and where that figure comes from (``None``: unknown)."""
    override = os.environ.get(ENV_VAR)
    if override is not None:
        return parse_bytes(override), ENV_VAR
    found: list[tuple[float, str]] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append((int(line.split()[1]) * 1024.0, "available memory"))
                break
    except OSError:
        pass
    limit, usage = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and usage is not None:
        found.append((float(max(limit - usage, 0)), "the cgroup's memory limit"))
    return min(found) if found else None


def format_bytes(nbytes: float) -> str:
    """``12.3 GiB``-style."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes:.0f} B"


def dense_bytes(n: int, copies: float) -> float:
    """``copies`` float64 ``n x n`` matrices."""
    return 8.0 * float(n) * float(n) * float(copies)


#: requests below this many bytes pass without reading the system's figures (unless ``ENV_VAR`` sets a limit): a
#: search checks before each evaluation, and reading ``/proc`` costs more than a small evaluation
SMALL = 16 * 2**20


def check_memory(nbytes: float, what: str, remedy: str) -> None:
    """Raise :class:`~relaxep.MemoryLimitError` where ``nbytes`` exceeds the memory available.

    ``what`` names the computation and its size (``"a dense fit on n = 40000 points"``), ``remedy``
    what to do instead.
    """
    if nbytes < SMALL and os.environ.get(ENV_VAR) is None:  # (no file to read for a few megabytes)
        return
    budget = available_memory()
    if budget is None or math.isinf(budget[0]) or nbytes <= budget[0]:
        return
    raise MemoryLimitError(
        f"{what} needs about {format_bytes(nbytes)}, more than the {format_bytes(budget[0])} of "
        f"{budget[1]}: {remedy}.  (Set the environment variable {ENV_VAR}, e.g. to 64GiB or inf, to change the limit.)"
    )
