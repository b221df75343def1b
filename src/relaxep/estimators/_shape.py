r"""Shape known in advance: observed derivatives and monotonicity, by EP on the joint prior of :math:`f` and its
partial derivatives (:mod:`relaxep.posterior.derivatives`; Riihimäki & Vehtari 2010, "Gaussian processes with
monotonicity information", AISTATS; GPstuff's ``gp_monotonic``).

A fit holds the value rows and, after them, derivative rows: observed derivatives (a Gaussian factor each) and
*virtual* ones, :math:`\Phi(s f'_d(v)/\nu)` at chosen inputs :math:`v` (:mod:`relaxep.likelihoods.derivative_sites`).
The virtual inputs are placed as GPstuff places them, adaptively:

1. start from :data:`START` inputs spread along each monotone dimension (quantiles of the training inputs);
2. fit (the kernel and the likelihood learned by the EP evidence with the virtual sites included);
3. find the candidates where the posterior mean's derivative has the wrong sign: the training inputs and, for one
   input column, the midpoints between consecutive ones;
4. add, for each run of consecutive wrong candidates along the input, its worst one (the most standard deviations
   on the wrong side), the worst runs first and at most a quarter of the cap a round; refit from the learned
   hyperparameters; stop where no candidate is wrong or at the cap, :data:`MAX_FRACTION` of the training rows
   (at least 2).

Without ``monotone`` or observed derivatives none of this runs: the fit is the plain one, bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep.estimators._model import LooTerms
from relaxep.estimators._models import _DensePriors
from relaxep.estimators._search import FitReport, _EvidenceSearch
from relaxep.inference.loo import cavity_loo
from relaxep.likelihoods import Likelihood
from relaxep.likelihoods.derivative_sites import OBSERVED, STEEPNESS, DerivativeSites, derivative_rows
from relaxep.posterior import DensePrior
from relaxep.posterior.derivatives import VALUE, check_derivative_kernel, joint_covariance, joint_gradient

__all__ = ["MAX_FRACTION", "START", "Derivatives", "ShapePlan", "check_monotone", "fit_shaped", "observed_derivatives"]

#: the virtual inputs at the start, per monotone dimension
START = 2
#: the cap on the virtual inputs, as a fraction of the training rows
MAX_FRACTION = 0.25


@dataclass(frozen=True)
class Derivatives:
    """Observed partial derivatives, for :meth:`GPRegressor.fit <relaxep.GPRegressor.fit>`'s ``derivatives``.

    Parameters
    ----------
    X : array of shape (m, d)
        Where each derivative is observed.
    dim : int or array of shape (m,)
        The input dimension each is the derivative in.
    values : array of shape (m,)
        The observed :math:`\\partial f/\\partial x_{dim}`, in the units of ``y`` per unit of ``X``.
    noise : float or array of shape (m,)
        Their noise variances (default 1e-8: exact observations, up to jitter).
    """

    X: Any
    dim: Any
    values: Any
    noise: Any = 1e-8

    def checked(self, d: int) -> tuple[Array, Array, Array, Array]:
        """``(X, dims, values, noise)`` as arrays, checked, each a ``ValueError`` naming ``derivatives``."""
        X = np.asarray(self.X, dtype=float)
        X = X.reshape(-1, 1) if X.ndim == 1 and d == 1 else X
        if X.ndim != 2 or X.shape[1] != d:
            raise ValueError(f"derivatives.X must have shape (m, {d}), got {np.shape(self.X)}")
        m = X.shape[0]
        dims = np.broadcast_to(np.asarray(self.dim), (m,)).astype(np.intp)
        values = np.broadcast_to(np.asarray(self.values, dtype=float), (m,)).copy()
        noise = np.broadcast_to(np.asarray(self.noise, dtype=float), (m,)).copy()
        if np.any((dims < 0) | (dims >= d)):
            raise ValueError(f"derivatives.dim must be in [0, {d - 1}]")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(values)) and np.all(noise > 0)):
            raise ValueError("derivatives: X and values must be finite and noise positive")
        return X, dims, values, noise


def observed_derivatives(derivatives: Any, X: Any, scale: float) -> tuple[Array, Array, Array, Array] | None:
    """``derivatives`` (:class:`Derivatives` or ``None``) for the rows ``X``, checked, its values divided by the
    targets' ``scale`` and its noise by its square (``normalize_y``'s units); a ``TypeError`` naming it for anything
    else."""
    if derivatives is None:
        return None
    if not isinstance(derivatives, Derivatives):
        raise TypeError(f"derivatives must be a relaxep.Derivatives(X, dim, values, noise), got {derivatives!r}")
    X, dims, values, noise = derivatives.checked(np.shape(X)[1])
    return X, dims, values / scale, noise / scale**2


def check_monotone(monotone: Any, d: int) -> dict[int, int]:
    """``monotone`` as ``{dim: +1 or -1}`` (``None``: ``{}``), or a ``ValueError`` naming it."""
    if monotone is None:
        return {}
    if not isinstance(monotone, dict) or not monotone:
        raise ValueError(f"monotone must be None or a dict {{dim: +1 or -1}}, got {monotone!r}")
    out = {}
    for dim, sign in monotone.items():
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not 0 <= dim < d:
            raise ValueError(f"monotone: the dimension {dim!r} must be an integer in [0, {d - 1}]")
        if sign not in (1, -1):
            raise ValueError(f"monotone: the sign of dimension {dim} must be +1 (rising) or -1 (falling), got {sign!r}")
        out[int(dim)] = int(sign)
    return out


@dataclass(frozen=True)
class ShapePlan:
    """What a shaped fit adds: ``monotone`` ``{dim: sign}``, observed ``derivatives`` (as arrays, in the fit's
    units), the probit's ``steepness``."""

    monotone: dict[int, int] = field(default_factory=dict)
    derivatives: tuple[Array, Array, Array, Array] | None = None
    steepness: float = STEEPNESS


class JointPrior(DensePrior):
    """The dense prior of the values at ``X`` and the derivative rows ``(V, dims)``: their joint covariance
    (:func:`~relaxep.posterior.derivatives.joint_covariance`) plus the latent ``noise`` on the diagonal."""

    def __new__(cls, *args: Any, **kwargs: Any) -> JointPrior:
        return object.__new__(cls)  # (on the host: DensePrior's choice of a device twin does not apply)

    def __init__(self, kernel: Kernel, X: Array, V: Array, dims: Array, noise: float, eval_gradient: bool) -> None:
        self.rows = (np.vstack([X, V]), np.concatenate([np.full(X.shape[0], VALUE), dims]))
        K = joint_covariance(kernel, *self.rows) + noise * np.eye(self.rows[1].shape[0])
        super().__init__(K, check_psd=not eval_gradient)
        self.covariance_function, self.X, self.noise = kernel, X, float(noise)
        self.kernel_gradient = joint_gradient(kernel, *self.rows) if eval_gradient else None

    def cross_covariance(self, X_test: Any, dim: int = VALUE) -> tuple[Array, Array]:
        """The test rows' (values, or the derivatives in ``dim``) covariances with the rows, and their variances."""
        X_test = np.asarray(X_test, dtype=float)
        dims = np.full(X_test.shape[0], dim)
        cross = joint_covariance(self.covariance_function, X_test, dims, *self.rows)
        if dim == VALUE:
            return cross, self.covariance_function.diag(X_test) + self.noise
        # (a stationary kernel's derivative has one variance at every input)
        variance = joint_covariance(self.covariance_function, X_test[:1], dims[:1])[0, 0] if dims.size else 0.0
        return cross, np.full(dims.size, variance)


class _JointPriors(_DensePriors):
    """The prior factory of a shaped fit: the dense one's, of the values and the current derivative rows (the gradient
    from the kept :math:`\\partial K/\\partial\\theta`, here by the complex step)."""

    def __init__(self, noise: float, V: Array, dims: Array) -> None:
        super().__init__(noise)
        self.V, self.dims = V, dims

    def build(self, kernel: Kernel, X: Any, Z: Array | None, eval_gradient: bool) -> JointPrior:  # type: ignore[override]
        return JointPrior(kernel, np.asarray(X, dtype=float), self.V, self.dims, self.noise, eval_gradient)


def shaped_model(model: type) -> type:
    """``model`` (a latent model class) whose leave-one-out reads the value rows only."""

    class Shaped(model):  # type: ignore[misc, valid-type]
        n_values: int = 0

        def loo_terms(self) -> LooTerms:
            r, n, lik = self.result_, self.n_values, self.likelihood.likelihood
            y = DerivativeSites._split(self.likelihood, np.asarray(self.y))[0][:n]
            t = cavity_loo(r.mean[:n], r.marginal_var[:n], r.site_precision[:n], r.site_mean_precision[:n], y, lik)
            return LooTerms(
                t.loo, t.in_sample, t.cavity_mean, t.cavity_var, t.n_improper, y, tail=lik, is_density=lik.is_density,
                proba=self._loo_proba(t.cavity_mean, t.cavity_var),
            )  # fmt: skip

        def derivative_at(self, X: Any, dim: int) -> tuple[Array, Array]:
            """The posterior mean and variance of :math:`\\partial f/\\partial x_{dim}` at ``X``."""
            return self.result_.posterior.predict_latent(*self.prior_.cross_covariance(X, dim))

    Shaped.__name__ = Shaped.__qualname__ = f"Shaped{model.__name__}"
    return Shaped


def _candidates(X: Array, dim: int) -> Array:
    """Where the derivative's sign is checked: the training inputs, and for one column the midpoints too."""
    if X.shape[1] > 1:
        return np.unique(X, axis=0)
    t = np.unique(X[:, 0])
    return np.concatenate([t, 0.5 * (t[1:] + t[:-1])])[:, None]


def _worst_per_run(t: Array, wrong: Array, score: Array) -> list[int]:
    """The candidates to add: along ``t`` (the monotone input), each run of consecutive wrong candidates gives its
    worst one (neighbours' derivatives are nearly one variable: several sites on one run add little but
    ill-conditioning)."""
    order = np.argsort(t, kind="stable")
    picks, run = [], []
    for i in [*order, -1]:
        if i >= 0 and wrong[i]:
            run.append(i)
            continue
        if run:
            picks.append(min(run, key=lambda j: score[j]))
            run = []
    return picks


def _start(X: Array, dim: int, k: int) -> Array:
    """``k`` training inputs at even quantiles along ``dim``."""
    order = np.argsort(X[:, dim], kind="stable")
    return X[order[np.unique(np.linspace(0, X.shape[0] - 1, k).round().astype(int))]]


def fit_shaped(
    plan: ShapePlan, model: type, kernel: Kernel, likelihood: Likelihood, rule: Any, search: _EvidenceSearch,
    X: Any, y: Array, latent_noise: float, rng: np.random.RandomState | None, **options: Any,
) -> tuple[Any, FitReport]:  # fmt: skip
    """The shaped fit of ``model`` on ``(X, y)`` (module docstring); the model's ``virtual_`` holds the virtual
    inputs, their dimensions and signs."""
    check_derivative_kernel(kernel)
    X = np.asarray(X, dtype=float)
    n, d = X.shape
    width = 1 if np.ndim(y) == 1 else y.shape[1]
    sites = DerivativeSites(likelihood, width, plan.steepness)
    observed = plan.derivatives or (np.zeros((0, d)), np.zeros(0, np.intp), np.zeros(0), np.zeros(0))
    cap = max(2, math.ceil(MAX_FRACTION * n))
    virtual = [
        (x, dim, sign) for dim, sign in plan.monotone.items() for x in _start(X, dim, min(START, cap))
    ]  # fmt: skip
    cls = shaped_model(model)
    while True:
        V = np.vstack([np.array([v[0] for v in virtual]).reshape(-1, d), observed[0]])
        dims = np.concatenate([np.array([v[1] for v in virtual], dtype=np.intp), observed[1]])
        kinds = np.concatenate([[v[2] for v in virtual], np.full(observed[0].shape[0], OBSERVED)])
        values = np.concatenate([np.zeros(len(virtual)), observed[2]])
        noise = np.concatenate([np.ones(len(virtual)), observed[3]])
        rows = derivative_rows(y, kinds, values, noise)
        fitted = cls(_JointPriors(latent_noise, V, dims), kernel, sites, rule, search, **options)
        fitted.n_values = n
        report = fitted.fit(X, rows, rng)
        fitted.virtual_ = (V[: len(virtual)], dims[: len(virtual)], np.asarray(kinds[: len(virtual)], dtype=int))
        sites = fitted.likelihood  # (as learned: the next round starts there, as the kernel does)
        room = cap - len(virtual)
        if not plan.monotone or room <= 0:
            return fitted, report
        added = []
        for dim, sign in plan.monotone.items():
            C = _candidates(X, dim)
            taken = np.array([v[0] for v in virtual if v[1] == dim]).reshape(-1, d)
            fresh = ~np.any(np.all(np.isclose(C[:, None, :], taken[None, :, :]), axis=-1), axis=1)
            mean, var = fitted.derivative_at(C, dim)
            score = sign * mean / np.sqrt(np.maximum(var, 1e-300))
            picks = _worst_per_run(C[:, dim], (sign * mean < 0.0) & fresh, score)
            added += [(score[i], C[i], dim, sign) for i in picks]
        if not added:
            return fitted, report
        added.sort(key=lambda a: a[0])
        step = min(room, max(1, math.ceil(cap / 4)))
        virtual += [(x, dim, sign) for _, x, dim, sign in added[:step]]
