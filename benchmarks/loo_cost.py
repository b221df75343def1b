"""What ``loo()`` costs beside a fit (issue 53: at most 2 s at 10^5 rows, at most 5% of a fit).

``python benchmarks/loo_cost.py [n] [--repeats k]``: FITC probit and Student-t at ``n`` rows (default 10^5; random
2-D inputs, 100 inducing inputs, the kernel fixed, ``optimizer=None``, so the fit is one EP run) and Ripley's
synth.tr (250 rows, probit, dense, the kernel learned by L-BFGS-B), each timed with BLAS pinned to one thread
(threadpoolctl) and with the library's default threads, as a user runs it.  Every time is the median of ``k``
repeats (default 3).  Prints the machine and a Markdown table, the figures side by side
(``benchmarks/results/loo_cost.md``).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import numpy as np
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from threadpoolctl import threadpool_info, threadpool_limits

from relaxep import GPClassifier, GPRegressor, Probit, StudentT
from relaxep.datasets import load_synth


def _fit_and_loo(make: Callable[[], object], X: np.ndarray, y: np.ndarray, repeats: int) -> tuple[float, float]:
    """The median times of a fit and of ``loo()`` on the last fit."""
    fitted: list = []
    fit_s = _median_time(lambda: fitted.append(make().fit(X, y)), repeats)
    fitted[-1].loo()  # (warm: the thread pool started)
    return fit_s, _median_time(fitted[-1].loo, repeats)


def _median_time(work: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _cases(n: int) -> list[tuple[str, Callable[[], object], np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (n, 2))
    f = np.sin(2 * X[:, 0]) * np.cos(X[:, 1])
    labels = (f + 0.5 * rng.normal(size=n) > 0).astype(int)
    values = f + 0.1 * rng.standard_t(4, size=n)
    synth_X, synth_y = load_synth("train")
    return [
        (f"probit FITC, n = {n}, fixed kernel",
         lambda: GPClassifier(C(1.0) * RBF([1.0, 1.0]), likelihood=Probit(), inducing_points=100, optimizer=None,
                              random_state=0), X, labels),
        (f"Student-t FITC, n = {n}, fixed kernel",
         lambda: GPRegressor(C(1.0) * RBF([1.0, 1.0]), likelihood=StudentT(4.0, 0.1), inducing_points=100,
                             optimizer=None, random_state=0), X, values),
        ("probit, synth.tr (n = 250), learned kernel",
         lambda: GPClassifier(C(1.0) * RBF([1.0, 1.0]), likelihood=Probit(), random_state=0), synth_X, synth_y),
    ]  # fmt: skip


def machine() -> str:
    """The machine in one line: CPU, cores, numpy and its BLAS."""
    blas = [f"{p['internal_api']} {p.get('version')} ({p['num_threads']} threads)" for p in threadpool_info()]
    cpu = platform.processor() or platform.machine()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}, " + ", ".join(
        blas
    )


def main(n: int, repeats: int) -> None:
    print(f"machine: {machine()}\n")
    print("| model | BLAS threads | fit (s) | loo() (s) | loo() / fit |")
    print("|---|---|---:|---:|---:|")
    for name, make, X, y in _cases(n):
        for threads, limit in (("1 (pinned)", lambda: threadpool_limits(1)), ("default", nullcontext)):
            context: AbstractContextManager = limit()
            with context:
                fit_s, loo_s = _fit_and_loo(make, X, y, repeats)
            print(f"| {name} | {threads} | {fit_s:.2f} | {loo_s:.3f} | {100 * loo_s / fit_s:.1f}% |", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    main(args.n, args.repeats)
