"""The GLM likelihoods in GPRegressor and DaskGPRegressor, as users type them: defaults (kernel learned, default
priors), dense, sparse, stochastic and Dask paths, ``trials=`` and ``exposure=`` in fit and prediction, ``loo()``,
``compare()`` and ``integrate=``.  Ground truth: exact special cases (inducing inputs at the data are the dense
fit; one trial is the Bernoulli classifier), the likelihood's own predictive at the latent moments, the true
quantile of simulated noise, and refusals by name."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import (
    AsymmetricLaplace,
    Beta,
    Binomial,
    Gamma,
    GPClassifier,
    GPRegressor,
    HurdleNegativeBinomial,
    HurdlePoisson,
    Logistic,
    Poisson,
    ZeroInflatedNegativeBinomial,
    ZeroInflatedPoisson,
    compare,
)


def _data(name, n=80, seed=0):
    """X, y, the fit's keyword (trials / exposure) and the likelihood, simulated from f = sin(1.3 x)."""
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0, 6, n))[:, None]
    f = np.sin(1.3 * X[:, 0])
    if name == "binomial":
        trials = rng.integers(1, 30, n).astype(float)
        return X, rng.binomial(trials.astype(int), 1 / (1 + np.exp(-f))).astype(float), {"trials": trials}, Binomial()
    if name == "beta":
        mu = 1 / (1 + np.exp(-f))
        return X, rng.beta(mu * 10, (1 - mu) * 10), {}, Beta()
    if name == "gamma":
        return X, rng.gamma(3.0, np.exp(f) / 3.0), {}, Gamma()
    exposure = rng.uniform(0.5, 2.0, n)
    counts = rng.poisson(exposure * np.exp(f + 1.0)) * (rng.uniform(size=n) > 0.3)
    lik = {"zip": ZeroInflatedPoisson(), "zinb": ZeroInflatedNegativeBinomial(), "hurdle-poisson": HurdlePoisson(),
           "hurdle-nb": HurdleNegativeBinomial()}[name]  # fmt: skip
    return X, counts.astype(float), {"exposure": exposure}, lik


NAMES = ["binomial", "beta", "gamma", "zip", "zinb", "hurdle-poisson", "hurdle-nb"]


@pytest.mark.parametrize("name", NAMES)
def test_defaults_fit_and_predict_the_target_mean(name):
    """``GPRegressor(likelihood=...)`` with nothing else: the kernel and the likelihood's hyperparameters learned
    under the default priors, converged; ``predict`` is the likelihood's predictive mean at the latent's moments
    (at unit exposure, one trial); ``predict_y``, ``predict_interval`` and ``log_predictive_density`` take the
    rows' exposure or trials and are the likelihood's at them."""
    X, y, extra, lik = _data(name, n=40)  # (its checks hold at any size; 40 rows, 2/3 of 80's time)
    model = GPRegressor(likelihood=lik).fit(X, y, **extra)
    assert model.result_.status == "converged"
    Xt = np.linspace(0.2, 5.8, 9)[:, None]
    mean, var = model.latent_mean_and_variance(Xt)
    fitted = model.likelihood_
    np.testing.assert_allclose(model.predict(Xt), fitted.predict_y(mean, var)[0], rtol=1e-10)
    rows = {k: v[:9] for k, v in extra.items()}
    offset = {"log_exposure": np.log(next(iter(rows.values())))} if rows else {}
    m, v = fitted.predict_y(mean, var, **offset)
    got_m, got_sd = model.predict_y(Xt, **rows)
    np.testing.assert_allclose(got_m, m, rtol=1e-10)
    np.testing.assert_allclose(got_sd, np.sqrt(v), rtol=1e-10)
    low, high = model.predict_interval(Xt, 0.8, **rows)
    assert np.all(low <= high)
    target = y[:9] if not rows else np.column_stack([y[:9], offset["log_exposure"]])
    np.testing.assert_allclose(
        model.log_predictive_density(Xt, y[:9], **rows), fitted.log_z(target, mean, var).log_z, rtol=1e-10
    )


@pytest.mark.parametrize("name", ["binomial", "beta", "gamma", "zinb", "hurdle-poisson"])
def test_a_sparse_fit_with_the_inducing_inputs_at_the_data_is_the_dense_fit(name):
    """FITC with Z = X is the full GP (an exact special case), trials and exposures included."""
    X, y, extra, lik = _data(name, n=40, seed=1)
    kernel = C(1.5, "fixed") * RBF(1.2, "fixed")
    fixed = lik.clone_with_theta(lik.theta) if lik.n_dims else lik
    for h in fixed.hyperparameters:
        setattr(fixed, f"{h.name}_bounds", "fixed")
    dense = GPRegressor(kernel, likelihood=fixed, optimizer=None, tol=1e-10).fit(X, y, **extra)
    sparse = GPRegressor(kernel, likelihood=fixed, optimizer=None, tol=1e-10, inducing_points=X.copy()).fit(
        X, y, **extra
    )
    Xt = np.linspace(0, 6, 11)[:, None]
    np.testing.assert_allclose(sparse.predict(Xt), dense.predict(Xt), rtol=1e-5)
    assert sparse.log_marginal_likelihood_value_ == pytest.approx(dense.log_marginal_likelihood_value_, rel=1e-6)


def test_one_trial_is_the_bernoulli_classifier():
    """Successes out of one trial by GPRegressor(Binomial()) are labels by GPClassifier(Logistic()): the same
    latent posterior and evidence with the same kernel, and predict is predict_proba's class-1 column."""
    rng = np.random.default_rng(2)
    X = rng.uniform(-3, 3, (50, 1))
    labels = (rng.uniform(size=50) < 1 / (1 + np.exp(-2 * np.sin(X[:, 0])))).astype(int)
    kernel = C(2.0, "fixed") * RBF(1.0, "fixed")
    reg = GPRegressor(kernel, likelihood=Binomial(), optimizer=None, tol=1e-10).fit(X, labels.astype(float))
    clf = GPClassifier(kernel, likelihood=Logistic(), optimizer=None, tol=1e-10, prior=None).fit(X, labels)
    Xt = np.linspace(-3, 3, 7)[:, None]
    np.testing.assert_allclose(reg.predict(Xt), clf.predict_proba(Xt)[:, 1], rtol=1e-6)
    assert reg.log_marginal_likelihood_value_ == pytest.approx(clf.log_marginal_likelihood_value_, rel=1e-7)


def test_predict_is_the_tau_quantile():
    """AsymmetricLaplace(quantile=tau): the learned predict follows the tau-quantile of Gaussian noise around f
    (f + 0.4 z_tau), within 0.15 RMSE on 400 rows, for tau 0.1 and 0.9; the median fit sits between them."""
    rng = np.random.default_rng(3)
    X = np.sort(rng.uniform(0, 6, 400))[:, None]
    f = np.sin(1.3 * X[:, 0])
    y = f + 0.4 * rng.standard_normal(400)
    Xt = np.linspace(0.3, 5.7, 50)[:, None]
    ft = np.sin(1.3 * Xt[:, 0])
    curves = {}
    for tau in (0.1, 0.5, 0.9):
        model = GPRegressor(likelihood=AsymmetricLaplace(quantile=tau), inducing_points=40, random_state=0).fit(X, y)
        curves[tau] = model.predict(Xt)
        assert np.sqrt(np.mean((curves[tau] - ft - 0.4 * stats.norm.ppf(tau)) ** 2)) <= 0.15
    assert np.all(curves[0.1] < curves[0.5]) and np.all(curves[0.5] < curves[0.9])


@pytest.mark.parametrize("name", ["binomial", pytest.param("beta", marks=pytest.mark.slow)])
def test_the_stochastic_path_fits_the_new_likelihoods(name):
    """optimizer='stochastic' (minibatch evidence search over inducing inputs) with a binomial and a beta: converged,
    and its predictions within 0.1 of the L-BFGS-B sparse fit's probabilities (30 steps: the default budget took 76 s
    for the binomial and about 300 s for the beta on this machine)."""
    X, y, extra, lik = _data(name, n=300, seed=4)
    sto = GPRegressor(likelihood=lik, inducing_points=20, optimizer="stochastic", optimizer_maxiter=30, random_state=0)
    sto.fit(X, y, **extra)
    ref = GPRegressor(likelihood=lik, inducing_points=20, random_state=0).fit(X, y, **extra)
    assert sto.result_.status == "converged"
    Xt = np.linspace(0.3, 5.7, 20)[:, None]
    assert np.max(np.abs(sto.predict(Xt) - ref.predict(Xt))) <= 0.1


def test_loo_compare_and_integrate():
    """loo() from the cavities (its pointwise terms finite, one per row), compare() ranks a zero-inflated model
    above the plain Poisson on counts with 30% structural zeros, and integrate='ccd' fits and predicts."""
    X, y, extra, _ = _data("zip", n=80, seed=5)
    zip_model = GPRegressor(likelihood=ZeroInflatedPoisson()).fit(X, y, **extra)
    poisson = GPRegressor(likelihood=Poisson()).fit(X, y, **extra)
    loo = zip_model.loo()
    assert loo.pointwise.shape == (80,) and np.all(np.isfinite(loo.pointwise))
    table = compare({"zip": zip_model, "poisson": poisson})
    assert table.names[0] == "zip"
    ccd = GPRegressor(likelihood=Beta(), integrate="ccd").fit(*_data("beta", n=40, seed=6)[:2])
    assert np.all((ccd.predict(X[:5]) > 0) & (ccd.predict(X[:5]) < 1))


@pytest.mark.parametrize(
    "lik, kwargs, match",
    [
        (Binomial(), {"exposure": np.ones(80)}, "exposure is for"),
        (Poisson(), {"trials": np.ones(80)}, "trials is for Binomial"),
        (Binomial(), {"trials": np.full(80, 2.5)}, "trials must be whole"),
        (Binomial(), {"trials": np.ones(80)}, "successes above trials"),
    ],
)
def test_trials_and_exposure_are_checked_by_name(lik, kwargs, match):
    X, y, _, _ = _data("binomial")
    with pytest.raises(ValueError, match=match):
        GPRegressor(likelihood=lik, optimizer=None).fit(X, y + (lik.exposure_name == "exposure") * 0, **kwargs)


def test_beta_and_gamma_refuse_normalize_y_by_name():
    X, y, _, _ = _data("beta")
    with pytest.raises(ValueError, match="normalize_y"):
        GPRegressor(likelihood=Beta(), normalize_y=True).fit(X, y)
    X, y, _, _ = _data("gamma")
    with pytest.raises(ValueError, match="normalize_y"):
        GPRegressor(likelihood=Gamma(), normalize_y=True).fit(X, y)


def test_dask_fits_binomial_trials_as_the_one_process_estimator(dask_client):
    """DaskGPRegressor with trials= on four shards: the one-process fit on the same rows and inducing inputs."""
    da = pytest.importorskip("dask.array")
    from relaxep.estimators.dask import DaskGPRegressor

    X, y, extra, lik = _data("binomial", n=400, seed=7)
    Z = X[::40].copy()
    params = dict(optimizer=None, random_state=0, learn_inducing_points=False, inducing_points=Z)
    kernel = C(1.0) * RBF(1.0)
    ref = GPRegressor(kernel, likelihood=lik, **params).fit(X, y, **extra)
    chunks = lambda a: da.from_array(a, chunks=100)  # noqa: E731
    got = DaskGPRegressor(dask_client, kernel, likelihood=lik, **params).fit(
        chunks(X), chunks(y), trials=chunks(extra["trials"])
    )
    Xt = np.linspace(0.3, 5.7, 9)[:, None]
    np.testing.assert_allclose(np.asarray(got.predict(Xt)), ref.predict(Xt), atol=1e-8)
