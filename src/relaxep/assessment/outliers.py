r"""Rows a model finds surprising, from its leave-one-out predictive: the two criteria of
:meth:`LooResult.outliers <relaxep.assessment.LooResult.outliers>`.

**Tail probability** (the default).  Under the leave-one-out predictive :math:`p(y_i | y_{-i})`, the
probability of an outcome at least as surprising as the one observed:

* regression with symmetric additive noise (Gaussian, Student-t, Laplace; the observed rows of a Tobit):
  :math:`p_i = 2 P(Y \le m_i - |y_i - m_i|)`, :math:`m_i` the predictive's centre (the cavity mean), the
  predictive CDF :math:`\int F(q - f) N(f | h_i, \lambda_i) df` by the likelihood's two-centre rule;
* binary labels and a Tobit's censored rows: the leave-one-out probability of the observed outcome;
* ordinal labels and counts: the leave-one-out probability of the outcomes no more probable than the observed
  one (counts summed over :math:`0 \dots \max(3 y_i, y_i + 50)`).

A robust fit (Student-t) names its outliers this way: fitted without them, it would not have predicted them.

**Influence**: :math:`\log p(y_i | y) - \log p(y_i | y_{-i})`, each row's term of :math:`p_{loo}`, above a
threshold: the rows that pull the fit towards themselves.  A Gaussian fit's outliers are of this kind; a robust
fit's are not (it discounts them, so they move it little: measured in the user guide).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from relaxep._typing import Array
from relaxep.likelihoods import BinaryLikelihood, Likelihood, OrdinalProbit, Tobit
from relaxep.likelihoods.counts import CountLikelihood

__all__ = ["influence_outliers", "tail_outliers", "tail_probability"]

_COUNT_CHUNK = 200_000  # (row, count) pairs evaluated at once for the counts' sums


def tail_probability(likelihood: Likelihood | None, y: Array, mean: Array, var: Array, pointwise: Array) -> Array:
    r"""Each row's leave-one-out tail probability (module docstring).

    ``mean``, ``var``: the cavity (the leave-one-out posterior of the latent) in the likelihood's units; with
    ``likelihood`` ``None`` the leave-one-out predictive of ``y`` itself, Gaussian (exact regression; several
    outputs: the smallest tail times their number, at most 1).  ``pointwise``: :math:`\log p(y_i | y_{-i})`."""
    y, mean, var = np.asarray(y, dtype=float), np.asarray(mean, dtype=float), np.asarray(var, dtype=float)
    if hasattr(likelihood, "loo_tail") and not isinstance(likelihood, Likelihood):  # (a model's own predictive)
        return likelihood.loo_tail(y, mean, var, pointwise)  # type: ignore[union-attr]
    if likelihood is None:
        sd = np.sqrt(var if y.ndim == 1 else var.reshape(y.shape[0], 1))
        p = 2.0 * ndtr(-np.abs(y - mean.reshape(y.shape)) / sd)
        return p if p.ndim == 1 else np.minimum(1.0, p.shape[1] * p.min(axis=1))
    if isinstance(likelihood, BinaryLikelihood):
        return np.exp(np.asarray(pointwise, dtype=float))
    if isinstance(likelihood, OrdinalProbit):
        proba = likelihood.class_probabilities(mean, var)
        observed = proba[np.arange(y.shape[0]), y.astype(int)]
        return np.sum(np.where(proba <= observed[:, None], proba, 0.0), axis=1)
    if isinstance(likelihood, CountLikelihood):
        return _count_tail(likelihood, y, mean, var)
    if isinstance(likelihood, Tobit):
        values, codes = likelihood._split(np, y, mean)
        p = np.exp(np.asarray(pointwise, dtype=float))
        observed = codes == 0
        p[observed] = _symmetric_tail(likelihood, values[observed], mean[observed], var[observed])
        return p
    return _symmetric_tail(likelihood, y, mean, var)


def _symmetric_tail(likelihood: Likelihood, y: Array, mean: Array, var: Array) -> Array:
    """:math:`2 P(Y \\le m - |y - m|)` under :math:`\\int p(y | f) N(f | m, v) df`, additive symmetric noise."""
    q = mean - np.abs(y - mean)
    width = float(likelihood._noise().ppf(0.75))  # type: ignore[attr-defined]
    return np.minimum(1.0, 2.0 * likelihood._predictive_cdf(q, mean, np.maximum(var, 1e-300), width))


def _count_tail(likelihood: Likelihood, y: Array, mean: Array, var: Array) -> Array:
    """The leave-one-out probability of the counts no more probable than the observed one."""
    paired = y.ndim == 2
    count = y[:, 0] if paired else y
    offset = y[:, 1] if paired else np.zeros_like(count)
    observed = likelihood.log_z(y, mean, var, 1.0).log_z
    out = np.empty(count.shape[0])
    top = np.maximum(3.0 * count, count + 50.0).astype(int)
    rows = max(1, _COUNT_CHUNK // (int(top.max()) + 1))
    for start in range(0, count.shape[0], rows):
        sl = slice(start, start + rows)
        k = np.arange(int(top[sl].max()) + 1, dtype=float)
        grid = np.stack(np.broadcast_arrays(k[None, :], offset[sl, None]), axis=-1)
        log_p = likelihood.log_z(grid, mean[sl, None], var[sl, None], 1.0).log_z
        log_p = np.where(k[None, :] <= top[sl, None], log_p, -np.inf)
        out[sl] = np.sum(np.where(log_p <= observed[sl, None] + 1e-12, np.exp(log_p), 0.0), axis=1)
    return np.minimum(out, 1.0)


def tail_outliers(tail: Array, threshold: float) -> Array:
    """The rows whose tail probability is below ``threshold``, smallest first."""
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must lie in (0, 1) for criterion='tail', got {threshold!r}")
    rows = np.flatnonzero(tail < threshold)
    return rows[np.argsort(tail[rows], kind="stable")]


def influence_outliers(influence: Array, threshold: float) -> Array:
    """The rows whose influence (in-sample minus leave-one-out log density) is above ``threshold``, largest first."""
    rows = np.flatnonzero(influence > threshold)
    return rows[np.argsort(-influence[rows], kind="stable")]
