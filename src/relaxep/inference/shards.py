r"""One shard of :class:`~relaxep.inference.sharded.ShardedFITC`: its state (:class:`Shard`) and the pure functions
that the driver maps over the Dask workers.

A shard (one row chunk) holds its inputs, targets, :math:`V_s^\top = K_{s,u}L_{uu}^{-\top}` and :math:`g_s`
(both from :func:`~relaxep.posterior.fitc_rows.sparse_prior_rows`, as ``SparsePrior`` builds its own), its
sites and its last proposals, and runs the same row-block functions (:mod:`relaxep.posterior.fitc_rows`) as
the one-process sweep.  Each function takes a shard and returns a new one (never writing the old: a
future's state stays what it was), with what goes back to the client.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep._xp import HOST
from relaxep.inference.evidence import site_evidence_terms
from relaxep.inference.ledger import marginal_change
from relaxep.inference.schedules import SiteUpdater, parallel_proposals
from relaxep.inference.stochastic_ep import MinibatchSums, TiedStep, minibatch_sums, sites_of_rows
from relaxep.likelihoods import Likelihood
from relaxep.posterior.base import cavity, is_proper
from relaxep.posterior.fitc_rows import natural_sums, shard_marginals, sparse_prior_rows
from relaxep.posterior.rbf import ScaledRBF
from relaxep.posterior.sparse_gradient import shard_gradient
from relaxep.sites import SiteRule

__all__ = [
    "Shard",
    "gradient",
    "keep",
    "likelihood_gradient",
    "minibatch",
    "new",
    "prior",
    "sites",
    "start",
    "stats",
    "sums",
    "sweep",
    "tied_start",
]


@dataclass(frozen=True)
class Shard:
    """A shard's state, held on its worker (module docstring)."""

    #: inputs and targets (as the likelihood takes them: labels in -1/+1, real targets, or rows of a count and
    #: its log exposure)
    X: Array
    y: Array
    #: the current sites
    tau: Array
    nu: Array
    #: the sites a warm run starts from (``None``: flat)
    warm: tuple[Array, Array] | None = None
    #: the shard's rows of the FITC prior, :math:`V_s^\top` and :math:`g_s`
    Vt: Array | None = None
    g: Array | None = None
    #: the last sweep's step direction (the schedule's memory)
    last: Array | None = None
    #: the marginals :math:`(\mu, A_{ii})` after the last sweep (the monitor's memory)
    prev: tuple[Array, Array] | None = None
    #: the last proposals: indices, precisions, mean precisions
    prop: tuple[Array, Array, Array] | None = None
    #: the candidate sites whose sums the client factors (they become the sites at the next sweep)
    cand: tuple[Array, Array] | None = None


def new(X: Array, y: Array) -> Shard:
    """A shard's inputs and targets, flat sites, no warm start."""
    n = X.shape[0]
    return Shard(np.asarray(X, dtype=float), np.asarray(y, dtype=float), np.zeros(n), np.zeros(n))


def prior(shard: Shard, Z: Array, kernel: Kernel, L_uu: Array, noise: float) -> Shard:
    """The shard's rows of the FITC prior: V_s^T = K_{s,u} L_uu^-T and g_s (:func:`sparse_prior_rows`)."""
    Vt, _, g = sparse_prior_rows(HOST, kernel, shard.X, Z, L_uu, noise)
    return replace(shard, Vt=Vt, g=g)


def start(shard: Shard, warm: bool) -> Shard:
    """Sites for a new run: the kept (warm) ones or flat; the schedule's and monitor's memory cleared."""
    n = shard.y.shape[0]
    if warm and shard.warm is not None:
        tau, nu = shard.warm[0].copy(), shard.warm[1].copy()
    else:
        tau, nu = np.zeros(n), np.zeros(n)
    return replace(shard, tau=tau, nu=nu, last=None, prev=None, prop=None, cand=None)


def keep(shard: Shard) -> Shard:
    """Keep the current sites as the next run's warm start (on the shard: they never leave it)."""
    return replace(shard, warm=(shard.tau.copy(), shard.nu.copy()))


def gradient(shard: Shard, kern: ScaledRBF, Z: Array, pieces: dict) -> tuple:
    """The shard's share of the evidence gradient (:func:`relaxep.posterior.sparse_gradient.shard_gradient`)."""
    return shard_gradient(kern, shard.Vt, shard.g, shard.tau, shard.nu, shard.X, Z, pieces, shard.prev[1])


def likelihood_gradient(shard: Shard, likelihood: Likelihood) -> Array:
    r"""The shard's share of the evidence gradient in the likelihood's hyperparameters,
    :math:`\sum_i \partial\log\hat Z_i/\partial\theta` at its full cavities
    (:func:`~relaxep.inference.evidence.likelihood_evidence_gradient`)."""
    mu, a = shard.prev
    h, lam = cavity(mu, a, shard.tau, shard.nu, 1.0)
    return np.sum(likelihood.dlog_z_dtheta(shard.y, h, lam), axis=0)


def sums(shard: Shard, step: float | None) -> tuple[Shard, tuple[Array, Array, float, float]]:
    """Candidate sites at ``step`` (``None``: the sites as they are) and their natural-parameter sums."""
    tau, nu = shard.tau, shard.nu
    if step is not None and shard.prop is not None:
        idx, p_tau, p_nu = shard.prop
        tau, nu = tau.copy(), nu.copy()
        tau[idx] = shard.tau[idx] + step * (p_tau - shard.tau[idx])
        nu[idx] = shard.nu[idx] + step * (p_nu - shard.nu[idx])
    return replace(shard, cand=(tau, nu)), natural_sums(HOST, shard.Vt, shard.g, tau, nu)


def sweep(
    shard: Shard,
    chol_inv: Array,
    m: Array,
    rule: SiteRule,
    likelihood: Likelihood,
    propose: bool,
    step: float | None = None,
) -> tuple[Shard, dict]:
    """Marginals from the broadcast factor, the convergence statistic, the evidence terms and the proposals.

    The candidate sites whose factor was broadcast (the last :func:`sums`'s) become the sites first.
    The proposals are kept on the shard (``propose=False``: not kept, the run ends); back come scalars and,
    at ``step``, the next candidate's sums (:func:`sums`, computed ahead: the client uses them where
    the step it settles on is ``step``, as it is unless the schedule damps, saving a round trip a sweep).
    """
    if shard.cand is not None:
        shard = replace(shard, tau=shard.cand[0], nu=shard.cand[1], cand=None)
    Vt, g, tau, nu, y = shard.Vt, shard.g, shard.tau, shard.nu, shard.y
    mu, a = shard_marginals(HOST, Vt, g, tau, nu, chol_inv, m)
    out: dict[str, Any] = {"bad": bool(not np.all(a > 0.0) or not np.all(np.isfinite(mu))), "stat": 0.0}
    if shard.prev is not None:
        out["stat"] = marginal_change(*shard.prev, mu, a)
    shard = replace(shard, prev=(mu, a))
    h, lam = cavity(mu, a, tau, nu, 1.0)  # the evidence's full cavities (log_evidence's)
    if np.all(is_proper(lam)):
        terms = site_evidence_terms(likelihood, y, h, lam, tau, mu, a)
        out["evidence"] = float(np.sum(terms) + 0.5 * float(nu @ mu))
    else:
        out["evidence"] = float("nan")
    props = parallel_proposals(SiteUpdater(rule, likelihood, y), mu, a, tau, nu, shard.last)
    out["n_improper"] = props.n_improper
    if not propose:
        return shard, out
    shard = replace(shard, prop=(props.index, props.precision, props.mean_precision), last=props.direction)
    out.update(n_nonfinite=props.n_nonfinite, dot=props.dot, dir_sq=props.norm_sq, last_sq=props.last_norm_sq)
    if step is not None:
        shard, out["sums"] = sums(shard, step)
    return shard, out


def sites(shard: Shard) -> tuple[Array, Array]:
    """The shard's sites."""
    return shard.tau, shard.nu


def minibatch(shard: Shard, step: TiedStep, rows: int, seed: int) -> MinibatchSums:
    """The stochastic search's sums over ``rows`` random rows of the shard (:func:`minibatch_sums`)."""
    n = shard.y.shape[0]
    idx = np.random.default_rng(seed).choice(n, min(rows, n), replace=False)
    return minibatch_sums(step, shard.X[idx], shard.y[idx])


def tied_start(shard: Shard, step: TiedStep) -> Shard:
    """The stochastic search's learned site, as every row's warm-start site (:func:`sites_of_rows`)."""
    return replace(shard, warm=sites_of_rows(step, shard.X, shard.y))


def stats(shard: Shard) -> tuple[int, Array, Array]:
    """Rows, and the sums of the features and their squares (their standard deviations on the client)."""
    X = shard.X
    return X.shape[0], X.sum(0), (X * X).sum(0)
