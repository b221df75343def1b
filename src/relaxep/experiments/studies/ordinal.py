r"""Ordinal regression by EP on ORCA's hold-out partitions (``relaxep reproduce ordinal``).

Data: pasture, tae and toy with the ORCA toolbox's 30 hold-out partitions (:func:`relaxep.datasets.load_ordinal`),
features standardised on each training partition.  Per partition: :class:`relaxep.GPOrdinalClassifier` with an
isotropic and an ARD RBF kernel (cut-points, noise and kernel learned by the EP evidence; Chu & Ghahramani
2005), scikit-learn's ``GaussianProcessRegressor(C * RBF + WhiteKernel, normalize_y=True)`` on the class index
rounded to the nearest class (the naive baseline), and multinomial ``LogisticRegression`` on the classes.
Scores: the test mean absolute error of the class index (MAE), accuracy and NLL (minus the mean log predictive
probability of the true class), beside the mean MAE ORCA's tutorial reports (``doc/tutorial/reference-results``,
ayrna/orca eaa629e; not rerun).  relaxep's MAE for both of ``predict``'s decisions, from the same fit: the mode
(``decision="mode"``, the default, which accuracy scores) and the median (``decision="median"``, which minimises
the expected absolute error).  ``--quick``: the first three partitions of each data set.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from relaxep.experiments.runner import Cell
from relaxep.experiments.study import Study, StudyContext, Tables
from relaxep.experiments.tables import md_table, write_csv

__all__ = ["ORCA_REFERENCE", "STUDY", "fit_partition", "run"]

#: ORCA's tutorial: mean test MAE over the 30 partitions (doc/tutorial/reference-results, ayrna/orca eaa629e)
ORCA_REFERENCE = {
    "pasture": {"SVORIM": 0.322222, "SVC1V1": 0.314815, "POM": 0.600000},
    "tae": {"SVORIM": 0.475439, "SVC1V1": 0.534211, "POM": 0.615789},
    "toy": {"SVORIM": 0.017778, "SVC1V1": 0.051556, "POM": 0.980889},
}
DATASETS = ("pasture", "tae", "toy")


def _scores(
    proba: np.ndarray | None, pred: np.ndarray, y: np.ndarray, median: np.ndarray | None = None
) -> dict[str, float]:
    """MAE, accuracy and NLL of ``pred`` (and ``mae_median``, the MAE of ``median`` where given, else NaN)."""
    nll = np.nan if proba is None else float(-np.mean(np.log(np.maximum(proba[np.arange(y.size), y], 1e-300))))
    mae_median = np.nan if median is None else float(np.mean(np.abs(median - y)))
    return {"mae": float(np.mean(np.abs(pred - y))), "mae_median": mae_median, "accuracy": float(np.mean(pred == y)),
            "nll": nll}  # fmt: skip


def fit_partition(name: str, partition: int) -> dict[str, Any]:
    """One partition of ``name``: every method's scores, fit time and (relaxep) EP status."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    from relaxep import GPOrdinalClassifier
    from relaxep.datasets import load_ordinal

    warnings.simplefilter("ignore")
    X, y, partitions = load_ordinal(name)
    train, test = partitions[partition]
    scaler = StandardScaler().fit(X[train])
    Xtr, Xte, ytr, yte = scaler.transform(X[train]), scaler.transform(X[test]), y[train], y[test]
    K = int(y.max()) + 1
    rows: dict[str, Any] = {}
    for label, kernel in (("relaxep EP, RBF", RBF(1.0)), ("relaxep EP, ARD RBF", RBF(np.ones(X.shape[1])))):
        start = time.perf_counter()
        model = GPOrdinalClassifier(kernel, random_state=0).fit(Xtr, ytr)
        proba = np.zeros((yte.size, K))
        proba[:, model.classes_] = model.predict_proba(Xte)
        seconds = time.perf_counter() - start
        median = model.set_params(decision="median").predict(Xte)  # (the same fit: decision is prediction only)
        rows[label] = {**_scores(proba, model.set_params(decision="mode").predict(Xte), yte, median),
                       "seconds": seconds, "status": model.result_.status}  # fmt: skip
    start = time.perf_counter()
    gpr = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), normalize_y=True, random_state=0)
    pred = np.clip(np.rint(gpr.fit(Xtr, ytr.astype(float)).predict(Xte)), 0, K - 1).astype(int)
    rows["scikit-learn GPR, rounded"] = {**_scores(None, pred, yte), "seconds": time.perf_counter() - start}
    start = time.perf_counter()
    lr = LogisticRegression(max_iter=2000).fit(Xtr, ytr)
    proba = np.zeros((yte.size, K))
    proba[:, lr.classes_] = lr.predict_proba(Xte)
    rows["scikit-learn LogisticRegression"] = {**_scores(proba, lr.predict(Xte), yte),
                                               "seconds": time.perf_counter() - start}  # fmt: skip
    return {"dataset": name, "partition": partition, "methods": rows}


def run(context: StudyContext) -> Tables:
    """One cell per data set and partition (three partitions each with ``quick``)."""
    n = 3 if context.quick else 30
    cells = [Cell(f"ordinal-{name}-{i}", fit_partition, dict(name=name, partition=i)) for name in DATASETS
             for i in range(n)]  # fmt: skip
    return {"ordinal": context.run_cells(cells, desc="ordinal")}


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per data set and method: the means over the partitions, and the ORCA references."""
    out = []
    for name in DATASETS:
        mine = [r for r in rows if r["dataset"] == name]
        if not mine:
            continue
        for method in mine[0]["methods"]:
            vals = [r["methods"][method] for r in mine]
            status = [v.get("status") for v in vals]
            out.append({
                "dataset": name, "method": method, "partitions": len(vals),
                **{k: float(np.mean([v.get(k, np.nan) for v in vals])) for k in ("mae", "mae_median", "accuracy",
                                                                                  "nll")},
                "median_seconds": float(np.median([v["seconds"] for v in vals])),
                "converged": f"{status.count('converged')}/{len(status)}" if status[0] else "",
            })  # fmt: skip
        for method, mae in ORCA_REFERENCE[name].items():
            reference = f"ORCA {method} (reference, not rerun)"
            out.append({"dataset": name, "method": reference, "partitions": 30, "mae": mae, "mae_median": np.nan,
                        "accuracy": np.nan, "nll": np.nan, "median_seconds": np.nan, "converged": ""})  # fmt: skip
    return out


def report(tables: Tables, out: Path) -> str:
    """``ordinal.csv`` and the section."""
    summary = summarize(tables["ordinal"])
    write_csv(summary, out / "ordinal.csv")
    return (
        "## Ordinal regression (ORCA's hold-out partitions)\n\nMeans over the partitions of the test MAE of the "
        "class index, accuracy and NLL; relaxep's GPOrdinalClassifier against scikit-learn's baselines in the "
        "same run and ORCA's reference MAEs.  `mae`: of `predict` (the mode; the baselines' own predictions); "
        '`mae_median`: of relaxep\'s `decision="median"`, from the same fits.\n\n'
        + md_table(
            summary,
            ["dataset", "method", "partitions", "mae", "mae_median", "accuracy", "nll", "median_seconds", "converged"],
        )
        + "\n"
    )


STUDY = Study("ordinal", run, report, paper=False, title="ordinal GP regression by EP")
