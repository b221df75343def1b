r"""``GPPreferenceLearner``: a utility learned from pairwise comparisons by EP (Chu & Ghahramani 2005).

Items :math:`x_1, \dots, x_n` have a latent utility :math:`f \sim GP(0, k)`; a comparison "``a`` is preferred
to ``b``" has the likelihood :math:`t(f(x_a) - f(x_b))`, by default the probit :math:`\Phi`: the utilities are in
units of the comparison noise (Chu & Ghahramani's :math:`\Phi((f_a - f_b)/(\sqrt2\sigma))` with
:math:`\sqrt2\sigma = 1`; the kernel's learned amplitude is the utility's spread in those units).  Each site sits
on a difference of two latents, so the model is EP on the comparisons' prior
:class:`~relaxep.posterior.comparisons.ComparisonKernel`: the one-latent machinery (EP, Power EP, Relaxed EP,
the evidence and its gradient, L-BFGS-B, the sparse FITC prior with inducing items) applies as it is, and an
item's utility is a test row of the same kernel.  Houlsby et al. (2012, *Collaborative Gaussian processes for
preference learning*, NeurIPS) fit this model by EP; BoTorch's ``PairwiseGP`` fits it by the Laplace
approximation.  The next comparison to ask for: :meth:`GPPreferenceLearner.information_gain` (BALD,
:mod:`relaxep.likelihoods.information`) and :meth:`GPPreferenceLearner.rank_pairs`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial.distance import pdist
from sklearn.base import BaseEstimator, clone
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel
from sklearn.utils.validation import check_array, check_is_fitted

from relaxep._threads import fit_threads
from relaxep._typing import Array
from relaxep.assessment.result import fingerprint
from relaxep.estimators._base import _LatentGPEstimator
from relaxep.estimators._checks import check_host_arrays, check_jitter, check_kernel, check_likelihood, check_rule
from relaxep.estimators._inducing import check_inducing_points, initial_inducing_points
from relaxep.estimators._latent_fit import fit_latent
from relaxep.estimators._model import LooTerms
from relaxep.estimators._models import _BinaryModel, _SparsePriors
from relaxep.likelihoods import BinaryLikelihood, Probit
from relaxep.likelihoods.information import information_gain, probit_information_gain
from relaxep.posterior.comparisons import ComparisonKernel, encode_comparisons, encode_items

__all__ = ["GPPreferenceLearner", "check_comparisons", "default_kernel", "oriented"]

#: comparisons the hyperparameters of a sparse fit are learned on (dense EP on a random subset)
SPARSE_SEARCH_SUBSET = 1000


def check_comparisons(
    comparisons: object, n_items: int, name: str = "comparisons", minimum: int = 1
) -> NDArray[np.intp]:
    """``comparisons`` as an ``(m, 2)`` integer array of row indices into ``X`` (each row ``(preferred, other)``):
    integers (or floats that are whole numbers), in ``[0, n_items)``, no item compared with itself."""
    try:
        C = np.asarray(comparisons)
    except (TypeError, ValueError) as exc:  # pragma: no cover - numpy accepts nearly anything
        raise TypeError(f"{name} must be an (m, 2) array of row indices into X") from exc
    if C.dtype == bool or C.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold integer row indices into X, got dtype {C.dtype}")
    if C.ndim != 2 or C.shape[1] != 2 or C.shape[0] < minimum:
        raise ValueError(f"{name} must have shape (m, 2) with m >= {minimum} (rows: preferred, other), got {C.shape}")
    if C.dtype.kind == "f":
        if not np.all(np.isfinite(C)) or np.any(C != np.round(C)):
            raise ValueError(f"{name} must hold integer row indices into X; got non-integer values")
    C = C.astype(np.intp)
    if C.min() < 0 or C.max() >= n_items:
        raise ValueError(f"{name} indices must lie in [0, {n_items}) (rows of X), got [{C.min()}, {C.max()}]")
    same = np.flatnonzero(C[:, 0] == C[:, 1])
    if same.size:
        raise ValueError(f"{name} row {same[0]} compares item {C[same[0], 0]} with itself")
    return C


def default_kernel(X: Array) -> Kernel:
    r"""``ConstantKernel(1.0) * RBF(l0)``, :math:`l_0` half the median distance between the items (of at most 1000
    random ones): the search's start.  From ``RBF(1.0)`` on items of unit spread the L-BFGS-B search can fall into
    the mode where the length scale tends to 0 and every comparison is explained alone (measured: 3 of 3 seeds at
    50 items of the Hartmann-6 benchmark, held-out NLL log 2), a lower evidence than the mode near
    :math:`l_0`."""
    rows = X if X.shape[0] <= 1000 else X[np.random.default_rng(0).choice(X.shape[0], 1000, replace=False)]
    distance = float(np.median(pdist(rows)))
    return ConstantKernel(1.0) * RBF(0.5 * distance if np.isfinite(distance) and distance > 0 else 1.0)


def oriented(X: Array, comparisons: Array) -> tuple[Array, Array]:
    r"""The comparisons as a binary classifier's rows and labels: every other one turned round, ``(b, a)`` with
    label :math:`-1`, the rest ``(a, b)`` with :math:`+1`.  Exactly the same model (a binary likelihood is
    :math:`t(y d)`, and turning a pair round negates :math:`d`), and both classes present, as the classifier's
    checks ask."""
    flip = np.arange(comparisons.shape[0]) % 2 == 1
    turned = np.where(flip[:, None], comparisons[:, ::-1], comparisons)
    return encode_comparisons(X, turned), np.where(flip, -1.0, 1.0)


class GPPreferenceLearner(_LatentGPEstimator):
    r"""A Gaussian-process utility learned from pairwise comparisons by EP, Power EP or Relaxed EP.

    Parameters
    ----------
    kernel : sklearn Kernel, default ``ConstantKernel(1.0) * RBF(l0)``
        The utility's prior covariance on items; its hyperparameters are learned by the EP evidence unless
        ``optimizer=None`` (the amplitude is the utility's spread in units of the comparison noise).  The
        default's length scale starts at half the median distance between the items (:func:`default_kernel`).
    likelihood : BinaryLikelihood, default ``Probit()``
        Of a comparison given the utility difference: ``Probit()`` (Chu & Ghahramani's), ``NoisyProbit(eps)``
        (a fraction ``eps`` of the answers arbitrary: a contradicting comparison costs at most
        :math:`\log(1/\epsilon)`), ``Logistic()`` (Bradley-Terry).
    rule : SiteRule, InferenceMethod or "auto", default "auto"
        As :class:`~relaxep.GPClassifier`'s: EP with the convergent fallback, or ``PowerEP(u)``,
        ``RelaxedEP(c)`` (relaxes the comparisons that contradict the rest), an inference method.
    optimizer : "fmin_l_bfgs_b", callable or None, default "fmin_l_bfgs_b"
        Maximise the EP log evidence over ``kernel.theta`` (the gradient at the EP fixed point).
    n_restarts_optimizer, max_sweeps, tol, jitter, warm_start, schedule, random_state, verbose, callback
        As :class:`~relaxep.GPClassifier`'s (``jitter``: latent noise on each comparison's difference).
    inducing_points : int, array of shape (M, d) or None
        ``None``: the dense posterior over the ``m`` comparisons (:math:`O(m^3)`).  ``M`` or ``M`` items: the
        sparse FITC posterior with inducing utilities :math:`f(z_j)` (:math:`O(m M^2)`), placed by k-means on
        the items; the hyperparameters are learned by dense EP on ``optimizer_subset`` random comparisons
        (default ``min(m, 1000)``), then the sparse posterior is fitted on all at the learned kernel.
    inducing_init : {"kmeans", "random"}, default "kmeans"
    optimizer_subset : int or None
        Sparse fits: the comparisons the hyperparameters are learned on (see ``inducing_points``).
    optimizer_maxiter : int or None
        L-BFGS-B's iterations (``None``: scipy's default).
    n_jobs : int or None
        Threads for a sparse fit's row blocks (:class:`~relaxep.GPClassifier`'s).

    prior : "auto", None, HyperPrior or dict, default "auto"
        The hyperparameters' prior: the search climbs the log evidence plus the log prior (the MAP).  ``"auto"``:
        data-scaled half-Student-t priors that keep amplitudes and length-scales from running away; ``None``: the
        evidence alone (type-II ML); a :mod:`relaxep.hyper` prior for all, or a dict by name (the user guide).

    Attributes
    ----------
    kernel_ : Kernel
        The utility's kernel with the learned hyperparameters.
    X_train_ : ndarray of shape (n, d)
        The items.
    comparisons_ : ndarray of shape (m, 2)
        The comparisons, as row indices into ``X_train_``.
    log_marginal_likelihood_value_ : float
        The EP log evidence of the comparisons.
    result_ : InferenceResult
    inducing_points_ : ndarray of shape (M, d)
        Sparse fits only: the inducing items.

    Notes
    -----
    Ties are not modelled (drop them, or give each tie as two comparisons with ``NoisyProbit(0.5 - d)``...: not
    supported).  Utilities are identified up to the prior: their level comes from the zero prior mean.
    """

    def __init__(
        self,
        kernel: Kernel | None = None,
        likelihood: BinaryLikelihood | None = None,
        rule: Any = None,
        optimizer: str | Callable | None = "fmin_l_bfgs_b",
        n_restarts_optimizer: int = 0,
        schedule: Any = "parallel",
        max_sweeps: int = 200,
        tol: float = 1e-4,
        jitter: float = 1e-6,
        warm_start: bool = True,
        random_state: int | np.random.RandomState | None = None,
        inducing_points: int | ArrayLike | None = None,
        inducing_init: str = "kmeans",
        optimizer_subset: int | None = None,
        optimizer_maxiter: int | None = None,
        n_jobs: int | None = None,
        verbose: int = 0,
        callback: Callable[..., Any] | None = None,
        prior: Any = "auto",
    ) -> None:
        self.kernel = kernel
        self.likelihood = likelihood
        self.rule = rule
        self.optimizer = optimizer
        self.n_restarts_optimizer = n_restarts_optimizer
        self.schedule = schedule
        self.max_sweeps = max_sweeps
        self.tol = tol
        self.jitter = jitter
        self.warm_start = warm_start
        self.random_state = random_state
        self.inducing_points = inducing_points
        self.inducing_init = inducing_init
        self.optimizer_subset = optimizer_subset
        self.optimizer_maxiter = optimizer_maxiter
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.callback = callback
        self.prior = prior

    # ------------------------------------------------------------------ fit
    def fit(self, X: ArrayLike, comparisons: ArrayLike) -> GPPreferenceLearner:
        """Learn the kernel (if ``optimizer``) and run EP on the comparisons ``(preferred, other)`` of ``X``'s rows."""
        check_kernel(self.kernel)
        check_likelihood(self.likelihood, "Probit(), NoisyProbit(eps), Logistic() or None", (BinaryLikelihood,))
        check_rule(self.rule)
        self._check_parameters()
        check_jitter(self.jitter)
        subset = self.optimizer_subset
        if subset is not None and (isinstance(subset, bool) or not isinstance(subset, numbers.Integral) or subset < 2):
            raise ValueError(f"optimizer_subset must be None or an int >= 2, got {subset!r}")
        if self.optimizer is not None and not (callable(self.optimizer) or self.optimizer == "fmin_l_bfgs_b"):
            raise ValueError(f"optimizer must be 'fmin_l_bfgs_b', a callable or None, got {self.optimizer!r}")
        check_host_arrays("GPPreferenceLearner", X=X, comparisons=comparisons)
        X = check_array(X, dtype=np.float64, ensure_min_samples=2, input_name="X")
        C = check_comparisons(comparisons, X.shape[0], minimum=2)
        self.n_features_in_ = X.shape[1]
        self.X_train_, self.comparisons_ = X.copy(), C.copy()
        rows, y = oriented(X, C)
        kernel = default_kernel(X) if self.kernel is None else clone(self.kernel)
        self.kernel_ = ComparisonKernel(kernel, X.shape[1])
        likelihood = Probit() if self.likelihood is None else self.likelihood
        rule = "auto" if self.rule is None else self.rule
        plan = self._plan(rows, self.kernel_.n_dims, dense=True)  # (a sparse fit's search is dense too)
        with fit_threads(C.shape[0], dense=self.inducing_points is None):
            if self.inducing_points is None:
                model, report = fit_latent(plan, _BinaryModel, self.kernel_, likelihood, rule, rows, y, self.jitter)
            else:
                model, report = self._fit_sparse(plan, X, rows, y, likelihood, rule)
        return self._finish(model, report)

    def _decode(self, model: Any) -> None:
        """The utility's kernel (the model keeps the comparisons') and the inducing items' rows ``[z, 0, 0]``
        decoded to ``z``."""
        self.kernel_ = model.kernel_.kernel
        if self.inducing_points is not None:
            self.inducing_points_ = model.Z[:, : self.n_features_in_]

    def _loo_fingerprint(self, terms: LooTerms) -> str:
        """The fingerprint of the items and the comparisons (the rows that were fitted)."""
        return fingerprint(self.X_train_, self.comparisons_)

    def _fit_sparse(
        self, plan: Any, X: Array, rows: Array, y: Array, likelihood: BinaryLikelihood, rule: Any
    ) -> tuple[_BinaryModel, Any]:
        """Learn on a random subset of comparisons by dense EP (``plan``'s search), then the FITC posterior on all
        of them at the learned kernel, with ``M`` inducing items."""
        rng = self._rng()
        Z = initial_inducing_points(X, check_inducing_points(self.inducing_points, X.shape[1]), self.inducing_init, rng)
        m = y.shape[0]
        subset = SPARSE_SEARCH_SUBSET if self.optimizer_subset is None else int(self.optimizer_subset)
        if self.optimizer is not None and self.kernel_.n_dims > 0:
            idx = np.sort(rng.choice(m, min(m, subset), replace=False))
            fit_latent(plan, _BinaryModel, self.kernel_, likelihood, rule, rows[idx], y[idx], self.jitter)
        model = _BinaryModel(
            _SparsePriors(self.jitter, self.n_jobs), self.kernel_, likelihood, rule, plan.search,
            Z=encode_items(Z), **plan.options(rule),
        )  # fmt: skip
        return model, model.fit(rows, y, None)

    # ------------------------------------------------------------ predict
    def _items(self, X: ArrayLike) -> Array:
        check_is_fitted(self)
        check_host_arrays("GPPreferenceLearner", X=X)
        X = check_array(X, dtype=np.float64, input_name="X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but the learner was fitted on {self.n_features_in_}")
        return X

    def _pairs(self, X: ArrayLike, comparisons: ArrayLike) -> Array:
        X = self._items(X)
        return encode_comparisons(X, check_comparisons(comparisons, X.shape[0]))

    def predict(self, X: ArrayLike, return_std: bool = False, return_cov: bool = False) -> Any:
        """The utility's posterior mean at the items ``X`` (and its standard deviation or covariance)."""
        if return_std and return_cov:
            raise ValueError("at most one of return_std and return_cov can be requested")
        X = self._items(X)
        rows = encode_items(X)
        if return_cov:
            return self.model_.predict_latent(rows, full_cov=True)
        mean, var = self.model_.predict_latent(rows)
        return (mean, np.sqrt(np.maximum(var, 0.0))) if return_std else mean

    def difference_mean_and_variance(self, X: ArrayLike, comparisons: ArrayLike) -> tuple[Array, Array]:
        r"""Posterior mean and variance of :math:`f(x_a) - f(x_b)` for each row ``(a, b)`` of ``comparisons``."""
        return self.model_.predict_latent(self._pairs(X, comparisons))

    def predict_proba(self, X: ArrayLike, comparisons: ArrayLike) -> Array:
        r"""The probability that each row's first item is preferred,
        :math:`\int t(d) N(d | \mu_{ab}, s^2_{ab}) dd` (probit: :math:`\Phi(\mu_{ab}/\sqrt{1 + s^2_{ab}})`)."""
        return self.model_.predict_proba(self._pairs(X, comparisons))[:, 1]

    def predict_log_proba(self, X: ArrayLike, comparisons: ArrayLike) -> Array:
        """The log of :meth:`predict_proba`, computed in log space."""
        return self.model_.predict_log_proba(self._pairs(X, comparisons))[:, 1]

    def information_gain(self, X: ArrayLike, comparisons: ArrayLike) -> Array:
        r"""The expected information gain (BALD, in bits) about the utility of asking each comparison
        (:mod:`relaxep.likelihoods.information`): the closed form for the probit, quadrature otherwise."""
        mean, var = self.difference_mean_and_variance(X, comparisons)
        likelihood = self.model_.likelihood
        if type(likelihood) is Probit:
            return probit_information_gain(mean, var)
        return information_gain(likelihood, mean, var)

    def rank_pairs(
        self, X: ArrayLike, pairs: ArrayLike | None = None, n_best: int | None = None
    ) -> tuple[Array, Array]:
        """Candidate comparisons ranked by :meth:`information_gain`, the most informative first.

        ``pairs``: the candidates (rows of indices into ``X``); ``None``: every pair of ``X``'s rows (at most
        2000 rows).  Returns ``(pairs, gains)``, the first ``n_best`` (default all).
        """
        X = self._items(X)
        if pairs is None:
            if X.shape[0] > 2000:
                raise ValueError(f"pairs=None ranks all pairs of X's rows, at most 2000 rows; X has {X.shape[0]}")
            pairs = np.column_stack(np.triu_indices(X.shape[0], 1))
        pairs = check_comparisons(pairs, X.shape[0], "pairs")
        gains = self.information_gain(X, pairs)
        order = np.argsort(-gains, kind="stable")
        if n_best is not None:
            if not isinstance(n_best, numbers.Integral) or n_best < 1:
                raise ValueError(f"n_best must be a positive int or None, got {n_best!r}")
            order = order[:n_best]
        return pairs[order], gains[order]

    def score(self, X: ArrayLike, comparisons: ArrayLike) -> float:
        """Mean log probability of the comparisons (each row's first item preferred): higher is better."""
        return float(np.mean(self.predict_log_proba(X, comparisons)))

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = BaseEstimator.__sklearn_tags__(self)
        tags.requires_fit = True
        return tags
