"""``GPRegressor``: scikit-learn's model exactly with the Gaussian likelihood, EP's with the robust ones.

Ground truth: scikit-learn's ``GaussianProcessRegressor`` and the closed form of GP regression
(Rasmussen & Williams eq. 2.23-2.24, 5.8), the exact special case of FITC with the inducing
inputs at the training inputs, and finite differences of the evidence for its gradient.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import linalg, stats
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import EP, FractionalEP, GPClassifier, GPRegressor, Probit, infer
from relaxep.likelihoods import Gaussian, StudentT

KERNEL = C(1.3) * RBF(0.8)


def _data(n=40, seed=0, outliers=0.0, d=1):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-3, 3, (n, d))
    f = np.sin(2 * X[:, 0])
    y = f + 0.1 * rng.randn(n)
    bad = rng.rand(n) < outliers
    y[bad] += rng.choice([-1, 1], bad.sum()) * rng.uniform(2, 5, bad.sum())
    return X, y, f


def _closed_form(K, Ks, Kss, y, noise):
    """GP regression written out: mean, covariance and log N(y | 0, K + noise I)."""
    A = K + noise * np.eye(len(y))
    mean = Ks @ np.linalg.solve(A, y)
    cov = Kss - Ks @ np.linalg.solve(A, Ks.T)
    return mean, cov, stats.multivariate_normal(np.zeros(len(y)), A).logpdf(y)


@pytest.mark.parametrize("normalize_y", [False, True])
def test_the_default_is_scikit_learns_model_to_1e8(normalize_y):
    X, y, _ = _data()
    Xt = np.linspace(-3.5, 3.5, 9)[:, None]
    ours = GPRegressor(KERNEL, alpha=0.05, optimizer=None, normalize_y=normalize_y).fit(X, y)
    ref = GaussianProcessRegressor(KERNEL, alpha=0.05, optimizer=None, normalize_y=normalize_y).fit(X, y)
    np.testing.assert_allclose(ours.predict(Xt), ref.predict(Xt), rtol=1e-8, atol=1e-10)
    for kw in ({"return_std": True}, {"return_cov": True}):
        for a, b in zip(ours.predict(Xt, **kw), ref.predict(Xt, **kw), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    theta = np.array([0.3, -0.4])
    lml, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    lml_ref, grad_ref = ref.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose([lml, *grad], [lml_ref, *grad_ref], rtol=1e-8)
    np.testing.assert_allclose(ours.sample_y(Xt, 3, random_state=1), ref.sample_y(Xt, 3, random_state=1), atol=1e-6)


def test_the_gaussian_likelihood_is_the_closed_form_and_its_noise_is_learned_as_a_white_kernel():
    X, y, _ = _data(60)
    Xt = np.linspace(-3, 3, 7)[:, None]
    K, Ks, Kss = KERNEL(X), KERNEL(Xt, X), KERNEL(Xt)
    fixed = GPRegressor(KERNEL, likelihood=Gaussian(0.02, "fixed"), optimizer=None).fit(X, y)
    mean, cov, lml = _closed_form(K, Ks, Kss, y, 0.02 + 1e-10)
    np.testing.assert_allclose(fixed.predict(Xt, return_cov=True)[1], cov, atol=1e-10)
    np.testing.assert_allclose(fixed.predict(Xt), mean, atol=1e-10)
    assert fixed.log_marginal_likelihood_value_ == pytest.approx(lml, abs=1e-8)
    learned = GPRegressor(C(1.0) * RBF(1.0), likelihood=Gaussian(0.1), prior=None).fit(X, y)  # (WhiteKernel's ML-II)
    white = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1)).fit(X, y)
    assert learned.likelihood_.noise == pytest.approx(white.kernel_.k2.noise_level, rel=1e-3)
    assert learned.log_marginal_likelihood_value_ == pytest.approx(white.log_marginal_likelihood_value_, abs=1e-6)


@pytest.mark.parametrize("rule", [EP(), FractionalEP(0.5), "auto"], ids=["EP", "FractionalEP", "auto"])
def test_ep_on_the_gaussian_likelihood_equals_the_closed_form(rule):
    X, y, _ = _data(50)
    Xt = np.linspace(-3, 3, 7)[:, None]
    lik = Gaussian(0.03)
    exact = GPRegressor(KERNEL, likelihood=lik, optimizer=None).fit(X, y)
    ep = GPRegressor(KERNEL, likelihood=lik, rule=rule, optimizer=None, tol=1e-8).fit(X, y)
    assert ep.result_.status == "converged"
    for kw in ({"return_std": True}, {"return_cov": True}):
        for a, b in zip(ep.predict(Xt, **kw), exact.predict(Xt, **kw), strict=True):
            np.testing.assert_allclose(a, b, atol=1e-7)
    theta = np.array([0.1, -0.2, np.log(0.05)])
    lml, grad = ep.log_marginal_likelihood(theta, eval_gradient=True)
    lml_ref, grad_ref = exact.log_marginal_likelihood(theta, eval_gradient=True)
    assert lml == pytest.approx(lml_ref, abs=1e-6)
    np.testing.assert_allclose(grad, grad_ref, rtol=1e-4, atol=1e-6)


def test_the_ep_evidence_gradient_in_the_student_t_scale_is_the_derivative_of_the_evidence():
    X, y, _ = _data(40, outliers=0.15)
    model = GPRegressor(KERNEL, likelihood=StudentT(4.0, 0.2), optimizer=None, tol=1e-9).fit(X, y)
    theta = np.array([0.2, -0.3, np.log(0.15)])
    _, grad = model.log_marginal_likelihood(theta, eval_gradient=True)
    h = 1e-5
    fd = [
        (model.log_marginal_likelihood(theta + h * e) - model.log_marginal_likelihood(theta - h * e)) / (2 * h)
        for e in np.eye(3)
    ]
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-5)


def test_student_t_ignores_outliers_that_pull_scikit_learns_fit():
    X, y, _ = _data(200, seed=3, outliers=0.15)
    Xt = np.linspace(-3, 3, 300)[:, None]
    ft = np.sin(2 * Xt[:, 0])
    robust = GPRegressor(C(1.0) * RBF(1.0), likelihood=StudentT(), normalize_y=True).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gauss = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), normalize_y=True).fit(X, y)
    assert robust.result_.status == "converged"
    rmse = np.sqrt(np.mean((robust.predict(Xt) - ft) ** 2))
    rmse_gauss = np.sqrt(np.mean((gauss.predict(Xt) - ft) ** 2))
    assert rmse < 0.5 * rmse_gauss


def test_sparse_with_inducing_inputs_at_the_training_inputs_is_the_dense_fit():
    """Z = X.  Exactly: FITC's prior is the dense matrix Q + diag(K - Q) (+ alpha), Q = K K_uu^-1 K with
    K_uu = K + j I, j = 1e-6 mean(diag K) (the jitter relaxep adds, inducing_factor); EP on it gives the
    sparse fit's evidence, and its sites give the FITC predictive written out (cov(f*, f) = Q_*f, var K_**),
    to 1e-9.  Approximately: the dense fit on K differs only by that jitter's effect (measured: mean
    1.3e-5, covariance 3e-6, evidence 5e-5)."""
    X, y, _ = _data(40, outliers=0.15)
    Xt = np.linspace(-3, 3, 7)[:, None]
    lik = StudentT(4.0, 0.2)
    dense = GPRegressor(KERNEL, likelihood=lik, optimizer=None, tol=1e-8).fit(X, y)
    sparse = GPRegressor(KERNEL, likelihood=lik, optimizer=None, tol=1e-8, inducing_points=X).fit(X, y)
    K = KERNEL(X)
    K_uu = K + 1e-6 * np.mean(np.diag(K)) * np.eye(len(y))
    Q = K @ linalg.solve(K_uu, K, assume_a="pos")
    K_fitc = Q + np.diag(np.diag(K - Q) + sparse.alpha)
    res = infer(K_fitc, y, lik, EP(), schedule="parallel", tol=1e-10, max_sweeps=200)
    assert res.converged and sparse.log_marginal_likelihood_value_ == pytest.approx(res.log_evidence, abs=1e-9)
    # the predictive from the sites (tau has negative entries: the form without T^-1)
    tau, nu = res.site_precision, res.site_mean_precision
    Q_star = KERNEL(Xt, X) @ linalg.solve(K_uu, K, assume_a="pos")
    B = tau[:, None] * K_fitc + np.eye(len(y))
    exact = Q_star @ linalg.solve(B, nu), KERNEL(Xt) - Q_star @ linalg.solve(B, tau[:, None] * Q_star.T)
    near = dense.predict(Xt, return_cov=True)
    for got, want, close in zip(sparse.predict(Xt, return_cov=True), exact, near, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
        np.testing.assert_allclose(got, close, rtol=0, atol=5e-5)
    assert sparse.log_marginal_likelihood_value_ == pytest.approx(dense.log_marginal_likelihood_value_, abs=2e-4)


def test_the_predictive_of_y_under_the_default_model_is_gaussian_with_alpha():
    X, y, _ = _data(30)
    Xt = np.linspace(-3, 3, 5)[:, None]
    model = GPRegressor(KERNEL, alpha=0.04, optimizer=None, normalize_y=True).fit(X, y)
    mean, std = model.predict(Xt, return_std=True)
    scale = np.sqrt(std**2 + 0.04 * np.std(y) ** 2)
    m, s = model.predict_y(Xt)
    np.testing.assert_allclose(m, mean)
    np.testing.assert_allclose(s, scale, rtol=1e-10)
    low, high = model.predict_interval(Xt, 0.9)
    np.testing.assert_allclose(low, stats.norm.ppf(0.05, mean, scale), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(high, stats.norm.ppf(0.95, mean, scale), rtol=1e-6, atol=1e-8)
    yt = np.sin(2 * Xt[:, 0])
    np.testing.assert_allclose(model.log_predictive_density(Xt, yt), stats.norm.logpdf(yt, mean, scale), atol=1e-8)


def test_bad_input_gets_a_clear_error():
    X, y, _ = _data(20)
    for bad in (np.r_[y[:-1], np.nan], np.r_[y[:-1], np.inf]):
        with pytest.raises(ValueError, match="y"):
            GPRegressor().fit(X, bad)
    with pytest.raises(TypeError, match="regression likelihood"):
        GPRegressor(likelihood=Probit()).fit(X, y)
    with pytest.raises(ValueError, match="alpha must be a scalar"):
        GPRegressor(likelihood=StudentT(), alpha=np.ones(20)).fit(X, y)
    with pytest.raises(ValueError, match="outputs"):
        GPRegressor(likelihood=StudentT()).fit(X, np.c_[y, y])
    with pytest.raises(ValueError, match="alpha must be a scalar or an array"):
        GPRegressor(alpha=np.ones(3)).fit(X, y)
    with pytest.raises(ValueError, match="alpha must be a finite"):
        GPRegressor(alpha=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="give a likelihood"):
        GPRegressor(rule=EP()).fit(X, y)
    with pytest.raises(TypeError, match="kernel"):
        GPRegressor(kernel="rbf").fit(X, y)
    model = GPRegressor(KERNEL, optimizer=None).fit(X, y)
    with pytest.raises(ValueError, match="theta must have"):
        model.log_marginal_likelihood(np.zeros(5))


def test_one_sample_and_a_constant_target_are_answered_as_scikit_learn_answers_them():
    X, y, _ = _data(20)
    one = GPRegressor(KERNEL, optimizer=None).fit(X[:1], y[:1])
    ref = GaussianProcessRegressor(KERNEL, optimizer=None).fit(X[:1], y[:1])
    np.testing.assert_allclose(one.predict(X, return_std=True), ref.predict(X, return_std=True), atol=1e-10)
    const = GPRegressor(KERNEL, likelihood=StudentT(), normalize_y=True).fit(X, np.full(20, 2.5))
    np.testing.assert_allclose(const.predict(X), 2.5, atol=1e-6)


def test_the_fit_leaves_the_users_arrays_and_the_classifiers_behaviour_alone():
    X, y, _ = _data(20)
    X0, y0 = X.copy(), y.copy()
    alpha = np.full(20, 1e-3)
    GPRegressor(KERNEL, alpha=alpha, normalize_y=True).fit(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(alpha, 1e-3)
    labels = np.where(y > 0, 1, -1)
    clf = GPClassifier(KERNEL, optimizer=None).fit(X, labels)
    assert clf.result_.status == "converged"
