"""GP ordinal regression by EP on ORCA's 30 hold-out partitions, beside the ORCA reference results and, in the
same run, scikit-learn baselines a user would try first (the cells of ``relaxep reproduce ordinal``:
:func:`relaxep.experiments.studies.ordinal.fit_partition`).

``python benchmarks/ordinal.py [--partitions 30] [--out benchmarks/results/ordinal.md]``

Data: pasture, tae and toy with ORCA's partitions (:func:`relaxep.datasets.load_ordinal`; ayrna/orca
``exampledata/30-holdout``), features standardised on each training partition.  Rows, per data set, the mean
over the partitions of the test mean absolute error of the class index (MAE), the accuracy and the test NLL
(minus the mean log predictive probability of the true class); for relaxep the MAE of both of ``predict``'s
decisions from the same fits, ``decision="mode"`` (the default, the most probable class) and
``decision="median"`` (the predictive median, which minimises the expected absolute error):

``relaxep EP, RBF``
    ``GPOrdinalClassifier()``: an isotropic RBF kernel, the cut-points and the noise learned with it by
    L-BFGS-B on the EP evidence (Chu & Ghahramani 2005), ``rule="auto"``.
``relaxep EP, ARD RBF``
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
import warnings
from pathlib import Path

import numpy as np

from relaxep.datasets import load_ordinal
from relaxep.experiments.studies.ordinal import ORCA_REFERENCE, fit_partition


def run_partition(name: str, partition: int) -> dict:
    """Every method's (MAE, accuracy, NLL, seconds, status, median MAE) on one partition (the study's cell)."""
    methods = fit_partition(name, partition)["methods"]
    return {
        label: (v["mae"], v["accuracy"], v["nll"], v["seconds"], v.get("status", ""), v["mae_median"])
        for label, v in methods.items()
    }


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
        "the median per partition (s); status: how many relaxep fits converged.  MAE (mode): of `predict` "
        "(relaxep's default `decision=\"mode\"`; the baselines' own predictions); MAE (median): of relaxep's "
        '`decision="median"` from the same fits; accuracy is of the mode.',
        "",
        "| data set | method | MAE (mode) | MAE (median) | accuracy | NLL | fit (s) | converged |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in args.datasets:
        partitions = load_ordinal(name)[2]
        rows: dict[str, list] = {}
        for i in range(min(args.partitions, len(partitions))):
            for label, values in run_partition(name, i).items():
                rows.setdefault(label, []).append(values)
        for label, values in rows.items():
            mae, acc, nll = (np.mean([v[i] for v in values]) for i in range(3))
            fit = np.median([v[3] for v in values])
            status = [v[4] for v in values]
            conv = f"{status.count('converged')}/{len(status)}" if status[0] else ""
            nll_cell = "" if np.isnan(nll) else f"{nll:.3f}"
            median = np.mean([v[5] for v in values])
            median_cell = "" if np.isnan(median) else f"{median:.3f}"
            lines.append(
                f"| {name} | {label} | {mae:.3f} | {median_cell} | {acc:.3f} | {nll_cell} | {fit:.2f} | {conv} |"
            )
            print(lines[-1], flush=True)
        for label, mae in ORCA_REFERENCE[name].items():
            lines.append(f"| {name} | ORCA reference: {label} (not rerun) | {mae:.3f} |  |  |  |  |  |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
