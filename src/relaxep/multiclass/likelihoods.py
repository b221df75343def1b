"""Old home of the multi-class likelihoods, now :mod:`relaxep.likelihoods.multiclass` (removed in 0.4)."""

import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    """Resolve ``relaxep.multiclass.likelihoods.NAME`` from its new home, warning that the old path goes."""
    from relaxep.likelihoods import multiclass

    if name.startswith("__") or not hasattr(multiclass, name):
        raise AttributeError(f"module 'relaxep.multiclass.likelihoods' has no attribute {name!r}")
    warnings.warn(
        f"relaxep.multiclass.likelihoods moved to relaxep.likelihoods.multiclass: import {name} from there "
        "(the old path goes in 0.4)",
        FutureWarning,
        stacklevel=2,
    )
    return getattr(multiclass, name)
