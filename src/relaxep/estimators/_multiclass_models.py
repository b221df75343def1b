"""The multi-class models behind :class:`~relaxep.GPClassifier` with more than two classes: :class:`_JointModel`,
one model of ``C`` latent functions with a shared kernel or one per class
(:func:`~relaxep.inference.multiclass.infer_multiclass`),
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
from sklearn.gaussian_process.kernels import CompoundKernel, Kernel
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
from relaxep.likelihoods.multiclass import MulticlassLikelihood, independent_log_proba
from relaxep.posterior import DensePrior
from relaxep.posterior.base import Prior
from relaxep.posterior.dense import kernel_matrix

__all__ = ["SEARCH_ROWS", "ClassPriors", "_JointModel", "_OneVsRest", "class_matrices", "search_rows"]


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
    """One binary estimator per class (``make_binary(**changes)`` makes one, its parameters changed by ``changes``),
    the classes' probabilities the multinomial probit of their latents (:meth:`decision_function`)."""

    def __init__(self, make_binary: Callable[..., Any], n_jobs: int | None = None) -> None:
        self.make_binary, self.n_jobs = make_binary, n_jobs
        #: the link's noise :math:`\tau` (:meth:`decision_function`; set after the fit by leave-one-out)
        self.link_noise_ = 1.0

    def fit(self, X: Any, y: NDArray, n_classes: int, rows: NDArray | None = None) -> None:
        """One binary fit per class; with ``rows`` (:func:`search_rows`), each learns its kernel on those rows, then
        is fitted on all at that kernel."""
        self.X, self.y = X, y  # (the rows and class indices, for loo())
        self.n_search_rows_ = y.size if rows is None else rows.size
        jobs = Parallel(n_jobs=self.n_jobs)
        if rows is None:
            self.estimators_ = jobs(delayed(self.make_binary().fit)(X, (y == c).astype(int)) for c in range(n_classes))
        else:
            Xs, ys = X[rows], y[rows]
            learned = jobs(delayed(self.make_binary().fit)(Xs, (ys == c).astype(int)) for c in range(n_classes))
            self.estimators_ = jobs(
                delayed(self.make_binary(kernel=e.kernel_, optimizer=None).fit)(X, (y == c).astype(int))
                for c, e in zip(range(n_classes), learned, strict=True)
            )
        self.kernel_ = CompoundKernel([e.kernel_ for e in self.estimators_])
        values = [e.log_marginal_likelihood_value_ for e in self.estimators_]
        self.log_marginal_likelihood_value_ = float(np.mean(values))  # (scikit-learn's one-vs-rest convention)

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        """The mean of the binary models' log evidence (scikit-learn's one-vs-rest convention), ``theta`` one
        kernel's (every class at it; the gradient the mean of theirs) or the classes' in turn (``kernel_.theta``,
        a ``CompoundKernel``'s; the gradient each class's entries over ``C``)."""
        C, sizes = len(self.estimators_), {e.kernel_.theta.size for e in self.estimators_}
        shared = len(sizes) == 1 and theta.size in sizes
        parts = [theta] * C if shared else [k.theta for k in with_theta(self.kernel_, theta).kernels]
        pairs = zip(self.estimators_, parts, strict=True)
        values = [e.log_marginal_likelihood(t, eval_gradient, True) for e, t in pairs]
        if not eval_gradient:
            return np.float64(np.mean(values))
        lml = np.float64(np.mean([v for v, _ in values]))
        grads = [g for _, g in values]
        return lml, (np.mean(grads, axis=0) if shared else np.concatenate(grads) / C)

    def predict_latent(self, X: Any) -> tuple[Array, Array]:
        pairs = [[to_numpy(a) for a in e.latent_mean_and_variance(X)] for e in self.estimators_]
        return np.column_stack([p[0] for p in pairs]), np.column_stack([p[1] for p in pairs])

    def decision_function(self, X: Any) -> Array:
        r"""Log class probabilities ``(n, C)``: the multinomial probit of the ``C`` binary latents taken as
        independent Gaussians :math:`N(m_c, v_c)`, :math:`y = \arg\max_c (f_c + \tau e_c)`
        (:func:`~relaxep.likelihoods.multiclass.independent_log_proba` with ``noise`` :math:`\tau`),
        :math:`p(y = c) = \int N(w | m_c, \tau^2 + v_c) \prod_{j \ne c} \Phi((w - m_j) / \sqrt{\tau^2 + v_j})\,
        dw`, with the link's noise :math:`\tau` (:attr:`link_noise_`) chosen by the leave-one-out predictive
        (:func:`~relaxep.estimators._loo_multiclass.fit_link_noise`).

        .. versionchanged:: 0.6
           It was :math:`\log \sigma(d_c) - \log \sum_k \sigma(d_k)` of each class's log-odds :math:`d_c`
           (scikit-learn's renormalisation), overconfident where several binary models claim a point: on digits
           NLL 0.093 against 0.052 at the same latents (``docs/multiclass``).
        """
        mean, var = self.predict_latent(X)
        return independent_log_proba(mean, var, self.link_noise_)

    def predict_log_proba(self, X: Any) -> Array:
        return self.decision_function(X)

    def predict_proba(self, X: Any) -> Array:
        return np.exp(self.decision_function(X))
