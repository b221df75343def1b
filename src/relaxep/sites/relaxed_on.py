r"""Relaxed EP's site update in any array library, on the arrays' device: numpy's line search, a few points at a time.

:class:`~relaxep.sites.RelaxedEP` on numpy (:meth:`~relaxep.sites.RelaxedEP.optimal_relaxation`) finds
:math:`b^* = \arg\min_{b \ge 0} Q(b)` for every site at once on a ``sites x points`` array: the grid
:math:`b \in \{0\} \cup \{10^{-4}, \dots, 10^4\}/\lambda` (34 points, :math:`\lambda` the cavity variance), then
three zooms of 17 points on :math:`[b_{k-1}, b_{k+1}]` around the best point :math:`b_k`, each next zoom on
:math:`b^* \pm (hi - lo)/16` (clipped at 0).  With a quadrature likelihood each point is ``nodes`` numbers a site,
so that array is ``n x 34 x nodes``: at :math:`n = 10^7` and 128 nodes, 350 GB.  Here the same points are
visited a few at a time, each site's in numpy's order, with a running minimum: :data:`SITE_POINTS` site-points an
evaluation of :math:`Q` (all of a stage's points for a few thousand sites, one point a call from
:math:`6.6 \cdot 10^4` sites on), so memory is :math:`O(n \cdot \text{nodes})`, and the iterates are numpy's
(every site-point is computed alone, elementwise), to the accuracy of the likelihood's device :math:`Q`
(:meth:`~relaxep.likelihoods.Likelihood.expected_log_lik_on`: numpy's formula for the closed forms, 1e-8 for the
sinh rule).

1. **The objective** (:func:`relaxed_objective_on`), at the relaxed cavity :math:`\tilde\lambda = (1/\lambda +
   b)^{-1}`, :math:`\tilde h = \tilde\lambda(h/\lambda + b m_i)` (:func:`~relaxep.sites.relaxed_cavity`), from
   :meth:`Likelihood.log_z_and_expected_on <relaxep.likelihoods.Likelihood.log_z_and_expected_on>`
   (:math:`\log\hat Z, d_1, d_2` and :math:`E[\log t]` there):

   .. math::
       Q(b) = E[\log t] - \log\hat Z + \tfrac12\log(1 + \tilde\lambda d_2) - \tfrac12\tilde\lambda(d_2 + d_1^2)
       + c\,b\ (\text{or } c\,b\lambda,\ \texttt{penalty="scale\_free"}),

   the derived variant (:func:`~relaxep.sites.relaxed.tilted_kl`, numpy's formula), or the paper's printed one
   (:func:`~relaxep.sites.paper.paper_terms`); :math:`+\infty` where not finite, as numpy's.
2. **The search** (:func:`optimal_relaxation_on`): a point :math:`b_p` replaces the best so far where
   :math:`Q(b_p) < Q_{best}` strictly, which is numpy's ``argmin`` (the first of equal minima) in each stage, and
   its comparison of a zoom's best with the best before it; the grid stage keeps the neighbours
   :math:`b_{k\pm1}` of its best point as it goes.  Numpy's result, :math:`0` where :math:`Q(0) \le Q_{best}`,
   else :math:`b_{best}`; numpy's shortcut (every site's grid minimum at :math:`b = 0`: all zero, no zoom)
   is an ``xp.where`` on the sites the host loop would search (the proper cavities), so nothing is read back.
3. **The site** (:func:`relaxed_sites_on`): EP's moment matching at the relaxed cavity,
   :math:`\tau_b = -d_2/(1 + \tilde\lambda d_2)`, :math:`\nu_b = (d_1 - \tilde h d_2)/(1 + \tilde\lambda d_2)`
   (:func:`~relaxep.sites.site_from_tilted`), and the variant's step (e): the identity (derived), or
   :math:`(\tau_b + b, \nu_b + b m_i)` (paper).

Per sweep that is :math:`34 + 3\cdot17 = 85` site-points of :math:`Q` a site (4 calls of the likelihood for
up to 3855 sites, 85 above :math:`2^{16}`) and one :math:`\log\hat Z`; nothing is read back, and no
Python branch looks at a value.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import numpy as np

from relaxep._typing import Array
from relaxep.likelihoods import Likelihood
from relaxep.sites.base import relaxed_cavity, site_from_tilted, site_mean_in
from relaxep.sites.paper import paper_terms
from relaxep.sites.relaxed import _VARIANTS, RelaxedEP, tilted_kl

__all__ = ["SITE_POINTS", "optimal_relaxation_on", "relaxed_objective_on", "relaxed_sites_on"]

#: the site columns the objective takes: cavity mean and variance, site precision and mean, marginal variance
SiteColumns = tuple[Array, Array, Array, Array, Array]


def relaxed_objective_on(
    xp: ModuleType, rule: RelaxedEP, likelihood: Likelihood, y: Array, relaxation: Array, columns: SiteColumns
) -> Array:
    r""":math:`Q(b)` of ``rule``'s variant and penalty at one relaxation :math:`b` per site (step 1 of the module
    docstring), :math:`+\infty` where it is not finite.

    Parameters
    ----------
    xp : module
        The array namespace of the arrays.
    rule : RelaxedEP
        Its ``variant``, ``penalty`` and weight ``c``.
    likelihood : Likelihood
        One with :attr:`~relaxep.likelihoods.Likelihood.relaxed_on_device`.
    y : array
        The sites' targets.
    relaxation : array
        :math:`b \ge 0`, one per site.
    columns : tuple of array
        The cavity means :math:`h_i` and variances :math:`\lambda_i`, the site precisions :math:`\tau_i` and
        means :math:`m_i`, the marginal variances :math:`A_{ii}`.
    """
    cavity_mean, cavity_var, tau, site_mean, marginal_var = columns
    mean, var = relaxed_cavity(cavity_mean, cavity_var, site_mean, relaxation)
    lz, expected = likelihood.log_z_and_expected_on(xp, y, mean, var)
    c = float(rule.c)
    if rule.variant == "paper":
        value = paper_terms(
            xp, lz, expected, relaxation, (mean, var), cavity_mean, cavity_var, site_mean, tau, marginal_var, c
        )
    else:
        cost = relaxation * cavity_var if rule.penalty == "scale_free" else relaxation
        value = tilted_kl(xp, lz, expected, var) + c * cost
    return xp.where(xp.isfinite(value), value, xp.full_like(value, float("inf")))


def optimal_relaxation_on(
    xp: ModuleType, rule: RelaxedEP, likelihood: Likelihood, y: Array, columns: SiteColumns, searched: Array
) -> Array:
    r""":math:`b^* = \arg\min_{b \ge 0} Q(b)` for every site, numpy's grid and zooms a few points at a time (step 2
    of the module docstring): :meth:`RelaxedEP.optimal_relaxation <relaxep.sites.RelaxedEP.optimal_relaxation>`'s
    iterates in :math:`O(n \cdot \text{nodes})` memory.

    The sites are 1-d (``n`` of them); ``searched`` marks those numpy's search would be handed (the proper
    cavities): its shortcut tests them alone.  The other arguments are :func:`relaxed_objective_on`'s.
    """
    cavity_var = columns[1]
    grid = [float(g) for g in rule._grid]
    last = len(grid) - 1
    values = _Evaluator(xp, rule, likelihood, y, columns)
    zero = xp.zeros_like(cavity_var)
    best_b = zero_q = best_q = lo = hi = zero
    moved = xp.zeros_like(cavity_var, dtype=xp.bool)  # (numpy's argmin k > 0)
    for p, b, value in values([g / cavity_var for g in grid]):
        if p == 0:
            best_b, zero_q, best_q, lo, hi = b, value, value, b, grid[1] / cavity_var
            continue
        better = value < best_q
        best_q, best_b = xp.where(better, value, best_q), xp.where(better, b, best_b)
        lo = xp.where(better, grid[p - 1] / cavity_var, lo)
        hi = xp.where(better, grid[min(p + 1, last)] / cavity_var, hi)
        moved = moved | better
    frac = [float(f) for f in np.linspace(0.0, 1.0, rule._zoom_points)]
    for _ in range(rule._n_zoom):
        for _p, b, value in values([lo + (hi - lo) * f for f in frac]):
            better = value < best_q
            best_q, best_b = xp.where(better, value, best_q), xp.where(better, b, best_b)
        width = (hi - lo) / (rule._zoom_points - 1)
        lo, hi = xp.maximum(best_b - width, zero), best_b + width
    found = xp.where(zero_q <= best_q, zero, best_b)
    return xp.where(xp.any(moved & searched), found, zero)


#: the most site-points one evaluation of Q takes (a site-point is 128 nodes of the sinh rule: 134 MB of float64 a
#: temporary); fewer sites than this evaluate several points of a stage in one call, more one point a call
SITE_POINTS = 1 << 17


class _Evaluator:
    r""":math:`Q` at a stage's points (each an array of one :math:`b` per site), :math:`\lfloor`
    :data:`SITE_POINTS` :math:`/ n\rfloor` points a call (at least 1): their relaxations concatenated into one
    vector of sites against the columns and targets repeated as often, so a likelihood sees 1-d sites as ever and
    each site-point is computed as alone (elementwise, its nodes on its own row)."""

    def __init__(self, xp: ModuleType, rule: RelaxedEP, likelihood: Likelihood, y: Array, columns: SiteColumns):
        self.xp, self.rule, self.likelihood, self.y, self.columns = xp, rule, likelihood, y, columns
        self.n = int(columns[1].shape[0])
        self.group = max(1, SITE_POINTS // max(self.n, 1))
        self._tiled: dict[int, tuple[Array, SiteColumns]] = {}

    def _repeated(self, times: int) -> tuple[Array, SiteColumns]:
        if times == 1:
            return self.y, self.columns
        if times not in self._tiled:
            xp = self.xp
            tiled = tuple(xp.concat([c] * times, axis=0) for c in self.columns)
            self._tiled[times] = (xp.concat([self.y] * times, axis=0), tiled)  # type: ignore[assignment]
        return self._tiled[times]

    def __call__(self, points: list[Array]) -> Iterator[tuple[int, Array, Array]]:
        """``(index, b, Q(b))`` for each of ``points`` in order."""
        xp, n = self.xp, self.n
        for first in range(0, len(points), self.group):
            chunk = points[first : first + self.group]
            y, columns = self._repeated(len(chunk))
            b = chunk[0] if len(chunk) == 1 else xp.concat(chunk, axis=0)
            value = relaxed_objective_on(xp, self.rule, self.likelihood, y, b, columns)
            for j, point in enumerate(chunk):
                yield first + j, point, value if len(chunk) == 1 else value[j * n : (j + 1) * n]


def relaxed_sites_on(
    xp: ModuleType,
    rule: RelaxedEP,
    likelihood: Likelihood,
    y: Array,
    cavity: tuple[Array, Array],
    site: tuple[Array, Array, Array],
    searched: Array,
) -> tuple[Array, Array, Array]:
    r"""``rule``'s undamped proposals :math:`(\tau_i, \nu_i)` and relaxations :math:`b_i^*` (step 3 of the module
    docstring): :meth:`RelaxedEP._propose <relaxep.sites.RelaxedEP>` in ``xp``.

    Parameters
    ----------
    cavity : (array, array)
        The cavity means :math:`h_i` and variances :math:`\lambda_i` (any stand-in where not ``searched``).
    site : (array, array, array)
        The site precisions :math:`\tau_i`, mean-precisions :math:`\nu_i` and the marginal variances
        :math:`A_{ii}`.
    searched : array of bool
        The sites with a proper cavity (:func:`optimal_relaxation_on`).
    """
    cavity_mean, cavity_var = cavity
    tau, nu, marginal_var = site
    site_mean = site_mean_in(xp, tau, nu)
    columns = (cavity_mean, cavity_var, tau, site_mean, marginal_var)
    b = optimal_relaxation_on(xp, rule, likelihood, y, columns, searched)
    mean, var = relaxed_cavity(cavity_mean, cavity_var, site_mean, b)
    lz = likelihood.log_z_on(xp, y, mean, var, 1.0)
    tau_b, nu_b = site_from_tilted(lz.dlog_z, lz.d2log_z, mean, var)
    new_tau, new_nu = _VARIANTS[rule.variant][1](tau_b, nu_b, b, site_mean)
    return new_tau, new_nu, b
