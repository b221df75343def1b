"""The sparse joint multi-class model: nested EP under the low-rank prior f_c = Phi v_c (issue 56).

Ground truths: the dense nested-EP posterior where the low-rank prior is the full one (inducing inputs at the
training inputs: Phi Phi^T = K), and the Gaussian posterior of a small problem formed directly as an n C x n C
matrix, Sigma = K_Q (I + Pi K_Q)^{-1}, at random sites.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPClassifier
from relaxep.likelihoods.multiclass import MultinomialProbit, RobustMax, difference_matrices
from relaxep.multiclass import infer_multiclass, infer_multiclass_sparse
from relaxep.posterior.multiclass import NestedPosterior, SparseNestedPosterior, sparse_nested
from relaxep.posterior.multiclass.sparse_nested import LowRankFeatures, low_rank_features


def _problem(n: int = 40, n_classes: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = (np.arange(n) % n_classes).astype(int)
    X[:, 0] += 1.5 * y  # separable-ish classes
    kernel = C(2.0) * RBF(1.0)
    return rng, X, y, kernel


def test_inducing_inputs_at_the_training_inputs_give_the_dense_posterior():
    rng, X, y, kernel = _problem()
    K = kernel(X) + 1e-6 * np.eye(len(y))
    dense = infer_multiclass(K, y, tol=1e-10, max_sweeps=500)
    Phi = low_rank_features(K, K)  # Phi Phi^T = K: the low-rank prior is the full one
    sparse = infer_multiclass_sparse(Phi, y, tol=1e-10, max_sweeps=500)
    assert dense.converged and sparse.converged
    np.testing.assert_allclose(sparse.mean, dense.mean, atol=1e-6)
    np.testing.assert_allclose(sparse.cov, dense.cov, atol=1e-6)
    assert sparse.log_evidence == pytest.approx(dense.log_evidence, abs=1e-6)
    Xs = rng.normal(size=(25, 2)) * 2.0
    K_star, k_diag = kernel(Xs, X), kernel.diag(Xs) + 1e-6
    Phi_star = low_rank_features(K_star, K)
    np.testing.assert_allclose(sparse.predict_proba(Phi_star, k_diag), dense.predict_proba(K_star, k_diag), atol=1e-6)
    mean_s, cov_s = sparse.predict_latent(Phi_star, k_diag)
    mean_d, cov_d = dense.predict_latent(K_star, k_diag)
    np.testing.assert_allclose(mean_s, mean_d, atol=1e-6)
    np.testing.assert_allclose(cov_s, cov_d, atol=1e-6)


def _explicit_posterior(Phis: list, tau, nu, y, n_classes):
    """The Gaussian posterior of the n C latents (class-major) under the sites, formed directly:
    Sigma = K_Q (I + Pi K_Q)^{-1}, mu = Sigma b, with Pi_i, b_i from the inner sites by their definition."""
    n = y.size
    N = n * n_classes
    K_Q = np.zeros((N, N))
    for c, Phi in enumerate(Phis):
        K_Q[c * n : (c + 1) * n, c * n : (c + 1) * n] = Phi @ Phi.T
    Pi, b = np.zeros((N, N)), np.zeros(N)
    for i in range(n):
        others = [c for c in range(n_classes) if c != y[i]]
        pi = np.ones(n_classes)
        pi[others] = tau[i]
        S = pi.sum()
        h = nu[i].sum()
        Bi = np.zeros((n_classes, n_classes - 1))  # columns e_y - e_o
        Bi[y[i]] = 1.0
        Bi[others, np.arange(n_classes - 1)] = -1.0
        idx = np.arange(n_classes) * n + i
        Pi[np.ix_(idx, idx)] = np.diag(pi) - np.outer(pi, pi) / S
        b[idx] = Bi @ (nu[i] - tau[i] * h / S)
    Sigma = K_Q @ np.linalg.inv(np.eye(N) + Pi @ K_Q)
    Sigma = 0.5 * (Sigma + Sigma.T)
    logdet = np.linalg.slogdet(np.eye(N) + K_Q @ Pi)[1]
    return Sigma @ b, Sigma, logdet, K_Q


@pytest.mark.parametrize("shared", [True, False])
def test_marginals_match_an_explicit_low_rank_posterior_at_random_sites(shared):
    rng = np.random.default_rng(3)
    n, n_classes, m = 12, 3, 4
    y = rng.integers(0, n_classes, n)
    Phis = [rng.normal(size=(n, m))] * n_classes if shared else [rng.normal(size=(n, m)) for _ in range(n_classes)]
    tau = rng.uniform(0.2, 2.0, (n, n_classes - 1))
    nu = rng.normal(size=(n, n_classes - 1))
    post = SparseNestedPosterior.start(LowRankFeatures(Phis), y, n_classes, MultinomialProbit(), (tau, nu))
    mu, Sigma, logdet, K_Q = _explicit_posterior(Phis, tau, nu, y, n_classes)
    mean, cov = post.latent_marginals()
    np.testing.assert_allclose(mean, mu.reshape(n_classes, n).T, atol=1e-10)
    blocks = Sigma.reshape(n_classes, n, n_classes, n)[:, np.arange(n), :, np.arange(n)]  # (n, C, C)
    np.testing.assert_allclose(cov, blocks, atol=1e-10)
    assert post.logdet == pytest.approx(logdet, abs=1e-9)
    # test points: rows of the explicit problem whose sites are flat (tau = nu = 0: Pi_i = 0, b_i = 0)
    stars = [rng.normal(size=(5, m)) for _ in range(n_classes)]
    both = [np.vstack([Phi, Phi_s]) for Phi, Phi_s in zip(Phis, stars, strict=True)]
    flat = np.zeros((5, n_classes - 1))
    mu2, Sigma2, _, _ = _explicit_posterior(
        both, np.vstack([tau, flat]), np.vstack([nu, flat]), np.concatenate([y, np.zeros(5, int)]), n_classes
    )
    mean_s, cov_s = post.predict_latent(np.stack(stars))
    np.testing.assert_allclose(mean_s, mu2.reshape(n_classes, n + 5)[:, n:].T, atol=1e-10)
    blocks2 = Sigma2.reshape(n_classes, n + 5, n_classes, n + 5)[:, np.arange(n, n + 5), :, np.arange(n, n + 5)]
    np.testing.assert_allclose(cov_s, blocks2, atol=1e-10)
    # the evidence (cavities, inner-EP normalisers) as the dense representation gives it for the same prior
    kernels = [K_Q[c * n : (c + 1) * n, c * n : (c + 1) * n] for c in range(n_classes)]
    dense = NestedPosterior(kernels, y, n_classes, MultinomialProbit(), (tau, nu), difference_matrices(y, n_classes))
    assert post.log_evidence() == pytest.approx(dense.log_evidence(), abs=1e-9)


def test_row_blocks_and_threads_do_not_change_the_answer(monkeypatch):
    rng = np.random.default_rng(4)
    n, n_classes, m = 30, 4, 5
    y = rng.integers(0, n_classes, n)
    Phi = rng.normal(size=(n, m))
    sites = (rng.uniform(0.2, 2.0, (n, n_classes - 1)), rng.normal(size=(n, n_classes - 1)))
    one = SparseNestedPosterior.start(LowRankFeatures([Phi] * n_classes, 1), y, n_classes, MultinomialProbit(), sites)
    monkeypatch.setattr(sparse_nested, "ROW_BLOCK", 7)
    two = SparseNestedPosterior.start(LowRankFeatures([Phi] * n_classes, 2), y, n_classes, MultinomialProbit(), sites)
    np.testing.assert_allclose(two.Sig, one.Sig, atol=1e-12)
    np.testing.assert_allclose(two.mu, one.mu, atol=1e-12)
    for a, b in zip(two.propose().sites, one.propose().sites, strict=True):  # the inner sweep in row blocks
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_estimator_with_inducing_points_fits_and_predicts_like_the_dense_joint_model():
    X, y = make_blobs(240, centers=4, n_features=2, cluster_std=2.0, random_state=0)
    Xt, yt, X, y = X[160:], y[160:], X[:160], y[:160]
    dense = GPClassifier(multi_class="joint", random_state=0).fit(X, y)
    sparse = GPClassifier(multi_class="joint", inducing_points=25, random_state=0).fit(X, y)
    assert sparse.inducing_points_.shape == (25, 2)
    assert isinstance(sparse.result_.posterior, SparseNestedPosterior) and sparse.result_.converged
    p = sparse.predict_proba(Xt)
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-10)
    assert np.all(p > 0)
    np.testing.assert_array_equal(sparse.predict(Xt), sparse.classes_[np.argmax(p, 1)])
    assert abs(np.mean(sparse.predict(Xt) == yt) - np.mean(dense.predict(Xt) == yt)) <= 0.05
    mean, cov = sparse.latent_mean_and_variance(Xt[:3])
    assert mean.shape == (3, 4) and cov.shape == (3, 4, 4)
    assert np.isfinite(sparse.log_marginal_likelihood_value_)
    assert sparse.log_marginal_likelihood(sparse.kernel_.theta) == pytest.approx(
        sparse.log_marginal_likelihood_value_, abs=1e-6
    )
    with pytest.raises(ValueError, match="eval_gradient"):
        sparse.log_marginal_likelihood(sparse.kernel_.theta, eval_gradient=True)


def test_loo_with_inducing_inputs_at_the_training_inputs_is_the_dense_models():
    X, y = make_blobs(45, centers=3, n_features=2, cluster_std=1.5, random_state=2)
    kernel = C(3.0) * RBF(1.5)
    dense = GPClassifier(kernel, optimizer=None, tol=1e-8, multi_class="joint").fit(X, y)
    sparse = GPClassifier(kernel, optimizer=None, tol=1e-8, inducing_points=X, multi_class="joint").fit(X, y)
    np.testing.assert_allclose(sparse.loo().pointwise, dense.loo().pointwise, atol=2e-5)  # (priors 1e-6 apart)
    np.testing.assert_allclose(sparse.loo_predict().proba, dense.loo_predict().proba, atol=2e-5)


def test_bad_input_is_named():
    X, y = make_blobs(40, centers=3, n_features=2, random_state=1)
    with pytest.raises(TypeError, match="inducing_points"):
        GPClassifier(likelihood=RobustMax(), inducing_points=5, optimizer=None).fit(X, y)
    with pytest.raises(ValueError, match="inducing_points"):
        GPClassifier(inducing_points=np.zeros((5, 3)), optimizer=None, multi_class="joint").fit(X, y)
    with pytest.raises(ValueError, match="inducing_points"):
        GPClassifier(inducing_points=0, optimizer=None, multi_class="joint").fit(X, y)
    with pytest.raises(ValueError, match="optimizer"):
        GPClassifier(inducing_points=5, optimizer="stochastic", multi_class="joint").fit(X, y)
    Phi = np.random.default_rng(0).normal(size=(40, 4))
    with pytest.raises(TypeError, match="likelihood"):
        infer_multiclass_sparse(Phi, y, RobustMax())
    with pytest.raises(ValueError, match="Phi"):
        infer_multiclass_sparse(Phi[:30], y)
    with pytest.raises(ValueError, match="Phi"):
        infer_multiclass_sparse(np.stack([Phi] * 2), y, n_classes=3)
    result = infer_multiclass_sparse(Phi, y, max_sweeps=3)
    with pytest.raises(ValueError, match="K_star"):
        result.predict_latent(Phi[:, :3], None)
    with pytest.raises(NotImplementedError, match="gradient"):
        result.evidence_gradient(np.zeros((40, 40, 1)))
