"""The sparse default regressor beside the dense closed form where both fit (n = 1000, 2000; d = 3, M = 100).

``python benchmarks/sparse_regression_small.py``

Each row prints the fit's time, the RMSE of the predictive mean to the true function, the test NLPD of new
targets (5000 test points, the predictive variance plus the learned noise) and the learned noise's sd (the
truth: 0.1).  Rows: the dense model with a learned ``Gaussian()``; the sparse default
``GPRegressor(inducing_points=100)`` as ``"auto"`` runs it (Titsias' collapsed bound by L-BFGS-B below 5000
rows, inducing inputs learned), and the same searched to convergence (``optimizer_maxiter=1000``); with
``M = 200``; by the stochastic search; with the inducing inputs fixed at their k-means start; and the
explicit ``likelihood=Gaussian()``, EP on the FITC prior, whose evidence is FITC's marginal likelihood.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from scipy.stats import norm
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import Gaussian, GPRegressor


def truth(X: np.ndarray) -> np.ndarray:
    return np.sin(2 * X[:, 0]) + 0.5 * np.cos(3 * X[:, 1]) + 0.3 * X[:, 2]


def main() -> None:
    rng = np.random.default_rng(0)
    print("| n | model | fit (s) | RMSE to truth | test NLPD | noise sd |\n|---|---|---:|---:|---:|---:|")
    for n in (1000, 2000):
        X = rng.uniform(-2, 2, (n, 3))
        y = truth(X) + 0.1 * rng.standard_normal(n)
        Xt = rng.uniform(-2, 2, (5000, 3))
        yt = truth(Xt) + 0.1 * rng.standard_normal(5000)
        contenders = {
            "dense closed form, Gaussian() learned": GPRegressor(C(1.0) * RBF(1.0), likelihood=Gaussian()),
            "sparse default (auto: L-BFGS-B, Z learned)": GPRegressor(inducing_points=100),
            "sparse default, optimizer_maxiter=1000": GPRegressor(inducing_points=100, optimizer_maxiter=1000),
            "sparse default, M = 200": GPRegressor(inducing_points=200),
            "sparse default, optimizer='stochastic'": GPRegressor(inducing_points=100, optimizer="stochastic"),
            "sparse default, Z fixed at k-means": GPRegressor(inducing_points=100, learn_inducing_points=False),
            "likelihood=Gaussian(): EP on FITC": GPRegressor(inducing_points=100, likelihood=Gaussian()),
        }
        for name, est in contenders.items():
            est.set_params(random_state=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                est.fit(X, y)
                seconds = time.perf_counter() - t0
            mean, std = est.predict(Xt, return_std=True)
            noise = float(est.likelihood_.noise)
            nlpd = -np.mean(norm.logpdf(yt, mean, np.sqrt(std**2 + noise)))
            rmse = np.sqrt(np.mean((mean - truth(Xt)) ** 2))
            print(f"| {n} | {name} | {seconds:.2f} | {rmse:.4f} | {nlpd:.4f} | {np.sqrt(noise):.4f} |", flush=True)


if __name__ == "__main__":
    main()
