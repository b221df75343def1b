"""One kernel per class in the joint multi-class model (a ``CompoundKernel`` of ``C`` kernels).

Ground truth: the evidence gradient against central finite differences of EP's evidence in each class's
hyperparameters; ``C`` equal class kernels against the shared kernel (one model, so one evidence, one
gradient summed over the classes, one predictive); the predictive against :func:`infer_multiclass` run on the
``(C, n, n)`` stack by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, CompoundKernel
from sklearn.gaussian_process.kernels import ConstantKernel as CK

from relaxep import GPClassifier
from relaxep.multiclass import evidence_gradient, infer_multiclass


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(3)
    centres = np.array([[0.0, 1.2], [-1.0, -0.6], [1.0, -0.6]])
    y = np.repeat(np.arange(3), 8)
    X = centres[y] + 0.8 * rng.standard_normal((24, 2))
    return X, y


def _class_kernels():
    return CompoundKernel([CK(2.0) * RBF(0.7), CK(1.0) * RBF(1.3), CK(4.0) * RBF(1.0)])


def _stack(kernel, X, jitter=1e-6):
    return np.stack([k(X) + jitter * np.eye(len(X)) for k in kernel.kernels])


def test_the_per_class_gradient_against_finite_differences(problem):
    X, y = problem
    kernel = _class_kernels()
    res = infer_multiclass(_stack(kernel, X), y, tol=1e-11, max_sweeps=3000)
    grads = [k(X, eval_gradient=True)[1] for k in kernel.kernels]
    g = evidence_gradient(res, grads)
    assert g.shape == (6,)
    h = 1e-4
    theta = np.concatenate([k.theta for k in kernel.kernels])
    for j in range(6):
        values = []
        for sign in (1, -1):
            t = theta.copy()
            t[j] += sign * h
            moved = CompoundKernel([k.clone_with_theta(t[2 * c : 2 * c + 2]) for c, k in enumerate(kernel.kernels)])
            values.append(infer_multiclass(_stack(moved, X), y, tol=1e-11, max_sweeps=3000).log_evidence)
        fd = (values[0] - values[1]) / (2 * h)
        assert abs(g[j] - fd) < 1e-4 * (1 + abs(fd)), (j, g[j], fd)


def test_equal_class_kernels_are_the_shared_kernel(problem):
    X, y = problem
    shared = CK(2.0) * RBF(0.9)
    clf_shared = GPClassifier(kernel=shared, optimizer=None, multi_class="joint").fit(X, y)
    clf_class = GPClassifier(kernel=CompoundKernel([shared] * 3), optimizer=None).fit(X, y)
    assert clf_class.log_marginal_likelihood_value_ == pytest.approx(clf_shared.log_marginal_likelihood_value_)
    np.testing.assert_allclose(clf_class.predict_proba(X[:5]), clf_shared.predict_proba(X[:5]), rtol=1e-8)
    _, g_shared = clf_shared.log_marginal_likelihood(shared.theta, eval_gradient=True)
    _, g_class = clf_class.log_marginal_likelihood(np.tile(shared.theta, 3), eval_gradient=True)
    np.testing.assert_allclose(g_class.reshape(3, 2).sum(0), g_shared, rtol=1e-6, atol=1e-8)


def test_the_per_class_predictive_is_the_joint_model_at_the_class_kernels(problem):
    X, y = problem
    kernel = _class_kernels()
    clf = GPClassifier(kernel=kernel, optimizer=None).fit(X, y)
    ref = infer_multiclass(_stack(kernel, X), y, tol=clf.tol)
    Xs = X[:4] + 0.1
    K_star = np.stack([k(Xs, X) for k in kernel.kernels])
    k_diag = np.stack([k.diag(Xs) + 1e-6 for k in kernel.kernels])
    np.testing.assert_allclose(clf.predict_proba(Xs), ref.predict_proba(K_star, k_diag), rtol=1e-6)


def test_per_class_kernels_are_learned_by_the_joint_evidence(problem):
    X, y = problem
    start = CompoundKernel([CK(1.0) * RBF(1.0) for _ in range(3)])
    clf = GPClassifier(kernel=start, random_state=0, prior=None).fit(X, y)
    assert isinstance(clf.kernel_, CompoundKernel) and clf.kernel_.theta.shape == (6,)
    lml, grad = clf.log_marginal_likelihood(clf.kernel_.theta, eval_gradient=True)
    assert lml == pytest.approx(clf.log_marginal_likelihood_value_, abs=1e-3)
    bounds = clf.kernel_.bounds
    inside = (clf.kernel_.theta > bounds[:, 0] + 1e-3) & (clf.kernel_.theta < bounds[:, 1] - 1e-3)
    assert np.all(np.abs(grad[inside]) < 0.25)  # a stationary point, to the search's stopping rule
    fixed = GPClassifier(kernel=start, optimizer=None).fit(X, y)
    assert clf.log_marginal_likelihood_value_ >= fixed.log_marginal_likelihood_value_ - 1e-6
    assert start.theta == pytest.approx(np.zeros(6))  # the user's kernel is not modified


@pytest.mark.parametrize(
    "kernel, match",
    [
        (CompoundKernel([CK(1.0) * RBF(1.0)] * 2), "3 classes"),
        (CompoundKernel([CK(1.0) * RBF(1.0)] * 4), "3 classes"),
    ],
)
def test_the_number_of_class_kernels_is_checked(problem, kernel, match):
    X, y = problem
    with pytest.raises(ValueError, match=match):
        GPClassifier(kernel=kernel).fit(X, y)


def test_a_compound_kernel_is_refused_where_there_is_one_latent(problem):
    X, y = problem
    with pytest.raises(ValueError, match="kernel"):
        GPClassifier(kernel=CompoundKernel([CK(1.0) * RBF(1.0)] * 2)).fit(X, (y > 0).astype(int))
    with pytest.raises(ValueError, match="kernel"):
        GPClassifier(kernel=CompoundKernel([CK(1.0) * RBF(1.0)] * 3), multi_class="one_vs_rest").fit(X, y)
