"""Old module paths that still resolve for one more minor version, with a ``FutureWarning``."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

REMOVAL = "0.4"


def moved(old: str, new: str, elsewhere: dict[str, str] | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``old``: each name resolves from ``new`` (or from
    ``elsewhere[name]``) and warns that the old path goes in :data:`REMOVAL`."""

    def __getattr__(name: str) -> Any:
        home = (elsewhere or {}).get(name, new)
        module = importlib.import_module(home)
        if name.startswith("__") or not hasattr(module, name):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(
            f"{old} moved to {home}; the old path goes in {REMOVAL} (import {name} from {home})",
            FutureWarning,
            stacklevel=2,
        )
        return getattr(module, name)

    return __getattr__
