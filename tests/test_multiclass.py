"""Multi-class joint EP (issue 14) against ground truths that do not use the code under test.

* tilted moments at C = 3 against two-dimensional quadrature (multinomial probit) and Monte
  Carlo with a scipy orthant probability (robust max);
* the robust max at C = 2 against the closed form of the noisy step;
* C = 2 joint nested EP against the package's binary probit EP (the same model);
* a small 3-class problem against elliptical slice sampling of the C latent functions, and that
  sampler against the exact one-point posterior (orthant-truncated Gaussian moments);
* the evidence gradient against finite differences of the evidence.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import log_ndtr, ndtr

from oracles import one_point_multiclass_posterior
from relaxep import EP, GPClassifier, NoisyStep, Probit, infer
from relaxep.inference.damped_parallel import DampedParallelOptions, damped_parallel_ep
from relaxep.likelihoods.multiclass import difference_matrices
from relaxep.mcmc import elliptical_slice_multiclass
from relaxep.multiclass import MultinomialProbit, RobustMax, evidence_gradient, infer_multiclass
from relaxep.posterior.multiclass import Proposal

CASES = [  # (mean, cov) of f for class y = 0, C = 3
    (np.zeros(3), np.eye(3)),
    (np.array([1.0, 0.2, -0.5]), np.array([[1.5, 0.6, 0.2], [0.6, 1.0, 0.3], [0.2, 0.3, 0.8]])),
    (np.array([-1.0, 0.5, 0.8]), np.array([[3.0, -0.5, 0.4], [-0.5, 2.0, 0.1], [0.4, 0.1, 2.5]])),
    (np.array([0.3, -2.0, 0.1]), np.array([[0.2, 0.05, 0.0], [0.05, 0.3, 0.02], [0.0, 0.02, 0.25]])),
]


def _rbf(A, B, amp, ls):
    return amp * np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1) / ls**2)


def _quadrature_mnp(m, S, n_nodes=64):
    """Tilted moments of N(f | m, S) p_MNP(0 | f) by tensor Gauss-Hermite quadrature over w = B'f (2-d),
    the likelihood given w by 1-d Gauss-Hermite over u; f | w is Gaussian, so f's moments follow exactly."""
    B = difference_matrices(np.array([0]), 3)[0]
    a, W = B.T @ m, B.T @ S @ B
    x, wt = np.polynomial.hermite_e.hermegauss(n_nodes)
    wt = wt / wt.sum()
    L = np.linalg.cholesky(W)
    g = np.stack(np.meshgrid(x, x, indexing="ij"), -1).reshape(-1, 2)
    w = a + g @ L.T
    ww = np.outer(wt, wt).ravel()
    xu, wu = np.polynomial.hermite_e.hermegauss(80)
    lik = (np.exp(log_ndtr(xu[:, None, None] + w[None, :, :]).sum(-1)) * (wu / wu.sum())[:, None]).sum(0)
    Z = np.sum(ww * lik)
    mw = (ww * lik) @ w / Z
    Vw = ((ww * lik)[:, None] * (w - mw)).T @ (w - mw) / Z
    G = S @ B @ np.linalg.inv(W)
    return np.log(Z), m + G @ (mw - a), S + G @ (Vw - W) @ G.T


@pytest.mark.parametrize("case", range(len(CASES)))
def test_multinomial_probit_tilted_moments_against_quadrature(case):
    m, S = CASES[case]
    log_z, mean, cov = MultinomialProbit().tilted_moments(m[None], S[None], np.array([0]))
    q_log_z, q_mean, q_cov = _quadrature_mnp(m, S)
    # the exact normaliser is also a trivariate-free orthant probability: P(w + u 1 + e > 0)
    B = difference_matrices(np.array([0]), 3)[0]
    exact = stats.multivariate_normal(np.zeros(2), B.T @ S @ B + np.ones((2, 2)) + np.eye(2)).cdf(B.T @ m)
    assert abs(q_log_z - np.log(exact)) < 1e-5  # the quadrature is the truth
    scale = np.sqrt(np.diag(S))
    assert abs(log_z[0] - q_log_z) < 5e-3  # EP's approximation of log Z (typical error 1e-3)
    assert np.max(np.abs(mean[0] - q_mean) / scale) < 5e-3
    assert np.max(np.abs(cov[0] - q_cov)) / np.max(S) < 2e-2
    assert np.max(np.abs(q_mean - m) / scale) > 2e-2 or case == 0  # the likelihood moves the moments


@pytest.mark.parametrize("case", range(len(CASES)))
def test_robust_max_tilted_moments_against_monte_carlo(case):
    m, S = CASES[case]
    eps = 0.1
    log_z, mean, cov = RobustMax(eps).tilted_moments(m[None], S[None], np.array([0]))
    rng = np.random.default_rng(case)
    F = rng.multivariate_normal(m, S, size=400_000)
    lik = np.where(np.argmax(F, 1) == 0, 1 - eps, eps / 2)
    Z = lik.mean()
    w = lik / lik.sum()
    mc_mean = w @ F
    mc_cov = (w[:, None] * (F - mc_mean)).T @ (F - mc_mean)
    B = difference_matrices(np.array([0]), 3)[0]
    P = stats.multivariate_normal(np.zeros(2), B.T @ S @ B).cdf(B.T @ m)  # P(argmax f = 0), no sampling
    exact = eps / 2 + (1 - 1.5 * eps) * P
    assert abs(np.exp(log_z[0]) - exact) < 1e-2 * exact  # EP's orthant probability: errors up to 0.5%
    assert abs(np.log(Z) - log_z[0]) < 1e-2
    se = np.sqrt(np.diag(S) / 400_000 * 4)
    scale = np.sqrt(np.diag(S))
    assert np.max(np.abs(mean[0] - mc_mean) / scale - 4 * se / scale) < 1e-2
    assert np.max(np.abs(cov[0] - mc_cov)) / np.max(S) < 3e-2


def test_robust_max_at_two_classes_is_the_noisy_step():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(20, 2))
    A = rng.normal(size=(20, 2, 2))
    S = A @ np.swapaxes(A, 1, 2) + 0.1 * np.eye(2)
    y = rng.integers(0, 2, 20)
    eps = 0.07
    log_z, mean, _ = RobustMax(eps).tilted_moments(m, S, y)
    sign = np.where(y == 0, 1.0, -1.0)
    g_m = sign * (m[:, 0] - m[:, 1])
    g_v = S[:, 0, 0] + S[:, 1, 1] - 2 * S[:, 0, 1]
    np.testing.assert_allclose(np.exp(log_z), eps + (1 - 2 * eps) * ndtr(g_m / np.sqrt(g_v)), rtol=1e-10)
    # the mean of g = f_y - f_other from the closed form: d log Z / d mean
    k = g_m / np.sqrt(g_v)
    dlz = (1 - 2 * eps) * stats.norm.pdf(k) / np.sqrt(g_v) / np.exp(log_z)
    g_mean = sign * (mean[:, 0] - mean[:, 1])
    np.testing.assert_allclose(g_mean, g_m + g_v * dlz, rtol=1e-8, atol=1e-10)


@pytest.fixture(scope="module")
def binary_problem():
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, (50, 2))
    y = ((np.sin(2 * X[:, 0]) + X[:, 1] + 0.4 * rng.standard_normal(50)) > 0).astype(int)
    return X, y


def test_two_class_joint_nested_ep_is_the_binary_probit_model(binary_problem):
    """p(y|f) = Phi((f_y - f_other)/sqrt 2); with g = (f_0 - f_1)/sqrt 2 ~ GP(0, K) it is binary probit EP."""
    X, y = binary_problem
    K = _rbf(X, X, 2.0, 1.0) + 1e-8 * np.eye(len(y))
    joint = infer_multiclass(K, y, tol=1e-10, max_sweeps=2000, damping=0.8)
    binary = infer(K, np.where(y == 0, 1.0, -1.0), Probit(), EP(), tol=1e-12, max_sweeps=2000)
    assert joint.converged and binary.converged
    assert abs(joint.log_evidence - binary.log_evidence) < 1e-7
    g = (joint.mean[:, 0] - joint.mean[:, 1]) / np.sqrt(2)
    g_var = (joint.cov[:, 0, 0] + joint.cov[:, 1, 1] - 2 * joint.cov[:, 0, 1]) / 2
    np.testing.assert_allclose(g, binary.mean, atol=1e-7)
    np.testing.assert_allclose(g_var, binary.marginal_var, atol=1e-7)
    Xs = np.linspace(-2, 2, 15)[:, None] * np.array([[1.0, -0.5]])
    Ks = _rbf(Xs, X, 2.0, 1.0)
    p = joint.predict_proba(Ks, np.full(15, 2.0 + 1e-8))
    p_binary = Probit().predict(*binary.predict_latent(Ks, np.full(15, 2.0 + 1e-8)))
    np.testing.assert_allclose(p[:, 0], p_binary, atol=1e-7)


def test_two_class_robust_max_is_the_binary_noisy_step_model(binary_problem):
    """p(y|f) = eps + (1 - 2 eps) H(f_y - f_other); w = f_0 - f_1 ~ GP(0, 2K): binary EP with NoisyStep(eps)."""
    X, y = binary_problem
    K = _rbf(X, X, 1.0, 1.0) + 0.05 * np.eye(len(y))
    joint = infer_multiclass(K, y, RobustMax(0.1), tol=1e-10, max_sweeps=3000)
    binary = infer(2 * K, np.where(y == 0, 1.0, -1.0), NoisyStep(0.1), EP(damping=0.5), tol=1e-11, max_sweeps=3000)
    assert joint.converged and binary.converged
    assert abs(joint.log_evidence - binary.log_evidence) < 1e-6
    w = joint.mean[:, 0] - joint.mean[:, 1]
    w_var = joint.cov[:, 0, 0] + joint.cov[:, 1, 1] - 2 * joint.cov[:, 0, 1]
    np.testing.assert_allclose(w, binary.mean, atol=1e-6)
    np.testing.assert_allclose(w_var, binary.marginal_var, atol=1e-6)


@pytest.mark.parametrize("likelihood", [MultinomialProbit(), RobustMax(0.1)])
def test_evidence_gradient_against_finite_differences(likelihood):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(24, 2))
    y = np.digitize(X[:, 0] + 0.3 * rng.normal(size=24), [-0.5, 0.5])
    noise = 0.3 * np.eye(24)  # latent noise: the robust max's evidence depends on the amplitude through it

    def lz(ls):
        K = _rbf(X, X, 2.0, ls) + noise
        return infer_multiclass(K, y, likelihood, tol=1e-11, max_sweeps=3000).log_evidence

    res = infer_multiclass(_rbf(X, X, 2.0, 0.8) + noise, y, likelihood, tol=1e-11, max_sweeps=3000)
    D2 = ((X[:, None] - X[None]) ** 2).sum(-1)
    dK = _rbf(X, X, 2.0, 0.8) * D2 / 0.8**2  # d K / d log(ls)
    h = 1e-4
    fd = (lz(0.8 * np.exp(h)) - lz(0.8 * np.exp(-h))) / (2 * h)
    assert abs(evidence_gradient(res, dK)[0] - fd) < 1e-4 * (1 + abs(fd))


@pytest.fixture(scope="module")
def three_class_problem():
    rng = np.random.default_rng(7)
    centres = np.array([[0.0, 1.0], [-0.9, -0.5], [0.9, -0.5]])
    y = np.repeat(np.arange(3), 6)
    X = centres[y] + 0.7 * rng.standard_normal((18, 2))
    return X, y


@pytest.mark.parametrize("key", ["probit", "robust-max"])
def test_the_multiclass_sampler_draws_the_exact_one_point_posterior(key):
    """The MCMC reference of the two tests below, validated (audit #3): for ONE point with the prior
    N(0, k I_3) the posterior is the tilted distribution, whose mean and covariance
    ``oracles.one_point_multiclass_posterior`` gets from orthant-truncated Gaussian moments (1-D
    adaptive quadrature of closed forms, no relaxep code).  64 independent chains: the Monte Carlo
    error of a second moment is the spread of the chains' own estimates (from their thinned samples,
    which overstates the error of the pooled estimate) over sqrt(64); the means use the sampler's
    batch-means error, once it is shown to be below that independent bound; 4.5 errors allowed."""
    k, label, n_chains = 4.0, 1, 64
    lik = MultinomialProbit() if key == "probit" else RobustMax(0.1)
    n_samples = 400 if key == "probit" else 1600  # the robust max's likelihood is cheap: 4 times the chain
    mean, cov, z = one_point_multiclass_posterior(k, label, key, eps=0.1)
    p_argmax = 1.0 / 3.0  # the label's region under a symmetric prior (checks the oracle's orthant probability)
    assert z == pytest.approx(p_argmax if key == "probit" else 0.05 + 0.85 * p_argmax, rel=1e-10)
    mc = elliptical_slice_multiclass(
        np.array([[k]]), np.array([label]), lik, 3, n_samples=n_samples, n_burn=100, n_chains=n_chains, random_state=0
    )
    assert mc.rhat < 1.01
    draws = mc.samples.reshape(-1, n_chains, 3)  # (kept, chains, C): every 10th sample of every chain
    second = draws[:, :, :, None] * draws[:, :, None, :]
    se_mean = draws.mean(0).std(0, ddof=1) / np.sqrt(n_chains)
    se_second = second.mean(0).std(0, ddof=1) / np.sqrt(n_chains)
    assert np.all(mc.mean_se[0] < se_mean)  # all samples (batch means) against every 10th (chains' spread)
    # power: the errors are at most 1% of a posterior sd, and the likelihood moves the label's mean by 80 of them
    assert np.all(mc.mean_se[0] < 0.015 * np.sqrt(np.diag(cov))) and abs(mean[label]) > 50 * mc.mean_se[0, label]
    assert np.all(np.abs(mc.mean[0] - mean) < 4.5 * mc.mean_se[0])
    mc_second = mc.cov[0] + np.outer(mc.mean[0], mc.mean[0])
    assert np.all(np.abs(mc_second - (cov + np.outer(mean, mean))) < 4.5 * se_second)
    np.testing.assert_allclose(mc.var[0], np.diag(mc.cov[0]), rtol=1e-10)


def test_nested_ep_against_mcmc(three_class_problem):
    X, y = three_class_problem
    K = _rbf(X, X, 2.0, 1.0) + 1e-6 * np.eye(len(y))
    ep = infer_multiclass(K, y, tol=1e-8, max_sweeps=500)
    mc = elliptical_slice_multiclass(K, y, MultinomialProbit(), 3, n_samples=1200, n_burn=300, random_state=0)
    assert mc.rhat < 1.05
    sd = np.sqrt(mc.var)
    # EP's mean and spread of every latent within a tenth of its posterior sd (plus MC error)
    assert np.max(np.abs(ep.mean - mc.mean) / sd - 4 * mc.mean_se / sd) < 0.1
    assert np.max(np.abs(np.sqrt(np.diagonal(ep.cov, axis1=1, axis2=2)) / sd - 1)) < 0.1
    # ...and the coupling of the classes (prior-independent, posterior-correlated)
    corr_ep = ep.cov[:, 0, 1] / np.sqrt(ep.cov[:, 0, 0] * ep.cov[:, 1, 1])
    corr_mc = mc.cov[:, 0, 1] / np.sqrt(mc.cov[:, 0, 0] * mc.cov[:, 1, 1])
    assert np.max(np.abs(corr_ep - corr_mc)) < 0.15  # MC error of a correlation: about 0.04
    assert np.max(np.abs(corr_mc)) > 0.2  # the coupling is real


def test_robust_max_ep_against_mcmc(three_class_problem):
    """The robust max's dense EP against elliptical slice sampling (its likelihood is exact: an argmax)."""
    X, y = three_class_problem
    K = _rbf(X, X, 2.0, 1.0) + 0.1 * np.eye(len(y))
    lik = RobustMax(0.1)
    ep = infer_multiclass(K, y, lik, tol=1e-8, max_sweeps=500)
    mc = elliptical_slice_multiclass(K, y, lik, 3, n_samples=4000, n_burn=1000, random_state=1)
    assert (
        ep.converged and mc.rhat < 1.1
    )  # slower mixing than the probit: the likelihood is flat between argmax switches
    sd = np.sqrt(mc.var)
    assert np.max(np.abs(ep.mean - mc.mean) / sd - 4 * mc.mean_se / sd) < 0.15
    assert np.max(np.abs(np.sqrt(np.diagonal(ep.cov, axis1=1, axis2=2)) / sd - 1)) < 0.15
    # predictive class probabilities at new points: EP's against the average over the samples
    Xs = np.array([[0.0, 0.5], [-0.5, -0.3], [0.6, -0.2], [2.0, 2.0]])
    Ks = _rbf(Xs, X, 2.0, 1.0)
    p_ep = ep.predict_proba(Ks, np.full(4, 2.1))
    Kinv_ks = np.linalg.solve(K, Ks.T)  # (n, 4)
    cond_var = 2.1 - np.einsum("ij,ji->i", Ks, Kinv_ks)
    rng = np.random.default_rng(0)
    F = mc.samples  # (m, n, C)
    mean_star = np.einsum("mnc,ns->msc", F, Kinv_ks)
    draws = mean_star + np.sqrt(cond_var)[None, :, None] * rng.standard_normal(mean_star.shape)
    top = draws.argmax(-1)  # (m, 4)
    p_top = np.stack([(top == c).mean(0) for c in range(3)], 1)
    p_mc = 0.05 + 0.85 * p_top
    assert np.max(np.abs(p_ep - p_mc)) < 0.05


def test_classifier_multiclass_string_labels_and_modes(three_class_problem):
    X, y = three_class_problem
    names = np.array(["ant", "bee", "cat"])[y]
    X0, n0 = X.copy(), names.copy()
    joint = GPClassifier(optimizer=None, multi_class="joint").fit(X, names)
    ovr = GPClassifier(optimizer=None).fit(X, names)  # (the default: one-vs-rest)
    assert ovr.model_.__class__.__name__ == "_OneVsRest"
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(names, n0)
    for clf in (joint, ovr):
        assert list(clf.classes_) == ["ant", "bee", "cat"]
        p = clf.predict_proba(X)
        assert p.shape == (18, 3)
        np.testing.assert_allclose(p.sum(1), 1.0)
        np.testing.assert_array_equal(clf.predict(X), clf.classes_[p.argmax(1)])
        assert np.mean(clf.predict(X) == names) > 0.8
    # the joint classifier is the joint model at its kernel
    K = joint.kernel_(X) + joint.jitter * np.eye(18)
    ref = infer_multiclass(K, y, tol=joint.tol)
    np.testing.assert_allclose(joint.predict_proba(X[:3]), ref.predict_proba(joint.kernel_(X[:3], X), np.diag(K)[:3]))


def test_classifier_learns_hyperparameters_by_the_joint_evidence(three_class_problem):
    X, y = three_class_problem
    clf = GPClassifier(random_state=0, prior=None, multi_class="joint").fit(X, y)  # (ML-II: a stationary point)
    lml, grad = clf.log_marginal_likelihood(clf.kernel_.theta, eval_gradient=True)
    assert lml == pytest.approx(clf.log_marginal_likelihood_value_, abs=1e-3)
    inside = (clf.kernel_.theta > clf.kernel_.bounds[:, 0] + 1e-3) & (
        clf.kernel_.theta < clf.kernel_.bounds[:, 1] - 1e-3
    )
    # a stationary point of the evidence, to the search's stopping rule (0.1 nat per e-fold, EP to tol 1e-2)
    assert np.all(np.abs(grad[inside]) < 0.25)
    start = GPClassifier(optimizer=None, multi_class="joint").fit(X, y)
    assert clf.log_marginal_likelihood_value_ >= start.log_marginal_likelihood_value_ - 1e-6


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(multi_class="ovo"), ValueError, "multi_class"),
        (dict(likelihood=Probit()), TypeError, "likelihood"),
        (dict(rule=EP()), ValueError, "rule"),
        (dict(optimizer_subset=2), ValueError, "optimizer_subset"),
    ],
)
def test_classifier_multiclass_bad_arguments(three_class_problem, kwargs, error, match):
    X, y = three_class_problem
    with pytest.raises(error, match=match):
        GPClassifier(**{"multi_class": "joint", **kwargs}).fit(X, y)


def test_infer_multiclass_bad_input():
    K = np.eye(4)
    with pytest.raises(ValueError, match="K"):
        infer_multiclass(np.ones((4, 3)), np.array([0, 1, 2, 0]))
    with pytest.raises(ValueError, match="y"):
        infer_multiclass(K, np.array([0.5, 1, 2, 0]))
    with pytest.raises(ValueError, match="damping"):
        infer_multiclass(K, np.array([0, 1, 2, 0]), damping=0.0)
    with pytest.raises(TypeError, match="likelihood"):
        infer_multiclass(K, np.array([0, 1, 2, 0]), Probit())
    with pytest.raises(ValueError, match="eps"):
        infer_multiclass(K, np.array([0, 1, 2, 0]), RobustMax(1.5))


def test_non_convergence_is_reported():
    """By the status, as relaxep.infer does: the low-level function does not warn (the estimator does)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    y = rng.integers(0, 3, 20)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = infer_multiclass(_rbf(X, X, 5.0, 1.0) + 1e-6 * np.eye(20), y, max_sweeps=2, tol=1e-12)
    assert res.status == "max_sweeps" and not res.converged
    assert not any("did not converge" in str(w.message) for w in caught)
    assert np.all(np.isfinite(res.mean))


def test_a_run_whose_steps_all_fail_is_diverged_with_nan_evidence():
    """The shared loop: every step improper (backtracked below 1e-4) is "diverged", the evidence nan, the
    result the last proper posterior, and no warning."""

    class Improper:
        default_damping, likelihood, n_classes, sites = 0.5, MultinomialProbit(), 3, (np.zeros((2, 2)),) * 2
        mean = marginal_var = np.ones((2, 3))

        def propose(self):
            return Proposal(self.sites, 0)

        def with_sites(self, proposal, step):
            raise np.linalg.LinAlgError("improper")

        def log_evidence(self):
            raise AssertionError("no evidence for a diverged run")

        def latent_marginals(self):
            return self.mean, np.ones((2, 3, 3))

    start = Improper()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = damped_parallel_ep(start, DampedParallelOptions(damping=0.5))
    assert res.status == "diverged" and res.n_sweeps == 0 and res.posterior is start
    assert np.isnan(res.log_evidence)


def test_the_multiclass_likelihoods_answer_the_base_question_in_c_dimensions():
    """For C = 2 the multinomial probit is the probit Phi((f_y - f_o) / sqrt 2): log Z, its gradient
    and Hessian in the cavity mean have closed forms (Rasmussen & Williams eq. 3.82 with w = f_y - f_o)."""
    from relaxep.likelihoods import Likelihood

    lik = MultinomialProbit()
    assert isinstance(lik, Likelihood) and lik.latent_dim is None and not lik.has_cumulants
    m = np.array([[0.4, -0.3], [-1.0, 0.8]])
    S = np.array([[[1.0, 0.3], [0.3, 0.5]], [[0.7, -0.2], [-0.2, 1.5]]])
    y = np.array([0, 1])
    out = lik.log_z(y, m, S)
    b = np.where(y[:, None] == np.arange(2), 1.0, -1.0)  # w = b . f
    a, w_var = np.sum(b * m, axis=1), np.einsum("ni,nij,nj->n", b, S, b)
    scale = np.sqrt(2.0 + w_var)
    z = a / scale
    r = np.exp(stats.norm.logpdf(z) - log_ndtr(z))  # N(z) / Phi(z), from scipy (not relaxep's helper)
    np.testing.assert_allclose(out.log_z, log_ndtr(z), rtol=1e-10)
    np.testing.assert_allclose(out.dlog_z, (r / scale)[:, None] * b, rtol=1e-8)
    hess = (-r * (z + r) / scale**2)[:, None, None] * b[:, :, None] * b[:, None, :]
    np.testing.assert_allclose(out.d2log_z, hess, rtol=1e-8, atol=1e-12)
    assert RobustMax(0.1) == RobustMax(0.1) and repr(RobustMax(0.1)) == "RobustMax(eps=0.1)"
    with pytest.raises(ValueError, match="class indices"):
        lik.check_targets(np.array([0.5, 1.0]))


def test_the_old_module_path_of_the_likelihoods_warns():
    import relaxep.multiclass.likelihoods as old

    with pytest.warns(FutureWarning, match="relaxep.likelihoods.multiclass"):
        assert old.RobustMax is RobustMax


def test_the_multiclass_likelihoods_are_exported_at_the_root_and_from_likelihoods():
    import relaxep
    import relaxep.likelihoods as likelihoods
    import relaxep.multiclass as face

    for name in ("MulticlassLikelihood", "MultinomialProbit", "RobustMax"):
        assert name in relaxep.__all__ and name in likelihoods.__all__
        assert getattr(relaxep, name) is getattr(likelihoods, name) is getattr(face, name)


def test_the_old_module_path_of_the_inference_warns():
    import relaxep.multiclass.inference as old

    with pytest.warns(FutureWarning, match="relaxep.inference.multiclass"):
        assert old.infer_multiclass is infer_multiclass
