"""Old name of :mod:`relaxep.sites`: every name still resolves, with a ``FutureWarning`` (removed in 0.4)."""

import importlib
import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    """Resolve ``relaxep.rules.NAME`` from its new home, warning that the old path goes."""
    home = "relaxep.inference" if name == "DoubleLoopEP" else "relaxep.sites"  # a site rule until 0.2
    module = importlib.import_module(home)
    if name.startswith("__") or not hasattr(module, name):
        raise AttributeError(f"module 'relaxep.rules' has no attribute {name!r}")
    warnings.warn(
        f"relaxep.rules is an old name: import {name} from {home} instead (relaxep.rules goes in 0.4)",
        FutureWarning,
        stacklevel=2,
    )
    return getattr(module, name)
