"""Stochastic learning of sparse models (minibatch EP with tied sites), against ground truths.

Ground truths: central finite differences of the minibatch energy (its gradient in the kernel's
hyperparameters and the inducing inputs); the closed-form FITC posterior of a Gaussian
likelihood (the tied site's fixed point); the maximum of the exact FITC marginal likelihood of
a Gaussian likelihood (where the stochastic search must end); and the full-evidence L-BFGS fit
of a probit classifier (test log loss).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPClassifier, GPRegressor, Probit, StudentT
from relaxep._xp import HOST
from relaxep.estimators import _stochastic as st
from relaxep.estimators._search import SearchStep
from relaxep.inference import stochastic_ep as sep
from relaxep.likelihoods import Gaussian, NoisyProbit
from relaxep.posterior.fitc_rows import KUU_JITTER
from relaxep.posterior.rbf import as_scaled_rbf, rbf


def _classes(n: int, seed: int = 0, d: int = 2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    f = 1.5 * np.sin(2.0 * X[:, 0]) + X[:, 1]
    y = np.where(rng.uniform(size=n) < 0.5 * (1.0 + np.tanh(f)), 1.0, -1.0)
    return X, y


def _energy(kernel, lik, X, y, Z, S, m, theta, noise=1e-6):
    view = as_scaled_rbf(kernel.clone_with_theta(theta), X.shape[1])
    K = rbf(view, Z, Z, HOST)
    K[np.diag_indices(Z.shape[0])] += KUU_JITTER * view.constant
    L = linalg.cholesky(K, lower=True)
    step = sep.TiedStep(view, lik, Z, K, L, noise, S, m, True)
    terms = sep.minibatch_terms(step, X, y)
    return float(np.mean(terms.log_z)), (step, terms)


@pytest.mark.parametrize(
    ("kernel", "lik"),
    [(C(1.7) * RBF(1.3), Probit()), (C(0.8) * RBF([0.7, 1.2, 2.0]), Probit()), (C(1.2) * RBF(0.9), StudentT(4, 0.3))],
)
def test_minibatch_energy_gradient_matches_finite_differences(kernel, lik):
    rng = np.random.default_rng(0)
    n, d, M = 40, 3, 6
    X = rng.normal(size=(n, d))
    y = np.sign(rng.normal(size=n)) if isinstance(lik, Probit) else rng.standard_t(3, size=n)
    Z = rng.normal(size=(M, d))
    S0 = rng.normal(size=(M, M))
    S, m = S0 @ S0.T / M + 0.2 * np.eye(M), rng.normal(size=M)
    _, (step, terms) = _energy(kernel, lik, X, y, Z, S, m, kernel.theta)
    g_theta, g_z = sep.energy_gradient(step, terms, X)
    h = 1e-5
    eye = np.eye(kernel.theta.size)
    fd = [
        (
            _energy(kernel, lik, X, y, Z, S, m, kernel.theta + h * e)[0]
            - _energy(kernel, lik, X, y, Z, S, m, kernel.theta - h * e)[0]
        )
        / (2 * h)
        for e in eye
    ]
    np.testing.assert_allclose(g_theta, fd, rtol=1e-5, atol=1e-8)
    fd_z = np.zeros_like(Z)
    for a in range(M):
        for b in range(d):
            step = np.zeros_like(Z)
            step[a, b] = h
            up = _energy(kernel, lik, X, y, Z + step, S, m, kernel.theta)[0]
            down = _energy(kernel, lik, X, y, Z - step, S, m, kernel.theta)[0]
            fd_z[a, b] = (up - down) / (2 * h)
    np.testing.assert_allclose(g_z, fd_z, rtol=1e-5, atol=1e-8)


def _fitc_pieces(kernel, X, Z):
    """K_uu, K_fu and the FITC diagonal diag(K_ff - Q_ff), straight from the kernel.  K_uu carries the
    jitter relaxep adds (inducing_factor: KUU_JITTER times the mean of diag K_uu), so that Q is relaxep's Q."""
    K_uu = kernel(Z)
    K_uu[np.diag_indices_from(K_uu)] += KUU_JITTER * np.mean(np.diag(K_uu))
    K_fu = kernel(X, Z)
    q_diag = np.einsum("ij,ji->i", K_fu, linalg.solve(K_uu, K_fu.T, assume_a="pos"))
    return K_uu, K_fu, kernel.diag(X) - q_diag


def test_tied_site_of_a_gaussian_likelihood_is_the_exact_fitc_posterior():
    """One full-batch step (site step 1): Gaussian sites do not depend on the cavity, so the tied site is
    the closed-form FITC posterior of the inducing values (Snelson & Ghahramani 2006, the SPGP's
    posterior over the pseudo-inputs' values): Sigma_u = K_uu A^-1 K_uu, mu_u = K_uu A^-1 K_uf Lam^-1 y, where
    A = K_uu + K_uf Lam^-1 K_fu and Lam = diag(K_ff - Q_ff) + noise I.  The site lives in whitened
    coordinates u = L v (L L^T = K_uu), so L S L^T must be Sigma_u and L m must be mu_u."""
    rng = np.random.default_rng(1)
    n, M, noise = 300, 12, 0.05
    X = rng.normal(size=(n, 2))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=n)
    Z = X[:M].copy()
    kernel = C(1.3) * RBF(0.8)
    options = st.StochasticOptions(batch_size=n, max_steps=1)
    batches = st.local_batches(X, y, n, np.random.RandomState(0))
    learned = st.learn_stochastic(kernel, Gaussian(noise), Z, n, X.std(0), 0.0, False, False, batches, options)
    S, mean, _, _ = learned.sites.gaussian(n)
    K_uu, K_fu, fitc_diag = _fitc_pieces(kernel, X, Z)
    lam = fitc_diag + noise
    A = K_uu + K_fu.T @ (K_fu / lam[:, None])
    sigma_u = K_uu @ linalg.solve(A, K_uu, assume_a="pos")
    mu_u = K_uu @ linalg.solve(A, K_fu.T @ (y / lam), assume_a="pos")
    L = linalg.cholesky(K_uu, lower=True)
    np.testing.assert_allclose(L @ S @ L.T, sigma_u, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(L @ mean, mu_u, rtol=1e-8, atol=1e-12)


def _fitc_log_ml(kernel, noise, X, y, Z):
    """The exact FITC log marginal likelihood, log N(y | 0, Q_ff + D), D = diag(K_ff - Q_ff) + noise I, by the
    Woodbury identity and the matrix determinant lemma in whitened form (exact, as the n x n Cholesky this was
    first written with, which took 1 s a call at n = 2000): with L L^T = K_uu, V = L^-1 K_uf (so Q_ff = V^T V) and
    B = I + V D^-1 V^T, y^T (Q_ff + D)^-1 y = y^T D^-1 y - |C^-1 V D^-1 y|^2 (C C^T = B) and
    log det(Q_ff + D) = log det D + log det B."""
    K_uu, K_fu, fitc_diag = _fitc_pieces(kernel, X, Z)
    d = fitc_diag + noise
    V = linalg.solve_triangular(linalg.cholesky(K_uu, lower=True), K_fu.T, lower=True)
    C_B = linalg.cholesky(np.eye(Z.shape[0]) + (V / d) @ V.T, lower=True)
    c = linalg.solve_triangular(C_B, V @ (y / d), lower=True)
    quad_form = y @ (y / d) - c @ c
    log_det = np.log(d).sum() + 2.0 * np.log(np.diagonal(C_B)).sum()
    return float(-0.5 * quad_form - 0.5 * log_det - 0.5 * y.size * np.log(2 * np.pi))


def test_stochastic_search_ends_near_the_maximum_of_the_exact_fitc_evidence():
    rng = np.random.default_rng(2)
    n, M = 2000, 15
    X = rng.uniform(-3, 3, size=(n, 1))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=n)
    Z = np.linspace(-3, 3, M)[:, None]
    start = C(1.0) * RBF(1.0)
    common = dict(inducing_points=Z, learn_inducing_points=False, random_state=0)
    full = GPRegressor(start, likelihood=Gaussian(0.2), **common).fit(X, y)
    stochastic = GPRegressor(start, likelihood=Gaussian(0.2), optimizer="stochastic", **common).fit(X, y)
    best = _fitc_log_ml(full.kernel_, full.likelihood_.noise, X, y, Z)
    reached = _fitc_log_ml(stochastic.kernel_, stochastic.likelihood_.noise, X, y, Z)
    initial = _fitc_log_ml(start, 0.2, X, y, Z)
    assert full.log_marginal_likelihood_value_ == pytest.approx(best, abs=1e-6)  # it reports the exact evidence
    assert reached <= best + 1e-6 * abs(best)  # (the full search is exact here: the sanity of the check)
    assert best - reached < 0.002 * n < best - initial  # within 0.002 nats a point of the maximum
    assert stochastic.result_.status == "converged"


def test_stochastic_classifier_predicts_as_well_as_the_full_evidence_search():
    X, y = _classes(3000)
    Xt, yt = _classes(2000, seed=5)
    common = dict(kernel=C(1.0) * RBF(1.0), likelihood=Probit(), inducing_points=20, random_state=0)
    # the full search on the kernel alone (L-BFGS-B learning Z too takes a minute here)
    full = GPClassifier(**common, learn_inducing_points=False).fit(X, y)
    steps = []
    stochastic = GPClassifier(**common, optimizer="stochastic", optimizer_maxiter=300, callback=steps.append)
    stochastic.fit(X, y)

    def log_loss(clf):
        p = clf.predict_proba(Xt)[np.arange(yt.size), (yt > 0).astype(int)]
        return float(-np.mean(np.log(p)))

    assert stochastic.result_.status == "converged"
    assert log_loss(stochastic) < log_loss(full) + 0.005
    assert stochastic.inducing_points_.shape == (20, 2)
    assert not np.allclose(stochastic.inducing_points_, full.inducing_points_)  # (the same k-means start)
    # the progress reports: every report_every steps, the estimate of the log evidence
    assert len(steps) == 300 // st.StochasticOptions().report_every
    assert all(isinstance(s, SearchStep) and np.isfinite(s.log_evidence) for s in steps)


def test_auto_learns_stochastically_from_the_measured_size(monkeypatch):
    X, y = _classes(400)
    used = []
    real = st.learn_stochastic

    def spy(*args, **kwargs):
        used.append(True)
        return real(*args, **kwargs)

    monkeypatch.setattr("relaxep.estimators._models.learn_stochastic", spy)
    monkeypatch.setattr("relaxep.estimators._plan.STOCHASTIC_FROM", 400)
    base = dict(kernel=C(1.0) * RBF(1.0), likelihood=Probit(), inducing_points=10, optimizer_maxiter=30, random_state=0)
    GPClassifier(**base).fit(X, y)
    assert used == [True]
    GPClassifier(**base, optimizer_subset=200).fit(X, y)  # a subset asks for the full evidence on it
    GPClassifier(**base, optimizer="fmin_l_bfgs_b").fit(X, y)
    GPClassifier(**{**base, "inducing_points": None}).fit(X[:100], y[:100])  # dense fits never
    assert used == [True]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"optimizer": "stochastic"}, "inducing_points"),
        ({"optimizer": "stochastic", "inducing_points": 5, "n_restarts_optimizer": 2}, "n_restarts_optimizer"),
        ({"optimizer": "newton"}, "unknown optimizer"),
        ({"optimizer": "stochastic", "inducing_points": 5, "optimizer_maxiter": 0}, "optimizer_maxiter"),
        ({"optimizer_maxiter": 2.5}, "optimizer_maxiter"),
    ],
)
def test_stochastic_options_refused_with_their_names(params, message):
    X, y = _classes(60)
    with pytest.raises(ValueError, match=message):
        GPClassifier(C(1.0) * RBF(1.0), Probit(), **params).fit(X, y)


def test_stochastic_fit_leaves_the_inputs_and_global_state_alone():
    X, y = _classes(500)
    X0, y0 = X.copy(), y.copy()
    state = np.random.get_state()[1].copy()  # noqa: NPY002
    GPClassifier(C(1.0) * RBF(1.0), Probit(), inducing_points=8, optimizer="stochastic", optimizer_maxiter=40).fit(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # noqa: NPY002


def _label_noise(n: int, seed: int, flip: float = 0.02):
    """A linear boundary with ``flip`` of the labels flipped: rows deep on the wrong side, where the label-noise
    likelihood's log is convex (negative site precisions)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, 1.0, -1.0)
    y[rng.uniform(size=n) < flip] *= -1
    return X, y


def test_tied_site_stays_proper_under_negative_site_precisions():
    # issue 43: the default NoisyProbit's rows on the wrong side have w_i < 0; a minibatch's mean of
    # w_i a_i a_i^T can be indefinite, and n copies of the tied site took q = N(0, I) t^n past proper
    # (LinAlgError in tied_start; before the step was bounded, min eig of I + n Lambda ended at -1.8 here)
    n, M, b = 5000, 10, 50
    X, y = _label_noise(n, 0)
    Z = X[np.random.default_rng(0).choice(n, M, replace=False)]
    options = st.StochasticOptions(batch_size=b, max_steps=100)
    batches = st.local_batches(X, y, b, np.random.RandomState(0))
    kernel, lik = C(10.0) * RBF(1.0), NoisyProbit(0.01)
    learned = st.learn_stochastic(kernel, lik, Z, n, X.std(0), 1e-6, False, False, batches, options)
    assert np.linalg.eigvalsh(np.eye(M) + n * learned.sites.lam)[0] > 0.0
    st.tied_start(learned, 1e-6)  # the cavity of the final EP's start


def test_the_default_classifier_fits_stochastically_where_sites_go_negative():
    # issue 43 at the estimator: GPClassifier's default likelihood on the stochastic path with a large
    # amplitude raised numpy's LinAlgError from tied_start before the tied site's step was bounded
    X, y = _label_noise(20000, 1)
    clf = GPClassifier(
        C(100.0) * RBF(1.0), inducing_points=20, optimizer="stochastic", optimizer_maxiter=100, random_state=0
    )
    assert clf.fit(X, y).result_.status == "converged"
