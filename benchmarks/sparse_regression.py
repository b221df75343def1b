"""Sparse GP regression with Gaussian noise (issue 43, item 4): the default ``GPRegressor(inducing_points=M)``
(in closed form, the noise learned with the kernel and the inducing inputs; its final posterior Titsias'
collapsed bound's) beside the explicit Gaussian EP path (``likelihood=Gaussian()``, the FITC model by EP).
From 5000 rows both learn by the same stochastic search, so they differ only in the final posterior.

The problem: d = 3, ``X ~ U(-2, 2)^3``, the smooth truth ``f(x) = sin(2 x_1) + cos(1.5 x_2) + 0.5 x_3``,
``y = f(x) + 0.1 e``, ``e ~ N(0, 1)``; 5000 fresh test points.  Reported per row: the fit time (``fit`` alone:
placing the inducing inputs by k-means, learning, the final posterior), the RMSE of the predictive mean to the
truth ``f`` at the test inputs (the noise-free function; the noise sd, 0.1, is the floor of an RMSE to noisy
targets, not of this one), the test NLPD (minus the mean ``log_predictive_density`` of noisy test targets; the
Bayes floor, the true model's, is ``0.5 log(2 pi 0.01) + 0.5 = -0.884``), the learned noise sd and the search's
path (``"auto"``: the stochastic search from 20 000 rows, ``benchmarks/results/sparse.md``).

Every contender: ``M = 100`` inducing inputs by k-means, kernel ``1 * RBF(1)`` (the defaults), the noise
variance starting at 1.0, ``random_state=0``, ``optimizer="auto"``.  Each row runs in its own process; the
side-by-side rows with ``OPENBLAS_NUM_THREADS=1`` (and ``OMP_NUM_THREADS`` unset: the row blocks of a FITC pass
on every core), the rows marked "unpinned" with nothing set.

Usage::

    python benchmarks/sparse_regression.py > benchmarks/results/sparse_regression.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

DIM, NOISE_SD, N_TEST, M = 3, 0.1, 5000, 100
ROWS = [  # (label, n, contender, pinned)
    ("default `GPRegressor(inducing_points=100)`", 20_000, "default", True),
    ("explicit EP `likelihood=Gaussian(0.1), normalize_y=True`", 20_000, "explicit", True),
    ("default, unpinned", 20_000, "default", False),
    ("default", 100_000, "default", True),
    ("default, unpinned", 100_000, "default", False),
]


def truth(X: np.ndarray) -> np.ndarray:
    return np.sin(2.0 * X[:, 0]) + np.cos(1.5 * X[:, 1]) + 0.5 * X[:, 2]


def problem(n: int, seed: int = 43) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, size=(n, DIM))
    Xt = rng.uniform(-2.0, 2.0, size=(N_TEST, DIM))
    return X, truth(X) + NOISE_SD * rng.normal(size=n), Xt, truth(Xt) + NOISE_SD * rng.normal(size=N_TEST)


def run_row(n: int, contender: str) -> dict:
    """One fit in this process: its time, its errors and what it learned."""
    from relaxep import Gaussian, GPRegressor

    X, y, Xt, yt = problem(n)
    # (the explicit row: the default's model, its targets standardised and its noise from 0.1, by EP)
    explicit = {"likelihood": Gaussian(0.1), "normalize_y": True} if contender == "explicit" else {}
    reg = GPRegressor(inducing_points=M, random_state=0, **explicit)
    start = time.perf_counter()
    reg.fit(X, y)
    seconds = time.perf_counter() - start
    mean = reg.predict(Xt)
    return {
        "seconds": seconds,
        "rmse": float(np.sqrt(np.mean((mean - truth(Xt)) ** 2))),
        "nlpd": float(-np.mean(reg.log_predictive_density(Xt, yt))),
        "noise_sd": float(np.sqrt(reg.likelihood_.noise) * np.ravel(reg._y_train_std)[0]),  # (in y's units)
        "sweeps": int(reg.result_.n_sweeps),
        "kernel": str(reg.kernel_),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--row", nargs=2, metavar=("N", "CONTENDER"), help="run one row here (internal)")
    args = parser.parse_args()
    if args.row:
        print(json.dumps(run_row(int(args.row[0]), args.row[1])))
        return
    print("# Sparse GP regression with Gaussian noise: the closed-form default beside EP\n")
    cores, version = os.cpu_count(), platform.python_version()
    print(f"`python benchmarks/sparse_regression.py` on {cores} cores (Python {version}, numpy")
    print(f"{np.__version__}): d = {DIM}, M = {M}, noise sd {NOISE_SD}, {N_TEST} test points (module docstring).\n")
    print("| row | n | BLAS | fit s | RMSE to truth | test NLPD | noise sd | final sweeps | kernel_ |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, n, contender, pinned in ROWS:
        env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
        if pinned:
            env["OPENBLAS_NUM_THREADS"] = "1"
        out = subprocess.run(
            [sys.executable, __file__, "--row", str(n), contender], env=env, capture_output=True, text=True
        )
        if out.returncode:
            print(f"| {label} | {n} | failed: {out.stderr.strip().splitlines()[-1]} |||||||")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        blas = "1 thread" if pinned else "unpinned"
        print(
            f"| {label} | {n} | {blas} | {r['seconds']:.2f} | {r['rmse']:.4f} | {r['nlpd']:.3f} | "
            f"{r['noise_sd']:.4f} | {r['sweeps']} | `{r['kernel']}` |",
            flush=True,
        )


if __name__ == "__main__":
    main()
