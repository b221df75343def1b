"""What the default estimator costs, beside scikit-learn's classifier in the same run.

The issue's problem: a 2-D two-class mixture (class +1 ~ N(0, 0.8^2 I), class -1 ~ N((2.5, -1),
0.8^2 I)), n training points with 0, 10 or 20 % of the labels flipped, 10 000 fresh test points
with clean labels.  Every contender runs with one BLAS thread.  Rows:

* ``relaxep default, fixed kernel``: ``GPClassifier(optimizer=None)`` (kernel 1.0 * RBF(1.0) kept as given);
* ``sklearn, fixed kernel``: ``GaussianProcessClassifier(ConstantKernel(1, "fixed") * RBF(1, "fixed"),
  optimizer=None)``;
* ``relaxep default``: ``GPClassifier()`` (hyperparameters learned by the EP evidence);
* ``sklearn, learned kernel``: ``GaussianProcessClassifier(ConstantKernel(1.0) * RBF(1.0))`` (its Laplace evidence);
* ``sklearn default``: ``GaussianProcessClassifier()``, whose default kernel is fixed (it learns nothing);
* ``noise-free step, auto``: ``GPClassifier(likelihood=NoisyStep(0.1), optimizer=None)`` (``rule="auto"``),
  the paper's likelihood on the fixed kernel, where EP oscillates.

Usage: ``python benchmarks/defaults.py [--sizes 500 1000 2000 5000] [--flips 0 0.1 0.2]
[--learned-up-to 2000] [--step-up-to 2000] [--repeats 3] [--out benchmarks/results/defaults.md]``.
Times are medians over ``--repeats`` runs (one run at n >= 2000).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from threadpoolctl import threadpool_limits

from relaxep import GPClassifier, NoisyStep


def mixture(n: int, flip: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.r_[rng.normal(0, 0.8, (n // 2, 2)), rng.normal((2.5, -1), 0.8, (n - n // 2, 2))]
    y = np.r_[np.ones(n // 2), -np.ones(n - n // 2)]
    y[rng.random(n) < flip] *= -1
    return X, y


def timed(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def error(predicted: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(predicted != truth))


def run(n: int, flip: float, repeats: int, learned: bool, step: bool) -> list[dict]:
    X, y = mixture(n, flip, seed=0)
    X_test, y_test = mixture(10_000, 0.0, seed=12345)
    rows = []

    def add(name, seconds, model=None, status="", sweeps="", err=np.nan):
        rows.append(dict(n=n, flip=flip, contender=name, seconds=seconds, status=status, sweeps=sweeps, error=err))

    fixed = ConstantKernel(1.0, "fixed") * RBF(1.0, "fixed")
    t, sk = timed(lambda: GaussianProcessClassifier(kernel=fixed, optimizer=None).fit(X, y), repeats)
    add("sklearn, fixed kernel", t, err=error(sk.predict(X_test), y_test))
    t, ours = timed(lambda: GPClassifier(optimizer=None).fit(X, y), repeats)
    res = ours.result_
    stages = " + ".join(f"{type(a.method).__name__} {a.n_sweeps}" for a in res.attempts) or str(res.n_sweeps)
    add("relaxep default, fixed kernel", t, status=res.status, sweeps=stages, err=error(ours.predict(X_test), y_test))
    if learned:
        t, sk = timed(lambda: GaussianProcessClassifier(kernel=ConstantKernel(1.0) * RBF(1.0)).fit(X, y), repeats)
        add("sklearn, learned kernel", t, err=error(sk.predict(X_test), y_test))
        t, sk = timed(lambda: GaussianProcessClassifier().fit(X, y), repeats)
        add("sklearn default (fixed kernel)", t, err=error(sk.predict(X_test), y_test))
        t, ours = timed(lambda: GPClassifier().fit(X, y), repeats)
        res = ours.result_
        add("relaxep default", t, status=res.status, sweeps=str(res.n_sweeps), err=error(ours.predict(X_test), y_test))
    if step:
        t, ours = timed(lambda: GPClassifier(likelihood=NoisyStep(0.1), optimizer=None).fit(X, y), 1)
        res = ours.result_
        stages = " + ".join(f"{type(a.method).__name__} {a.status} {a.n_sweeps}" for a in res.attempts)
        add("noise-free step, auto", t, status=res.status, sweeps=stages, err=error(ours.predict(X_test), y_test))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 5000])
    parser.add_argument("--flips", type=float, nargs="+", default=[0.0, 0.1, 0.2])
    parser.add_argument("--learned-up-to", type=int, default=2000)
    parser.add_argument("--step-up-to", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    lines = [
        "| n | flipped | contender | time [s] | x sklearn (same kernel setting) | status | sweeps | test error [%] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    print(lines[0], lines[1], sep="\n", flush=True)
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        for n in args.sizes:
            for flip in args.flips:
                repeats = args.repeats if n < 2000 else 1
                rows = run(n, flip, repeats, n <= args.learned_up_to, n <= args.step_up_to)
                base = {r["contender"]: r["seconds"] for r in rows}
                for r in rows:
                    ref = (
                        base["sklearn, learned kernel"]
                        if r["contender"] == "relaxep default"
                        else base["sklearn, fixed kernel"]
                    )
                    line = (
                        f"| {n} | {r['flip']:.0%} | {r['contender']} | {r['seconds']:.2f} | {r['seconds'] / ref:.2f} | "
                        f"{r['status']} | {r['sweeps']} | {100 * r['error']:.2f} |"
                    )
                    lines.append(line)
                    print(line, flush=True)
    if args.out:
        Path(args.out).write_text(
            "# The default estimator against scikit-learn (`python benchmarks/defaults.py`)\n\n"
            "One BLAS thread for every contender; 2-core machine shared with other work, so compare ratios "
            "within a row group.  The x-sklearn column divides by scikit-learn's fixed-kernel fit, or, for "
            "`relaxep default` (hyperparameters learned), by scikit-learn's learned-kernel fit.\n\n"
            + "\n".join(lines)
            + "\n"
        )


if __name__ == "__main__":
    main()
