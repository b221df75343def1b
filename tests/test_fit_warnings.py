"""Models report, estimators warn: every ConvergenceWarning of a fit names the caller's line.

A fit that stops at ``max_sweeps`` warns; the warning's ``filename`` must be this file on the
dense, sparse and stochastic paths of both estimators (a warning that names ``classifier.py`` or
``_models.py`` sends the user to the library instead of their own call).  Bad parameters are refused
at the door with the parameter's name.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import EP, GPClassifier, GPRegressor, StudentT

KERNEL = C(1.0, "fixed") * RBF(1.0, "fixed")


def _data(n: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (n, 1))
    labels = (np.sin(2 * X[:, 0]) + 0.3 * rng.standard_normal(n) > 0).astype(int)
    targets = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    targets[::7] += 4.0
    return X, labels, targets


PATHS = {
    "dense": dict(),
    "sparse": dict(inducing_points=10, optimizer=None),
    "sparse-learned": dict(inducing_points=10, optimizer_maxiter=2),
    "stochastic": dict(inducing_points=10, optimizer="stochastic", optimizer_maxiter=3),
}


def _caught(fit) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [w for w in caught if issubclass(w.category, ConvergenceWarning)]


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("estimator", ["classifier", "regressor"])
def test_the_non_convergence_warning_names_the_callers_file(estimator: str, path: str) -> None:
    X, labels, targets = _data()
    options = dict(rule=EP(), max_sweeps=1, random_state=0, **PATHS[path])
    if estimator == "classifier":
        model, y = GPClassifier(KERNEL, **options), labels
    else:
        model, y = GPRegressor(KERNEL, likelihood=StudentT(), **options), targets
    caught = _caught(lambda: model.fit(X, y))
    unconverged = [w for w in caught if "did not converge" in str(w.message)]
    assert unconverged, [str(w.message) for w in caught]
    assert all(w.filename == __file__ for w in caught), [(w.filename, w.lineno) for w in caught]


def test_a_hyperparameter_at_a_bound_is_warned_at_the_callers_line() -> None:
    X, labels, targets = _data()
    bounded = C(1.0, (1e-5, 1e-5 * 1.0001)) * RBF(1.0)  # the constant has nowhere to go: at its bound
    for model, y in ((GPClassifier(bounded), labels), (GPRegressor(bounded), targets)):
        caught = _caught(lambda model=model, y=y: model.fit(X, y))
        at_bound = [w for w in caught if "close to the specified" in str(w.message)]
        assert at_bound
        assert all(w.filename == __file__ for w in at_bound)


@pytest.mark.parametrize("make", [GPClassifier, GPRegressor])
@pytest.mark.parametrize(
    ("params", "name"),
    [
        (dict(likelihood="probit"), "likelihood"),
        (dict(likelihood=EP()), "likelihood"),
        (dict(rule="ep"), "rule"),
        (dict(rule=StudentT()), "rule"),
        (dict(kernel="rbf"), "kernel"),
    ],
)
def test_a_wrong_type_is_refused_at_the_door_naming_the_parameter(make, params: dict, name: str) -> None:
    X, labels, targets = _data(20)
    y = labels if make is GPClassifier else targets
    with pytest.raises(TypeError, match=name) as info:
        make(**params).fit(X, y)
    assert "relaxep/" not in str(info.value)
    assert not isinstance(info.value, AttributeError)


def test_a_regression_likelihood_is_refused_for_classification() -> None:
    X, labels, _ = _data(20)
    with pytest.raises(TypeError, match=r"^likelihood=StudentT\(.*\) is for real targets: use GPRegressor"):
        GPClassifier(likelihood=StudentT()).fit(X, labels)  # (a ValueError too: tests/test_likelihood_checks.py)
