r"""The fitted-model protocol: what every estimator's ``model_`` answers, and the leave-one-out terms it returns.

An estimator validates its data, fits one model and delegates to it (as scikit-learn's
``GaussianProcessClassifier`` delegates to its ``base_estimator_``).  Every model class meets :class:`FittedModel`
(dense and sparse EP, :mod:`._models`; closed-form Gaussian regression, :mod:`._exact`; the mixture over the
hyperparameters, :mod:`._mixture`; the joint multi-class models and one-vs-rest, :mod:`._multiclass_models`; the
two-latent model, :mod:`._two_latent_model`; a Dask fit held at its inducing inputs, :mod:`._inducing_model`), so
what comes after a fit is asked of the model, never switched on its class:

* ``predict_latent(X, full_cov=False)``: the latent's posterior predictive;
* ``log_evidence(theta, eval_gradient, clone_kernel)``: the (EP) log evidence at other hyperparameters;
* ``loo_terms()``: the leave-one-out terms in the model's units (:class:`LooTerms`), which the estimator base turns
  into a :class:`~relaxep.assessment.LooResult` in the units of ``y`` as passed (one place, one target scaling);
* ``integrate(method)`` and ``at_theta(x, start)``: the mixture over the hyperparameters
  (:mod:`relaxep.estimators._integrate`) and the model refitted at other hyperparameters, with no search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from relaxep._typing import Array

__all__ = ["FittedModel", "LooTerms", "loo_not_implemented"]


@dataclass(frozen=True)
class LooTerms:
    r"""A fitted model's leave-one-out terms, in its own (normalised) units.

    Attributes
    ----------
    loo, in_sample : ndarray of shape (n,)
        :math:`\log p(y_i | y_{-i})` (NaN where a cavity is improper) and :math:`\log p(y_i | y)`.
    mean, var : ndarray
        The leave-one-out predictive that names outliers (:attr:`LooResult.loo_mean
        <relaxep.assessment.LooResult.loo_mean>`): the cavity of the likelihood's latent, or, for closed-form
        Gaussian regression (``tail`` ``None``), the leave-one-out predictive of ``y`` itself; multi-class: means
        ``(n, C)`` and covariances ``(n, C, C)``.
    n_improper : int
        Rows whose cavity is improper.
    y : ndarray
        The model's targets.
    tail : object or None
        What answers ``loo_tail(y, mean, var, pointwise)`` for :meth:`LooResult.outliers
        <relaxep.assessment.LooResult.outliers>` (the likelihood, or a model's own predictive); ``None``: the
        Gaussian predictive of ``y`` in ``mean``, ``var``.
    is_density : bool
        Whether the values are densities in ``y`` (shifted by :math:`-\log s` under ``normalize_y``'s scale
        :math:`s`), not probabilities of labels or counts.
    latent : tuple of ndarray
        The leave-one-out posterior of the latent, ``(mean, variance)`` (``loo_predict()``); default ``(mean, var)``.
    proba : ndarray of shape (n, C) or None
        A classifier's leave-one-out class probabilities.
    """

    loo: Array
    in_sample: Array
    mean: Array
    var: Array
    n_improper: int
    y: Array
    tail: Any = None
    is_density: bool = True
    latent: tuple[Array, Array] = field(default=None, repr=False)  # type: ignore[assignment]
    proba: Array | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.latent is None:
            object.__setattr__(self, "latent", (self.mean, self.var))


class FittedModel(Protocol):
    """What an estimator's ``model_`` answers (module docstring)."""

    kernel_: Any
    likelihood: Any
    result_: Any

    def predict_latent(self, X: Any, full_cov: bool = False) -> tuple[Array, Array]:
        """Latent posterior mean and variances (``full_cov``: covariance) at ``X``."""
        ...  # pragma: no cover

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        """The log evidence at the log-hyperparameters ``theta`` (and its gradient)."""
        ...  # pragma: no cover

    def loo_terms(self) -> LooTerms:
        """The leave-one-out terms, at no refit."""
        ...  # pragma: no cover

    def integrate(self, method: str) -> FittedModel:
        """The model integrated over its hyperparameters by ``method`` (``"ccd"`` or ``"grid"``)."""
        ...  # pragma: no cover


def loo_not_implemented(what: str) -> NotImplementedError:
    """The error of ``loo()`` for a model that has no leave-one-out terms: ``what`` says which model and why."""
    return NotImplementedError(f"loo(): leave-one-out is not implemented for {what} yet")
