"""Bayesian optimisation with hidden failures and with preferences: relaxep's EP models inside BoTorch (issue 63).

``python benchmarks/constrained_bo.py [--problems townsend hartmann preference] [--methods ...] [--seeds N]
[--seed-from S] [--iterations N] [--quick] [--rows FILE.jsonl] [--from-rows FILE.jsonl ...] [--out FILE.md]
[--figure FILE.png]`` (by default ``benchmarks/results/constrained_bo.*``)

A full run is hours on 2 cores, so it can go in pieces: ``--seed-from S`` runs seeds ``S .. S + N - 1``,
``--rows`` appends every (problem, method, seed) row to a JSON-lines file as it ends, and ``--from-rows`` runs
nothing and writes the table and figure of the rows saved in one or more such files (a row seen twice counts
once: the last one read; a seed that not every method of its problem has finished is left out).

The problems, contenders and settings are those of ``relaxep reproduce constrained_bo``
(:mod:`relaxep.experiments.studies.constrained_bo`; the problems' definitions and sources in
:mod:`relaxep.experiments.studies._bo_loops`): the community notebook's Townsend problem (6 Sobol points, 25
iterations, 20 seeds), ``ConstrainedHartmann`` with the objective hidden where it fails (14 Sobol points, 50
iterations, 20 seeds) and qEUBO on a Hartmann-6 utility (24 random pairs, 50 queries, 10 seeds).  Failure tasks:
the EP classifier (``relaxep.botorch.EPClassifierModel``), the notebook's variational GP classifier, BoTorch's
soft k-NN classifier where it exists, each by ``LogConstrainedExpectedImprovement``, "impute the worst value"
(``SingleTaskGP``, ``LogExpectedImprovement``) and Sobol search; preferences: ``relaxep.botorch.EPPreferenceModel``
beside ``PairwiseGP``.  A method that cannot run (``relaxep.botorch`` not yet merged, no k-NN model in this
BoTorch) is left out with a line saying why.  Every method runs on the same seeds in one run, one torch and one
BLAS thread (threadpoolctl).

Printed: a line per seed, then per problem and method the final regret (median [quartiles] over seeds), the final
best feasible value, the failed evaluations, the seconds per iteration (model fits plus acquisition), and an
estimate of the full run's time from this run's timings and one iteration of each method timed at the size of
a full run's last (``--no-probe`` skips it); ``--out`` gets the table, ``--figure`` the regret against
iterations (median and quartiles).  The full run is hours on 2 cores: ``--seeds 1 --iterations 3`` is a smoke test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from relaxep.experiments.studies.constrained_bo import (
    METHODS,
    PROBLEMS,
    QUICK,
    available,
    figure,
    section,
    summarize,
    trial,
)

#: the timed method whose cost stands in for one that could not run, in the estimate
STAND_IN = {"ep": "vgp", "ep_preference": "pairwise_gp"}


def estimate(rows: list[dict], methods: dict[str, tuple[str, ...]], last: dict[tuple[str, str], float]) -> list[str]:
    """Lines: the full run's time per problem and method: seeds x iterations x the mean of this run's median
    seconds per iteration and ``last[problem, method]``, one iteration timed at the size of a full run's last."""
    lines, total = [], 0.0
    for problem, names in methods.items():
        spec = PROBLEMS[problem]
        for method in names:
            source = method if (problem, method) in last else STAND_IN.get(method)
            if (problem, source) not in last:
                continue
            timed = [s for r in rows if r["problem"] == problem and r["method"] == source for s in r["seconds"]]
            first, end = float(np.median(timed)), last[problem, source]
            seconds = 0.5 * (first + end) * spec["iterations"] * spec["seeds"]
            total += seconds
            note = "" if source == method else f" (not run here: assumed as costly as {source})"
            lines.append(
                f"  {problem} / {method}: {spec['seeds']} seeds x {spec['iterations']} iterations x "
                f"({first:.2f} s here + {end:.2f} s at the last size) / 2 = {seconds / 60:.1f} min{note}"
            )
    if not lines:  # (--no-probe: nothing timed at a full run's last size)
        return ["  (not estimated: no iteration was timed at a full run's last size; run without --no-probe)"]
    lines.append(f"  total: {total / 3600:.2f} h on one core")
    return lines


def run_all(args: argparse.Namespace, methods: dict[str, tuple[str, ...]], rows: list[dict]) -> None:
    """Every problem's seeds, each seed's methods in turn (the same seeds for all), a line per seed and method."""
    for problem in args.problems:
        seeds = args.seeds or (QUICK["seeds"] if args.quick else PROBLEMS[problem]["seeds"])
        iterations = args.iterations or (QUICK["iterations"] if args.quick else PROBLEMS[problem]["iterations"])
        for seed in range(args.seed_from, args.seed_from + seeds):
            for method in methods[problem]:
                row = trial(problem, method, seed, iterations)
                rows.append(row)
                if args.rows:
                    with Path(args.rows).open("a") as handle:
                        handle.write(json.dumps(row) + "\n")
                print(f"{problem} seed {seed} {method}: regret {row['regret'][0]:.4g} -> {row['regret'][-1]:.4g}, "
                      f"{row['failures']} failed, {np.median(row['seconds']):.2f} s/iteration "
                      f"({sum(row['seconds']):.1f} s){'; errors: ' + str(row['errors']) if row['errors'] else ''}",
                      flush=True)  # fmt: skip


def load_rows(paths: list[str]) -> list[dict]:
    """The rows saved by ``--rows`` in these files, one per (problem, method, seed, iterations): the last read."""
    kept: dict[tuple, dict] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                kept[row["problem"], row["method"], row["seed"], row["iterations"]] = row
    return sorted(kept.values(), key=lambda r: (r["problem"], r["seed"]))


def report_saved(args: argparse.Namespace) -> None:
    """Write the table (and figure) of rows saved by earlier runs, with the files and seeds they hold."""
    rows = load_rows(args.from_rows)
    methods: dict[str, set[str]] = {}
    for r in rows:
        methods.setdefault(r["problem"], set()).add(r["method"])
    have: dict[tuple[str, int], set[str]] = {}
    for r in rows:
        have.setdefault((r["problem"], r["seed"]), set()).add(r["method"])
    # (the same seeds for every method: a seed that not every method has finished is left out)
    rows = [r for r in rows if have[r["problem"], r["seed"]] == methods[r["problem"]]]
    if not rows:
        raise SystemExit(f"--from-rows: no rows in {args.from_rows}")
    order = {p: i for i, p in enumerate(PROBLEMS)}
    rows.sort(key=lambda r: (order.get(r["problem"], 99), r["seed"]))
    seeds = {}
    for r in rows:
        seeds.setdefault((r["problem"], r["method"]), []).append(r["seed"])
    held = "".join(f"* {p} / {m}: seeds {min(s)}-{max(s)} ({len(s)})\n" for (p, m), s in seeds.items())
    text = (f"Bayesian optimisation with hidden failures and preferences: the rows saved in "
            f"{', '.join(args.from_rows)}.\n\n{held}\n" + section(summarize(rows), [])
            + f"\nCommand: `python benchmarks/constrained_bo.py {' '.join(sys.argv[1:])}`\n")  # fmt: skip
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.figure:
        figure(rows, Path(args.figure))
        print(f"figure: {args.figure}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", nargs="+", choices=list(PROBLEMS), default=list(PROBLEMS))
    every = sorted({m for names in METHODS.values() for m in names})
    parser.add_argument("--methods", nargs="+", choices=every, default=every, help="(each on its problems)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per problem (default: the study's)")
    parser.add_argument("--seed-from", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--iterations", type=int, default=None, help="iterations per seed (default: the study's)")
    parser.add_argument("--rows", default=None, help="append each row to this JSON-lines file as it ends")
    parser.add_argument("--from-rows", nargs="+", default=None, help="run nothing: the table of these saved rows")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK['seeds']} seeds, {QUICK['iterations']} "
                        "iterations")  # fmt: skip
    parser.add_argument("--out", default="benchmarks/results/constrained_bo.md", help="the markdown table")
    parser.add_argument("--figure", default="benchmarks/results/constrained_bo.png", help="the regret figure")
    parser.add_argument("--no-probe", dest="probe", action="store_false",
                        help="skip timing one iteration at a full run's last size (for the estimate)")  # fmt: skip
    args = parser.parse_args()
    if args.from_rows:
        return report_saved(args)
    import botorch
    import torch

    torch.set_num_threads(1)
    wanted = {p: tuple(m for m in METHODS[p] if m in args.methods) for p in args.problems}
    methods, notes = available(wanted)
    for note in notes:
        print(f"left out: {note}", flush=True)
    rows, start = [], time.perf_counter()
    with threadpool_limits(1):
        run_all(args, methods, rows)
    wall = time.perf_counter() - start
    summary = summarize(rows)
    command = "python benchmarks/constrained_bo.py " + " ".join(sys.argv[1:])
    head = (f"Bayesian optimisation with hidden failures and preferences (BoTorch {botorch.__version__}, torch "
            f"{torch.__version__}, one torch and one BLAS thread); {wall:.0f} s in all.\n\n")  # fmt: skip
    text = head + section(summary, notes) + f"\nCommand: `{command}`\n"
    print("\n" + text)
    last = {}
    if args.probe:
        with threadpool_limits(1):
            from relaxep.experiments.studies._bo_loops import probe

            last = {(p, m): probe(p, m, PROBLEMS[p]["iterations"]) for p, names in methods.items() for m in names}
    lines = ["Full run (the study's seeds and iterations) from these timings:", *estimate(rows, wanted, last)]
    print("\n".join(lines))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n" + "\n".join(lines) + "\n")
    if args.figure and rows:
        figure(rows, Path(args.figure))
        print(f"figure: {args.figure}")


if __name__ == "__main__":
    main()
