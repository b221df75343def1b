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
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import log_expit, logsumexp

from relaxep._typing import Array
from relaxep._xp import to_numpy
from relaxep.estimators._exact import _ExactModel
from relaxep.likelihoods import Likelihood

__all__ = ["HyperSamples", "MixtureModel", "mixture_interval", "mixture_log_density", "mixture_moments"]

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
    if isinstance(model, _ExactModel):
        out = model.predict_latent(X, full_cov)
    else:
        out = model.predict_latent_cov(X) if full_cov else model.predict_latent(X)
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

    def predict_latent_cov(self, X: Any) -> tuple[Array, Array]:
        return self.predict_latent(X, full_cov=True)

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


def mixture_moments(components: Sequence[tuple[float, Array, Array, Likelihood]]) -> tuple[Array, Array]:
    r"""Mean and variance of :math:`\sum_k w_k p_k(y_*)`: :math:`\sum_k w_k \mu_k` and
    :math:`\sum_k w_k (\sigma_k^2 + \mu_k^2) - \mu^2`, each point's from its likelihood's ``predict_y``."""
    moments = [(w, *likelihood.predict_y(m, np.maximum(v, 1e-300))) for w, m, v, likelihood in components]
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
