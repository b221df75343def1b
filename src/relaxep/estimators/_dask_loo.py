r"""Leave-one-out of a Dask fit, from the cavities on its shards: what the Dask estimators' ``loo()`` and
``loo_predict()`` compute.

The terms are those of the one-process estimator (:func:`~relaxep.inference.loo.cavity_loo`): on each shard, the
full cavity of each of its sites, :math:`\lambda_i = (1/A_{ii} - \tau_i)^{-1}`,
:math:`h_i = \lambda_i(\mu_i/A_{ii} - \nu_i)`, from its rows' FITC marginals :math:`(\mu_i, A_{ii})` (those the
final sweep computed from the broadcast factor, ``result_``'s :math:`L_B^{-1}` and :math:`m`), and

.. math::
    \log p(y_i | y_{-i}) \approx \log\int p(y_i | f)\, N(f | h_i, \lambda_i)\, df, \qquad
    \log p(y_i | y) \approx \log\int p(y_i | f)\, N(f | \mu_i, A_{ii})\, df.

At the end of the fit one map keeps, on each shard, what these need (:class:`ShardRows`: the targets, sites,
marginals and the rows' :func:`~relaxep.assessment.result.row_hashes`, :math:`O(n)` numbers; the shard's inputs and
prior rows are let go).  ``loo()`` maps :func:`shard_loo` over them and gathers per-row vectors in shard order
(:func:`gather_loo`):
:math:`O(n)` traffic, never the rows.  The fingerprint is the one-process estimator's on the same rows
(:func:`~relaxep.assessment.result.rows_fingerprint`), so :func:`~relaxep.compare` compares the two fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from relaxep._typing import Array
from relaxep.assessment.result import row_hashes
from relaxep.estimators._model import LooTerms
from relaxep.inference.loo import cavity_loo
from relaxep.inference.sharded import gather_in_order
from relaxep.inference.shards import Shard
from relaxep.likelihoods import Likelihood

__all__ = ["ShardRows", "gather_loo", "keep_rows", "shard_loo"]


@dataclass(frozen=True)
class ShardRows:
    """What a shard keeps for leave-one-out after the fit (module docstring)."""

    #: the likelihood's targets (labels in -1/+1, normalised targets, or rows of a count and its log exposure)
    y: Array
    #: the sites and the marginals :math:`(\mu, A_{ii})` of the fitted posterior
    tau: Array
    nu: Array
    mean: Array
    var: Array
    #: the rows' hashes and the shard's shape of ``X`` (the fingerprint's share)
    hashes: Array
    shape: tuple[int, int]


def keep_rows(shard: Shard) -> ShardRows:
    """The map at the end of the fit: the shard's targets, sites and marginals after the final sweep (computed from
    the broadcast factor), and its rows' hashes."""
    if shard.prev is None:  # pragma: no cover - every run sweeps once at least
        raise RuntimeError("keep_rows: the shard has no marginals (no sweep ran)")
    mean, var = shard.prev
    return ShardRows(shard.y, shard.tau, shard.nu, mean, var, row_hashes(shard.X), shard.X.shape)


def shard_loo(rows: ShardRows, likelihood: Likelihood) -> tuple[Array, ...]:
    """The map of ``loo()``: :func:`cavity_loo` on the shard's rows; back come per-row vectors only (the
    leave-one-out and in-sample densities, the cavities' means and variances, the targets, the rows' hashes) and
    the shard's shape and count of improper cavities."""
    t = cavity_loo(rows.mean, rows.var, rows.tau, rows.nu, rows.y, likelihood)
    return t.loo, t.in_sample, t.cavity_mean, t.cavity_var, rows.y, rows.hashes, rows.shape, t.n_improper


def gather_loo(
    futures: list, client: Any, likelihood: Likelihood, timeout: float | None
) -> tuple[LooTerms, tuple, Array]:
    """The map of ``loo()`` over the shards' kept rows (:func:`shard_loo`), gathered in shard order: the
    leave-one-out terms (model units), the shape of ``X`` and the rows' hashes (the fingerprint's share)."""
    mapped = [client.submit(shard_loo, f, likelihood, pure=False) for f in futures]
    parts = gather_in_order(client, mapped, timeout)
    loo, in_sample, h, lam, y = (np.concatenate([p[k] for p in parts]) for k in range(5))
    improper = sum(p[7] for p in parts)
    terms = LooTerms(loo, in_sample, h, lam, improper, y, tail=likelihood, is_density=likelihood.is_density)
    shape = (sum(p[6][0] for p in parts), parts[0][6][1])
    return terms, shape, np.concatenate([p[5] for p in parts])
