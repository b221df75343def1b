"""The estimators' parameter checks at the door: each names the parameter as the user spells it and says
what it accepts, before any work (scikit-learn's convention: checked in ``fit``, not in ``__init__``)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import CompoundKernel, Kernel

from relaxep._xp import namespace
from relaxep.inference import InferenceMethod
from relaxep.likelihoods import Likelihood
from relaxep.sites import SiteRule

__all__ = [
    "check_device_kernel",
    "check_jitter",
    "check_kernel",
    "check_likelihood",
    "check_restarts",
    "check_rule",
    "input_format",
    "random_state_of",
]


def input_format(kernel: Kernel | None, X: Any = None) -> dict[str, Any]:
    """How far to validate ``X``: a float matrix for vector kernels, as given for structured ones.

    A kernel on sequences, strings or graphs (``requires_vector_input`` false, e.g. a string
    kernel) receives ``X`` as the user passed it, a list or 1-D array of objects.  ``X`` of another
    array library (scikit-learn's ``array_api_dispatch``): that library's float64.
    """
    if kernel is None or kernel.requires_vector_input:
        space = namespace(X)
        return {"dtype": np.float64 if space.on_host else space.xp.float64, "ensure_2d": True}
    return {"dtype": None, "ensure_2d": False}


def check_kernel(kernel: object) -> None:
    """``kernel``: ``None`` or one scikit-learn ``Kernel`` (not a ``CompoundKernel``, which holds one per output)."""
    if kernel is not None and not isinstance(kernel, Kernel):
        raise TypeError(
            f"kernel must be a scikit-learn Kernel (sklearn.gaussian_process.kernels, e.g. "
            f"ConstantKernel(1.0) * RBF(1.0)) or None, got {kernel!r}"
        )
    if isinstance(kernel, CompoundKernel):
        raise ValueError("kernel cannot be a CompoundKernel: it holds one kernel per output")


def check_likelihood(likelihood: object, accepted: str, kinds: tuple[type, ...] = (Likelihood,)) -> None:
    """``likelihood``: ``None`` or an instance of one of ``kinds``; ``accepted`` names the classes in the message
    (a string such as ``"probit"`` is refused with the class to pass instead)."""
    if likelihood is None or isinstance(likelihood, kinds):
        return
    hint = " (pass an instance, not a name)" if isinstance(likelihood, str) else ""
    raise TypeError(f"likelihood must be {accepted}{hint}, got {likelihood!r}")


def check_regression_likelihood(likelihood: object) -> None:
    """``None`` or a likelihood of one real target per latent (not a binary one): a ``TypeError`` naming it."""
    from relaxep.likelihoods import BinaryLikelihood

    lik = likelihood
    if lik is None:
        return
    if not isinstance(lik, Likelihood) or isinstance(lik, BinaryLikelihood) or lik.latent_dim != 1:
        raise TypeError(
            f"likelihood must be None or a regression likelihood instance (Gaussian(), StudentT(), Laplace() "
            f"or a Likelihood of real targets){' (pass an instance, not a name)' if isinstance(lik, str) else ''}, "
            f"got {lik!r}"
        )


def check_rule(rule: object) -> None:
    """``rule``: ``None``, ``"auto"``, a site rule or an inference method."""
    if rule is None or isinstance(rule, SiteRule | InferenceMethod):
        return
    if isinstance(rule, str) and rule == "auto":
        return
    raise TypeError(
        "rule must be None, 'auto', a relaxep SiteRule instance (EP(), PowerEP(u), RelaxedEP(c), "
        f"FractionalEP(f)) or an InferenceMethod (ConvergentEP(), DoubleLoopEP(), ...), got {rule!r}"
    )


def check_restarts(n_restarts: object) -> int:
    """``n_restarts_optimizer``: an integer >= 0 (a ``TypeError`` for another type, a ``ValueError`` below 0)."""
    if isinstance(n_restarts, bool | np.bool_) or not isinstance(n_restarts, numbers.Integral):
        raise TypeError(f"n_restarts_optimizer must be an integer >= 0, got {n_restarts!r}")
    if n_restarts < 0:
        raise ValueError(f"n_restarts_optimizer must be an integer >= 0, got {n_restarts!r}")
    return int(n_restarts)


def check_device_kernel(kernel: Any, n_features: int, estimator: str) -> None:
    """On another array library's ``X`` (:mod:`relaxep._xp`) the kernel is computed in closed form there: ``RBF``
    or ``ConstantKernel * RBF``; a ``TypeError`` naming ``kernel`` and the supported path otherwise."""
    from relaxep.posterior.rbf import as_scaled_rbf

    try:
        as_scaled_rbf(kernel, n_features)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"kernel: on arrays other than numpy's (scikit-learn's array_api_dispatch) {estimator} computes the "
            f"kernel on the arrays' device, for RBF or ConstantKernel * RBF only; got {kernel!r}: use one of "
            "those, or numpy arrays for any other kernel"
        ) from exc


def check_jitter(jitter: object) -> None:
    """``jitter``: a finite real number >= 0 (a ``TypeError`` for another type, a ``ValueError`` otherwise)."""
    if isinstance(jitter, bool) or not isinstance(jitter, numbers.Real):
        raise TypeError(f"jitter must be a real number >= 0, got {jitter!r}")
    if not (np.isfinite(jitter) and jitter >= 0.0):
        raise ValueError(f"jitter must be finite and >= 0, got {jitter!r}")


def random_state_of(random_state: Any) -> np.random.RandomState:
    """``check_random_state(random_state)``, its error naming ``random_state``."""
    from sklearn.utils.validation import check_random_state

    try:
        return check_random_state(random_state)
    except ValueError as exc:
        raise ValueError(f"random_state: {exc}") from None
