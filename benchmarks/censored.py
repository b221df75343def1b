"""Censored regression: the Tobit likelihood beside the naive fits a user tries first.

``python benchmarks/censored.py [--seeds 6]``

The simulated set of issue 45: ``f(x) = sin(2x) + x/2`` on ``[-3, 3]``, 300 uniform inputs, noise sd 0.3, values
below 0 reported as 0 (45-55% of the rows).  Each seed prints the RMSE of the predictive mean of the latent to
``f`` on 400 grid points, the learned noise sd (the truth 0.3) and the fit's time, for:

* ``GPRegressor(likelihood=Tobit(lower=0.0))``: EP, the kernel and the noise learned by the EP evidence;
* the same with ``inducing_points=30`` (FITC);
* scikit-learn's ``GaussianProcessRegressor(C(1) * RBF(1) + WhiteKernel(), normalize_y=True)`` on the reported
  values (the zeros taken as values), and on the uncensored rows alone.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPRegressor, Tobit


def problem(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3.0, 3.0, size=(300, 1))
    f = np.sin(2.0 * X[:, 0]) + 0.5 * X[:, 0]
    y = np.maximum(f + 0.3 * rng.normal(size=300), 0.0)
    Xt = np.linspace(-3.0, 3.0, 400)[:, None]
    return X, y, Xt, np.sin(2.0 * Xt[:, 0]) + 0.5 * Xt[:, 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=6)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print("| seed | censored | model | RMSE to f | noise sd | fit (s) |\n|---|---:|---|---:|---:|---:|")
    for seed in range(args.seeds):
        X, y, Xt, ft = problem(seed)
        rows = {
            "Tobit(lower=0), dense EP": (GPRegressor(likelihood=Tobit(lower=0.0), random_state=0), X, y),
            "Tobit(lower=0), inducing_points=30": (
                GPRegressor(likelihood=Tobit(lower=0.0), inducing_points=30, random_state=0), X, y),
            "scikit-learn GPR on the reported values": (
                GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(), normalize_y=True, random_state=0), X, y),
            "scikit-learn GPR on the uncensored rows": (
                GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(), normalize_y=True, random_state=0),
                X[y > 0], y[y > 0]),
        }  # fmt: skip
        for name, (est, Xf, yf) in rows.items():
            start = time.perf_counter()
            est.fit(Xf, yf)
            seconds = time.perf_counter() - start
            rmse = float(np.sqrt(np.mean((est.predict(Xt) - ft) ** 2)))
            if isinstance(est, GPRegressor):
                sd = float(np.sqrt(est.likelihood_.noise))
            else:
                sd = float(np.sqrt(est.kernel_.k2.noise_level) * est._y_train_std)
            print(f"| {seed} | {np.mean(y == 0):.2f} | {name} | {rmse:.3f} | {sd:.3f} | {seconds:.2f} |", flush=True)


if __name__ == "__main__":
    main()
