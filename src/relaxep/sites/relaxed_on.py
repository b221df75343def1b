r"""Relaxed EP's site update on the arrays' device: what is device-only in it.

The rule is written once, in the array API (:mod:`relaxep.sites.relaxed`: :func:`~relaxep.sites.relaxed.relaxed_q`,
:func:`~relaxep.sites.relaxed.line_search`, :meth:`RelaxedEP.relaxed_site <relaxep.sites.RelaxedEP.relaxed_site>`).
On a device two things differ from numpy's host path, and this module holds them:

1. the likelihood's pieces are its device ones (:class:`~relaxep.sites.relaxed.TiltedPieces` with ``on_device``:
   :meth:`~relaxep.likelihoods.Likelihood.log_z_and_expected_on`, numpy's formula for the closed forms, within 1e-8
   for the sinh rule), and the all-zero test of the search an ``xp.where`` (nothing is read back);
2. an evaluation of :math:`Q` takes at most :data:`SITE_POINTS` site-points: with a quadrature likelihood each is
   ``nodes`` numbers, so a whole grid stage at :math:`n = 10^7` and 128 nodes would be 350 GB; the whole grid
   stage in one call up to :math:`2^{17}/34 \approx 3855` sites, a whole zoom up to 7710, one point a call above
   :math:`2^{16}`.

Per sweep that is :math:`34 + 3\cdot17 = 85` site-points of :math:`Q` a site and one :math:`\log\hat Z`; no Python
branch looks at a value.
"""

from __future__ import annotations

from types import ModuleType

from relaxep._typing import Array
from relaxep.likelihoods import Likelihood
from relaxep.sites.base import site_mean_in
from relaxep.sites.relaxed import RelaxedEP, SiteColumns, TiltedPieces, line_search

__all__ = ["SITE_POINTS", "optimal_relaxation_on", "relaxed_sites_on"]

#: the most site-points one evaluation of Q takes (a site-point is 128 nodes of the sinh rule: 134 MB of float64 a
#: temporary); fewer sites than this evaluate several points of a stage in one call, more one point a call
SITE_POINTS = 1 << 17


def optimal_relaxation_on(
    xp: ModuleType, rule: RelaxedEP, likelihood: Likelihood, y: Array, columns: SiteColumns, searched: Array
) -> Array:
    r""":math:`b^* = \arg\min_{b \ge 0} Q(b)` for the 1-d sites ``columns`` (:func:`~relaxep.sites.relaxed.line_search`
    with the device's pieces, :data:`SITE_POINTS` site-points an evaluation); ``searched`` marks the proper
    cavities."""
    return line_search(rule, TiltedPieces(xp, likelihood, on_device=True), y, columns, searched, SITE_POINTS)


def relaxed_sites_on(
    xp: ModuleType,
    rule: RelaxedEP,
    likelihood: Likelihood,
    y: Array,
    cavity: tuple[Array, Array],
    site: tuple[Array, Array, Array],
    searched: Array,
) -> tuple[Array, Array, Array]:
    r"""``rule``'s undamped proposals :math:`(\tau_i, \nu_i)` and relaxations :math:`b_i^*` in ``xp``:
    :meth:`RelaxedEP._propose <relaxep.sites.RelaxedEP>` with the device's pieces.

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
    tilted = TiltedPieces(xp, likelihood, on_device=True)
    new_tau, new_nu = rule.relaxed_site(tilted, y, cavity_mean, cavity_var, site_mean, b)
    return new_tau, new_nu, b
