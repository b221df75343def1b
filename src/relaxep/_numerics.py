"""Stable normal-cdf ratios and log-space helpers used by every other module.

Nothing here knows about Gaussian processes: these are the scalar (vectorised)
building blocks that keep the likelihoods finite for ``|z|`` up to 40 and beyond.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import erfcx

__all__ = ["normal_cdf_ratio", "safe_log"]

_SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)
_SQRT_2 = np.sqrt(2.0)


def normal_cdf_ratio(z: ArrayLike) -> NDArray[np.float64]:
    r"""Inverse Mills ratio :math:`N(z) / \Phi(z)`, stable for all real ``z``.

    .. math:: \frac{N(z)}{\Phi(z)} = \frac{\sqrt{2/\pi}}{\operatorname{erfcx}(-z/\sqrt{2})}

    The naive quotient is ``0/0 = NaN`` at ``z = -40``; this form is exact to
    rounding there and tends to ``-z`` as ``z -> -inf``.
    """
    z = np.asarray(z, dtype=float)
    return _SQRT_2_OVER_PI / erfcx(-z / _SQRT_2)


def safe_log(x: ArrayLike) -> NDArray[np.float64]:
    """``log(x)`` with ``log(0) = -inf`` and no floating-point warning."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore"):
        return np.log(x)
