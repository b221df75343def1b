r"""GP regression with Gaussian noise in closed form: the model behind ``GPRegressor`` with a Gaussian likelihood.

With :math:`p(y | f) = N(y | f, \sigma^2)` the EP sites are the likelihood terms themselves, so EP's
fixed point (reached in one parallel sweep) is the exact posterior and its evidence the exact
marginal likelihood; this model computes them directly (Rasmussen & Williams 2006, Algorithm 2.1
and eq. 5.9), as scikit-learn's ``GaussianProcessRegressor`` does:

.. math::
    L = \operatorname{chol}(K + \operatorname{diag}(\alpha) + \sigma^2 I),\quad
    \boldsymbol\alpha = L^{-\top}L^{-1}y,\quad
    \log p(y) = -\tfrac12 y^\top\boldsymbol\alpha - \sum_i \log L_{ii} - \tfrac n2\log 2\pi,

    \frac{\partial \log p(y)}{\partial\theta_j}
      = \tfrac12\operatorname{tr}\Big((\boldsymbol\alpha\boldsymbol\alpha^\top - (K + \Sigma)^{-1})
        \frac{\partial K}{\partial\theta_j}\Big),

summed over the columns of a multi-output ``y``.  :math:`\alpha` is scikit-learn's ``alpha`` (a
scalar or one value per sample) and :math:`\sigma^2` the noise of a
:class:`~relaxep.likelihoods.Gaussian` likelihood, learned with the kernel (its derivative in
:math:`\log\sigma^2` is the trace above with :math:`\partial K/\partial\log\sigma^2 = \sigma^2 I`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from sklearn.gaussian_process.kernels import Kernel

from relaxep._memory import FIT_REMEDY, check_memory, dense_bytes
from relaxep._typing import Array
from relaxep._xp import HOST, ArraySpace, cholesky_lower, solve_lower, to_numpy
from relaxep.errors import KernelNotPositiveDefiniteError
from relaxep.estimators._hyper import HyperVector
from relaxep.estimators._integrate import integrate_model
from relaxep.estimators._model import LooTerms
from relaxep.estimators._search import FitReport, _EvidenceSearch, at_bounds
from relaxep.inference.loo import CavityLOO
from relaxep.likelihoods import Likelihood

__all__ = ["ExactFit", "_ExactModel", "exact_loo"]

_LOG_2PI = np.log(2.0 * np.pi)


@dataclass(frozen=True)
class ExactFit:
    """The closed-form fit's record, shaped like an inference result: exact, so ``"converged"`` in 0 sweeps."""

    log_evidence: float
    status: str = "converged"
    n_sweeps: int = 0

    @property
    def converged(self) -> bool:
        return True


def not_positive_definite(kernel: Kernel) -> str:
    """scikit-learn's message for a kernel matrix without a Cholesky factor (clients match on it)."""
    return (
        f"The kernel, {kernel}, is not returning a positive definite matrix. Try gradually increasing the "
        "'alpha' parameter of your GaussianProcessRegressor estimator."
    )


def _diagonal(xp: ModuleType, a: Any) -> Any:
    """The diagonal of the matrix ``a`` (``xp.linalg.diagonal``; ``np.diagonal`` before numpy 2.0)."""
    return xp.linalg.diagonal(a) if hasattr(xp.linalg, "diagonal") else xp.diagonal(a)


def _log_ml(xp: ModuleType, L: Any, Y: Any, a: Any) -> float:
    r""":math:`\log p(Y) = -\tfrac12 \operatorname{tr}(Y^\top a) - n_{out}\,(\sum_i \log L_{ii} + \tfrac n2 \log 2\pi)`,
    :math:`a = K^{-1} Y`, :math:`K = L L^\top` (Rasmussen & Williams 2006, eq. 2.30, per output), in ``xp``."""
    log_det = float(xp.sum(xp.log(_diagonal(xp, L))))
    return float(-0.5 * float(xp.sum(Y * a)) - Y.shape[1] * (log_det + 0.5 * Y.shape[0] * _LOG_2PI))


class _ExactModel:
    r"""Closed-form GP regression (module docstring); ``likelihood`` a Gaussian (its noise learned) or ``None``.

    The equations are written once, in the array namespace of :attr:`space` (numpy's here); the primitives a
    library answers differently are methods: :meth:`_kernel_matrix`, :meth:`_solve`, :meth:`_inverse`,
    :meth:`_trace_gradient` and the test covariances (numpy's: scikit-learn's kernel and its
    :math:`\partial K/\partial\theta`, LAPACK ``potrs`` and ``potri``;
    :class:`~relaxep.estimators._exact_device._DeviceExactModel` overrides them on a device).
    """

    #: the array library and device of ``X`` (numpy's here)
    space: ArraySpace = HOST

    def __init__(self, kernel: Kernel, alpha: float | Array, likelihood: Likelihood | None, search: _EvidenceSearch):
        self.kernel_, self.alpha, self.likelihood, self.search = kernel, alpha, likelihood, search

    @property
    def _lik_theta(self) -> Array:
        return np.zeros(0) if self.likelihood is None else self.likelihood.theta

    def _noise(self, likelihood: Likelihood | None) -> Any:
        return self.alpha if likelihood is None else self.alpha + float(likelihood.noise)  # type: ignore[attr-defined]

    @property
    def hyper(self) -> HyperVector:
        """The search's vector: the kernel's log-hyperparameters, then the Gaussian's log-noise."""
        return HyperVector(self.kernel_, self.likelihood)

    # ------------------------------------------------------------------ numpy's primitives
    def _kernel_matrix(
        self, kernel: Kernel, X: Any, noise: Any, eval_gradient: bool, n_gradients: int | None = None
    ) -> tuple[Any, Any]:
        r""":math:`K + \Sigma` and, with ``eval_gradient``, what :meth:`_trace_gradient` takes
        (:math:`\partial K/\partial\theta`, ``n_gradients`` of them: the kernel's ``n_dims`` where ``None``), after
        the memory guard."""
        n = X.shape[0] if hasattr(X, "shape") else len(X)
        copies = 2 + ((kernel.n_dims if n_gradients is None else n_gradients) if eval_gradient else 0)
        check_memory(dense_bytes(n, copies), f"a dense GP on n = {n} points", FIT_REMEDY)
        K, dK = kernel(X, eval_gradient=True) if eval_gradient else (kernel(X), None)
        K[np.diag_indices_from(K)] += noise
        return K, dK

    def _targets(self, y: Array, like: Any) -> Any:
        """``y`` as an ``n x n_out`` matrix, in ``like``'s library."""
        return y.reshape(y.shape[0], -1)

    def _solve(self, L: Any, Y: Any) -> Any:
        r""":math:`K_\Sigma^{-1}Y` from the factor (LAPACK ``potrs``)."""
        return linalg.cho_solve((L, True), Y, check_finite=False)

    def _inverse(self, L: Any) -> Any:
        r""":math:`K_\Sigma^{-1}` from the factor (LAPACK ``potri``; cannot fail: ``L``'s diagonal is positive)."""
        k_inv = lapack.dpotri(L, lower=1)[0]
        return np.tril(k_inv) + np.tril(k_inv, -1).T

    def _trace_gradient(self, inner: Any, gradient: Any, X: Any, kernel: Kernel) -> Array:
        r""":math:`\tfrac12\operatorname{tr}(M\,\partial K/\partial\theta_j)`, ``M`` the symmetric ``inner``."""
        return 0.5 * np.einsum("ij,jik->k", inner, gradient)

    def _cross(self, X: Any) -> tuple[Any, Any]:
        """:math:`k(X_*, X)` and ``X_*`` as :meth:`_test_cov` takes it."""
        return self.kernel_(X, self.X), X

    def _test_cov(self, X: Any, full_cov: bool) -> Any:
        """:math:`k(X_*, X_*)`, or its diagonal."""
        return self.kernel_(X) if full_cov else self.kernel_.diag(X)

    # ------------------------------------------------------------------ the equations, once
    def factor(
        self, kernel: Kernel, X: Any, noise: Any, eval_gradient: bool = False, n_gradients: int | None = None
    ) -> tuple[Any, Any]:
        r"""The lower Cholesky factor of :math:`K + \text{noise}` (and what :meth:`_trace_gradient` takes);
        :class:`~relaxep.errors.KernelNotPositiveDefiniteError` (scikit-learn's message) where it has none.
        ``n_gradients``: the kernel's ``n_dims``, where the caller knows it (scikit-learn's is an introspection)."""
        k_sigma, gradient = self._kernel_matrix(kernel, X, noise, eval_gradient, n_gradients)
        L = cholesky_lower(self.space.xp, k_sigma)
        if L is None:
            raise KernelNotPositiveDefiniteError(not_positive_definite(kernel))
        return L, gradient

    def evidence(
        self, x: Array, eval_gradient: bool, X: Any, y: Array, hyper: HyperVector | None = None
    ) -> tuple[float, Any]:
        """The log marginal likelihood (and its gradient) at the optimiser's vector ``x`` (kernel, then noise);
        ``hyper``: the search's :class:`HyperVector`, made once for all its evaluations (``None``: made here)."""
        hyper = self.hyper if hyper is None else hyper
        kernel, likelihood, _ = hyper.split(x)
        try:
            L, gradient = self.factor(kernel, X, self._noise(likelihood), eval_gradient, hyper.n_kernel)
        except (linalg.LinAlgError, ValueError):
            return -np.inf, (np.zeros_like(x) if eval_gradient else None)
        xp = self.space.xp
        Y = self._targets(y, L)
        a = self._solve(L, Y)
        lml = _log_ml(xp, L, Y, a)
        if not eval_gradient:
            return lml, None
        # tr((a a^T - n_out K^-1) dK_j) / 2, without an (n, n, n_out) array
        inner = a @ a.T - Y.shape[1] * self._inverse(L)
        grad = self._trace_gradient(inner, gradient, X, kernel)
        if likelihood is not None and likelihood.n_dims:
            trace = float(xp.sum(_diagonal(xp, inner)))
            grad = np.append(grad, 0.5 * float(likelihood.noise) * trace)  # type: ignore[attr-defined]
        return lml, grad

    def _learn(self, X: Any, y: Array, rng: np.random.RandomState | None) -> FitReport:
        """Learn (``rng`` given) the hyperparameters; the report names those at their bounds."""
        bounds: tuple[str, ...] = ()
        if rng is not None:
            hyper = self.hyper
            best = self.search.maximise(partial(self.evidence, X=X, y=y, hyper=hyper), hyper, rng)
            if best is not None:
                kernel, self.likelihood, _ = hyper.split(best)
                self.kernel_.theta = kernel.theta
            bounds = at_bounds(self.kernel_) + (() if self.likelihood is None else at_bounds(self.likelihood))
        return FitReport("converged", at_bounds=bounds)

    def fit(self, X: Any, y: Array, rng: np.random.RandomState | None) -> FitReport:
        r"""Learn (``rng`` given) the hyperparameters, then factor :math:`K + \Sigma` at them
        (``LinAlgError``, scikit-learn's message, where it has no factor)."""
        report = self._learn(X, y, rng)
        try:
            self.L_, _ = self.factor(self.kernel_, X, self._noise(self.likelihood))
        except KernelNotPositiveDefiniteError as exc:
            raise np.linalg.LinAlgError(*exc.args) from exc
        Y = self._targets(y, self.L_)
        alpha = self._solve(self.L_, Y)
        self.X, self.y = X, y
        self.result_ = ExactFit(_log_ml(self.space.xp, self.L_, Y, alpha))
        self.alpha_ = alpha if y.ndim > 1 else alpha[:, 0]
        return report

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        """The log marginal likelihood at the kernel's ``theta`` (the noise as fitted), or at both."""
        k = self.kernel_.theta.size
        x = theta if theta.size > k else np.concatenate([theta, self._lik_theta])
        if not clone_kernel:
            self.kernel_.theta = theta[:k]
        lml, grad = self.evidence(x, eval_gradient, self.X, self.y)
        return (np.float64(lml), grad[: theta.size]) if eval_gradient else np.float64(lml)

    def predict_latent(self, X: Any, full_cov: bool = False) -> tuple[Array, Array]:
        """Mean (one column per output) and variances or covariance of the latent at ``X`` (Algorithm 2.1)."""
        xp = self.space.xp
        K_trans, X = self._cross(X)
        mean = K_trans @ self.alpha_
        V = solve_lower(xp, self.L_, K_trans.T)
        if full_cov:
            return mean, self._test_cov(X, True) - V.T @ V
        return mean, self._test_cov(X, False) - xp.sum(V * V, axis=0)

    # ------------------------------------------------------------------ after the fit
    def loo_terms(self) -> LooTerms:
        """The closed-form leave-one-out (:func:`exact_loo`); the latent's leave-one-out variance is that of
        ``y`` less the noise."""
        latent = self.predict_latent(self.X, full_cov=False)
        noise = self._noise(self.likelihood)
        t = exact_loo(self.L_, self.alpha_, self.y, noise, latent)
        var = t.cavity_var - np.broadcast_to(np.asarray(noise, dtype=float), t.cavity_var.shape)
        y = np.asarray(to_numpy(self.y))
        return LooTerms(t.loo, t.in_sample, t.cavity_mean, t.cavity_var, 0, y, latent=(t.cavity_mean, var))

    def at_theta(self, x: Array, start: Any = None) -> _ExactModel | None:
        r"""A copy fitted in closed form at the log-hyperparameters ``x`` (the kernel's, then the noise's), no
        search; ``None`` where :math:`K + \Sigma` has no factor."""
        kernel, likelihood, _ = self.hyper.split(np.asarray(x, dtype=float))
        point = copy.copy(self)
        point.kernel_, point.likelihood = kernel, likelihood
        try:
            point.fit(self.X, self.y, None)
        except (KernelNotPositiveDefiniteError, linalg.LinAlgError, np.linalg.LinAlgError):
            return None
        return point if np.isfinite(point.result_.log_evidence) else None

    def with_tol(self, tol: float) -> _ExactModel:
        """Itself: the closed form has no tolerance."""
        return self

    def integrate(self, method: str) -> Any:
        """The mixture over the hyperparameters around this (MAP) fit (:func:`~relaxep.estimators._integrate.
        integrate_model`); one output only."""
        y = np.asarray(self.y)
        if y.ndim == 2 and y.shape[1] > 1:
            raise ValueError(f"integrate: a fit of y with {y.shape[1]} outputs is not integrated; fit one per output")
        return integrate_model(self, method)


def exact_loo(L: Array, a: Array, y: Array, noise: Any, latent: tuple[Array, Array] | None = None) -> CavityLOO:
    r"""Closed-form leave-one-out of exact GP regression from the lower Cholesky factor ``L`` of :math:`K_y = K +
    \Sigma`, :math:`a = K_y^{-1} y` and the noise :math:`\Sigma` (scalar or per row; Rasmussen & Williams 2006,
    eq. 5.12):

    .. math::
        \mu_{-i} = y_i - \frac{[K_y^{-1}y]_i}{[K_y^{-1}]_{ii}},\qquad \sigma^2_{-i} = \frac{1}{[K_y^{-1}]_{ii}},
        \qquad \log p(y_i | y_{-i}) = -\tfrac12\log(2\pi\sigma^2_{-i}) - \frac{(y_i - \mu_{-i})^2}{2\sigma^2_{-i}},

    and the in-sample density :math:`N(y_i | m_i, v_i + \Sigma_i)` at ``latent``, the model's own predictive
    :math:`(m_i, v_i)` of the latent at the training inputs (a ``WhiteKernel`` in the kernel is noise there, as in
    scikit-learn's predictions); default the posterior of :math:`f`, mean :math:`y_i - \Sigma_i a_i` and variance
    :math:`\Sigma_i - \Sigma_i^2[K_y^{-1}]_{ii}`.  Several outputs (columns of ``y``): the densities summed per
    row, the means one column per output.  ``cavity_mean`` and ``cavity_var`` are the leave-one-out predictive of
    :math:`y_i` (not of :math:`f_i`)."""
    L = np.asarray(to_numpy(L), dtype=float)
    Y = np.asarray(to_numpy(y), dtype=float).reshape(L.shape[0], -1)
    A = np.asarray(to_numpy(a), dtype=float).reshape(Y.shape)
    l_inv, info = lapack.dtrtri(L, lower=1)  # [K_y^-1]_ii = ||column i of L^-1||^2
    if info != 0:  # pragma: no cover - L's diagonal is positive
        raise np.linalg.LinAlgError(f"dtrtri failed ({info})")
    d = np.einsum("ij,ij->j", l_inv, l_inv)
    s2 = 1.0 / d
    mu = Y - A / d[:, None]
    sigma = np.broadcast_to(np.asarray(noise, dtype=float), d.shape)
    if latent is None:
        mean_in, var_in = Y - sigma[:, None] * A, 2.0 * sigma - sigma**2 * d
    else:
        mean_in = np.asarray(to_numpy(latent[0]), dtype=float).reshape(Y.shape)
        var_in = np.asarray(to_numpy(latent[1]), dtype=float) + sigma
    loo = np.sum(_log_normal(Y, mu, s2[:, None]), axis=1)
    in_sample = np.sum(_log_normal(Y, mean_in, var_in[:, None]), axis=1)
    mean = mu[:, 0] if mu.shape[1] == 1 else mu
    return CavityLOO(loo=loo, in_sample=in_sample, cavity_mean=mean, cavity_var=s2, n_improper=0)


def _log_normal(y: Array, mean: Array, var: Array) -> Array:
    return -0.5 * (_LOG_2PI + np.log(var)) - 0.5 * (y - mean) ** 2 / var
