"""The references for the posterior of theta against closed forms: grid moments of a Gaussian and of log-gamma
densities, the importance-sampling evidence against N(y | 0, K + s2 I) and the probit's orthant probability
(Genz's algorithm), and pseudo-marginal MCMC against the brute-force grid with the exact evidence."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import digamma, polygamma

from relaxep import Gaussian, Probit
from relaxep.hyper.reference import (
    effective_sample_size,
    ep_importance_proposal,
    grid_reference,
    log_evidence_estimate,
    log_space_density,
    pseudo_marginal_mcmc,
)


def test_grid_moments_of_a_correlated_gaussian():
    mean, cov = np.array([0.3, -1.0]), np.array([[0.5, 0.3], [0.3, 0.8]])
    target = stats.multivariate_normal(mean, cov)
    ref = grid_reference(target.logpdf, mean - 8.0, mean + 8.0, 400, batched=True)
    # the midpoint rule on a smooth density negligible at the box's faces converges faster than any power of h
    # (Euler-Maclaurin: the boundary terms vanish); 1e-6 leaves room for the truncation at 8 sd
    np.testing.assert_allclose(ref.mean, mean, atol=1e-6)
    np.testing.assert_allclose(ref.sd, np.sqrt(np.diag(cov)), rtol=1e-6)
    np.testing.assert_allclose(ref.cov, cov, atol=1e-6)
    assert abs(ref.log_normaliser) < 1e-6  # the density is normalised
    for k in range(2):
        np.testing.assert_allclose(
            ref.marginals[k], stats.norm(mean[k], np.sqrt(cov[k, k])).pdf(ref.axes[k]), atol=1e-6
        )
    points, weights = ref.mixture(rtol=1e-8)
    assert abs(weights.sum() - 1.0) < 1e-12 and len(points) < len(ref.points)
    np.testing.assert_allclose(weights @ points, mean, atol=1e-6)


def test_grid_moments_of_log_gamma_densities_with_the_jacobian():
    """theta_k = log phi_k, phi_k ~ Gamma(a_k, rate b_k): E theta = psi(a) - log b, var theta = psi'(a)."""
    a, b = np.array([2.0, 5.0, 1.5]), np.array([0.5, 3.0, 1.0])
    log_density = log_space_density(stats.gamma(a, scale=1.0 / b).logpdf)
    ref = grid_reference(log_density, [-6.0, -4.0, -9.0], [5.0, 2.0, 4.0], 60, batched=True)
    mean, sd = digamma(a) - np.log(b), np.sqrt(polygamma(1, a))
    # midpoint rule with h ~ 0.1-0.2: error O(h^2 / 24 * f'') ~ 1e-3 of the sd
    np.testing.assert_allclose(ref.mean, mean, atol=5e-3)
    np.testing.assert_allclose(ref.sd, sd, rtol=5e-3)
    assert abs(ref.log_normaliser) < 5e-3


def test_grid_one_point_at_a_time_in_one_dimension():
    """The unbatched path, d = 1: log phi for phi ~ Gamma(3, rate 2), its mean psi(3) - log 2 and sd psi'(3)^1/2."""
    ref = grid_reference(log_space_density(stats.gamma(3.0, scale=0.5).logpdf), [-6.0], [4.0], 1000)
    np.testing.assert_allclose(ref.mean, digamma(3.0) - np.log(2.0), atol=1e-5)
    np.testing.assert_allclose(ref.sd, np.sqrt(polygamma(1, 3.0)), rtol=1e-5)
    np.testing.assert_allclose(ref.marginals[0], np.exp(ref.log_density), rtol=1e-4)  # normalised already


def test_grid_refuses_bad_input():
    with pytest.raises(ValueError, match="n_points"):
        grid_reference(lambda t: 0.0, [0, 0, 0], [1, 1, 1], 200)
    with pytest.raises(ValueError, match="lower"):
        grid_reference(lambda t: 0.0, [1.0], [0.0], 10)
    with pytest.raises(ValueError, match="every grid point"):
        grid_reference(lambda t: -np.inf, [0.0], [1.0], 10)


def _regression(n=20, seed=1, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3.0, 3.0, (n, 1))
    y = np.sin(1.5 * X[:, 0]) + np.sqrt(noise) * rng.standard_normal(n)
    return X, y, noise


def _se_kernel(X):
    """theta = (log amplitude variance, log length-scale) -> K, written out (not scikit-learn's)."""
    d2 = (X[:, None, 0] - X[None, :, 0]) ** 2
    return lambda theta: np.exp(theta[0]) * np.exp(-0.5 * d2 / np.exp(2.0 * theta[1]))


def _exact_log_evidence(X, y, noise):
    """log N(y | 0, K_theta + s2 I) for a batch of theta (m, 2), by batched Cholesky factors."""
    d2 = (X[:, None, 0] - X[None, :, 0]) ** 2

    def log_evidence(theta):
        t = np.atleast_2d(theta)
        S = np.exp(t[:, 0, None, None] - 0.5 * d2 / np.exp(2.0 * t[:, 1, None, None])) + noise * np.eye(len(y))
        L = np.linalg.cholesky(S)
        z = np.linalg.solve(L, np.broadcast_to(y, (len(t), len(y)))[..., None])[..., 0]
        logdet = np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)
        return -0.5 * np.sum(z * z, axis=1) - logdet - 0.5 * len(y) * np.log(2.0 * np.pi)

    return log_evidence


def test_importance_estimate_is_unbiased_for_a_gaussian_likelihood():
    """E[p_hat] = N(y | 0, K + s2 I) for a proposal 0.1 standard deviation off and 1.3 times too wide (variance
    finite: 2 S^-1 - (1.3 S)^-1 > 0); the average of p_hat / p over 4000 repeats of N = 4 within 4 standard errors of 1,
    while the plug-in exp(E log p_hat) is biased below it (Jensen) by more than that."""
    X, y, noise = _regression()
    K = _se_kernel(X)(np.array([0.0, 0.0])) + 1e-8 * np.eye(len(y))
    truth = stats.multivariate_normal(np.zeros(len(y)), K + noise * np.eye(len(y))).logpdf(y)
    mean, cov = ep_importance_proposal(K, y, Gaussian(noise))
    rng = np.random.default_rng(0)
    off = mean + 0.1 * np.sqrt(np.diag(cov))
    logs = np.array(
        [log_evidence_estimate(K, y, Gaussian(noise), off, cov, 4, rng, inflation=1.3) for _ in range(4000)]
    )
    ratio = np.exp(logs - truth)
    se = ratio.std(ddof=1) / np.sqrt(ratio.size)
    assert abs(ratio.mean() - 1.0) < 4.0 * se
    assert 1.0 - np.exp(logs.mean() - truth) > 4.0 * se  # the test can tell a biased estimate
    # EP's q is the exact posterior here: every weight equals p(y), the estimate exact whatever N
    assert abs(log_evidence_estimate(K, y, Gaussian(noise), mean, cov, 3, rng) - truth) < 1e-6


def _classification(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3.0, 3.0, (n, 1))
    y = np.where(np.sin(2.0 * X[:, 0]) + 0.5 * rng.standard_normal(n) > 0.0, 1.0, -1.0)
    return X, y


def test_importance_estimate_matches_the_probit_orthant_probability():
    """p(y) = P(y_i (f_i + e_i) > 0 for all i) = Phi_n(0; 0, D (K + I) D), D = diag(-y): Genz's algorithm to a
    relative 1e-3 (scipy).  The estimate with N = 20 000 (sd of its log ~ 1e-3) within 5e-3; small-N estimates
    averaged as p_hat (not as logs) within Monte Carlo error."""
    X, y = _classification(20)
    n = len(y)
    K = _se_kernel(X)(np.array([0.0, 0.0])) + 1e-8 * np.eye(n)
    D = np.diag(y)
    orthant = stats.multivariate_normal(
        np.zeros(n), D @ (K + np.eye(n)) @ D, abseps=1e-14, releps=1e-3, seed=0, maxpts=10**6
    )
    truth = np.log(orthant.cdf(np.zeros(n)))
    mean, cov = ep_importance_proposal(K, y, Probit(), tol=1e-8)
    rng = np.random.default_rng(1)
    assert abs(log_evidence_estimate(K, y, Probit(), mean, cov, 20000, rng) - truth) < 5e-3
    ratio = np.exp([log_evidence_estimate(K, y, Probit(), mean, cov, 2, rng, df=4.0) for _ in range(2000)] - truth)
    assert abs(ratio.mean() - 1.0) < 4.0 * ratio.std(ddof=1) / np.sqrt(ratio.size) + 1e-3


def test_effective_sample_size_of_an_ar1_chain():
    """x_t = phi x_{t-1} + e_t: ESS = n (1 - phi) / (1 + phi)."""
    rng = np.random.default_rng(0)
    phi, n = 0.8, 200_000
    e = rng.standard_normal(n)
    x = np.empty(n)
    x[0] = e[0] / np.sqrt(1 - phi**2)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + e[t]
    np.testing.assert_allclose(effective_sample_size(x), n * (1 - phi) / (1 + phi), rtol=0.1)


def _grid_and_chain(n_steps, seed, df=4.0):
    X, y, noise = _regression()
    K_of = _se_kernel(X)
    log_prior = log_space_density(stats.gamma(2.0, scale=0.5).logpdf)
    exact = _exact_log_evidence(X, y, noise)
    ref = grid_reference(lambda t: exact(t) + log_prior(t), [-4.0, -4.0], [4.0, 2.5], 120, batched=True)
    res = pseudo_marginal_mcmc(
        X,
        y,
        K_of,
        Gaussian(noise),
        log_prior,
        ref.mean,
        ref.cov,
        n_steps=n_steps,
        n_burn=100,
        n_importance=8,
        df=df,
        random_state=seed,
        schedule="parallel",  # EP's q for the Gaussian likelihood: the exact posterior, by one cheap parallel update
    )
    return ref, res


def _within_monte_carlo_error(ref, res, k=4.0):
    sd_se = res.sd / np.sqrt(2.0 * res.ess)  # the sd's standard error, as for independent draws at the ESS
    return np.all(np.abs(res.mean - ref.mean) < k * res.mean_se) and np.all(np.abs(res.sd - ref.sd) < k * sd_se)


def test_pseudo_marginal_chain_recovers_the_grid_posterior():
    """GP regression, theta = (log amplitude, log length-scale), Gamma(2, scale 0.5) priors on both positive
    hyperparameters, noise fixed; the importance density a t with 4 degrees of freedom (so every estimate is
    noisy); the grid has the exact evidence N(y | 0, K + s2 I) and the same prior."""
    ref, res = _grid_and_chain(1200, seed=0)
    assert 0.15 < res.acceptance_rate < 0.6 and res.ess.min() > 100
    assert _within_monte_carlo_error(ref, res)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_longer_pseudo_marginal_chains_recover_the_grid_posterior(seed):
    ref, res = _grid_and_chain(8000, seed=seed)
    assert _within_monte_carlo_error(ref, res)


def test_a_scikit_learn_kernel_is_read_in_log_space():
    """ConstantKernel * RBF's theta is (log amplitude variance, log length-scale): the same chain as the kernel
    written out, step for step."""
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel

    X, y, noise = _regression(n=10)
    args = (Gaussian(noise), lambda t: -0.5 * t @ t, [0.3, -0.2], 0.1 * np.eye(2))
    a = pseudo_marginal_mcmc(X, y, ConstantKernel(1.0) * RBF(1.0), *args, n_steps=40, df=4.0, random_state=3)
    b = pseudo_marginal_mcmc(X, y, _se_kernel(X), *args, n_steps=40, df=4.0, random_state=3)
    np.testing.assert_allclose(a.chain, b.chain, atol=1e-8)
    assert 0.0 < a.acceptance_rate < 1.0


def test_chain_refuses_a_start_outside_the_prior():
    X, y, noise = _regression(n=5)
    with pytest.raises(ValueError, match="theta0"):
        pseudo_marginal_mcmc(X, y, _se_kernel(X), Gaussian(noise), lambda t: -np.inf, [0.0, 0.0], np.eye(2))
    with pytest.raises(ValueError, match="proposal_cov"):
        pseudo_marginal_mcmc(X, y, _se_kernel(X), Gaussian(noise), lambda t: 0.0, [0.0, 0.0], np.eye(3))
