"""The Student-t's and the count likelihoods' tilted ``log Z`` on another array library, with ``array-api-strict``.

Ground truth: each likelihood's numpy ``log_z`` (adaptive rules) over a grid of cavities, and adaptive quadrature
(``scipy.integrate.quad``) at a few points, among them where numpy's own rule is the weaker one; then sparse fits on
``array-api-strict`` through the device loop (:mod:`relaxep.inference.device_ep`) against the numpy fits (the
host loop, same rule).  Errors are relative, each against the field's own scale where the field passes near zero:
``|log Z|`` or 1 (so the error of ``Z`` itself, relative), ``|d log Z|`` or :math:`\\sqrt{\\hat v}/s^2` (the tilted mean
in tilted sds), ``|d2 log Z|`` or :math:`\\hat v/s^4` (the tilted variance, relative).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import gammaln
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from oracles import quad, regression_tilted_quad
from relaxep import EP, NegativeBinomial, Poisson, PowerEP, StudentT
from relaxep.likelihoods import counts_on, robust_on
from relaxep.likelihoods.counts_on import lgamma_on
from test_device_likelihoods import _fit_pair  # (the same sparse fit on numpy and on array-api-strict)

xs = pytest.importorskip("array_api_strict")
pytest.importorskip("array_api_compat")

KERNEL = C(2.0) * RBF(1.0)
FIELDS = ("log_z", "dlog_z", "d2log_z")
POWERS = (1.0, 0.5, 0.1)
OFFSETS = np.concatenate([-np.geomspace(50.0, 1e-2, 15), [0.0], np.geomspace(1e-2, 50.0, 15)])  # cavity sds
VARIANCES = np.geomspace(1e-3, 1e3, 13)


def _errors(out, ref, mean, var) -> dict[str, float]:
    """Largest error of each field of ``out`` (array-api-strict) against ``ref`` (numpy), as the module explains."""
    t_var = var + var**2 * ref.d2log_z
    floors = {"log_z": 1.0, "dlog_z": np.sqrt(t_var) / var, "d2log_z": t_var / var**2}
    errors = {}
    for field in FIELDS:
        want = getattr(ref, field)
        assert np.all(np.isfinite(want)), field
        got = np.from_dlpack(getattr(out, field))
        errors[field] = float(np.max(np.abs(got - want) / np.maximum(np.abs(want), floors[field])))
    return errors


def _strict(*arrays):
    return tuple(xs.asarray(a) for a in arrays)


# ------------------------------------------------------------------ Student-t
@pytest.mark.parametrize("scale", [0.1, 1.0])
@pytest.mark.parametrize("df", [1.5, 3.0, 4.0, 10.0])
def test_student_t_on_the_device_is_numpys(df, scale):
    """|mu - y| from 0 to 50 cavity sds (outliers: a bimodal tilted), s^2 from 1e-3 to 1e3, u in {1, 0.5, 0.1}:
    within robust_on.ERROR_BOUND of numpy's adaptive two-centre rule (measured: 6e-12)."""
    lik = StudentT(df, scale)
    offset, var = (a.ravel() for a in np.meshgrid(OFFSETS, VARIANCES))
    y = np.linspace(-3.0, 3.0, var.size)
    mean = y + offset * np.sqrt(var)
    for power in POWERS:
        ref = lik.log_z(y, mean, var, power)
        out = lik.log_z_on(xs, *_strict(y, mean, var), power)
        errors = _errors(out, ref, mean, var)
        assert max(errors.values()) <= robust_on.ERROR_BOUND, (power, errors)


def _student_t_quad(df, scale, resid, var, power):
    a = df * scale**2
    const = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi) - math.log(scale)

    def log_lik(f):
        return const - 0.5 * (df + 1) * math.log1p(f * f / a)

    def slope(f):
        return -(df + 1) * f / (a + f * f)

    def curve(f):
        return -(df + 1) * (a - f * f) / (a + f * f) ** 2

    extras = (lambda f: power * slope(f), lambda f: power * curve(f) + (power * slope(f)) ** 2)
    ref = regression_tilted_quad(log_lik, 0.0, resid, var, power, scale, extras=extras)
    d1, second = ref["extras"]
    return ref["log_z"], d1, second - d1**2


@pytest.mark.parametrize(
    ("df", "scale", "resid", "var", "power"),
    [(4.0, 1.0, -20.0, 30.0, 0.5), (3.0, 1.0, 1500.0, 1e3, 1.0), (10.0, 0.1, 3.0, 1e3, 1.0),
     (1.5, 1.0, 24.36, 226.4, 0.1), (1.5, 0.1, 6.0739, 5.8299, 0.1)],
    ids=["bimodal", "50-sd-outlier", "wide-cavity", "heavy-u0.1", "heavy-u0.1-two-modes-merging"],
)  # fmt: skip
def test_student_t_on_the_device_equals_quadrature(df, scale, resid, var, power):
    """The device rule against scipy's quad to 1e-9 relative (log Z and both derivatives).  In the last two cases
    numpy's own rule is off by up to 1e-5 (d2 log Z; its 10 nodes a unit of the sinh variable are too few where
    ``u(nu + 1)`` is small), the device rule's 64 nodes a panel are not."""
    lik = StudentT(df, scale)
    out = lik.log_z_on(xs, *_strict(np.array([0.0]), np.array([resid]), np.array([var])), power)
    want = _student_t_quad(df, scale, resid, var, power)
    got = [float(np.from_dlpack(getattr(out, field))[0]) for field in FIELDS]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0.0)


# ------------------------------------------------------------------ counts
COUNTS = np.array([0.0, 1.0, 2.0, 5.0, 17.0, 50.0, 300.0, 1000.0])
COUNT_LIKELIHOODS = [Poisson(), NegativeBinomial(2.0), NegativeBinomial(0.1), NegativeBinomial(300.0)]
COUNT_IDS = ["poisson", "nb-2", "nb-0.1", "nb-300"]


def _count_cavities():
    """``[count, log exposure]`` rows and cavities: eta's cavity mean log(max(y, 1)) + k s, |k| <= 50, s^2 from 1e-3
    to 1e3; for a zero count within [-600, 60], where numpy's rule answers (beyond, its bracket overflows)."""
    grid = np.meshgrid(COUNTS, OFFSETS[::2], VARIANCES[::2], [-3.0, 0.0, 3.0])
    count, offset, var, expo = (a.ravel() for a in grid)
    eta = np.log(np.maximum(count, 1.0)) + offset * np.sqrt(var)
    keep = (count > 0.0) | ((eta >= -600.0) & (eta <= 60.0))
    return np.column_stack([count, expo])[keep], (eta - expo)[keep], var[keep]


@pytest.mark.parametrize("lik", COUNT_LIKELIHOODS, ids=COUNT_IDS)
def test_counts_on_the_device_are_numpys(lik):
    """Counts 0 to 1000, log exposures -3, 0, 3, cavities up to 50 sds from the likelihood's peak (the mode far
    from the cavity, the Laplace width down to 0.03), u in {1, 0.5, 0.1}: within counts_on.ERROR_BOUND of numpy's
    adaptive rule (measured: 2e-13 for the Poisson, 1.5e-10 for the negative binomials); counts alone are counts
    at exposure 1."""
    rows, mean, var = _count_cavities()
    for power in POWERS:
        ref = lik.log_z(rows, mean, var, power)
        out = lik.log_z_on(xs, *_strict(rows, mean, var), power)
        errors = _errors(out, ref, mean, var)
        assert max(errors.values()) <= counts_on.ERROR_BOUND, (power, errors)
    plain = lik.log_z_on(xs, *_strict(rows[:, 0], mean + rows[:, 1], var), 0.5)
    assert max(_errors(plain, lik.log_z(rows, mean, var, 0.5), mean, var).values()) <= counts_on.ERROR_BOUND


def _count_quad(lik, count, eta, var, power):
    """log Z, d log Z and d2 log Z (from the tilted moments) by quad around the mode (found by brentq)."""
    if isinstance(lik, Poisson):

        def log_p(e):
            return count * e - np.exp(e) - gammaln(count + 1.0)
    else:
        r = lik.dispersion

        def log_p(e):
            return stats.nbinom.logpmf(count, r, r / (r + np.exp(e)))

    def h(e):
        return power * log_p(e) - 0.5 * (e - eta) ** 2 / var

    def dh(e, step=1e-6):
        return (h(e + step) - h(e - step)) / (2 * step)

    lo, hi = eta - 1.0, eta + 1.0
    while dh(lo) <= 0.0:
        lo -= 2.0 * (eta - lo)
    while dh(hi) >= 0.0:
        hi += 2.0 * (hi - eta)
    mode = optimize.brentq(dh, lo, hi, xtol=1e-12)
    top = h(mode)
    ends = []
    for side in (-1.0, 1.0):
        d = min(np.sqrt(var), 1.0) * 1e-2
        while h(mode + side * d) > top - 60.0:
            d *= 1.5
        ends.append(mode + side * d)

    def integral(g):
        return quad(lambda e: g(e) * np.exp(h(e) - top), ends[0], ends[1], points=[mode], epsabs=0.0, epsrel=1e-13,
                    limit=500)  # fmt: skip

    z = integral(lambda e: 1.0)
    shift = integral(lambda e: e - mode) / z
    t_var = integral(lambda e: (e - mode - shift) ** 2) / z
    return np.log(z) + top - 0.5 * np.log(2 * np.pi * var), (mode + shift - eta) / var, (t_var - var) / var**2


@pytest.mark.parametrize(
    ("lik", "count", "eta", "var", "power"),
    [(Poisson(), 1000.0, 3.5, 2.0, 1.0), (Poisson(), 0.0, -150.0, 1e3, 1.0), (Poisson(), 0.0, 200.0, 10.0, 0.5),
     (Poisson(), 3.0, 600.0, 1e3, 0.1), (NegativeBinomial(0.1), 0.0, -64.84, 1e3, 0.1),
     (NegativeBinomial(2.0), 300.0, -10.11, 0.1, 0.5)],
    ids=["large-count", "wall-5-sd-off", "zero-count-far-right", "19-sd-above", "nb-slight-kink", "nb-inflection"],
)  # fmt: skip
def test_counts_on_the_device_equal_quadrature(lik, count, eta, var, power):
    """The device rule against scipy's quad: log Z to 1e-10 relative, the tilted mean to 1e-8 tilted sds and
    the variance to 1e-8 relative; also beyond numpy's box (a zero count under a cavity at eta = 200: numpy's
    rule overflows there), and where a Newton search for the negative binomial's mode would cycle."""
    out = lik.log_z_on(xs, *_strict(np.array([count]), np.array([eta]), np.array([var])), power)
    log_z, d1, d2 = _count_quad(lik, count, eta, var, power)
    got = [float(np.from_dlpack(getattr(out, field))[0]) for field in FIELDS]
    t_var = var + var**2 * d2
    assert abs(got[0] - log_z) <= 1e-10 * max(1.0, abs(log_z))
    assert abs(got[1] - d1) * var <= 1e-8 * np.sqrt(t_var)
    assert abs(got[2] - d2) * var**2 <= 1e-8 * t_var


def test_lgamma_on_the_device_is_scipys():
    """log Gamma from the array API alone (the counts' normalisers): scipy's to 1e-14 relative, from 1e-3 to 1e7;
    near its zeros at 1 and 2 to 5e-15 absolute (Stirling's value at z ~ 10 less the shift's log, both about 13)."""
    x = np.concatenate([np.geomspace(1e-3, 1e7, 400), np.arange(1.0, 1001.0)])
    got = np.from_dlpack(lgamma_on(xs, xs.asarray(x)))
    want = gammaln(x)
    assert np.all(np.abs(got - want) <= 1e-14 * np.abs(want) + 5e-15)


def test_the_flags():
    for lik in (StudentT, Poisson, NegativeBinomial):
        assert lik.tilted_on_device and not lik.closed_form_on_device


# ------------------------------------------------------------------ fits
@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    f = np.sin(2.0 * X[:, 0]) + X[:, 1]
    noisy = f + 0.2 * rng.standard_t(4.0, size=300)
    noisy[:15] += 4.0 * rng.choice([-1.0, 1.0], size=15)  # outliers: negative site precisions
    log_exposure = rng.uniform(-1.0, 1.0, 300)
    counts = rng.poisson(np.exp(f + log_exposure)).astype(float)
    return X, noisy, np.column_stack([counts, log_exposure])


def _assert_same_fit(host, device):
    assert host.status == device.status == "converged"
    assert host.n_sweeps == device.n_sweeps
    np.testing.assert_array_equal(host.step_sizes, device.step_sizes)
    for field in ("mean", "marginal_var", "site_precision", "site_mean_precision"):
        np.testing.assert_allclose(getattr(device, field), getattr(host, field), rtol=1e-8, atol=1e-10)
    assert device.log_evidence == pytest.approx(host.log_evidence, rel=1e-10)


@pytest.mark.parametrize("rule", [EP(), PowerEP(0.5)], ids=["ep", "power-0.5"])
def test_a_student_t_fit_on_the_device_is_numpys(device_runs, problem, rule):
    """Outliers make some sites' precisions negative: the device loop runs the fit, and it is the host loop's."""
    X, noisy, _ = problem
    host, device = _fit_pair(X, noisy, StudentT(4.0, 0.2), rule)
    assert device_runs == [rule]
    assert np.min(host.site_precision) < 0.0
    _assert_same_fit(host, device)


@pytest.mark.parametrize(
    ("lik", "rule"), [(Poisson(), EP()), (Poisson(), PowerEP(0.5)), (NegativeBinomial(3.0), EP())],
    ids=["poisson-ep", "poisson-power-0.5", "nb-ep"],
)  # fmt: skip
def test_a_count_fit_on_the_device_is_numpys(device_runs, problem, lik, rule):
    """Counts with exposures (``[count, log exposure]`` rows, as the fit holds them): the device loop's fit is
    the host loop's."""
    X, _, rows = problem
    host, device = _fit_pair(X, rows, lik, rule)
    assert device_runs == [rule]
    _assert_same_fit(host, device)
