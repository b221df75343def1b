r"""Bayesian optimisation with hidden failures and with preferences (``relaxep reproduce constrained_bo``).

Needs BoTorch (``pip install botorch``), which relaxep does not: torch, BoTorch and GPyTorch are imported inside
the cells only (:mod:`relaxep.experiments.studies._bo_loops`, which names the problems and their sources), never
by ``import relaxep`` or the study registry.  Problems, every method on the same seeds:

* ``townsend``: BoTorch's community notebook on classifier-constrained BO (Townsend's function and feasible
  region), 6 Sobol points then 25 iterations, 20 seeds;
* ``hartmann``: ``ConstrainedHartmann`` (6-d, ``||x|| <= 1``) with the objective hidden where the constraint
  fails (only the label "failed" is seen), 14 Sobol points then 50 iterations, 20 seeds;
* ``preference``: qEUBO on the Hartmann-6 utility (Astudillo et al. 2023's protocol), 24 random pairs then 50
  queries, 10 seeds.

Contenders on the failure tasks, the objective model BoTorch's ``SingleTaskGP`` on the feasible observations for
all: ``ep`` (``relaxep.botorch.EPClassifierModel`` with its defaults), ``vgp`` (the notebook's variational GP
classifier), ``knn`` (BoTorch's soft k-NN classifier model, where the installed BoTorch has one), all three by
the analytic ``LogConstrainedExpectedImprovement`` (q = 1); ``impute_worst`` (a ``SingleTaskGP`` on every point,
failed ones given the worst feasible value seen, by ``LogExpectedImprovement``) and ``sobol`` (the seed's Sobol
sequence).  Until a point is feasible every method takes the seed's next Sobol point.
``optimize_acqf``: 8 restarts from 256 raw samples.  On preferences: ``ep_preference``
(``relaxep.botorch.EPPreferenceModel``) and ``pairwise_gp`` (BoTorch's ``PairwiseGP``, Laplace).  A method that
cannot run here (``relaxep.botorch`` not yet present, no k-NN model) is left out with a line saying why.

Each cell is one seed of one method on one problem, one torch and one BLAS thread.  ``--quick``: 2 seeds, 5
iterations.  Reported: the final regret (median and quartiles over seeds), the final best feasible value, the
failed evaluations among the iterations' points, and the seconds per iteration (model fits plus acquisition).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from relaxep.experiments.runner import Cell
from relaxep.experiments.study import Study, StudyContext, Tables
from relaxep.experiments.tables import md_table, write_csv

__all__ = ["METHODS", "PROBLEMS", "STUDY", "available", "figure", "run", "summarize", "trial"]

#: per problem: the full run's seeds and iterations
PROBLEMS: dict[str, dict[str, int]] = {
    "townsend": {"seeds": 20, "iterations": 25},
    "hartmann": {"seeds": 20, "iterations": 50},
    "preference": {"seeds": 10, "iterations": 50},
}
FAILURE_METHODS = ("ep", "vgp", "knn", "impute_worst", "sobol")
PREFERENCE_METHODS = ("ep_preference", "pairwise_gp")
METHODS: dict[str, tuple[str, ...]] = {"townsend": FAILURE_METHODS, "hartmann": FAILURE_METHODS,
                                       "preference": PREFERENCE_METHODS}  # fmt: skip
LABELS = {
    "ep": "EP classifier (relaxep EPClassifierModel)",
    "vgp": "variational GP classifier (notebook)",
    "knn": "soft k-NN classifier (BoTorch)",
    "impute_worst": "impute the worst value (SingleTaskGP, LogEI)",
    "sobol": "Sobol search",
    "ep_preference": "relaxep EPPreferenceModel + qEUBO",
    "pairwise_gp": "BoTorch PairwiseGP (Laplace) + qEUBO",
}
QUICK = {"seeds": 2, "iterations": 5}


def trial(problem: str, method: str, seed: int, iterations: int) -> dict[str, Any]:
    """One seed of ``method`` on ``problem`` (one torch and one BLAS thread for its duration)."""
    from threadpoolctl import threadpool_limits

    from relaxep.experiments.studies import _bo_loops

    undo = _bo_loops.pin_threads()
    try:
        with threadpool_limits(1):
            if problem == "preference":
                return _bo_loops.preference_trial(method, seed, iterations)
            return _bo_loops.failure_trial(problem, method, seed, iterations)
    finally:
        undo()


def available(methods: dict[str, tuple[str, ...]]) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """The methods that can run here, and a line for each left out (BoTorch missing: every one)."""
    try:
        from relaxep.experiments.studies._bo_loops import missing
    except ImportError as exc:
        return {p: () for p in methods}, [f"BoTorch is not installed ({exc}): pip install botorch"]
    keep, notes = {}, []
    for problem, names in methods.items():
        reasons = {m: missing(m) for m in names}
        keep[problem] = tuple(m for m in names if reasons[m] is None)
        notes += [f"{problem} / {m}: {r}" for m, r in reasons.items() if r is not None]
    return keep, notes


def run(context: StudyContext) -> Tables:
    """One cell per problem, method and seed (``QUICK`` seeds and iterations with ``--quick``)."""
    methods, notes = available(METHODS)
    cells = []
    for problem, spec in PROBLEMS.items():
        size = QUICK if context.quick else spec
        seeds, iterations = size["seeds"], size["iterations"]
        cells += [Cell(f"bo-{problem}-{m}-{s}", trial, dict(problem=problem, method=m, seed=s, iterations=iterations))
                  for m in methods[problem] for s in range(seeds)]  # fmt: skip
    rows = context.run_cells(cells, desc="constrained_bo") if cells else []
    return {"constrained_bo": rows, "constrained_bo_skipped": [{"note": n} for n in notes]}


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    q = np.nanpercentile(np.asarray(values, float), [50, 25, 75]) if values else [np.nan] * 3
    return float(q[0]), float(q[1]), float(q[2])


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per problem and method: final regret and best value (median, quartiles), failures, seconds per iteration."""
    out = []
    for problem in dict.fromkeys(r["problem"] for r in rows):
        for method in dict.fromkeys(r["method"] for r in rows if r["problem"] == problem):
            mine = [r for r in rows if r["problem"] == problem and r["method"] == method]
            regret = _quartiles([r["regret"][-1] for r in mine])
            seconds = [s for r in mine for s in r["seconds"]]
            best = [r["best"][-1] for r in mine] if "best" in mine[0] else []
            out.append({
                "problem": problem, "method": LABELS.get(method, method), "seeds": len(mine),
                "iterations": mine[0]["iterations"],
                "final_regret": f"{regret[0]:.4g} [{regret[1]:.3g}, {regret[2]:.3g}]",
                "regret_median": regret[0],
                "best_median": float(np.nanmedian(best)) if best and not np.all(np.isnan(best)) else np.nan,
                "failures_median": float(np.median([r["failures"] for r in mine])),
                "failures_mean": float(np.mean([r["failures"] for r in mine])),
                "s_per_iteration": float(np.median(seconds)) if seconds else np.nan,
                "s_per_seed": float(np.median([sum(r["seconds"]) for r in mine])),
                "errors": sum(len(r["errors"]) for r in mine),
            })  # fmt: skip
    return out


COLUMNS = ["problem", "method", "seeds", "iterations", "final_regret", "best_median", "failures_median",
           "failures_mean", "s_per_iteration", "s_per_seed", "errors"]  # fmt: skip


def figure(rows: list[dict[str, Any]], path: Path) -> Path:
    """Regret against iterations (median over seeds, the quartiles shaded), one panel per problem, log scale."""
    from relaxep.experiments.plotting import _figure, _save

    problems = list(dict.fromkeys(r["problem"] for r in rows))
    fig, axes = _figure(1, max(len(problems), 1), figsize=(4.6 * max(len(problems), 1), 3.6))
    for ax, problem in zip(np.atleast_1d(axes), problems, strict=False):
        for method in dict.fromkeys(r["method"] for r in rows if r["problem"] == problem):
            traces = np.array([r["regret"] for r in rows if r["problem"] == problem and r["method"] == method])
            mid, lo, hi = (np.percentile(traces, q, axis=0) for q in (50, 25, 75))
            steps = np.arange(traces.shape[1])
            ax.plot(steps, mid, label=LABELS.get(method, method))
            ax.fill_between(steps, lo, hi, alpha=0.2)
        ax.set(title=problem, xlabel="iteration", ylabel="regret" if problem != "preference" else "utility regret",
               yscale="log")  # fmt: skip
        ax.legend(fontsize=7)
    return _save(fig, path)


def section(summary: list[dict[str, Any]], notes: list[str]) -> str:
    """The Markdown table and the skipped methods' lines."""
    skipped = "".join(f"* {n}\n" for n in notes)
    return (
        "Final regret: median [quartiles] over seeds (preference: the utility regret of the queried item the model "
        "ranks first); `best_median`: the final best feasible value; `failures`: failed evaluations among the "
        "iterations' points; `s_per_iteration`: median seconds of one iteration (model fits plus acquisition), "
        "`s_per_seed`: the median seed's total.\n\n"
        + md_table(summary, COLUMNS)
        + "\n"
        + (f"\nLeft out:\n\n{skipped}" if skipped else "")
    )


def report(tables: Tables, out: Path) -> str:
    """``constrained_bo.csv``, ``figures/constrained_bo.png`` and the section."""
    rows = tables["constrained_bo"]
    notes = [r["note"] for r in tables.get("constrained_bo_skipped", [])]
    summary = summarize(rows)
    write_csv(summary, out / "constrained_bo.csv")
    text = "## Bayesian optimisation with hidden failures and preferences\n\n" + section(summary, notes)
    if rows:
        figure(rows, out / "figures" / "constrained_bo.png")
        text += "\n![regret](figures/constrained_bo.png)\n"
    return text


STUDY = Study(
    "constrained_bo", run, report, paper=False, title="Bayesian optimisation with hidden failures and preferences"
)
