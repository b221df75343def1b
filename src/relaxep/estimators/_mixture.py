r"""The fitted model of an estimator whose hyperparameters are integrated out: a finite mixture over :math:`\theta`.

With design points :math:`\theta_k` and weights :math:`w_k` (:mod:`relaxep.estimators._integrate`, from a CCD or a
grid; Rue, Martino & Chopin 2009, section 6.5) every predictive is the mixture of the points' own,

.. math::
    p(y_* | y) \approx \sum_k w_k\, p(y_* | y, \theta_k),

each :math:`p(y_* | y, \theta_k)` the EP (or closed-form) predictive of the model fitted at :math:`\theta_k`.  The
latent's mean and variance are the mixture's, :math:`m = \sum_k w_k m_k`, :math:`v = \sum_k w_k (v_k + m_k^2) -
m^2` (total variance); class probabilities are mixed in log space (``logsumexp``); a regressor's target predictive
mixes the points' densities, its central interval the quantiles of the mixture's distribution function (Newton's
method safeguarded by bisection between the points' own quantiles, which bracket them).  :class:`MixtureModel`
answers as the estimators' ``model_`` does; what the estimator's epilogue and ``log_marginal_likelihood`` read
(``kernel_``, ``likelihood``, ``result_``, ``Z``, ``X``, ``y``, ``log_evidence``) are the MAP point's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.special import log_expit

from relaxep._numerics import logsumexp
from relaxep._typing import Array
from relaxep._xp import to_numpy
from relaxep.estimators._model import LooTerms
from relaxep.likelihoods import Likelihood

__all__ = ["HyperSamples", "MixtureModel", "mixture_interval", "mixture_log_density", "mixture_loo", "mixture_moments"]

#: the most Newton or bisection steps of the mixture's quantiles (bisection alone: the bracket shrinks by 2**-60)
_BISECTIONS = 60


@dataclass(frozen=True)
class HyperSamples:
    """The design over the hyperparameters that an integrated fit averaged over (``hyper_samples_``).

    Attributes
    ----------
    points : ndarray of shape (K, n_theta)
        :math:`\\theta_k`, the log-hyperparameters (the kernel's ``theta``, then the likelihood's), the MAP first.
    weights : ndarray of shape (K,)
        :math:`w_k`, non-negative, summing to 1.
    names : tuple of str
        Each column's hyperparameter (``"k2__length_scale"``; an ARD one's elements as ``"length_scale[0]"``).
    log_posterior : ndarray of shape (K,)
        :math:`\\log p(y | \\theta_k) + \\log p(\\theta_k)`: the (EP) log evidence plus the log prior, unnormalised.
    """

    points: Array
    weights: Array
    names: tuple[str, ...]
    log_posterior: Array


def _latent(model: Any, X: Any, full_cov: bool = False) -> tuple[Array, Array]:
    """One point's latent mean and variances (or covariance) at ``X``, on the host."""
    out = model.predict_latent(X, full_cov)
    return tuple(np.asarray(to_numpy(a), dtype=float) for a in out)  # type: ignore[return-value]


class MixtureModel:
    """The mixture of the fitted point models ``models`` with ``weights`` (module docstring); ``models[0]`` is the
    MAP's, whose attributes the estimator stores (its ``kernel_``, ``likelihood_``, ``result_``, evidence)."""

    def __init__(self, models: Sequence[Any], weights: Array, samples: HyperSamples) -> None:
        self.models = list(models)
        self.weights = np.asarray(weights, dtype=float)
        self.samples = samples
        self.map_model = self.models[0]
        with np.errstate(divide="ignore"):
            self.log_weights = np.log(self.weights)

    # --------------------------------------------------------- the MAP point's, for the estimator
    def __getattr__(self, name: str) -> Any:
        """What the epilogue, ``loo`` and ``log_marginal_likelihood`` read (``kernel_``, ``likelihood``, ``result_``,
        ``Z``, ``X``, ``y``, ``L_``, ``log_evidence``...): the MAP point model's."""
        if name.startswith("__") or name in ("models", "map_model"):
            raise AttributeError(name)
        return getattr(self.map_model, name)

    # --------------------------------------------------------- latent
    def predict_latent(self, X: Any, full_cov: bool = False) -> tuple[Array, Array]:
        r"""The mixture's latent mean :math:`\sum_k w_k m_k` and total variance :math:`\sum_k w_k (v_k + m_k^2) -
        m^2` (``full_cov``: the covariance :math:`\sum_k w_k (C_k + m_k m_k^\top) - m m^\top`)."""
        parts = [_latent(model, X, full_cov) for model in self.models]
        mean = sum(w * m for w, (m, _) in zip(self.weights, parts, strict=True))
        if full_cov:
            second = sum(w * (c + np.outer(m, m)) for w, (m, c) in zip(self.weights, parts, strict=True))
            return mean, second - np.outer(mean, mean)
        second = sum(w * (v + m**2) for w, (m, v) in zip(self.weights, parts, strict=True))
        return mean, np.maximum(second - mean**2, 0.0)

    # --------------------------------------------------------- leave-one-out
    def loo_terms(self) -> LooTerms:
        """The mixture's leave-one-out terms from its points' (:func:`mixture_loo`); the latent's leave-one-out
        posterior and a classifier's probabilities are the :math:`w_{ik}`-mixtures of the points' own."""
        terms = [model.loo_terms() for model in self.models]
        mixed, w_ik = mixture_loo(terms, self.weights)
        means = np.stack([t.latent[0] for t in terms], axis=1)
        second = np.stack([t.latent[1] + t.latent[0] ** 2 for t in terms], axis=1)
        mean = np.sum(w_ik * means, axis=1)
        var = np.maximum(np.sum(w_ik * second, axis=1) - mean**2, 0.0)
        proba = None if terms[0].proba is None else np.einsum("ik,kic->ic", w_ik, np.stack([t.proba for t in terms]))
        first = terms[0]  # (the MAP point's targets, tail and kind)
        return replace(mixed, y=first.y, tail=first.tail, is_density=first.is_density, latent=(mean, var), proba=proba)

    # --------------------------------------------------------- classifiers
    def _log_class(self, X: Any) -> Array:
        r""":math:`\log\sum_k w_k P_k(y_* = c)`, shape ``(n, C)`` (binary: the log-odds' ``log_expit`` columns)."""
        if hasattr(self.map_model, "decision_function"):
            per = [
                np.column_stack([log_expit(-d), log_expit(d)])
                for d in (np.asarray(to_numpy(m.decision_function(X)), dtype=float) for m in self.models)
            ]
        else:  # ordinal: the points' class probabilities
            with np.errstate(divide="ignore"):
                per = [np.log(np.asarray(to_numpy(m.predict_proba(X)), dtype=float)) for m in self.models]
        stacked = np.stack(per) + self.log_weights[:, None, None]
        return logsumexp(stacked, axis=0)

    def decision_function(self, X: Any) -> Array:
        """The log-odds of the mixture's probability of ``classes_[1]``."""
        log_p = self._log_class(X)
        return log_p[:, 1] - log_p[:, 0]

    def predict_log_proba(self, X: Any) -> Array:
        return self._log_class(X)

    def predict_proba(self, X: Any) -> Array:
        return np.exp(self._log_class(X))

    # --------------------------------------------------------- a regressor's targets
    def components(self, X: Any, noise: Likelihood) -> list[tuple[float, Array, Array, Likelihood]]:
        """Each point's ``(weight, latent mean, latent variance, likelihood)`` at ``X`` in the model's (normalised)
        units; ``noise``: the likelihood of a point without one (the exact model's Gaussian ``alpha``)."""
        out = []
        for w, model in zip(self.weights, self.models, strict=True):
            mean, var = _latent(model, X)
            likelihood = model.likelihood if model.likelihood is not None else noise
            out.append((float(w), mean.reshape(-1), var.reshape(-1), likelihood))
        return out


def mixture_loo(terms: Sequence[LooTerms], weights: Array) -> tuple[LooTerms, Array]:
    r"""Leave-one-out of a mixture over the hyperparameters from its points' own, :math:`p_{ik} = p(y_i | y_{-i},
    \theta_k)`: the posterior of :math:`\theta` given :math:`y_{-i}` is the full one reweighted by
    :math:`1/p(y_i | y_{-i}, \theta_k)` (importance sampling; Vehtari, Mononen, Tolvanen, Sivula & Winther 2016,
    "Bayesian leave-one-out cross-validation approximations for Gaussian latent variable models", JMLR 17,
    section 3.5), so

    .. math::
        p(y_i | y_{-i}) = \Big(\sum_k \frac{w_k}{p_{ik}}\Big)^{-1},\qquad
        w_{ik} = \frac{w_k / p_{ik}}{\sum_j w_j / p_{ij}},

    in log space (``logsumexp``).  The in-sample density is the mixture's, :math:`\sum_k w_k p(y_i | y, \theta_k)`;
    the leave-one-out predictive's moments (``mean``, ``var``) are those of the :math:`w_{ik}`-mixture of the
    points'.  Returns the terms (the first point's targets and tail) and the weights :math:`w_{ik}`, shape
    ``(n, K)``.
    """
    with np.errstate(divide="ignore"):
        log_w = np.log(np.asarray(weights, dtype=float))
    loo = np.stack([t.loo for t in terms], axis=1)  # (n, K)
    inverse = log_w - loo
    log_norm = logsumexp(inverse, axis=1)
    w_ik = np.exp(inverse - log_norm[:, None])
    in_sample = logsumexp(log_w + np.stack([t.in_sample for t in terms], axis=1), axis=1)
    means = np.stack([t.mean for t in terms], axis=1)
    second = np.stack([t.var + t.mean**2 for t in terms], axis=1)
    mean = np.sum(w_ik * means, axis=1)
    var = np.maximum(np.sum(w_ik * second, axis=1) - mean**2, 0.0)
    improper = max(t.n_improper for t in terms)
    first = terms[0]
    return LooTerms(-log_norm, in_sample, mean, var, improper, first.y, first.tail, first.is_density), w_ik


def mixture_moments(components: Sequence[tuple[float, Array, Array, Likelihood]], **extra: Any) -> tuple[Array, Array]:
    r"""Mean and variance of :math:`\sum_k w_k p_k(y_*)`: :math:`\sum_k w_k \mu_k` and
    :math:`\sum_k w_k (\sigma_k^2 + \mu_k^2) - \mu^2`, each point's from its likelihood's ``predict_y`` (given
    ``extra``: a count's ``log_exposure``)."""
    moments = [(w, *likelihood.predict_y(m, np.maximum(v, 1e-300), **extra)) for w, m, v, likelihood in components]
    mean = sum(w * mu for w, mu, _ in moments)
    second = sum(w * (s2 + mu**2) for w, mu, s2 in moments)
    return mean, np.maximum(second - mean**2, 0.0)


def mixture_log_density(components: Sequence[tuple[float, Array, Array, Likelihood]], y: Array) -> Array:
    r""":math:`\log\sum_k w_k p_k(y_*)` by ``logsumexp``, each :math:`\log p_k` the likelihood's ``log_z``."""
    terms = []
    for w, m, v, likelihood in components:
        with np.errstate(divide="ignore"):
            terms.append(np.log(w) + likelihood.log_z(y, m, np.maximum(v, 1e-300)).log_z)
    return logsumexp(np.stack(terms), axis=0)


def _point_cdf(likelihood: Likelihood, q: Array, mean: Array, var: Array) -> Array:
    r""":math:`P_k(y_* \le q) = \int F(q - f) N(f | \mu, s^2) df` of one point: the likelihood's
    :meth:`~relaxep.likelihoods.Likelihood.predictive_cdf` (closed form for Gaussian noise, else its two-centre rule
    below the mean and its mirror image above)."""
    return likelihood.predictive_cdf(q, mean, var)


def mixture_interval(components: Sequence[tuple[float, Array, Array, Likelihood]], level: float) -> tuple[Array, Array]:
    r"""The central ``level`` interval of :math:`\sum_k w_k p_k(y_*)`: its quantiles :math:`(1 \mp \ell)/2`.

    Each quantile :math:`q` solves :math:`F(q) = \sum_k w_k P_k(y_* \le q) = p` and lies between the smallest and
    the largest of the points' own :math:`p`-quantiles (:math:`F` is below :math:`p` at the first and above at the
    last); Newton's method on :math:`F` (its derivative the mixture's density, :math:`\sum_k w_k e^{\log Z_k(q)}`)
    safeguarded by bisection on that bracket, vectorised over the test points.
    """
    if len(components) == 1:
        _, m, v, likelihood = components[0]
        return likelihood.predict_interval(m, np.maximum(v, 1e-300), level)
    points = [(w, m, np.maximum(v, 1e-300), likelihood) for w, m, v, likelihood in components]
    ends = [likelihood.predict_interval(m, v, level) for _, m, v, likelihood in points]
    out = []
    for side, p in ((0, 0.5 * (1.0 - level)), (1, 0.5 * (1.0 + level))):
        quantiles = np.stack([e[side] for e in ends])
        lo, hi = quantiles.min(axis=0), quantiles.max(axis=0)
        scale = np.abs(lo) + np.abs(hi) + (hi - lo)
        q = 0.5 * (lo + hi)
        for _ in range(_BISECTIONS):
            gap = sum(w * _point_cdf(lik, q, m, v) for w, m, v, lik in points) - p
            below = gap < 0.0
            lo, hi = np.where(below, q, lo), np.where(below, hi, q)
            density = sum(w * np.exp(lik.log_z(q, m, v).log_z) for w, m, v, lik in points)
            with np.errstate(divide="ignore", invalid="ignore"):
                newton = q - gap / density
            done = np.abs(newton - q) <= 1e-10 * scale  # (a converged step may graze the bracket's end)
            inside = np.isfinite(newton) & (newton >= lo) & (newton <= hi)
            q = np.where(inside | done, newton, 0.5 * (lo + hi))
            if np.all(done):
                break
        out.append(q)
    return out[0], out[1]
