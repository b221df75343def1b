r"""Schedules: the order in which sites are updated within one sweep.

``sequential_sweep`` is the paper's schedule: visit every site once, each update
followed by a rank-one correction of the posterior (``O(n^2)`` per site).
``blocked_sweep`` gives the same iterates (to rounding) but touches the full
``n x n`` covariance once per block of ``B`` sites: only the block's ``n x B`` columns
are kept current site by site, and the accumulated rank-one corrections are applied
as one rank-``B`` BLAS-3 update.  ``parallel_sweep`` updates every site from one set of
cavities (a different iteration with the same fixed points), with an adaptive step.
Sequential sweeps do not refresh the posterior; the caller refreshes once per sweep
(GPML: repeated rank-one updates lose precision).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.linalg.blas import dgemm, dger

from relaxep.likelihoods import Likelihood
from relaxep.posterior import DensePosterior
from relaxep.rules import SiteRule

__all__ = ["SweepStats", "blocked_sweep", "parallel_sweep", "sequential_sweep", "site_means"]

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


_IMPROPER, _NONFINITE = "improper", "nonfinite"


def _propose(
    rule: SiteRule,
    likelihood: Likelihood,
    y_i: float,
    a_ii: float,
    mean_i: float,
    tau_i: float,
    nu_i: float,
) -> tuple[float, float, float] | str:
    r"""New f-space site ``(tau, nu, b)`` for one site, or why there is none.

    Cavity :math:`\lambda = (1/A_{ii} - a\tau_i)^{-1}`,
    :math:`h = \lambda(\mu_i/A_{ii} - a\nu_i)`, with :math:`a` the rule's
    ``cavity_fraction`` (1 except for :class:`~relaxep.rules.FractionalEP`); improper when
    :math:`1/A_{ii} \le a\tau_i`.  The rule sees the folded latent :math:`g = y_i f_i`.
    """
    frac = rule.cavity_fraction
    cav_prec = 1.0 / a_ii - frac * tau_i
    if not (cav_prec > 0.0) or not np.isfinite(cav_prec):
        return _IMPROPER
    cav_var = 1.0 / cav_prec
    cav_mean = cav_var * (mean_i / a_ii - frac * nu_i)
    site_mean_i = nu_i / tau_i if tau_i != 0.0 else 0.0
    prop = rule.update(likelihood, y_i * cav_mean, cav_var, tau_i, y_i * nu_i, y_i * site_mean_i, a_ii)
    new_tau = float(prop.precision)
    new_nu = y_i * float(prop.mean_precision)
    if not (np.isfinite(new_tau) and np.isfinite(new_nu)):
        return _NONFINITE
    return new_tau, new_nu, float(prop.relaxation)


def sequential_sweep(
    post: DensePosterior,
    y: Array,
    likelihood: Likelihood,
    rule: SiteRule,
    relaxation: Array,
    order: Array,
) -> SweepStats:
    r"""One sweep of sequential site updates in ``order`` (paper Section 5, steps a-f).

    For each site: cavity :math:`(h^{\setminus i}, \lambda_i)` from the current
    posterior; if it is improper (:math:`1/A_{ii} \le \tau_i`) skip the site; fold the
    label (:math:`g = y_i f_i`), ask ``rule`` for a new site, unfold, and apply the
    rank-one update.  ``relaxation`` (``b``) is updated in place; REP's site mean
    :math:`m_i` is derived from the sites (:func:`site_means`).
    """
    skipped = improper = nonfinite = 0
    for i in order:
        i = int(i)
        tau_i = post.site_precision[i]
        nu_i = post.site_mean_precision[i]
        out = _propose(rule, likelihood, y[i], post.cov[i, i], post.mean[i], tau_i, nu_i)
        if isinstance(out, str):
            skipped += 1
            improper += out == _IMPROPER
            nonfinite += out == _NONFINITE
            continue
        new_tau, new_nu, b = out
        if not post.update_site(i, new_tau, new_nu):
            skipped += 1
            continue
        relaxation[i] = b
    return SweepStats(skipped, improper, nonfinite)


def blocked_sweep(
    post: DensePosterior,
    y: Array,
    likelihood: Likelihood,
    rule: SiteRule,
    relaxation: Array,
    order: Array,
    block_size: int = 64,
) -> SweepStats:
    r"""The sequential sweep in blocks of ``block_size`` sites (same iterates, BLAS-3).

    Within a block :math:`J`, site :math:`j` needs only :math:`A_{jj}`, :math:`\mu_j` and,
    for later sites, the columns :math:`A_{:,J}`.  The covariance :math:`A_0` of the
    sweep's start is not written: the block's panel is formed as
    :math:`P = A_{0,:J} - V D V_{J}^\top` from the corrections :math:`(k_t, a_t)` recorded so
    far (one ``gemm``, :math:`2 n m B` flops after :math:`m` updates, :math:`n^3` per sweep
    in all, half of updating all of :math:`A` after every block).  After each site the
    panel receives :math:`P \leftarrow P - k\, a\, a_J^\top` (:math:`a` the site's current
    column, :math:`k = \Delta\tau/(1 + \Delta\tau A_{jj})`) and the mean its rank-one step.
    The sweep's corrections are left deferred on the posterior
    (:meth:`~relaxep.posterior.DensePosterior.defer_downdate`): the refresh that ends
    the sweep recomputes :math:`A` anyway.  Memory: :math:`A_0`, the ``n x m`` corrections
    (at most ``n x n``) and one ``n x B`` panel.
    """
    skipped = improper = nonfinite = 0
    n = post.n
    tau_all, nu_all, mean = post.site_precision, post.site_mean_precision, post.mean
    cov0 = post.cov  # applies any earlier deferred corrections first; not written below
    vectors = np.empty((n, len(order)), order="F")
    coefs = np.empty(len(order))
    used = 0
    for start in range(0, len(order), block_size):
        block = np.asarray(order[start : start + block_size], dtype=np.intp)
        panel = np.asfortranarray(cov0[:, block])  # fancy indexing copies
        if used:
            panel = dgemm(
                -1.0,
                vectors[:, :used] * coefs[:used],
                vectors[block, :used],
                beta=1.0,
                c=panel,
                trans_b=1,
                overwrite_c=1,
            )
        new_tau = tau_all[block].copy()
        new_nu = nu_all[block].copy()
        for t, j in enumerate(block):
            a_jj = panel[j, t]
            tau_j, nu_j = new_tau[t], new_nu[t]
            out = _propose(rule, likelihood, y[j], a_jj, mean[j], tau_j, nu_j)
            if isinstance(out, str):
                skipped += 1
                improper += out == _IMPROPER
                nonfinite += out == _NONFINITE
                continue
            tau_new, nu_new, b = out
            d_tau, d_nu = tau_new - tau_j, nu_new - nu_j
            denom = 1.0 + d_tau * a_jj
            if not (denom > 0.0 and np.isfinite(denom)):
                skipped += 1
                continue
            col = panel[:, t].copy()
            mean += ((d_nu - d_tau * mean[j]) / denom) * col
            k = d_tau / denom
            panel = dger(-k, col, col[block], a=panel, overwrite_a=True)
            vectors[:, used] = col
            coefs[used] = k
            used += 1
            new_tau[t], new_nu[t] = tau_new, nu_new
            relaxation[j] = b
        post.set_sites(block, new_tau, new_nu)
    post.defer_downdate(vectors[:, :used], coefs[:used])
    return SweepStats(skipped, improper, nonfinite)


@dataclass
class ParallelStep:
    """The adaptive step of the parallel schedule (halved whenever a sweep's update fails)."""

    size: float = 1.0
    min_size: float = 1.0 / 1024


def parallel_sweep(
    post: DensePosterior,
    y: Array,
    likelihood: Likelihood,
    rule: SiteRule,
    relaxation: Array,
    step: ParallelStep,
) -> SweepStats:
    r"""Update every site from one set of cavities, then refresh (one factorisation).

    Sites with improper cavities keep their parameters.  The proposals
    :math:`(\tau^*, \nu^*)` are applied with step :math:`s`:
    :math:`\tau \leftarrow \tau + s (\tau^* - \tau)` (likewise :math:`\nu`); if the resulting
    posterior is improper or not finite, :math:`s` is halved and the step retried, down
    to ``step.min_size`` (then :class:`ImproperPosteriorError` propagates).  The posterior
    is refreshed on return.
    """
    from relaxep.posterior import ImproperPosteriorError

    a = post.marginal_var.copy()
    tau, nu, mean = post.site_precision.copy(), post.site_mean_precision.copy(), post.mean
    frac = rule.cavity_fraction
    with np.errstate(divide="ignore", invalid="ignore"):
        cav_prec = 1.0 / a - frac * tau
    ok = (cav_prec > 0.0) & np.isfinite(cav_prec)
    improper = int(np.count_nonzero(~ok))
    idx = np.flatnonzero(ok)
    cav_var = 1.0 / cav_prec[idx]
    cav_mean = cav_var * (mean[idx] / a[idx] - frac * nu[idx])
    yi = y[idx]
    prop = rule.update(
        likelihood, yi * cav_mean, cav_var, tau[idx], yi * nu[idx], yi * site_means(tau[idx], nu[idx]), a[idx]
    )
    prop_tau = np.asarray(prop.precision, dtype=float)
    prop_nu = yi * np.asarray(prop.mean_precision, dtype=float)
    finite = np.isfinite(prop_tau) & np.isfinite(prop_nu)
    nonfinite = int(np.count_nonzero(~finite))
    idx, prop_tau, prop_nu = idx[finite], prop_tau[finite], prop_nu[finite]
    b = np.asarray(prop.relaxation, dtype=float)[finite]
    while True:
        s = step.size
        new_tau = tau[idx] + s * (prop_tau - tau[idx])
        new_nu = nu[idx] + s * (prop_nu - nu[idx])
        post.set_sites(idx, new_tau, new_nu)
        try:
            post.refresh(marginals_only=True)
            if np.all(np.isfinite(post.mean)):
                break
        except ImproperPosteriorError:
            pass
        post.set_sites(slice(None), tau, nu)
        if step.size / 2 < step.min_size:
            post.refresh()
            raise ImproperPosteriorError("the parallel step fell below its minimum without a proper posterior")
        step.size /= 2
    relaxation[idx] = b
    return SweepStats(improper + nonfinite, improper, nonfinite)
