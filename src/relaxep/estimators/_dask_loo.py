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
prior rows are let go).  ``loo()`` maps :func:`shard_loo` over them and gathers per-row vectors in shard order:
:math:`O(n)` traffic, never the rows.  The fingerprint is the one-process estimator's on the same rows
(:func:`~relaxep.assessment.result.rows_fingerprint`), so :func:`~relaxep.compare` compares the two fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from relaxep._typing import Array
from relaxep.assessment.result import LooPrediction, LooResult, row_hashes, rows_fingerprint
from relaxep.estimators._loo import _continuous
from relaxep.estimators._models import proba_of
from relaxep.inference.loo import CavityLOO, cavity_loo
from relaxep.inference.sharded import gather_in_order
from relaxep.inference.shards import Shard
from relaxep.likelihoods import Likelihood

__all__ = ["ShardRows", "dask_loo", "dask_loo_predict", "keep_rows", "shard_loo"]


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


def _gathered(estimator: Any) -> tuple[CavityLOO, Array, str]:
    """The leave-one-out terms of a fitted Dask estimator (model units), its targets and the rows' fingerprint."""
    futures = estimator._loo_rows()
    client = estimator._client()
    mapped = [client.submit(shard_loo, f, estimator.likelihood_, pure=False) for f in futures]
    parts = gather_in_order(client, mapped, estimator.timeout)
    loo, in_sample, h, lam, y = (np.concatenate([p[k] for p in parts]) for k in range(5))
    terms = CavityLOO(loo, in_sample, h, lam, sum(p[7] for p in parts))
    shape = (sum(p[6][0] for p in parts), parts[0][6][1])
    hashes = np.concatenate([p[5] for p in parts])
    return terms, y, rows_fingerprint((shape, hashes), _user_y(estimator, y))


def _user_y(estimator: Any, y: Array) -> Array:
    """The targets as the one-process estimator fingerprints them: class indices, ``y`` unnormalised (a count's,
    without its log exposure), or a survival model's rows as they are."""
    if hasattr(estimator, "classes_"):
        return (y > 0).astype(float)
    if not hasattr(estimator, "_y_train_std"):
        return y
    y = y[:, 0] if y.ndim == 2 else y
    return y * estimator._y_train_std + estimator._y_train_mean


def dask_loo(estimator: Any) -> LooResult:
    """``loo()`` of a fitted Dask estimator: the one-process estimator's :class:`~relaxep.assessment.LooResult` on
    the same rows (``pointwise`` in the units of ``y`` as passed)."""
    terms, y, rows = _gathered(estimator)
    likelihood = estimator.likelihood_
    std = getattr(estimator, "_y_train_std", 1.0)
    shift = np.log(std) if not hasattr(estimator, "classes_") and _continuous(likelihood) else 0.0
    return LooResult(
        pointwise=terms.loo - shift, in_sample=terms.in_sample - shift, n_improper=terms.n_improper,
        fingerprint=rows, name=f"{type(estimator).__name__}({likelihood!r}, {estimator.kernel_})",
        loo_mean=terms.cavity_mean, loo_var=terms.cavity_var, likelihood=likelihood, y=y,
    )  # fmt: skip


def dask_loo_predict(estimator: Any) -> LooPrediction:
    """``loo_predict()`` of a fitted Dask estimator: the latent's leave-one-out posterior (a regressor's in the units
    of ``y``) and, for the classifier, the leave-one-out class probabilities."""
    terms, _, _ = _gathered(estimator)
    mean, var = terms.cavity_mean, terms.cavity_var
    if not hasattr(estimator, "classes_"):
        std, centre = getattr(estimator, "_y_train_std", 1.0), getattr(estimator, "_y_train_mean", 0.0)
        return LooPrediction(mean=mean * std + centre, var=var * std**2)
    proba = proba_of(estimator.likelihood_.predict_log_odds(mean, np.maximum(var, 1e-300)))
    return LooPrediction(mean=mean, var=var, proba=proba, classes=estimator.classes_)
