"""Small-matrix loops run with one BLAS thread, and the caller's thread settings come back unchanged."""

from __future__ import annotations

import numpy as np
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from threadpoolctl import threadpool_info, threadpool_limits

import relaxep.estimators._stochastic as stochastic
from relaxep import GPClassifier, Probit


def _blas_threads() -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_the_stochastic_step_runs_on_one_blas_thread_and_restores_the_callers_setting(monkeypatch):
    seen = []
    real = stochastic.inducing_factor

    def spy(*args, **kwargs):
        seen.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(stochastic, "inducing_factor", spy)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(int)
    clf = GPClassifier(C(1.0) * RBF(1.0), Probit(), inducing_points=8, optimizer="stochastic", optimizer_maxiter=5)
    with threadpool_limits(limits=2, user_api="blas"):
        caller = _blas_threads()
        clf.fit(X, y)
        after = _blas_threads()
    assert seen and all(threads == [1] * len(threads) for threads in seen[:5])  # the learning loop's steps
    assert after == caller
