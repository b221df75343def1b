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

import warnings
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from relaxep._typing import Array
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._mixture import HyperSamples, MixtureModel
from relaxep.hyper.design import theta_design
from relaxep.hyper.hessian import hessian_from_gradient

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


def integrate_model(model: Any, method: str) -> MixtureModel:
    """The mixture over the hyperparameters around the fitted (MAP) ``model`` by ``method`` (module docstring).

    Parameters
    ----------
    model : a fitted latent model (dense or sparse EP) or the closed-form Gaussian model
        Its ``search`` gives the log prior (``log_prior(hyper)``), its ``log_evidence`` the evidence gradient (of
        ``model.with_tol(HESSIAN_TOL)``), its ``at_theta(x, start)`` the fit at a design point.
    method : {"ccd", "grid"}

    Returns
    -------
    MixtureModel
        Its first point is ``model`` itself (the design's centre, the MAP); points of zero weight are left out.
    """
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

    tight = model.with_tol(HESSIAN_TOL)  # (its EP runs to HESSIAN_TOL, or its own tol if smaller)

    def gradient(x: Array) -> Array:
        _, g = tight.log_evidence(x, True, True)
        return np.asarray(g, dtype=float) + log_prior(x)[1]

    def log_posterior(x: Array) -> float:
        if np.array_equal(x, x_map):
            return log_post_map
        precision = -hessian
        nearest = min(starts, key=lambda s: float((x - s[0]) @ precision @ (x - s[0])))[1]
        point = model.at_theta(x, nearest)
        if point is None:
            return -np.inf
        fits[x.tobytes()] = point
        if getattr(point, "warm", None) is not None and point.warm.start is not None:
            starts.append((x, point.warm.start))
        return float(point.result_.log_evidence) + log_prior(x)[0]

    hessian = hessian_from_gradient(gradient, x_map, step=HESSIAN_STEP, lower=bounds[:, 0], upper=bounds[:, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # (each point's fit: reported below, once)
        design = _design(log_posterior, x_map, hessian, method, bounds)
    models, keep = [], []
    for k, x in enumerate(design.points):
        point = model if np.array_equal(x, x_map) else fits.get(x.tobytes())
        if point is None and design.weights[k] > 0:  # pragma: no cover - every design point was evaluated
            point = model.at_theta(x)
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
