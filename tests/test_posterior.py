"""Posterior representations against the textbook Gaussian posterior, and against each other.

Every representation of a prior is listed in ``REPRESENTATIONS`` with the dense matrix it
stands for exactly; each must reproduce the textbook posterior
:math:`A = (K^{-1} + T)^{-1}`, :math:`\\mu = A\\nu` through the protocol (marginals, cavities,
one-site updates, refresh, :math:`\\log Z_q`, predictions), and whole inference runs on it
must equal the dense ones.  A new representation (sparse with inducing points at the training
inputs, block-diagonal with one class) is one more entry here.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF

from problems import rbf
from relaxep import EP, NoisyStep, PowerEP, Probit, infer
from relaxep.posterior import DensePosterior, DensePrior, Prior, SparsePrior


def _dense(X: np.ndarray) -> tuple[Prior, np.ndarray]:
    K = rbf(X, 0.8, 1.5) + 1e-4 * np.eye(len(X))
    return DensePrior(K), K


def _sparse_at_inputs(X: np.ndarray) -> tuple[Prior, np.ndarray]:
    """FITC with the inducing inputs at the training inputs: Q = K K^-1 K = K and g = 0, the dense prior."""
    K = rbf(X, 0.8, 1.5) + 1e-4 * np.eye(len(X))
    return SparsePrior.from_matrices(K, K, np.diag(K)), K


#: name -> builder(X) returning (prior, the dense K it represents exactly)
REPRESENTATIONS = {"dense": _dense, "sparse": _sparse_at_inputs}


def _problem(n: int = 30, seed: int = 0, negative_sites: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    tau = rng.gamma(1.0, 1.0, n)
    tau[:negative_sites] = -0.05  # legal EP sites: negative precision, posterior still proper
    nu = rng.normal(size=n)
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    y[:2] = (1.0, -1.0)
    return X, tau, nu, y


def _textbook(K: np.ndarray, tau: np.ndarray, nu: np.ndarray):
    """A = (K^-1 + T)^-1 and mu = A nu by explicit inverses (small, well-conditioned K)."""
    A = np.linalg.inv(np.linalg.inv(K) + np.diag(tau))
    A = 0.5 * (A + A.T)
    return A, A @ nu


@pytest.mark.parametrize("name", REPRESENTATIONS)
def test_marginals_and_cavities_are_the_textbook_ones(name):
    X, tau, nu, _ = _problem()
    prior, K = REPRESENTATIONS[name](X)
    A, mu = _textbook(K, tau, nu)
    post = prior.posterior(tau, nu)
    np.testing.assert_allclose(post.mean, mu, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(post.marginal_var, np.diag(A), rtol=1e-9)
    cav_mean, cav_var = post.cavities()
    np.testing.assert_allclose(cav_var, 1.0 / (1.0 / np.diag(A) - tau), rtol=1e-8)
    np.testing.assert_allclose(cav_mean, cav_var * (mu / np.diag(A) - nu), rtol=1e-8, atol=1e-10)
    half_var = post.cavities(slice(None), 0.5)[1]
    np.testing.assert_allclose(half_var, 1.0 / (1.0 / np.diag(A) - 0.5 * tau), rtol=1e-8)


@pytest.mark.parametrize("name", REPRESENTATIONS)
def test_log_partition_is_the_gaussian_integral(name):
    """log int N(f|0,K) exp(-f'Tf/2 + nu'f) df = (log|A| - log|K| + nu'A nu) / 2."""
    X, tau, nu, _ = _problem()
    prior, K = REPRESENTATIONS[name](X)
    A, _ = _textbook(K, tau, nu)
    want = 0.5 * (np.linalg.slogdet(A)[1] - np.linalg.slogdet(K)[1] + nu @ A @ nu)
    assert prior.posterior(tau, nu).log_partition() == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("name", REPRESENTATIONS)
def test_one_site_updates_and_bulk_changes_equal_a_fresh_posterior(name):
    X, tau, nu, _ = _problem()
    prior, K = REPRESENTATIONS[name](X)
    post = prior.posterior(tau, nu)
    new_tau, new_nu = tau.copy(), nu.copy()
    for i, (t, v) in {4: (2.0, -0.3), 11: (0.01, 0.2), 0: (0.5, 1.0)}.items():
        assert post.update_site(i, t, v)
        new_tau[i], new_nu[i] = t, v
    A, mu = _textbook(K, new_tau, new_nu)
    np.testing.assert_allclose(post.mean, mu, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(post.marginal_var, np.diag(A), rtol=1e-8)
    # an update that would make a marginal variance negative is refused, changing nothing
    before = post.mean.copy()
    assert not post.update_site(5, -2.0 / post.marginal_var[5], 0.0)
    np.testing.assert_array_equal(post.mean, before)
    post.set_sites(slice(None), tau, nu)
    post.refresh()
    A, mu = _textbook(K, tau, nu)
    np.testing.assert_allclose(post.mean, mu, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(post.marginal_var, np.diag(A), rtol=1e-9)


@pytest.mark.parametrize("name", REPRESENTATIONS)
def test_predictions_are_the_textbook_conditional(name):
    """mu_* = K_* K^-1 mu and s2_* = k_** - K_* K^-1 (K - A) K^-1 K_*^T (the GP conditional given f)."""
    X, tau, nu, _ = _problem()
    prior, K = REPRESENTATIONS[name](X)
    X_test = np.random.default_rng(9).normal(size=(7, 2))
    full = rbf(np.vstack([X, X_test]), 0.8, 1.5)
    K_star, k_diag = full[30:, :30], np.diag(full)[30:] + 1e-4
    A, mu = _textbook(K, tau, nu)
    W = np.linalg.solve(K, K_star.T)
    want_mean = W.T @ mu
    want_var = k_diag - np.einsum("ij,ij->j", W, (K - A) @ W)
    mean, var = prior.posterior(tau, nu).predict_latent(K_star, k_diag)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(var, want_var, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", REPRESENTATIONS)
@pytest.mark.parametrize(
    "lik, rule, schedule",
    [(Probit(), EP(), "blocked"), (NoisyStep(0.1), PowerEP(0.8), "parallel"), (NoisyStep(0.1), "auto", "sequential")],
    ids=["probit-EP-blocked", "step-PEP-parallel", "step-auto-sequential"],
)
def test_whole_runs_equal_the_dense_runs(name, lik, rule, schedule):
    X, _, _, y = _problem(40, 3)
    prior, K = REPRESENTATIONS[name](X)
    want = infer(K, y, lik, rule, schedule=schedule, tol=1e-8, max_sweeps=300)
    got = infer(prior, y, lik, rule, schedule=schedule, tol=1e-8, max_sweeps=300)
    assert got.status == want.status == "converged"
    np.testing.assert_allclose(got.mean, want.mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got.marginal_var, want.marginal_var, rtol=1e-7)
    assert got.log_evidence == pytest.approx(want.log_evidence, rel=1e-8)


def test_each_prior_lives_beside_its_posterior_and_the_old_names_still_answer():
    from relaxep.posterior import base, dense, prior, sparse

    assert DensePrior is dense.DensePrior is prior.DensePrior and Prior is base.Prior is prior.Prior
    assert SparsePrior is sparse.SparsePrior and prior.kernel_matrix is dense.kernel_matrix
    X = np.random.default_rng(0).normal(size=(6, 2))
    dense_prior, K = _dense(X)
    assert dense_prior.K is K or np.array_equal(dense_prior.K, K)
    with pytest.warns(DeprecationWarning, match=r"use \.K; removed in 0\.4"):
        assert dense_prior.kernel is dense_prior.K


def test_sparse_cross_kernel_is_a_deprecated_name_of_cross_covariance():
    from sklearn.gaussian_process.kernels import RBF

    X = np.random.default_rng(1).normal(size=(8, 2))
    sparse_prior = SparsePrior.from_kernel(RBF(1.0), X, X[:3], noise=0.1)
    with pytest.warns(DeprecationWarning, match="use .cross_covariance; removed in 0.4"):
        old = sparse_prior.cross_kernel(X[:4])
    for a, b in zip(old, sparse_prior.cross_covariance(X[:4]), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("site_noise", [1e-2, 1e-6, 1e-8])
@pytest.mark.parametrize("weak", [False, True])
def test_the_posterior_mean_keeps_its_digits_under_strong_sites(site_noise, weak):
    """Gaussian sites of variance ``site_noise`` (a third of them weak, one flat with nu != 0, where ``weak``): the
    mean of both refreshes within 1e-7 posterior sd of mu = K (I + T K)^{-1} nu in 60-digit arithmetic.  GPML's
    marginals-only form K(nu - S^1/2 B^-1 S^1/2 K nu) was 12 sd off at 1e-8; A nu from the formed A 2e-3 sd."""
    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-3.0, 3.0, (40, 1)), axis=0)
    K = RBF(1.0)(X) + 1e-10 * np.eye(40)
    tau, nu = np.full(40, 1.0 / site_noise), np.sin(X[:, 0]) / site_noise
    if weak:
        tau[::3], nu[::3] = 1e-6, 1e-6 * np.sin(X[::3, 0])
        tau[1], nu[1] = 0.0, 0.3
    with mpmath.workdps(60):
        K_mp = mpmath.matrix(K.tolist())
        system = mpmath.eye(40) + mpmath.diag(tau.tolist()) * K_mp
        truth = np.array([float(v) for v in K_mp * mpmath.lu_solve(system, mpmath.matrix(nu.tolist()))])
    full = DensePosterior(K, tau, nu)
    sd = np.sqrt(np.diagonal(full.cov))
    for post in (full, DensePosterior(K, tau, nu, marginals_only=True)):
        assert np.max(np.abs(post.mean - truth) / sd) < 1e-7
