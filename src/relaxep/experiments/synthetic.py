"""Paper Section 7.2: the synthetic label-noise study (Figures 2-4).

Protocol: ``n_repeats`` draws of 200 training points per class
(:func:`relaxep.datasets.make_synthetic`), a fraction ``rate`` of the training labels
flipped, ``eps = rate``; 39 600 clean test points; RBF kernel of unit amplitude plus
1e-6 jitter, its width chosen by 3-fold cross-validation on the training data
(:func:`~relaxep.experiments.methods.select_length_scale`, shared by all methods);
convergence when ``R < 1e-3`` (the paper's criterion), at most ``max_sweeps`` sweeps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import RBF

from relaxep.datasets import make_synthetic
from relaxep.experiments._runner import Cell, run_cells
from relaxep.experiments.methods import fit_and_score, paper_methods, select_length_scale
from relaxep.likelihoods import NoisyStep

__all__ = ["LENGTH_SCALES", "run_synthetic", "synthetic_data"]

LENGTH_SCALES = (0.2, 0.35, 0.5, 0.7, 1.0, 1.4)
JITTER = 1e-6
#: grid on which the decision boundary of the first 20%-noise repeat is stored (Figure 2)
BOUNDARY_GRID = np.linspace(-3.5, 3.5, 71)


def synthetic_data(repeat: int, rate: float, n_test: int, seed: int = 2014):
    """Training set (``rate`` flipped) and clean test set of one repeat, reproducibly seeded."""
    rng_train = np.random.default_rng([seed, repeat, round(1000 * rate), 0])
    rng_test = np.random.default_rng([seed, repeat, round(1000 * rate), 1])
    X, y, _ = make_synthetic(200, rate, random_state=rng_train)
    X_test, y_test, _ = make_synthetic(n_test // 2, 0.0, random_state=rng_test)
    return X, y, X_test, y_test


def _cv_cell(repeat: int, rate: float, grid: tuple[float, ...], max_sweeps: int) -> dict[str, Any]:
    X, y, _, _ = synthetic_data(repeat, rate, 2)
    best, scores = select_length_scale(X, y, NoisyStep(rate), grid, random_state=repeat, max_sweeps=max_sweeps)
    return {"repeat": repeat, "rate": rate, "length_scale": best, "cv_scores": scores}


def _fit_cell(
    repeat: int, rate: float, n_test: int, length_scale: float, spec: dict[str, Any], max_sweeps: int, boundary: bool
) -> dict[str, Any]:
    X, y, X_test, y_test = synthetic_data(repeat, rate, n_test)
    kernel = RBF(length_scale)
    K = kernel(X) + JITTER * np.eye(len(y))
    row, res = fit_and_score(
        K,
        y,
        kernel(X_test, X),
        np.full(len(y_test), 1.0 + JITTER),
        y_test,
        NoisyStep(rate),
        spec,
        max_sweeps=max_sweeps,
    )
    row.update(repeat=repeat, rate=rate, length_scale=length_scale, n_test=len(y_test))
    if boundary:
        gx, gy = np.meshgrid(BOUNDARY_GRID, BOUNDARY_GRID)
        G = np.column_stack([gx.ravel(), gy.ravel()])
        mean, _ = res.predict_latent(kernel(G, X), np.full(len(G), 1.0 + JITTER))
        row["boundary_latent"] = mean.tolist()
    return row


def run_synthetic(
    cache_dir: str | None = None,
    *,
    quick: bool = False,
    n_jobs: int = 1,
    scheduler: str | None = None,
    stats: dict[str, int] | None = None,
    rates: tuple[float, ...] = (0.1, 0.2),
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the synthetic study; returns (fit rows, cross-validation rows)."""
    n_repeats = 2 if quick else 10
    n_test = 2000 if quick else 39_600
    max_sweeps = 30 if quick else 100
    methods = paper_methods(c_values=(0.1, 1.0, 10.0), paper_c_values=(1.0, 10.0))
    sub = dict(cache_dir=cache_dir, n_jobs=n_jobs, scheduler=scheduler, stats=stats)
    cv_cells = [
        Cell(
            f"cv-r{r}-rate{rate}",
            _cv_cell,
            dict(repeat=r, rate=rate, grid=LENGTH_SCALES[1::2] if quick else LENGTH_SCALES, max_sweeps=max_sweeps),
        )
        for r in range(n_repeats)
        for rate in rates
    ]
    cv_rows = run_cells(cv_cells, desc="synthetic: kernel width by CV", **sub)
    widths = {(row["repeat"], row["rate"]): row["length_scale"] for row in cv_rows}
    fit_cells = [
        Cell(
            f"fit-r{r}-rate{rate}-{spec['label']}",
            _fit_cell,
            dict(
                repeat=r,
                rate=rate,
                n_test=n_test,
                length_scale=widths[(r, rate)],
                spec=spec,
                max_sweeps=max_sweeps,
                boundary=(r == 0 and rate == max(rates)),
            ),
        )
        for r in range(n_repeats)
        for rate in rates
        for spec in methods
    ]
    return run_cells(fit_cells, desc="synthetic: fits", **sub), cv_rows
