"""The multi-class models behind :class:`~relaxep.GPClassifier` with more than two classes: :class:`_JointModel`,
one model of ``C`` latent functions with a shared kernel (:func:`~relaxep.inference.multiclass.infer_multiclass`),
and :class:`_OneVsRest`, one binary estimator per class.  Each has ``fit``,
``log_evidence(theta, eval_gradient, clone_kernel)``, ``predict_latent(X)`` and the classifier's heads, as the
binary model of :mod:`relaxep.estimators._models`.  With ``inducing_points`` the joint model is
:mod:`relaxep.estimators._sparse_multiclass_model`'s, which learns its kernel through :meth:`_JointModel.learn`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

import numpy as np
from joblib import Parallel, delayed
from numpy.typing import NDArray
from scipy.special import log_expit, logsumexp
from sklearn.gaussian_process.kernels import Kernel
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_random_state

from relaxep._typing import Array
from relaxep._xp import to_numpy
from relaxep.errors import DivergenceError
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._search import FitReport, _EvidenceSearch, at_bounds, scored
from relaxep.inference.multiclass import MulticlassResult, infer_multiclass
from relaxep.inference.multiclass import evidence_gradient as multiclass_evidence_gradient
from relaxep.inference.warm import WarmStarts
from relaxep.likelihoods.multiclass import MulticlassLikelihood
from relaxep.posterior import DensePrior
from relaxep.posterior.dense import kernel_matrix

__all__ = ["_JointModel", "_OneVsRest"]


# ------------------------------------------------------------------ joint multi-class
def _itself(result: MulticlassResult) -> MulticlassResult:
    return result  # (infer_multiclass starts from a result's sites)


class _JointModel:
    """One model of ``C`` latent functions with a shared kernel (:func:`relaxep.multiclass.infer_multiclass`).

    The search runs EP to a looser tolerance (at most 1e-2; warm-started, the fixed point moves
    little between evaluations); the final fit uses ``tol``.
    """

    #: EP's evidence is exact only to its tolerance: stop on a relative decrease below 1e-6 (2e-4 nats at
    #: |log Z| = 200) rather than L-BFGS's default 2e-9, below that noise, or where a factor e in any
    #: hyperparameter changes the evidence by less than 0.1 nat (the amplitude's ridge: the multinomial
    #: probit hardens slowly as the amplitude grows)
    OPTIONS: ClassVar[dict[str, float]] = {"ftol": 1e-6, "gtol": 0.1, "maxiter": 50}

    def __init__(
        self,
        kernel: Kernel,
        likelihood: MulticlassLikelihood,
        n_classes: int,
        search: _EvidenceSearch,
        *,
        noise: float,
        max_sweeps: int = 200,
        tol: float = 1e-4,
        warm_start: bool = True,
    ) -> None:
        self.kernel_, self.likelihood, self.n_classes, self.search = kernel, likelihood, n_classes, search
        self.noise, self.max_sweeps, self.tol = float(noise), max_sweeps, tol
        self.warm = WarmStarts(warm_start, keep=_itself)

    def _run(self, K: Array, y: NDArray, tol: float | None = None) -> MulticlassResult:
        """A run of nested EP from the warm start (reports a status, never warns)."""
        tol = self.tol if tol is None else tol
        n_classes, max_sweeps = self.n_classes, self.max_sweeps
        return self.warm.run(
            infer_multiclass, K, y, self.likelihood, n_classes=n_classes, max_sweeps=max_sweeps, tol=tol
        )

    def evidence(self, theta: Array, eval_gradient: bool, X: Any, y: NDArray, tol: float | None = None) -> Any:
        K, dK = kernel_matrix(self.kernel_.clone_with_theta(theta), X, self.noise, eval_gradient)
        result = self._run(K, y, tol)
        gradient = partial(multiclass_evidence_gradient, result, dK) if eval_gradient else None
        return scored(result.status, result.log_evidence, gradient, theta)

    def learn(self, X: Any, y: NDArray, random_state: Any, subset: int | None) -> tuple[str, ...]:
        """Maximise the evidence over ``kernel_.theta`` on ``X`` or a stratified subset of ``subset`` rows (the
        kernel set to the best); returns the hyperparameters found at their bounds."""
        Xo, yo = X, y
        if subset is not None and int(subset) < y.size:
            # a private generator: random_state=None must not draw from numpy's global one
            seed = np.random.RandomState() if random_state is None else check_random_state(random_state)
            Xo, _, yo, _ = train_test_split(Xo, yo, train_size=int(subset), stratify=yo, random_state=seed)
        search_tol = max(float(self.tol), 1e-2)
        evidence = partial(self.evidence, X=Xo, y=yo, tol=search_tol)
        hyper = HyperVector(self.kernel_)
        best = self.search.maximise(evidence, hyper, check_random_state(random_state), options=self.OPTIONS)
        if best is not None:
            self.kernel_.theta = best
        if yo.size != y.size:
            self.warm.reset()  # its sites belong to the subset
        return at_bounds(self.kernel_)

    def fit(self, X: Any, y: NDArray, random_state: Any, subset: int | None, learn: bool) -> FitReport:
        bounds = self.learn(X, y, random_state, subset) if learn else ()
        self.X, self.y = X, y
        self.prior_ = DensePrior.from_kernel(self.kernel_, X, self.noise)
        result = self._run(self.prior_.K, y)
        if result.status == "diverged":
            raise DivergenceError(
                f"joint multi-class EP diverged after {result.n_sweeps} sweeps with {self.likelihood!r}"
            )
        self.result_ = result
        return FitReport(result.status, result.n_sweeps, result.trace, None, bounds)

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        if not clone_kernel:
            self.kernel_.theta = theta
        with self.warm.held():  # the value as infer_multiclass reports it (not scored: a nan stays nan)
            K, dK = kernel_matrix(self.kernel_.clone_with_theta(theta), self.X, self.noise, eval_gradient)
            result = self._run(K, self.y)
        lml = np.float64(result.log_evidence)
        return (lml, multiclass_evidence_gradient(result, dK)) if eval_gradient else lml

    def predict_latent(self, X: Any) -> tuple[Array, Array]:
        return self.prior_.predict_at(self.result_.predict_latent, X)

    def decision_function(self, X: Any) -> Array:
        """Log predictive probabilities ``(n, C)``."""
        return self.prior_.predict_at(self.result_.predict_log_proba, X)

    def predict_log_proba(self, X: Any) -> Array:
        return self.decision_function(X)

    def predict_proba(self, X: Any) -> Array:
        return np.exp(self.decision_function(X))


# ------------------------------------------------------------------ one-vs-rest
class _OneVsRest:
    """One binary estimator per class (``make_binary()`` makes one), probabilities renormalised."""

    def __init__(self, make_binary: Callable[[], Any], n_jobs: int | None = None) -> None:
        self.make_binary, self.n_jobs = make_binary, n_jobs

    def fit(self, X: Any, y: NDArray, n_classes: int) -> None:
        self.estimators_ = Parallel(n_jobs=self.n_jobs)(
            delayed(self.make_binary().fit)(X, (y == c).astype(int)) for c in range(n_classes)
        )
        self.kernel_ = self.estimators_[0].kernel_
        self.log_marginal_likelihood_value_ = float(sum(e.log_marginal_likelihood_value_ for e in self.estimators_))

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        raise ValueError("log_marginal_likelihood(theta) is not defined for one-vs-rest (one evidence per class)")

    def predict_latent(self, X: Any) -> tuple[Array, Array]:
        pairs = [[to_numpy(a) for a in e.latent_mean_and_variance(X)] for e in self.estimators_]
        return np.column_stack([p[0] for p in pairs]), np.column_stack([p[1] for p in pairs])

    def decision_function(self, X: Any) -> Array:
        r"""Log of the renormalised one-vs-rest probabilities ``(n, C)``: from each class's log-odds
        :math:`d_c`, :math:`\log \sigma(d_c) - \log \sum_k \sigma(d_k)` (:math:`\sigma`: the logistic function)."""
        log_p = np.column_stack([log_expit(to_numpy(e.decision_function(X))) for e in self.estimators_])
        return log_p - logsumexp(log_p, axis=1, keepdims=True)

    def predict_log_proba(self, X: Any) -> Array:
        return self.decision_function(X)

    def predict_proba(self, X: Any) -> Array:
        return np.exp(self.decision_function(X))
