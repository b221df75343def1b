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
latents (:func:`~relaxep.likelihoods.multiclass.independent_log_proba`), as the model predicts a new row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from relaxep._typing import Array
from relaxep._xp import to_numpy
from relaxep.likelihoods.multiclass import independent_log_proba

__all__ = ["ClassTail", "joint_loo", "one_vs_rest_loo"]


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
    terms = [binary_terms(e) for e in model.estimators_]
    mean = np.column_stack([t.cavity_mean for t in terms])
    var = np.column_stack([t.cavity_var for t in terms])
    y = np.asarray(model.y).astype(int)
    rows = np.arange(y.shape[0])
    ok = np.all(np.isfinite(mean) & np.isfinite(var) & (var >= 0), axis=1)
    loo, proba = np.full(y.shape[0], np.nan), np.full(mean.shape, np.nan)
    if np.any(ok):
        proba[ok] = np.exp(independent_log_proba(mean[ok], var[ok]))
        loo[ok] = np.log(proba[ok, y[ok]])
    latent = [[to_numpy(a) for a in e.latent_mean_and_variance(model.X)] for e in model.estimators_]
    in_mean, in_var = np.column_stack([m for m, _ in latent]), np.column_stack([v for _, v in latent])
    in_sample = independent_log_proba(in_mean, np.maximum(in_var, 0.0))[rows, y]
    cov = var[:, :, None] * np.eye(mean.shape[1])
    improper = int(max(t.n_improper for t in terms)) + int(np.sum(~ok))
    return loo, in_sample, mean, cov, proba, improper
