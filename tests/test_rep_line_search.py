"""Relaxed EP's line search for the relaxation, :math:`b^* = \\arg\\min_{b \\ge 0} Q(b)`, against known minimisers.

The search (``RelaxedEP.optimal_relaxation``) scans a log grid of ``b`` scaled by ``1 / lambda`` (the cavity
variance), then zooms three times around the best point.  Its contract is independent of the
likelihood: given any objective it returns the minimiser to about 1e-3 relative, ``0`` where ``Q`` is
smallest there, and it works site by site on vectors (the parallel schedule passes all sites at once).
Here the objective is replaced by functions whose minimiser is known in closed form, placed between
grid points, below the grid's first positive point, at its top and beyond it; the ground truth is the
formula, not the search.  A whole parallel REP run then checks the vectorised search in place.
"""

from __future__ import annotations

import numpy as np
import pytest

from relaxep import FractionalEP, PowerEP, Probit, RelaxedEP
from relaxep.sites import Cavity, Site

RTOL = 2e-3  # the search's resolution: its last zoom spacing is about 1.2e-3 b (tests/test_rep_ground_truth.py)


class _Known(RelaxedEP):
    """A RelaxedEP whose objective is ``(log b - log b*)^2`` (``b*`` from the site's mean), or ``shape(b)``."""

    def __init__(self, shape=None) -> None:
        super().__init__(c=1.0)
        self.shape = shape

    def q(self, tilted, y, relaxation, columns):
        b, site_mean = np.asarray(relaxation, dtype=float), columns[3]
        if self.shape is not None:
            return self.shape(b, site_mean)
        with np.errstate(divide="ignore"):
            return (np.log(b) - np.log(site_mean)) ** 2  # +inf at b = 0


def _search(rule: RelaxedEP, b_star, cavity_var) -> np.ndarray:
    b_star, cavity_var = np.broadcast_arrays(np.asarray(b_star, float), np.asarray(cavity_var, float))
    ones = np.ones_like(b_star)
    site = Site(precision=ones, mean_precision=b_star, marginal_var=ones)  # site mean m_i = b*
    # the replaced objective ignores the likelihood: any of one target a site serves
    return rule.optimal_relaxation(Probit(), ones, Cavity(mean=0.0 * ones, var=cavity_var), site)


# b* lam, from below the grid's first positive point (1e-4) to its top (1e4); between grid points
# (ratio 10^(1/4) = 1.778) and on them
INSIDE = [3e-5, 1.3e-4, 1e-3, 0.05, 0.5623, 1.0, 1.5, 7.0, 310.0, 5000.0, 1e4]


@pytest.mark.parametrize("cavity_var", [1.0, 1e-3, 1e4], ids=lambda v: f"lam={v:g}")
@pytest.mark.parametrize("scaled", INSIDE, ids=lambda s: f"b*lam={s:g}")
def test_the_search_finds_a_known_minimiser_on_the_cavitys_scale(scaled, cavity_var):
    b_star = scaled / cavity_var
    b = _search(_Known(), b_star, cavity_var)
    np.testing.assert_allclose(b, b_star, rtol=RTOL)


def test_the_search_works_site_by_site_on_vectors():
    """All sites at once (the parallel schedule) give each site its own minimiser, whatever the others."""
    rng = np.random.default_rng(0)
    scaled = np.array(INSIDE * 3)[rng.permutation(3 * len(INSIDE))][:29]
    cavity_var = 10.0 ** rng.uniform(-3, 4, scaled.size)
    b = _search(_Known(), scaled / cavity_var, cavity_var)
    assert b.shape == scaled.shape
    np.testing.assert_allclose(b, scaled / cavity_var, rtol=RTOL)
    one_by_one = [_search(_Known(), s / v, v) for s, v in zip(scaled, cavity_var, strict=True)]
    np.testing.assert_allclose(b, np.ravel(one_by_one), rtol=1e-12)


def test_a_site_whose_minimum_is_at_zero_keeps_zero_beside_relaxed_sites():
    """On a vector, a site whose ``Q`` rises from ``b = 0`` gets 0 while its neighbours are relaxed."""

    def shape(b, m):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(m > 0, (np.log(b) - np.log(np.where(m > 0, m, 1.0))) ** 2, b)

    b = _search(_Known(shape), np.array([2.0, 0.0, 0.03, 0.0]), np.array([1.0, 1.0, 2.0, 0.5]))
    np.testing.assert_array_equal(b[[1, 3]], 0.0)
    np.testing.assert_allclose(b[[0, 2]], [2.0, 0.03], rtol=RTOL)


def test_no_relaxation_where_the_objective_is_smallest_at_zero():
    """``Q`` increasing, or flat (a tie goes to ``b = 0``: no relaxation), gives ``b = 0`` exactly."""
    rising = _Known(lambda b, m: b + 0.0 * m)
    flat = _Known(lambda b, m: 0.0 * b + 0.0 * m)
    for rule in (rising, flat):
        b = _search(rule, np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.0, 2.0]))
        np.testing.assert_array_equal(b, 0.0)


def test_a_minimiser_beyond_the_grid_ends_at_its_top():
    """``b* lam`` above 1e4: the search stops at the top of its range (1e4 / lam), or its zooms' last steps
    past it (three spacings of at most 1/16 of the top's grid interval: under 4%), and not beyond."""
    lam = np.array([1.0, 0.01])
    b = _search(_Known(), np.array([1e6, 1e7]), lam)
    assert np.all(b >= 1e4 / lam) and np.all(b <= 1.04e4 / lam), b * lam


def test_the_rules_documented_defaults_and_limits():
    """The defaults the docstrings give (PowerEP u = 0.8, FractionalEP 0.5, RelaxedEP c = 10) and c = 0
    (no penalty on the relaxation) accepted, a negative c refused."""
    assert PowerEP().u == 0.8
    assert FractionalEP().fraction == 0.5
    assert RelaxedEP().c == 10.0
    assert RelaxedEP(0.0).c == 0.0
    with pytest.raises(ValueError, match="c must be >= 0"):
        RelaxedEP(-1e-12)


def test_the_search_in_blocks_is_the_whole_stages_search():
    """One search for numpy and the device (``sites.relaxed.line_search``): a few site-points an evaluation of Q (the
    device's memory bound) gives numpy's b*, site for site, as the whole stage at once does; each evaluation holds
    at most that many site-points."""
    from relaxep.sites.relaxed import TiltedPieces, line_search

    rng = np.random.default_rng(3)
    n = 40
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    y[:8] *= -1.0
    columns = (rng.normal(scale=2.0, size=n), 10.0 ** rng.uniform(-1.0, 1.5, n), np.zeros(n), np.zeros(n), np.ones(n))
    rule, searched = RelaxedEP(0.02), np.ones(n, dtype=bool)
    sizes = []

    class Counted(TiltedPieces):
        def log_z_and_expected(self, y, mean, var):
            sizes.append(mean.shape[0])
            return super().log_z_and_expected(y, mean, var)

    whole = line_search(rule, Counted(np, Probit()), y, columns, searched)
    assert sizes == [34 * n] + [17 * n] * 3
    want = rule.optimal_relaxation(Probit(), y, Cavity(columns[0], columns[1]), Site(*columns[2:4], columns[4]))
    np.testing.assert_array_equal(whole, want)
    assert np.sum(want > 0.0) >= 3
    for site_points in (1, 5 * n, 7 * n + 3):
        sizes.clear()
        np.testing.assert_array_equal(line_search(rule, Counted(np, Probit()), y, columns, searched, site_points), want)
        assert max(sizes) == max(n, site_points // n * n)
