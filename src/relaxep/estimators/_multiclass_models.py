r"""The joint multi-class models behind :class:`~relaxep.GPClassifier` with more than two classes and
``multi_class="joint"``: :class:`_JointModel`, one model of ``C`` latent functions with a shared kernel or one per
class (:func:`~relaxep.inference.multiclass.infer_multiclass`), with ``fit``, ``log_evidence(theta, eval_gradient,
clone_kernel)``, ``predict_latent(X)``, ``loo_terms()`` and the classifier's heads, as the binary model of
:mod:`relaxep.estimators._models`.  With ``inducing_points`` the joint model is
:mod:`relaxep.estimators._sparse_multiclass_model`'s, which learns its kernel through :meth:`_JointModel.learn`.
One-vs-rest is :mod:`relaxep.estimators._one_vs_rest`'s.

Leave-one-out (:func:`joint_loo`): nested EP (multinomial probit) has one Gaussian site per row on the :math:`C`
latents :math:`f_i`, so the cavity :math:`N(f_i | m_i, \Lambda_i^{-1})`, :math:`\Lambda_i = \Sigma_i^{-1} - \Pi_i`,
is EP's approximation of :math:`p(f_i | y_{-i})` and :math:`\log p(y_i | y_{-i}) \approx \log\int p(y_i | f)
N(f | m_i, \Lambda_i^{-1}) df`, the tilted normaliser (by the inner EP, as the fit computes it; Riihimaki, Jylanki &
Vehtari 2013).  The robust max (sites on :math:`w_i`, the margins of the observed class) is refused for now.  The
in-sample densities are the same at the posterior marginals; the leave-one-out class probabilities are the
likelihood's predictive at the cavity.
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from sklearn.gaussian_process.kernels import CompoundKernel, Kernel
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_random_state

from relaxep._typing import Array
from relaxep.errors import DivergenceError
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._model import LooTerms
from relaxep.estimators._search import FitReport, _EvidenceSearch, at_bounds, scored
from relaxep.inference.multiclass import MulticlassResult, infer_multiclass
from relaxep.inference.multiclass import evidence_gradient as multiclass_evidence_gradient
from relaxep.inference.warm import WarmStarts
from relaxep.likelihoods.multiclass import MulticlassLikelihood
from relaxep.posterior import DensePrior
from relaxep.posterior.base import Prior
from relaxep.posterior.dense import kernel_matrix

__all__ = [
    "SEARCH_ROWS",
    "ClassPriors",
    "ClassTail",
    "_JointModel",
    "class_matrices",
    "joint_loo",
    "search_rows",
]


#: rows a multi-class search learns on where ``optimizer_subset`` is ``None`` (stratified by class): on digits
#: (1297 rows) one-vs-rest errs on 1.4% either way, fitted in 46 s against 744 s on all rows (docs/decisions.md)
SEARCH_ROWS = 500


def search_rows(y: NDArray, subset: int | None, random_state: Any) -> NDArray | None:
    """The rows a multi-class search learns on: a stratified draw of ``subset`` (``None``: :data:`SEARCH_ROWS`)
    rows, or ``None`` (all of them) where there are no more.  A private generator: ``random_state=None`` must not
    draw from numpy's global one."""
    size = SEARCH_ROWS if subset is None else int(subset)
    if size >= y.size:
        return None
    seed = np.random.RandomState() if random_state is None else check_random_state(random_state)
    rows, _ = train_test_split(np.arange(y.size), train_size=size, stratify=y, random_state=seed)
    return np.sort(rows)


# ------------------------------------------------------------------ joint multi-class
def _itself(result: MulticlassResult) -> MulticlassResult:
    return result  # (infer_multiclass starts from a result's sites)


def class_matrices(kernel: Kernel, X: Any, noise: float, eval_gradient: bool) -> tuple[Array, Any]:
    """The prior covariance and its gradient: ``(n, n)`` and ``(n, n, p)`` for a kernel shared by the classes;
    ``(C, n, n)`` and a list of ``C`` arrays ``(n, n, p_c)`` for a :class:`~sklearn.gaussian_process.kernels.
    CompoundKernel` of one kernel per class (its ``theta`` is theirs concatenated, in class order)."""
    if not isinstance(kernel, CompoundKernel):
        return kernel_matrix(kernel, X, noise, eval_gradient)
    pairs = [kernel_matrix(k, X, noise, eval_gradient) for k in kernel.kernels]
    return np.stack([K for K, _ in pairs]), ([dK for _, dK in pairs] if eval_gradient else None)


def with_theta(kernel: Kernel, theta: Array) -> Kernel:
    """``kernel.clone_with_theta(theta)``, a ``CompoundKernel``'s split between its kernels in turn (as
    :meth:`HyperVector.split` splits a tuple of kernels; scikit-learn's own ``CompoundKernel.theta`` setter does not
    split it)."""
    if not isinstance(kernel, CompoundKernel):
        return kernel.clone_with_theta(theta)
    kernels, _, _ = HyperVector(tuple(kernel.kernels)).split(np.asarray(theta, dtype=float))
    return CompoundKernel(list(kernels))


class ClassPriors:
    """The priors of one kernel per class (a ``CompoundKernel``) at the training inputs, and their test
    covariances, as :class:`~relaxep.posterior.DensePrior` answers for a shared kernel."""

    #: test rows per block of :meth:`predict_at` (bounds the ``C x block x n`` cross-covariances)
    test_block = 1000

    def __init__(self, kernel: CompoundKernel, X: Any, noise: float) -> None:
        self.kernel, self.X, self.noise = kernel, X, float(noise)
        self.K = class_matrices(kernel, X, noise, False)[0]

    def cross_covariance(self, X_test: Any) -> tuple[Array, Array]:
        """``K_*`` (C, n_*, n) and ``k_** + noise`` (C, n_*), one slice per class."""
        kernels = self.kernel.kernels
        return np.stack([k(X_test, self.X) for k in kernels]), np.stack([k.diag(X_test) + self.noise for k in kernels])

    #: ``predict(K_*, k_**)`` in blocks of :attr:`test_block` rows, as every prior answers it
    predict_at = Prior.predict_at


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
        K, dK = class_matrices(with_theta(self.kernel_, theta), X, self.noise, eval_gradient)
        result = self._run(K, y, tol)
        gradient = partial(multiclass_evidence_gradient, result, dK) if eval_gradient else None
        return scored(result.status, result.log_evidence, gradient, theta)

    def learn(self, X: Any, y: NDArray, random_state: Any, subset: int | None) -> tuple[str, ...]:
        """Maximise the evidence over ``kernel_.theta`` on ``X`` or a stratified subset of rows
        (:func:`search_rows`; the kernel set to the best); returns the hyperparameters found at their bounds."""
        rows = search_rows(y, subset, random_state)
        Xo, yo = (X, y) if rows is None else (X[rows], y[rows])
        self.n_search_rows_ = yo.size
        search_tol = max(float(self.tol), 1e-2)
        evidence = partial(self.evidence, X=Xo, y=yo, tol=search_tol)
        per_class = isinstance(self.kernel_, CompoundKernel)  # (its theta: the class kernels' in turn)
        hyper = HyperVector(tuple(self.kernel_.kernels) if per_class else self.kernel_)
        best = self.search.maximise(evidence, hyper, check_random_state(random_state), options=self.OPTIONS)
        if best is not None:
            self.kernel_ = with_theta(self.kernel_, best)
        if yo.size != y.size:
            self.warm.reset()  # its sites belong to the subset
        return at_bounds(self.kernel_)

    def fit(self, X: Any, y: NDArray, random_state: Any, subset: int | None, learn: bool) -> FitReport:
        bounds = self.learn(X, y, random_state, subset) if learn else ()
        self.X, self.y = X, y
        per_class = isinstance(self.kernel_, CompoundKernel)
        self.prior_ = (
            ClassPriors(self.kernel_, X, self.noise)
            if per_class
            else DensePrior.from_kernel(self.kernel_, X, self.noise)
        )
        result = self._run(self.prior_.K, y)
        if result.status == "diverged":
            raise DivergenceError(
                f"joint multi-class EP diverged after {result.n_sweeps} sweeps with {self.likelihood!r}"
            )
        self.result_ = result
        return FitReport(result.status, result.n_sweeps, result.trace, None, bounds)

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        if not clone_kernel:
            self.kernel_ = with_theta(self.kernel_, theta)
        with self.warm.held():  # the value as infer_multiclass reports it (not scored: a nan stays nan)
            K, dK = class_matrices(with_theta(self.kernel_, theta), self.X, self.noise, eval_gradient)
            result = self._run(K, self.y)
        lml = np.float64(result.log_evidence)
        return (lml, multiclass_evidence_gradient(result, dK)) if eval_gradient else lml

    def predict_latent(self, X: Any, full_cov: bool = False) -> tuple[Array, Array]:
        """The ``C`` latents' means ``(n, C)`` and covariances ``(n, C, C)`` at each row of ``X`` (``full_cov``
        across rows: refused)."""
        refuse_full_cov(full_cov)
        return self.prior_.predict_at(self.result_.predict_latent, X)

    def loo_terms(self) -> LooTerms:
        """Leave-one-out from the :math:`C`-dimensional cavities (:func:`joint_loo`)."""
        return class_terms(*joint_loo(self), np.asarray(self.y))

    def decision_function(self, X: Any) -> Array:
        """Log predictive probabilities ``(n, C)``."""
        return self.prior_.predict_at(self.result_.predict_log_proba, X)

    def predict_log_proba(self, X: Any) -> Array:
        return self.decision_function(X)

    def predict_proba(self, X: Any) -> Array:
        return np.exp(self.decision_function(X))


def refuse_full_cov(full_cov: bool) -> None:
    """A multi-class model's latents have no covariance across test rows here (``ValueError`` naming ``full_cov``)."""
    if full_cov:
        raise ValueError("full_cov: a multi-class model gives each row's latents, not their covariance across rows")


# ------------------------------------------------------------------ leave-one-out
def class_terms(
    loo: Array, in_sample: Array, mean: Array, cov: Array, proba: Array, improper: int, y: Array
) -> LooTerms:
    """A multi-class model's :class:`~relaxep.estimators._model.LooTerms`: probabilities of labels, whose tail is
    :class:`ClassTail`'s."""
    return LooTerms(loo, in_sample, mean, cov, improper, y, ClassTail(proba, loo), is_density=False, proba=proba)


class ClassTail:
    """Each row's leave-one-out probability of the classes no more probable than the observed one."""

    def __init__(self, proba: Array, pointwise: Array) -> None:
        self.proba, self.pointwise = proba, pointwise

    def loo_tail(self, y: Array, mean: Any, var: Any, pointwise: Any) -> Array:
        observed = self.proba[np.arange(y.shape[0]), y.astype(int)]
        return np.sum(np.where(self.proba <= observed[:, None] * (1 + 1e-12), self.proba, 0.0), axis=1)


def joint_loo(model: Any) -> tuple[Array, Array, Array, Array, Array, int]:
    """``(loo, in_sample, cavity mean, cavity covariance, LOO class probabilities, improper count)``."""
    result, likelihood = model.result_, model.likelihood
    post = result.posterior
    y = np.asarray(model.y).astype(int)
    mean, cov, ok = post.cavities()
    loo = np.full(y.shape[0], np.nan)
    if hasattr(post, "w_mean"):
        raise NotImplementedError(
            "loo(): leave-one-out is not implemented for the robust max likelihood yet (its sites live "
            "on the margins w of the observed class; not yet checked against refits); MultinomialProbit's is"
        )
    proba = np.full((y.shape[0], model.n_classes), np.nan)
    if np.any(ok):
        loo[ok] = likelihood.tilted_moments(mean[ok], cov[ok], y[ok])[0]
        proba[ok] = likelihood.predict_proba(mean[ok], cov[ok])
    in_sample = likelihood.tilted_moments(result.mean, result.cov, y)[0]
    return loo, np.asarray(in_sample, dtype=float), mean, cov, proba, int(np.sum(~ok))
