"""Digits on several splits: relaxep's default multi-class classifier (one-vs-rest by EP), its joint model and
scikit-learn's one-vs-rest Laplace GPC, in the same run.

``python benchmarks/multiclass_digits_splits.py [--seeds 1 2 3]`` splits scikit-learn's digits (pixels / 16) into
1297 training and 500 test rows, stratified, with ``random_state=seed`` (seed 0 is the multi-class report's
split), fits ``GPClassifier(random_state=0)``, ``GPClassifier(multi_class="joint", random_state=0)`` and
``GaussianProcessClassifier(ConstantKernel(1.0) * RBF(1.0), random_state=0)``, each on one BLAS thread, and
prints a markdown row per seed and model: test error (%), the mean negative log predictive probability of the
true class (NLL) and the fit's wall seconds.  About five minutes a seed on a 2-core machine.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from relaxep import GPClassifier

MODELS = {
    "relaxep default (one-vs-rest)": lambda: GPClassifier(random_state=0),
    "relaxep joint": lambda: GPClassifier(multi_class="joint", random_state=0),
    "sklearn OvR Laplace": lambda: GaussianProcessClassifier(ConstantKernel(1.0) * RBF(1.0), random_state=0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    X, y = load_digits(return_X_y=True)
    print("| seed | model | error % | NLL | fit s |\n|---|---|---|---|---|")
    for seed in args.seeds:
        Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=500, stratify=y, random_state=seed)
        for name, make in MODELS.items():
            with threadpool_limits(1), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                model = make().fit(Xtr, ytr)
                fit_s = time.perf_counter() - start
                p = np.clip(model.predict_proba(Xte), 1e-300, 1.0)
            error = 100.0 * np.mean(p.argmax(1) != yte)
            nll = -np.mean(np.log(p[np.arange(yte.size), yte]))
            print(f"| {seed} | {name} | {error:.1f} | {nll:.4f} | {fit_s:.0f} |", flush=True)


if __name__ == "__main__":
    main()
