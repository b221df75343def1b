"""The frames between ``GPRegressor(likelihood=StudentT()).fit`` and the likelihood's ``_log_z`` (a reader's walk).

``python benchmarks/call_depth.py`` prints the chain of frames at the first ``StudentT._log_z`` call of a
dense fit with a learned kernel (the search's first evidence evaluation) and their count, scipy's
frames left out; architecture reviews count this walk.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPRegressor, StudentT
from relaxep.likelihoods import student_t


def main() -> None:
    chains: list[list[tuple[str, str]]] = []
    real = student_t.StudentT._log_z

    def spy(self, *args, **kwargs):
        if not chains:
            frame, chain = sys._getframe(0), []
            while frame is not None:
                name = frame.f_code.co_filename
                if "relaxep" in name:
                    chain.append((name.split("relaxep/")[-1], frame.f_code.co_name))
                if frame.f_code.co_name == "fit" and name.endswith("regressor.py"):
                    break
                frame = frame.f_back
            chains.append(chain[::-1])
        return real(self, *args, **kwargs)

    student_t.StudentT._log_z = spy
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (40, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        GPRegressor(C(1.0) * RBF(1.0), likelihood=StudentT()).fit(X, y)
    for where, name in chains[0]:
        print(f"{where}: {name}")
    n = len(chains[0]) + 1  # and StudentT._log_z itself
    print(f"{n} frames from GPRegressor.fit to StudentT._log_z at the search's start value; evaluations inside")
    print(f"L-BFGS-B add its backtracking wrapper: {n + 1} (scipy's own frames left out)")


if __name__ == "__main__":
    main()
