r"""The Hessian of a log posterior from its analytic gradient, by finite differences that respect bounds.

Used at the mode of the hyperparameters' posterior, before the integration designs of
:mod:`relaxep.hyper.design` (whose standardised coordinates are the eigenvectors of :math:`-H`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["hessian_from_gradient"]


def _vector(x: object, name: str) -> np.ndarray:
    v = np.array(x, dtype=float)  # a copy: the design's arrays are made read-only
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be a non-empty finite 1-d array, got shape {v.shape}")
    return v


def _bounds(lower: object, upper: object, d: int) -> tuple[np.ndarray, np.ndarray]:
    try:
        lo = np.full(d, -np.inf) if lower is None else np.broadcast_to(np.asarray(lower, dtype=float), (d,)).copy()
        hi = np.full(d, np.inf) if upper is None else np.broadcast_to(np.asarray(upper, dtype=float), (d,)).copy()
    except ValueError as err:
        raise ValueError(f"lower and upper must be floats or arrays of shape ({d},)") from err
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo >= hi):
        raise ValueError("lower and upper must be bounds with lower < upper in every coordinate")
    return lo, hi


def hessian_from_gradient(
    gradient: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    step: float = 1e-4,
    *,
    lower: np.ndarray | float | None = None,
    upper: np.ndarray | float | None = None,
) -> np.ndarray:
    r"""The Hessian of a scalar function at ``x`` by finite differences of its analytic gradient.

    Column :math:`j` is :math:`H_{:j} = [g(x + h_j e_j) - g(x - h_j e_j)] / (2 h_j)`, with error
    :math:`O(h^2)`; where that would leave ``[lower, upper]``, the one-sided second-order rules
    :math:`[\mp 3 g(x) \pm 4 g(x \pm h e_j) \mp g(x \pm 2h e_j)]/(2h)`, also :math:`O(h^2)`, so that no evaluation
    leaves the bounds.  The result is symmetrised, :math:`(H + H^T)/2`.

    The step is :math:`h_j = \text{step}\cdot\max(1, |x_j|)`: absolute near the origin, where a log-space
    hyperparameter's natural unit is 1 (a factor :math:`e`), relative beyond.  With ``step = 1e-4`` the truncation
    error is about :math:`10^{-8}|g'''|` and the rounding error about :math:`10^{-12}|g|`; an evidence gradient
    accurate to :math:`\delta` adds :math:`\delta/h`, so 1e-4 suits gradients good to 1e-9 or better (1e-3 for
    noisier ones).

    Parameters
    ----------
    gradient : callable
        ``x -> g(x)``, a finite array of shape ``(d,)``.
    x : array of shape (d,)
        The point, inside the bounds; ``lower``, ``upper`` (arrays of shape (d,) or floats): what no evaluation
        may leave.

    Returns
    -------
    ndarray of shape (d, d)
    """
    x = _vector(x, "x")
    d = x.size
    if not (np.isfinite(step) and step > 0):
        raise ValueError(f"step must be a positive finite number, got {step}")
    lo, hi = _bounds(lower, upper, d)
    if np.any(x < lo) or np.any(x > hi):
        raise ValueError("x lies outside [lower, upper]")

    def g(at: np.ndarray) -> np.ndarray:
        out = np.asarray(gradient(at), dtype=float)
        if out.shape != (d,) or not np.all(np.isfinite(out)):
            raise ValueError(f"gradient must return a finite array of shape ({d},), got {out!r} at {at}")
        return out

    h = step * np.maximum(1.0, np.abs(x))
    g0 = None
    hess = np.empty((d, d))
    for j in range(d):
        e = np.zeros(d)
        e[j] = h[j]
        if x[j] - h[j] >= lo[j] and x[j] + h[j] <= hi[j]:
            hess[:, j] = (g(x + e) - g(x - e)) / (2 * h[j])
            continue
        g0 = g(x) if g0 is None else g0
        if x[j] + 2 * h[j] <= hi[j]:
            hess[:, j] = (-3 * g0 + 4 * g(x + e) - g(x + 2 * e)) / (2 * h[j])
        elif x[j] - 2 * h[j] >= lo[j]:
            hess[:, j] = (3 * g0 - 4 * g(x - e) + g(x - 2 * e)) / (2 * h[j])
        else:
            raise ValueError(f"step: coordinate {j}'s interval [lower, upper] is too narrow for a step {h[j]:g}")
    return (hess + hess.T) / 2
