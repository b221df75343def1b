"""The fixed-size device quadrature (:mod:`relaxep.likelihoods.quadrature_on`) and the device loop at every power.

Ground truth: adaptive quadrature (``oracles.tilted_quad``, ``scipy.integrate.quad``) on random cavities, and
numpy's adaptive sinh rule on many more, within the bound the module states; then Logistic and Power EP fits on
``array-api-strict`` against the numpy path (the host loop with the same rule, 1e-8), and what the device loop
cannot run refused at the door or taken by the host loop.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from oracles import lik_fn, tilted_quad
from relaxep import EP, DoubleLoopEP, FractionalEP, Logistic, NoisyProbit, PowerEP, Probit, RelaxedEP, infer
from relaxep.likelihoods.quadrature import QuadratureLikelihood
from relaxep.likelihoods.quadrature_on import ERROR_BOUND
from relaxep.posterior import DensePrior, SparsePrior

xs = pytest.importorskip("array_api_strict")
pytest.importorskip("array_api_compat")

KERNEL = C(2.0) * RBF(1.0)


def _device_rule(likelihood, xp, mean, var, power):
    """The device rule itself, also at ``u = 1`` where the probit's closed form would answer."""
    return QuadratureLikelihood._fixed_log_z(likelihood, xp, mean, var, power)


def _errors(out, mean, var, log_z, t_mean, t_var):
    """|error of log Z|, |error of the tilted mean| in tilted sds, relative error of the tilted variance."""
    m, v = out.moments(mean, var)
    return np.abs(out.log_z - log_z), np.abs(m - t_mean) / np.sqrt(t_var), np.abs(v / t_var - 1.0)


@pytest.mark.parametrize(("likelihood", "name"), [(Logistic(), "logistic"), (Probit(), "probit")])
def test_the_device_rule_equals_adaptive_quadrature(likelihood, name):
    """Random cavities of the box |mu| <= 50, 1e-3 <= s^2 <= 1e3, u in [0.3, 1]: within ERROR_BOUND of quad."""
    rng = np.random.default_rng(7)
    mean, var, power = rng.uniform(-50, 50, 8), 10.0 ** rng.uniform(-3, 3, 8), rng.uniform(0.3, 1.0, 8)
    mean[:2], var[:2] = [45.0, -3.0], [600.0, 900.0]  # (the mode far from a transition that carries mass)
    t = lik_fn(name)
    for k in range(mean.size):
        ref = tilted_quad(t, mean[k], var[k], power[k])
        out = _device_rule(likelihood, np, mean[k : k + 1], var[k : k + 1], float(power[k]))
        assert max(e.item() for e in _errors(out, mean[k], var[k], *ref)) < ERROR_BOUND, (mean[k], var[k], power[k])


def _adaptive_reference(likelihood, mean, var, power, chunks=6):
    """numpy's adaptive rule's log Z, tilted mean and variance, the rows in chunks of like |mean|: the rule gives a
    call's rows the node count its most demanding row asks for (the farthest from the transition), so one call over
    the box gave all 3000 rows 2661 nodes (three quarters of the test's time); a chunk's count is still at least
    what each of its rows asks for (the answers agree with the one call's to 1e-14)."""
    out = [np.empty_like(mean) for _ in range(3)]
    for rows in np.array_split(np.argsort(np.abs(mean)), chunks):
        ref = likelihood.log_z(1.0, mean[rows], var[rows], power)
        for into, value in zip(out, (ref.log_z, *ref.moments(mean[rows], var[rows])), strict=True):
            into[rows] = value
    return out


@pytest.mark.parametrize("likelihood", [Logistic(), Probit()], ids=["logistic", "probit"])
def test_the_device_rule_equals_numpys_rule_over_the_box(likelihood):
    """3000 random cavities at three powers against numpy's adaptive rule: the stated bound; the same rule on
    array-api-strict gives numpy's digits to rounding (its log_ndtr/erfcx relaxep._special_xp's, not SciPy's: an ulp
    of difference, which the curvature's cancellation makes up to 6e-11, as an ulp of noise in SciPy's does)."""
    rng = np.random.default_rng(3)
    mean, var = rng.uniform(-50, 50, 3000), 10.0 ** rng.uniform(-3, 3, 3000)
    for power in (0.3, 0.65, 1.0):
        ref = _adaptive_reference(likelihood, mean, var, power)
        out = _device_rule(likelihood, np, mean, var, power)
        assert max(e.max() for e in _errors(out, mean, var, *ref)) < ERROR_BOUND
    strict = _device_rule(likelihood, xs, xs.asarray(mean[:200]), xs.asarray(var[:200]), 0.5)
    same = _device_rule(likelihood, np, mean[:200], var[:200], 0.5)
    for field in ("log_z", "dlog_z", "d2log_z"):
        got, want = np.from_dlpack(getattr(strict, field)), getattr(same, field)
        np.testing.assert_allclose(got, want, rtol=2e-10, atol=1e-14)


def test_log_z_on_answers_at_every_power():
    """``log_z_on`` folds the labels and takes the power: Probit's closed form at u = 1, the rule below it."""
    y, mean, var = np.array([1.0, -1.0]), np.array([0.4, 2.0]), np.array([1.5, 0.3])
    for lik in (Probit(), NoisyProbit(0.05, 1.0)):
        np.testing.assert_array_equal(lik.log_z_on(np, y, mean, var).log_z, lik.log_z(y, mean, var).log_z)
        for power in (0.4, 0.9):
            ref, out = lik.log_z(y, mean, var, power), lik.log_z_on(np, y, mean, var, power)
            np.testing.assert_allclose(out.log_z, ref.log_z, rtol=0, atol=1e-9)
            np.testing.assert_allclose(out.dlog_z, ref.dlog_z, rtol=1e-8)
    assert Logistic.tilted_on_device and not Logistic.closed_form_on_device


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3))
    labels = np.where(np.sin(2.0 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=500) > 0, 1.0, -1.0)
    return X, labels


def _priors(X, representation):
    if representation == "sparse":
        return SparsePrior(X, X[:25].copy(), KERNEL), SparsePrior(xs.asarray(X), X[:25].copy(), KERNEL), 1e-6
    K = KERNEL(X[:120]) + 1e-8 * np.eye(120)  # (120 rows: 15-23 sweeps, as 16-24 at 250, in 2/3 of the time)
    return DensePrior(K), DensePrior(xs.asarray(K)), 1e-10


# (probit-power-0.5 runs with the slow studies: its two parts run by default here, Power EP's site rule in
# logistic-power-damped and the probit's device rule at u = 0.5 in probit-fractional, whose proposal is Power EP's
# moment matching at the same power, only less of the site removed from the cavity)
@pytest.mark.parametrize(
    ("likelihood", "rule"),
    [(Logistic(), EP()), pytest.param(Probit(), PowerEP(0.5), marks=pytest.mark.slow),
     (Logistic(), PowerEP(0.7, damping=0.8)), (Probit(), FractionalEP(0.5))],
    ids=["logistic-ep", "probit-power-0.5", "logistic-power-damped", "probit-fractional"],
)  # fmt: skip
@pytest.mark.parametrize("representation", ["sparse", "dense"])
def test_power_and_quadrature_fits_on_the_device_are_numpys(device_runs, problem, likelihood, rule, representation):
    """The device loop runs them, and its fit is the host loop's (numpy, same rule): sites, marginals, evidence."""
    X, labels = problem
    host_prior, device_prior, tol = _priors(X, representation)
    y = labels[: host_prior.n]
    host = infer(host_prior, y, likelihood, rule, schedule="parallel", tol=tol)
    device = infer(device_prior, y, likelihood, rule, schedule="parallel", tol=tol)
    assert device_runs == [rule]
    assert host.status == device.status == "converged"
    assert host.n_sweeps == device.n_sweeps
    np.testing.assert_allclose(device.mean, host.mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(device.marginal_var, host.marginal_var, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(device.site_precision, host.site_precision, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(device.site_mean_precision, host.site_mean_precision, rtol=1e-8, atol=1e-10)
    assert device.log_evidence == pytest.approx(host.log_evidence, rel=1e-10)


def test_what_the_device_loop_cannot_run(device_runs, problem):
    """Relaxed EP runs there too on a dense prior (numpy's answer; tests/test_device_relaxed.py checks it further);
    the double loop and the sequential updates are refused at the door with a TypeError that names what runs
    there."""
    X, labels = problem
    K = KERNEL(X[:60]) + 1e-8 * np.eye(60)  # (60 rows, 8 sweeps as at 120, in 2/3 of their time; the means 5e-11 apart)
    host_prior, device_prior, y = DensePrior(K), DensePrior(xs.asarray(K)), labels[:60]
    rule = RelaxedEP()
    host = infer(host_prior, y, Logistic(), rule, schedule="parallel", tol=1e-5)
    device = infer(device_prior, y, Logistic(), rule, schedule="parallel", tol=1e-5)
    assert device_runs == [rule] and device.converged
    np.testing.assert_allclose(device.mean, host.mean, rtol=1e-6, atol=1e-8)
    with pytest.raises(TypeError, match="parallel schedule"):
        infer(device_prior, y, Probit(), DoubleLoopEP())
    with pytest.raises(TypeError, match="parallel schedule"):
        infer(device_prior, y, Logistic(), PowerEP(0.5), schedule="sequential")
