"""The Markov (state-space) representation against the dense one it must equal: the kernels' state-space forms
against scikit-learn's kernels, the blocked Kalman smoother against dense Gaussian conditioning, EP's sites,
marginals, evidence and gradient against dense EP's, prediction and leave-one-out, unsorted and tied inputs, and
the estimators' ``representation`` (issue 65)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import iv, ndtr
from sklearn.gaussian_process.kernels import RBF, ExpSineSquared, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import (
    EP,
    GPClassifier,
    GPOrdinalClassifier,
    GPRegressor,
    GPSurvivalRegressor,
    Poisson,
    PowerEP,
    Probit,
    StudentT,
    infer,
)
from relaxep.errors import ImproperPosteriorError
from relaxep.posterior import DensePrior
from relaxep.posterior.kalman import kalman_smoother
from relaxep.posterior.markov import MarkovPrior
from relaxep.posterior.state_space import periodic_truncation, state_space

MARKOV_KERNELS = [
    Matern(0.7, nu=0.5),
    Matern(0.7, nu=1.5),
    C(2.0) * Matern(0.4, nu=2.5),
    Matern(1.0, nu=1.5) + C(0.5) * Matern(0.3, nu=0.5),
    C(0.3) + Matern(1.0, nu=2.5),
    Matern(2.0, nu=0.5) * C(1.7),
]


def _chain(kernel, t):
    prior = MarkovPrior(kernel, t[:, None])
    return prior.a, prior.q, prior.form.h


@pytest.mark.parametrize("kernel", MARKOV_KERNELS, ids=repr)
def test_the_state_space_covariance_is_the_kernel(kernel):
    lags = np.linspace(0.0, 4.0, 41)
    form = state_space(kernel)
    truth = kernel(np.zeros((1, 1)), lags[:, None])[0]
    np.testing.assert_allclose(form.covariance(kernel.theta, lags), truth, rtol=0, atol=1e-13)


def test_the_quasi_periodic_form_is_the_truncated_cosine_series_and_its_error_is_stated():
    period, ell_p, ell_m = 1.3, 0.8, 3.0
    lags = np.linspace(0.0, 6.0, 121)
    dense = (C(1.5) * ExpSineSquared(ell_p, period) * Matern(ell_m, nu=1.5))(np.zeros((1, 1)), lags[:, None])[0]
    matern = Matern(ell_m, nu=1.5)(np.zeros((1, 1)), lags[:, None])[0]
    errors = []
    for harmonics in (2, 4, 8):
        kernel = C(1.5) * ExpSineSquared(ell_p, period) * Matern(ell_m, nu=1.5)
        form = state_space(kernel, harmonics)
        x = ell_p**-2  # the series written out: q_0^2 = I_0(x) e^-x, q_j^2 = 2 I_j(x) e^-x
        series = iv(0, x) * np.exp(-x) + sum(
            2 * iv(j, x) * np.exp(-x) * np.cos(2 * np.pi * j * lags / period) for j in range(1, harmonics + 1)
        )
        got = form.covariance(kernel.theta, lags)
        np.testing.assert_allclose(got, 1.5 * series * matern, rtol=0, atol=1e-13)
        error = np.max(np.abs(got - dense))
        assert error <= 1.5 * periodic_truncation(ell_p, harmonics) + 1e-14
        errors.append(error)
    assert errors[0] > errors[1] > errors[2]
    auto = state_space(C(1.5) * ExpSineSquared(ell_p, period) * Matern(ell_m, nu=1.5))
    assert periodic_truncation(ell_p, auto.harmonics) < 1e-4


@pytest.mark.parametrize("kernel", [Matern(0.7, nu=0.5), C(2.0) * Matern(0.7, nu=1.5), Matern(0.3, nu=2.5) + C(0.3)])
@pytest.mark.parametrize("length", [None, 3])
def test_the_blocked_smoother_is_gaussian_conditioning(kernel, length):
    rng = np.random.default_rng(0)
    n = 157
    t = np.sort(rng.uniform(0.0, 10.0, n))
    tau = rng.uniform(0.1, 3.0, n)
    tau[::5] = 0.0  # flat sites
    tau[1::7] = -0.05  # negative ones, as non-log-concave likelihoods give
    nu = rng.normal(size=n)
    out = kalman_smoother(*_chain(kernel, t), tau, nu, length=length)
    K = kernel(t[:, None])
    B = np.eye(n) + K * tau
    cov = np.linalg.solve(B, K)  # (I + K T)^-1 K = (K^-1 + T)^-1
    mean = cov @ nu
    np.testing.assert_allclose(out.mean, mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(out.var, np.diag(cov), rtol=0, atol=1e-10)
    assert out.log_det == pytest.approx(np.linalg.slogdet(B)[1], abs=1e-9)
    assert out.quad == pytest.approx(nu @ mean, abs=1e-9)


def test_an_improper_posterior_is_refused():
    t = np.linspace(0.0, 1.0, 20)
    tau = np.full(20, -5.0)
    with pytest.raises(ImproperPosteriorError):
        kalman_smoother(*_chain(Matern(1.0, nu=1.5), t), tau, np.zeros(20))


def _series(n, seed, likelihood):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 10.0, n)
    x[5], x[10], x[11] = x[6], x[12], x[12]  # repeated times
    f = np.sin(x)
    if likelihood == "probit":
        return x, np.where(rng.uniform(size=n) < ndtr(2 * f), 1.0, -1.0), Probit()
    if likelihood == "student":
        return x, f + 0.3 * rng.standard_t(3, n), StudentT(3.0, 0.3)
    return x, rng.poisson(np.exp(f)).astype(float), Poisson()


@pytest.mark.parametrize(
    ("likelihood", "rule"),
    [("probit", EP()), ("student", EP()), ("poisson", EP()), ("probit", PowerEP(0.5))],
    ids=["probit-EP", "student-EP", "poisson-EP", "probit-PowerEP"],
)  # (Power EP's path through the representation is the same for every likelihood: one suffices)
def test_markov_ep_is_dense_ep(likelihood, rule):
    x, y, lik = _series(250, 1, likelihood)
    kernel = C(1.5) * Matern(1.0, nu=1.5)
    dense = DensePrior.from_kernel(kernel, x[:, None], 1e-6, eval_gradient=True)
    markov = MarkovPrior.from_kernel(kernel, x[:, None], 1e-6)
    runs = [infer(p, y, lik, rule, schedule="parallel", tol=1e-9, max_sweeps=300) for p in (dense, markov)]
    d, m = runs
    assert d.status == m.status == "converged" and d.n_sweeps == m.n_sweeps
    for name in ("site_precision", "site_mean_precision", "mean", "marginal_var"):
        np.testing.assert_allclose(getattr(m, name), getattr(d, name), rtol=0, atol=1e-8, err_msg=name)
    assert m.log_evidence == pytest.approx(d.log_evidence, abs=1e-8)
    gd = d.posterior.prior_evidence_gradient(dense, kernel)
    gm = m.posterior.prior_evidence_gradient(markov, kernel)
    np.testing.assert_allclose(gm, gd, rtol=1e-6, atol=1e-8)
    # prediction between the inputs and beyond them (forecasting), against the dense predictive
    X_test = np.array([[-1.0], [0.5], [x[7]], [4.3], [10.5], [14.0]])
    md, vd = d.predict_latent(*dense.cross_covariance(X_test))
    mm, vm = markov.predict_at(m.predict_latent, X_test)
    np.testing.assert_allclose(mm, md, rtol=0, atol=1e-8)
    np.testing.assert_allclose(vm, vd, rtol=0, atol=1e-8)


def test_a_white_kernel_and_latent_noise_are_integrated_out_exactly():
    x, y, lik = _series(250, 3, "probit")
    kernel = C(1.0) * Matern(0.8, nu=2.5) + WhiteKernel(0.3)
    d = infer(DensePrior.from_kernel(kernel, x[:, None], 1e-3), y, lik, EP(), schedule="parallel", tol=1e-9)
    m = infer(MarkovPrior.from_kernel(kernel, x[:, None], 1e-3), y, lik, EP(), schedule="parallel", tol=1e-9)
    np.testing.assert_allclose(m.mean, d.mean, atol=1e-8)
    np.testing.assert_allclose(m.marginal_var, d.marginal_var, atol=1e-8)
    assert m.log_evidence == pytest.approx(d.log_evidence, abs=1e-8)


def test_unsorted_and_repeated_times_give_the_sorted_answer():
    x, y, lik = _series(300, 2, "poisson")
    kernel = C(1.0) * Matern(1.0, nu=0.5)
    order = np.argsort(x, kind="stable")
    shuffled = infer(MarkovPrior(kernel, x[:, None], 1e-6), y, lik, EP(), schedule="parallel", tol=1e-9)
    in_order = infer(MarkovPrior(kernel, x[order, None], 1e-6), y[order], lik, EP(), schedule="parallel", tol=1e-9)
    np.testing.assert_allclose(shuffled.mean[order], in_order.mean, atol=1e-10)
    np.testing.assert_allclose(shuffled.marginal_var[order], in_order.marginal_var, atol=1e-10)
    assert shuffled.log_evidence == pytest.approx(in_order.log_evidence, abs=1e-9)


def _binary(n, seed=0):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0.0, 10.0, n))[:, None]
    return x, np.where(rng.uniform(size=n) < ndtr(2 * np.sin(x[:, 0])), 1, 0)


def test_the_classifier_learns_the_same_kernel_markov_or_dense():
    X, y = _binary(220)
    fits = [GPClassifier(C(1.0) * Matern(1.0, nu=1.5), representation=r).fit(X, y) for r in ("dense", "markov")]
    dense, markov = fits
    assert (dense.representation_, markov.representation_) == ("dense", "markov")
    np.testing.assert_allclose(markov.kernel_.theta, dense.kernel_.theta, atol=1e-4)
    assert markov.log_marginal_likelihood_value_ == pytest.approx(dense.log_marginal_likelihood_value_, abs=1e-6)
    X_test = np.linspace(-2.0, 13.0, 31)[:, None]
    np.testing.assert_allclose(markov.predict_proba(X_test), dense.predict_proba(X_test), atol=1e-6)
    np.testing.assert_allclose(markov.loo().pointwise, dense.loo().pointwise, atol=1e-6)


def test_the_regressor_ordinal_and_survival_estimators_run_markov():
    X, _ = _binary(240, 4)
    f = np.sin(X[:, 0])
    rng = np.random.default_rng(5)
    kernel = C(1.0) * Matern(1.0, nu=1.5)
    options = dict(optimizer=None)
    reg = [GPRegressor(kernel, likelihood=StudentT(4.0, 0.3), representation=r, **options) for r in ("dense", "markov")]
    y_reg = f + 0.3 * rng.standard_t(4, X.shape[0])
    a, b = (r.fit(X, y_reg) for r in reg)
    np.testing.assert_allclose(b.predict(X[:20], return_std=True), a.predict(X[:20], return_std=True), atol=1e-7)
    y_ord = np.digitize(f + 0.3 * rng.standard_normal(X.shape[0]), [-0.5, 0.5])
    a, b = (GPOrdinalClassifier(kernel, representation=r, **options).fit(X, y_ord) for r in ("dense", "markov"))
    np.testing.assert_allclose(b.predict_proba(X[:20]), a.predict_proba(X[:20]), atol=1e-7)
    times = np.exp(1.0 - 0.5 * f + 0.4 * rng.standard_normal(X.shape[0]))
    y_surv = np.column_stack([np.minimum(times, 4.0), times < 4.0])
    a, b = (GPSurvivalRegressor(kernel, representation=r, **options).fit(X, y_surv) for r in ("dense", "markov"))
    assert b.representation_ == "markov"
    np.testing.assert_allclose(b.predict(X[:20]), a.predict(X[:20]), atol=1e-7)


def test_scikit_learns_gaussian_regression_in_markov_form_is_the_closed_form():
    rng = np.random.default_rng(8)
    X = np.sort(rng.uniform(0.0, 10.0, 250))[:, None]
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(250)
    dense, markov = (
        GPRegressor(Matern(1.0, nu=1.5), alpha=0.01, representation=r).fit(X, y) for r in ("dense", "markov")
    )
    assert markov.representation_ == "markov" and hasattr(dense, "L_")  # (the dense one is scikit-learn's closed form)
    np.testing.assert_allclose(markov.kernel_.theta, dense.kernel_.theta, atol=1e-5)
    assert markov.log_marginal_likelihood_value_ == pytest.approx(dense.log_marginal_likelihood_value_, abs=1e-8)
    X_test = np.linspace(-1.0, 12.0, 27)[:, None]
    for got, want in zip(markov.predict(X_test, return_std=True), dense.predict(X_test, return_std=True), strict=True):
        np.testing.assert_allclose(got, want, atol=1e-7)
    with pytest.raises(ValueError, match="alpha must be a scalar"):
        GPRegressor(Matern(1.0, nu=1.5), alpha=np.full(250, 0.01), representation="markov").fit(X, y)


def test_auto_goes_markov_only_where_it_is_exact_and_faster(monkeypatch):
    X, y = _binary(220)
    matern = C(1.0) * Matern(1.0, nu=1.5)
    assert GPClassifier(matern, optimizer=None).fit(X, y).representation_ == "markov"
    assert GPClassifier(optimizer=None).fit(X, y).representation_ == "dense"  # the default RBF
    assert GPClassifier(matern, optimizer=None).fit(X[:150], y[:150]).representation_ == "dense"
    periodic = C(1.0) * ExpSineSquared(1.0, 3.0) * Matern(5.0, nu=0.5)
    assert GPClassifier(periodic, optimizer=None).fit(X, y).representation_ == "dense"
    X2 = np.column_stack([X, X])
    assert GPClassifier(matern, optimizer=None).fit(X2, y).representation_ == "dense"
    assert GPRegressor(matern, optimizer=None).fit(X, y.astype(float)).representation_ == "dense"  # scikit-learn's


def test_bad_representations_are_refused_by_name():
    X, y = _binary(50)
    with pytest.raises(ValueError, match="representation"):
        GPClassifier(representation="kalman").fit(X, y)
    with pytest.raises(ValueError, match=r"representation='markov'.*RBF"):
        GPClassifier(C(1.0) * RBF(1.0), representation="markov").fit(X, y)
    with pytest.raises(ValueError, match="one input column"):
        GPClassifier(Matern(nu=1.5), representation="markov").fit(np.column_stack([X, X]), y)
    with pytest.raises(ValueError, match="inducing_points"):
        GPClassifier(Matern(nu=1.5), representation="markov", inducing_points=5).fit(X, y)
    with pytest.raises(ValueError, match="nu"):
        GPClassifier(Matern(nu=3.5), representation="markov").fit(X, y)


@pytest.mark.slow
def test_markov_ep_is_dense_ep_at_2000_points():
    x, y, lik = _series(2000, 7, "probit")
    kernel = C(1.5) * Matern(0.5, nu=2.5)
    dense = DensePrior.from_kernel(kernel, x[:, None], 1e-6, eval_gradient=True)
    markov = MarkovPrior.from_kernel(kernel, x[:, None], 1e-6)
    d, m = (infer(p, y, lik, EP(), schedule="parallel", tol=1e-9, max_sweeps=300) for p in (dense, markov))
    assert d.n_sweeps == m.n_sweeps
    np.testing.assert_allclose(m.site_precision, d.site_precision, atol=1e-8)
    np.testing.assert_allclose(m.marginal_var, d.marginal_var, atol=1e-8)
    assert m.log_evidence == pytest.approx(d.log_evidence, abs=1e-8)
    gd = d.posterior.prior_evidence_gradient(dense, kernel)
    np.testing.assert_allclose(m.posterior.prior_evidence_gradient(markov, kernel), gd, rtol=1e-6)
