"""Moved to :mod:`relaxep.estimators.classifier`; this path warns and goes in 0.4."""

from __future__ import annotations

import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    from relaxep.estimators import classifier

    warnings.warn(
        "relaxep.classifier moved to relaxep.estimators.classifier; the old path goes in 0.4",
        FutureWarning,
        stacklevel=2,
    )
    return getattr(classifier, name)
