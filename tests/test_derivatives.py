"""Derivative observations and monotone GPs by EP (issue 66), against ground truth: the joint covariance of f and
its derivatives against finite differences of scikit-learn's kernels, observed derivatives in a Gaussian model
against exact Gaussian conditioning, monotone EP against elliptical slice sampling of the same virtual-observation
model, and the plain fit untouched where nothing is constrained."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr
from sklearn.gaussian_process.kernels import RBF, Matern, RationalQuadratic, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import Derivatives, Gaussian, GPClassifier, GPOrdinalClassifier, GPRegressor, Poisson, StudentT
from relaxep.mcmc import elliptical_slice
from relaxep.posterior.derivatives import joint_covariance, joint_gradient

KERNELS = [
    RBF(0.7),
    RBF([0.7, 1.3]),
    C(2.0) * Matern([0.8, 1.5], nu=1.5),
    Matern(0.9, nu=2.5),
    RationalQuadratic(0.8, alpha=1.7),
    C(0.5) * RBF(1.0) + C(1.3) * Matern(2.0, nu=2.5) + C(0.2),
]
H = 1e-4  # (the mixed second difference: truncation ~1e-8, rounding ~1e-16 / H^2)


def _finite_difference(kernel, a, b, d1, d2):
    """The covariance of the rows (a, d1) and (b, d2) by central differences of ``kernel`` (d = -1: a value)."""

    def k(x, z):
        return kernel(x[None], z[None])[0, 0]

    def step(i):
        e = np.zeros(a.shape[0])
        e[i] = H
        return e

    if d1 < 0 and d2 < 0:
        return k(a, b)
    if d1 < 0:
        return (k(a, b + step(d2)) - k(a, b - step(d2))) / (2 * H)
    if d2 < 0:
        return (k(a + step(d1), b) - k(a - step(d1), b)) / (2 * H)
    e1, e2 = step(d1), step(d2)
    return (k(a + e1, b + e2) - k(a + e1, b - e2) - k(a - e1, b + e2) + k(a - e1, b - e2)) / (4 * H * H)


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_the_joint_covariance_is_the_kernels_derivatives(kernel):
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(4, 2)), rng.normal(size=(3, 2))
    for d1 in (-1, 0, 1):
        for d2 in (-1, 0, 1):
            got = joint_covariance(kernel, A, np.full(4, d1), B, np.full(3, d2))
            want = np.array([[_finite_difference(kernel, a, b, d1, d2) for b in B] for a in A])
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * max(1.0, np.abs(want).max()))


def test_the_derivatives_variance_at_a_point_is_the_closed_form():
    # Matern 3/2 is once differentiable: the finite difference straddles its kink, so its closed form is checked
    ell, c = 0.8, 2.0
    x = np.array([[0.3, -1.0]])
    for kernel, var in [
        (C(c) * Matern(ell, nu=1.5), 3 * c / ell**2),
        (C(c) * Matern(ell, nu=2.5), 5 * c / (3 * ell**2)),
        (C(c) * RBF(ell), c / ell**2),
        (C(c) * RationalQuadratic(ell, alpha=1.7), c / ell**2),
    ]:
        K = joint_covariance(kernel, np.vstack([x, x]), np.array([0, 1]))
        np.testing.assert_allclose(np.diag(K), [var, var], rtol=1e-12)
        assert abs(K[0, 1]) < 1e-12


@pytest.mark.parametrize("kernel", [*KERNELS[:5], C(1.0) * RBF(1.0) + WhiteKernel(0.3)], ids=repr)
def test_the_gradient_in_theta_is_the_finite_difference(kernel):
    X = np.random.default_rng(1).normal(size=(6, 2))
    dims = np.array([-1, 0, 1, -1, 0, 1])
    got = joint_gradient(kernel, X, dims)
    for j in range(kernel.theta.size):
        up, down = kernel.theta.copy(), kernel.theta.copy()
        up[j] += 1e-6
        down[j] -= 1e-6
        want = (joint_covariance(kernel, X, dims, theta=up) - joint_covariance(kernel, X, dims, theta=down)) / 2e-6
        np.testing.assert_allclose(got[:, :, j], want, atol=1e-7)


def test_observed_derivatives_in_a_gaussian_model_are_exact_conditioning():
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, size=(15, 2))
    y = np.sin(X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(15)
    Xd = rng.uniform(-2, 2, size=(5, 2))
    dims = np.array([0, 1, 0, 1, 0])
    values = np.where(dims == 0, np.cos(Xd[:, 0]), 1.0)
    noise = np.full(5, 0.01)
    kernel = C(1.3) * RBF([1.1, 1.7])
    model = GPRegressor(kernel, alpha=0.01, optimizer=None).fit(X, y, derivatives=Derivatives(Xd, dims, values, noise))
    rows = np.vstack([X, Xd]), np.concatenate([np.full(15, -1), dims])
    K = joint_covariance(kernel, *rows) + np.diag(np.concatenate([np.full(15, 0.01), noise]))
    X_test = rng.uniform(-2, 2, size=(7, 2))
    Ks = joint_covariance(kernel, X_test, np.full(7, -1), *rows)
    mean = Ks @ np.linalg.solve(K, np.concatenate([y, values]))
    var = kernel.diag(X_test) - np.einsum("ij,ji->i", Ks, np.linalg.solve(K, Ks.T))
    got_mean, got_std = model.predict(X_test, return_std=True)
    np.testing.assert_allclose(got_mean, mean, atol=1e-10)
    np.testing.assert_allclose(got_std**2, var, atol=1e-10)


def _rising(n, seed):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0.0, 4.0, n))[:, None]
    return X, 0.5 * X[:, 0] + 0.4 * rng.standard_normal(n)


def _monotone_against_sampler(n_samples, n_chains):
    X, y = _rising(12, 3)
    model = GPRegressor(C(1.0) * RBF(0.6), likelihood=Gaussian(0.16), optimizer=None, monotone={0: 1}).fit(X, y)
    fitted = model.model_
    assert len(fitted.virtual_[0]) >= 1 and model.result_.status == "converged"
    r = model.result_
    mc = elliptical_slice(
        fitted.prior_.K, fitted.y, fitted.likelihood, n_samples=n_samples, n_burn=400, n_chains=n_chains,
        random_state=0, approx=(r.mean, r.cov),
    )  # fmt: skip
    return r, mc, np.sqrt(r.marginal_var)


def test_monotone_ep_is_elliptical_slice_sampling_of_the_same_model():
    r, mc, sd = _monotone_against_sampler(2000, 2)
    # every site's mean (the virtual derivatives' too) within 0.05 sd, up to three Monte Carlo errors (the slow
    # test below has the sampler's error small enough to hold 0.05 sd alone)
    assert np.all(np.abs(r.mean - mc.mean) <= 0.05 * sd + 3.0 * mc.mean_se)
    np.testing.assert_allclose(np.sqrt(mc.var[:12]), sd[:12], rtol=0.1)  # the values' sd


@pytest.mark.slow
def test_monotone_ep_is_elliptical_slice_sampling_within_005_sd():
    r, mc, sd = _monotone_against_sampler(8000, 4)
    assert np.all(mc.mean_se <= 0.05 / 3 * sd)  # (the check keeps three Monte Carlo errors)
    assert np.all(np.abs(r.mean - mc.mean) <= 0.05 * sd)


def test_monotone_regression_rises_where_the_plain_fit_wiggles():
    rng = np.random.default_rng(4)
    X = np.sort(rng.uniform(0.0, 5.0, 40))[:, None]
    y = np.log1p(X[:, 0]) + 0.3 * rng.standard_normal(40)
    kernel = C(1.0, "fixed") * RBF(
        0.8, "fixed"
    )  # (at 0.4 the plain fit falls on 20 of 39 steps: the cap of 10 leaves 8)
    grid = np.linspace(0.0, 5.0, 101)[:, None]
    plain = GPRegressor(kernel, likelihood=StudentT(4.0, 0.3), optimizer=None).fit(X, y)
    shaped = GPRegressor(kernel, likelihood=StudentT(4.0, 0.3), optimizer=None, monotone={0: 1}).fit(X, y)
    assert np.sum(np.diff(plain.predict(X)) < 0) > 3  # (the claim needs a fit that wiggles)
    assert np.sum(np.diff(shaped.predict(X)) < 0) == 0
    assert len(shaped.model_.virtual_[0]) <= np.ceil(0.25 * 40)
    truth = np.log1p(grid[:, 0])
    assert np.mean((shaped.predict(grid) - truth) ** 2) < np.mean((plain.predict(grid) - truth) ** 2)
    assert shaped.loo().pointwise.shape == (40,)
    assert isinstance(shaped.likelihood_, StudentT)  # (the values' likelihood, as learned)


def test_monotone_counts_with_exposure_and_classes():
    rng = np.random.default_rng(5)
    X = np.linspace(0.0, 10.0, 30)[:, None]
    exposure = rng.uniform(500, 1500, 30)
    counts = rng.poisson(exposure * np.exp(-6.0 + 0.2 * X[:, 0]))
    kernel = C(1.0, "fixed") * RBF(1.5, "fixed") + C(36.0, "fixed")
    shaped = GPRegressor(kernel, likelihood=Poisson(), optimizer=None, monotone={0: 1}).fit(
        X, counts, exposure=exposure
    )
    assert np.all(np.diff(shaped.latent_mean_and_variance(X)[0]) > 0)
    labels = np.where(rng.uniform(size=60) < ndtr(np.linspace(-3, 3, 60)), 1, 0)
    Xc = np.linspace(0.0, 1.0, 60)[:, None]
    clf = GPClassifier(C(1.0) * RBF(0.1), optimizer=None, monotone={0: 1}).fit(Xc, labels)
    assert np.all(np.diff(clf.predict_proba(Xc)[:, 1]) >= -1e-12)
    levels = np.digitize(np.linspace(-2, 2, 60) + 0.5 * rng.standard_normal(60), [-0.7, 0.7])
    ordinal = GPOrdinalClassifier(C(1.0) * RBF(0.1), optimizer=None, monotone={0: 1}).fit(Xc, levels)
    assert np.all(np.diff(ordinal.model_.predict_latent(Xc)[0]) >= -1e-9)


def test_without_constraints_the_fit_is_todays_bit_for_bit():
    X, y = _rising(30, 6)
    labels = (y > np.median(y)).astype(int)
    a = GPClassifier(random_state=0).fit(X, labels)
    b = GPClassifier(random_state=0, monotone=None).fit(X, labels)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.kernel_.theta, b.kernel_.theta)


def test_bad_shape_options_are_refused_by_name():
    X, y = _rising(20, 7)
    with pytest.raises(ValueError, match="monotone"):
        GPRegressor(monotone={2: 1}).fit(X, y)
    with pytest.raises(ValueError, match="monotone"):
        GPRegressor(monotone={0: 2}).fit(X, y)
    with pytest.raises(ValueError, match="dense representation"):
        GPRegressor(monotone={0: 1}, inducing_points=5).fit(X, y)
    with pytest.raises(ValueError, match="integrate"):
        GPRegressor(monotone={0: 1}, integrate="ccd").fit(X, y)
    with pytest.raises(TypeError, match="derivatives"):
        GPRegressor().fit(X, y, derivatives=(X, 0, y))
    with pytest.raises(TypeError, match="not differentiable"):
        GPRegressor(Matern(nu=0.5), monotone={0: 1}).fit(X, y)
