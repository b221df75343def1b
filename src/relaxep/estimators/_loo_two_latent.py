r"""Leave-one-out of :class:`~relaxep.GPHeteroscedasticRegressor` from its two cavities, at no refit.

Two-latent EP's sites factorise, :math:`\tilde t_i(f_i)\,\tilde t_i(g_i)`, so removing site :math:`i` leaves the
product of the two one-latent cavities :math:`N(f_i | h^f_i, \lambda^f_i)\,N(g_i | h^g_i + c, \lambda^g_i)`
(:func:`~relaxep.posterior.base.cavity` of each posterior; :math:`c` the prior mean of :math:`g`), EP's
approximation of :math:`p(f_i, g_i | y_{-i})`, and the leave-one-out density is the tilted normaliser there,

.. math:: \log p(y_i | y_{-i}) \approx \log\iint N(y_i | f, e^g)\, N(f | h^f_i, \lambda^f_i)\,
          N(g | h^g_i + c, \lambda^g_i)\, df\, dg

(:func:`~relaxep.likelihoods.heteroscedastic.predictive_log_density`); the in-sample density is the same at the
posterior marginals.  With ``normalize_y`` the densities are less :math:`\log s`.  The predictive is symmetric
about :math:`h^f_i`, so a row's tail probability is :math:`2P(Y \le h^f_i - |y_i - h^f_i|)`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from relaxep._typing import Array
from relaxep.assessment.result import LooPrediction, LooResult, fingerprint
from relaxep.likelihoods.heteroscedastic import predictive_cdf, predictive_log_density
from relaxep.posterior.base import cavity, is_proper

__all__ = ["HeteroscedasticCavity", "heteroscedastic_loo", "heteroscedastic_loo_predict"]


class HeteroscedasticCavity:
    """The noise's leave-one-out posterior :math:`N(g_i | m_i, v_i)` per row, for the rows' tail probabilities
    (:meth:`LooResult.outliers <relaxep.assessment.LooResult.outliers>`)."""

    def __init__(self, mean_g: Array, var_g: Array) -> None:
        self.mean_g, self.var_g = mean_g, var_g

    def loo_tail(self, y: Array, mean_f: Array, var_f: Array) -> Array:
        r""":math:`2 P(Y \le h^f - |y - h^f|)` under the leave-one-out predictive (model units)."""
        q = mean_f - np.abs(y - mean_f)
        return np.minimum(1.0, 2.0 * predictive_cdf(q, mean_f, var_f, self.mean_g, self.var_g))


def _terms(estimator: Any) -> tuple[Array, ...]:
    check_is_fitted(estimator, "model_")
    result, offset = estimator.result_, float(estimator.noise_mean_)
    out = []
    for post in (result.posterior_f, result.posterior_g):
        mean, var = np.asarray(post.mean, dtype=float), np.asarray(post.marginal_var, dtype=float)
        h, lam = cavity(mean, var, np.asarray(post.site_precision), np.asarray(post.site_mean_precision), 1.0)
        out.append((mean, var, h, lam))
    (mf, af, hf, lf), (mg, ag, hg, lg) = out
    return mf, af, hf, lf, mg + offset, ag, hg + offset, lg


def heteroscedastic_loo(estimator: Any) -> LooResult:
    """``GPHeteroscedasticRegressor.loo()`` (module docstring)."""
    mf, af, hf, lf, mg, ag, hg, lg = _terms(estimator)
    y = np.asarray(estimator.model_.y, dtype=float)
    ok = is_proper(lf) & is_proper(lg)
    shift = float(np.log(estimator._y_std))
    loo = np.full(y.shape, np.nan)
    loo[ok] = predictive_log_density(y[ok], hf[ok], lf[ok], hg[ok], lg[ok]) - shift
    in_sample = predictive_log_density(y, mf, af, mg, ag) - shift
    rows = fingerprint(estimator.X_train_, estimator.y_train_ * estimator._y_std + estimator._y_mean)
    return LooResult(
        pointwise=loo, in_sample=np.asarray(in_sample, dtype=float), n_improper=int(np.sum(~ok)), fingerprint=rows,
        name=f"GPHeteroscedasticRegressor({estimator.kernel_}, noise {estimator.noise_kernel_})",
        loo_mean=np.where(ok, hf, np.nan), loo_var=np.where(ok, lf, np.nan),
        likelihood=HeteroscedasticCavity(np.where(ok, hg, np.nan), np.where(ok, lg, np.nan)), y=y,  # type: ignore[arg-type]
    )  # fmt: skip


def heteroscedastic_loo_predict(estimator: Any) -> LooPrediction:
    """``GPHeteroscedasticRegressor.loo_predict()``: the leave-one-out posterior of :math:`f_i`, in ``y``'s units."""
    _, _, hf, lf, *_ = _terms(estimator)
    s = float(estimator._y_std)
    return LooPrediction(mean=hf * s + float(estimator._y_mean), var=lf * s**2)
