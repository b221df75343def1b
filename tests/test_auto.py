"""The automatic cascade: EP where EP converges; else damped EP; else double-loop EP, one policy."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from problems import wavy_problem
from relaxep import EP, Attempt, Auto, ConvergentEP, DoubleLoopEP, FractionalEP, NoisyStep, SiteUpdates, infer
from relaxep.inference.site_updates import SiteUpdates as _SiteUpdates


def test_auto_is_plain_ep_where_ep_converges():
    K, y = wavy_problem(60, 2)
    ep = infer(K, y, NoisyStep(0.1), EP(), tol=1e-6)
    auto = infer(K, y, NoisyStep(0.1), "auto", tol=1e-6)
    assert ep.converged and auto.converged
    np.testing.assert_array_equal(auto.mean, ep.mean)
    assert auto.attempts == (Attempt(SiteUpdates(EP()), "converged", ep.n_sweeps),)


def test_auto_falls_back_when_ep_oscillates(oscillating):
    K, y, eps = oscillating
    auto = infer(K, y, NoisyStep(eps), "auto", max_sweeps=150)
    assert auto.converged
    first = auto.attempts[0]
    assert first.method == SiteUpdates(EP()) and first.status == "abandoned" and first.n_sweeps < 150
    # with the paper's statistic R kept setting new minima there: EP ran its whole budget
    paper = infer(K, y, NoisyStep(eps), "auto", max_sweeps=150, criterion="alpha")
    assert paper.converged and paper.attempts[0] == Attempt(SiteUpdates(EP()), "max_sweeps", 150)


def test_a_damped_stage_runs_with_its_tolerance_tightened(oscillating):
    K, y, eps = oscillating
    auto = infer(K, y, NoisyStep(eps), Auto(stages=(EP(), EP(damping=0.5))), max_sweeps=150)
    assert auto.converged and auto.rule.damping == 0.5
    assert auto.trace[-1] < 0.5e-3  # tolerance tightened by the damping step


def test_an_early_stage_is_abandoned_when_r_sets_no_new_minimum(hard_suite_problem):
    """The stall rule: stop when the last 20 sweeps hold no new minimum of R (and only then)."""
    K, y, lik = hard_suite_problem
    res = infer(K, y, lik, Auto(stages=(EP(), DoubleLoopEP()), stall_window=20), max_sweeps=150)
    ep = res.attempts[0]
    assert ep.status == "abandoned"
    plain = infer(K, y, lik, EP(), max_sweeps=ep.n_sweeps)
    trace = plain.trace
    assert min(trace[-20:]) >= min(trace[:-20])  # no new minimum in the window that ended it
    assert all(min(trace[k - 20 : k]) < min(trace[: k - 20]) for k in range(21, ep.n_sweeps))


def test_auto_ends_with_convergent_ep_where_ep_fails(hard_suite_problem):
    K, y, lik = hard_suite_problem
    auto = infer(K, y, lik, "auto")
    assert auto.converged
    assert [a.method for a in auto.attempts] == [SiteUpdates(EP()), ConvergentEP()]
    assert auto.attempts[0].status == "abandoned"
    alone = infer(K, y, lik, ConvergentEP())
    np.testing.assert_array_equal(auto.mean, alone.mean)


def test_a_convergent_stage_out_of_budget_ends_the_cascade(hard_suite_problem):
    """Still descending when its sweeps ran out: the double loop would only be slower."""
    K, y, lik = hard_suite_problem
    res = infer(K, y, lik, Auto(stages=(EP(), ConvergentEP(), DoubleLoopEP())), max_sweeps=3)
    assert [type(a.method) for a in res.attempts] == [SiteUpdates, ConvergentEP]
    assert res.attempts[-1].status == "max_sweeps"


class _Stalls(ConvergentEP):
    """A convergent stage that stalls at once (as ConvergentEP did, before it started from EP's
    iterates, wherever the prior's moments were out of reach)."""

    def run(self, prior, y, likelihood, options, init=None):
        result = SiteUpdates(EP()).run(prior, y, likelihood, options.__class__(max_sweeps=1))
        return replace(result, method=self, status="stalled")


def test_the_double_loop_is_the_last_resort_when_convergent_ep_stalls():
    """Separable clusters, probit, amplitude 100: the moments of the prior are out of reach of any
    proper r-cavity.  ConvergentEP now starts from an EP iterate there and converges; a stage that
    stalls hands over to the double loop."""
    from sklearn.gaussian_process.kernels import RBF

    from relaxep import Probit

    rng = np.random.default_rng(1)
    X = np.r_[rng.normal(-2, 0.5, (30, 2)), rng.normal(2, 0.5, (30, 2))]
    y = np.r_[np.ones(30), -np.ones(30)]
    K = 100.0 * RBF(1.5)(X) + 1e-4 * np.eye(60)
    assert infer(K, y, Probit(), ConvergentEP(), max_sweeps=50).converged
    res = infer(K, y, Probit(), Auto(stages=(_Stalls(), DoubleLoopEP())), max_sweeps=50)
    assert [(type(a.method), a.status) for a in res.attempts][:1] == [(_Stalls, "stalled")]
    assert type(res.attempts[-1].method) is DoubleLoopEP


def test_the_tolerance_policy_lives_on_the_method():
    assert SiteUpdates(EP(damping=0.5)).tolerance(1e-3) == 0.5e-3
    assert SiteUpdates(FractionalEP(0.5, damping=0.25)).tolerance(1e-3) == 0.25e-3
    assert DoubleLoopEP().tolerance(1e-3) == 1e-3


def test_auto_passes_its_schedule_to_the_site_rule_stages():
    K, y = wavy_problem(40, 1)
    res = infer(K, y, NoisyStep(0.1), "auto", schedule="parallel")
    assert isinstance(res.method, _SiteUpdates) and res.method.schedule == "parallel"
    direct = infer(K, y, NoisyStep(0.1), EP(), schedule="parallel")
    np.testing.assert_array_equal(res.mean, direct.mean)


@pytest.mark.parametrize("stages", [(), ("EP",), (EP(), None)])
def test_bad_stages_are_refused(stages):
    with pytest.raises(TypeError, match="stages"):
        Auto(stages=stages)


class _LostWhenWarm(_SiteUpdates):
    """EP that, from a warm start, cycles (here: stops after one sweep, unconverged), as parallel EP can from sites
    learned at other hyperparameters; from flat sites it is plain EP."""

    def run(self, prior, y, likelihood, options, init=None):
        return super().run(prior, y, likelihood, replace(options, max_sweeps=1) if init is not None else options, init)


def test_a_warm_start_that_fails_is_retried_from_flat_sites_before_the_convergent_stages():
    K, y = wavy_problem(30, 1)
    cold = infer(K, y, NoisyStep(0.1), EP())
    assert cold.converged
    auto = Auto(stages=(_LostWhenWarm(EP()), ConvergentEP()))
    result = infer(K, y, NoisyStep(0.1), auto, init=cold.sites)  # (any warm start: the stage is lost from it)
    assert result.converged and isinstance(result.method, _LostWhenWarm)
    assert [a.status for a in result.attempts] == ["max_sweeps", "converged"]
    np.testing.assert_allclose(result.mean, cold.mean, rtol=1e-6, atol=1e-8)
