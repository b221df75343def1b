"""Small fitted models for the leave-one-out tests (tests/test_loo.py): each likelihood and rule at a fixed kernel
(the leave-one-out is at the fitted hyperparameters; no search, for speed), data generated from fixed seeds."""

from __future__ import annotations

import numpy as np
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import (
    EP,
    FractionalEP,
    GPClassifier,
    GPOrdinalClassifier,
    GPPreferenceLearner,
    GPRegressor,
    NegativeBinomial,
    OrdinalProbit,
    Poisson,
    PowerEP,
    Probit,
    RelaxedEP,
    StudentT,
    Tobit,
)
from relaxep.datasets import load_synth

TOL = 1e-8


def synth(n: int | None = None, rule=None, inducing_points=None, optimizer=None) -> GPClassifier:
    """Probit GP classification on Ripley's synth.tr (``n`` random rows, seed 0), kernel as GPstuff learns it."""
    X, y = load_synth("train")
    if n is not None:
        rows = np.sort(np.random.default_rng(0).choice(X.shape[0], n, replace=False))
        X, y = X[rows], y[rows]
    kernel = C(1.0) * RBF([1.0, 1.0]) if optimizer else C(3.79**2) * RBF([0.427, 0.859])
    return GPClassifier(
        kernel, likelihood=Probit(), rule=rule, tol=TOL, optimizer=optimizer, inducing_points=inducing_points,
        learn_inducing_points=False, max_sweeps=1000, prior=None,  # (learned: by ML-II, as the kernel above was)
    ).fit(X, y)  # fmt: skip


def _wave(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-3.0, 3.0, n))[:, None]
    return X, np.sin(2.0 * X[:, 0]), rng


def student_t(n: int = 50, rule=None) -> GPRegressor:
    """Student-t regression: sin(2x) + 0.1 noise, every tenth row 2-4 units off."""
    X, f, rng = _wave(n, 1)
    y = f + 0.1 * rng.normal(size=n)
    y[::10] += rng.choice([-1.0, 1.0], size=y[::10].size) * rng.uniform(2.0, 4.0, size=y[::10].size)
    kernel = C(1.0) * RBF(0.7)
    return GPRegressor(kernel, likelihood=StudentT(4.0, 0.1), rule=rule, optimizer=None, tol=TOL).fit(X, y)


def poisson(n: int = 50) -> GPRegressor:
    X, f, rng = _wave(n, 2)
    y = rng.poisson(np.exp(1.0 + f))
    return GPRegressor(C(1.0) * RBF(1.0), likelihood=Poisson(), optimizer=None, tol=TOL).fit(X, y)


def negative_binomial(n: int = 50) -> GPRegressor:
    X, f, rng = _wave(n, 3)
    y = rng.negative_binomial(5, 5.0 / (5.0 + np.exp(1.0 + f)))
    model = GPRegressor(C(1.0) * RBF(1.0), likelihood=NegativeBinomial(5.0), optimizer=None, tol=TOL)
    return model.fit(X, y)


def tobit(n: int = 50) -> GPRegressor:
    """Gaussian noise 0.2, values below -0.5 censored there."""
    X, f, rng = _wave(n, 4)
    y = np.maximum(f + 0.2 * rng.normal(size=n), -0.5)
    model = GPRegressor(C(1.0) * RBF(1.0), likelihood=Tobit(lower=-0.5, noise=0.04), optimizer=None, tol=TOL)
    return model.fit(X, y)


def ordinal(n: int = 50) -> GPOrdinalClassifier:
    X, f, rng = _wave(n, 5)
    y = np.digitize(f + 0.3 * rng.normal(size=n), [-0.5, 0.5])
    likelihood = OrdinalProbit(cut_points=[-0.5, 0.5], noise=0.3)
    return GPOrdinalClassifier(C(1.0) * RBF(1.0), likelihood=likelihood, optimizer=None, tol=TOL).fit(X, y)


def preference(n_items: int = 20, n_pairs: int = 50) -> GPPreferenceLearner:
    rng = np.random.default_rng(6)
    X = rng.uniform(-2.0, 2.0, (n_items, 1))
    pairs = np.array([rng.choice(n_items, 2, replace=False) for _ in range(n_pairs)])
    u = np.sin(2.0 * X[:, 0])
    better = u[pairs[:, 0]] + 0.3 * rng.normal(size=n_pairs) > u[pairs[:, 1]]
    pairs = np.where(better[:, None], pairs, pairs[:, ::-1])
    return GPPreferenceLearner(C(1.0) * RBF(1.0), optimizer=None, tol=TOL).fit(X, pairs)


RULES = {
    "EP": EP(),
    "PowerEP(0.8)": PowerEP(0.8),
    "FractionalEP(0.5)": FractionalEP(0.5),
    "RelaxedEP(10)": RelaxedEP(10.0),
}
