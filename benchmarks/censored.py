"""Censored regression: the Tobit likelihood beside the naive fits a user tries first.

``python benchmarks/censored.py [--seeds 6] [--figure docs/images/censored.png]``

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


def figure(path: str) -> None:
    """Seed 0: the reported values, the truth, the Tobit fit's latent with its 95% band, and scikit-learn's GPR."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, y, Xt, ft = problem(0)
    tobit = GPRegressor(likelihood=Tobit(lower=0.0), random_state=0).fit(X, y)
    naive = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(), normalize_y=True, random_state=0).fit(X, y)
    mean, sd = tobit.predict(Xt, return_std=True)
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    censored = y == 0.0
    ax.scatter(X[~censored, 0], y[~censored], s=8, color="0.45", label="observed")
    ax.scatter(X[censored, 0], y[censored], s=8, marker="v", color="tab:red", label="reported as 0 (censored)")
    ax.plot(Xt[:, 0], ft, color="black", lw=1.5, label="true latent f")
    ax.plot(Xt[:, 0], mean, color="tab:blue", lw=1.5, label="Tobit(lower=0) by EP")
    ax.fill_between(Xt[:, 0], mean - 1.96 * sd, mean + 1.96 * sd, color="tab:blue", alpha=0.2)
    ax.plot(Xt[:, 0], naive.predict(Xt), color="tab:orange", lw=1.2, ls="--", label="GPR on the reported values")
    ax.axhline(0.0, color="0.7", lw=0.8)
    ax.set_xlabel("x")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--figure", default=None, help="draw seed 0's fits to this file and stop")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.figure:
        figure(args.figure)
        return
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
