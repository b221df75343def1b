"""Type aliases shared by the package."""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["Array", "Status"]

Array = NDArray[np.float64]

#: How a run ended; each status has one meaning (see :mod:`relaxep.inference`).
Status = Literal["converged", "max_sweeps", "diverged", "stalled", "abandoned", "stuck"]
