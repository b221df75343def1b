"""Figures of a fitted classifier: its decision boundary with predictive uncertainty (2-D inputs).

Serves the documentation's gallery and users.  matplotlib (the ``studies`` extra, ``pip install
"relaxep[studies]"``) is imported on first use, and only where no ``ax`` is given.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["plot_decision_boundary"]


def plot_decision_boundary(
    classifier: Any,
    X: ArrayLike,
    y: ArrayLike | None = None,
    *,
    ax: Any = None,
    resolution: int = 150,
    margin: float = 0.5,
    show_uncertainty: bool = True,
    cmap: str = "RdBu_r",
) -> Any:
    r"""Predictive probability of ``classes_[1]`` over the inputs' box, its 0.5 contour and the points.

    With ``show_uncertainty`` the latent posterior standard deviation :math:`s_*` (from
    ``latent_mean_and_variance``) is drawn as grey contours: where they are dense the
    classifier is unsure whatever its probability says.

    Parameters
    ----------
    classifier : fitted binary GPClassifier (or any estimator with ``predict_proba`` and
        ``classes_``; the uncertainty needs ``latent_mean_and_variance``)
    X : array_like of shape (n, 2)
        Points to show; the grid spans their box widened by ``margin``.
    y : array_like of shape (n,), optional
        Their labels (markers per class).
    ax : matplotlib Axes, optional
        Drawn into; a new figure's axes by default (``matplotlib.pyplot.subplots``).
    resolution : int
        Grid points per axis.
    margin : float
        Added to each side of the box.
    show_uncertainty : bool
    cmap : str
        Colour map of the probability.

    Returns
    -------
    matplotlib Axes
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != 2:
        raise ValueError(f"X must have shape (n, 2) for a boundary plot, got {X.shape}")
    if isinstance(resolution, bool) or int(resolution) != resolution or resolution < 2:
        raise ValueError(f"resolution must be an integer >= 2, got {resolution!r}")
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(5.0, 4.2))
    lo, hi = X.min(axis=0) - margin, X.max(axis=0) + margin
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], int(resolution)), np.linspace(lo[1], hi[1], int(resolution)))
    grid = np.column_stack([gx.ravel(), gy.ravel()])
    proba = classifier.predict_proba(grid)[:, 1].reshape(gx.shape)
    mesh = ax.contourf(gx, gy, proba, levels=np.linspace(0.0, 1.0, 11), cmap=cmap, alpha=0.75)
    ax.figure.colorbar(mesh, ax=ax, label=f"P(y = {classifier.classes_[1]})")
    ax.contour(gx, gy, proba, levels=[0.5], colors="k", linewidths=1.5)
    if show_uncertainty and hasattr(classifier, "latent_mean_and_variance"):
        _, var = classifier.latent_mean_and_variance(grid)
        sd = np.sqrt(var).reshape(gx.shape)
        lines = ax.contour(gx, gy, sd, levels=5, colors="0.35", linewidths=0.7, linestyles="--")
        ax.clabel(lines, fmt="sd %.2g", fontsize=7)
    if y is not None:
        y = np.asarray(y)
        for label, marker in zip(classifier.classes_, ("o", "s"), strict=True):
            pick = y == label
            ax.scatter(X[pick, 0], X[pick, 1], s=14, marker=marker, edgecolors="k", linewidths=0.4, label=str(label))
        ax.legend(loc="best", fontsize=8)
    ax.set(xlim=(lo[0], hi[0]), ylim=(lo[1], hi[1]), xlabel="x1", ylabel="x2")
    return ax
