"""Paper Section 7.2: the synthetic label-noise study (Figures 2-4).

Protocol: ``n_repeats`` draws of 200 training points per class
(:func:`relaxep.datasets.synthetic_data`), a fraction ``rate`` of the training labels
flipped, ``eps = rate``; 39 600 clean test points; RBF kernel of unit amplitude plus
1e-6 jitter, its width chosen by 3-fold cross-validation on the training data
(:func:`~relaxep.experiments.methods.select_length_scale`, shared by all methods);
convergence when ``R < 1e-3`` (the paper's criterion), at most ``max_sweeps`` sweeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from relaxep.datasets import synthetic_data
from relaxep.experiments import plotting
from relaxep.experiments.claims import PEP, PRIMARY
from relaxep.experiments.methods import fit_rbf_cell, paper_methods, select_length_scale
from relaxep.experiments.study import Study, StudyContext, Tables, run_cv_then_fit
from relaxep.experiments.tables import error_cell, md_table, summarize, write_csv
from relaxep.likelihoods import NoisyStep

__all__ = ["BOUNDARY_GRID", "LENGTH_SCALES", "STUDY"]

LENGTH_SCALES = (0.2, 0.35, 0.5, 0.7, 1.0, 1.4)
#: grid on which the decision boundary of the first 20%-noise repeat is stored (Figure 2)
BOUNDARY_GRID = np.linspace(-3.5, 3.5, 71)


def _cv_cell(repeat: int, rate: float, grid: tuple[float, ...], max_sweeps: int) -> dict[str, Any]:
    X, y, _, _ = synthetic_data(repeat, rate, 2)
    best, scores = select_length_scale(X, y, NoisyStep(rate), grid, random_state=repeat, max_sweeps=max_sweeps)
    return {"repeat": repeat, "rate": rate, "length_scale": best, "cv_scores": scores}


def _fit_cell(
    repeat: int, rate: float, n_test: int, length_scale: float, spec: dict[str, Any], max_sweeps: int, boundary: bool
) -> dict[str, Any]:
    data = synthetic_data(repeat, rate, n_test)
    grid = BOUNDARY_GRID if boundary else None
    row, _ = fit_rbf_cell(data, length_scale, NoisyStep(rate), spec, max_sweeps, grid)
    row.update(repeat=repeat, rate=rate, length_scale=length_scale, n_test=len(data[3]))
    return row


def run(context: StudyContext, rates: tuple[float, ...] = (0.1, 0.2)) -> Tables:
    """Fit rows, their summary and the cross-validation rows."""
    quick = context.quick
    n_repeats = 2 if quick else 10
    max_sweeps = 30 if quick else 100
    grid = LENGTH_SCALES[1::2] if quick else LENGTH_SCALES
    problems = [
        dict(repeat=r, rate=rate, n_test=2000 if quick else 39_600, boundary=(r == 0 and rate == max(rates)))
        for r in range(n_repeats)
        for rate in rates
    ]
    rows, cv = run_cv_then_fit(
        context,
        "synthetic",
        problems,
        lambda p: dict(repeat=p["repeat"], rate=p["rate"], grid=grid, max_sweeps=max_sweeps),
        _cv_cell,
        _fit_cell,
        paper_methods(c_values=(0.1, 1.0, 10.0), paper_c_values=(1.0, 10.0)),
        max_sweeps,
    )
    summary = summarize(rows, ("rate", "method"), "repeat", reference=PRIMARY["synthetic"])
    return {"synthetic": rows, "synthetic_summary": summary, "synthetic_cv": cv}


def report(tables: Tables, out: Path) -> str:
    """The three CSVs, Figures 2-4 and the section."""
    rows, summary, cv = tables["synthetic"], tables["synthetic_summary"], tables["synthetic_cv"]
    for name in ("synthetic", "synthetic_summary", "synthetic_cv"):
        write_csv(tables[name], out / f"{name}.csv")
    figs = out / "figures"
    rate = max(r["rate"] for r in rows)
    X, y, _, _ = synthetic_data(0, rate, 2)
    shown = ["EP", PEP, PRIMARY["synthetic"], "EP damped 0.5"]
    plotting.plot_synthetic_boundaries(rows, X, y, BOUNDARY_GRID, shown, figs / "synthetic_boundaries.png")
    plotting.plot_synthetic_traces(rows, shown, figs / "synthetic_R.png")
    plotting.plot_synthetic_summary(summary, figs / "synthetic_summary.png")
    shown_summary = [dict(r, **{"test error [%]": error_cell(r)}) for r in summary]
    pcol = "p_vs_" + PRIMARY["synthetic"].replace(" ", "_")
    n_rep = max(r["repeat"] for r in rows) + 1
    columns = ["rate", "method", "n_converged", "n_max_sweeps", "n_diverged", "mean_sweeps", "median_time_s"]
    return (
        f"## Synthetic (Section 7.2, Figures 2-4)\n\n{n_rep} repeats per flip rate, 400 training points, "
        f"{rows[0]['n_test']} clean test points, eps = flip rate, RBF width by 3-fold CV "
        f"(chosen widths: {sorted({round(c['length_scale'], 3) for c in cv})}). Converged: R < 1e-3 with no "
        "skipped site.\n\n"
        + md_table(shown_summary, [*columns, "test error [%]", pcol])
        + "\n\n![boundaries](figures/synthetic_boundaries.png)\n![R](figures/synthetic_R.png)\n"
        "![summary](figures/synthetic_summary.png)\n"
    )


STUDY = Study("synthetic", run, report, title="reproduction of Qi & Guo, relaxed EP")
