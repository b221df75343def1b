r"""Leave-one-out of the joint multi-class model (``GPClassifier``, more than two classes, ``multi_class="joint"``) from
its :math:`C`-dimensional cavities, at no refit.

Nested EP (multinomial probit) has one Gaussian site per row on the :math:`C` latents :math:`f_i`, so the cavity
:math:`N(f_i | m_i, \Lambda_i^{-1})`, :math:`\Lambda_i = \Sigma_i^{-1} - \Pi_i`, is EP's approximation of
:math:`p(f_i | y_{-i})` and :math:`\log p(y_i | y_{-i}) \approx \log\int p(y_i | f) N(f | m_i, \Lambda_i^{-1}) df`,
the tilted normaliser (by the inner EP, as the fit computes it; Riihimaki, Jylanki & Vehtari 2013). The robust max
(sites on :math:`w_i`, the margins of the observed class) is refused for now. The in-sample densities are the same
at the posterior marginals. The leave-one-out class probabilities (nested EP) are the likelihood's predictive at the
cavity.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from relaxep._typing import Array

__all__ = ["ClassTail", "joint_loo"]


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
