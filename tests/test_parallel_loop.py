"""The one parallel sweep loop (:mod:`relaxep.inference.parallel_loop`) and what it shares: the run's ledger
(:class:`~relaxep.inference.ledger.SweepLedger`), moment matching (:func:`relaxep.sites.moment_match`,
:attr:`SiteRule.moment_powers <relaxep.sites.SiteRule.moment_powers>`), the evidence terms and the statistic in any
namespace."""

from __future__ import annotations

import numpy as np
import pytest

import problems
from relaxep import EP, FractionalEP, ImproperPosteriorError, NoisyStep, PowerEP, Probit, RelaxedEP, infer
from relaxep.inference import method
from relaxep.inference.evidence import site_evidence_terms
from relaxep.inference.ledger import (
    COARSE_SWEEPS,
    STUCK_SWEEPS,
    RunOptions,
    SweepLedger,
    change_statistic,
    marginal_change,
)
from relaxep.posterior import DensePrior
from relaxep.sites import Cavity, Site, moment_match, site_from_moments


def test_the_ledger_converges_only_on_a_fine_sweep_with_every_site_taken_and_every_cavity_proper():
    ledger = SweepLedger(RunOptions(tol=1e-3))
    assert ledger.sweep(0.5, 0, 1.0) is None
    assert ledger.sweep(1e-4, 0, 1.0, coarse=True) is None  # (single precision: never converged)
    assert ledger.sweep(1e-4, 0, 1.0, proper=lambda: False) is None  # (an improper cavity left)
    assert ledger.sweep(1e-4, 0, 0.5, proper=lambda: True) == "converged" == ledger.status
    assert ledger.trace == [0.5, 1e-4, 1e-4, 1e-4] and ledger.steps == [1.0, 1.0, 1.0, 0.5]


def test_the_ledger_is_stuck_after_the_same_sites_are_skipped_below_tol():
    ledger = SweepLedger(RunOptions(tol=1e-3))
    for _ in range(STUCK_SWEEPS):
        assert ledger.sweep(1e-4, 2, skipped_sites=np.array([3, 7])) is None
    assert ledger.sweep(1e-4, 2, skipped_sites=np.array([3, 7])) == "stuck"
    other = SweepLedger(RunOptions(tol=1e-3))
    for k in range(3 * STUCK_SWEEPS):  # (other sites each sweep: not stuck)
        assert other.sweep(1e-4, 1, skipped_sites=np.array([k])) is None
    assert other.skipped == [1] * 3 * STUCK_SWEEPS


def test_the_ledger_abandons_a_stalled_run_and_records_a_divergence():
    ledger = SweepLedger(RunOptions(tol=1e-9, stall_window=3))
    statuses = [ledger.sweep(r) for r in (1.0, 0.1, 0.2, 0.3, 0.2)]
    assert statuses == [None, None, None, None, "abandoned"]
    diverged = SweepLedger(RunOptions())
    assert diverged.diverge(7) == "diverged" == diverged.status
    assert diverged.trace == [float("inf")] and diverged.skipped == [7] and diverged.steps == [0.0]
    unrecorded = SweepLedger(RunOptions())  # (the joint multi-class and Dask loops: the failed sweep not entered)
    unrecorded.sweep(0.5, 0)
    assert unrecorded.diverge(record=False) == "diverged" == unrecorded.status
    assert unrecorded.trace == [0.5] and unrecorded.skipped == [0] and unrecorded.steps == [1.0]


def test_the_ledger_keeps_its_former_name_where_it_was():
    assert method.ConvergenceMonitor is method.SweepLedger is SweepLedger
    assert method.RunOptions is RunOptions and method.marginal_change is marginal_change


def test_the_coarse_rule_ends_after_a_fine_move_or_coarse_sweeps():
    ledger = SweepLedger(RunOptions())
    assert ledger.coarse
    ledger.next_coarse(1.0)
    assert ledger.coarse
    ledger.next_coarse(1e-3)
    assert not ledger.coarse
    cycling = SweepLedger(RunOptions())
    for _ in range(COARSE_SWEEPS):
        cycling.next_coarse(1.0)
    assert not cycling.coarse


@pytest.mark.parametrize(
    ("rule", "powers"),
    [(EP(), (1.0, 1.0)), (PowerEP(0.7), (0.7, 1.0)), (FractionalEP(0.4), (0.4, 0.4)), (RelaxedEP(1.0), None)],
    ids=repr,
)
def test_the_moment_powers_and_moment_match_are_the_rules_update(rule, powers):
    assert rule.moment_powers == powers
    if powers is None:
        return
    rng = np.random.default_rng(3)
    y, h, lam = np.sign(rng.normal(size=50)), rng.normal(size=50), rng.uniform(0.1, 3.0, size=50)
    site = Site(np.zeros(50), np.zeros(50), np.ones(50))
    update = rule.update(Probit(), y, Cavity(h, lam), site)
    tau, nu, log_z = moment_match(np, Probit(), y, h, lam, powers[0])
    np.testing.assert_array_equal(tau, update.precision)
    np.testing.assert_array_equal(nu, update.mean_precision)
    np.testing.assert_array_equal(log_z, Probit().log_z(y, h, lam, power=powers[0]).log_z)


def test_a_rule_with_a_proposal_of_its_own_is_not_moment_matching():
    class Mine(EP):
        def _propose(self, likelihood, y, cavity, site):
            return super()._propose(likelihood, y, cavity, site)

    assert Mine().moment_powers is None and EP().moment_powers == (1.0, 1.0)


def test_the_statistic_and_the_evidence_terms_in_another_namespace_are_numpys():
    xs = pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(4)
    m0, m1, v0, v1 = rng.normal(size=40), rng.normal(size=40), rng.uniform(0.5, 2, 40), rng.uniform(0.5, 2, 40)
    device = float(change_statistic(xs, *(xs.asarray(a) for a in (m0, v0, m1, v1))))
    assert device == marginal_change(m0, v0, m1, v1)
    y, h, lam, tau = np.sign(m0), m1, v1 + 1.0, rng.uniform(0, 1, 40)
    host = site_evidence_terms(Probit(), y, h, lam, tau, m0, v0)
    on = site_evidence_terms(Probit(), *(xs.asarray(a) for a in (y, h, lam, tau, m0, v0)), xp=xs)
    np.testing.assert_allclose(np.asarray(on), host, rtol=1e-13)


def test_numpy_runs_the_parallel_schedule_through_the_one_loop(monkeypatch):
    import relaxep.inference.site_updates as site_updates

    calls = []
    real = site_updates.parallel_sweeps
    monkeypatch.setattr(site_updates, "parallel_sweeps", lambda *a, **k: calls.append(1) or real(*a, **k))
    K, y = problems.curved_problem(30, 3)
    res = infer(K, y, Probit(), EP(), schedule="parallel")
    assert res.converged and calls == [1]


def test_the_device_loop_raises_on_an_improper_cavity_in_numpys_sweep(device_runs):
    """``on_improper="raise"`` runs on the device too (the one loop): the same error in the same sweep."""
    xs = pytest.importorskip("array_api_strict")
    K, y, eps = problems.oscillating_problem()
    with pytest.raises(ImproperPosteriorError) as host:
        infer(DensePrior(K), y, NoisyStep(eps), EP(), schedule="parallel", max_sweeps=150, on_improper="raise")
    with pytest.raises(ImproperPosteriorError) as device:
        infer(DensePrior(xs.asarray(K)), y, NoisyStep(eps), EP(), schedule="parallel", max_sweeps=150,
              on_improper="raise")  # fmt: skip
    assert str(device.value) == str(host.value) and "improper cavities in sweep" in str(host.value)
    assert device_runs == [EP()]


def test_the_site_from_the_tilted_moments_is_moment_matchings():
    """The two-latent model's form (tilted mean and variance) and the derivatives' form give one site."""
    rng = np.random.default_rng(5)
    y, h, lam = np.sign(rng.normal(size=30)), rng.normal(size=30), rng.uniform(0.1, 3.0, size=30)
    lz = Probit().log_z(y, h, lam, power=0.6)
    tilted_mean, tilted_var = h + lam * lz.dlog_z, lam * (1.0 + lam * lz.d2log_z)
    tau, nu = site_from_moments(tilted_mean, tilted_var, h, lam, 0.6)
    expected_tau, expected_nu, _ = moment_match(np, Probit(), y, h, lam, 0.6)
    np.testing.assert_allclose(tau, expected_tau, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(nu, expected_nu, rtol=1e-9, atol=1e-12)
