"""relaxep._numerics.logsumexp: the log of a sum of exponentials against 50-digit arithmetic, its edge cases, and
the value of scipy.special.logsumexp, whose form it computes (Blanchard, Higham & Higham 2021)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import scipy
from scipy import special

from relaxep._numerics import logsumexp


def _exact(values) -> float:
    with mpmath.workdps(50):
        return float(mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(float(v))) for v in values)))


def test_logsumexp_is_the_log_of_the_sum_to_rounding():
    """Rows spread from 1e-3 to 1e3 in scale, ties and -inf terms among them: within 4 ulps of mpmath's value."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        a = rng.normal(size=(3, 7)) * 10 ** rng.uniform(-3, 3)
        a[rng.random(a.shape) < 0.2] = -np.inf
        a[:, 1] = a[:, 0]  # (a tie with the first term, the largest in some rows)
        got = logsumexp(a, axis=1)
        for row, value in zip(a, got, strict=True):
            want = _exact(row[np.isfinite(row)]) if np.isfinite(row).any() else -np.inf
            assert value == pytest.approx(want, rel=4 * np.finfo(float).eps, abs=1e-300)


def test_logsumexp_edge_cases_and_shapes():
    assert logsumexp(np.array([-np.inf, -np.inf])) == -np.inf
    assert logsumexp(np.array([np.inf, 1.0])) == np.inf
    assert np.isnan(logsumexp(np.array([np.nan, 1.0])))
    assert logsumexp(np.array([710.0, 710.0])) == pytest.approx(710.0 + np.log(2.0), rel=1e-15)  # (no overflow)
    assert logsumexp([1, 2]) == pytest.approx(np.log(np.e + np.e**2), rel=1e-15)  # (integers promoted)
    a = np.arange(24.0).reshape(2, 3, 4)
    assert logsumexp(a, axis=(0, 2)).shape == (3,)
    assert logsumexp(a, axis=1, keepdims=True).shape == (2, 1, 4)
    assert np.ndim(logsumexp(a)) == 0 and isinstance(logsumexp(a), np.float64)


@pytest.mark.skipif(
    tuple(int(p) for p in scipy.__version__.split(".")[:2]) < (1, 15), reason="SciPy before 1.15 sums differently"
)
def test_logsumexp_is_scipys_to_the_bit():
    """The quadrature rules swapped scipy.special.logsumexp for it: their nodes and weights did not move."""
    rng = np.random.default_rng(2)
    for _ in range(500):
        nd = int(rng.integers(1, 4))
        a = rng.normal(size=tuple(rng.integers(1, 6, size=nd))) * 10 ** rng.uniform(-3, 3)
        a[rng.random(a.shape) < 0.2] = -np.inf
        axis = [None, *range(-nd, nd)][int(rng.integers(2 * nd + 1))]
        keepdims = bool(rng.integers(2))
        want = special.logsumexp(a, axis=axis, keepdims=keepdims)
        got = logsumexp(a, axis=axis, keepdims=keepdims)
        assert np.shape(got) == np.shape(want) and np.array_equal(got, want, equal_nan=True)
