r"""Integration over the hyperparameters after the MAP fit: ``integrate="ccd"`` or ``"grid"`` of the estimators.

The posterior of the log-hyperparameters :math:`\theta` (the kernel's, then the likelihood's; learned inducing inputs
stay at their learned value) is :math:`\log p(\theta | y) = \log p(y | \theta) + \log p(\theta) + c`, the (EP)
log evidence plus the log prior the search climbed (:mod:`relaxep.hyper.log_prior`).  From the MAP
:math:`\theta^*`:

1. the Hessian :math:`H` of the log posterior at :math:`\theta^*`, by central differences of its analytic gradient
   (the models' evidence gradient plus the prior's; :func:`~relaxep.hyper.design.hessian_from_gradient`);
2. a central composite design or a grid scaled along the eigenvectors of :math:`(-H)^{-1}`, with integration
   weights (:func:`~relaxep.hyper.design.theta_design`; Rue, Martino & Chopin 2009, section 6.5; GPstuff's
   ``gp_ia``, Vanhatalo et al. 2013); design points beyond the hyperparameters' bounds are dropped there;
3. at each design point one fit (EP from the converged sites of the nearest point fitted so far in the metric of
   :math:`-H`, the MAP first; or the closed form), whose log evidence plus log prior
   is the point's log posterior and weight, and whose posterior is its predictive:

.. math:: p(y_* | y) \approx \sum_k w_k\, p(y_* | y, \theta_k),
          \qquad w_k \propto \omega_k\, p(y | \theta_k)\, p(\theta_k)

(:math:`\omega_k` the design's weights), the :class:`~relaxep.estimators._mixture.MixtureModel`.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import numpy as np
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning

from relaxep._typing import Array
from relaxep.errors import DivergenceError, KernelNotPositiveDefiniteError
from relaxep.estimators._exact import _ExactModel
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._mixture import HyperSamples, MixtureModel
from relaxep.hyper.design import theta_design
from relaxep.hyper.hessian import hessian_from_gradient
from relaxep.inference.warm import WarmStarts

__all__ = ["INTEGRATE", "check_integrate", "integrate_model"]

#: the values of ``integrate``
INTEGRATE = ("map", "ccd", "grid")
#: the Hessian's finite-difference step in log space, and the change of the marginals that ends the EP runs of its
#: gradients (or the model's ``tol`` if smaller): on Ripley's synth (3 hyperparameters) the Hessian is then within
#: 1.4e-4 of one by steps of 1e-3 at 1e-10, for a seventh of the time (an EP gradient is good to about its ``tol``,
#: which adds ``tol / step`` to the differences; the truncation error is ``step**2`` times the third derivative)
HESSIAN_STEP = 1e-2
HESSIAN_TOL = 1e-5
#: the floor on the precision of a direction in which the log posterior is flat or not concave at the MAP (a
#: hyperparameter at its bound): a standard deviation of at most 1 in log space there
MIN_PRECISION = 1.0


def check_integrate(integrate: Any) -> str:
    """``integrate``: ``"map"``, ``"ccd"`` or ``"grid"`` (``ValueError`` naming it)."""
    if not (isinstance(integrate, str) and integrate in INTEGRATE):
        raise ValueError(
            f"integrate must be 'map' (the MAP hyperparameters), 'ccd' (a central composite design over them) or "
            f"'grid', got {integrate!r}"
        )
    return integrate


def entry_names(hyper: HyperVector) -> tuple[str, ...]:
    """Each entry of ``hyper.theta`` named: the hyperparameter's, with ``[j]`` for an element of a vector one."""
    return tuple(e.name if e.size == 1 else f"{e.name}[{e.element}]" for e in hyper.entries())


def point_model(model: Any, hyper: HyperVector, x: Array, start: Any = None) -> Any:
    """A fitted copy of ``model`` at the log-hyperparameters ``x`` (no search): EP from the converged sites
    ``start`` (``None``: ``model``'s), or the closed form; ``None`` where the fit diverged or its prior has no
    factor."""
    kernel, likelihood, _ = hyper.split(np.asarray(x, dtype=float))
    point = copy.copy(model)
    point.kernel_, point.likelihood = kernel, likelihood
    try:
        if isinstance(model, _ExactModel):
            point.fit(model.X, model.y, None)
        else:
            point.warm = WarmStarts(model.warm.enabled)
            point.fit(model.X, model.y, None, start=model.warm.start if start is None else start)
    except (DivergenceError, KernelNotPositiveDefiniteError, linalg.LinAlgError, np.linalg.LinAlgError):
        return None
    if not np.isfinite(point.result_.log_evidence) or point.result_.status == "diverged":
        return None
    return point


def _check_model(model: Any) -> None:
    y = np.asarray(getattr(model, "y", np.zeros(1)))
    if isinstance(model, _ExactModel) and y.ndim == 2 and y.shape[1] > 1:
        raise ValueError(f"integrate: a fit of y with {y.shape[1]} outputs is not integrated; fit one per output")
    if not hasattr(model, "log_evidence") or not hasattr(model, "kernel_"):
        raise ValueError(f"integrate: a model of kind {type(model).__name__} has no integration; use integrate='map'")


def integrate_model(model: Any, method: str) -> MixtureModel:
    """The mixture over the hyperparameters around the fitted (MAP) ``model`` by ``method`` (module docstring).

    Parameters
    ----------
    model : a fitted latent model (dense or sparse EP) or the closed-form Gaussian model
        Its ``search`` gives the log prior (``log_prior(hyper)``), its ``log_evidence`` the evidence gradient.
    method : {"ccd", "grid"}

    Returns
    -------
    MixtureModel
        Its first point is ``model`` itself (the design's centre, the MAP); points of zero weight are left out.
    """
    _check_model(model)
    hyper = HyperVector(model.kernel_, model.likelihood)
    x_map = np.array(hyper.theta, dtype=float)
    names = entry_names(hyper)
    log_prior = model.search.log_prior(hyper)
    log_post_map = float(model.result_.log_evidence) + log_prior(x_map)[0]
    if x_map.size == 0:  # nothing learned: the one point
        return MixtureModel([model], np.ones(1), HyperSamples(np.zeros((1, 0)), np.ones(1), names, np.array([0.0])))
    bounds = hyper.theta_bounds
    fits: dict[bytes, Any] = {}
    starts: list[tuple[Array, Any]] = [(x_map, getattr(getattr(model, "warm", None), "start", None))]

    def gradient(x: Array) -> Array:
        _, g = model.log_evidence(x, True, True)
        return np.asarray(g, dtype=float) + log_prior(x)[1]

    def log_posterior(x: Array) -> float:
        if np.array_equal(x, x_map):
            return log_post_map
        precision = -hessian
        nearest = min(starts, key=lambda s: float((x - s[0]) @ precision @ (x - s[0])))[1]
        point = point_model(model, hyper, x, nearest)
        if point is None:
            return -np.inf
        fits[x.tobytes()] = point
        if getattr(point, "warm", None) is not None and point.warm.start is not None:
            starts.append((x, point.warm.start))
        return float(point.result_.log_evidence) + log_prior(x)[0]

    hessian = _hessian(model, gradient, x_map, bounds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # (each point's fit: reported below, once)
        design = _design(log_posterior, x_map, hessian, method, bounds)
    models, keep = [], []
    for k, x in enumerate(design.points):
        point = model if np.array_equal(x, x_map) else fits.get(x.tobytes())
        if point is None and design.weights[k] > 0:  # pragma: no cover - every design point was evaluated
            point = point_model(model, hyper, x)
        if point is not None and design.weights[k] > 0:
            models.append(point)
            keep.append(k)
    _warn_unconverged(models)
    weights = design.weights[keep] / np.sum(design.weights[keep])
    order = sorted(range(len(keep)), key=lambda j: models[j] is not model)  # the MAP first
    samples = HyperSamples(
        np.array(design.points[keep][order]), weights[order], names, np.array(design.log_posterior[keep][order])
    )
    return MixtureModel([models[j] for j in order], weights[order], samples)


def _hessian(model: Any, gradient: Any, x_map: Array, bounds: Array) -> Array:
    """The log posterior's Hessian at the MAP by central differences of ``gradient``, its EP runs to
    :data:`HESSIAN_TOL` (so that the differences are of converged gradients)."""
    tol = getattr(model, "tol", None)
    if tol is not None:
        model.tol = min(float(tol), HESSIAN_TOL)
    try:
        return hessian_from_gradient(gradient, x_map, step=HESSIAN_STEP, lower=bounds[:, 0], upper=bounds[:, 1])
    finally:
        if tol is not None:
            model.tol = tol


def _design(log_posterior: Any, x_map: Array, hessian: Array, method: str, bounds: Array) -> Any:
    """:func:`~relaxep.hyper.design.theta_design`; where :math:`-H` is not positive definite at the MAP (a flat
    direction, a hyperparameter at its bound) its small eigenvalues floored at :data:`MIN_PRECISION`, with a
    warning."""
    options = dict(method=method, lower=bounds[:, 0], upper=bounds[:, 1])
    if np.linalg.eigvalsh(-hessian)[0] > 0:
        try:
            return theta_design(log_posterior, x_map, hessian, **options)
        except ValueError as exc:  # (a grid too large for the dimension: name the estimator's parameter)
            if method == "grid" and "grid" in str(exc):
                raise ValueError(f"integrate='grid' with {x_map.size} hyperparameters: {exc}") from exc
            raise
    warnings.warn(
        "integrate: the log posterior of the hyperparameters is not concave at the MAP (a hyperparameter at its "
        f"bound, or a flat direction); its directions of precision below {MIN_PRECISION} are given that precision",
        ConvergenceWarning,
        stacklevel=4,
    )
    return theta_design(log_posterior, x_map, hessian, min_precision=MIN_PRECISION, **options)


def _warn_unconverged(models: list[Any]) -> None:
    statuses = [m.result_.status for m in models]
    bad = [s for s in statuses if s not in ("converged",)]
    if bad:
        warnings.warn(
            f"integrate: inference did not converge at {len(bad)} of the {len(statuses)} design points "
            f"(statuses {sorted(set(bad))}); consider damping, more max_sweeps or a larger tol",
            ConvergenceWarning,
            stacklevel=4,
        )
