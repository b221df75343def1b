"""GP ordinal regression by EP on ORCA's 30 hold-out partitions, beside the ORCA reference results and, in the
same run, scikit-learn baselines a user would try first.

``python benchmarks/ordinal.py [--partitions 30] [--out benchmarks/results/ordinal.md]``

Data: pasture, tae and toy with ORCA's partitions (:func:`relaxep.datasets.load_ordinal`; ayrna/orca
``exampledata/30-holdout``), features standardised on each training partition.  Rows, per data set, the mean
over the partitions of the test mean absolute error of the class index (MAE), the accuracy and the test NLL
(minus the mean log predictive probability of the true class):

``relaxep GPOrdinalClassifier``
    ``GPOrdinalClassifier()``: an isotropic RBF kernel, the cut-points and the noise learned with it by
    L-BFGS-B on the EP evidence (Chu & Ghahramani 2005), ``rule="auto"``.
``relaxep GPOrdinalClassifier, ARD``
    the same with one length scale per feature.
``scikit-learn GPR, rounded``
    ``GaussianProcessRegressor(C * RBF + WhiteKernel, normalize_y=True)`` on the class index, its prediction
    rounded to the nearest class (no probabilities: no NLL).
``scikit-learn LogisticRegression``
    multinomial logistic regression on the classes (their order unused), ``C = 1``.
``ORCA reference: SVORIM / SVC1V1 / POM``
    the mean test MAE of ORCA's tutorial (``doc/tutorial/reference-results``, commit eaa629e), not rerun.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from relaxep import GPOrdinalClassifier
from relaxep.datasets import load_ordinal

#: ORCA's tutorial, mean test MAE over the 30 partitions (doc/tutorial/reference-results, ayrna/orca eaa629e)
ORCA = {
    "pasture": {"SVORIM": 0.322222, "SVC1V1": 0.314815, "POM": 0.600000},
    "tae": {"SVORIM": 0.475439, "SVC1V1": 0.534211, "POM": 0.615789},
    "toy": {"SVORIM": 0.017778, "SVC1V1": 0.051556, "POM": 0.980889},
}


def _scores(proba: np.ndarray | None, pred: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    mae = float(np.mean(np.abs(pred - y)))
    acc = float(np.mean(pred == y))
    nll = float("nan") if proba is None else float(-np.mean(np.log(np.maximum(proba[np.arange(y.size), y], 1e-300))))
    return mae, acc, nll


def run_partition(name: str, X: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray) -> dict:
    scaler = StandardScaler().fit(X[train])
    Xtr, Xte, ytr, yte = scaler.transform(X[train]), scaler.transform(X[test]), y[train], y[test]
    K = int(y.max()) + 1
    out = {}
    for label, kernel in (
        ("relaxep GPOrdinalClassifier", RBF(1.0)),
        ("relaxep GPOrdinalClassifier, ARD", RBF(np.ones(X.shape[1]))),
    ):
        start = time.perf_counter()
        model = GPOrdinalClassifier(kernel, random_state=0).fit(Xtr, ytr)
        proba = np.zeros((yte.size, K))
        proba[:, np.searchsorted(np.arange(K), model.classes_)] = model.predict_proba(Xte)
        out[label] = (*_scores(proba, model.predict(Xte), yte), time.perf_counter() - start, model.result_.status)
    start = time.perf_counter()
    gpr = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), normalize_y=True, random_state=0)
    pred = np.clip(np.rint(gpr.fit(Xtr, ytr.astype(float)).predict(Xte)), 0, K - 1).astype(int)
    out["scikit-learn GPR, rounded"] = (*_scores(None, pred, yte), time.perf_counter() - start, "")
    start = time.perf_counter()
    lr = LogisticRegression(max_iter=2000).fit(Xtr, ytr)
    proba = np.zeros((yte.size, K))
    proba[:, lr.classes_] = lr.predict_proba(Xte)
    out["scikit-learn LogisticRegression"] = (*_scores(proba, lr.predict(Xte), yte), time.perf_counter() - start, "")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=30)
    parser.add_argument("--datasets", nargs="*", default=["pasture", "tae", "toy"])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    lines = [
        f"# GP ordinal regression by EP on ORCA's hold-out partitions (`python benchmarks/ordinal.py "
        f"--partitions {args.partitions}`)",
        "",
        "Means over the partitions of the test MAE of the class index, the accuracy and the test NLL; fit time is "
        "the median per partition (s); status: how many relaxep fits converged.",
        "",
        "| data set | method | MAE | accuracy | NLL | fit (s) | converged |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name in args.datasets:
        X, y, partitions = load_ordinal(name)
        rows: dict[str, list] = {}
        for train, test in partitions[: args.partitions]:
            for label, values in run_partition(name, X, y, train, test).items():
                rows.setdefault(label, []).append(values)
        for label, values in rows.items():
            mae, acc, nll = (np.mean([v[i] for v in values]) for i in range(3))
            fit = np.median([v[3] for v in values])
            status = [v[4] for v in values]
            conv = f"{status.count('converged')}/{len(status)}" if status[0] else ""
            nll_cell = "" if np.isnan(nll) else f"{nll:.3f}"
            lines.append(f"| {name} | {label} | {mae:.3f} | {acc:.3f} | {nll_cell} | {fit:.2f} | {conv} |")
            print(lines[-1], flush=True)
        for label, mae in ORCA[name].items():
            lines.append(f"| {name} | ORCA reference: {label} (not rerun) | {mae:.3f} |  |  |  |  |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
