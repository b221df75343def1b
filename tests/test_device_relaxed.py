"""Relaxed EP with the sites on the device (:mod:`relaxep.sites.relaxed_on`, :mod:`relaxep.inference.device_ep`).

Ground truth: numpy.  The tilted :math:`E[\\log p(y|f)]` of each likelihood against its numpy
``expected_log_lik`` over a grid of cavities and against ``scipy.integrate.quad`` (``oracles.tilted_quad``); the
device line search against :meth:`RelaxedEP.optimal_relaxation` on random cavities and sites (its grid and zooms
repeated point for point, so the same ``b*``); whole sparse fits on ``array-api-strict`` against the host loop
(numpy arrays, the same rule and parallel schedule), sweep for sweep; and the claim that a sweep reads nothing
back but its scalars.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

import relaxep.sites.relaxed_on as relaxed_on
from oracles import lik_fn, tilted_quad
from relaxep import Gaussian, Laplace, Logistic, NoisyProbit, NoisyStep, Probit, RelaxedEP, infer
from relaxep.posterior import SparsePrior
from relaxep.sites import Cavity, Site

xs = pytest.importorskip("array_api_strict")
pytest.importorskip("array_api_compat")

KERNEL = C(2.0) * RBF(1.0)
LIKELIHOODS = [Probit(), Logistic(), NoisyProbit(0.05, 1.0), NoisyStep(0.1), Gaussian(0.3), Laplace(0.4)]
IDS = ["probit", "logistic", "noisy-probit", "noisy-step", "gaussian", "laplace"]


def _host(a):
    return a if isinstance(a, np.ndarray) else np.from_dlpack(a)


@pytest.mark.parametrize("likelihood", LIKELIHOODS, ids=IDS)
def test_expected_log_lik_on_is_numpys(likelihood):
    """A 40 x 25 grid of cavities (|mu| <= 20, 1e-3 <= s^2 <= 1e2), both labels or random targets: within 1e-8 of
    numpy's (closed forms: to rounding); the pair Relaxed EP takes is log_z_on at u = 1 and this."""
    mean, var = np.meshgrid(np.linspace(-20.0, 20.0, 40), np.logspace(-3.0, 2.0, 25))
    mean, var = mean.ravel(), var.ravel()
    rng = np.random.default_rng(0)
    y = np.where(rng.random(mean.size) < 0.5, -1.0, 1.0) if likelihood.class_targets else rng.normal(size=mean.size)
    want = likelihood.expected_log_lik(y, mean, var)
    assert np.all(np.isfinite(want))
    closed = isinstance(likelihood, NoisyStep | Gaussian | Laplace)
    atol = 1e-13 if closed else 1e-8
    for xp in (np, xs):
        args = (xp.asarray(y), xp.asarray(mean), xp.asarray(var))
        got = _host(likelihood.expected_log_lik_on(xp, *args))
        np.testing.assert_allclose(got, want, rtol=0, atol=atol * max(1.0, np.max(np.abs(want))))
        lz, expected = likelihood.log_z_and_expected_on(xp, *args)
        np.testing.assert_allclose(_host(expected), got, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(_host(lz.log_z), _host(likelihood.log_z_on(xp, *args, 1.0).log_z), rtol=1e-14)
    assert likelihood.relaxed_on_device


@pytest.mark.parametrize(
    ("likelihood", "name", "kw"),
    [(Probit(), "probit", {}), (Logistic(), "logistic", {}),
     (NoisyProbit(0.05, 0.7), "noisy-probit", {"eps": 0.05, "scale": 0.7})],
    ids=["probit", "logistic", "noisy-probit"],
)  # fmt: skip
def test_expected_log_lik_on_equals_adaptive_quadrature(likelihood, name, kw):
    """The sinh rule's E[log t] against scipy's quad of the tilted density at a few cavities (label y = 1)."""
    t = lik_fn(name, **kw)
    for mean, var in [(-3.0, 0.5), (-8.0, 12.0)]:
        extra = lambda g: likelihood.log_lik(1.0, np.asarray(g, dtype=float))  # noqa: E731
        want = tilted_quad(t, mean, var, 1.0, extra=extra)[-1]
        got = likelihood.expected_log_lik_on(xs, xs.asarray([1.0]), xs.asarray([mean]), xs.asarray([var]))
        assert abs(float(_host(got)[0]) - want) < 1e-8 * max(1.0, abs(want)), (mean, var)


def _sites(likelihood, n, seed):
    """Random targets, cavities and sites (some flat, some negative), a marginal variance for each."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0) if likelihood.class_targets else rng.normal(size=n)
    cav_mean, cav_var = rng.normal(scale=2.0, size=n), 10.0 ** rng.uniform(-1.0, 1.5, n)
    tau = rng.normal(size=n)
    tau[:5] = 0.0
    nu = tau * rng.normal(scale=2.0, size=n) + np.where(tau == 0.0, 0.3, 0.0)
    marginal = 1.0 / (1.0 / cav_var + tau)
    return y, cav_mean, cav_var, tau, nu, np.where(marginal > 0.0, marginal, 0.5)


def _search_on(xp, rule, likelihood, y, cav_mean, cav_var, tau, nu, marginal, searched=None):
    site_mean = Site(tau, nu, marginal).mean
    columns = tuple(xp.asarray(a) for a in (cav_mean, cav_var, tau, site_mean, marginal))
    searched = np.ones(y.shape, dtype=bool) if searched is None else searched
    return _host(relaxed_on.optimal_relaxation_on(xp, rule, likelihood, xp.asarray(y), columns, xp.asarray(searched)))


def _assert_same_search(rule, likelihood, args, got, want):
    """The same b* at every site, or (a tie of Q at rounding: the Laplace's special functions differ from SciPy's in
    the last digits, and its Q is flat to 1e-11 between b = 0 and 1e-9) a b* whose Q equals numpy's to 1e-10; the
    Gaussian's Q has numpy's digits, so its b* must be numpy's exactly."""
    y, cav_mean, cav_var, tau, nu, marginal = args
    if isinstance(likelihood, Gaussian):
        np.testing.assert_array_equal(got, want)
    differ = np.flatnonzero(got != want)
    assert differ.size <= 0.05 * got.size, differ
    for i in differ:
        site = Site(tau[i], nu[i], marginal[i])
        q = rule.objective(likelihood, y[i], np.array([got[i], want[i]]), Cavity(cav_mean[i], cav_var[i]), site)
        assert abs(q[0] - q[1]) <= 1e-10 * max(1.0, abs(q[1])), (i, got[i], want[i], q)


@pytest.mark.parametrize(
    ("likelihood", "rule"),
    [(Probit(), RelaxedEP(0.05)), (Logistic(), RelaxedEP(0.05, damping=0.5)), (NoisyStep(0.1), RelaxedEP(0.05)),
     (NoisyStep(0.1), RelaxedEP(0.05, variant="paper")), (Probit(), RelaxedEP(0.02, penalty="scale_free")),
     (Laplace(0.3), RelaxedEP(0.05)), (Gaussian(0.3), RelaxedEP(0.0))],
    ids=["probit", "logistic", "noisy-step", "noisy-step-paper", "probit-scale-free", "laplace", "gaussian-flat"],
)  # fmt: skip
def test_the_device_line_search_is_numpys(likelihood, rule):
    """60 random cavities and sites, about a third of them relaxed: numpy's b* on array-api-strict.  And a flat Q
    (the Gaussian's KL is 0, to rounding noise, and c = 0): numpy's ties broken as numpy breaks them, the first of
    equal minima, at every site."""
    args = _sites(likelihood, 60, seed=2)
    y, cav_mean, cav_var, tau, nu, marginal = args
    want = rule.optimal_relaxation(likelihood, y, Cavity(cav_mean, cav_var), Site(tau, nu, marginal))
    assert 5 <= np.sum(want > 0.0) <= want.size
    _assert_same_search(rule, likelihood, args, _search_on(xs, rule, likelihood, *args), want)


def test_the_search_takes_few_sites_a_call_and_keeps_numpys_shortcut(monkeypatch):
    """One point a call where SITE_POINTS is below n (the memory bound: no evaluation larger than the sites) gives
    the same b* as a stage a call; numpy's all-zero shortcut holds for the searched sites alone."""
    likelihood, rule = NoisyStep(0.1), RelaxedEP(0.05)
    args = _sites(likelihood, 80, seed=4)
    whole = _search_on(xs, rule, likelihood, *args)
    sizes = []
    original = NoisyStep.log_z_and_expected_on

    def counted(self, xp, y, mean, var):
        sizes.append(int(mean.shape[0]))
        return original(self, xp, y, mean, var)

    monkeypatch.setattr(NoisyStep, "log_z_and_expected_on", counted)
    monkeypatch.setattr(relaxed_on, "SITE_POINTS", 50)
    np.testing.assert_array_equal(_search_on(xs, rule, likelihood, *args), whole)
    assert max(sizes) == 80 and len(sizes) == 34 + 3 * 17
    sizes.clear()
    monkeypatch.setattr(relaxed_on, "SITE_POINTS", 17 * 80)
    np.testing.assert_array_equal(_search_on(xs, rule, likelihood, *args), whole)
    assert sorted(set(sizes)) == [17 * 80] and len(sizes) == 2 + 3  # (the grid in two calls, a zoom in one)
    # numpy searches only the proper cavities: where none of them moves off b = 0, all are 0
    y, cav_mean, cav_var, tau, nu, marginal = args
    relaxed = whole > 0.0
    still = ~relaxed
    want = rule.optimal_relaxation(likelihood, y[still], Cavity(cav_mean[still], cav_var[still]),
                                   Site(tau[still], nu[still], marginal[still]))  # fmt: skip
    got = _search_on(xs, rule, likelihood, *args, searched=still)
    np.testing.assert_array_equal(got[still], want)
    assert not np.any(got)


@pytest.fixture(scope="module")
def problem():
    """Labels with 10% flipped (outliers the relaxation takes in), and 15 inducing points."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    labels = np.where(np.sin(2.0 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=100) > 0, 1.0, -1.0)
    labels[:10] *= -1.0
    return X, labels, X[:15].copy()


def _fit_pair(problem, n, likelihood, rule, **options):
    X, labels, Z = problem
    X, y = X[:n], labels[:n]
    host = infer(SparsePrior(X, Z, KERNEL), y, likelihood, rule, schedule="parallel", **options)
    device = infer(SparsePrior(xs.asarray(X), Z, KERNEL), y, likelihood, rule, schedule="parallel", **options)
    return host, device


# (the probit's fit runs with the slow studies: its line search on the device is numpy's in
# test_the_device_line_search_is_numpys[probit] and [probit-scale-free], its pair of log Z and E[log t] in
# test_expected_log_lik_on_is_numpys[probit], and the loop around them is the one the other three fits run)
@pytest.mark.parametrize(
    ("likelihood", "rule", "n", "options"),
    [pytest.param(Probit(), RelaxedEP(0.003), 30, {"tol": 1e-4}, marks=pytest.mark.slow),  # (9 sweeps, 14 relaxed)
     (Logistic(), RelaxedEP(0.001), 60, {"tol": 1e-6}),  # (60 rows: 10 sweeps, 4 sites relaxed; 100: half the time)
     (NoisyStep(0.05), RelaxedEP(0.1, penalty="scale_free", damping=0.8), 100, {"tol": 1e-6}),
     (NoisyStep(0.05), RelaxedEP(0.01, variant="paper"), 60, {"max_sweeps": 12})],
    ids=["probit", "logistic", "noisy-step-scale-free-damped", "noisy-step-paper"],
)  # fmt: skip
def test_a_sparse_relaxed_ep_fit_on_the_device_is_the_host_loops(device_runs, problem, likelihood, rule, n, options):
    """The device loop runs it, sweep for sweep the host loop's: status, sweeps, steps, sites, marginals, the
    relaxations (some of them positive) and the evidence.  (The device's Q is numpy's to about 1e-13 for the sinh
    rule, so where two adjacent points of a zoom tie that closely a site's b* may differ by the zoom's step, 1e-3
    relative, in one sweep: such a run, logistic at c = 0.001 with the scale-free penalty and damping 0.8,
    ends 2e-8 apart after 12 sweeps.  None of these does.)"""
    host, device = _fit_pair(problem, n, likelihood, rule, **options)
    assert device_runs == [rule]
    assert host.status == device.status
    assert host.status == ("max_sweeps" if "max_sweeps" in options else "converged")
    assert host.n_sweeps == device.n_sweeps
    np.testing.assert_array_equal(host.step_sizes, device.step_sizes)
    np.testing.assert_array_equal(host.skipped_per_sweep, device.skipped_per_sweep)
    np.testing.assert_allclose(device.site_precision, host.site_precision, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(device.site_mean_precision, host.site_mean_precision, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(device.mean, host.mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(device.marginal_var, host.marginal_var, rtol=1e-8, atol=1e-10)
    assert np.sum(host.relaxation > 0.0) >= 3
    np.testing.assert_allclose(device.relaxation, host.relaxation, rtol=1e-8, atol=0)
    if host.converged:
        assert device.log_evidence == pytest.approx(host.log_evidence, rel=1e-10)


def test_a_relaxed_ep_sweep_reads_back_its_scalars_only(device_runs, problem, monkeypatch):
    """The logistic (no special functions): one read a sweep (the step's scalars, as EP's), and 6 length-n arrays
    each way in the whole run (the start: sites, y and relaxations; the end: sites, marginals, relaxations), however
    many sweeps; the host loop it replaces (measured: RelaxedEP kept on the host) moved two each way a sweep, both
    of its reads length-n arrays."""
    from test_device_ep import _count_transfers

    counts = _count_transfers(monkeypatch)
    X, labels, Z = problem
    prior = SparsePrior(xs.asarray(X), Z, KERNEL)
    totals = []
    for sweeps in (2, 5):
        counts.update(to_host=0, to_device=0, reads=0)
        result = infer(prior, labels, Logistic(), RelaxedEP(0.001), schedule="parallel", max_sweeps=sweeps)
        assert result.n_sweeps == sweeps
        totals.append(dict(counts))
    assert len(device_runs) == 2
    assert totals[1]["reads"] - totals[0]["reads"] == 3, totals  # (one a sweep)
    for key in ("to_host", "to_device"):
        assert totals[0][key] == totals[1][key] <= 6, totals


def test_a_warm_start_keeps_its_relaxations(device_runs, problem):
    """From another run's sites (``init``): the device loop starts from its relaxations, as the host loop does, and
    ends where the host loop ends."""
    X, labels, Z = problem
    rule, likelihood = RelaxedEP(0.1, penalty="scale_free"), NoisyStep(0.05)
    start = infer(SparsePrior(X, Z, KERNEL), labels, likelihood, rule, schedule="parallel", max_sweeps=4)
    assert np.sum(start.relaxation > 0.0) >= 10
    host = infer(SparsePrior(X, Z, KERNEL), labels, likelihood, rule, schedule="parallel", init=start.sites)
    device = infer(SparsePrior(xs.asarray(X), Z, KERNEL), labels, likelihood, rule, schedule="parallel",
                   init=start.sites)  # fmt: skip
    assert device_runs == [rule] and host.converged and device.n_sweeps == host.n_sweeps
    np.testing.assert_allclose(device.relaxation, host.relaxation, rtol=1e-10, atol=0)
    np.testing.assert_allclose(device.site_precision, host.site_precision, rtol=1e-10, atol=1e-12)
