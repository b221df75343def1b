"""Schedules: blocked equals sequential sweep by sweep; parallel reaches the same fixed point."""

import numpy as np
import pytest
from scipy.linalg import solve_triangular
from sklearn.gaussian_process.kernels import RBF

from relaxep import EP, NoisyStep, PowerEP, Probit, RelaxedEP, infer
from relaxep.posterior import DensePosterior


def _problem(n, seed, flip=0.1, jitter=1e-4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] > 0, 1.0, -1.0)
    y[rng.random(n) < flip] *= -1
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return np.exp(-0.5 * d2 / 0.7**2) + jitter * np.eye(n), y


def _sweep_states(K, y, lik, rule, schedule, sweeps, **kw):
    states = []

    def record(sweep, post):
        states.append((post.site_precision.copy(), post.site_mean_precision.copy(), post.mean.copy()))

    infer(K, y, lik, rule, schedule=schedule, max_sweeps=sweeps, tol=1e-300, callback=record, **kw)
    return states


@pytest.mark.parametrize(
    "lik, rule",
    [(Probit(), EP()), (NoisyStep(0.1), EP()), (NoisyStep(0.1), PowerEP(0.8)), (NoisyStep(0.1), RelaxedEP(0.05))],
    ids=["probit-EP", "step-EP", "step-PEP", "step-REP"],
)
@pytest.mark.parametrize("block_size", [1, 7, 64, 500])
def test_blocked_equals_sequential_after_every_sweep(lik, rule, block_size):
    K, y = _problem(150, 0)
    seq = _sweep_states(K, y, lik, rule, "sequential", 6, order="random", random_state=3)
    blk = _sweep_states(K, y, lik, rule, "blocked", 6, order="random", random_state=3, block_size=block_size)
    assert len(seq) == len(blk) == 6
    for (t1, n1, m1), (t2, n2, m2) in zip(seq, blk, strict=True):
        np.testing.assert_allclose(t2, t1, rtol=0, atol=1e-10)
        np.testing.assert_allclose(n2, n1, rtol=0, atol=1e-10)
        np.testing.assert_allclose(m2, m1, rtol=0, atol=1e-10)


def test_blocked_posterior_equals_a_from_scratch_posterior():
    from relaxep.posterior import DensePosterior

    K, y = _problem(120, 1)
    worst = []

    def check(sweep, post):
        fresh = DensePosterior(K, post.site_precision, post.site_mean_precision)
        worst.append(max(np.abs(post.cov - fresh.cov).max(), np.abs(post.mean - fresh.mean).max()))

    infer(K, y, NoisyStep(0.1), EP(), schedule="blocked", block_size=16, max_sweeps=5, tol=1e-300, callback=check)
    assert max(worst) < 1e-8


@pytest.mark.parametrize("lik", [Probit(), NoisyStep(0.1)], ids=repr)
def test_parallel_reaches_the_sequential_fixed_point(lik):
    K, y = _problem(100, 2, jitter=1e-2)
    seq = infer(K, y, lik, EP(), schedule="sequential", tol=1e-9, max_sweeps=500)
    par = infer(K, y, lik, EP(), schedule="parallel", parallel_step=0.5, tol=1e-9, max_sweeps=500)
    assert seq.converged and par.converged
    np.testing.assert_allclose(par.mean, seq.mean, atol=1e-6)
    np.testing.assert_allclose(par.cov, seq.cov, atol=1e-6)
    assert par.log_evidence == pytest.approx(seq.log_evidence, abs=1e-6)


def test_parallel_step_is_halved_rather_than_accepting_an_improper_posterior():
    from test_inference import _oscillating_problem

    K, y, eps = _oscillating_problem()
    res = infer(K, y, NoisyStep(eps), EP(), schedule="parallel", max_sweeps=30)
    assert res.status in ("converged", "max_sweeps", "diverged")
    assert np.all(np.isfinite(res.mean))
    assert np.linalg.eigvalsh(res.cov).min() > 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(schedule="zigzag"), "schedule"),
        (dict(block_size=0), "block_size"),
        (dict(parallel_step=0.0), "parallel_step"),
        (dict(parallel_step=2.0), "parallel_step"),
    ],
)
def test_bad_schedule_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        infer(np.eye(2), np.array([1.0, -1.0]), Probit(), EP(), **kwargs)


@pytest.mark.parametrize("scale", [1.0, 50.0])
@pytest.mark.parametrize("weak_sites", [0, 20, 150])
def test_refresh_from_the_inverse_of_b_equals_the_textbook_covariance(scale, weak_sites):
    """Both refreshes (full and marginals-only) against R&W's A = K - V^T V, V = L^-1 S^1/2 K,
    including sites with tiny or zero precision (whose columns are formed directly)."""
    rng = np.random.default_rng(weak_sites)
    n = 300
    X = rng.normal(size=(n, 2))
    K = RBF(0.7)(X) + 1e-6 * np.eye(n)
    tau = scale * rng.gamma(0.5, 2.0, n)
    tau[:weak_sites] = np.where(np.arange(weak_sites) % 2, 1e-9, 0.0)
    nu = rng.normal(size=n)
    sw = np.sqrt(tau)
    L = np.linalg.cholesky(np.eye(n) + sw[:, None] * K * sw[None, :])
    V = solve_triangular(L, sw[:, None] * K, lower=True)
    want = K - V.T @ V
    post = DensePosterior(K, tau, nu)
    # Both forms carry an error of order eps * cond(B) / (tau_i A_ii); at cond(B) ~ 3e3 (scale 50)
    # each differs from an explicit-inverse reference by ~5e-12 of the largest entry.
    np.testing.assert_allclose(post.cov, want, rtol=0, atol=2e-11 * np.abs(want).max())
    np.testing.assert_array_equal(post.cov, post.cov.T)
    np.testing.assert_allclose(post.mean, want @ nu, rtol=0, atol=2e-11 * np.abs(want @ nu).max())
    post.refresh(marginals_only=True)
    np.testing.assert_allclose(post.marginal_var, np.diag(want), rtol=1e-9)  # sweeps of the parallel schedule
    np.testing.assert_allclose(post.mean, want @ nu, rtol=0, atol=2e-11 * np.abs(want @ nu).max())
