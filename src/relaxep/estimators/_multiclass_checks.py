"""What ``GPClassifier`` checks before a multi-class fit: a ``CompoundKernel``'s place and size, and the options
the joint model (dense or sparse) takes.  Each refusal names the argument and the remedy."""

from __future__ import annotations

from typing import Any

from sklearn.gaussian_process.kernels import RBF, CompoundKernel, ConstantKernel

from relaxep.estimators._checks import check_device_kernel
from relaxep.likelihoods.multiclass import MulticlassLikelihood, MultinomialProbit

__all__ = ["check_class_kernels", "check_joint_options"]


def check_class_kernels(kernel: CompoundKernel, n_classes: int, multi_class: str) -> None:
    """A ``CompoundKernel``: one kernel per class of the joint model (``multi_class`` resolved), and only there."""
    if n_classes < 3 or multi_class != "joint":
        raise ValueError(
            "kernel cannot be a CompoundKernel here: it holds one kernel per class of the joint multi-class model "
            f"(more than two classes, multi_class='joint'); here there are {n_classes} classes and multi_class="
            f"{multi_class!r}: give one kernel"
        )
    if len(kernel.kernels) != n_classes:
        raise ValueError(
            f"kernel cannot be this CompoundKernel: it holds {len(kernel.kernels)} kernels, one per class is needed "
            f"(the data have {n_classes} classes)"
        )


def check_joint_options(estimator: Any, likelihood: Any) -> None:
    """The joint model's ``likelihood`` (multi-class), ``representation`` (not Markov), ``rule`` (none),
    ``optimizer_subset`` (at least ``C``) and, with ``inducing_points``, the sparse model's: the multinomial probit,
    one kernel, no stochastic search."""
    if not isinstance(likelihood, MulticlassLikelihood):
        raise TypeError(
            "with more than two classes and multi_class='joint', likelihood must be a multi-class likelihood "
            f"(relaxep.MultinomialProbit or relaxep.RobustMax), got {likelihood!r}; "
            "use multi_class='one_vs_rest' for a binary likelihood"
        )
    if getattr(estimator, "representation", "auto") == "markov":
        raise ValueError("representation='markov': binary or one-vs-rest fits only; the joint model is dense")
    if getattr(estimator, "monotone", None) is not None:
        raise ValueError("monotone: binary or one-vs-rest fits only (multi_class='one_vs_rest')")
    rule = estimator.rule
    if rule is not None and not (isinstance(rule, str) and rule == "auto"):
        raise ValueError(f"rule={rule!r} does not apply to joint multi-class inference (nested EP); leave it None")
    n_classes, subset = estimator.classes_.size, estimator.optimizer_subset
    if subset is not None and int(subset) < n_classes:
        raise ValueError(f"optimizer_subset must be at least the number of classes, got {subset!r}")
    if estimator.inducing_points is None:
        return
    if not isinstance(likelihood, MultinomialProbit):
        raise TypeError(
            f"likelihood={likelihood!r} with inducing_points: the sparse joint multi-class model is nested EP "
            "for MultinomialProbit only (the robust max's EP is dense); drop inducing_points, or use "
            "MultinomialProbit() or multi_class='one_vs_rest'"
        )
    if isinstance(estimator.kernel_, CompoundKernel):
        raise ValueError(
            "kernel: one kernel per class (a CompoundKernel) is for the dense joint model; with "
            "inducing_points give one kernel, shared by the classes"
        )
    if isinstance(estimator.optimizer, str) and estimator.optimizer == "stochastic":
        raise ValueError(
            "optimizer='stochastic' does not apply to the sparse joint multi-class model: its kernel is "
            "learned by the dense joint model on optimizer_subset rows; use 'auto' or 'fmin_l_bfgs_b'"
        )


def check_array_api(kernel: Any, n_features: int, n_classes: int, multi_class: str) -> None:
    """What a classifier runs on another array library's ``X`` (:mod:`relaxep._xp`): a binary model, dense or sparse,
    with an RBF or ConstantKernel * RBF ``kernel`` (``None``: the default), and more than two classes one-vs-rest (one
    such binary model per class, fitted in turn); the joint multi-class model is refused here, at the door, naming the
    path that runs (the sparse plan refuses L-BFGS-B there)."""
    kernel = ConstantKernel(1.0) * RBF(1.0) if kernel is None else kernel
    check_device_kernel(kernel, n_features, "GPClassifier")
    if n_classes > 2 and multi_class == "joint":
        raise TypeError(
            f"X: the joint multi-class model (nested EP over {n_classes} latents) runs on numpy arrays only; "
            "on another array library (scikit-learn's array_api_dispatch) give multi_class='one_vs_rest', "
            "which fits one binary model per class there, or pass numpy arrays"
        )
