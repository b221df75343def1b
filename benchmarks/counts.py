"""Count regression by EP (Poisson, negative binomial) beside the naive GP regressions a user would try first, a
Poisson GLM, and the time of the new likelihoods' fits beside the binary probit's.

``python benchmarks/counts.py [--repeats 10] [--timing-n 2000] [--out benchmarks/results/counts.md]``

1. **A simulated log-Gaussian Cox process** on ``[0, 10]``: log-rate ``g(x) = 2.5 + sin(x) + 0.5 cos(2.3 x)``,
   counts in ``--bins`` bins of width ``w`` drawn from ``Poisson(w exp(g))``.  The score is the RMSE of the
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
3. **Time at ``--timing-n`` rows** (one BLAS thread each, median of 3): a learned Poisson, negative-binomial
   and ordinal fit beside the learned binary probit ``GPClassifier`` on the same inputs.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import poisson
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.linear_model import PoissonRegressor
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import SplineTransformer
from threadpoolctl import threadpool_limits

from relaxep import GPClassifier, GPOrdinalClassifier, GPRegressor, NegativeBinomial, Poisson, Probit
from relaxep.datasets import load_coal_mining


def log_rate(x: np.ndarray) -> np.ndarray:
    return 2.5 + np.sin(x) + 0.5 * np.cos(2.3 * x)


def lgcp(bins: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    width = 10.0 / bins
    x = (np.arange(bins) + 0.5) * width
    return x[:, None], np.random.default_rng(seed).poisson(width * np.exp(log_rate(x))).astype(float), width


def simulated(bins: int, repeats: int) -> list[str]:
    scores: dict[str, list[float]] = {}
    statuses: dict[str, list[str]] = {}
    for seed in range(repeats):
        X, y, width = lgcp(bins, seed)
        truth = np.exp(log_rate(X[:, 0]))
        exposure = np.full(y.size, width)
        for name, lik in (("relaxep Poisson EP", Poisson()), ("relaxep negative binomial EP", NegativeBinomial())):
            model = GPRegressor(C(1.0) * RBF(1.0) + C(1.0), likelihood=lik, random_state=0)
            model.fit(X, y, exposure=exposure)
            scores.setdefault(name, []).append(float(np.sqrt(np.mean((model.predict(X) - truth) ** 2))))
            statuses.setdefault(name, []).append(model.result_.status)
        kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
        rate = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(X, y / width).predict(X)
        scores.setdefault("scikit-learn GPR on the rates", []).append(float(np.sqrt(np.mean((rate - truth) ** 2))))
        logged = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(X, np.log1p(y)).predict(X)
        rate = np.expm1(logged) / width
        scores.setdefault("scikit-learn GPR on log1p counts", []).append(float(np.sqrt(np.mean((rate - truth) ** 2))))
    lines = [
        f"## Simulated log-Gaussian Cox process ({bins} bins on [0, 10], {repeats} draws)",
        "",
        "| method | RMSE of the rate to the true rate | converged |",
        "|---|---:|---:|",
    ]
    for name, values in scores.items():
        conv = statuses.get(name)
        cell = f"{conv.count('converged')}/{len(conv)}" if conv else ""
        lines.append(f"| {name} | {np.mean(values):.3f} | {cell} |")
    best_naive = min(np.mean(scores[k]) for k in scores if k.startswith("scikit-learn"))
    for name in ("relaxep Poisson EP", "relaxep negative binomial EP"):
        lines.append(f"| {name} / the better naive GPR | {np.mean(scores[name]) / best_naive:.2f}x | |")
    return lines


def coal() -> list[str]:
    years, counts = load_coal_mining()
    X = ((years - years.mean()) / years.std())[:, None]
    lpd: dict[str, list[float]] = {}
    statuses: dict[str, list[str]] = {}
    for train, test in KFold(10, shuffle=True, random_state=0).split(X):
        for name, lik in (("relaxep Poisson EP", Poisson()), ("relaxep negative binomial EP", NegativeBinomial())):
            model = GPRegressor(C(1.0) * RBF(1.0) + C(1.0), likelihood=lik, random_state=0).fit(X[train], counts[train])
            lpd.setdefault(name, []).extend(model.log_predictive_density(X[test], counts[test]))
            statuses.setdefault(name, []).append(model.result_.status)
        glm = make_pipeline(SplineTransformer(n_knots=10), PoissonRegressor(alpha=1e-3, max_iter=1000))
        mu = glm.fit(X[train], counts[train]).predict(X[test])
        lpd.setdefault("scikit-learn PoissonRegressor, splines", []).extend(poisson.logpmf(counts[test], mu))
    lines = [
        f"## Coal-mining disasters ({years[0]}-{years[-1]}, {int(counts.sum())} disasters), 10-fold CV",
        "",
        "| method | mean test log predictive density | converged |",
        "|---|---:|---:|",
    ]
    for name, values in lpd.items():
        conv = statuses.get(name)
        cell = f"{conv.count('converged')}/{len(conv)}" if conv else ""
        lines.append(f"| {name} | {np.mean(values):.3f} | {cell} |")
    return lines


def timing(n: int) -> list[str]:
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(n, 2))
    f = np.sin(X[:, 0]) + 0.5 * X[:, 1]
    fits = {
        "GPClassifier, Probit (binary)": (lambda: GPClassifier(C(1.0) * RBF(1.0), Probit()), (f > 0).astype(int)),
        "GPRegressor, Poisson": (lambda: GPRegressor(C(1.0) * RBF(1.0), likelihood=Poisson()), rng.poisson(np.exp(f))),
        "GPRegressor, NegativeBinomial": (
            lambda: GPRegressor(C(1.0) * RBF(1.0), likelihood=NegativeBinomial()),
            rng.poisson(np.exp(f)),
        ),
        "GPOrdinalClassifier (3 classes)": (lambda: GPOrdinalClassifier(), np.searchsorted([-0.5, 0.5], f)),
    }
    lines = [f"## Time of a learned fit at n = {n} (one BLAS thread, median of 3)", "", "| fit | time (s) | / probit |"]
    lines.append("|---|---:|---:|")
    base = None
    for name, (make, target) in fits.items():
        times = []
        for _ in range(3):
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
    parser.add_argument("--bins", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--timing-n", type=int, default=2000, help="0: no timing section")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    lines = [f"# Counts by EP (`python benchmarks/counts.py --repeats {args.repeats} --timing-n {args.timing_n}`)", ""]
    lines += [*simulated(args.bins, args.repeats), "", *coal(), ""]
    print("\n".join(lines), flush=True)
    if args.timing_n:
        lines += timing(args.timing_n)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
