r"""Leave-one-out of a fitted estimator, at no refit: what ``loo()`` and ``loo_predict()`` compute.

A one-latent model (EP, Power EP, fractional or Relaxed EP; dense or FITC) gives its cavities' densities
(:func:`~relaxep.inference.loo.cavity_loo`); exact Gaussian regression (``GPRegressor`` without a likelihood,
or with a Gaussian one and no rule) the closed form on :math:`K_y = K + \Sigma` (Rasmussen & Williams 2006,
eq. 5.12):

.. math::
    \mu_{-i} = y_i - \frac{[K_y^{-1}y]_i}{[K_y^{-1}]_{ii}},\qquad \sigma^2_{-i} = \frac{1}{[K_y^{-1}]_{ii}},\qquad
    \log p(y_i | y_{-i}) = -\tfrac12\log(2\pi\sigma^2_{-i}) - \frac{(y_i - \mu_{-i})^2}{2\sigma^2_{-i}},

and the in-sample density :math:`N(y_i | m_i, v_i + \Sigma_i)` at the model's latent predictive
:math:`(m_i, v_i)` at :math:`x_i` (without a ``WhiteKernel``: the posterior of :math:`f_i`, mean
:math:`y_i - \Sigma_i a_i` and variance :math:`\Sigma_i - \Sigma_i^2[K_y^{-1}]_{ii}`).  A regressor's values are
in the units of ``y`` as passed: with ``normalize_y`` (scale :math:`s`) the densities are less :math:`\log s` and
the latent's moments rescaled.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import lapack
from scipy.special import logsumexp
from sklearn.utils.validation import check_is_fitted

from relaxep._typing import Array
from relaxep._xp import to_numpy
from relaxep.assessment.result import LooPrediction, LooResult, fingerprint
from relaxep.estimators._exact import _ExactModel
from relaxep.estimators._loo_multiclass import ClassTail, fit_link_noise, joint_loo, one_vs_rest_loo
from relaxep.estimators._mixture import MixtureModel
from relaxep.estimators._models import _LatentModel, proba_of
from relaxep.estimators._multiclass_models import _JointModel, _OneVsRest
from relaxep.estimators._sparse_multiclass_model import _SparseJointModel
from relaxep.inference.loo import CavityLOO, cavity_loo
from relaxep.likelihoods import BinaryLikelihood, OrdinalProbit
from relaxep.likelihoods.counts import CountLikelihood

__all__ = ["estimator_loo", "estimator_loo_predict", "exact_loo", "one_vs_rest_link_noise"]

_LOG_2PI = np.log(2.0 * np.pi)


def exact_loo(L: Array, a: Array, y: Array, noise: Any, latent: tuple[Array, Array] | None = None) -> CavityLOO:
    r"""Closed-form leave-one-out of exact GP regression (module docstring) from the lower Cholesky factor ``L``
    of :math:`K_y`, :math:`a = K_y^{-1} y` and the noise :math:`\Sigma` (scalar or per row); several outputs
    (columns of ``y``): the densities summed per row, the means one column per output.  ``cavity_mean`` and
    ``cavity_var`` are the leave-one-out predictive of :math:`y_i` (not of :math:`f_i`).  ``latent``: the model's
    own predictive of the latent at the training inputs, for the in-sample densities (a ``WhiteKernel`` in the
    kernel is noise there, as in scikit-learn's predictions); default the posterior of :math:`f = y - \Sigma a`."""
    L = np.asarray(to_numpy(L), dtype=float)
    Y = np.asarray(to_numpy(y), dtype=float).reshape(L.shape[0], -1)
    A = np.asarray(to_numpy(a), dtype=float).reshape(Y.shape)
    l_inv, info = lapack.dtrtri(L, lower=1)  # [K_y^-1]_ii = ||column i of L^-1||^2
    if info != 0:  # pragma: no cover - L's diagonal is positive
        raise np.linalg.LinAlgError(f"dtrtri failed ({info})")
    d = np.einsum("ij,ij->j", l_inv, l_inv)
    s2 = 1.0 / d
    mu = Y - A / d[:, None]
    sigma = np.broadcast_to(np.asarray(noise, dtype=float), d.shape)
    if latent is None:
        mean_in, var_in = Y - sigma[:, None] * A, 2.0 * sigma - sigma**2 * d
    else:
        mean_in = np.asarray(to_numpy(latent[0]), dtype=float).reshape(Y.shape)
        var_in = np.asarray(to_numpy(latent[1]), dtype=float) + sigma
    loo = np.sum(_log_normal(Y, mu, s2[:, None]), axis=1)
    in_sample = np.sum(_log_normal(Y, mean_in, var_in[:, None]), axis=1)
    mean = mu[:, 0] if mu.shape[1] == 1 else mu
    return CavityLOO(loo=loo, in_sample=in_sample, cavity_mean=mean, cavity_var=s2, n_improper=0)


def _log_normal(y: Array, mean: Array, var: Array) -> Array:
    return -0.5 * (_LOG_2PI + np.log(var)) - 0.5 * (y - mean) ** 2 / var


def _refuse(estimator: Any, model: Any) -> None:
    kind = type(model).__name__
    what = {
        "InducingModel": "a model fitted on a Dask cluster (its training rows stay there)",
        "InducingBinaryModel": "a model fitted on a Dask cluster (its training rows stay there)",
        "HeteroscedasticModel": "this model (GPHeteroscedasticRegressor.loo() is its own)",
    }.get(kind, f"a model of kind {kind}")
    raise NotImplementedError(f"{type(estimator).__name__}.loo(): leave-one-out is not implemented for {what} yet")


def _terms(estimator: Any) -> tuple[CavityLOO, Any]:
    """The leave-one-out terms in the model's units, and the model (an integrated fit's: the mixture's terms,
    :func:`mixture_loo`, and the MAP point's model)."""
    check_is_fitted(estimator, "model_")  # (a regressor predicts from its prior unfitted: model_ is the test)
    model = estimator.model_
    if isinstance(model, MixtureModel):
        terms, _ = mixture_loo([_model_terms(estimator, m) for m in model.models], model.weights)
        return terms, model.map_model
    return _model_terms(estimator, model), model


def _model_terms(estimator: Any, model: Any) -> CavityLOO:
    """One fitted model's leave-one-out terms."""
    if isinstance(model, _ExactModel):
        latent = model.predict_latent(model.X, full_cov=False)
        return exact_loo(model.L_, model.alpha_, model.y, model._noise(model.likelihood), latent)
    if not isinstance(model, _LatentModel):
        _refuse(estimator, model)
    r = model.result_
    return cavity_loo(r.mean, r.marginal_var, r.site_precision, r.site_mean_precision, model.y, model.likelihood)


def mixture_loo(terms: list[CavityLOO], weights: Array) -> tuple[CavityLOO, Array]:
    r"""Leave-one-out of a mixture over the hyperparameters from its points' own, :math:`p_{ik} = p(y_i | y_{-i},
    \theta_k)`: the posterior of :math:`\theta` given :math:`y_{-i}` is the full one reweighted by
    :math:`1/p(y_i | y_{-i}, \theta_k)` (importance sampling; Vehtari, Mononen, Tolvanen, Sivula & Winther 2016,
    "Bayesian leave-one-out cross-validation approximations for Gaussian latent variable models", JMLR 17,
    section 3.5), so

    .. math::
        p(y_i | y_{-i}) = \Big(\sum_k rac{w_k}{p_{ik}}\Big)^{-1},\qquad
        w_{ik} = rac{w_k / p_{ik}}{\sum_j w_j / p_{ij}},

    in log space (``logsumexp``).  The in-sample density is the mixture's, :math:`\sum_k w_k p(y_i | y, \theta_k)`;
    the leave-one-out latent's moments are those of the :math:`w_{ik}`-mixture of the points' cavities.  Returns
    the terms and the weights :math:`w_{ik}`, shape ``(n, K)``.
    """
    with np.errstate(divide="ignore"):
        log_w = np.log(np.asarray(weights, dtype=float))
    loo = np.stack([t.loo for t in terms], axis=1)  # (n, K)
    inverse = log_w - loo
    log_norm = logsumexp(inverse, axis=1)
    w_ik = np.exp(inverse - log_norm[:, None])
    in_sample = logsumexp(log_w + np.stack([t.in_sample for t in terms], axis=1), axis=1)
    means = np.stack([t.cavity_mean for t in terms], axis=1)
    second = np.stack([t.cavity_var + t.cavity_mean**2 for t in terms], axis=1)
    mean = np.sum(w_ik * means, axis=1)
    var = np.maximum(np.sum(w_ik * second, axis=1) - mean**2, 0.0)
    improper = max(t.n_improper for t in terms)
    return CavityLOO(loo=-log_norm, in_sample=in_sample, cavity_mean=mean, cavity_var=var, n_improper=improper), w_ik


def _y_scale(estimator: Any) -> tuple[float, float]:
    """A regressor's ``normalize_y`` mean and scale of its (one) output (0 and 1 otherwise, or several outputs:
    their log scales summed into the scale's log)."""
    std = getattr(estimator, "_y_train_std", None)
    if std is None:
        return 0.0, 1.0
    std, mean = np.atleast_1d(np.asarray(std, dtype=float)), np.atleast_1d(getattr(estimator, "_y_train_mean", 0.0))
    return float(mean[0]), float(np.exp(np.sum(np.log(std))))


def _rows(estimator: Any, model: Any) -> str:
    """The fingerprint of the rows as the user passed them (labels as class indices, ``y`` unnormalised)."""
    X = getattr(estimator, "X_train_", getattr(model, "X", None))
    X = to_numpy(X) if hasattr(X, "__dlpack__") else None  # (another library's rows hash as numpy's)
    comparisons = getattr(estimator, "comparisons_", None)
    if comparisons is not None:
        return fingerprint(X, comparisons)
    if hasattr(estimator, "classes_"):
        y = np.asarray(to_numpy(model.y), dtype=float)
        binary = isinstance(getattr(model, "likelihood", None), BinaryLikelihood)  # (one-vs-rest: class indices)
        return fingerprint(X, (y > 0).astype(float) if binary else y)
    y = np.asarray(to_numpy(estimator.y_train_), dtype=float)
    if getattr(estimator, "_y_train_std", None) is not None:
        y = y * np.asarray(estimator._y_train_std, dtype=float) + np.asarray(estimator._y_train_mean, dtype=float)
    return fingerprint(X, y)


def _joint(estimator: Any) -> bool:
    """Whether the estimator is multi-class, a joint or a one-vs-rest model."""
    check_is_fitted(estimator, "model_")
    return isinstance(estimator.model_, _JointModel | _SparseJointModel | _OneVsRest)


def _multiclass_loo(model: Any) -> tuple[Array, Array, Array, Array, Array, int]:
    if isinstance(model, _OneVsRest):
        return one_vs_rest_loo(model, lambda binary: _terms(binary)[0])
    return joint_loo(model)  # (the same cavities, dense or low-rank)


def one_vs_rest_link_noise(model: _OneVsRest) -> float:
    """The one-vs-rest link's noise by the leave-one-out predictive of its binary models' cavities
    (:func:`~relaxep.estimators._loo_multiclass.fit_link_noise`)."""
    return fit_link_noise(model, lambda binary: _terms(binary)[0])


def estimator_loo(estimator: Any) -> LooResult:
    """``estimator.loo()``: the :class:`~relaxep.assessment.LooResult` of a fitted one-latent estimator, or of a
    multi-class model, joint or one-vs-rest (:mod:`relaxep.estimators._loo_multiclass`)."""
    if _joint(estimator):
        model = estimator.model_
        loo, in_sample, mean, cov, proba, improper = _multiclass_loo(model)
        return LooResult(
            pointwise=loo, in_sample=in_sample, n_improper=improper, fingerprint=_rows(estimator, model),
            name=_describe(estimator, model), loo_mean=mean, loo_var=cov, likelihood=ClassTail(proba, loo),  # type: ignore[arg-type]
            y=np.asarray(model.y),
        )  # fmt: skip
    terms, model = _terms(estimator)
    _, scale = _y_scale(estimator)
    shift = np.log(scale) if model.likelihood is None or _continuous(model.likelihood) else 0.0
    return LooResult(
        pointwise=terms.loo - shift, in_sample=terms.in_sample - shift, n_improper=terms.n_improper,
        fingerprint=_rows(estimator, model), name=_describe(estimator, model), loo_mean=terms.cavity_mean,
        loo_var=terms.cavity_var, likelihood=model.likelihood if not isinstance(model, _ExactModel) else None,
        y=np.asarray(to_numpy(model.y)),
    )  # fmt: skip


def _continuous(likelihood: Any) -> bool:
    """Whether the likelihood is a density in ``y`` (rescaled with ``normalize_y``), not a probability."""
    return not isinstance(likelihood, BinaryLikelihood | OrdinalProbit | CountLikelihood)


def _describe(estimator: Any, model: Any) -> str:
    likelihood = getattr(model, "likelihood", None)
    kernel = getattr(estimator, "kernel_", None)
    return f"{type(estimator).__name__}({'exact Gaussian' if likelihood is None else likelihood!r}, {kernel})"


def estimator_loo_predict(estimator: Any) -> LooPrediction:
    """``estimator.loo_predict()``: the latent's leave-one-out posterior and, for classifiers, class probabilities
    (joint multi-class: the cavities' means ``(n, C)`` and covariances ``(n, C, C)``; an integrated fit: the
    :func:`mixture_loo` weights' mixture of its points')."""
    if _joint(estimator):
        _, _, mean, cov, proba, _ = _multiclass_loo(estimator.model_)
        return LooPrediction(mean=mean, var=cov, proba=proba, classes=estimator.classes_)
    model = estimator.model_
    if isinstance(model, MixtureModel):
        terms = [_model_terms(estimator, m) for m in model.models]
        _, w_ik = mixture_loo(terms, model.weights)
        points = [_point_loo(estimator, m, t) for m, t in zip(model.models, terms, strict=True)]
        mean = np.sum(w_ik * np.stack([p[0] for p in points], axis=1), axis=1)
        second = np.sum(w_ik * np.stack([p[1] + p[0] ** 2 for p in points], axis=1), axis=1)
        var = np.maximum(second - mean**2, 0.0)
        proba = None if points[0][2] is None else np.einsum("ik,kic->ic", w_ik, np.stack([p[2] for p in points]))
    else:
        mean, var, proba = _point_loo(estimator, model, _model_terms(estimator, model))
    if not hasattr(estimator, "classes_"):
        std = np.asarray(getattr(estimator, "_y_train_std", 1.0), dtype=float)
        centre = np.asarray(getattr(estimator, "_y_train_mean", 0.0), dtype=float)
        if np.ndim(mean) == 1:
            std, centre = std.reshape(-1)[0], centre.reshape(-1)[0]
        else:  # several outputs: one column each
            var = var[:, None]
        return LooPrediction(mean=mean * std + centre, var=var * std**2)
    return LooPrediction(mean=mean, var=var, proba=proba, classes=estimator.classes_)


def _point_loo(estimator: Any, model: Any, terms: CavityLOO) -> tuple[Array, Array, Array | None]:
    """One fitted model's leave-one-out latent mean and variance (model units) and a classifier's probabilities."""
    mean, var = terms.cavity_mean, terms.cavity_var
    if isinstance(model, _ExactModel):  # (the closed form's moments are of y: the latent's lack the noise)
        var = var - np.broadcast_to(np.asarray(model._noise(model.likelihood), dtype=float), var.shape)
    if not hasattr(estimator, "classes_"):
        return mean, var, None
    likelihood = model.likelihood
    if isinstance(likelihood, BinaryLikelihood):
        return mean, var, proba_of(likelihood.predict_log_odds(mean, np.maximum(var, 1e-300)))
    return mean, var, likelihood.class_probabilities(mean, np.maximum(var, 0.0))
