"""The sparse (FITC) posterior, its evidence gradient and the sparse GPClassifier, against ground truths.

Ground truths: the dense posterior of the same covariance (FITC with M < n is the dense
posterior of Q + G; with the inducing inputs at the training inputs, of K itself),
the textbook Gaussian conditional, and central finite differences of the evidence.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.gaussian_process.kernels import RBF, Matern
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import (
    EP,
    Auto,
    ConvergentEP,
    DoubleLoopEP,
    FractionalEP,
    GPClassifier,
    NoisyProbit,
    NoisyStep,
    PowerEP,
    Probit,
    RelaxedEP,
    infer,
)
from relaxep.errors import ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.posterior import DensePrior, SparsePosterior, SparsePrior
from relaxep.posterior.sparse_gradient import sparse_evidence_gradient

KERNEL = C(2.0) * RBF(1.3)
NOISE = 1e-3


def _data(n: int = 50, seed: int = 0, d: int = 2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    f = 1.5 * np.sin(2.0 * X[:, 0]) + X[:, 1]
    y = np.where(rng.uniform(size=n) < 0.5 * (1.0 + np.tanh(f)), 1.0, -1.0)
    return X, y


def _sites(n: int, seed: int = 1, negative: int = 3):
    rng = np.random.default_rng(seed)
    tau = rng.uniform(0.1, 2.0, n)
    tau[:negative] = -0.05  # legal EP sites of negative precision
    return tau, rng.normal(size=n)


def _textbook(K, tau, nu):
    A = np.linalg.inv(np.linalg.inv(K) + np.diag(tau))
    A = 0.5 * (A + A.T)
    return A, A @ nu


# ----------------------------------------------------------------- posterior
@pytest.mark.parametrize("negative", [0, 3])
def test_fitc_posterior_is_the_dense_posterior_of_q_plus_g(negative):
    """M < n: marginals, log Z_q and predictions equal the dense ones for K = Q + diag(K - Q)."""
    X, _ = _data()
    Z = np.random.default_rng(5).normal(size=(12, 2))
    prior = SparsePrior(X, Z, KERNEL, latent_noise=NOISE)
    k_uu = KERNEL(Z) + prior.kuu_jitter * np.eye(12)
    q = KERNEL(X, Z) @ np.linalg.solve(k_uu, KERNEL(Z, X))
    K = q + np.diag(KERNEL.diag(X) + NOISE - np.diag(q))  # built here, not from the prior's own factors
    tau, nu = _sites(len(X), negative=negative)
    A, mu = _textbook(K, tau, nu)
    post = prior.posterior(tau, nu)
    np.testing.assert_allclose(post.mean, mu, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(post.marginal_var, np.diag(A), rtol=1e-8)
    want = 0.5 * (np.linalg.slogdet(A)[1] - np.linalg.slogdet(K)[1] + nu @ A @ nu)
    assert post.log_partition() == pytest.approx(want, rel=1e-9)
    # predictions: FITC's test conditional is the dense conditional with K_*f = Q_*f
    Xs = np.random.default_rng(9).normal(size=(7, 2))
    q_sf = KERNEL(Xs, Z) @ np.linalg.solve(k_uu, KERNEL(Z, X))
    k_ss = KERNEL.diag(Xs) + NOISE
    W = np.linalg.solve(K, q_sf.T)
    mean, var = post.predict_latent(*prior.cross_covariance(Xs))
    np.testing.assert_allclose(mean, W.T @ mu, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(var, k_ss - np.einsum("ij,ij->j", W, (K - A) @ W), rtol=1e-7, atol=1e-9)


def test_inducing_inputs_at_the_training_inputs_reproduce_the_dense_posterior():
    """Z = X, no jitter on K_uu: Q = K, G = 0; the dense posterior of K + noise I to rounding."""
    X, _ = _data(40)
    K = KERNEL(X) + NOISE * np.eye(40)
    tau, nu = _sites(40)
    sparse = SparsePrior(X, X, KERNEL, latent_noise=NOISE, jitter=0.0).posterior(tau, nu)
    dense = DensePrior(K).posterior(tau, nu)
    np.testing.assert_allclose(sparse.mean, dense.mean, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(sparse.marginal_var, dense.marginal_var, rtol=1e-9)
    assert sparse.log_partition() == pytest.approx(dense.log_partition(), rel=1e-10)


@pytest.mark.parametrize(
    "lik, rule, schedule",
    [
        (Probit(), EP(), "parallel"),
        (Probit(), EP(), "sequential"),
        (NoisyProbit(0.05, 1.0), PowerEP(0.7), "parallel"),
        (NoisyProbit(0.01, 1.0), RelaxedEP(c=1.0), "blocked"),
        (NoisyProbit(0.01, 1.0), FractionalEP(0.5), "parallel"),
        (NoisyProbit(0.01, 1.0), "auto", "parallel"),
        (NoisyProbit(0.01, 1.0), ConvergentEP(), "blocked"),
    ],
)
def test_every_rule_runs_unchanged_on_the_sparse_posterior(lik, rule, schedule):
    """Whole runs with Z = X equal the dense runs (same fixed point, same iterates)."""
    X, y = _data(40, 3)
    K = KERNEL(X) + NOISE * np.eye(40)
    prior = SparsePrior(X, X, KERNEL, latent_noise=NOISE, jitter=0.0)
    kw = {} if isinstance(rule, ConvergentEP) else {"schedule": schedule}
    want = infer(K, y, lik, rule, tol=1e-9, max_sweeps=400, **kw)
    got = infer(prior, y, lik, rule, tol=1e-9, max_sweeps=400, **kw)
    assert got.status == want.status == "converged"
    np.testing.assert_allclose(got.mean, want.mean, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got.marginal_var, want.marginal_var, rtol=1e-6)
    assert got.log_evidence == pytest.approx(want.log_evidence, rel=1e-8)


def test_improper_sites_are_reported_not_nan():
    X, _ = _data()
    prior = SparsePrior(X, X[:10], KERNEL, latent_noise=NOISE)
    tau, nu = _sites(len(X), negative=0)
    tau[4] = -1e3  # 1 + g tau < 0 or B indefinite
    with pytest.raises(ImproperPosteriorError):
        prior.posterior(tau, nu)
    post = prior.posterior(*_sites(len(X), negative=0))
    before = post.mean.copy()
    assert not post.update_site(5, -2.0 / post.marginal_var[5], 0.0)
    np.testing.assert_array_equal(post.mean, before)


def test_no_n_by_n_array_is_held():
    X, y = _data(300)
    prior = SparsePrior(X, X[:20], KERNEL, latent_noise=NOISE)
    res = infer(prior, y, Probit(), EP(), schedule="sequential", tol=1e-4)
    post = res.posterior
    arrays = [v for obj in (prior, post) for v in vars(obj).values() if isinstance(v, np.ndarray)]
    assert max(a.size for a in arrays) <= 300 * 20
    with pytest.raises(AttributeError, match="no n x n covariance"):
        res.cov


def test_auto_leaves_out_the_double_loop_on_a_sparse_prior():
    X, y = _data()
    prior = SparsePrior(X, X[:10], KERNEL, latent_noise=NOISE)
    assert not DoubleLoopEP().supports(prior) and DoubleLoopEP().supports(DensePrior(KERNEL(X)))
    with pytest.raises(TypeError, match="no stage"):
        infer(prior, y, Probit(), Auto(stages=(DoubleLoopEP(),)))
    res = infer(prior, y, NoisyStep(0.05), Auto(), max_sweeps=3)  # EP and ConvergentEP run out, no double loop
    assert all(not isinstance(a.method, DoubleLoopEP) for a in res.attempts)


def test_bad_inputs_are_named():
    X, _ = _data()
    with pytest.raises(ValueError, match="Z must have 2 columns"):
        SparsePrior(X, np.zeros((3, 3)), KERNEL)
    with pytest.raises(ValueError, match="X contains NaN"):
        SparsePrior(np.where(X > 1, np.nan, X), X[:3], KERNEL)
    with pytest.raises(KernelNotPositiveDefiniteError, match="K_uu"):
        SparsePrior(X, np.vstack([X[:3], X[:3]]), KERNEL, jitter=0.0)
    post = SparsePrior(X, X[:5], KERNEL).posterior()
    with pytest.raises(ValueError, match=r"K_\*u of shape \(m, 5\)"):
        post.predict_latent(np.zeros((3, len(X))), np.ones(3))


# ------------------------------------------------------------------ gradient
def _fd(f, x, h=1e-5):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


@pytest.mark.parametrize("kernel", [C(2.0) * RBF(1.3), RBF([1.3, 0.7]) * C(0.5), RBF(1.1)], ids=["iso", "ard", "rbf"])
def test_log_zq_gradient_matches_finite_differences(kernel):
    X, _ = _data(40)
    Z = np.random.default_rng(2).normal(size=(6, 2))
    tau, nu = _sites(40)

    def log_zq(theta, z):
        return SparsePrior(X, z, kernel.clone_with_theta(theta), latent_noise=NOISE).posterior(tau, nu).log_partition()

    g_theta, g_z = sparse_evidence_gradient(SparsePrior(X, Z, kernel, latent_noise=NOISE).posterior(tau, nu))
    fd_theta = _fd(lambda t: log_zq(t, Z), kernel.theta)
    fd_z = _fd(lambda z: log_zq(kernel.theta, z.reshape(Z.shape)), Z.ravel())
    np.testing.assert_allclose(g_theta, fd_theta, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(g_z.ravel(), fd_z, rtol=1e-6, atol=1e-7)


def test_evidence_gradient_matches_finite_differences_of_converged_ep():
    """At the EP fixed point the gradient of log Z_q at fixed sites is that of the EP evidence."""
    X, y = _data(40, 4)
    Z = X[::8].copy()
    lik = NoisyProbit(0.01, 1.0)
    base = infer(SparsePrior(X, Z, KERNEL, latent_noise=NOISE), y, lik, EP(), schedule="parallel", tol=1e-11)
    assert base.status == "converged"

    def evidence(theta, z):
        prior = SparsePrior(X, z, KERNEL.clone_with_theta(theta), latent_noise=NOISE)
        r = infer(prior, y, lik, EP(), schedule="parallel", tol=1e-11, max_sweeps=1000, init=base)
        assert r.status == "converged"
        return r.log_evidence

    g_theta, g_z = sparse_evidence_gradient(base.posterior)
    np.testing.assert_allclose(g_theta, _fd(lambda t: evidence(t, Z), KERNEL.theta), rtol=1e-5, atol=1e-6)
    fd_z = _fd(lambda z: evidence(KERNEL.theta, z.reshape(Z.shape)), Z.ravel())
    np.testing.assert_allclose(g_z.ravel(), fd_z, rtol=1e-5, atol=1e-6)


def test_gradient_refuses_other_kernels():
    X, _ = _data()
    post = SparsePrior(X, X[:5], Matern(1.0)).posterior()
    with pytest.raises(TypeError, match="kernel: learning a sparse GP"):
        sparse_evidence_gradient(post)
    with pytest.raises(TypeError, match="SparsePosterior"):
        sparse_evidence_gradient(DensePrior(KERNEL(X)).posterior())


# ---------------------------------------------------------------- classifier
def test_classifier_with_inducing_inputs_at_the_data_is_the_dense_classifier():
    """Equal up to the 1e-6 relative jitter on K_uu (the only difference between the two models)."""
    X, y = _data(60, 6)
    Xt = np.random.default_rng(7).normal(size=(30, 2))
    dense = GPClassifier(kernel=KERNEL, optimizer=None).fit(X, y)
    sparse = GPClassifier(kernel=KERNEL, optimizer=None, inducing_points=X).fit(X, y)
    np.testing.assert_allclose(sparse.predict_proba(Xt), dense.predict_proba(Xt), atol=1e-4)
    assert sparse.log_marginal_likelihood_value_ == pytest.approx(dense.log_marginal_likelihood_value_, rel=1e-5)


def test_classifier_keeps_or_learns_kernel_and_inducing_inputs():
    X, y = _data(120, 8)
    Z0 = X[:8].copy()
    Z_given = Z0.copy()
    fixed = GPClassifier(kernel=KERNEL, optimizer=None, inducing_points=Z_given).fit(X, y)
    np.testing.assert_array_equal(fixed.inducing_points_, Z0)
    np.testing.assert_array_equal(fixed.kernel_.theta, KERNEL.theta)
    theta_only = GPClassifier(kernel=KERNEL, inducing_points=Z_given, learn_inducing_points=False).fit(X, y)
    np.testing.assert_array_equal(theta_only.inducing_points_, Z0)
    both = GPClassifier(kernel=KERNEL, inducing_points=Z_given, optimizer_maxiter=30).fit(X, y)
    np.testing.assert_array_equal(Z_given, Z0)  # the caller's array is not written
    assert not np.array_equal(both.inducing_points_, Z0)
    assert theta_only.log_marginal_likelihood_value_ > fixed.log_marginal_likelihood_value_
    assert both.log_marginal_likelihood_value_ > theta_only.log_marginal_likelihood_value_
    # the reported evidence is the evidence at the learned parameters
    lml, grad = both.log_marginal_likelihood(both.kernel_.theta, eval_gradient=True)
    assert lml == pytest.approx(both.log_marginal_likelihood_value_, rel=1e-6)
    assert grad.shape == both.kernel_.theta.shape


@pytest.mark.parametrize(
    ("init", "M"), [("kmeans", 15), ("kmeans", 5), ("random", 15)], ids=["kmeans-all-rows", "kmeans-subset", "random"]
)
def test_classifier_places_m_inducing_inputs(init, M):
    """The documented recipe (initial_inducing_points), written out: a generator seeded by one draw of
    random_state; "random": M distinct rows in index order; "kmeans": scikit-learn's KMeans (one start,
    50 Lloyd iterations, seeded by the generator's next draw) on min(n, 20 M) random rows (M = 5: 100 of 200)."""
    X, y = _data(200, 9)
    clf = GPClassifier(optimizer=None, inducing_points=M, inducing_init=init, random_state=0).fit(X, y)
    gen = np.random.default_rng(np.random.RandomState(0).randint(2**31 - 1))
    if init == "random":
        want = X[np.sort(gen.choice(200, M, replace=False))]
    else:
        sub = X[gen.choice(200, min(200, 20 * M), replace=False)]
        kmeans = KMeans(n_clusters=M, n_init=1, max_iter=50, random_state=int(gen.integers(2**31 - 1))).fit(sub)
        want = kmeans.cluster_centers_
    np.testing.assert_allclose(clf.inducing_points_, want, rtol=0, atol=1e-12)


def test_classifier_predicts_in_chunks_as_in_one_piece():
    X, y = _data(100, 10)
    clf = GPClassifier(kernel=KERNEL, optimizer=None, inducing_points=10, random_state=0).fit(X, y)
    Xt = np.random.default_rng(11).normal(size=(9000, 2))  # more than one chunk
    mean, var = clf.latent_mean_and_variance(Xt)
    post = clf.result_.posterior
    want_mean, want_var = post.predict_latent(KERNEL(Xt, clf.inducing_points_), KERNEL.diag(Xt) + clf.jitter)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(var, want_var, rtol=1e-12, atol=1e-14)
    assert isinstance(post, SparsePosterior)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"inducing_points": 0}, ValueError, "inducing_points must be >= 1"),
        ({"inducing_points": np.zeros((3, 5))}, ValueError, r"inducing_points must have shape \(M, 2\)"),
        ({"inducing_points": "ten"}, TypeError, "inducing_points must be an int"),
        ({"inducing_points": 5, "inducing_init": "grid", "optimizer": None}, ValueError, "inducing_init"),
        ({"inducing_points": 5, "learn_inducing_points": "yes"}, TypeError, "learn_inducing_points"),
        ({"inducing_points": 5, "kernel": Matern(1.0)}, TypeError, "kernel: learning a sparse GP"),
        ({"inducing_points": 5, "optimizer_subset": 1}, ValueError, "optimizer_subset"),
    ],
)
def test_classifier_rejects_bad_sparse_options(kwargs, error, match):
    X, y = _data(30)
    with pytest.raises(error, match=match):
        GPClassifier(**kwargs).fit(X, y)


def test_classifier_evidence_gradient_matches_finite_differences():
    """The estimator's wiring (latent noise, K_uu jitter, the kernel's theta) against re-converged evidence."""
    X, y = _data(60, 12)
    clf = GPClassifier(kernel=KERNEL, optimizer=None, inducing_points=X[::6].copy(), tol=1e-10, max_sweeps=1000)
    clf.fit(X, y)
    theta = KERNEL.theta + 0.1
    _, grad = clf.log_marginal_likelihood(theta, eval_gradient=True)
    fd = _fd(lambda t: clf.log_marginal_likelihood(t), theta)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)
