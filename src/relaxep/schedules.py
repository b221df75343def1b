r"""Schedules: the order in which sites are updated within one sweep.

``sequential_sweep`` is the paper's schedule: visit every site once, each update
followed by a rank-one correction of the posterior (``O(n^2)`` per site).  The
sweep does not refresh the posterior; the caller refreshes once per sweep
(GPML: repeated rank-one updates lose precision).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from relaxep.likelihoods import Likelihood
from relaxep.posterior import DensePosterior
from relaxep.rules import SiteRule

__all__ = ["SweepStats", "sequential_sweep", "site_means"]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class SweepStats:
    """What happened in one sweep.

    ``n_skipped`` counts every site left unchanged: improper cavities, updates
    that would make a marginal variance non-positive, and non-finite proposals
    (also counted in ``n_nonfinite``, which the caller treats as divergence).
    """

    n_skipped: int
    n_improper_cavities: int
    n_nonfinite: int


def site_means(site_precision: Array, site_mean_precision: Array) -> Array:
    r"""Site means :math:`m_i = \nu_i / \tau_i`, and 0 for a flat site (:math:`\tau_i = 0`)."""
    safe = np.where(site_precision != 0.0, site_precision, 1.0)
    return np.where(site_precision != 0.0, site_mean_precision / safe, 0.0)


def sequential_sweep(
    post: DensePosterior,
    y: Array,
    likelihood: Likelihood,
    rule: SiteRule,
    relaxation: Array,
    site_mean: Array,
    order: Array,
) -> SweepStats:
    r"""One sweep of sequential site updates in ``order`` (paper Section 5, steps a-f).

    For each site: cavity :math:`(h^{\setminus i}, \lambda_i)` from the current
    posterior; if it is improper (:math:`1/A_{ii} \le \tau_i`) skip the site; fold the
    label (:math:`g = y_i f_i`), ask ``rule`` for a new site, unfold, and apply the
    rank-one update.  ``relaxation`` (``b``) and ``site_mean`` (``m_i``, f-space) are
    updated in place.
    """
    skipped = improper = nonfinite = 0
    for i in order:
        i = int(i)
        a_ii = post.cov[i, i]
        tau_i = post.site_precision[i]
        nu_i = post.site_mean_precision[i]
        cav_prec = 1.0 / a_ii - tau_i
        if not (cav_prec > 0.0) or not np.isfinite(cav_prec):
            skipped += 1
            improper += 1
            continue
        cav_var = 1.0 / cav_prec
        cav_mean = cav_var * (post.mean[i] / a_ii - nu_i)
        yi = y[i]
        prop = rule.update(likelihood, yi * cav_mean, cav_var, tau_i, yi * nu_i, yi * site_mean[i], a_ii)
        new_tau = float(prop.precision)
        new_nu = yi * float(prop.mean_precision)
        if not (np.isfinite(new_tau) and np.isfinite(new_nu)):
            skipped += 1
            nonfinite += 1
            continue
        if not post.update_site(i, new_tau, new_nu):
            skipped += 1
            continue
        relaxation[i] = float(prop.relaxation)
        if new_tau != 0.0:
            site_mean[i] = new_nu / new_tau
    return SweepStats(skipped, improper, nonfinite)
