"""``erfcx`` and ``log_ndtr`` from the array API standard alone (:mod:`relaxep._special_xp`), on numpy arrays and
on ``array-api-strict``'s.

Ground truth: ``mpmath`` at 40 digits (the accuracy the module states: a few ulps on the whole real line), and
SciPy's functions on dense grids over [-40, 40] (within SciPy's own error, which grows like ``x^2`` ulps where it
rounds ``x^2`` inside an exponential: ``erfcx`` below -4, ``log_ndtr`` above 1).  Then the limits, the branches
that ``where`` does not take (no floating-point exception, no NaN gradient), and the wiring into
:mod:`relaxep._xp`: no host round trip on a library without the functions.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import scipy.special

import relaxep._xp as rxp
from relaxep import _special_xp as sx

xs = pytest.importorskip("array_api_strict")

#: the largest relative errors against mpmath measured on these grids and on 6000 random points a range
#: (erfcx 7.8e-16, log_ndtr 1.0e-15), with a small margin
ERFCX_BOUND, LOG_NDTR_BOUND = 1.2e-15, 1.5e-15
#: Cody's switch points, and log_ndtr's (x = 0, and erfcx's switches at |x|/sqrt(2))
SWITCHES = [0.46875, 4.0, 0.46875 * np.sqrt(2.0), 4.0 * np.sqrt(2.0)]


def _around(points) -> np.ndarray:
    """Each point, its neighbours a few ulps away and its mirror image."""
    near = [np.nextafter(p, d) for p in points for d in (-np.inf, np.inf)]
    near += [p + k * np.spacing(p) for p in points for k in (-3, 3)]
    out = np.concatenate([points, near])
    return np.concatenate([out, -out, [0.0, -0.0, 1e-300, -1e-300, 5e-324, -5e-324, 1e-8, -1e-8]])


def _run(xp, function, x: np.ndarray) -> np.ndarray:
    """``function(xp, x)`` on numpy's or array-api-strict's arrays, back as numpy."""
    with np.errstate(over="ignore", divide="ignore"):  # (exp(x^2) past x = -26.6, x^2 past 1.3e154: the answers)
        return function(np, x) if xp is np else np.from_dlpack(function(xs, xs.asarray(x)))


def _mp_erfcx(x: float) -> float:
    """(Beyond 1e8 by the asymptotic series, exact there to 1e-48: mpmath's erfc overflows at 1e300.)"""
    x = mpmath.mpf(float(x))
    if x > 1e8:
        return float((1 - 1 / (2 * x**2) + 3 / (4 * x**4)) / (mpmath.sqrt(mpmath.pi) * x))
    return float(mpmath.exp(x * x) * mpmath.erfc(x))


def _mp_log_ndtr(x: float) -> float:
    """(Below -1e8 by the asymptotic series of log(Phi(x) / N(x)), exact there to 1e-48.)"""
    x = mpmath.mpf(float(x))
    if x < -1e8:
        return float(-(x**2) / 2 - mpmath.log(-x) - mpmath.log(2 * mpmath.pi) / 2 + mpmath.log1p(-1 / x**2 + 3 / x**4))
    return float(mpmath.log1p(-mpmath.ncdf(-x)) if x > 0 else mpmath.log(mpmath.ncdf(x)))


@pytest.fixture(scope="module")
def truth():
    """Arguments and mpmath's values: erfcx where finite (x > -26.6), log_ndtr where normal (x < 37.5)."""
    with mpmath.workdps(40):
        edge = [np.nextafter(-sx._OVERFLOW, 0.0), -sx._OVERFLOW]  # (the last finite values, 1.79769e308)
        x_e = np.concatenate([np.linspace(-26.6, 40.0, 2001), np.geomspace(40.0, 1e300, 200), _around(SWITCHES)])
        x_e = np.concatenate([x_e[x_e > -26.6], edge])
        x_l = np.concatenate(
            [np.linspace(-40.0, 37.5, 2001), -np.geomspace(40.0, 1e150, 200), [-1e3, -1e10], _around(SWITCHES)]
        )
        return (
            (x_e, np.array([_mp_erfcx(v) for v in x_e])),
            (x_l, np.array([_mp_log_ndtr(v) for v in x_l])),
        )


def _relative(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got - want) / np.abs(want)


# ------------------------------------------------------------------ accuracy
@pytest.mark.parametrize("xp", [np, xs], ids=["numpy", "array-api-strict"])
def test_erfcx_is_mpmaths_to_a_few_ulps(xp, truth):
    (x, want), _ = truth
    assert np.max(_relative(_run(xp, sx.erfcx, x), want)) < ERFCX_BOUND


@pytest.mark.parametrize("xp", [np, xs], ids=["numpy", "array-api-strict"])
def test_log_ndtr_is_mpmaths_to_a_few_ulps(xp, truth):
    """Both tails: -x^2/2 - log(-x) - log(2 pi)/2 to x = -1e150, -Phi(-x) to relative precision up to x = 37.5."""
    _, (x, want) = truth
    assert np.max(_relative(_run(xp, sx.log_ndtr, x), want)) < LOG_NDTR_BOUND


def _grid() -> np.ndarray:
    extremes = [1e-300, 1e3, 1e10, 0.0, 1e-17, 1e-8, 26.6, 26.63, 37.5]
    return np.concatenate([np.linspace(-40.0, 40.0, 160001), _around([*SWITCHES, *extremes])])


@pytest.mark.parametrize("xp", [np, xs], ids=["numpy", "array-api-strict"])
def test_erfcx_is_scipys_on_a_dense_grid(xp):
    """Within SciPy's own error (2e-15, and 3e-16 x^2 below 0, its exp(x^2)); infinite where SciPy's is."""
    x = _grid()
    got, want = _run(xp, sx.erfcx, x), scipy.special.erfcx(x)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isposinf(got), ~finite)
    assert np.all(finite[x > -26.62]) and not np.any(finite[x < -26.64])
    bound = 2e-15 + np.where(x < 0.0, 3e-16 * x**2, 0.0)
    assert np.all(_relative(got[finite], want[finite]) < bound[finite])


@pytest.mark.parametrize("xp", [np, xs], ids=["numpy", "array-api-strict"])
def test_log_ndtr_is_scipys_on_a_dense_grid(xp):
    """Within SciPy's own error (2e-15, and 3e-16 x^2 above 0, its exp(-x^2/2)); where SciPy's underflows to 0
    (x > 37.5), a subnormal -Phi(-x) or 0."""
    x = _grid()
    got, want = _run(xp, sx.log_ndtr, x), scipy.special.log_ndtr(x)
    normal = np.abs(want) >= np.finfo(float).tiny
    bound = 2e-15 + np.where(x > 0.0, 3e-16 * x**2, 0.0)
    assert np.all(_relative(got[normal], want[normal]) < bound[normal])
    assert np.all((got[~normal] <= 0.0) & (got[~normal] > -np.finfo(float).tiny)) and np.all(x[~normal] > 37.5)


# ------------------------------------------------------------------ limits
@pytest.mark.parametrize("xp", [np, xs], ids=["numpy", "array-api-strict"])
def test_the_limits(xp):
    x = np.array([np.inf, -np.inf, np.nan, 1e300, 1.7e308, -26.7, -1e3, -1e10, 1e-300, -1e-300, 0.0])
    e = _run(xp, sx.erfcx, x)
    np.testing.assert_array_equal(e[:2], [0.0, np.inf])
    assert np.isnan(e[2]) and np.all(np.isposinf(e[5:8])) and np.all(e[8:] == 1.0)
    assert e[3] == pytest.approx(1.0 / (np.sqrt(np.pi) * 1e300), rel=1e-15) and 0.0 < e[4] < 4e-309
    x = np.array([np.inf, -np.inf, np.nan, 1e3, 1e10, 1e300, -1e3, -1e10, -1.5e154, -1e160, 38.0, 0.0, -0.0])
    lg = _run(xp, sx.log_ndtr, x)
    np.testing.assert_array_equal(lg[[0, 3, 4, 5]], 0.0)
    assert lg[1] == -np.inf and np.isnan(lg[2]) and lg[9] == -np.inf
    # -x^2/2 - log(-x) - log(2 pi)/2 - 1/x^2 + ..., finite where x^2/2 is (|x| < 1.9e154) though x^2 is not
    for k in (6, 7, 8):
        asymptote = -(0.5 * x[k]) * x[k] - np.log(-x[k]) - 0.5 * np.log(2.0 * np.pi) - (1.0 / x[k]) ** 2
        assert lg[k] == pytest.approx(asymptote, rel=1e-15)
    assert lg[10] == pytest.approx(float(-mpmath.ncdf(-38)), rel=1e-7)  # (subnormal: -Phi(-38) = -2.9e-316)
    np.testing.assert_array_equal(lg[11:], np.log(0.5))


def test_no_branch_that_where_drops_overflows_or_divides():
    """Every branch runs on its input clipped into its own range: no floating-point exception anywhere (underflow
    aside, which is exact to the last subnormal), erfcx's infinities below -26.63 included; log_ndtr's only where
    x^2/2 itself overflows."""
    x = np.concatenate([np.linspace(-40.0, 40.0, 20001), np.geomspace(40.0, 1.7e308, 400), _around(SWITCHES)])
    y = -np.concatenate([np.geomspace(40.0, 1.8e154, 400), np.linspace(0.0, 40.0, 4001)])
    with np.errstate(over="raise", divide="raise", invalid="raise", under="ignore"):
        z = np.concatenate([x, -np.geomspace(40.0, 1.7e308, 400), [np.inf, -np.inf]])
        e = sx.erfcx(np, z)
        assert not np.any(np.isnan(e))
        np.testing.assert_array_equal(np.isfinite(e), z >= -sx._OVERFLOW)
        assert np.all(np.isfinite(sx.log_ndtr(np, np.concatenate([x, y]))))


def test_the_gradients_are_the_derivatives_and_finite():
    """Under automatic differentiation (PyTorch through array-api-compat): erfcx' = 2x erfcx - 2/sqrt(pi) and
    (log Phi)' = N/Phi, no NaN from a branch ``where`` drops."""
    torch = pytest.importorskip("torch")
    compat = pytest.importorskip("array_api_compat")
    xp = compat.array_namespace(torch.zeros(1, dtype=torch.float64))
    x_np = np.concatenate([np.linspace(-26.0, 30.0, 2001), [1e3, 1e10, 1e100], _around(SWITCHES)])
    x = torch.tensor(x_np, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(sx.erfcx(xp, x).sum(), x)
    e = scipy.special.erfcx(x_np)
    want = 2.0 * x_np * e - 2.0 / np.sqrt(np.pi)
    assert np.all(np.abs(grad.numpy() - want) <= 1e-12 * np.maximum(np.abs(want), 2.0 * np.abs(x_np) * e))
    y_np = np.concatenate([np.linspace(-40.0, 40.0, 2001), [-1e10, -1e3, 1e3, 1e10, 1e100], _around(SWITCHES)])
    y = torch.tensor(y_np, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(sx.log_ndtr(xp, y).sum(), y)
    ratio = np.sqrt(2.0 / np.pi) / scipy.special.erfcx(-y_np / np.sqrt(2.0))  # N(y)/Phi(y)
    assert np.all(np.isfinite(grad.numpy()))
    np.testing.assert_allclose(grad.numpy(), ratio, rtol=1e-11, atol=1e-300)


# ------------------------------------------------------------------ in relaxep._xp
def test_a_library_without_them_computes_them_on_its_own_arrays(monkeypatch):
    """array-api-strict: ``rxp.erfcx``, ``rxp.log_ndtr`` and ``rxp.normal_tail`` are this module's, with no
    conversion to the host; numpy keeps SciPy's, bit for bit."""
    x = np.linspace(-30.0, 30.0, 601)
    strict = xs.asarray(x)

    def refuse(*args, **kwargs):
        raise AssertionError("a host round trip")

    monkeypatch.setattr(rxp, "to_numpy", refuse)
    for name in ("__dlpack__", "__float__", "__bool__", "__int__", "__array__"):
        monkeypatch.setattr(type(strict), name, refuse, raising=False)
    got = [rxp.erfcx(xs, strict), rxp.log_ndtr(xs, strict), *rxp.normal_tail(xs, strict)]
    monkeypatch.undo()
    got = [np.from_dlpack(g) for g in got]
    with np.errstate(over="ignore", divide="ignore"):
        want = [
            sx.erfcx(np, x),
            sx.log_ndtr(np, x),
            sx.log_ndtr(np, x),
            rxp._SQRT_2_OVER_PI / sx.erfcx(np, -x / rxp._SQRT_2),
        ]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    with np.errstate(over="ignore"):
        mills = np.sqrt(2.0 / np.pi) / scipy.special.erfcx(-x / np.sqrt(2.0))  # (SciPy's: to 2e-13 at |x| = 30)
    np.testing.assert_allclose(got[3], mills, rtol=2e-13, atol=0.0)
    np.testing.assert_array_equal(rxp.erfcx(np, x), scipy.special.erfcx(x))
    np.testing.assert_array_equal(rxp.log_ndtr(np, x), scipy.special.log_ndtr(x))
