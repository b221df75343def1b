"""GPHeteroscedasticRegressor: input-dependent noise by two-latent EP, against ground truths it does not compute.

The truths: the tilted moments and a one-row posterior by nested adaptive 2-d quadrature (scipy's ``dblquad``),
Gaussian regression in closed form (scikit-learn's GPR) where the noise is constant, an elliptical slice sampler
of both latents (written here), central differences of the evidence, and Monte Carlo draws of the predictive.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import integrate, linalg
from sklearn.base import clone
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from threadpoolctl import threadpool_limits

from relaxep import EP, FractionalEP, GPHeteroscedasticRegressor, PowerEP, RelaxedEP
from relaxep.inference.two_latent import two_latent_ep
from relaxep.likelihoods.heteroscedastic import predictive_cdf, predictive_log_density, tilted_moments
from relaxep.posterior import DensePrior


# ----------------------------------------------------------------------------- oracles
def brute_tilted(y, mean_f, var_f, mean_g, var_g, power=1.0):
    r"""``(log Z, E f, Var f, E g, Var g)`` of :math:`N(y|f,e^g)^\alpha N(f|m_f,v_f) N(g|m_g,v_g)` by ``dblquad``.

    The outer integral runs over the cavity of g widened by 12 sd and 5 log-units; the inner one over f within 14
    sd of f's conditional given g (limits only: the integrand is the 2-d density itself).  (Scalars by the math
    module: ``dblquad`` calls the integrand some 10^5 times, where numpy's per-call overhead took most of the time.)"""
    log_2pi = math.log(2 * math.pi)
    constant = -0.5 * math.log(2 * math.pi * var_f) - 0.5 * math.log(2 * math.pi * var_g)

    def log_density(f, g):
        log_lik = -0.5 * (log_2pi + g + (y - f) ** 2 * math.exp(-g))
        return power * log_lik - 0.5 * (f - mean_f) ** 2 / var_f - 0.5 * (g - mean_g) ** 2 / var_g + constant

    def f_limits(g):
        s = math.exp(g) / power
        centre, sd = (mean_f * s + y * var_f) / (var_f + s), math.sqrt(var_f * s / (var_f + s))
        return centre - 14 * sd, centre + 14 * sd

    g_lo, g_hi = mean_g - 12 * np.sqrt(var_g) - 5, mean_g + 12 * np.sqrt(var_g) + 5
    ref = max(log_density(np.mean(f_limits(g)), g) for g in np.linspace(g_lo, g_hi, 4001))
    sums = []
    warnings.simplefilter("ignore", integrate.IntegrationWarning)  # (roundoff at epsrel=1e-11: pytest restores)
    for power_f, power_g in ((0, 0), (1, 0), (2, 0), (0, 1), (0, 2)):
        sums.append(integrate.dblquad(
            lambda f, g, a=power_f, b=power_g: f**a * g**b * math.exp(log_density(f, g) - ref),
            g_lo, g_hi, lambda g: f_limits(g)[0], lambda g: f_limits(g)[1], epsabs=0, epsrel=1e-11,
        )[0])  # fmt: skip
    z, ef, eg = sums[0], sums[1] / sums[0], sums[3] / sums[0]
    return np.log(z) + ref, ef, sums[2] / z - ef**2, eg, sums[4] / z - eg**2


def _lower_solve(chol, b):
    """``L^{-1} b``: LAPACK's trtrs as ``scipy.linalg.solve_triangular(chol, b, lower=True)`` calls it (the same
    digits), without its per-call checks (the sampler below solves a few columns some 10^4 times)."""
    (trtrs,) = linalg.get_lapack_funcs(("trtrs",), (chol, b))
    fortran = chol.flags.f_contiguous
    x, info = trtrs(chol if fortran else chol.T, b, lower=int(fortran), trans=int(not fortran))
    assert info == 0, info
    return x


def two_latent_ess(Kf, Kg, y, offset, centre, cov, n_samples=3000, n_burn=500, n_chains=4, seed=0):
    r"""Posterior means and sds of ``(f, g)`` by elliptical slice sampling (Murray, Adams & MacKay 2010) of
    :math:`N(f|0,K_f) N(g|c,K_g) \prod_i N(y_i|f_i,e^{g_i})` on the ellipses of ``N(centre, cov)`` with the exact
    residual factor (Nishihara, Murray & Adams 2014), several chains in lock step."""
    n = y.size
    prior_chol = linalg.cholesky(linalg.block_diag(Kf, Kg), lower=True)
    prior_mean = np.concatenate([np.zeros(n), np.full(n, offset)])
    base_chol = linalg.cholesky(cov, lower=True)

    def log_gauss(h, mean, chol):
        z = _lower_solve(chol, (h - mean).T)
        return -0.5 * np.sum(z * z, axis=0)

    def log_residual(h):
        f, g = h[:, :n], h[:, n:]
        log_lik = np.sum(-0.5 * (g + (y - f) ** 2 * np.exp(-g)), axis=1)
        return log_lik + log_gauss(h, prior_mean, prior_chol) - log_gauss(h, centre, base_chol)

    with threadpool_limits(1):  # (60 x 60 solves: BLAS threads only contend)
        return _ess_loop(log_residual, centre, base_chol, n, n_samples, n_burn, n_chains, seed)


def _ess_loop(log_residual, centre, base_chol, n, n_samples, n_burn, n_chains, seed):
    rng = np.random.default_rng(seed)
    H = centre + rng.standard_normal((n_chains, 2 * n)) @ base_chol.T
    cur = log_residual(H)
    s1, s2 = np.zeros(2 * n), np.zeros(2 * n)
    for it in range(n_burn + n_samples):
        nu = rng.standard_normal((n_chains, 2 * n)) @ base_chol.T
        threshold = cur + np.log(rng.uniform(size=n_chains))
        theta = rng.uniform(0, 2 * np.pi, n_chains)
        lo, hi = theta - 2 * np.pi, theta.copy()
        active = np.arange(n_chains)
        while active.size:
            prop = centre + (H[active] - centre) * np.cos(theta[active])[:, None] + nu[active] * np.sin(
                theta[active])[:, None]  # fmt: skip
            ll = log_residual(prop)
            ok = ll > threshold[active]
            H[active[ok]], cur[active[ok]] = prop[ok], ll[ok]
            rej = active[~ok]
            neg = theta[rej] < 0
            lo[rej], hi[rej] = np.where(neg, theta[rej], lo[rej]), np.where(neg, hi[rej], theta[rej])
            theta[rej] = rng.uniform(lo[rej], hi[rej])
            active = rej
        if it >= n_burn:
            s1 += H.sum(axis=0)
            s2 += (H * H).sum(axis=0)
    count = n_samples * n_chains
    mean = s1 / count
    return mean, np.sqrt(s2 / count - mean**2)


def hetero_set(n, seed, x_range=(-3.0, 3.0)):
    """``f = sin(x)``, noise sd ``0.08 exp(0.6 x)`` (from 0.013 to 0.48 on [-3, 3])."""
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(*x_range, size=(n, 1)), axis=0)
    sd = 0.08 * np.exp(0.6 * X[:, 0])
    return X, np.sin(X[:, 0]) + sd * rng.standard_normal(n), sd


# ------------------------------------------------------------------- tilted moments
@pytest.mark.parametrize(
    "case",
    [
        (0.5, 0.0, 1.0, 0.0, 1.0, 1.0),
        (3.0, 0.0, 0.01, -5.0, 0.5, 1.0),  # an outlying target for a small noise: mass in the cavity's tail
        (0.1, 0.0, 1e-4, -12.0, 0.1, 1.0),  # tiny noise (sd 2.5e-3)
        (10.0, 0.0, 1.0, 5.0, 4.0, 0.5),  # huge noise, Power EP
        (1.0, 0.2, 0.3, -3.0, 2.0, 0.7),  # Power EP
    ],
)
def test_tilted_moments_equal_the_2d_integral(case):
    got = tilted_moments(*case)
    want = brute_tilted(*case)
    np.testing.assert_allclose([got.log_z, got.mean_f, got.var_f, got.mean_g, got.var_g], want, rtol=1e-8, atol=1e-10)


def grid_tilted(y, mean_f, var_f, mean_g, var_g):
    """The tilted normaliser and moments on four million points of g (the integral over f in closed form)."""
    g = np.linspace(mean_g - 12 * np.sqrt(var_g) - 5, mean_g + 12 * np.sqrt(var_g) + 30, 4_000_001)
    V = var_f + np.exp(g)
    log_w = -0.5 * np.log(2 * np.pi * V) - 0.5 * (y - mean_f) ** 2 / V
    log_w += -0.5 * (g - mean_g) ** 2 / var_g - 0.5 * np.log(2 * np.pi * var_g)
    top = log_w.max()
    w = np.exp(log_w - top)
    p = w / w.sum()
    eg = p @ g
    cond = mean_f + var_f * (y - mean_f) / V
    ef = p @ cond
    vf = p @ (var_f * np.exp(g) / V + (cond - ef) ** 2)
    return [np.log(w.sum() * (g[1] - g[0])) + top, ef, vf, eg, p @ (g - eg) ** 2]


@pytest.mark.parametrize(
    "case",
    [
        (1.0, 0.0, 1e-4, -20.0, 1.0),  # a negligible mode at the cavity, the mass 16 units of g away
        (0.1, 0.0, 1e-4, -16.5, 1.0),  # two modes 8.5 apart, masses 1 : 0.48
        (0.1, 0.0, 1e-4, -23.0, 3.0),  # two modes 16 apart, 1 : 0.86
        (0.3, 0.0, 0.01, -10.0, 10.0),  # two modes 6 apart, 1 : 0.96
    ],
)
def test_tilted_moments_where_the_tilted_noise_has_two_modes(case):
    """Near-noiseless rows: the tilted density of g can have a mode at the cavity (where e^g << v_f and the
    likelihood is flat in g) and one near log (y - m_f)^2; both are found (a scan of the bracket) and resolved."""
    got = tilted_moments(*case)
    np.testing.assert_allclose([got.log_z, got.mean_f, got.var_f, got.mean_g, got.var_g], grid_tilted(*case),
                               rtol=1e-7)  # fmt: skip


@pytest.mark.parametrize(
    "y, kf, offset, kg",
    [(0.7, 1.0, -2.0, 1.0), (0.7, 1.0, -12.0, 0.3), (6.0, 0.5, 8.0, 2.0)],
    ids=["moderate", "tiny-noise", "huge-noise"],
)
def test_ep_on_one_row_is_the_exact_posterior(y, kf, offset, kg):
    """One site: EP's evidence and both latents' means and variances equal the 2-d integral's."""
    result = two_latent_ep(DensePrior(np.array([[kf]])), DensePrior(np.array([[kg]])), np.array([y]),
                           tilted_moments, offset=offset, tol=1e-12, max_sweeps=500)  # fmt: skip
    assert result.converged
    log_z, ef, vf, eg, vg = brute_tilted(y, 0.0, kf, offset, kg)
    got = [result.posterior_f.mean[0], result.posterior_f.marginal_var[0],
           result.posterior_g.mean[0] + offset, result.posterior_g.marginal_var[0]]  # fmt: skip
    np.testing.assert_allclose(got, [ef, vf, eg, vg], rtol=1e-7, atol=1e-9)
    # (the tiny noise's site precision is 1.4e5: the posterior mean, from nu - T mu, carries 1e-11 of it, and
    # the evidence's h^2/lambda - mu^2/A + nu mu about 1e-6)
    assert result.log_evidence == pytest.approx(log_z, abs=2e-6)


def test_predictive_cdf_and_density_agree_with_their_integral():
    """The predictive's density is the derivative of its CDF (two rules: sinh trapezoid and Gauss-Hermite)."""
    ys, args = np.array([-1.0, 0.3, 2.5]), (0.2, 0.4, -1.0, 0.8)
    step = 1e-5
    slope = (predictive_cdf(ys + step, *args) - predictive_cdf(ys - step, *args)) / (2 * step)
    np.testing.assert_allclose(np.exp(predictive_log_density(ys, *args)), slope, rtol=1e-6)


# ----------------------------------------------------------------- model limits
def test_a_constant_noise_is_gaussian_process_regression():
    """A fixed noise kernel of amplitude 1e-10: scikit-learn's GPR with noise variance exp(c)."""
    X, y, _ = hetero_set(40, 0)
    kernel = C(0.8, "fixed") * RBF(0.9, "fixed")
    c = np.log(0.05)
    est = GPHeteroscedasticRegressor(kernel, C(1e-10, "fixed") * RBF(1.0, "fixed"), noise_mean=c,
                                     noise_mean_bounds="fixed", normalize_y=False, tol=1e-9).fit(X, y)  # fmt: skip
    gpr = GaussianProcessRegressor(kernel, alpha=np.exp(c), optimizer=None).fit(X, y)
    Xt = np.linspace(-3.5, 3.5, 30)[:, None]
    mean, sd = est.predict(Xt, return_std=True)
    want_mean, want_sd = gpr.predict(Xt, return_std=True)
    np.testing.assert_allclose(mean, want_mean, atol=1e-6)
    np.testing.assert_allclose(sd, want_sd, atol=1e-6)
    assert est.log_marginal_likelihood_value_ == pytest.approx(gpr.log_marginal_likelihood_value_, abs=1e-5)
    np.testing.assert_allclose(est.predict_noise(Xt), np.exp(c / 2), rtol=1e-4)
    lpd = est.log_predictive_density(Xt, np.sin(Xt[:, 0]))
    var = want_sd**2 + np.exp(c)
    np.testing.assert_allclose(lpd, -0.5 * np.log(2 * np.pi * var) - 0.5 * (np.sin(Xt[:, 0]) - want_mean) ** 2 / var,
                               atol=1e-5)  # fmt: skip


def test_ep_means_are_within_a_fifth_of_a_posterior_sd_of_the_sampler():
    """30 rows, fixed kernels: both latents' EP means against an elliptical slice sampler of the exact posterior."""
    X, y, _ = hetero_set(30, 3)
    kf, kg, c = C(1.0) * RBF(1.0), C(1.0) * RBF(1.5), np.log(0.04)
    est = GPHeteroscedasticRegressor(kf, kg, noise_mean=c, noise_mean_bounds="fixed", optimizer=None,
                                     normalize_y=False, tol=1e-8).fit(X, y)  # fmt: skip
    mf, vf = est.model_.latent("f", X, full_cov=True)
    mg, vg = est.model_.latent("g", X, full_cov=True)
    centre, cov = np.concatenate([mf, mg]), linalg.block_diag(vf, vg) + 1e-9 * np.eye(60)
    Kf, Kg = kf(X) + 1e-8 * np.eye(30), kg(X) + 1e-8 * np.eye(30)
    mean, sd = two_latent_ess(Kf, Kg, y, c, centre, cov)
    gap = np.abs(centre - mean) / sd
    assert gap[:30].max() < 0.2 and gap[30:].max() < 0.2, (gap[:30].max(), gap[30:].max())


def test_a_run_that_cannot_step_is_diverged_with_finite_marginals():
    """Cauchy noise, a tiny starting noise and no step control (min_step = step = 1): ``"diverged"``, the last proper
    posterior kept (finite), never a NaN in the marginals; the default step control runs on."""
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-3, 3, (40, 1)), axis=0)
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_t(1, size=40)
    priors = [DensePrior.from_kernel(C(1.0) * RBF(0.3), X, 1e-8) for _ in range(2)]
    run = two_latent_ep(*priors, y, tilted_moments, offset=-8.0, step=1.0, min_step=1.0, max_sweeps=100)
    assert run.status == "diverged" and not run.converged
    for post in (run.posterior_f, run.posterior_g):
        assert np.all(np.isfinite(post.mean)) and np.all(post.marginal_var > 0)
    damped = two_latent_ep(*priors, y, tilted_moments, offset=-8.0, rule=FractionalEP(0.5), max_sweeps=300)
    assert damped.converged and np.isfinite(damped.log_evidence)


# ----------------------------------------------------------------- evidence
@pytest.mark.parametrize("rule", [EP(), PowerEP(0.7), FractionalEP(0.7)], ids=["EP", "PowerEP", "FractionalEP"])
def test_the_evidence_gradient_matches_central_differences(rule):
    """The evidence the search climbs is EP's whatever the rule (its gradient is exact at an EP fixed point only:
    at Power EP's it was 20% off in the noise mean)."""
    X, y, _ = hetero_set(25, 1)
    est = GPHeteroscedasticRegressor(C(1.0) * RBF(1.0), C(0.5) * RBF(0.7), rule=rule, optimizer=None, tol=1e-10,
                                     max_sweeps=2000).fit(X, y)  # fmt: skip
    theta = np.concatenate([est.kernel_.theta, est.noise_kernel_.theta, [est.noise_mean_]])
    value, grad = est.log_marginal_likelihood(theta, eval_gradient=True)
    if type(rule) is EP:
        assert value == pytest.approx(est.log_marginal_likelihood_value_, abs=1e-8)
    h = 1e-4
    fd = [(est.log_marginal_likelihood(theta + h * e) - est.log_marginal_likelihood(theta - h * e)) / (2 * h)
          for e in np.eye(theta.size)]  # fmt: skip
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)


def test_sparse_with_inducing_inputs_at_the_training_inputs_is_dense():
    X, y, _ = hetero_set(25, 1)
    args = dict(kernel=C(1.0) * RBF(1.0), noise_kernel=C(0.5) * RBF(0.7), optimizer=None, tol=1e-10, max_sweeps=2000)
    dense = GPHeteroscedasticRegressor(**args).fit(X, y)
    sparse = GPHeteroscedasticRegressor(**args, inducing_points=X).fit(X, y)
    Xt = np.linspace(-3, 3, 17)[:, None]
    # (equal up to the FITC prior's relative jitter of 1e-6 on K_uu)
    assert sparse.log_marginal_likelihood_value_ == pytest.approx(dense.log_marginal_likelihood_value_, abs=1e-4)
    for method in ("predict", "predict_noise"):
        np.testing.assert_allclose(getattr(sparse, method)(Xt), getattr(dense, method)(Xt), atol=1e-4)
    theta = np.concatenate([dense.kernel_.theta, dense.noise_kernel_.theta, [dense.noise_mean_]])
    np.testing.assert_allclose(sparse.log_marginal_likelihood(theta, True)[1],
                               dense.log_marginal_likelihood(theta, True)[1], rtol=1e-4, atol=1e-4)  # fmt: skip


@pytest.fixture(scope="module")
def learned_fit():
    """The defaults' fit on 60 rows (one search for the learning test and the predictive's Monte Carlo test)."""
    X, y, _ = hetero_set(60, 2)
    return X, y, GPHeteroscedasticRegressor(random_state=0).fit(X, y)


def test_learning_raises_the_evidence_and_sparse_fits_learn_too(learned_fit):
    X, y, learned = learned_fit
    fixed = GPHeteroscedasticRegressor(optimizer=None).fit(X, y)
    sparse = GPHeteroscedasticRegressor(inducing_points=15, random_state=0).fit(X, y)
    assert learned.log_marginal_likelihood_value_ > fixed.log_marginal_likelihood_value_
    assert sparse.converged_ and sparse.inducing_points_.shape == (15, 1)
    assert sparse.log_marginal_likelihood_value_ > fixed.log_marginal_likelihood_value_


# ----------------------------------------------------------------- rules
def test_power_ep_at_one_is_ep_and_relaxed_ep_is_refused():
    X, y, _ = hetero_set(30, 4)
    args = dict(optimizer=None, tol=1e-9, max_sweeps=1000)
    ep = GPHeteroscedasticRegressor(rule=EP(), **args).fit(X, y)
    pep1 = GPHeteroscedasticRegressor(rule=PowerEP(1.0), **args).fit(X, y)
    frac = GPHeteroscedasticRegressor(rule=FractionalEP(0.7), **args).fit(X, y)
    pep = GPHeteroscedasticRegressor(rule=PowerEP(0.7), **args).fit(X, y)
    np.testing.assert_allclose(pep1.predict(X), ep.predict(X), atol=1e-7)
    assert frac.converged_ and pep.converged_
    assert 0 < np.max(np.abs(pep.predict(X) - ep.predict(X))) < 0.1
    with pytest.raises(TypeError, match="RelaxedEP"):
        GPHeteroscedasticRegressor(rule=RelaxedEP(1.0)).fit(X, y)


# ----------------------------------------------------------------- estimator
def test_the_defaults_beat_a_homoscedastic_fit_in_test_nlpd():
    X, y, _ = hetero_set(150, 5)
    Xt, yt, _ = hetero_set(300, 6)
    est = GPHeteroscedasticRegressor().fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpr = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(), normalize_y=True).fit(X, y)
    mean, sd = gpr.predict(Xt, return_std=True)
    nlpd_gpr = np.mean(0.5 * np.log(2 * np.pi * sd**2) + 0.5 * (yt - mean) ** 2 / sd**2)
    nlpd = -np.mean(est.log_predictive_density(Xt, yt))
    assert est.converged_ and nlpd < nlpd_gpr - 0.2, (nlpd, nlpd_gpr)
    noise = est.predict_noise(np.array([[-2.5], [2.5]]))
    assert noise[1] > 4 * noise[0]  # the truth: 0.018 and 0.36


def test_the_predictive_interval_noise_and_draws_agree_with_monte_carlo(learned_fit):
    est = learned_fit[2]
    Xt = np.array([[-2.0], [0.5], [2.5]])
    low, high = est.predict_interval(Xt, level=0.9)
    draws = est.sample_y(Xt, n_samples=40000, random_state=1)
    assert draws.shape == (3, 40000)
    np.testing.assert_allclose(np.mean(draws < low[:, None], axis=1), 0.05, atol=0.006)
    np.testing.assert_allclose(np.mean(draws > high[:, None], axis=1), 0.05, atol=0.006)
    mean_f, sd_f = est.predict(Xt, return_std=True)
    assert np.all(np.abs(draws.mean(axis=1) - mean_f) < 5 * draws.std(axis=1) / 200)
    noise, noise_sd = est.predict_noise(Xt, return_std=True)
    assert np.all(noise > 0) and np.all(noise_sd > 0)
    _, cov = est.predict(Xt, return_cov=True)
    np.testing.assert_allclose(np.sqrt(np.diagonal(cov)), sd_f, rtol=1e-6)


def test_bad_input_is_refused_with_the_argument_named():
    X, y, _ = hetero_set(20, 0)
    with pytest.raises(TypeError, match="noise_kernel"):
        GPHeteroscedasticRegressor(noise_kernel="rbf").fit(X, y)
    with pytest.raises(TypeError, match="kernel"):
        GPHeteroscedasticRegressor(kernel=3).fit(X, y)
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="y"):
        GPHeteroscedasticRegressor().fit(X, bad)
    with pytest.raises(ValueError, match="y must have one target per row of X"):
        GPHeteroscedasticRegressor().fit(X, y[:-1])
    with pytest.raises(ValueError, match="y must be one-dimensional"):
        GPHeteroscedasticRegressor().fit(X, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="X"):
        GPHeteroscedasticRegressor().fit(np.full_like(X, np.nan), y)
    with pytest.raises(ValueError, match="noise_mean_bounds"):
        GPHeteroscedasticRegressor(noise_mean_bounds=(1.0, -1.0)).fit(X, y)
    with pytest.raises(TypeError, match="rule"):
        GPHeteroscedasticRegressor(rule="ep").fit(X, y)
    with pytest.raises(TypeError, match="noise_kernel"):  # sparse learning: closed-form kernels only
        GPHeteroscedasticRegressor(noise_kernel=C(1.0) * RBF(1.0) + WhiteKernel(), inducing_points=5).fit(X, y)


def test_clone_get_params_and_the_users_inputs_untouched():
    X, y, _ = hetero_set(10, 0)  # (10 rows: the search still moves both kernels' theta; 30 took three times as long)
    kernel, noise_kernel = C(1.0) * RBF(1.0), C(1.0) * RBF(2.0)
    est = GPHeteroscedasticRegressor(kernel, noise_kernel, rule=EP(), random_state=0)
    twin = clone(est)
    assert twin.get_params()["noise_kernel"].get_params() == noise_kernel.get_params()
    X0, y0, theta0, theta_g0 = X.copy(), y.copy(), kernel.theta.copy(), noise_kernel.theta.copy()
    est.fit(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(kernel.theta, theta0)
    np.testing.assert_array_equal(noise_kernel.theta, theta_g0)
    assert est.kernel_ is not kernel and est.noise_kernel_ is not noise_kernel
    assert not np.allclose(est.kernel_.theta, theta0) and not np.allclose(est.noise_kernel_.theta, theta_g0)  # learned
    with pytest.raises(Exception, match="not fitted"):
        GPHeteroscedasticRegressor().predict(X)


@pytest.mark.slow  # a study end to end (13 s): with the slow studies
def test_the_heteroscedastic_study_reports_ep_beside_the_baselines(tmp_path):
    """``relaxep reproduce heteroscedastic`` (quick: 2 mcycle folds, one simulated draw of 100 rows)."""
    from relaxep.experiments.studies import heteroscedastic
    from relaxep.experiments.study import StudyContext

    context = StudyContext(cache_dir=str(tmp_path / "cache"), quick=True, progress=False)
    tables = heteroscedastic.STUDY.run(context)
    section = heteroscedastic.STUDY.report(tables, tmp_path)
    assert "GPHeteroscedasticRegressor (EP)" in section and (tmp_path / "figures" / "heteroscedastic.png").exists()
    ep, gpr = heteroscedastic.METHODS[:2]
    for fold in tables["mcycle"]:
        assert fold["status"] == "converged" and fold[f"{ep} nlpd"] < fold[f"{gpr} nlpd"] - 0.2
    draw = tables["simulated"][0]
    assert draw[f"{ep} rmse_sd"] < 0.5 * draw[f"{gpr} rmse_sd"]
    assert np.isfinite(tables["curves"][0]["fit_s"])  # (the time is the study's figure, not a timed test)


def test_scikit_learns_estimator_checks_pass():
    """scikit-learn's own checks (fixed hyperparameters for speed; the defaults pass them too, in 45 s)."""
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(GPHeteroscedasticRegressor(optimizer=None), on_fail=None)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert not failed, failed


def test_defaults_go_sparse_above_five_hundred_rows():
    """``inducing_points="auto"``: 510 rows (above DENSE_UP_TO = 500) fit FITC priors with 100 inducing inputs, and
    the fit still finds the noise growing with |x| (the truth: sd 0.05 at 0 to 0.5 at 3; measured 0.081 and 0.41)."""
    rng = np.random.default_rng(11)
    X = rng.uniform(-3.0, 3.0, (510, 1))
    y = np.sin(X[:, 0]) + (0.05 + 0.15 * np.abs(X[:, 0])) * rng.standard_normal(510)
    est = GPHeteroscedasticRegressor(random_state=0).fit(X, y)
    assert est.inducing_points_.shape == (100, 1)
    noise = est.predict_noise(np.array([[0.0], [2.8]]))
    assert noise[1] > 3 * noise[0]
    with pytest.raises(ValueError, match="inducing_points must be 'auto'"):
        GPHeteroscedasticRegressor(inducing_points="sparse").fit(X[:50], y[:50])


def test_other_array_libraries_are_refused_at_the_door(monkeypatch):
    """Arrays of another library (scikit-learn's array_api_dispatch): a TypeError naming the argument, before any
    work, at fit and at predict."""
    xp = pytest.importorskip("array_api_strict")
    monkeypatch.setattr("relaxep._xp._dispatch", lambda: True)  # (array_api_dispatch on, as relaxep reads it)
    X, y, _ = hetero_set(20, 2)
    with pytest.raises(TypeError, match="X: GPHeteroscedasticRegressor fits numpy arrays only"):
        GPHeteroscedasticRegressor().fit(xp.asarray(X), y)
    with pytest.raises(TypeError, match="y: GPHeteroscedasticRegressor fits numpy arrays only"):
        GPHeteroscedasticRegressor().fit(X, xp.asarray(y))
    est = GPHeteroscedasticRegressor(optimizer=None).fit(X, y)
    with pytest.raises(TypeError, match="X: GPHeteroscedasticRegressor fits numpy arrays only"):
        est.predict_noise(xp.asarray(X))
