"""Old home of the sparse evidence gradient, now :mod:`relaxep.posterior.sparse_gradient` (removed in 0.4)."""

import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    """Resolve ``relaxep.inference.sparse_evidence.NAME`` from its new home, warning that the old path goes."""
    from relaxep.posterior import sparse_gradient

    if name.startswith("__") or not hasattr(sparse_gradient, name):
        raise AttributeError(f"module 'relaxep.inference.sparse_evidence' has no attribute {name!r}")
    warnings.warn(
        f"relaxep.inference.sparse_evidence moved to relaxep.posterior.sparse_gradient: import {name} from there "
        "(the old path goes in 0.4)",
        FutureWarning,
        stacklevel=2,
    )
    return getattr(sparse_gradient, name)
