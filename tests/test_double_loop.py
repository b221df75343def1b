"""Double-loop EP: it converges where EP oscillates, to a point that satisfies EP's
fixed-point conditions (checked by adaptive quadrature), never raising its free energy."""

from __future__ import annotations

import numpy as np
import pytest

from oracles import lik_fn, log_t_fn, relaxed_tilted_quad, tilted_quad
from problems import wavy_problem
from relaxep import EP, DoubleLoopEP, Likelihood, NoisyStep, Prior, Probit, infer
from relaxep.inference.double_loop import double_loop, solve_inner
from relaxep.posterior import DensePosterior, DensePrior


def _fixed_point_error(res, y, name, eps) -> float:
    """Largest scale-free mismatch between each marginal and its tilted moments (adaptive quadrature:
    ``oracles.relaxed_tilted_quad`` with no relaxation, which checks quad's own error estimate)."""
    var = np.diag(res.cov)
    cav_var = 1.0 / (1.0 / var - res.site_precision)
    cav_mean = cav_var * (res.mean / var - res.site_mean_precision)
    assert np.all(cav_var > 0)
    log_t = log_t_fn(name, eps)
    worst = 0.0
    for i in range(len(y)):
        _, m, v, _, _ = relaxed_tilted_quad(lambda f, i=i: log_t(y[i] * f), cav_mean[i], cav_var[i], 0.0, 0.0, (0.0,))
        worst = max(worst, abs(m - res.mean[i]) / np.sqrt(var[i]), abs(v - var[i]) / var[i])
    return worst


def test_single_site_is_exact():
    """One site: the EP fixed point is the exact posterior and -Phi the exact log evidence."""
    eps, k = 0.1, 2.5
    K, y = np.array([[k]]), np.array([1.0])
    res = infer(K, y, NoisyStep(eps), DoubleLoopEP(), tol=1e-10, require_both_classes=False)
    log_z, m, v = tilted_quad(lik_fn("step", eps), 0.0, k)
    assert res.converged
    assert res.mean[0] == pytest.approx(m, rel=1e-8)
    assert res.cov[0, 0] == pytest.approx(v, rel=1e-8)
    run = double_loop(K, y, NoisyStep(eps), tol=1e-10)
    assert run.free_energy[-1] == pytest.approx(-log_z, rel=1e-9)  # log Z = log(1/2) here


# the probit case (5-7 s) runs with the slow studies; the step case checks the same claim by default
@pytest.mark.parametrize(
    ("lik", "name", "eps"),
    [(NoisyStep(0.05), "step", 0.05), pytest.param(Probit(), "probit", 0.0, marks=pytest.mark.slow)],
)
def test_inner_solution_matches_tilted_moments_at_the_anchored_cavities(lik, name, eps):
    """The inner problem's optimum: every marginal equals the moments of t_i N(anchor_i - site_i)."""
    K, y = wavy_problem(25, 3)
    rng = np.random.default_rng(0)
    prior_var = np.diag(K)
    anchor = (rng.normal(0.0, 0.5, 25) / prior_var, (1.0 + rng.uniform(0.2, 2.0, 25)) / prior_var)
    post, iterations, solved = solve_inner(DensePrior(K), y, lik, anchor, DensePosterior(K))
    assert solved and iterations < 30
    r_lam = anchor[1] - post.site_precision
    r_var = 1.0 / r_lam
    r_mean = (anchor[0] - post.site_mean_precision) * r_var
    var = np.diag(post.cov)
    for i in range(25):
        _, m, v = tilted_quad(lik_fn(name, eps), y[i] * r_mean[i], r_var[i])
        assert y[i] * m == pytest.approx(post.mean[i], abs=1e-7 * np.sqrt(var[i]))
        assert v == pytest.approx(var[i], rel=1e-7)


# the hardness suite's problem 4 (6-7 s) runs with the slow studies; the oscillating one by default
@pytest.mark.parametrize("problem", ["oscillating", pytest.param("suite-4", marks=pytest.mark.slow)])
def test_converges_to_an_ep_fixed_point_where_ep_does_not(problem, oscillating, hard_suite_problem):
    if problem == "oscillating":
        K, y, eps = oscillating
        lik = NoisyStep(eps)
    else:
        K, y, lik = hard_suite_problem  # n = 50, amplitude 100: EP and damped EP both fail
        eps = lik.eps
    ep = infer(K, y, lik, EP(), max_sweeps=200)
    assert not ep.converged
    res = infer(K, y, lik, DoubleLoopEP(), tol=1e-8, max_sweeps=200)
    assert res.converged and res.n_inner > 0
    assert np.all(np.isfinite(res.mean)) and np.all(np.isfinite(res.cov))
    assert _fixed_point_error(res, y, "step", eps) < 1e-6
    run = double_loop(K, y, lik, tol=1e-8)
    assert np.all(np.diff(run.free_energy) <= 1e-9 * np.abs(run.free_energy[:-1]))
    assert run.free_energy[-1] == pytest.approx(-res.log_evidence, rel=1e-8)


def test_textbook_double_loop_also_converges_monotonically(oscillating):
    """Without extrapolation: the free energy never rises, and the end is an EP fixed point (every marginal
    is its tilted moments by quadrature; 1e-5 at tol 1e-6, as ConvergentEP's test asks)."""
    K, y, eps = oscillating
    run = double_loop(K, y, NoisyStep(eps), tol=1e-6, accelerate=False)
    assert run.converged and run.extrapolated == 0
    assert np.all(np.diff(run.free_energy) <= 1e-9 * np.abs(run.free_energy[:-1]))
    assert _fixed_point_error(run.post, y, "step", eps) < 1e-5


@pytest.mark.parametrize("lik", [NoisyStep(0.1), Probit()])
def test_same_fixed_point_as_ep_where_ep_converges(lik):
    K, y = wavy_problem(40, 0)
    ep = infer(K, y, lik, EP(), tol=1e-10, max_sweeps=500)
    dl = infer(K, y, lik, DoubleLoopEP(), tol=1e-10)
    assert ep.converged and dl.converged
    np.testing.assert_allclose(dl.mean, ep.mean, atol=1e-7)
    np.testing.assert_allclose(np.diag(dl.cov), np.diag(ep.cov), rtol=1e-7)
    assert dl.log_evidence == pytest.approx(ep.log_evidence, rel=1e-9)


class _NoCumulants(Likelihood):
    """A likelihood that declares it has no tilted cumulants (the double loop needs them)."""

    has_cumulants = False

    def check_targets(self, y, n=None, both_classes=True):
        return Probit().check_targets(y, n, both_classes)

    def _log_z(self, y, mean, var, power):
        return Probit()._log_z(y, mean, var, power)

    def _log_lik(self, y, f):
        return Probit()._log_lik(y, f)


class _SomeOtherPrior(Prior):
    n = 2

    def posterior(self, site_precision=None, site_mean_precision=None, marginals_only=False):
        raise AssertionError("never asked")


def test_double_loop_refuses_what_it_cannot_run_at_the_door():
    K, y = np.array([[1.0, 0.3], [0.3, 1.0]]), np.array([1.0, -1.0])
    with pytest.raises(TypeError, match="tilted cumulants"):
        infer(K, y, _NoCumulants(), DoubleLoopEP())
    with pytest.raises(TypeError, match="DensePrior"):
        infer(_SomeOtherPrior(), y, Probit(), DoubleLoopEP())
    with pytest.raises(TypeError, match="accelerate"):
        DoubleLoopEP(accelerate="yes")


def test_no_interior_inner_solution_is_reported_as_stalled_not_as_an_answer(hard_suite_problem):
    """With eps = 0 (t vanishes on one side) and an amplitude-100 prior, the first inner problem's
    infimum lies on the edge (an r-cavity precision -> 0): no moment matching is possible there.
    The run must say so ("stalled"), keep a proper posterior, and record no free energy for it."""
    K, y, _ = hard_suite_problem
    res = infer(K, y, NoisyStep(0.0), DoubleLoopEP())
    assert res.status == "stalled" and not res.converged
    assert np.all(np.isfinite(res.mean)) and np.all(np.diag(res.cov) > 0)
    run = double_loop(K, y, NoisyStep(0.0))
    assert run.stalled and run.unsolved >= 3 and np.all(np.isnan(run.free_energy))
