"""Ripley's synthetic two-class data (``synth.tr``, ``synth.te``; Ripley 1996, the R package ``MASS``): the data
of GPstuff's model-assessment demo, on which EP's leave-one-out is checked against brute force
(:mod:`relaxep.inference.loo`)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from relaxep.datasets.registry import PACKAGED_DATA

__all__ = ["load_synth"]


def load_synth(subset: str = "train") -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """``(X, y)``: Ripley's synthetic data, ``subset`` ``"train"`` (250 rows) or ``"test"`` (1000 rows).

    Two features (``xs``, ``ys``) and the class 0 or 1, each class a mixture of two Gaussians (B. D. Ripley 1996,
    *Pattern Recognition and Neural Networks*, Cambridge University Press).  The rows are sorted by class, as
    published.  The packaged files' provenance is in the data folder's README.
    """
    files = {"train": "synth_tr.csv", "test": "synth_te.csv"}
    if subset not in files:
        raise ValueError(f"subset must be 'train' or 'test', got {subset!r}")
    table = np.loadtxt(PACKAGED_DATA / files[subset], delimiter=",", skiprows=1)
    return table[:, :2].copy(), table[:, 2].astype(np.int64)
