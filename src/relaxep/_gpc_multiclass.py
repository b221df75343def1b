"""The multi-class fits of :class:`~relaxep.GPClassifier`: the joint model (nested EP for the
multinomial probit, or the robust max; :mod:`relaxep.multiclass`) and one-vs-rest.

A mixin: the estimator's state (``X_train_``, ``kernel_``, ``classes_``, ...) is set by ``fit``.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
from joblib import Parallel, delayed
from numpy.typing import NDArray
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_random_state

from relaxep._gpc_common import fit_binary, warn_at_bounds
from relaxep._typing import Array
from relaxep.errors import DivergenceError
from relaxep.multiclass import MulticlassLikelihood, MulticlassResult, MultinomialProbit, infer_multiclass
from relaxep.multiclass import evidence_gradient as multiclass_evidence_gradient

if TYPE_CHECKING:
    from relaxep.classifier import GPClassifier


class MulticlassFit:
    """``GPClassifier``'s methods for more than two classes."""

    def _fit_multiclass(self, X: Array, y: NDArray, classes: NDArray) -> GPClassifier:
        self.classes_ = classes
        self.X_train_ = np.array(X, copy=True)
        y_idx = np.searchsorted(classes, y)
        if self.multi_class == "one_vs_rest":
            self._mode = "ovr"
            params = self.get_params(deep=False)
            self.estimators_ = Parallel(n_jobs=self.n_jobs)(
                delayed(fit_binary)(type(self)(**params), X, (y_idx == c).astype(int)) for c in range(classes.size)
            )
            self.kernel_ = self.estimators_[0].kernel_
            self.log_marginal_likelihood_value_ = float(sum(e.log_marginal_likelihood_value_ for e in self.estimators_))
            return self
        self._mode = "joint"
        lik = MultinomialProbit() if self.likelihood is None else self.likelihood
        if not isinstance(lik, MulticlassLikelihood):
            raise TypeError(
                "with more than two classes and multi_class='joint', likelihood must be a multi-class likelihood "
                f"(relaxep.multiclass.MultinomialProbit or RobustMax), got {lik!r}; "
                "use multi_class='one_vs_rest' for a binary likelihood"
            )
        if self.rule is not None and not (isinstance(self.rule, str) and self.rule == "auto"):
            raise ValueError(
                f"rule={self.rule!r} does not apply to joint multi-class inference (nested EP); leave it None"
            )
        if self.optimizer_subset is not None and int(self.optimizer_subset) < classes.size:
            raise ValueError(f"optimizer_subset must be at least the number of classes, got {self.optimizer_subset!r}")
        self._likelihood = lik
        self._y = y_idx
        self.kernel_ = ConstantKernel(1.0) * RBF(1.0) if self.kernel is None else clone(self.kernel)
        self._warm_mc: MulticlassResult | None = None
        if self.optimizer is not None and self.kernel_.n_dims > 0:
            Xo, yo = self.X_train_, y_idx
            m = self.optimizer_subset
            if m is not None and int(m) < y_idx.size:
                # a private generator: random_state=None must not draw from numpy's global one
                seed = np.random.RandomState() if self.random_state is None else check_random_state(self.random_state)
                Xo, _, yo, _ = train_test_split(Xo, yo, train_size=int(m), stratify=yo, random_state=seed)
            self._optimize_multiclass(Xo, yo)
        K = self._kernel_matrix(self.kernel_.theta, False)[0]
        result = self._mc_infer(K, y_idx)
        if result.status == "diverged":
            raise DivergenceError(f"joint multi-class EP diverged after {result.n_sweeps} sweeps with {lik!r}")
        if result.status != "converged":
            warnings.warn(
                f"inference did not converge: status {result.status!r} after {result.n_sweeps} sweeps "
                f"(last change {result.trace[-1]:.3g}). Consider more max_sweeps or a larger tol.",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.result_ = result
        self.log_marginal_likelihood_value_ = result.log_evidence
        return self

    def _mc_infer(self, K: Array, y: NDArray, tol: float | None = None) -> MulticlassResult:
        tol = self.tol if tol is None else tol

        def run(init: MulticlassResult | None) -> MulticlassResult:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return infer_multiclass(
                    K, y, self._likelihood, n_classes=self.classes_.size, max_sweeps=self.max_sweeps, tol=tol, init=init
                )

        # sites from the search's subset do not fit the whole training set
        return self._warm_run("_warm_mc", run, lambda init: init.sites is None or init.sites[0].shape[0] == y.size)

    def _optimize_multiclass(self, X: Array, y: NDArray) -> None:
        # the search runs EP to a looser tolerance (at most 1e-2; warm-started, the fixed point
        # moves little between evaluations); the final fit uses ``tol``
        search_tol = max(float(self.tol), 1e-2)

        def obj_func(theta: Array, eval_gradient: bool = True) -> Any:
            K, dK = self._kernel_matrix(theta, eval_gradient, X)
            result = self._mc_infer(K, y, search_tol)
            lml = result.log_evidence
            if result.status == "diverged" or not np.isfinite(lml):
                return (np.inf, np.zeros_like(theta)) if eval_gradient else np.inf
            if eval_gradient:
                return -lml, -multiclass_evidence_gradient(result, dK)
            return -lml

        # EP's evidence is exact only to its tolerance: stop on a relative decrease below 1e-6
        # (2e-4 nats at |log Z| = 200) rather than L-BFGS's default 2e-9, below that noise, or
        # where a factor e in any hyperparameter changes the evidence by less than 0.1 nat (the
        # amplitude's ridge: the multinomial probit hardens slowly as the amplitude grows)
        options = {"ftol": 1e-6, "gtol": 0.1, "maxiter": 50}
        rng = check_random_state(self.random_state)
        best_theta = self._best_of_restarts(obj_func, self.kernel_.bounds, rng, options=options)
        if best_theta is not None:
            self.kernel_.theta = best_theta
        warn_at_bounds(self.kernel_)
