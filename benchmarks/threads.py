"""Each fit with the BLAS threads a user gets by default and with one, in one run, on this machine.

``python benchmarks/threads.py [--out benchmarks/results/threads.md] [--repeats 2]``

Every cell runs in its own process (BLAS reads its thread count at start-up): once with
``OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=1`` and once with nothing set, as a user runs
it; the best of ``--repeats`` runs is shown, with the ratio default / one thread (above 1: more
threads made the fit slower).  The problems are issue 33's: 10^5 rows of ``make_classification``
(d = 8) for the sparse fits, 2000 for the dense one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

FITS = {
    "stochastic learning, M = 100, 500 steps, 10^5 rows": (
        "GPClassifier(C(1.0) * RBF(1.0), Probit(), inducing_points=100, optimizer='stochastic', "
        "optimizer_maxiter=500, max_sweeps=3, random_state=0)",
        100_000,
    ),
    "sparse FITC EP, fixed kernel, M = 200, 10^5 rows": (
        "GPClassifier(C(2.0) * RBF(2.0), Probit(), inducing_points=200, optimizer=None, random_state=0)",
        100_000,
    ),
    "dense probit EP, fixed kernel, n = 2000": (
        "GPClassifier(C(2.0) * RBF(2.0), Probit(), optimizer=None)",
        2_000,
    ),
}

_CELL = """
import time, warnings
from sklearn.datasets import make_classification
from sklearn.gaussian_process.kernels import RBF, ConstantKernel as C
from relaxep import GPClassifier, Probit
X, y = make_classification({n}, n_features=8, n_informative=5, random_state=0)
warnings.simplefilter("ignore")
model = {model}
start = time.perf_counter()
model.fit(X, y)
print(time.perf_counter() - start)
"""


def cell(model: str, n: int, one_thread: bool) -> float:
    env = dict(os.environ)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(name, None)
        if one_thread:
            env[name] = "1"
    out = subprocess.run([sys.executable, "-c", _CELL.format(model=model, n=n)], env=env, capture_output=True,
                         text=True, check=True)  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    rows = [
        f"# Default BLAS threads against one (`python benchmarks/threads.py`), {os.cpu_count()} cores",
        "",
        "| fit | one thread (s) | default threads (s) | default / one |",
        "|---|---:|---:|---:|",
    ]
    for name, (model, n) in FITS.items():
        one = min(cell(model, n, True) for _ in range(args.repeats))
        default = min(cell(model, n, False) for _ in range(args.repeats))
        rows.append(f"| {name} | {one:.2f} | {default:.2f} | {default / one:.2f} |")
        print(rows[-1], flush=True)
    text = "\n".join(rows) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
