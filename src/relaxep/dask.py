"""Old home of :class:`~relaxep.estimators.dask.DaskGPClassifier` (the old path goes in 0.4)."""

import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    """Resolve ``relaxep.dask.NAME`` from :mod:`relaxep.estimators.dask`, warning that the old path goes."""
    from relaxep.estimators import dask

    if name.startswith("__") or not hasattr(dask, name):
        raise AttributeError(f"module 'relaxep.dask' has no attribute {name!r}")
    warnings.warn(
        f"relaxep.dask moved to relaxep.estimators.dask: import {name} from there (the old path goes in 0.4)",
        FutureWarning,
        stacklevel=2,
    )
    return getattr(dask, name)
