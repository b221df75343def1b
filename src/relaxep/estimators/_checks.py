"""The estimators' parameters at the door: stored as given in ``__init__`` (:func:`store_parameters`), then checked
in ``fit`` (scikit-learn's convention), each check naming the parameter as the user spells it and saying what it
accepts, before any work."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import CompoundKernel, Kernel
from sklearn.utils.validation import check_random_state

from relaxep._xp import namespace
from relaxep.inference import InferenceMethod
from relaxep.likelihoods import Likelihood
from relaxep.posterior.rbf import as_scaled_rbf
from relaxep.sites import SiteRule

__all__ = [
    "LikelihoodMismatchError",
    "check_device_kernel",
    "check_host_arrays",
    "check_jitter",
    "check_kernel",
    "check_likelihood",
    "check_likelihood_for",
    "check_model",
    "check_regression_likelihood",
    "check_restarts",
    "check_rule",
    "input_format",
    "likelihood_kind",
    "random_state_of",
    "require_scaled_rbf",
    "store_parameters",
]


def store_parameters(estimator: object, parameters: Mapping[str, Any]) -> None:
    """Store each ``__init__`` parameter on ``estimator`` under its own name, as given: no check, no copy.

    scikit-learn's convention (``get_params`` reads each parameter of the ``__init__`` signature back by name,
    ``set_params`` and ``clone`` write them, ``clone`` checking that each is the object it passed).  An estimator's
    ``__init__`` lists its parameters, as scikit-learn asks, and its one statement is
    ``store_parameters(self, locals())``: its locals then are exactly its parameters (``self`` aside).
    """
    for name, value in parameters.items():
        if name != "self" and not name.startswith("__"):  # (``__class__`` where the body names ``super``)
            setattr(estimator, name, value)


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


def check_kernel(kernel: object, per_output: bool = False) -> None:
    """``kernel``: ``None`` or one scikit-learn ``Kernel`` (not a ``CompoundKernel``, which holds one per output,
    unless ``per_output``: the caller checks their number)."""
    if kernel is not None and not isinstance(kernel, Kernel):
        raise TypeError(
            f"kernel must be a scikit-learn Kernel (sklearn.gaussian_process.kernels, e.g. "
            f"ConstantKernel(1.0) * RBF(1.0)) or None, got {kernel!r}"
        )
    if isinstance(kernel, CompoundKernel):
        parts = getattr(kernel, "kernels", None)
        valid = isinstance(parts, list | tuple) and len(parts) > 0 and all(isinstance(k, Kernel) for k in parts)
        if not (per_output and valid):
            where = " (one kernel per class of the joint multi-class model: a list of kernels)" if per_output else ""
            raise ValueError(f"kernel cannot be a CompoundKernel here: it holds one kernel per output{where}")


def check_likelihood(likelihood: object, accepted: str, kinds: tuple[type, ...] = (Likelihood,)) -> None:
    """``likelihood``: ``None`` or an instance of one of ``kinds``; ``accepted`` names the classes in the message
    (a string such as ``"probit"`` is refused with the class to pass instead)."""
    if likelihood is None or isinstance(likelihood, kinds):
        return
    hint = " (pass an instance, not a name)" if isinstance(likelihood, str) else ""
    raise TypeError(f"likelihood must be {accepted}{hint}, got {likelihood!r}")


class LikelihoodMismatchError(ValueError, TypeError):
    """A likelihood instance meant for another estimator (e.g. ``OrdinalProbit()`` given to ``GPClassifier``).

    Both a ``ValueError`` (the value is refused) and a ``TypeError`` (what these checks raised before), as
    scikit-learn's ``InvalidParameterError`` is.
    """


#: what each kind of likelihood is for, and the estimator (local, Dask) that fits it
_PURPOSE = {
    "binary": ("two classes", "GPClassifier", "DaskGPClassifier"),
    "multiclass": ("more than two unordered classes", "GPClassifier", None),
    "ordinal": ("ordered classes", "GPOrdinalClassifier", None),
    "count": ("counts", "GPRegressor", "DaskGPRegressor"),
    "survival": ("censored event times", "GPSurvivalRegressor", "DaskGPSurvivalRegressor"),
    "real": ("real targets", "GPRegressor", "DaskGPRegressor"),
    "two_latent": ("real targets with a noise of their own latent", "GPHeteroscedasticRegressor", None),
}

#: the kinds (:attr:`Likelihood.kind <relaxep.likelihoods.Likelihood.kind>`) each estimator fits
_ACCEPTS = {
    "GPClassifier": ("binary", "multiclass"),
    "DaskGPClassifier": ("binary",),
    "GPOrdinalClassifier": ("ordinal",),
    "GPRegressor": ("real", "count"),
    "DaskGPRegressor": ("real", "count"),
    "GPSurvivalRegressor": ("survival",),
    "DaskGPSurvivalRegressor": ("survival",),
}

_REGRESSION = (
    "None or a regression likelihood instance (Gaussian(), StudentT(), Laplace(), Tobit(), Poisson(), "
    "NegativeBinomial() or a Likelihood of real targets)"
)


def likelihood_kind(likelihood: Likelihood) -> str | None:
    """The likelihood's own :attr:`~relaxep.likelihoods.Likelihood.kind` (``"binary"``, ``"multiclass"``,
    ``"ordinal"``, ``"count"``, ``"survival"``, ``"two_latent"``, ``"real"``), or ``None`` for a ``"real"`` one of
    another latent dimension than 1 (no estimator fits it)."""
    kind = likelihood.kind
    return None if kind == "real" and likelihood.latent_dim != 1 else kind


def check_likelihood_for(likelihood: object, estimator: str, accepted: str) -> None:
    """``likelihood`` for ``estimator`` (a key of ``_ACCEPTS``): ``None`` or a likelihood of a kind it fits.

    Parameters
    ----------
    likelihood : object
        The estimator's ``likelihood`` parameter.
    estimator : str
        The estimator's class name, e.g. ``"GPClassifier"``.
    accepted : str
        What it accepts, in words (the messages' tail).

    Raises
    ------
    TypeError
        ``likelihood`` is not a relaxep ``Likelihood`` instance (a string: pass an instance).
    LikelihoodMismatchError
        A likelihood of another estimator's kind: the message names what it is for and the estimator to use
        instead, e.g. ``likelihood=OrdinalProbit(...) is for ordered classes: use GPOrdinalClassifier``.
    """
    check_likelihood(likelihood, accepted)
    if likelihood is None:
        return
    kind = likelihood_kind(likelihood)  # type: ignore[arg-type]
    if kind in _ACCEPTS[estimator]:
        return
    if kind is None:
        raise LikelihoodMismatchError(
            f"likelihood={likelihood!r} has latent_dim={likelihood.latent_dim!r}, which no relaxep estimator "  # type: ignore[attr-defined]
            f"fits; {estimator}'s likelihood must be {accepted}"
        )
    purpose, local, dask = _PURPOSE[kind]
    use = dask if estimator.startswith("Dask") and dask else local
    if estimator.startswith("Dask") and not use.startswith("Dask"):
        use += " (one process: no Dask estimator fits it)"
    raise LikelihoodMismatchError(
        f"likelihood={likelihood!r} is for {purpose}: use {use}; {estimator}'s likelihood must be {accepted}"
    )


def check_regression_likelihood(likelihood: object, estimator: str = "GPRegressor") -> None:
    """``None`` or a likelihood of one real or count target per latent: a ``TypeError`` for another type, a
    :class:`LikelihoodMismatchError` naming the estimator to use for a classification or ordinal one."""
    check_likelihood_for(likelihood, estimator, _REGRESSION)


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


def check_model(
    kernel: object, likelihood: object, rule: object, estimator: str, accepted: str, per_output: bool = False
) -> None:
    """The model an estimator is given, checked first in ``fit``: ``kernel`` (:func:`check_kernel`, ``per_output``
    as there), ``likelihood`` for ``estimator`` (:func:`check_likelihood_for`, ``accepted`` naming what it takes)
    and ``rule`` (:func:`check_rule`)."""
    check_kernel(kernel, per_output)
    check_likelihood_for(likelihood, estimator, accepted)
    check_rule(rule)


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
    require_scaled_rbf(
        kernel, n_features,
        f"kernel: on arrays other than numpy's (scikit-learn's array_api_dispatch) {estimator} computes the "
        f"kernel on the arrays' device, for RBF or ConstantKernel * RBF only; got {kernel!r}: use one of "
        "those, or numpy arrays for any other kernel",
    )  # fmt: skip


def require_scaled_rbf(kernel: Any, n_features: int, message: str) -> None:
    """A ``TypeError`` with ``message`` unless ``kernel`` is ``RBF`` or ``ConstantKernel * RBF`` on ``n_features``
    inputs (:func:`~relaxep.posterior.rbf.as_scaled_rbf`): the paths that need its closed form."""
    try:
        as_scaled_rbf(kernel, n_features)
    except (TypeError, ValueError) as exc:
        raise TypeError(message) from exc


def check_jitter(jitter: object) -> None:
    """``jitter``: a finite real number >= 0 (a ``TypeError`` for another type, a ``ValueError`` otherwise)."""
    if isinstance(jitter, bool) or not isinstance(jitter, numbers.Real):
        raise TypeError(f"jitter must be a real number >= 0, got {jitter!r}")
    if not (np.isfinite(jitter) and jitter >= 0.0):
        raise ValueError(f"jitter must be finite and >= 0, got {jitter!r}")


def random_state_of(random_state: Any) -> np.random.RandomState:
    """``check_random_state(random_state)``, its error naming ``random_state``."""
    try:
        return check_random_state(random_state)
    except ValueError as exc:
        raise ValueError(f"random_state: {exc}") from None


def check_host_arrays(estimator: str, **arrays: Any) -> None:
    """A ``TypeError`` at the door for an estimator that fits numpy arrays only, where one of ``arrays`` is another
    array library's (scikit-learn's ``array_api_dispatch``): it names the argument and the estimators that run
    there."""
    for name, value in arrays.items():
        if not namespace(value).on_host:
            raise TypeError(
                f"{name}: {estimator} fits numpy arrays only; got an array of another library. Convert it with "
                "numpy.asarray (GPClassifier and GPRegressor run on other array libraries' devices)"
            )


def resolve_normalize_y(normalize_y: bool | str, kernel: Kernel | None, likelihood: Likelihood | None) -> bool:
    """Whether a regressor centres and scales its targets: ``normalize_y``, its ``"auto"`` resolved (on for the
    default model, no kernel and no likelihood; off otherwise); a ``ValueError`` naming it for any other value."""
    if isinstance(normalize_y, (bool, np.bool_)):
        return bool(normalize_y)
    if normalize_y != "auto":
        raise ValueError(f"normalize_y must be True, False or 'auto', got {normalize_y!r}")
    return kernel is None and likelihood is None
