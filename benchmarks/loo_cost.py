"""What ``loo()`` costs beside a fit: FITC probit and Student-t at ``n`` rows (default 10^5).

``python benchmarks/loo_cost.py [n]``: random 2-D inputs, 100 inducing inputs, the kernel fixed (``optimizer=None``,
so the fit is one EP run); prints the fit's time and the best of three ``loo()`` calls.  The target (issue 53):
``loo()`` at most 2 s at 10^5 rows and at most 5% of a fit.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPClassifier, GPRegressor, Probit, StudentT


def main(n: int) -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (n, 2))
    f = np.sin(2 * X[:, 0]) * np.cos(X[:, 1])
    labels = (f + 0.5 * rng.normal(size=n) > 0).astype(int)
    values = f + 0.1 * rng.standard_t(4, size=n)
    fits = (
        ("probit FITC", GPClassifier(C(1.0) * RBF([1.0, 1.0]), likelihood=Probit(), inducing_points=100,
                                     optimizer=None), labels),
        ("Student-t FITC", GPRegressor(C(1.0) * RBF([1.0, 1.0]), likelihood=StudentT(4.0, 0.1), inducing_points=100,
                                       optimizer=None), values),
    )  # fmt: skip
    for name, est, y in fits:
        start = time.perf_counter()
        est.fit(X, y)
        fit_s = time.perf_counter() - start
        times = []
        for _ in range(3):
            start = time.perf_counter()
            est.loo()
            times.append(time.perf_counter() - start)
        best = min(times)
        print(f"{name}, n = {n}: fit {fit_s:.2f} s, loo() {best:.3f} s ({100 * best / fit_s:.1f}% of the fit)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
