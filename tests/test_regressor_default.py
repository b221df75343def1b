"""``GPRegressor()`` as typed: Gaussian noise learned with the kernel, the targets centred and scaled (issue 67).

Ground truth: GP regression written out in numpy (Rasmussen & Williams eq. 2.23-2.24) on the standardised targets,
the noise of simulated data, the exact special case of Titsias' bound with the inducing inputs at the training
inputs (the sparse default is then the dense one), and scikit-learn's GPR with a ``WhiteKernel`` on real data.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.model_selection import KFold

from relaxep import GPRegressor
from relaxep.estimators.regressor import DEFAULT_NOISE
from relaxep.likelihoods import Gaussian


def _noisy(n=200, noise=0.3, seed=0, offset=50.0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 1))
    return X, offset + 4.0 * np.sin(2 * X[:, 0]) + noise * rng.standard_normal(n)


def test_the_unfitted_default_at_its_start_is_gp_regression_on_the_standardised_targets():
    """optimizer=None keeps the start: C(1) * RBF(1) on (y - mean) / sd with noise variance DEFAULT_NOISE."""
    X, y = _noisy(40)
    Xt = np.linspace(-3.5, 3.5, 9)[:, None]
    model = GPRegressor(optimizer=None).fit(X, y)
    mu, sd = y.mean(), y.std()
    kernel = C(1.0) * RBF(1.0)
    A = kernel(X) + (DEFAULT_NOISE + 1e-10) * np.eye(len(y))
    Ks = kernel(Xt, X)
    mean = mu + sd * Ks @ np.linalg.solve(A, (y - mu) / sd)
    var = sd**2 * (1.0 - np.einsum("ij,ji->i", Ks, np.linalg.solve(A, Ks.T)))
    got_mean, got_std = model.predict(Xt, return_std=True)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-10)
    np.testing.assert_allclose(got_std, np.sqrt(var), rtol=1e-8)
    _, s = model.predict_y(Xt)  # the target's predictive adds the noise, in y's units
    np.testing.assert_allclose(s, np.sqrt(var + sd**2 * DEFAULT_NOISE), rtol=1e-8)


@pytest.mark.parametrize("noise", [0.1, 0.5])
def test_the_default_learns_the_noise_of_the_data(noise):
    X, y = _noisy(300, noise=noise, seed=1)
    model = GPRegressor().fit(X, y)
    learned = model.likelihood_.noise * model._y_train_std**2  # (normalised units back to y's)
    assert learned == pytest.approx(noise**2, rel=0.25)
    Xt = np.linspace(-2.5, 2.5, 50)[:, None]
    truth = 50.0 + 4.0 * np.sin(2 * Xt[:, 0])
    assert np.sqrt(np.mean((model.predict(Xt) - truth) ** 2)) < noise / 2  # it smooths: it does not interpolate


def test_with_the_inducing_inputs_at_the_training_inputs_the_sparse_default_is_the_dense_default():
    """Titsias' bound is the exact evidence at Z = X, so the two defaults are one model at every size."""
    X, y = _noisy(60, seed=2)
    Xt = np.linspace(-3, 3, 7)[:, None]
    dense = GPRegressor(optimizer=None).fit(X, y)
    sparse = GPRegressor(optimizer=None, inducing_points=X, learn_inducing_points=False).fit(X, y)
    np.testing.assert_allclose(sparse.predict(Xt), dense.predict(Xt), rtol=1e-6)
    assert sparse.log_marginal_likelihood_value_ == pytest.approx(
        dense.log_marginal_likelihood_value_, abs=2e-4
    )  # (K_uu jitter)
    learned = GPRegressor(inducing_points=X, learn_inducing_points=False).fit(X, y)
    both = GPRegressor().fit(X, y)
    assert learned.likelihood_.noise == pytest.approx(both.likelihood_.noise, rel=1e-3)


def test_a_kernel_of_the_users_keeps_scikit_learns_meaning():
    """Given a kernel, alpha is the noise and the targets are not rescaled (normalize_y="auto" is False)."""
    X, y = _noisy(30, seed=3)
    ours = GPRegressor(C(1.0) * RBF(1.0)).fit(X, y)
    ref = GaussianProcessRegressor(C(1.0) * RBF(1.0)).fit(X, y)
    assert ours.likelihood_ is None
    np.testing.assert_allclose(ours.predict(X), y, atol=1e-4)  # alpha = 1e-10: it interpolates, as scikit-learn's
    np.testing.assert_allclose(ours.predict(X[:5]), ref.predict(X[:5]), rtol=1e-4)
    np.testing.assert_array_equal(ours.y_train_, y)


def test_the_default_on_the_diabetes_data_is_scikit_learns_gpr_with_a_white_kernel():
    """The issue's case: the old default was worse than the mean (RMSE 83.8 against 76.9)."""
    X, y = load_diabetes(return_X_y=True)
    ours, theirs, mean = [], [], []
    for train, test in list(KFold(5, shuffle=True, random_state=0).split(X))[:2]:
        centre, scale = X[train].mean(axis=0), X[train].std(axis=0)
        Xtr, Xte = (X[train] - centre) / scale, (X[test] - centre) / scale
        ours.append(np.sqrt(np.mean((GPRegressor().fit(Xtr, y[train]).predict(Xte) - y[test]) ** 2)))
        ref = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), normalize_y=True).fit(Xtr, y[train])
        theirs.append(np.sqrt(np.mean((ref.predict(Xte) - y[test]) ** 2)))
        mean.append(np.sqrt(np.mean((y[train].mean() - y[test]) ** 2)))
    assert np.mean(ours) < 0.8 * np.mean(mean)
    assert np.mean(ours) <= 1.02 * np.mean(theirs)


def test_normalize_y_takes_true_false_or_auto():
    X, y = _noisy(20)
    with pytest.raises(ValueError, match="normalize_y"):
        GPRegressor(normalize_y="yes").fit(X, y)
    kept = GPRegressor(normalize_y=False).fit(X, y)  # the default model on y as given
    assert kept._y_train_mean == pytest.approx(0.0) and isinstance(kept.likelihood_, Gaussian)
    assert GPRegressor(normalize_y=True, kernel=C(1.0) * RBF(1.0)).fit(X, y)._y_train_mean == pytest.approx(y.mean())
