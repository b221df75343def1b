r"""Rows a model finds surprising, from its leave-one-out predictive: the two criteria of
:meth:`LooResult.outliers <relaxep.assessment.LooResult.outliers>`.

**Tail probability** (the default).  Under the leave-one-out predictive :math:`p(y_i | y_{-i})`, the
probability of an outcome at least as surprising as the one observed; each likelihood answers for its own
(:meth:`Likelihood.loo_tail <relaxep.likelihoods.Likelihood.loo_tail>`):

* regression with symmetric additive noise (Gaussian, Student-t, Laplace; the observed rows of a Tobit):
  :math:`p_i = 2 P(Y \le m_i - |y_i - m_i|)`, :math:`m_i` the predictive's centre (the cavity mean), the
  predictive CDF :math:`\int F(q - f) N(f | h_i, \lambda_i) df` by the likelihood's two-centre rule;
* binary labels and a Tobit's censored rows: the leave-one-out probability of the observed outcome;
* ordinal and multi-class labels and counts: the leave-one-out probability of the outcomes no more probable than
  the observed one (counts summed over :math:`0 \dots \max(3 y_i, y_i + 50)`);
* event times: both tails of the leave-one-out predictive of :math:`T`, :math:`2\min(S_i, 1 - S_i)`; a censored
  time the leave-one-out probability of its interval.

A robust fit (Student-t) names its outliers this way: fitted without them, it would not have predicted them.

**Influence**: :math:`\log p(y_i | y) - \log p(y_i | y_{-i})`, each row's term of :math:`p_{loo}`, above a
threshold: the rows that pull the fit towards themselves.  A Gaussian fit's outliers are of this kind; a robust
fit's are not (it discounts them, so they move it little: measured in the user guide).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from relaxep._typing import Array
from relaxep.likelihoods import Likelihood

__all__ = ["influence_outliers", "tail_outliers", "tail_probability"]


def tail_probability(likelihood: Likelihood | None, y: Array, mean: Array, var: Array, pointwise: Array) -> Array:
    r"""Each row's leave-one-out tail probability (module docstring): the likelihood's own
    (:meth:`Likelihood.loo_tail <relaxep.likelihoods.Likelihood.loo_tail>`), or for exact Gaussian regression
    (``likelihood`` ``None``) the Gaussian closed form :math:`2\Phi(-|y_i - m_i| / s_i)`.

    ``mean``, ``var``: the cavity (the leave-one-out posterior of the latent) in the likelihood's units; with
    ``likelihood`` ``None`` the leave-one-out predictive of ``y`` itself, Gaussian (several outputs: the smallest
    tail times their number, at most 1).  ``pointwise``: :math:`\log p(y_i | y_{-i})`.  ``likelihood`` may be any
    object with the same ``loo_tail(y, mean, var, pointwise)`` (a model's own predictive)."""
    y, mean, var = np.asarray(y, dtype=float), np.asarray(mean, dtype=float), np.asarray(var, dtype=float)
    if likelihood is None:
        sd = np.sqrt(var if y.ndim == 1 else var.reshape(y.shape[0], 1))
        p = 2.0 * ndtr(-np.abs(y - mean.reshape(y.shape)) / sd)
        return p if p.ndim == 1 else np.minimum(1.0, p.shape[1] * p.min(axis=1))
    return likelihood.loo_tail(y, mean, var, pointwise)


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
