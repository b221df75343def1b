"""GPOrdinalClassifier: scikit-learn's conventions, the exact special case of two classes (the probit
classifier), the evidence gradient against finite differences, and its refusals."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.utils.estimator_checks import parametrize_with_checks

from relaxep import GPClassifier, GPOrdinalClassifier, OrdinalProbit, Probit

_CHECKED = GPOrdinalClassifier(
    RBF(1.0, "fixed"), OrdinalProbit(noise=1.0, noise_bounds="fixed"), optimizer=None, max_sweeps=100, tol=1e-3
)


@parametrize_with_checks([_CHECKED])
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def _ordinal_problem(n=120, seed=0, cuts=(-0.6, 0.5), noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 1))
    f = np.sin(1.3 * X[:, 0]) + 0.3 * X[:, 0]
    y = np.searchsorted(np.asarray(cuts), f + noise * rng.normal(size=n))
    return X, y


def test_two_ordered_classes_are_the_probit_classifier():
    """K = 2, cut-point b, noise 1: P(y = 1 | f) = 1 - Phi(b - f) = Phi(f - b); with b = 0 this is
    GPClassifier's Probit (an exact special case, at a fixed kernel)."""
    X, y = _ordinal_problem(cuts=(0.0,))
    kernel = C(1.3, "fixed") * RBF(0.9, "fixed")
    ordinal = GPOrdinalClassifier(kernel, OrdinalProbit(cut_points=[0.0], noise=1.0), optimizer=None, tol=1e-10).fit(
        X, y
    )
    probit = GPClassifier(kernel, Probit(), optimizer=None, tol=1e-10).fit(X, y)
    X_test = np.linspace(-3.5, 3.5, 41)[:, None]
    np.testing.assert_allclose(ordinal.predict_proba(X_test), probit.predict_proba(X_test), rtol=1e-8, atol=1e-12)
    assert ordinal.log_marginal_likelihood_value_ == pytest.approx(probit.log_marginal_likelihood_value_, rel=1e-9)
    np.testing.assert_array_equal(ordinal.predict(X_test), probit.predict(X_test))


def test_the_evidence_gradient_in_the_kernel_and_the_cut_points_is_the_finite_difference():
    X, y = _ordinal_problem(n=80, seed=1)
    model = GPOrdinalClassifier(C(1.0) * RBF(1.0), OrdinalProbit(cut_points=[-0.5, 0.4], noise=0.5),
                                optimizer=None, tol=1e-10).fit(X, y)  # fmt: skip
    theta = np.concatenate([model.kernel_.theta, model.likelihood_.theta])
    _, grad = model.log_marginal_likelihood(theta, eval_gradient=True)
    step = 1e-5
    for j in range(theta.size):
        up, down = theta.copy(), theta.copy()
        up[j] += step
        down[j] -= step
        fd = (model.log_marginal_likelihood(up) - model.log_marginal_likelihood(down)) / (2 * step)
        assert grad[j] == pytest.approx(fd, rel=1e-4, abs=1e-5), j


def test_learned_cut_points_stay_ordered_and_predict_the_classes():
    X, y = _ordinal_problem(n=150, seed=2)
    labels = np.array([1, 3, 7])[y]  # any sortable labels: the classes are their sorted order
    model = GPOrdinalClassifier(random_state=0).fit(X, labels)
    np.testing.assert_array_equal(model.classes_, [1, 3, 7])
    assert np.all(np.diff(model.likelihood_.cut_points) > 0)
    p = model.predict_proba(X)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(model.predict(X), model.classes_[np.argmax(p, axis=1)])
    X_test, y_test = _ordinal_problem(n=400, seed=3)
    mae = np.mean(np.abs(np.searchsorted(model.classes_, model.predict(X_test)) - y_test))
    assert mae < 0.3  # the Bayes rate of this problem (noise 0.3 around cut-points 1.1 apart) is far lower


def test_bad_input_is_refused_by_name():
    X, y = _ordinal_problem()
    with pytest.raises(ValueError, match=r"^y: .*two classes"):
        GPOrdinalClassifier(optimizer=None).fit(X, np.zeros(len(y)))
    with pytest.raises(ValueError, match=r"^likelihood: 1 cut-points for 3 classes"):
        GPOrdinalClassifier(likelihood=OrdinalProbit(cut_points=[0.0]), optimizer=None).fit(X, y)
    with pytest.raises(TypeError, match="likelihood must be"):
        GPOrdinalClassifier(likelihood=Probit()).fit(X, y)
    model = GPOrdinalClassifier(optimizer=None).fit(X, y)
    with pytest.raises(ValueError, match=r"^y contains labels absent at fit time: \[5\]"):
        model.score(X[:3], [0, 1, 5])
    assert 0.0 <= model.score(X, y) <= 1.0


def _spread_model():
    """A fitted model whose middle class is narrow (cut-points -0.05, 0.05): near the boundary the predictive
    puts about 0.48 on each outer class, so the mode is an outer class and the median the middle one."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(60, 1))
    y = np.searchsorted([-0.05, 0.05], np.sin(X[:, 0]) + 0.5 * rng.normal(size=60))
    likelihood = OrdinalProbit(cut_points=[-0.05, 0.05], noise=1.0, noise_bounds="fixed", cut_points_bounds="fixed")
    return GPOrdinalClassifier(RBF(1.0, "fixed"), likelihood, optimizer=None).fit(X, np.array([10, 20, 30])[y])


def test_the_median_decision_is_the_smallest_class_of_cumulative_probability_one_half():
    model = _spread_model()
    X_test = np.linspace(-3.0, 3.0, 601)[:, None]
    proba = model.predict_proba(X_test)
    expected = []
    for row in proba:  # by hand: walk up the classes until half the probability is below
        k, total = 0, row[0]
        while total < 0.5:
            k += 1
            total += row[k]
        expected.append(model.classes_[k])
    mode = model.predict(X_test)
    median = model.set_params(decision="median").predict(X_test)
    np.testing.assert_array_equal(median, expected)
    np.testing.assert_array_equal(mode, model.classes_[np.argmax(proba, axis=1)])
    differ = mode != median
    assert differ.sum() >= 3  # the rows built for it: an outer class most probable, the middle one the median
    assert np.all(median[differ] == 20) and np.all(np.isin(mode[differ], [10, 30]))
    assert np.all(proba[differ].max(axis=1) < 0.5)


def test_the_default_decision_is_the_mode_and_a_bad_one_is_refused_by_name():
    assert GPOrdinalClassifier().decision == "mode"
    X, y = _ordinal_problem(n=40)
    model = GPOrdinalClassifier(optimizer=None).fit(X, y)
    np.testing.assert_array_equal(model.predict(X), model.classes_[np.argmax(model.predict_proba(X), axis=1)])
    for bad in ("mean", "Median", None, 0.5):
        with pytest.raises(ValueError, match=r"^decision must be 'mode' or 'median', got "):
            GPOrdinalClassifier(optimizer=None, decision=bad).fit(X, y)
        with pytest.raises(ValueError, match=r"^decision must be 'mode' or 'median', got "):
            model.set_params(decision=bad).predict(X)
