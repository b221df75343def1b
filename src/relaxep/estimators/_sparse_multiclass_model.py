r"""The sparse joint multi-class model behind :class:`~relaxep.GPClassifier` with ``inducing_points`` and more than
two classes (``multi_class="joint"``): nested EP under the low-rank prior :math:`f_c = \Phi v_c`,
:math:`\Phi = K_{nm} L_{mm}^{-T}`, :math:`v_c \sim N(0, I_m)` (:func:`~relaxep.multiclass.infer_multiclass_sparse`).

The fit has three steps:

1. the kernel's hyperparameters are learned by the *dense* joint model's evidence
   (:class:`~relaxep.estimators._multiclass_models._JointModel`) on a stratified subset of ``optimizer_subset``
   rows (default :data:`~relaxep.estimators._multiclass_models.SEARCH_ROWS`, or all rows where there are fewer):
   the sparse posterior has no evidence gradient;
2. the ``M`` inducing inputs are placed by ``inducing_init`` (k-means by default,
   :func:`~relaxep.estimators._inducing.initial_inducing_points`) or taken as given, and *not learned*
   (``learn_inducing_points`` does not apply);
3. nested EP runs on all rows under the low-rank prior: :math:`O(n C^2 M^2)` a sweep, :math:`O(n (M + C^2))`
   memory.

Predictions are DTC's: :math:`\mu_{*c} = \phi_*^T \bar v_c`,
:math:`\Sigma_{*,cc'} = \phi_*^T (P^{-1})_{cc'} \phi_* + \delta_{cc'} (k_{**} + \sigma^2 - \phi_*^T \phi_*)`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import linalg
from sklearn.gaussian_process.kernels import Kernel
from sklearn.utils.validation import check_random_state

from relaxep._typing import Array
from relaxep.errors import DivergenceError
from relaxep.estimators._inducing import initial_inducing_points
from relaxep.estimators._model import LooTerms
from relaxep.estimators._multiclass_models import _JointModel, class_terms, joint_loo, refuse_full_cov
from relaxep.estimators._search import FitReport, _EvidenceSearch
from relaxep.inference.multiclass import MulticlassResult, infer_multiclass_sparse
from relaxep.likelihoods.multiclass import MulticlassLikelihood
from relaxep.posterior.fitc_prior import inducing_factor

__all__ = ["_SparseJointModel"]

#: test rows per block of a prediction (bounds the (rows, M) cross-covariance)
TEST_BLOCK = 4096


class _SparseJointModel:
    """``C`` latent functions with a shared kernel under a low-rank prior on ``M`` inducing inputs (module
    docstring); the same calls as :class:`~relaxep.estimators._multiclass_models._JointModel`.

    ``inducing_points``: an int ``M`` or an ``(M, d)`` array (checked); ``inducing_init``: ``"kmeans"`` or
    ``"random"``; ``n_jobs``: the threads of the row blocks.
    """

    def __init__(
        self,
        kernel: Kernel,
        likelihood: MulticlassLikelihood,
        n_classes: int,
        search: _EvidenceSearch,
        *,
        noise: float,
        inducing_points: int | Array,
        inducing_init: str = "kmeans",
        max_sweeps: int = 200,
        tol: float = 1e-4,
        warm_start: bool = True,
        n_jobs: int | None = None,
    ) -> None:
        self.kernel_, self.likelihood, self.n_classes = kernel, likelihood, n_classes
        self.noise, self.max_sweeps, self.tol, self.n_jobs = float(noise), max_sweeps, tol, n_jobs
        self.inducing_points, self.inducing_init = inducing_points, inducing_init
        self.dense = _JointModel(
            kernel, likelihood, n_classes, search, noise=noise, max_sweeps=max_sweeps, tol=tol, warm_start=warm_start
        )
        self.search = search

    def fit(self, X: Any, y: NDArray, random_state: Any, subset: int | None, learn: bool) -> FitReport:
        rng = check_random_state(random_state)
        bounds: tuple[str, ...] = ()
        if learn:
            bounds = self.dense.learn(X, y, random_state, subset)
            self.kernel_ = self.dense.kernel_
        self.Z = initial_inducing_points(X, self.inducing_points, self.inducing_init, rng)
        self.X, self.y = X, y
        self.result_ = self._run(self.kernel_, self.tol)
        if self.result_.status == "diverged":
            raise DivergenceError(
                f"sparse joint multi-class EP diverged after {self.result_.n_sweeps} sweeps with {self.likelihood!r}"
            )
        return FitReport(self.result_.status, self.result_.n_sweeps, self.result_.trace, None, bounds)

    def _features(self, kernel: Kernel, X: Any) -> Array:
        r""":math:`\Phi = K_{Xm} L_{mm}^{-T}` at ``kernel`` (:math:`K_{mm}` with the sparse prior's relative
        jitter); sets ``L_mm``."""
        _, self.L_mm, _ = inducing_factor(kernel, self.Z)
        return self._test_features(kernel, X)

    def _test_features(self, kernel: Kernel, X: Any) -> Array:
        K_mX = np.asarray(kernel(self.Z, X), dtype=float)
        return linalg.solve_triangular(self.L_mm, K_mX, lower=True, check_finite=False).T

    def _run(self, kernel: Kernel, tol: float) -> MulticlassResult:
        Phi = self._features(kernel, self.X)
        return infer_multiclass_sparse(
            Phi, self.y, self.likelihood, n_classes=self.n_classes, max_sweeps=self.max_sweeps, tol=tol,
            n_jobs=self.n_jobs,
        )  # fmt: skip

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        """The sparse EP evidence at ``theta`` (a fresh run on all rows; the fitted posterior is kept)."""
        if eval_gradient:
            raise ValueError(
                "eval_gradient: the sparse joint multi-class model has no evidence gradient (its hyperparameters "
                "are learned by the dense model on a subset)"
            )
        kernel = self.kernel_.clone_with_theta(theta)
        if not clone_kernel:
            self.kernel_.theta = theta
        L_mm = self.L_mm
        try:
            return np.float64(self._run(kernel, self.tol).log_evidence)
        finally:
            self.L_mm = L_mm  # (the fitted posterior's factor)

    def loo_terms(self) -> LooTerms:
        """Leave-one-out from the :math:`C`-dimensional cavities, as the dense joint model's
        (:func:`~relaxep.estimators._multiclass_models.joint_loo`)."""
        return class_terms(*joint_loo(self), np.asarray(self.y))

    def predict_latent(self, X: Any, full_cov: bool = False) -> tuple[Array, Array]:
        """The ``C`` latents' means ``(n, C)`` and covariances ``(n, C, C)`` at each row of ``X``."""
        refuse_full_cov(full_cov)
        """DTC's predictive mean ``(n_*, C)`` and covariance ``(n_*, C, C)`` (module docstring)."""
        parts = []
        for s in range(0, X.shape[0], TEST_BLOCK):
            Xb = X[s : s + TEST_BLOCK]
            k_diag = self.kernel_.diag(Xb) + self.noise
            parts.append(self.result_.predict_latent(self._test_features(self.kernel_, Xb), k_diag))
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def decision_function(self, X: Any) -> Array:
        """Log predictive probabilities ``(n, C)``."""
        mean, cov = self.predict_latent(X)
        return self.likelihood.predict_log_proba(mean, cov)

    def predict_log_proba(self, X: Any) -> Array:
        return self.decision_function(X)

    def predict_proba(self, X: Any) -> Array:
        return np.exp(self.decision_function(X))
