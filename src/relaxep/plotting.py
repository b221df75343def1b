"""Figures of a fitted estimator: a classifier's decision boundary with predictive uncertainty (2-D inputs), and
the design over the hyperparameters that an integrated fit (``integrate="ccd"`` or ``"grid"``) averaged over.

Serves the documentation's gallery and users.  matplotlib (the ``studies`` extra, ``pip install
"relaxep[studies]"``) is imported on first use, and only where no ``ax`` is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from relaxep._typing import Array

__all__ = ["plot_decision_boundary", "plot_hyper_samples"]


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


def _two_dims(dims: Any, names: tuple[str, ...]) -> tuple[int, int]:
    """``dims``: two distinct entries of the design, by index or by name (``ValueError`` naming it)."""
    try:
        pair = [names.index(d) if isinstance(d, str) else int(d) for d in dims]
    except (TypeError, ValueError):
        raise ValueError(f"dims must be two indices or names among {names}, got {dims!r}") from None
    if len(pair) != 2 or pair[0] == pair[1] or not all(0 <= d < len(names) for d in pair):
        raise ValueError(
            f"dims must be two distinct indices (0 to {len(names) - 1}) or names among {names}, got {dims!r}"
        )
    return pair[0], pair[1]


def mass_levels(density: Array, masses: Sequence[float]) -> Array:
    r"""The density values :math:`t_m` whose superlevel sets :math:`\{g: p_g \ge t_m\}` hold the mass ``m`` of the
    equal-cell grid density ``density`` (normalised here): the highest-density regions' boundaries.  For a 2-D
    Gaussian the region of mass :math:`1 - e^{-r^2/2}` is the ellipse of Mahalanobis radius :math:`r`
    (0.393, 0.865, 0.989 for r = 1, 2, 3)."""
    values = np.sort(np.asarray(density, dtype=float).ravel())[::-1]
    cumulative = np.cumsum(values) / np.sum(values)
    return np.array([values[min(int(np.searchsorted(cumulative, m)), values.size - 1)] for m in masses])


def plot_hyper_samples(
    estimator: Any,
    dims: Sequence[int | str] = (0, 1),
    *,
    reference: Any = None,
    covariance: ArrayLike | None = None,
    n_sd: Sequence[float] = (1.0, 2.0),
    ax: Any = None,
    color: str = "C3",
    max_size: float = 250.0,
) -> Any:
    r"""The design points of an integrated fit in two log-hyperparameters, over its Gaussian and a reference.

    Draws the points :math:`\theta_k` of ``hyper_samples_`` (``integrate="ccd"`` or ``"grid"``; Rue, Martino &
    Chopin 2009, section 6.5) in the coordinates ``dims``, each marker's area proportional to its weight
    :math:`w_k` (the largest ``max_size`` points squared), the MAP (the first point) as a cross; the ellipses
    :math:`\{\theta: (\theta - m)^T \Sigma^{-1} (\theta - m) = r^2\}` for :math:`r` in ``n_sd``, with :math:`\Sigma`
    ``covariance`` centred at the MAP (the Laplace approximation's :math:`(-H)^{-1}`, e.g.
    :attr:`~relaxep.hyper.design.ThetaDesign.covariance`) or, by default, the design's own weighted moments
    :math:`m = \sum_k w_k \theta_k`, :math:`\Sigma = \sum_k w_k (\theta_k - m)(\theta_k - m)^T`; and, given a
    brute-force ``reference`` (:func:`~relaxep.hyper.reference.grid_reference` over all the entries), grey
    contours of its marginal density in ``dims`` enclosing the masses :math:`1 - e^{-r^2/2}` (:func:`mass_levels`),
    those of a Gaussian's ellipses of the same :math:`r`: where the posterior is Gaussian they coincide.

    Parameters
    ----------
    estimator : fitted estimator with ``hyper_samples_``, or its :class:`~relaxep.estimators._mixture.HyperSamples`
    dims : two ints or names, default (0, 1)
        The entries of ``hyper_samples_.names`` on the x and y axes.
    reference : GridReference, optional
        Its ``axes`` one per entry of the design, in their order.
    covariance : array_like of shape (n_theta, n_theta) or (2, 2), optional
        The Gaussian's covariance (of all entries, or of ``dims``); default the design's weighted covariance.
    n_sd : sequence of float
        The ellipses' Mahalanobis radii (and the reference's masses).
    ax : matplotlib Axes, optional
        Drawn into; a new figure's axes by default.
    color : str
    max_size : float
        The largest weight's marker area (points squared).

    Returns
    -------
    matplotlib Axes
    """
    samples = getattr(estimator, "hyper_samples_", estimator)
    if not all(hasattr(samples, a) for a in ("points", "weights", "names")):
        raise ValueError(
            f"estimator has no hyper_samples_ ({type(estimator).__name__}): fit it with integrate='ccd' or 'grid'"
        )
    points, weights, names = np.asarray(samples.points, dtype=float), np.asarray(samples.weights), samples.names
    i, j = _two_dims(dims, tuple(names))
    radii = np.asarray(n_sd, dtype=float).ravel()
    if not np.all(radii > 0):
        raise ValueError(f"n_sd must be positive radii, got {n_sd!r}")
    xy = points[:, [i, j]]
    if covariance is None:
        centre = weights @ xy
        cov = ((weights[:, None] * (xy - centre)).T @ (xy - centre)) if len(weights) > 1 else None
    else:
        full = np.asarray(covariance, dtype=float)
        d = points.shape[1]
        if full.shape not in ((d, d), (2, 2)):
            raise ValueError(f"covariance must have shape ({d}, {d}) or (2, 2), got {full.shape}")
        centre, cov = xy[0], full[np.ix_([i, j], [i, j])] if full.shape == (d, d) else full
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(5.0, 4.2))
    if reference is not None:
        _reference_contours(ax, reference, i, j, radii, points.shape[1])
    if cov is not None:
        _ellipses(ax, centre, cov, radii, color)
    ax.scatter(xy[:, 0], xy[:, 1], s=max_size * weights / weights.max(), color=color, alpha=0.7,
               edgecolors="k", linewidths=0.5, label="design points (area ~ weight)", zorder=3)  # fmt: skip
    ax.plot(xy[0, 0], xy[0, 1], "x", color="k", markersize=9, mew=2, label="MAP", zorder=4)
    ax.set(xlabel=f"log {names[i]}", ylabel=f"log {names[j]}")
    ax.legend(loc="best", fontsize=7)
    return ax


def _ellipses(ax: Any, centre: Array, cov: Array, radii: Array, color: str) -> None:
    """Each ellipse :math:`centre + r L (\\cos t, \\sin t)`, :math:`L L^T` = ``cov``, as a line."""
    vals, vecs = np.linalg.eigh((cov + cov.T) / 2)
    root = vecs * np.sqrt(np.maximum(vals, 0.0))
    t = np.linspace(0.0, 2.0 * np.pi, 181)
    circle = np.stack([np.cos(t), np.sin(t)])
    for k, r in enumerate(radii):
        curve = centre[:, None] + r * root @ circle
        label = f"Gaussian, {', '.join(f'{v:g}' for v in radii)} sd" if k == 0 else None
        ax.plot(curve[0], curve[1], color=color, lw=1.0, ls="--", label=label, zorder=2)


def _reference_contours(ax: Any, reference: Any, i: int, j: int, radii: Array, d: int) -> None:
    """The reference's marginal density in entries (i, j) and its contours of mass 1 - exp(-r^2/2)."""
    axes = getattr(reference, "axes", None)
    if axes is None or len(axes) != d:
        raise ValueError(f"reference must be a grid_reference over the design's {d} entries, got {type(reference)}")
    counts = tuple(len(a) for a in axes)
    cube = np.asarray(reference.weights, dtype=float).reshape(counts)
    marginal = cube.sum(axis=tuple(k for k in range(d) if k not in (i, j)))  # axes (min(i,j), max(i,j))
    density = marginal.T if i < j else marginal  # rows along y (entry j), columns along x (entry i)
    levels = np.unique(mass_levels(density, 1.0 - np.exp(-0.5 * np.sort(radii)[::-1] ** 2)))
    ax.contourf(axes[i], axes[j], density, levels=[*levels, density.max() * (1 + 1e-9)], cmap="Greys", alpha=0.45,
                zorder=0)  # fmt: skip
    ax.contour(axes[i], axes[j], density, levels=levels, colors="0.3", linewidths=0.8, zorder=1)
    ax.plot([], [], color="0.3", lw=0.8, label="reference, same masses")
