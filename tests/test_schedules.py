"""Schedules: blocked equals sequential sweep by sweep; parallel reaches the same fixed point."""

import numpy as np
import pytest
from scipy.linalg import solve_triangular
from sklearn.gaussian_process.kernels import RBF

from problems import curved_problem, wavy_problem
from relaxep import (
    EP,
    Blocked,
    ImproperPosteriorError,
    NoisyProbit,
    NoisyStep,
    Parallel,
    PowerEP,
    Probit,
    RelaxedEP,
    infer,
)
from relaxep.posterior import DensePosterior


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
@pytest.mark.parametrize("block_size", [2, 7, 64, 500])  # Blocked(1) is the sequential loop itself
def test_blocked_equals_sequential_after_every_sweep(lik, rule, block_size):
    K, y = wavy_problem(150, 0)
    seq = _sweep_states(K, y, lik, rule, "sequential", 6, order="random", random_state=3)
    blk = _sweep_states(K, y, lik, rule, Blocked(block_size), 6, order="random", random_state=3)
    assert len(seq) == len(blk) == 6
    # Both orders of the same arithmetic differ by rounding (1e-14 per refresh, checked against
    # 40-digit arithmetic); six sweeps of a run that has not converged amplify it to ~1e-10.
    for (t1, n1, m1), (t2, n2, m2) in zip(seq, blk, strict=True):
        np.testing.assert_allclose(t2, t1, rtol=0, atol=1e-9)
        np.testing.assert_allclose(n2, n1, rtol=0, atol=1e-9)
        np.testing.assert_allclose(m2, m1, rtol=0, atol=1e-9)


def test_blocked_posterior_equals_a_from_scratch_posterior():
    K, y = wavy_problem(120, 1)
    worst = []

    def check(sweep, post):
        fresh = DensePosterior(K, post.site_precision, post.site_mean_precision)
        worst.append(max(np.abs(post.cov - fresh.cov).max(), np.abs(post.mean - fresh.mean).max()))

    infer(K, y, NoisyStep(0.1), EP(), schedule=Blocked(16), max_sweeps=5, tol=1e-300, callback=check)
    assert max(worst) < 1e-8


@pytest.mark.parametrize("lik", [Probit(), NoisyStep(0.1)], ids=repr)
def test_parallel_reaches_the_sequential_fixed_point(lik):
    K, y = wavy_problem(100, 2, jitter=1e-2)
    seq = infer(K, y, lik, EP(), schedule="sequential", tol=1e-9, max_sweeps=500)
    par = infer(K, y, lik, EP(), schedule=Parallel(step=0.5), tol=1e-9, max_sweeps=500)
    assert seq.converged and par.converged
    np.testing.assert_allclose(par.mean, seq.mean, atol=1e-6)
    np.testing.assert_allclose(par.cov, seq.cov, atol=1e-6)
    assert par.log_evidence == pytest.approx(seq.log_evidence, abs=1e-6)


def test_parallel_step_is_halved_exactly_where_the_full_step_is_improper(oscillating):
    """On the oscillating problem the parallel schedule halves its step; replaying the sweep
    where it did, the full step's sites give no proper posterior, and every accepted one is proper."""
    K, y, eps = oscillating
    states = []
    res = infer(
        K,
        y,
        NoisyStep(eps),
        EP(),
        schedule="parallel",
        max_sweeps=30,
        callback=lambda s, post: states.append((post.site_precision.copy(), post.site_mean_precision.copy())),
    )
    assert np.all(np.isfinite(res.mean)) and np.linalg.eigvalsh(res.cov).min() > 0
    halved = int(np.flatnonzero(res.step_sizes < 1.0)[0])
    assert halved > 0 and res.step_sizes[halved] == 0.5 and np.all(res.step_sizes[:halved] == 1.0)
    (tau0, nu0), (tau1, nu1) = states[halved - 1], states[halved]
    full_tau, full_nu = tau0 + 2.0 * (tau1 - tau0), nu0 + 2.0 * (nu1 - nu0)
    try:
        post = DensePosterior(K, full_tau, full_nu)
        proper = bool(np.all(np.isfinite(post.mean)) and np.linalg.eigvalsh(post.cov).min() > 0)
    except ImproperPosteriorError:
        proper = False
    assert not proper, "the full step was proper: the halving was not needed"
    for tau, nu in states:
        assert np.linalg.eigvalsh(DensePosterior(K, tau, nu).cov).min() > 0


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


@pytest.mark.parametrize("amplitude", [10.0, 1000.0])
def test_parallel_damping_ends_the_period_two_oscillation_at_the_same_fixed_point(amplitude):
    """Separable clusters, probit: undamped parallel EP falls into a 2-cycle (R alternates and
    never shrinks); with the reversal-triggered damping it converges, to the sequential fixed point."""
    rng = np.random.default_rng(1)
    X = np.r_[rng.normal(-2, 0.5, (30, 2)), rng.normal(2, 0.5, (30, 2))]
    y = np.r_[np.ones(30), -np.ones(30)]
    K = RBF(1.5)(X) * amplitude + 1e-6 * amplitude * np.eye(60)
    cycling = infer(K, y, Probit(), EP(), schedule=Parallel(damp_oscillation=False), max_sweeps=200)
    assert cycling.status == "max_sweeps"
    np.testing.assert_allclose(cycling.trace[-4:-2], cycling.trace[-2:], rtol=1e-6)  # period two
    damped = infer(K, y, Probit(), EP(), schedule="parallel", tol=1e-9, max_sweeps=500)
    sequential = infer(K, y, Probit(), EP(), schedule="blocked", tol=1e-9, max_sweeps=500)
    assert damped.converged and sequential.converged and damped.step_sizes.min() < 1.0
    np.testing.assert_allclose(damped.mean, sequential.mean, rtol=1e-6)
    assert damped.log_evidence == pytest.approx(sequential.log_evidence, rel=1e-9)


def test_an_ordinary_overshoot_does_not_damp_the_parallel_step():
    K, y = wavy_problem(100, 2, jitter=1e-2)
    res = infer(K, y, Probit(), EP(), schedule="parallel", tol=1e-9, max_sweeps=500)
    assert res.converged and np.all(res.step_sizes == 1.0)


def test_parallel_proposals_of_blocks_add_up_to_the_whole_sweeps():
    """What Dask's shards rely on: the block kernel on row blocks gives the whole's proposals, and the
    blocks' inner products add up to those the reversal test uses."""
    from relaxep.inference.schedules import AdaptiveStep, SiteUpdater, parallel_proposals

    K, y = wavy_problem(120, 0)
    post = DensePosterior(K, np.full(120, 0.3), 0.1 * y)
    mu, a, tau, nu = post.mean, post.marginal_var, post.site_precision, post.site_mean_precision
    last = np.random.default_rng(0).normal(size=240)
    whole = parallel_proposals(SiteUpdater(EP(), Probit(), y), mu, a, tau, nu, last)
    parts = []
    for b in (slice(0, 50), slice(50, 120)):
        n_b = b.stop - b.start
        last_b = np.r_[last[b], last[120 + b.start : 120 + b.stop]]
        parts.append(parallel_proposals(SiteUpdater(EP(), Probit(), y[b]), mu[b], a[b], tau[b], nu[b], last_b))
        assert parts[-1].direction.shape == (2 * n_b,)
    np.testing.assert_array_equal(np.r_[parts[0].index, 50 + parts[1].index], whole.index)
    np.testing.assert_array_equal(np.r_[parts[0].precision, parts[1].precision], whole.precision)
    for key in ("dot", "norm_sq", "last_norm_sq"):
        assert sum(getattr(p, key) for p in parts) == pytest.approx(getattr(whole, key), rel=1e-12)
    step = AdaptiveStep(1.0, 0.25)
    step.observe(-1.0, 1.0, 1.0)
    assert step.size == 1.0  # one reversal is an ordinary overshoot
    step.observe(-1.0, 1.0, 1.0)
    assert step.size == 0.5 and step.halve() and step.size == 0.25 and not step.halve() and step.size == 0.25


def test_old_module_path_warns_and_still_works():
    import relaxep.schedules as old
    from relaxep.inference.schedules import Blocked

    with pytest.warns(FutureWarning, match="relaxep.inference.schedules"):
        assert old.Blocked is Blocked


@pytest.mark.parametrize("likelihood", [Probit(), NoisyProbit(0.05, 1.0)])
def test_single_precision_early_sweeps_reach_the_sequential_fixed_point(likelihood, monkeypatch):
    """The parallel schedule's first sweeps may factorise in single precision (far from the fixed point);
    the run still ends where sequential EP does, declared converged on double-precision sweeps only."""
    from relaxep.posterior import dense_posterior

    K, y = wavy_problem(150, 3, jitter=1e-3)
    coarse_refreshes = []
    real = dense_posterior.single_factors

    def counted(*args):
        coarse_refreshes.append(1)
        return real(*args)

    monkeypatch.setattr(dense_posterior, "single_factors", counted)
    parallel = infer(K, y, likelihood, EP(), schedule="parallel", tol=1e-9, max_sweeps=500)
    sequential = infer(K, y, likelihood, EP(), schedule="blocked", tol=1e-9, max_sweeps=500)
    assert parallel.converged and sequential.converged
    assert 0 < len(coarse_refreshes) < parallel.n_sweeps
    # only far from the fixed point: each coarse sweep follows one that moved the marginals by over 1e-2
    assert len(coarse_refreshes) == 1 or parallel.trace[len(coarse_refreshes) - 2] > 1e-2
    np.testing.assert_allclose(parallel.mean, sequential.mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(parallel.marginal_var, sequential.marginal_var, rtol=1e-7)
    assert parallel.log_evidence == pytest.approx(sequential.log_evidence, rel=1e-10)


def test_a_halved_parallel_step_doubles_back_once_the_reversals_stop():
    """Two overlapping clusters, 20% flipped labels: the first overshoots reverse twice and halve the step;
    two calm sweeps later it is back at 1, and the run ends at the sequential fixed point."""
    rng = np.random.default_rng(0)
    n = 200
    X = np.r_[rng.normal(0, 0.8, (n // 2, 2)), rng.normal((2.5, -1), 0.8, (n - n // 2, 2))]
    y = np.r_[np.ones(n // 2), -np.ones(n - n // 2)]
    y[rng.random(n) < 0.2] *= -1
    K = RBF(1.0)(X) + 1e-6 * np.eye(n)
    likelihood = NoisyProbit(0.01, 1.0)
    parallel = infer(K, y, likelihood, EP(), schedule="parallel", tol=1e-9, max_sweeps=500)
    sequential = infer(K, y, likelihood, EP(), schedule="blocked", tol=1e-9, max_sweeps=500)
    assert parallel.converged and sequential.converged
    halved = np.flatnonzero(parallel.step_sizes < 1.0)
    assert halved.size and np.any(parallel.step_sizes[halved[0] :] == 1.0)
    np.testing.assert_allclose(parallel.mean, sequential.mean, rtol=1e-7, atol=1e-9)
    assert parallel.log_evidence == pytest.approx(sequential.log_evidence, rel=1e-10)


def test_old_schedule_keywords_still_work_and_say_so():
    K, y = curved_problem(30, 7)
    new = infer(K, y, Probit(), EP(), schedule=Blocked(8), tol=1e-9)
    with pytest.warns(FutureWarning, match="Blocked"):
        old = infer(K, y, Probit(), EP(), schedule="blocked", block_size=8, tol=1e-9)
    np.testing.assert_array_equal(old.mean, new.mean)


@pytest.mark.parametrize(
    "options, name",
    [
        ({"parallel_step": 0}, "parallel_step"),
        ({"parallel_step": 1.5, "schedule": "parallel"}, "parallel_step"),
        ({"block_size": 0}, "block_size"),
        ({"schedule": Parallel(step=1.0), "block_size": -2}, "block_size"),
    ],
)
def test_an_old_schedule_keyword_out_of_range_is_named_as_the_user_spelled_it(options, name):
    K, y = curved_problem(10, 7)
    with pytest.warns(FutureWarning), pytest.raises(ValueError, match=rf"^{name} must"):
        infer(K, y, Probit(), EP(), **options)


def test_a_schedule_argument_out_of_range_is_named_as_the_schedule_spells_it():
    with pytest.raises(ValueError, match=r"^step must lie in \(0, 1\], got 0"):
        Parallel(step=0)
    with pytest.raises(ValueError, match=r"^block_size must be an integer >= 1"):
        Blocked(block_size=0)
