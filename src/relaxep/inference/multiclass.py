r"""Joint multi-class EP: nested EP for the multinomial probit, dense EP for the robust max.

The prior is :math:`C` independent GPs, :math:`f_c \sim GP(0, k_c)` (one kernel shared by all
classes is the common case); the latent of point ``i`` is :math:`f_i \in \mathbb{R}^C`.  The
likelihood picks the representation of the posterior:

* :class:`~relaxep.likelihoods.MultinomialProbit`: nested EP (Riihimaki, Jylanki & Vehtari 2013),
  :class:`~relaxep.posterior.multiclass.NestedPosterior`, :math:`O(C n^3)` a sweep;
* :class:`~relaxep.likelihoods.RobustMax`: dense EP on the label differences,
  :class:`~relaxep.posterior.multiclass.RobustMaxPosterior`, :math:`O(n^3 (C-1)^3)` a sweep.

:func:`infer_multiclass_sparse` runs nested EP under a low-rank prior :math:`f_c = \Phi v_c` instead
(:class:`~relaxep.posterior.multiclass.SparseNestedPosterior`, :math:`O(n C^2 m^2)` a sweep).

Both run through the one damped parallel loop of :mod:`relaxep.inference.damped_parallel`.
:mod:`relaxep.multiclass` re-exports this module's names with the likelihoods.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from relaxep._memory import FIT_REMEDY, check_memory, dense_bytes
from relaxep._typing import Array
from relaxep._validation import check_kernel_matrix, check_positive_int, check_positive_number, check_unit_interval
from relaxep.inference.damped_parallel import DampedParallelOptions, MulticlassResult, damped_parallel_ep
from relaxep.likelihoods.multiclass import MulticlassLikelihood, MultinomialProbit, RobustMax
from relaxep.posterior.multiclass import NestedPosterior, RobustMaxPosterior, SparseNestedPosterior
from relaxep.posterior.multiclass.sparse_nested import LowRankFeatures

__all__ = ["MulticlassResult", "evidence_gradient", "infer_multiclass", "infer_multiclass_sparse"]

#: the posterior representation of each likelihood (the first entry the likelihood is an instance of)
REPRESENTATIONS: tuple[tuple[type[MulticlassLikelihood], Any], ...] = (
    (MultinomialProbit, NestedPosterior),
    (RobustMax, RobustMaxPosterior),
)


def _class_kernels(K: Array, n_classes: int) -> list[Array]:
    """One kernel matrix per class: ``K`` repeated, or the slices of a ``(C, n, n)`` stack."""
    if K.ndim == 2:
        return [check_kernel_matrix(K, "K")] * n_classes
    if K.ndim == 3 and K.shape[0] == n_classes:
        return [check_kernel_matrix(K[c], f"K[{c}]") for c in range(n_classes)]
    raise ValueError(f"K must have shape (n, n) or ({n_classes}, n, n), got {K.shape}")


def infer_multiclass(
    K: ArrayLike,
    y: ArrayLike,
    likelihood: MulticlassLikelihood | None = None,
    *,
    n_classes: int | None = None,
    damping: float | None = None,
    max_sweeps: int = 200,
    tol: float = 1e-3,
    init: MulticlassResult | None = None,
    callback: Any = None,
) -> MulticlassResult:
    r"""Joint EP for multi-class GP classification.

    Parameters
    ----------
    K : array_like (n, n) or (C, n, n)
        Prior covariance, shared by the classes or one per class.
    y : array_like (n,)
        Class indices in ``{0, ..., C-1}``.
    likelihood : MultinomialProbit (default) or RobustMax
        The multinomial probit runs nested EP (:math:`O(C n^3)` a sweep); the robust max runs
        dense EP on the label differences (:math:`O(n^3 C^3)`, small ``n`` only).
    n_classes : int, optional
        ``C`` (default ``max(y) + 1``, or ``K.shape[0]`` for per-class kernels).
    damping : float in (0, 1], optional
        Step of a parallel sweep toward the new sites (halved while a step is improper; the
        step for the following sweeps shrinks by a quarter, down to 0.05, whenever a sweep's
        change exceeds the previous one);
        default 0.8 for nested EP (on digits at n = 600: 14 sweeps, 22 at 0.5, 28 at 0.9 and
        no convergence in 60 at 1), 0.5 for the robust max.
    max_sweeps, tol : int, float
        Stop when the largest move of a marginal (mean in standard deviations, variance as a
        log ratio) is below ``tol``.
    init : MulticlassResult, optional
        Warm start from its sites (same labels).
    callback : callable, optional
        ``callback(sweep, change)`` after every sweep.

    Returns
    -------
    MulticlassResult
        Its ``status`` says whether it converged (``"converged"``, ``"max_sweeps"`` or
        ``"diverged"``); like :func:`relaxep.infer`, this function does not warn.
    """
    likelihood = MultinomialProbit() if likelihood is None else likelihood
    if not isinstance(likelihood, MulticlassLikelihood):
        raise TypeError(f"likelihood must be a MulticlassLikelihood (MultinomialProbit, RobustMax), got {likelihood!r}")
    representation = next((post for lik, post in REPRESENTATIONS if isinstance(likelihood, lik)), None)
    if representation is None:
        raise TypeError(f"no joint inference for {likelihood!r}")
    Karr = np.asarray(K, dtype=float)
    y_arr, n_classes = _labels(y, n_classes if n_classes is not None or Karr.ndim != 3 else Karr.shape[0])
    n = Karr.shape[-1] if Karr.ndim >= 2 else 0
    # per class: its kernel (unless shared), its factor and two n x n blocks of the nested posterior
    check_memory(
        dense_bytes(n, 3 * n_classes + (n_classes if Karr.ndim == 3 else 1)),
        f"joint multi-class EP on n = {n} points and {n_classes} classes",
        FIT_REMEDY,
    )
    Ks = _class_kernels(Karr, n_classes)
    if Ks[0].shape[0] != y_arr.size:
        raise ValueError(f"K is {Ks[0].shape[0]} x {Ks[0].shape[0]} but y has {y_arr.size} labels")
    options = _options(representation.default_damping if damping is None else damping, max_sweeps, tol, callback)
    sites = init.sites if init is not None else None
    posterior = representation.start(Ks, y_arr.astype(int), n_classes, likelihood, sites)
    return damped_parallel_ep(posterior, options)


def _labels(y: ArrayLike, n_classes: int | None) -> tuple[Array, int]:
    """``y`` checked as class indices, and ``n_classes`` (default ``max(y) + 1``) checked against it."""
    y_arr = np.asarray(y)
    if y_arr.ndim != 1 or not np.issubdtype(y_arr.dtype, np.integer) or np.any(y_arr < 0):
        raise ValueError("y must be a 1-d array of class indices >= 0")
    n_classes = int(y_arr.max()) + 1 if n_classes is None else n_classes
    if n_classes < 2 or y_arr.max() >= n_classes:
        raise ValueError(f"n_classes must be >= 2 and exceed every label, got {n_classes}")
    return y_arr, n_classes


def _options(damping: float, max_sweeps: int, tol: float, callback: Any) -> DampedParallelOptions:
    return DampedParallelOptions(
        damping=check_unit_interval(damping, "damping"),
        max_sweeps=check_positive_int(max_sweeps, "max_sweeps"),
        tol=check_positive_number(tol, "tol"),
        callback=callback,
    )


def infer_multiclass_sparse(
    Phi: ArrayLike,
    y: ArrayLike,
    likelihood: MulticlassLikelihood | None = None,
    *,
    n_classes: int | None = None,
    damping: float | None = None,
    max_sweeps: int = 200,
    tol: float = 1e-3,
    init: MulticlassResult | None = None,
    callback: Any = None,
    n_jobs: int | None = None,
) -> MulticlassResult:
    r"""Nested EP for the multinomial probit under the low-rank prior :math:`f_c = \Phi_c v_c`,
    :math:`v_c \sim N(0, I_m)` (:mod:`relaxep.posterior.multiclass.sparse_nested`): :math:`O(n C^2 m^2)` a sweep,
    :math:`O(n (m + C^2))` memory.

    Parameters
    ----------
    Phi : array_like (n, m) or (C, n, m)
        The features, shared by the classes or one array per class: :math:`\Phi = K_{nm} L_{mm}^{-T}` for
        inducing inputs (:func:`~relaxep.posterior.multiclass.sparse_nested.low_rank_features`), so that
        :math:`\Phi\Phi^T = Q_{nn}`.
    y, n_classes, damping, max_sweeps, tol, init, callback
        As :func:`infer_multiclass` (``n_classes`` defaults to ``Phi.shape[0]`` for per-class features).
    n_jobs : int or None
        Threads for the row blocks of the :math:`O(n C^2 m^2)` sums (one BLAS thread each; ``None``: every core;
        :mod:`relaxep._threads`); the answer does not depend on it.
    likelihood : MultinomialProbit, optional
        The only one with a sparse posterior (the robust max's EP is dense: a ``TypeError``).

    Returns
    -------
    MulticlassResult
        Its ``predict_latent(Phi_star, k_diag)`` (and ``predict_proba``, ``predict_log_proba``) take the test
        points' features :math:`\Phi_* = K_{*m} L_{mm}^{-T}` in place of ``K_star``, and optionally their prior
        variances (DTC's predictive; ``None``: the subset of regressors').  ``evidence_gradient`` raises
        ``NotImplementedError``.
    """
    likelihood = MultinomialProbit() if likelihood is None else likelihood
    if not isinstance(likelihood, MultinomialProbit):
        raise TypeError(
            f"likelihood: the sparse joint multi-class posterior is nested EP for MultinomialProbit only, got "
            f"{likelihood!r} (the robust max runs dense: infer_multiclass)"
        )
    F = np.asarray(Phi, dtype=float)
    if F.ndim not in (2, 3) or not np.all(np.isfinite(F)):
        raise ValueError(f"Phi must be a finite (n, m) or (C, n, m) array, got shape {F.shape}")
    y_arr, n_classes = _labels(y, n_classes if n_classes is not None or F.ndim != 3 else F.shape[0])
    if F.ndim == 3 and F.shape[0] != n_classes:
        raise ValueError(f"Phi must have shape (n, m) or ({n_classes}, n, m), got {F.shape}")
    n, m = F.shape[-2:]
    if n != y_arr.size:
        raise ValueError(f"Phi has {n} rows but y has {y_arr.size} labels")
    C = n_classes
    # two posteriors alive in a step (marginals, outer sites), the cavities' batches, P and its inverse, a row block
    check_memory(
        8.0 * (n * C * C * 12 + n * C * 8 + 4 * (C * m) ** 2 + 3 * 4096 * C * m),
        f"sparse joint multi-class EP on n = {n} points, {C} classes and m = {m} features",
        "use fewer rows or classes, or multi_class='one_vs_rest'",
    )
    features = LowRankFeatures([F] * C if F.ndim == 2 else [F[c] for c in range(C)], n_jobs)
    options = _options(SparseNestedPosterior.default_damping if damping is None else damping, max_sweeps, tol, callback)
    sites = init.sites if init is not None else None
    posterior = SparseNestedPosterior.start(features, y_arr.astype(int), C, likelihood, sites)
    return damped_parallel_ep(posterior, options)


def evidence_gradient(result: MulticlassResult, dK: ArrayLike) -> Array:
    r"""Gradient of :math:`\log Z_{EP}` in the hyperparameters of a kernel shared by all classes.

    Parameters
    ----------
    result : MulticlassResult
        A converged fit (the gradient formula holds at an EP fixed point).
    dK : array_like (n, n, p)
        :math:`\partial K / \partial \theta_k` (scikit-learn's ``eval_gradient`` layout).

    Returns
    -------
    ndarray (p,)
        Nested EP: :math:`\tfrac12 \sum_c \alpha_c^T \dot K \alpha_c - \tfrac12 \operatorname{tr}(Q \dot K)`,
        :math:`Q = \sum_c (E_c - E_c M^{-1} E_c)`.  Robust max:
        :math:`\tfrac12 \gamma^T \dot G \gamma - \tfrac12 \operatorname{tr}((I + T G)^{-1} T \dot G)`.
    """
    return result.evidence_gradient(dK)
