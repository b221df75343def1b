"""The closed-form likelihoods' tilted ``log Z`` on another array library, checked with ``array-api-strict``.

Ground truth: each likelihood's numpy ``log_z`` (its ``log_z_on`` with numpy is that, bit for bit), over a grid
of cavities reaching far into both tails (:math:`|\\mu - y|` up to 50 cavity sds, :math:`s^2` from 1e-4 to 1e4),
to 1e-10 relative (Laplace at several powers, Tobit and the ordinal probit at ``u = 1``); then a sparse fit on
``array-api-strict`` through the device loop against the numpy fit (the host loop, same rule), as
``test_device_ep.py`` does for the probit.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import EP, Laplace, OrdinalProbit, PowerEP, Tobit, infer
from relaxep.posterior import SparsePrior

xs = pytest.importorskip("array_api_strict")
pytest.importorskip("array_api_compat")

KERNEL = C(2.0) * RBF(1.0)
FIELDS = ("log_z", "dlog_z", "d2log_z")


def _cavities() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Targets, cavity means and variances: offsets 0 and +-1e-3 ... +-50 sds, variances 1e-4 ... 1e4."""
    offsets = np.concatenate([-np.geomspace(50.0, 1e-3, 25), [0.0], np.geomspace(1e-3, 50.0, 25)])
    offset, var = (a.ravel() for a in np.meshgrid(offsets, np.geomspace(1e-4, 1e4, 33)))
    y = np.linspace(-3.0, 3.0, offset.size)
    return y, y + offset * np.sqrt(var), var


def _relative_errors(out, ref) -> dict[str, float]:
    """Max relative error of each field of ``out`` (array-api-strict) against ``ref`` (numpy, all finite); below
    1e-300 absolute (SciPy's log_ndtr is 0 past x = 37.5, the device's the subnormal -Phi(-x))."""
    errors = {}
    for field in FIELDS:
        want = getattr(ref, field)
        assert np.all(np.isfinite(want)), field
        got = np.from_dlpack(getattr(out, field))
        errors[field] = float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-300)))
    return errors


@pytest.mark.parametrize("scale", [0.05, 1.0, 20.0])
@pytest.mark.parametrize("power", [1.0, 0.5, 0.1])
def test_laplace_on_the_device_is_numpys(scale, power):
    """Both branches (the sides' weights, and the truncated Gaussians' moments where lambda s > 1) and both
    tails of each side: 1e-10 relative at every power."""
    lik = Laplace(scale)
    y, mean, var = _cavities()
    ref = lik.log_z(y, mean, var, power)
    out = lik.log_z_on(xs, xs.asarray(y), xs.asarray(mean), xs.asarray(var), power)
    errors = _relative_errors(out, ref)
    assert max(errors.values()) < 1e-10, errors
    same = lik.log_z_on(np, y, mean, var, power)
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(same, field), getattr(ref, field))


@pytest.mark.parametrize("noise", [0.01, 1.0, 50.0])
def test_tobit_on_the_device_is_numpys(noise):
    """Observed, left- and right-censored rows (``[value, code]``, as the fit holds them) at ``u = 1``: numpy's
    closed forms' digits; targets given as values take their codes from the limits."""
    lik = Tobit(noise=noise)
    value, mean, var = _cavities()
    code = np.resize([-1.0, 0.0, 1.0], value.size)
    rows = np.column_stack([value, code])
    ref = lik.log_z(rows, mean, var)
    out = lik.log_z_on(xs, xs.asarray(rows), xs.asarray(mean), xs.asarray(var))
    errors = _relative_errors(out, ref)
    assert max(errors.values()) < 1e-10, errors
    limited = Tobit(lower=-1.0, upper=1.0, noise=noise)
    values = np.array([-1.0, 0.2, 1.0, 0.5, -1.0])
    m, v = np.array([0.3, -2.0, 4.0, 1.0, -30.0]), np.array([0.5, 2.0, 0.1, 1.0, 1e-3])
    ref = limited.log_z(values, m, v)
    out = limited.log_z_on(xs, xs.asarray(values), xs.asarray(m), xs.asarray(v))
    assert max(_relative_errors(out, ref).values()) < 1e-10


@pytest.mark.parametrize(("cuts", "noise"), [([-1.0, 0.0, 0.3, 2.0], 1.0), ([-1.0, 0.0, 0.3, 2.0], 0.01),
                                             ([0.5], 0.2), ([-5.0, 5.0], 10.0)])  # fmt: skip
def test_ordinal_probit_on_the_device_is_numpys(cuts, noise):
    """Every class (the two open ends, wide and narrow intervals, both ends in one tail, the lower tail's series)
    at ``u = 1``: numpy's digits, cavities offset up to 50 sds of the tilted's scale from the class's centre."""
    lik = OrdinalProbit(cuts, noise)
    _, offset_mean, var = _cavities()
    offset = offset_mean - np.linspace(-3.0, 3.0, var.size)
    y = np.resize(np.arange(len(cuts) + 1, dtype=float), var.size)
    ends = np.concatenate([[-3.0], cuts, [3.0]])
    k = y.astype(int)
    mean = 0.5 * (ends[k] + ends[k + 1]) + offset / np.sqrt(var) * np.sqrt(var + noise**2)
    ref = lik.log_z(y, mean, var)
    out = lik.log_z_on(xs, xs.asarray(y), xs.asarray(mean), xs.asarray(var))
    errors = _relative_errors(out, ref)
    assert max(errors.values()) < 1e-10, errors


def test_the_flags():
    """Laplace at every power; Tobit and the ordinal probit at u = 1 only (Tobit's censored rows' device rule is
    not numpy's below it; the ordinal probit has none)."""
    assert Laplace.tilted_on_device and Laplace.closed_form_on_device
    for lik in (Tobit, OrdinalProbit):
        assert lik.closed_form_on_device and not lik.tilted_on_device
    z = xs.asarray(np.zeros(3))
    with pytest.raises(NotImplementedError, match="u = 1"):
        Tobit().log_z_on(xs, xs.asarray(np.zeros((3, 2))), z, z + 1.0, 0.5)
    with pytest.raises(NotImplementedError, match="u = 1"):
        OrdinalProbit([0.0]).log_z_on(xs, z, z, z + 1.0, 0.5)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    f = np.sin(2.0 * X[:, 0]) + X[:, 1]
    noisy = f + rng.laplace(scale=0.2, size=600)
    noisy[:20] += 4.0 * rng.choice([-1.0, 1.0], size=20)  # outliers
    return X, noisy


def _fit_pair(X, y, likelihood, rule):
    Z = X[:25].copy()
    host = infer(SparsePrior(X, Z, KERNEL), y, likelihood, rule, schedule="parallel", tol=1e-6)
    device = infer(SparsePrior(xs.asarray(X), Z, KERNEL), y, likelihood, rule, schedule="parallel", tol=1e-6)
    return host, device


def _assert_same_fit(host, device):
    assert host.status == device.status == "converged"
    assert host.n_sweeps == device.n_sweeps
    np.testing.assert_array_equal(host.step_sizes, device.step_sizes)
    np.testing.assert_allclose(device.mean, host.mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(device.marginal_var, host.marginal_var, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(device.site_precision, host.site_precision, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(device.site_mean_precision, host.site_mean_precision, rtol=1e-8, atol=1e-10)
    assert device.log_evidence == pytest.approx(host.log_evidence, rel=1e-10)


@pytest.mark.parametrize("rule", [EP(), PowerEP(0.5)], ids=["ep", "power-0.5"])
def test_a_laplace_fit_on_the_device_is_numpys(device_runs, problem, rule):
    """Fixed scale and kernel: the device loop runs the fit, and it is the host loop's."""
    X, noisy = problem
    host, device = _fit_pair(X, noisy, Laplace(0.2), rule)
    assert device_runs == [rule]
    _assert_same_fit(host, device)


def test_a_tobit_fit_on_the_device_is_numpys(device_runs, problem):
    """Censored below and above (targets as values, the limits the constructor's): the device loop runs EP on
    the checked rows ``[value, code]``, and its fit is the host loop's; Power EP stays on the host."""
    X, noisy = problem
    lower, upper = np.quantile(noisy, [0.2, 0.9])
    y = np.clip(noisy, lower, upper)
    lik = Tobit(lower=float(lower), upper=float(upper), noise=0.1)
    host, device = _fit_pair(X, y, lik, EP())
    assert len(device_runs) == 1
    _assert_same_fit(host, device)
    _fit_pair(X[:200], y[:200], lik, PowerEP(0.5))
    assert len(device_runs) == 1


def test_an_ordinal_fit_on_the_device_is_numpys(device_runs, problem):
    """Four ordered classes, fixed cut-points and noise: EP on the device is the host loop's fit."""
    X, noisy = problem
    cuts = np.quantile(noisy, [0.25, 0.5, 0.75])
    y = np.searchsorted(cuts, noisy).astype(float)
    host, device = _fit_pair(X, y, OrdinalProbit(cuts, 0.3), EP())
    assert len(device_runs) == 1
    _assert_same_fit(host, device)
