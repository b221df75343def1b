r"""Gaussian process ordinal regression by EP (Chu & Ghahramani 2005): :class:`GPOrdinalClassifier`.

One latent function :math:`f` and ``K - 1`` ordered cut-points :math:`b_1 < \dots < b_{K-1}`,

.. math:: P(y = k \mid f) = \Phi\Big(\frac{b_k - f}{\sigma}\Big) - \Phi\Big(\frac{b_{k-1} - f}{\sigma}\Big),
          \qquad b_0 = -\infty,\ b_K = +\infty,

(:class:`~relaxep.likelihoods.OrdinalProbit`), the cut-points learned with the kernel by maximising the EP
evidence, as a Student-t's scale is.  A separate estimator rather than a ``GPClassifier`` likelihood:
``GPClassifier``'s multi-class options (one latent per class, jointly or one-vs-rest) do not apply to one
latent with ordered thresholds, and its binary log-odds (``decision_function``) have no ordinal meaning;
here the classes are the sorted labels, ``predict_proba`` has one column per class, ``predict`` is the
most probable class or, with ``decision="median"``, the predictive median (which minimises the expected
absolute error of the class index, the MAE that ordinal benchmarks score).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtri
from sklearn.base import ClassifierMixin, clone
from sklearn.gaussian_process.kernels import RBF, Kernel
from sklearn.metrics import accuracy_score
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from relaxep._threads import fit_threads
from relaxep._typing import Array
from relaxep.estimators._base import _LatentGPEstimator
from relaxep.estimators._checks import check_jitter, check_model, input_format, store_parameters
from relaxep.estimators._latent_fit import fit_latent
from relaxep.estimators._models import _LatentModel
from relaxep.estimators._search import ROBUST
from relaxep.inference import InferenceMethod
from relaxep.inference.schedules import Schedule
from relaxep.likelihoods import OrdinalProbit
from relaxep.sites import EP, SiteRule

__all__ = ["GPOrdinalClassifier"]

_LIKELIHOODS = "None or a relaxep.OrdinalProbit instance"


class _OrdinalModel(_LatentModel):
    """:class:`_LatentModel` of ordinal labels ``0..K-1``: the likelihood's class probabilities at the latent
    predictive."""

    def predict_proba(self, X: Any) -> Array:
        mean, var = self.predict_latent(X)
        return self.likelihood.class_probabilities(mean, np.maximum(var, 0.0))  # type: ignore[attr-defined]

    def _loo_proba(self, mean: Array, var: Array) -> Array:
        """The class probabilities at the leave-one-out latent."""
        return self.likelihood.class_probabilities(mean, np.maximum(var, 0.0))  # type: ignore[attr-defined]


class GPOrdinalClassifier(ClassifierMixin, _LatentGPEstimator):
    r"""Gaussian process ordinal regression by EP, Power EP or Relaxed EP (Chu & Ghahramani 2005).

    Parameters
    ----------
    kernel : sklearn Kernel, default ``RBF(1.0)``
        Prior covariance of the latent function; learned unless ``optimizer=None``.  No amplitude by
        default: the latent's scale trades against the cut-points and the noise (scaling :math:`f`,
        :math:`b` and :math:`\sigma` together leaves the likelihood unchanged), so Chu & Ghahramani
        learn :math:`b` and :math:`\sigma` with a unit-amplitude kernel.
    likelihood : OrdinalProbit or None
        ``None``: ``OrdinalProbit(noise=1.0)`` with its cut-points and noise learned.  Cut-points left as
        ``None`` start at :math:`b_k = s\,\Phi^{-1}(F_k)`, :math:`F_k` the training labels' cumulative
        frequency of classes ``<= k`` and :math:`s^2 = k(x, x) + \sigma^2` the prior variance of
        :math:`f + \epsilon`; given cut-points must number ``K - 1``.
    rule : SiteRule, InferenceMethod or "auto", default ``EP()``
        As :class:`~relaxep.GPClassifier`'s, but EP by default: the ordinal probit is log-concave, so EP's site
        precisions stay positive and EP converges (all 180 fits of ``relaxep reproduce ordinal``); ``"auto"`` adds
        the convergent stages.
    optimizer : "fmin_l_bfgs_b", "auto", "stochastic", callable or None, default "fmin_l_bfgs_b"
        Maximise the EP evidence over the kernel's and the likelihood's hyperparameters (the cut-points:
        the first, then the logs of the gaps; :math:`\log\sigma`).  ``"stochastic"``: sparse fits only.
    n_restarts_optimizer, optimizer_maxiter, schedule, max_sweeps, tol, jitter, warm_start, random_state,
    inducing_points, inducing_init, learn_inducing_points, optimizer_subset, n_jobs
        As :class:`~relaxep.GPClassifier`'s.
    decision : {"mode", "median"}, default "mode"
        What :meth:`predict` returns from :meth:`predict_proba`: ``"mode"`` the most probable class (it
        maximises the expected accuracy); ``"median"`` the predictive median, the smallest class whose
        cumulative probability :math:`P(y_* \le k)` is at least 1/2 (it minimises the expected absolute error
        :math:`E|y_* - k|` of the class index, the MAE).  The two differ where the probability is spread over
        classes on both sides of the mode.  Prediction only: the fit is the same.

    prior : "auto", None, HyperPrior or dict, default "auto"
        The hyperparameters' prior: the search climbs the log evidence plus the log prior (the MAP).  ``"auto"``:
        data-scaled half-Student-t priors that keep amplitudes and length-scales from running away; ``None``: the
        evidence alone (type-II ML); a :mod:`relaxep.hyper` prior for all, or a dict by name (the user guide).
    integrate : {"map", "ccd", "grid"}, default "map"
        Predict at the MAP hyperparameters, or integrate over them: a central composite design (Rue, Martino &
        Chopin 2009) or a grid around the MAP, scaled by the log posterior's Hessian, one EP fit per point;
        predictions and ``loo()`` are the weighted mixture, ``hyper_samples_`` the points (the user guide).

    representation : {"auto", "dense", "markov"}, default "auto"
        ``"markov"``: the Kalman smoother's posterior, :math:`O(n)`, for a kernel of one input with a state-space form
        (:mod:`relaxep.posterior.markov`); ``"auto"``: Markov where that is exact and faster
        (:mod:`relaxep.estimators._markov`).  ``representation_`` says which ran.
    monotone : dict {dim: +1 or -1} or None
        The latent rises (+1) or falls (-1) in those inputs: virtual derivative observations by EP
        (:mod:`relaxep.estimators._shape`): higher classes where it is higher; dense only.

    Attributes
    ----------
    representation_ : str
        The representation the fit ran: ``"dense"``, ``"sparse"`` or ``"markov"``.
    classes_ : ndarray of shape (K,)
        The sorted labels: the ordered classes.
    kernel_, likelihood_ : the fitted kernel and likelihood (``likelihood_.cut_points``).
    log_marginal_likelihood_value_ : float
        The EP log evidence at the fit.
    result_ : InferenceResult
        The posterior's record: status, sweeps, sites.
    hyper_samples_ : HyperSamples
        With ``integrate`` other than ``"map"``: the design's ``points`` (log-hyperparameters, the MAP first),
        ``weights``, ``names`` and ``log_posterior`` (absent with ``integrate="map"``).
    """

    search_policy = ROBUST  # (the cut-points' gradients are of order n, as a Student-t's scale's)
    learns_likelihood = True

    def __init__(
        self,
        kernel: Kernel | None = None,
        likelihood: OrdinalProbit | None = None,
        *,
        rule: SiteRule | InferenceMethod | str | None = None,
        optimizer: Any = "fmin_l_bfgs_b",
        n_restarts_optimizer: int = 0,
        optimizer_maxiter: int | None = None,
        schedule: Schedule | str = "parallel",
        max_sweeps: int = 200,
        tol: float = 1e-4,
        jitter: float = 1e-6,
        warm_start: bool = True,
        random_state: Any = None,
        inducing_points: int | ArrayLike | None = None,
        inducing_init: str = "kmeans",
        learn_inducing_points: bool = True,
        optimizer_subset: int | None = None,
        n_jobs: int | None = None,
        decision: str = "mode",
        prior: Any = "auto",
        integrate: str = "map",
        representation: str = "auto",
        monotone: dict[int, int] | None = None,
    ) -> None:
        store_parameters(self, locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ fit
    def fit(self, X: ArrayLike, y: ArrayLike) -> GPOrdinalClassifier:
        """Learn the kernel, cut-points and noise (if ``optimizer``) and run inference on ``(X, y)``."""
        check_model(self.kernel, self.likelihood, self.rule, "GPOrdinalClassifier", _LIKELIHOODS)
        self._check_parameters()
        X, y = validate_data(self, X, y, ensure_min_samples=2, **input_format(self.kernel))
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(f"y: ordinal regression needs at least two classes; the data contain one: {classes[0]!r}")
        self.classes_ = classes
        y_index = np.searchsorted(classes, y).astype(float)
        self.kernel_ = RBF(1.0) if self.kernel is None else clone(self.kernel)
        likelihood = self._start_likelihood(X, y_index)
        self.X_train_ = np.array(X, copy=True)
        with fit_threads(X.shape[0], dense=self.inducing_points is None):
            model, report = self._fit_model(likelihood, y_index)
        return self._finish(model, report)

    def _start_likelihood(self, X: NDArray, y_index: NDArray) -> OrdinalProbit:
        """The likelihood the fit starts from: cut-points from the class frequencies where none are given."""
        n_cuts = self.classes_.size - 1
        likelihood = OrdinalProbit(noise=1.0) if self.likelihood is None else clone(self.likelihood)
        if likelihood.cut_points is None:
            cumulative = np.cumsum(np.bincount(y_index.astype(int), minlength=n_cuts + 1))[:-1] / y_index.size
            prior_sd = float(np.sqrt(self.kernel_.diag(X[:1])[0] + self.jitter + likelihood.noise**2))
            likelihood.set_params(cut_points=prior_sd * ndtri(cumulative))
        elif len(likelihood.cut_points) != n_cuts:
            raise ValueError(
                f"likelihood: {len(likelihood.cut_points)} cut-points for {n_cuts + 1} classes; give "
                f"{n_cuts} (K - 1) or None to start them from the class frequencies"
            )
        return likelihood

    def _fit_model(self, likelihood: OrdinalProbit, y: NDArray) -> tuple[_OrdinalModel, Any]:
        rule = EP() if self.rule is None else self.rule  # (log-concave: EP's sites stay positive)
        plan = self._plan(self.X_train_, self.kernel_.n_dims + likelihood.n_dims)
        return fit_latent(plan, _OrdinalModel, self.kernel_, likelihood, rule, self.X_train_, y, self.jitter)

    def _check_parameters(self) -> None:
        super()._check_parameters()
        check_jitter(self.jitter)
        self._check_decision()

    def _check_decision(self) -> None:
        """``decision``: ``"mode"`` or ``"median"`` (a ``ValueError`` naming it)."""
        if not (isinstance(self.decision, str) and self.decision in ("mode", "median")):
            raise ValueError(f"decision must be 'mode' or 'median', got {self.decision!r}")

    # ------------------------------------------------------------ predict
    def latent_mean_and_variance(self, X: ArrayLike) -> tuple[Array, Array]:
        """Posterior mean and variance of the latent ``f`` at ``X`` (the cut-points are ``likelihood_.cut_points``)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, **input_format(self.kernel_))
        return self.model_.predict_latent(X)

    def predict_proba(self, X: ArrayLike) -> Array:
        r"""Class probabilities, columns in ``classes_`` order: :math:`P(y_* = k) = \Phi(z_k) - \Phi(z_{k-1})`,
        :math:`z_k = (b_k - \mu_*)/\sqrt{\sigma^2 + s^2_*}` at the latent predictive :math:`N(\mu_*, s^2_*)`."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, **input_format(self.kernel_))
        return self.model_.predict_proba(X)

    def predict_log_proba(self, X: ArrayLike) -> Array:
        """Log class probabilities (of :meth:`predict_proba`; a zero probability gives ``-inf``)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: ArrayLike) -> NDArray:
        """The class of ``decision``: the most probable one (``"mode"``, the argmax of :meth:`predict_proba`) or
        the predictive median (``"median"``: the smallest class whose cumulative probability is >= 1/2)."""
        check_is_fitted(self)
        self._check_decision()
        proba = self.predict_proba(X)
        if self.decision == "mode":
            return self.classes_[np.argmax(proba, axis=1)]
        cumulative = np.cumsum(proba, axis=1)
        cumulative[:, -1] = 1.0  # (the last class holds the rest: rounding cannot leave the median undefined)
        return self.classes_[np.argmax(cumulative >= 0.5, axis=1)]

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Accuracy of :meth:`predict` on ``(X, y)``; labels absent at fit time are refused (``ValueError``
        naming ``y``), not counted as errors."""
        check_is_fitted(self)
        y = np.asarray(y)
        unknown = np.setdiff1d(np.unique(y), self.classes_)
        if unknown.size:
            raise ValueError(f"y contains labels absent at fit time: {unknown.tolist()} (classes_ = {self.classes_})")
        return float(accuracy_score(y, self.predict(X), sample_weight=sample_weight))
