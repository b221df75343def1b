"""The default regressors on real noisy data, beside scikit-learn's GPR as its users fit it (issue 67).

Every contender runs on the same 5-fold splits (``KFold(5, shuffle=True, random_state=0)``), the inputs standardised
by each training fold's mean and standard deviation, one BLAS thread for every contender (threadpoolctl); the
relaxep default is also timed with nothing pinned, as a user runs it.  Rows per data set:

* ``mean``: the training mean, with the training standard deviation as its predictive (the floor to beat);
* ``sklearn iso`` / ``sklearn ARD``: ``GaussianProcessRegressor(ConstantKernel(1.0) * RBF(1.0) + WhiteKernel(0.1),
  normalize_y=True)`` (``RBF(np.ones(d))`` for ARD), its predictive standard deviation with the white noise in it;
* ``GPRegressor()``: relaxep's default, as typed;
* ``GPRegressor ARD``: the same model with an ARD length-scale (``kernel=C(1.0) * RBF(np.ones(d)),
  likelihood=Gaussian(0.1), normalize_y=True``), the other side of the default's decision;
* ``GPRegressor(prior=None)``: the default model without its hyperprior (type-II maximum likelihood);
* ``GPRegressor ARD(prior=None)``: the ARD model without its hyperprior;
* ``GPHeteroscedasticRegressor()``: relaxep's heteroscedastic default.

Data sets: scikit-learn's diabetes (442 x 10), ISLR's Carseats (400 x 11, the categorical columns as indicators),
mcycle (133 x 1), ISLR's Wage (wage on age, 3000 x 1), Friedman #1 with constant noise (400 x 10, noise sd 1) and a
sine with constant noise (300 x 1, noise sd 0.3).  Columns: held-out RMSE and NLPD (the mean over the 5 folds of
each fold's value; NLPD per point, in the target's units), and the median fit seconds over the folds.

Usage: ``python benchmarks/regression_defaults.py [--sets diabetes carseats ...] [--contenders ...]
[--out benchmarks/results/regression_defaults.md]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from relaxep import Gaussian, GPHeteroscedasticRegressor, GPRegressor
from relaxep.datasets import load_regression, make_friedman


def sine(n: int = 300, noise: float = 0.3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``y = sin(3x) + x / 2 + N(0, noise^2)`` at ``x ~ U[-2, 2]``: constant noise in one dimension."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    return x[:, None], np.sin(3 * x) + 0.5 * x + noise * rng.standard_normal(n)


def data_set(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "friedman":
        d = make_friedman(n_train=400, n_test=1, random_state=0, noise=1.0)
        return d.X, d.y
    if name == "sine":
        return sine()
    return load_regression(name)


SETS = ("diabetes", "carseats", "mcycle", "wage", "friedman", "sine")


def _gaussian_nlpd(y: np.ndarray, mean: np.ndarray, std: np.ndarray) -> float:
    return float(-np.mean(norm.logpdf(y, mean, np.maximum(std, 1e-300))))


def _sklearn(ard: bool) -> Callable:
    def fit_predict(X, y, X_test, y_test):
        scale = np.ones(X.shape[1]) if ard else 1.0
        kernel = ConstantKernel(1.0) * RBF(scale) + WhiteKernel(0.1)
        model = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0)
        start = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - start
        mean, std = model.predict(X_test, return_std=True)
        return seconds, mean, _gaussian_nlpd(y_test, mean, std)

    return fit_predict


def _relaxep(make: Callable[[int], object]) -> Callable:
    def fit_predict(X, y, X_test, y_test):
        model = make(X.shape[1])
        start = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - start
        mean = model.predict(X_test)
        return seconds, mean, float(-np.mean(model.log_predictive_density(X_test, y_test)))

    return fit_predict


def _mean(X, y, X_test, y_test):
    mean = np.full(len(y_test), y.mean())
    return 0.0, mean, _gaussian_nlpd(y_test, mean, np.full(len(y_test), y.std()))


CONTENDERS: dict[str, Callable] = {
    "mean": _mean,
    "sklearn iso": _sklearn(False),
    "sklearn ARD": _sklearn(True),
    "GPRegressor()": _relaxep(lambda d: GPRegressor()),
    "GPRegressor ARD": _relaxep(
        lambda d: GPRegressor(ConstantKernel(1.0) * RBF(np.ones(d)), likelihood=Gaussian(0.1), normalize_y=True)
    ),
    "GPRegressor(prior=None)": _relaxep(lambda d: GPRegressor(prior=None)),
    "GPRegressor ARD(prior=None)": _relaxep(
        lambda d: GPRegressor(
            ConstantKernel(1.0) * RBF(np.ones(d)), likelihood=Gaussian(0.1), normalize_y=True, prior=None
        )
    ),
    "GPHeteroscedasticRegressor()": _relaxep(lambda d: GPHeteroscedasticRegressor()),
}


#: the table's rows (``GPRegressor ARD(prior=None)`` on request: it explains the ARD rows)
DEFAULT_CONTENDERS = [c for c in CONTENDERS if c != "GPRegressor ARD(prior=None)"]


def run(name: str, contenders: list[str], unpinned: bool, repeats: int = 1) -> list[dict]:
    """Every contender on each fold in turn (fold-major, so that the machine's load falls on all alike); with
    ``repeats`` above 1 each fold's round is run that often, the fit time the median over folds and rounds (the
    scores are the first round's: the fits are deterministic)."""
    X, y = data_set(name)
    plan = [(c, True) for c in contenders] + ([("GPRegressor()", False)] if unpinned else [])
    got: dict[tuple[str, bool], dict[str, list[float]]] = {key: {"rmse": [], "nlpd": [], "s": []} for key in plan}
    for train, test in KFold(5, shuffle=True, random_state=0).split(X):
        centre, scale = X[train].mean(axis=0), X[train].std(axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        Xtr, Xte = (X[train] - centre) / scale, (X[test] - centre) / scale
        for round_ in range(repeats):
            for contender, pinned in plan:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    with threadpool_limits(1 if pinned else None):
                        s, mean, lp = CONTENDERS[contender](Xtr, y[train], Xte, y[test])
                got[contender, pinned]["s"].append(s)
                if round_ == 0:
                    got[contender, pinned]["rmse"].append(float(np.sqrt(np.mean((mean - y[test]) ** 2))))
                    got[contender, pinned]["nlpd"].append(lp)
    rows = []
    for (contender, pinned), values in got.items():
        label = contender + ("" if pinned else " (threads not pinned)")
        row = {"set": name, "n x d": f"{X.shape[0]} x {X.shape[1]}", "contender": label,
               "rmse": float(np.mean(values["rmse"])), "nlpd": float(np.mean(values["nlpd"])),
               "fit_s": statistics.median(values["s"])}  # fmt: skip
        print(f"{name:9s} {label:42s} RMSE {row['rmse']:9.4g}  NLPD {row['nlpd']:8.4g}  fit {row['fit_s']:7.3f} s",
              flush=True)  # fmt: skip
        rows.append(row)
    return rows


def ratios(rows: list[dict]) -> list[str]:
    """The issue's targets per set: the default against scikit-learn's isotropic GPR, the heteroscedastic default
    against the default."""
    lines = []
    for name in dict.fromkeys(r["set"] for r in rows):
        got = {r["contender"]: r for r in rows if r["set"] == name}
        ours, theirs = got.get("GPRegressor()"), got.get("sklearn iso")
        if ours and theirs:
            lines.append(
                f"* {name}: GPRegressor() / sklearn iso: RMSE {ours['rmse'] / theirs['rmse']:.3f}, NLPD "
                f"{ours['nlpd'] - theirs['nlpd']:+.3f} nats, fit time {ours['fit_s'] / max(theirs['fit_s'], 1e-9):.2f}x"
            )
        het = got.get("GPHeteroscedasticRegressor()")
        if ours and het:
            lines.append(
                f"* {name}: GPHeteroscedasticRegressor() / GPRegressor(): RMSE {het['rmse'] / ours['rmse']:.3f}, NLPD "
                f"{het['nlpd'] - ours['nlpd']:+.3f} nats"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--contenders", nargs="+", choices=list(CONTENDERS), default=list(DEFAULT_CONTENDERS))
    parser.add_argument("--no-unpinned", dest="unpinned", action="store_false", help="skip the unpinned timing")
    parser.add_argument("--repeats", type=int, default=1, help="fit each fold this often (fit time: the median)")
    parser.add_argument("--out", default="benchmarks/results/regression_defaults.md")
    args = parser.parse_args()
    rows = [row for name in args.sets for row in run(name, args.contenders, args.unpinned, args.repeats)]
    lines = ["| set | n x d | contender | RMSE | NLPD | fit s (median) |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['set']} | {r['n x d']} | {r['contender']} | {r['rmse']:.4g} | {r['nlpd']:.4g} | {r['fit_s']:.3f} |"
              for r in rows]  # fmt: skip
    text = "\n".join(lines) + "\n\nTargets:\n\n" + "\n".join(ratios(rows)) + "\n"
    command = "python benchmarks/regression_defaults.py " + " ".join(sys.argv[1:])
    text += f"\nCommand: `{command.strip()}`\n"
    print("\n" + text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
