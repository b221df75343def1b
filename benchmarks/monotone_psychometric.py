"""A monotone psychometric function: relaxep's monotone EP beside aepsych's monotone model, in the same run.

The task (``relaxep.experiments.studies.monotone``'s): a yes/no experiment, intensity ``x ~ U(0, 1)``,
``P(yes) = lapse/2 + (1 - lapse) Phi((x - 0.5)/0.1)``, lapse 0.05, 100 trials a run, 10 runs (seeds 0-9).
Reported per model, over the runs: the mean absolute error of the estimated ``P(yes)`` on 101 intensities, the runs
whose posterior latent mean falls somewhere on that grid (and its falling steps in all), the largest fall of
``P(yes)`` between neighbours, the fit and predict times.

Rows:

``relaxep GPClassifier()`` and ``relaxep GPClassifier(monotone={0: 1})``
    the defaults (``1 * RBF(1)`` learned, the label-noise probit), without and with virtual derivative signs.
``aepsych GPClassificationModel`` and ``aepsych MonotonicProjectionGP``
    aepsych's variational classifier and its monotone model (a rolling-max projection of the posterior's
    quantiles on a grid; the rejection-sampling model of earlier aepsych releases is gone from 0.8), with their
    defaults, from ``--peer-python`` (an environment where aepsych installs: it pins its own botorch and numpy).

Each side runs in its own process with ``OMP_NUM_THREADS`` (and torch's threads) pinned to ``--threads``.

Usage::

    python -m venv --system-site-packages .aepsych && .aepsych/bin/pip install aepsych
    python benchmarks/monotone_psychometric.py --peer-python .aepsych/bin/python \
        > benchmarks/results/monotone_psychometric.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from scipy.special import ndtr

LAPSE, THRESHOLD, SLOPE = 0.05, 0.5, 0.1


def data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """As :func:`relaxep.experiments.studies.monotone.psychometric_data` (written out: the peer has no relaxep)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, n)
    p = 0.5 * LAPSE + (1.0 - LAPSE) * ndtr((x - THRESHOLD) / SLOPE)
    grid = np.linspace(0.0, 1.0, 101)
    truth = 0.5 * LAPSE + (1.0 - LAPSE) * ndtr((grid - THRESHOLD) / SLOPE)
    return x[:, None], (rng.uniform(size=n) < p).astype(int), grid[:, None], truth


def _row(name: str, p: np.ndarray, latent: np.ndarray, truth: np.ndarray, fit_s: float, predict_s: float) -> dict:
    falls = int(np.sum(np.diff(latent) < 0.0))
    return {"model": name, "error": float(np.mean(np.abs(p - truth))), "falls": falls, "fit_s": fit_s,
            "predict_s": predict_s, "p_fall": float(max(0.0, -np.min(np.diff(p))))}  # fmt: skip


def relaxep_side(seeds: list[int]) -> list[dict]:
    import warnings

    from relaxep import GPClassifier

    warnings.simplefilter("ignore")
    rows = []
    for seed in seeds:
        X, y, grid, truth = data(100, seed)
        for name, monotone in (("relaxep GPClassifier()", None), ("relaxep GPClassifier(monotone={0: 1})", {0: 1})):
            start = time.perf_counter()
            model = GPClassifier(monotone=monotone, random_state=seed).fit(X, y)
            fit = time.perf_counter() - start
            start = time.perf_counter()
            p = model.predict_proba(grid)[:, 1]
            predict = time.perf_counter() - start
            rows.append(_row(name, p, model.model_.predict_latent(grid)[0], truth, fit, predict))
    return rows


def aepsych_side(seeds: list[int], threads: int) -> list[dict]:
    import warnings

    import torch
    from aepsych.models import GPClassificationModel, MonotonicProjectionGP

    warnings.simplefilter("ignore")
    torch.set_num_threads(threads)
    rows = []
    for seed in seeds:
        X, y, grid, truth = data(100, seed)
        for cls in (GPClassificationModel, MonotonicProjectionGP):
            options: dict = {"dim": 1}
            if cls is MonotonicProjectionGP:
                options.update(lb=torch.tensor([0.0]), ub=torch.tensor([1.0]), monotonic_dims=[0])
            torch.manual_seed(seed)
            start = time.perf_counter()
            model = cls(**options)
            model.fit(torch.tensor(X, dtype=torch.float64), torch.tensor(y, dtype=torch.float64))
            fit = time.perf_counter() - start
            start = time.perf_counter()
            p, _ = model.predict(torch.tensor(grid, dtype=torch.float64), probability_space=True)
            predict = time.perf_counter() - start
            latent, _ = model.predict(torch.tensor(grid, dtype=torch.float64), probability_space=False)
            rows.append(_row(f"aepsych {cls.__name__}", p.detach().numpy().ravel(), latent.detach().numpy().ravel(),
                             truth, fit, predict))  # fmt: skip
    return rows


def _spawn(python: str, side: str, seeds: list[int], threads: int) -> list[dict]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    args = [python, __file__, "--side", side, "--seeds", *map(str, seeds), "--threads", str(threads)]
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        print(f"<!-- {side} failed: {out.stderr.strip().splitlines()[-1:]} -->")
        return []
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--peer-python", default=None, help="a Python with aepsych (omitted: relaxep alone)")
    parser.add_argument("--side", choices=["relaxep", "aepsych"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side == "relaxep":
        print(json.dumps(relaxep_side(args.seeds)))
        return
    if args.side == "aepsych":
        print(json.dumps(aepsych_side(args.seeds, args.threads)))
        return
    rows = _spawn(sys.executable, "relaxep", args.seeds, args.threads)
    if args.peer_python:
        rows += _spawn(args.peer_python, "aepsych", args.seeds, args.threads)
    print(f"# A monotone psychometric function (benchmarks/monotone_psychometric.py, {time.strftime('%Y-%m-%d')})\n")
    print(f"{len(args.seeds)} runs of 100 trials; threads pinned to {args.threads}; error: mean |P(yes) - truth| on "
          "101 intensities.\n")  # fmt: skip
    print("| model | error (mean) | error (sd) | runs whose mean falls | falling steps | largest fall of P(yes) | "
          "fit [s] (median) | predict [s] |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == name]
        errors = [r["error"] for r in mine]
        print(
            f"| {name} | {np.mean(errors):.4f} | {np.std(errors):.4f} | {sum(r['falls'] > 0 for r in mine)}/"
            f"{len(mine)} | {sum(r['falls'] for r in mine)} | {max(r['p_fall'] for r in mine):.1e} | "
            f"{np.median([r['fit_s'] for r in mine]):.2f} | "
            f"{np.median([r['predict_s'] for r in mine]):.3f} |"
        )


if __name__ == "__main__":
    main()
