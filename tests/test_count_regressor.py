"""GPRegressor with a count likelihood: predict is the count's predictive mean (the log-normal mean of the latent
predictive, a closed form), exposure enters as an offset of the log-rate, and bad input is refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import EP, GPRegressor, NegativeBinomial, Poisson, infer
from relaxep.posterior import DensePrior


def _counts(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0, 5, size=(n, 1)), axis=0)
    exposure = rng.uniform(0.5, 2.0, n)
    return X, rng.poisson(exposure * np.exp(1.0 + np.sin(X[:, 0]))).astype(float), exposure


@pytest.mark.parametrize("likelihood", [Poisson(), NegativeBinomial(3.0, "fixed")])
def test_predict_is_the_predictive_mean_count_and_the_latent_stays_available(likelihood):
    X, y, exposure = _counts()
    kernel = C(1.0, "fixed") * RBF(1.0, "fixed") + C(2.0, "fixed")
    model = GPRegressor(kernel, likelihood=likelihood, optimizer=None, tol=1e-10).fit(X, y, exposure=exposure)
    X_test = np.linspace(0, 5, 17)[:, None]
    mean, var = model.latent_mean_and_variance(X_test)
    # E[y*] = E[exp(f*)] = exp(m + v/2) at unit exposure (the log-normal mean)
    np.testing.assert_allclose(model.predict(X_test), np.exp(mean + var / 2), rtol=1e-12)
    low, high = model.predict_interval(X_test, 0.9)
    assert np.all(low == np.round(low)) and np.all(high == np.round(high)) and np.all(low <= high)
    # the fit is EP on [count, log exposure] targets: the posterior at the training inputs is infer's
    prior = DensePrior.from_kernel(kernel, X, model.alpha)
    result = infer(prior, np.column_stack([y, np.log(exposure)]), likelihood, EP(), tol=1e-10)
    train_mean, _ = model.latent_mean_and_variance(X)
    np.testing.assert_allclose(train_mean, result.mean, rtol=1e-6, atol=1e-8)


def test_exposure_shifts_the_log_rate_and_bad_input_is_refused():
    X, y, exposure = _counts(seed=1)
    kernel = C(1.0, "fixed") * RBF(1.0, "fixed") + C(2.0, "fixed")
    with pytest.raises(ValueError, match=r"^normalize_y"):
        GPRegressor(kernel, likelihood=Poisson(), normalize_y=True).fit(X, y)
    with pytest.raises(ValueError, match=r"^exposure must be 60 positive"):
        GPRegressor(kernel, likelihood=Poisson()).fit(X, y, exposure=-exposure)
    with pytest.raises(ValueError, match=r"^exposure is for count likelihoods"):
        GPRegressor(kernel).fit(X, y, exposure=exposure)
    with pytest.raises(ValueError, match="y"):
        GPRegressor(kernel, likelihood=Poisson(), optimizer=None).fit(X, y + 0.5)  # not counts: nothing rounded
    with pytest.raises(ValueError, match=r"^return_cov"):
        GPRegressor(kernel, likelihood=Poisson(), optimizer=None).fit(X, y).predict(X, return_cov=True)


# (the negative binomial with the slow studies: the rows' exposure is the count likelihoods' shared code, the
# Poisson's case runs it by default; the negative binomial's log Z and E[log p] at offsets are checked against
# quadrature in test_count_likelihoods.py::test_derivatives_expectations_and_cumulants_match_quadrature)
@pytest.mark.parametrize("likelihood", [Poisson(), pytest.param(NegativeBinomial(2.0), marks=pytest.mark.slow)])
def test_relaxed_ep_takes_targets_with_their_exposure(likelihood):
    """REP with [count, log exposure] rows: with no relaxation to gain (c huge) it is EP's fixed point exactly
    (EP with exposure is checked against the sampler in test_count_likelihoods), and a zero log exposure is
    the plain counts."""
    from relaxep import RelaxedEP

    X, y, exposure = _counts(n=10, seed=2)  # (10 rows: REP's sequential line searches cost ~0.1 s a row here)
    prior = DensePrior.from_kernel(RBF(1.0), X, 1e-6)
    pairs = np.column_stack([y, np.log(exposure)])
    ep = infer(prior, pairs, likelihood, EP(), tol=1e-9)
    rep = infer(prior, pairs, likelihood, RelaxedEP(c=1e12), tol=1e-9)
    np.testing.assert_allclose(rep.mean, ep.mean, rtol=1e-7, atol=1e-9)
    zero = infer(prior, np.column_stack([y, np.zeros_like(y)]), likelihood, RelaxedEP(c=1.0), tol=1e-6)
    plain = infer(prior, y, likelihood, RelaxedEP(c=1.0), tol=1e-6)
    assert zero.status == plain.status == "converged"
    np.testing.assert_array_equal(zero.mean, plain.mean)


@pytest.mark.parametrize("likelihood", [Poisson(), NegativeBinomial(2.0, "fixed")])
def test_a_sparse_count_fit_with_the_inducing_inputs_at_the_data_is_the_dense_fit(likelihood):
    """FITC with Z = X is the full GP (an exact special case), exposure included."""
    X, y, exposure = _counts(n=50, seed=3)
    kernel = C(1.5, "fixed") * RBF(1.2, "fixed")
    dense = GPRegressor(kernel, likelihood=likelihood, optimizer=None, tol=1e-10).fit(X, y, exposure=exposure)
    sparse = GPRegressor(kernel, likelihood=likelihood, optimizer=None, tol=1e-10, inducing_points=X.copy())
    sparse.fit(X, y, exposure=exposure)
    X_test = np.linspace(0, 5, 13)[:, None]
    np.testing.assert_allclose(sparse.predict(X_test), dense.predict(X_test), rtol=1e-5)
    assert sparse.log_marginal_likelihood_value_ == pytest.approx(dense.log_marginal_likelihood_value_, rel=1e-6)
