"""Count regression by EP (Poisson, negative binomial) beside the naive GP regressions a user would try first, a
Poisson GLM, and the time of the new likelihoods' fits beside the binary probit's.

``python benchmarks/counts.py [--repeats 10] [--timing-n 2000] [--out benchmarks/results/counts.md]``

Sections 1 and 2 are the cells of ``relaxep reproduce counts`` (:mod:`relaxep.experiments.studies.counts`).

1. **A simulated log-Gaussian Cox process** on ``[0, 10]``: log-rate ``g(x) = 2.5 + sin(x) + 0.5 cos(2.3 x)``,
   counts in 100 bins of width ``w`` drawn from ``Poisson(w exp(g))``.  The score is the RMSE of the
   predicted rate (per unit length) against the true ``exp(g)`` at the bin centres, mean over ``--repeats``
   draws.  relaxep: ``GPRegressor(C * RBF + C, likelihood=Poisson() | NegativeBinomial())`` with ``exposure = w`` (the
   constant kernel carries the log-rate's level: the latent GP has mean zero),
   ``predict`` giving the predictive mean rate.  scikit-learn: ``GaussianProcessRegressor(C * RBF +
   WhiteKernel, normalize_y=True)`` on the rates ``y / w``, and on ``log1p(y)`` (back-transformed by
   ``expm1(.) / w``).
2. **The coal-mining disasters** (:func:`relaxep.datasets.load_coal_mining`, 1851-1962): 10-fold
   cross-validated mean test log predictive density of the yearly counts, relaxep's Poisson and negative
   binomial against scikit-learn's ``PoissonRegressor`` on a cubic spline basis of the year (10 knots,
   ``alpha`` 1e-3), with the EP status of every fit.
3. **Time at ``--timing-n`` rows** (one BLAS thread each, median of ``--timing-repeats``): a learned Poisson,
   negative-binomial and ordinal fit beside the learned binary probit ``GPClassifier`` on the same inputs.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from threadpoolctl import threadpool_limits

from relaxep import GPClassifier, GPOrdinalClassifier, GPRegressor, NegativeBinomial, Poisson, Probit
from relaxep.experiments.studies.counts import BINS, coal, simulated_draw


def simulated(repeats: int) -> list[str]:
    draws = [simulated_draw(seed) for seed in range(repeats)]
    methods = [k for k in draws[0] if k != "seed" and not k.endswith(" status")]
    lines = [
        f"## Simulated log-Gaussian Cox process ({BINS} bins on [0, 10], {repeats} draws)",
        "",
        "| method | RMSE of the rate to the true rate | converged |",
        "|---|---:|---:|",
    ]
    for name in methods:
        status = [d.get(name + " status") for d in draws]
        cell = f"{status.count('converged')}/{len(status)}" if status[0] else ""
        lines.append(f"| {name} | {np.mean([d[name] for d in draws]):.3f} | {cell} |")
    naive = min(np.mean([d[m] for d in draws]) for m in methods if m.startswith("scikit-learn"))
    for name in methods[:2]:
        lines.append(f"| {name} / the better naive GPR | {np.mean([d[name] for d in draws]) / naive:.2f}x | |")
    return lines


def coal_lines() -> list[str]:
    result = coal(10)
    lines = ["## Coal-mining disasters (1851-1962, 191 disasters), 10-fold CV", "",
             "| method | mean test log predictive density | converged |", "|---|---:|---:|"]  # fmt: skip
    lines += [f"| {k} | {v:.3f} | {result['converged'].get(k, '')} |" for k, v in result["lpd"].items()]
    return lines


def timing(n: int, repeats: int) -> list[str]:
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(n, 2))
    f = np.sin(X[:, 0]) + 0.5 * X[:, 1]
    noisy = f + 0.5 * rng.normal(size=n)  # (labels with noise: separable labels send a probit's amplitude off)
    fits = {
        "GPClassifier, Probit (binary)": (lambda: GPClassifier(C(1.0) * RBF(1.0), Probit()), (noisy > 0).astype(int)),
        "GPRegressor, Poisson": (lambda: GPRegressor(C(1.0) * RBF(1.0), likelihood=Poisson()), rng.poisson(np.exp(f))),
        "GPRegressor, NegativeBinomial": (
            lambda: GPRegressor(C(1.0) * RBF(1.0), likelihood=NegativeBinomial()),
            rng.poisson(np.exp(f)),
        ),
        "GPOrdinalClassifier (3 classes)": (lambda: GPOrdinalClassifier(), np.searchsorted([-0.5, 0.5], noisy)),
    }
    lines = [f"## Time of a learned fit at n = {n} (one BLAS thread, median of {repeats})", "",
             "| fit | time (s) | / probit |"]  # fmt: skip
    lines.append("|---|---:|---:|")
    base = None
    for name, (make, target) in fits.items():
        times = []
        for _ in range(repeats):
            with threadpool_limits(1):
                start = time.perf_counter()
                make().fit(X, target)
                times.append(time.perf_counter() - start)
        t = float(np.median(times))
        base = t if base is None else base
        lines.append(f"| {name} | {t:.2f} | {t / base:.2f}x |")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--timing-n", type=int, default=2000, help="0: no timing section")
    parser.add_argument("--timing-repeats", type=int, default=1)
    parser.add_argument("--skip-studies", action="store_true", help="the timing section only")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    lines = [f"# Counts by EP (`python benchmarks/counts.py --repeats {args.repeats} --timing-n {args.timing_n}`)", ""]
    if not args.skip_studies:
        lines += [*simulated(args.repeats), "", *coal_lines(), ""]
    print("\n".join(lines), flush=True)
    if args.timing_n:
        lines += timing(args.timing_n, args.timing_repeats)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
