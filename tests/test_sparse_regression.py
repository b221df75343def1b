"""``GPRegressor(inducing_points=M)`` with the default likelihood: sparse regression with Gaussian noise in
closed form, scored by Titsias' collapsed bound (:mod:`relaxep.estimators._sparse_gaussian`), the noise learned
with the kernel.

Ground truths: with the inducing inputs at the training inputs and no jitter on ``K_uu``, Q = K and the bound is
the exact evidence, so the model is the dense closed form (``GPRegressor(likelihood=Gaussian(s))``) to rounding;
at any inducing inputs the bound and the predictive are Titsias' formulas written with ``n x n`` matrices; the
gradients against central differences of the bound.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import Gaussian, GPRegressor
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators.regressor import DEFAULT_NOISE
from relaxep.posterior import SparsePrior

KERNEL = C(1.5) * RBF(0.8)
NOISE = 0.02


def _truth(X):
    return np.sin(2.0 * X[:, 0]) + 0.5 * np.cos(X[:, 1])


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.uniform(-2.5, 2.5, size=(40, 2))
    y = _truth(X) + np.sqrt(NOISE) * rng.normal(size=40)
    return X, y, rng.uniform(-2.5, 2.5, size=(25, 2))


def at(theta):
    """A callable optimizer (scikit-learn's convention) that puts the hyperparameters at ``theta``: the sparse
    default's noise at a chosen value through the public API."""

    def optimizer(obj_func, x0, bounds):
        return np.asarray(theta, dtype=float), float(obj_func(theta, eval_gradient=False))

    return optimizer


THETA = np.append(KERNEL.theta, np.log(NOISE))


@pytest.fixture
def no_kuu_jitter(monkeypatch):
    """FITC priors without the relative jitter on K_uu (with Z = X: Q = K, G = 0 exactly)."""

    def from_kernel(cls, kernel, X, Z, noise=0.0, **options):
        return cls(X, Z, kernel, latent_noise=noise, jitter=0.0, **options)

    monkeypatch.setattr(SparsePrior, "from_kernel", classmethod(from_kernel))


def _sparse_default(Z, **params):
    return GPRegressor(KERNEL, inducing_points=Z, learn_inducing_points=False, optimizer=at(THETA), **params)


def _central_differences(f, x, h=1e-5):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


def test_with_inducing_inputs_at_the_data_it_is_the_dense_closed_form(data, no_kuu_jitter):
    """Z = X (not learned), no K_uu jitter: predictions, std, covariance, evidence and its gradient are the dense
    model's at the same kernel and noise; the gradient also against central differences."""
    X, y, Xt = data
    sparse = _sparse_default(X).fit(X, y)
    dense = GPRegressor(KERNEL, likelihood=Gaussian(NOISE), optimizer=None).fit(X, y)
    assert sparse.kernel_.theta == pytest.approx(KERNEL.theta) and sparse.likelihood_.noise == pytest.approx(NOISE)
    (m_s, s_s), (m_d, s_d) = sparse.predict(Xt, return_std=True), dense.predict(Xt, return_std=True)
    np.testing.assert_allclose(m_s, m_d, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(s_s, s_d, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(sparse.predict(Xt, return_cov=True)[1], dense.predict(Xt, return_cov=True)[1], atol=1e-9)
    assert sparse.log_marginal_likelihood_value_ == pytest.approx(dense.log_marginal_likelihood_value_, rel=1e-9)
    assert sparse.result_.status == "converged" and sparse.result_.n_sweeps == 0

    theta = THETA + np.array([0.3, -0.2, 0.5])  # away from the fit: the evidence as a function
    lml_s, grad_s = sparse.log_marginal_likelihood(theta, eval_gradient=True)
    lml_d, grad_d = dense.log_marginal_likelihood(theta, eval_gradient=True)
    assert lml_s == pytest.approx(lml_d, rel=1e-9)
    np.testing.assert_allclose(grad_s, grad_d, rtol=1e-7, atol=1e-8)
    fd = _central_differences(sparse.log_marginal_likelihood, theta)
    np.testing.assert_allclose(grad_s, fd, rtol=1e-6, atol=1e-6)


def test_at_fewer_inducing_inputs_it_is_titsias_bound_and_its_posterior(data, no_kuu_jitter):
    """M < n inducing inputs: the evidence is F = log N(y | 0, Q + s I) - tr(K - Q) / 2s, the predictive mean and
    variance those of q(u) = N(s^-1 S K_uf y, S), S = K_uu (K_uu + K_uf K_fu / s)^-1 K_uu, all written densely;
    the bound is below the exact evidence, and its gradient at another theta is the bound's central differences."""
    from scipy.stats import multivariate_normal

    X, y, Xt = data
    Z = X[::4].copy()
    closed = _sparse_default(Z).fit(X, y)
    K, K_uf, K_uu, K_su = KERNEL(X), KERNEL(Z, X), KERNEL(Z), KERNEL(Xt, Z)
    Q = K_uf.T @ np.linalg.solve(K_uu, K_uf)
    bound = multivariate_normal(np.zeros(len(y)), Q + NOISE * np.eye(len(y))).logpdf(y) - np.trace(K - Q) / (2 * NOISE)
    assert closed.log_marginal_likelihood_value_ == pytest.approx(bound, rel=1e-8)
    exact = multivariate_normal(np.zeros(len(y)), K + NOISE * np.eye(len(y))).logpdf(y)
    assert closed.log_marginal_likelihood_value_ < exact
    P = K_uu + K_uf @ K_uf.T / NOISE
    mean = K_su @ np.linalg.solve(P, K_uf @ y) / NOISE
    S = K_uu @ np.linalg.solve(P, K_uu)
    A = np.linalg.solve(K_uu, K_su.T)
    var = KERNEL.diag(Xt) - np.einsum("ij,ji->i", K_su, A) + np.einsum("ji,jk,ki->i", A, S, A)
    m, sd = closed.predict(Xt, return_std=True)
    np.testing.assert_allclose(m, mean, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(sd**2, var, rtol=1e-6, atol=1e-9)
    theta = THETA + np.array([-0.2, 0.3, 0.4])
    grad = closed.log_marginal_likelihood(theta, eval_gradient=True)[1]
    np.testing.assert_allclose(grad, _central_differences(closed.log_marginal_likelihood, theta), rtol=1e-6, atol=1e-6)


def test_the_gradient_in_the_inducing_inputs_is_the_evidences(data):
    """The search's gradient in (kernel, noise, Z) against central differences of the closed-form evidence."""
    X, y, _ = data
    model = _sparse_default(X[::5].copy()).fit(X, y).model_
    hyper = HyperVector(model.kernel_, model.likelihood, model.Z)
    x = hyper.x0 + 0.05 * np.random.default_rng(0).normal(size=hyper.size)
    _, grad = model.evidence(x, True, X, y, hyper)
    fd = _central_differences(lambda v: model.evidence(v, False, X, y, hyper)[0], x)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5)


def test_the_defaults_fit_by_l_bfgs_b_and_by_the_stochastic_search(data):
    """``GPRegressor(inducing_points=20)`` with nothing else: it fits, learns the noise (``likelihood_``) with the
    kernel and the inducing inputs and predicts the truth; the same on the stochastic search's path."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-2.5, 2.5, size=(400, 2))
    y = _truth(X) + 0.1 * rng.normal(size=400)
    Xt = rng.uniform(-2.0, 2.0, size=(200, 2))
    for params in ({"optimizer_maxiter": 40}, {"optimizer": "stochastic", "optimizer_maxiter": 400}):
        reg = GPRegressor(inducing_points=20, random_state=0, **params).fit(X, y)
        noise = reg.likelihood_.noise * reg._y_train_std**2  # (learned on the standardised targets)
        assert isinstance(reg.likelihood_, Gaussian) and 0.002 < noise < 0.05  # from 0.1 y.var(); truth 0.01
        assert reg.kernel_.theta != pytest.approx(C(1.0).theta.tolist() + RBF(1.0).theta.tolist())
        assert reg.inducing_points_.shape == (20, 2) and reg.result_.n_sweeps == 0
        mean, std = reg.predict(Xt, return_std=True)
        rmse = np.sqrt(np.mean((mean - _truth(Xt)) ** 2))
        assert rmse < 0.05, (params, rmse)
        low, high = reg.predict_interval(Xt)
        np.testing.assert_allclose(high - low, 2 * 1.959964 * np.sqrt(std**2 + noise), rtol=1e-5)
        assert reg.sample_y(Xt[:5], 3).shape == (5, 3)


def test_normalize_y_and_the_refusals(data):
    """normalize_y: the model of (y - mean) / std; multi-output y and an array alpha refused with inducing points;
    ``rule`` without a likelihood still refused; ``inducing_points=None`` still the dense closed form."""
    X, y, Xt = data
    a = _sparse_default(X[::4].copy(), normalize_y=True).fit(X, 3.0 * y + 7.0)
    b = _sparse_default(X[::4].copy()).fit(X, (y - y.mean()) / y.std())
    np.testing.assert_allclose(a.predict(Xt), 7.0 + 3.0 * y.std() * b.predict(Xt) + 3.0 * y.mean(), rtol=1e-9)
    with pytest.raises(ValueError, match="outputs: with inducing_points"):
        GPRegressor(inducing_points=5).fit(X, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="alpha must be a scalar with inducing_points"):
        GPRegressor(inducing_points=5, alpha=np.full(len(y), 0.1)).fit(X, y)
    with pytest.raises(ValueError, match="rule: give a likelihood"):
        GPRegressor(inducing_points=5, rule="auto").fit(X, y)
    assert not hasattr(GPRegressor(optimizer=None).fit(X, y), "inducing_points_")


def test_the_dask_regressors_default_is_fitc_by_ep(data, dask_client):
    """DaskGPRegressor's default likelihood (a Gaussian, by EP on the shards) gives GPRegressor's FITC model, the
    explicit ``likelihood=Gaussian(DEFAULT_NOISE)``, at the same inducing inputs and hyperparameters."""
    da = pytest.importorskip("dask.array")  # (dask_client skips without distributed)
    from relaxep.estimators.dask import DaskGPRegressor

    X, y, Xt = data
    Z = X[::4].copy()
    start = Gaussian(DEFAULT_NOISE)  # (the default likelihood's start)
    local = GPRegressor(KERNEL, likelihood=start, inducing_points=Z, optimizer=None, tol=1e-10).fit(X, y)
    Xd, yd = da.from_array(X, chunks=(20, 2)), da.from_array(y, chunks=20)
    dask = DaskGPRegressor(dask_client, KERNEL, inducing_points=Z, optimizer=None, tol=1e-10).fit(Xd, yd)
    for u, v in zip(dask.predict(Xt, return_std=True), local.predict(Xt, return_std=True), strict=True):
        np.testing.assert_allclose(u, v, rtol=1e-7, atol=1e-9)
    assert dask.log_marginal_likelihood_value_ == pytest.approx(local.log_marginal_likelihood_value_, rel=1e-8)


def test_a_row_beyond_every_inducing_input_without_jitter_still_fits():
    """alpha=0 and a training row whose kernel to every inducing input underflows: its DTC marginal would be 0; the
    floor keeps the fit (FITC's diagonal did so before), and the far row's prediction is the prior's."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2.0, 2.0, size=(30, 1))
    X[0] = 200.0
    y = np.sin(X[:, 0])
    reg = GPRegressor(C(1.0) * RBF(0.5), inducing_points=X[1:11], alpha=0.0, optimizer=None).fit(X, y)
    assert reg.result_.status == "converged" and np.isfinite(reg.log_marginal_likelihood_value_)
    mean, std = reg.predict(X[:1], return_std=True)
    assert mean[0] == pytest.approx(0.0, abs=1e-12) and std[0] == pytest.approx(1.0, rel=1e-6)
