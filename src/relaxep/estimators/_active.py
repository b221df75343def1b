r"""Active learning for a binary :class:`~relaxep.GPClassifier`: which input to label next.

Both criteria read the latent's posterior predictive :math:`f_* \sim N(\mu_*, s^2_*)` at each candidate
(:meth:`~relaxep.GPClassifier.latent_mean_and_variance`), one row at a time:

* :meth:`~_ActiveLearningMixin.information_gain`, BALD (Houlsby, Huszar, Ghahramani & Lengyel 2011, *Bayesian
  active learning for classification and preference learning*, arXiv:1112.5745, eq. 1): the mutual information in
  bits between the label :math:`y_*` and the latent, :math:`I = h(\int t(f) N(f|\mu_*, s^2_*) df) - \int h(t(f))
  N(f|\mu_*, s^2_*) df`, the maths of :mod:`relaxep.likelihoods.information`;
* :meth:`~_ActiveLearningMixin.straddle`, the straddle heuristic for a level set (Bryan, Schneider, Nichol,
  Miller, Genovese & Wasserman 2005, *Active learning for identifying function threshold boundaries*, NeurIPS 18):
  :math:`\kappa s_* - |\mu_* - t_*|`, with the latent threshold :math:`t_*` of the likelihood's
  :meth:`~relaxep.likelihoods.BinaryLikelihood.latent_threshold`.

Binary fits only (dense or sparse, at the MAP or integrated over the hyperparameters); multi-class fits are refused
with ``NotImplementedError``.  The mixin asks its estimator's ``_at`` (``X`` validated and the model's answer) and
``model_`` (the estimator's).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils.validation import check_is_fitted

from relaxep._typing import Array
from relaxep._xp import on_device_of, to_numpy
from relaxep.likelihoods import Probit
from relaxep.likelihoods.information import (
    binary_entropy,
    expected_entropy,
    information_gain,
    probit_expected_entropy,
    probit_information_gain,
)

__all__ = ["INFORMATION_METHODS"]

#: ``information_gain``'s methods: the exact one (quadrature) and Houlsby et al.'s probit approximation
INFORMATION_METHODS = ("quadrature", "houlsby")


class _ActiveLearningMixin:
    """``information_gain``, ``straddle`` and ``rank_candidates`` of a binary classifier (module docstring)."""

    classes_: NDArray
    model_: Any

    def _check_binary(self, what: str) -> None:
        """Fitted, on two classes (``NotImplementedError`` for more)."""
        check_is_fitted(self)
        if self.classes_.size > 2:
            raise NotImplementedError(
                f"{what}() is for binary classifiers; this one was fitted on {self.classes_.size} classes. "
                "One class against the rest: a one-vs-rest fit's estimators_[c] are binary and answer it"
            )

    def _binary_latent(self, X: ArrayLike, what: str) -> tuple[Any, Array, Array]:
        """``X`` validated and the latent's predictive mean and variance there (numpy), for a binary fit."""
        self._check_binary(what)
        X, (mean, var) = self._at(X, "predict_latent")  # type: ignore[attr-defined]
        return X, np.asarray(to_numpy(mean), dtype=float), np.asarray(to_numpy(var), dtype=float)

    def information_gain(self, X: ArrayLike, method: str = "quadrature") -> Array:
        r"""BALD: the expected information gain in bits about the latent function of observing the label at ``X``.

        The mutual information between the label :math:`y_*` and the latent :math:`f_*` (Houlsby, Huszar,
        Ghahramani & Lengyel 2011, eq. 1),

        .. math:: I(y_*; f_*) = h\Big(\int t(f) N(f | \mu_*, s^2_*) df\Big) - \int h(t(f)) N(f | \mu_*, s^2_*) df,

        :math:`h(p) = -p \log_2 p - (1 - p) \log_2 (1 - p)`, :math:`N(\mu_*, s^2_*)` the latent's posterior
        predictive and :math:`t` the likelihood (:mod:`relaxep.likelihoods.information`).  It lies in
        :math:`[0, 1]`: large where the predictive is uncertain but each latent value would be confident (the
        posterior's own doubt, not the label noise).  Integrated fits (``integrate="ccd"`` or ``"grid"``): the
        mixture's, :math:`h(\sum_k w_k p_k) - \sum_k w_k \int h(t_k(f)) N(f | \mu_k, s^2_k) df`, the information
        about the latent and the hyperparameters together.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Candidate inputs.
        method : {"quadrature", "houlsby"}, default "quadrature"
            ``"quadrature"``: exact for any binary likelihood (the expected entropy by Gauss-Hermite or, for wide
            predictives, a trapezoid rule, within 1e-11 bits; the noisy step's in closed form, :math:`h(\epsilon)`).
            ``"houlsby"``: Houlsby et al.'s closed form for the probit (``Probit()`` only), an *approximation*
            (:math:`h(\Phi(x)) \approx e^{-x^2/(\pi \ln 2)}`) below the exact value by at most 0.0027 bits.

        Returns
        -------
        ndarray of shape (n,)
            Bits, in :math:`[0, 1]`.
        """
        if method not in INFORMATION_METHODS:
            raise ValueError(f"method must be one of {INFORMATION_METHODS}, got {method!r}")
        X, mean, var = self._binary_latent(X, "information_gain")
        points = self._points(X, mean, var)
        if method == "houlsby" and not all(type(lik) is Probit for _, _, _, lik in points):
            raise ValueError(
                f"method='houlsby' is the probit's closed form; this fit's likelihood is "
                f"{points[0][3]!r}: use method='quadrature'"
            )
        if len(points) == 1:
            exact = method == "quadrature"
            gain = information_gain(points[0][3], mean, var) if exact else probit_information_gain(mean, var)
        else:
            log_p = np.asarray(to_numpy(self.model_.predict_log_proba(X)), dtype=float)
            second = sum(
                w * (probit_expected_entropy(m, v) if method == "houlsby" else expected_entropy(lik, m, v))
                for w, m, v, lik in points
            )
            gain = np.maximum(binary_entropy(log_p[:, 1], log_p[:, 0]) - second, 0.0)
        return on_device_of(gain, X)

    def _points(self, X: Any, mean: Array, var: Array) -> list[tuple[float, Array, Array, Any]]:
        """``(weight, latent mean, latent variance, likelihood)`` of each fit: one, or an integrated fit's points."""
        if hasattr(self, "hyper_samples_"):
            return self.model_.components(X, None)
        return [(1.0, mean, var, self.model_.likelihood)]

    def straddle(self, X: ArrayLike, level: float = 0.5, kappa: float = 1.96, threshold: str = "predictive") -> Array:
        r"""The straddle score for the boundary where the probability of ``classes_[1]`` is ``level``.

        Bryan, Schneider, Nichol, Miller, Genovese & Wasserman (2005, NeurIPS 18), on the latent:

        .. math:: \mathrm{straddle}(x_*) = \kappa\, s_* - |\mu_* - t_*|,

        :math:`\mu_*, s^2_*` the latent's posterior predictive mean and variance
        (:meth:`latent_mean_and_variance`) and :math:`t_*` the latent threshold
        (:meth:`~relaxep.likelihoods.BinaryLikelihood.latent_threshold`):

        * ``threshold="predictive"`` (default): the latent mean at which the predictive equals ``level`` at this
          row's variance, :math:`\int t(f) N(f | t_*, s^2_*) df = \ell`, so :math:`\mu_* = t_*` exactly where
          :meth:`predict_proba` gives ``level``.  It depends on :math:`s_*`: probit :math:`t_* =
          \Phi^{-1}(\ell)\sqrt{1 + s^2_*}`; noisy probit :math:`\Phi^{-1}((\ell - \epsilon)/(1 - 2\epsilon))
          \sqrt{\sigma^2 + s^2_*}`; noisy step :math:`\Phi^{-1}((\ell - \epsilon)/(1 - 2\epsilon))\, s_*`; any
          other likelihood (the logistic) by a safeguarded Newton solve.
        * ``threshold="link"``: the paper's fixed threshold, where the likelihood itself equals ``level``,
          :math:`t(t_*) = \ell` (the same solve at :math:`s_* = 0`: probit :math:`\Phi^{-1}(\ell)`, logistic
          :math:`\log(\ell/(1 - \ell))`, the noisy step 0), so :math:`\mu_* = t_*` where the posterior *median*
          of :math:`t(f_*)` is ``level``.

        For the symmetric likelihoods shipped (:math:`t(-g) = 1 - t(g)`) both are 0 at ``level=0.5``.  Large where
        the posterior straddles the boundary: positive where :math:`t_*` lies within :math:`\kappa` standard
        deviations of the mean.  Integrated fits: :math:`\mu_*, s^2_*` the mixture's mean and total variance, the
        threshold the MAP point's likelihood's.

        Parameters
        ----------
        X : array-like of shape (n, d)
        level : float in (0, 1), default 0.5
            Within :math:`(\epsilon, 1 - \epsilon)` under a label-noise floor :math:`\epsilon`, the predictive's
            range (``ValueError`` otherwise).
        kappa : float >= 0, default 1.96
            The paper's 1.96: the half-width of a 95% interval, in standard deviations.
        threshold : {"predictive", "link"}, default "predictive"

        Returns
        -------
        ndarray of shape (n,)
            In latent units; the largest first to label.
        """
        if isinstance(kappa, bool | np.bool_) or not isinstance(kappa, numbers.Real):
            raise TypeError(f"kappa must be a real number >= 0, got {kappa!r}")
        if not (np.isfinite(float(kappa)) and float(kappa) >= 0.0):
            raise ValueError(f"kappa must be finite and >= 0, got {kappa!r}")
        if threshold not in ("predictive", "link"):
            raise ValueError(f"threshold must be 'predictive' or 'link', got {threshold!r}")
        self._check_binary("straddle")
        likelihood = self.model_.likelihood  # (an integrated fit's: the MAP point's)
        likelihood.latent_threshold(level, 1.0)  # (level checked before X: ValueError naming level)
        X, mean, var = self._binary_latent(X, "straddle")
        t = likelihood.latent_threshold(level, var if threshold == "predictive" else np.zeros_like(var))
        return on_device_of(float(kappa) * np.sqrt(var) - np.abs(mean - t), X)

    def rank_candidates(
        self, X: ArrayLike, n_best: int | None = None, method: str = "quadrature"
    ) -> tuple[NDArray[np.intp], Array]:
        """Rows of ``X`` ranked by :meth:`information_gain`, the most informative first (as
        :meth:`GPPreferenceLearner.rank_pairs <relaxep.GPPreferenceLearner.rank_pairs>` ranks comparisons).

        Returns ``(indices, gains)``: row indices into ``X`` and their gains in bits, the first ``n_best``
        (default all); ties keep ``X``'s order.
        """
        if n_best is not None and (isinstance(n_best, bool) or not isinstance(n_best, numbers.Integral) or n_best < 1):
            raise ValueError(f"n_best must be a positive int or None, got {n_best!r}")
        gains = np.asarray(to_numpy(self.information_gain(X, method)), dtype=float)
        order = np.argsort(-gains, kind="stable")[:n_best]
        return order, gains[order]
