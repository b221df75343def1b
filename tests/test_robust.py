"""Remedies for EP's failures (issue #6): fractional EP, ground truth by MCMC."""

from __future__ import annotations

import numpy as np
import pytest

from oracles import lik_fn, tilted_quad
from relaxep import EP, FractionalEP, NoisyStep, Probit, infer
from test_schedules import _problem


@pytest.mark.parametrize("schedule", ["blocked", "parallel"])
def test_fractional_ep_with_alpha_one_is_ep(schedule):
    K, y = _problem(40, 0)
    a = infer(K, y, NoisyStep(0.1), EP(), schedule=schedule, tol=1e-9, max_sweeps=300)
    b = infer(K, y, NoisyStep(0.1), FractionalEP(1.0), schedule=schedule, tol=1e-9, max_sweeps=300)
    np.testing.assert_array_equal(a.site_precision, b.site_precision)
    np.testing.assert_array_equal(a.mean, b.mean)


@pytest.mark.parametrize(("lik", "name", "eps"), [(Probit(), "probit", 0.0), (NoisyStep(0.1), "step", 0.1)])
def test_fractional_ep_fixed_point_matches_the_alpha_tilted_moments(lik, name, eps):
    """At convergence every marginal equals the moments of t^a q^{\\a} (by adaptive quadrature)."""
    alpha = 0.5
    K, y = _problem(20, 1)
    res = infer(K, y, lik, FractionalEP(alpha), tol=1e-12, max_sweeps=2000)
    assert res.converged
    var = np.diag(res.cov)
    prec = 1.0 / var - alpha * res.site_precision
    cav_var = 1.0 / prec
    cav_mean = cav_var * (res.mean / var - alpha * res.site_mean_precision)
    t = lik_fn(name, eps)
    for i in range(len(y)):
        _, m, v = tilted_quad(lambda g, i=i: t(y[i] * g), cav_mean[i], cav_var[i], power=alpha)[:3]
        assert m == pytest.approx(res.mean[i], abs=1e-7)
        assert v == pytest.approx(var[i], rel=1e-6)


def test_fractional_ep_rejects_bad_alpha():
    with pytest.raises(ValueError, match="alpha"):
        FractionalEP(0.0)
    with pytest.raises(ValueError, match="alpha"):
        FractionalEP(1.5)


def test_auto_is_plain_ep_where_ep_converges():
    K, y = _problem(60, 2)
    ep = infer(K, y, NoisyStep(0.1), EP(), tol=1e-6)
    auto = infer(K, y, NoisyStep(0.1), "auto", tol=1e-6)
    assert ep.converged and auto.converged
    np.testing.assert_array_equal(auto.mean, ep.mean)
    assert auto.attempts == (("EP(damping=1.0)", "converged", ep.n_sweeps),)


def test_auto_falls_back_when_ep_oscillates():
    from test_inference import _oscillating_problem

    K, y, eps = _oscillating_problem()
    auto = infer(K, y, NoisyStep(eps), "auto", max_sweeps=150)
    assert auto.converged
    assert auto.attempts[0] == ("EP(damping=1.0)", "max_sweeps", 150)
    assert auto.rule.damping == 0.5
    assert auto.trace[-1] < 0.5e-3  # tolerance tightened by the damping step


def test_hardness_suite_rows_and_auto_targets():
    """Two small problems of the quick suite (one with MCMC ground truth): every method gives
    a row, auto converges, and the summary's targets are computed from those rows."""
    from relaxep.experiments.robustness import ROBUST_METHODS, problem_grid, run_robustness, summarize_robustness

    specs = problem_grid(8, max_n=200)
    # the small problem of smallest amplitude: its MCMC mixes in the quick setting (seeded)
    small = min((s for s in specs if s["n"] <= 100), key=lambda s: s["amplitude"])["problem"]
    rows = run_robustness(None, quick=True, problems=[small])
    assert [r["method"] for r in rows] == [m["label"] for m in ROBUST_METHODS]
    assert all(r["status"] in ("converged", "max_sweeps", "diverged") and not r["nan"] for r in rows)
    assert all("mean_rmse" in r and r["mcmc_rhat"] < 1.1 for r in rows)
    auto = rows[-1]
    assert auto["converged"]
    table, targets = summarize_robustness(rows)
    assert len(table) == len(ROBUST_METHODS) and {r["set"] for r in table} == {"suite"}
    assert targets["auto_converged"] == targets["auto_runs"] == 1
    assert targets["auto_runs_synthetic"] == 0


def test_synthetic_protocol_problems_are_the_papers_data():
    from relaxep.experiments.robustness import make_problem, synthetic_problems
    from relaxep.experiments.synthetic import synthetic_data

    specs = synthetic_problems(2)
    assert len(specs) == 8 and len({s["problem"] for s in specs}) == 8
    spec = specs[-1]
    K, y, K_star, _, _, lik = make_problem(spec, n_test=100)
    _, y_ref, _, _ = synthetic_data(spec["repeat"], spec["flip"], 2)
    np.testing.assert_array_equal(y, y_ref)
    assert K.shape == (400, 400) and K_star.shape == (200, 400) and lik.eps == spec["flip"]
    np.testing.assert_allclose(np.diag(K), 1.0 + 1e-6)


def test_estimator_accepts_auto():
    from sklearn.gaussian_process.kernels import RBF

    from relaxep import GPClassifier
    from relaxep.datasets import make_synthetic

    X, y, _ = make_synthetic(40, 0.2, random_state=0)
    clf = GPClassifier(RBF(0.7), likelihood=NoisyStep(0.2), rule="auto", optimizer=None).fit(X, y)
    assert clf.result_.converged and clf.result_.attempts
    assert clf.score(X, y) > 0.6


def test_rep_by_evidence_keeps_the_converged_run_of_highest_evidence():
    from relaxep import RelaxedEP
    from relaxep.experiments.robustness import rep_by_evidence

    K, y = _problem(40, 2)
    grid = (0.1, 1.0, 100.0)
    chosen = rep_by_evidence(K, y, NoisyStep(0.1), grid, max_sweeps=100)
    runs = [infer(K, y, NoisyStep(0.1), RelaxedEP(c), max_sweeps=100) for c in grid]
    ok = [r for r in runs if r.converged]
    assert ok and chosen.converged
    assert chosen.log_evidence == max(r.log_evidence for r in ok)
    assert [a[0] for a in chosen.attempts] == [repr(RelaxedEP(c)) for c in grid]
