r"""Leave-one-out of the joint multi-class model (``GPClassifier``, more than two classes, ``multi_class="joint"``) from
its :math:`C`-dimensional cavities, at no refit.

Nested EP (multinomial probit) has one Gaussian site per row on the :math:`C` latents :math:`f_i`, so the cavity
:math:`N(f_i | m_i, \Lambda_i^{-1})`, :math:`\Lambda_i = \Sigma_i^{-1} - \Pi_i`, is EP's approximation of
:math:`p(f_i | y_{-i})` and :math:`\log p(y_i | y_{-i}) \approx \log\int p(y_i | f) N(f | m_i, \Lambda_i^{-1}) df`,
the tilted normaliser (by the inner EP, as the fit computes it; Riihimaki, Jylanki & Vehtari 2013). The robust max
(sites on :math:`w_i`, the margins of the observed class) is refused for now. The in-sample densities are the same
at the posterior marginals. The leave-one-out class probabilities (nested EP) are the likelihood's predictive at the
cavity.

One-vs-rest (``multi_class="one_vs_rest"``): each binary model's cavity :math:`N(m_{-i,c}, v_{-i,c})` is its
leave-one-out latent, and the label's leave-one-out predictive is the multinomial probit of those ``C`` independent
latents (:func:`~relaxep.likelihoods.multiclass.independent_log_proba`) at the link's noise :math:`\tau`, as the
model predicts a new row; :func:`fit_link_noise` chooses :math:`\tau` by that leave-one-out predictive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar

from relaxep._typing import Array
from relaxep._xp import to_numpy
from relaxep.likelihoods.multiclass import independent_log_proba

__all__ = ["LINK_NOISE_BOUNDS", "ClassTail", "fit_link_noise", "joint_loo", "one_vs_rest_loo"]

#: the one-vs-rest link's noise :math:`\tau` is searched in these bounds (a log-uniform interval)
LINK_NOISE_BOUNDS = (0.01, 10.0)
#: rows the link's noise is fitted on (evenly spaced where there are more): a scalar, a few thousand rows fix it
LINK_NOISE_ROWS = 1000


class ClassTail:
    """Each row's leave-one-out probability of the classes no more probable than the observed one."""

    def __init__(self, proba: Array, pointwise: Array) -> None:
        self.proba, self.pointwise = proba, pointwise

    def loo_tail(self, y: Array, mean: Any, var: Any) -> Array:
        observed = self.proba[np.arange(y.shape[0]), y.astype(int)]
        return np.sum(np.where(self.proba <= observed[:, None] * (1 + 1e-12), self.proba, 0.0), axis=1)


def joint_loo(model: Any) -> tuple[Array, Array, Array, Array, Array, int]:
    """``(loo, in_sample, cavity mean, cavity covariance, LOO class probabilities, improper count)``."""
    result, likelihood = model.result_, model.likelihood
    post = result.posterior
    y = np.asarray(model.y).astype(int)
    mean, cov, ok = post.cavities()
    loo = np.full(y.shape[0], np.nan)
    if hasattr(post, "w_mean"):
        raise NotImplementedError(
            "GPClassifier.loo(): leave-one-out is not implemented for the robust max likelihood yet (its sites live "
            "on the margins w of the observed class; not yet checked against refits); MultinomialProbit's is"
        )
    proba = np.full((y.shape[0], model.n_classes), np.nan)
    if np.any(ok):
        loo[ok] = likelihood.tilted_moments(mean[ok], cov[ok], y[ok])[0]
        proba[ok] = likelihood.predict_proba(mean[ok], cov[ok])
    in_sample = likelihood.tilted_moments(result.mean, result.cov, y)[0]
    return loo, np.asarray(in_sample, dtype=float), mean, cov, proba, int(np.sum(~ok))


def one_vs_rest_loo(model: Any, binary_terms: Any) -> tuple[Array, Array, Array, Array, Array, int]:
    """``(loo, in_sample, cavity means (n, C), cavity covariances (n, C, C) (diagonal), LOO class probabilities,
    improper count)`` of a one-vs-rest model from ``binary_terms(estimator)``, each binary model's
    :class:`~relaxep.inference.loo.CavityLOO`."""
    mean, var, ok, improper = _cavities(model, binary_terms)
    y = np.asarray(model.y).astype(int)
    rows = np.arange(y.shape[0])
    loo, proba = np.full(y.shape[0], np.nan), np.full(mean.shape, np.nan)
    if np.any(ok):
        proba[ok] = np.exp(independent_log_proba(mean[ok], var[ok], model.link_noise_))
        loo[ok] = np.log(proba[ok, y[ok]])
    in_sample = model.decision_function(model.X)[rows, y]
    cov = var[:, :, None] * np.eye(mean.shape[1])
    return loo, in_sample, mean, cov, proba, improper + int(np.sum(~ok))


def _cavities(model: Any, binary_terms: Callable[[Any], Any]) -> tuple[Array, Array, Array, int]:
    """The binary models' cavities, ``(n, C)`` means and variances, the rows where all are proper, and the
    binary models' largest count of improper ones."""
    terms = [binary_terms(e) for e in model.estimators_]
    mean = np.column_stack([to_numpy(t.cavity_mean) for t in terms])
    var = np.column_stack([to_numpy(t.cavity_var) for t in terms])
    ok = np.all(np.isfinite(mean) & np.isfinite(var) & (var >= 0), axis=1)
    return mean, var, ok, int(max(t.n_improper for t in terms))


def fit_link_noise(model: Any, binary_terms: Callable[[Any], Any]) -> float:
    r"""The one-vs-rest link's noise: :math:`\tau` maximising the mean leave-one-out log predictive
    :math:`\frac1n \sum_i \log p_\tau(y_i | y_{-i})`, the multinomial probit of the binary models' cavities with
    :math:`y = \arg\max_c (f_c + \tau e_c)` (:func:`independent_log_proba` with ``noise`` :math:`\tau`),
    within :data:`LINK_NOISE_BOUNDS`, on at most :data:`LINK_NOISE_ROWS` rows.  One scalar chosen by the
    leave-one-out predictive, as stacking chooses weights (Yao, Vehtari, Simpson & Gelman 2018, Bayesian
    Analysis 13); EP's cavities give it at no refit.  ``1.0`` where no row has proper cavities."""
    mean, var, ok, _ = _cavities(model, binary_terms)
    y = np.asarray(model.y).astype(int)
    rows = np.flatnonzero(ok)
    if rows.size == 0:
        return 1.0
    rows = rows[np.linspace(0, rows.size - 1, min(rows.size, LINK_NOISE_ROWS)).astype(int)]
    m, v, labels = mean[rows], var[rows], y[rows]

    def minus_loo(log_tau: float) -> float:
        return -float(np.mean(independent_log_proba(m, v, np.exp(log_tau))[np.arange(rows.size), labels]))

    low, high = np.log(LINK_NOISE_BOUNDS)
    res = minimize_scalar(minus_loo, bounds=(low, high), method="bounded", options={"xatol": 1e-2})
    return float(np.exp(res.x))
