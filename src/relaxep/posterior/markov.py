r"""The Markov (state-space) representation: a Gaussian process of one input whose kernel is a linear stochastic
differential equation (:mod:`relaxep.posterior.state_space`), its posterior by the Kalman filter and smoother
(:mod:`relaxep.posterior.kalman`) in :math:`O(n m^3)` time and :math:`O(n m^2)` memory, no :math:`n \times n`
array anywhere (Hartikainen & Särkkä 2010; Nickisch, Solin & Grigorievskiy 2018, GPML's ``infState``; Wilkinson,
Chang, Andersen & Solin 2020, "State space expectation propagation").

EP's sites are Gaussian pseudo-observations of :math:`f_i`, so a parallel sweep's refresh is one filter and one
smoother pass over the sorted inputs.  Inputs need not be sorted or distinct: the points are sorted once
(stably) and the sites of points at one time are added, which is exact for the process :math:`g(t)`.  Noise on
each point (the estimator's latent noise, a ``WhiteKernel``), :math:`f_i = g(t_i) + \epsilon_i`,
:math:`\epsilon_i \sim N(0, \delta)`, is integrated out exactly: site :math:`i` is the site
:math:`(\tau_i, \nu_i)/(1 + \delta\tau_i)` of :math:`g(t_i)`, and

.. math::
    E f_i = \frac{E g(t_i) + \delta\nu_i}{1 + \delta\tau_i},\quad
    V f_i = \frac{\delta}{1 + \delta\tau_i} + \frac{V g(t_i)}{(1 + \delta\tau_i)^2},\quad
    \log|I + KT| = \sum_i \log(1 + \delta\tau_i) + \log|I + K_g T'|.

The evidence's gradient in the kernel's log-hyperparameters is that of :math:`\log Z_q` at the fixed sites (as for
the dense posterior, GPML's ``infEP``), taken by the complex step: the filter run at :math:`\theta + i h e_j`
gives :math:`\partial_j \log Z_q = \operatorname{Im}\log Z_q / h` exactly to rounding (Squire & Trapp 1998), one
:math:`O(n m^3)` pass per hyperparameter.

Prediction at new inputs (between the training inputs or beyond them, forecasting) runs the smoother over the
training and test times together, the test times with flat sites.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from relaxep._typing import Array
from relaxep.errors import ImproperPosteriorError
from relaxep.posterior.base import Prior, RefreshedPosterior
from relaxep.posterior.kalman import kalman_filter, kalman_smoother
from relaxep.posterior.state_space import StateSpace, state_space

__all__ = ["MarkovPosterior", "MarkovPrior", "times_of"]

#: the complex step of the evidence's gradient
_STEP = 1e-20


def times_of(X: Any, name: str = "X") -> Array:
    """The one input of ``X`` (shape ``(n,)`` or ``(n, 1)``) as a float vector; refuses more than one column."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 2 and X.shape[1] == 1:
        X = X[:, 0]
    if X.ndim != 1:
        raise ValueError(
            f"{name}: the Markov (state-space) representation takes one input column, got shape {X.shape}; "
            "use representation='dense' or inducing points for more"
        )
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or inf")
    return X


class MarkovPrior(Prior):
    """The prior :math:`N(0, K)` of a state-space ``kernel`` at the inputs ``X`` (module docstring).

    Parameters
    ----------
    kernel : sklearn kernel
        A kernel :func:`~relaxep.posterior.state_space.state_space` has a form for.
    X : array of shape (n,) or (n, 1)
        The inputs, in any order, ties allowed.
    noise : float
        Latent noise on each point (the estimator's jitter), beside any ``WhiteKernel``.
    harmonics : int, optional
        The periodic kernel's harmonics (``None``: :func:`~relaxep.posterior.state_space.state_space`'s choice).
    """

    def __init__(self, kernel: Any, X: Any, noise: float = 0.0, harmonics: int | None = None) -> None:
        t = times_of(X)
        self.covariance_function = kernel
        self.X = X
        self.form: StateSpace = state_space(kernel, harmonics)
        self.theta = np.asarray(kernel.theta, dtype=float)
        self.latent_noise = float(noise)
        self.times, self.group = np.unique(t, return_inverse=True)  # point i sits at times[group[i]]
        self.group = self.group.reshape(-1)
        self.a, self.q = self._steps(self.theta, self.times)

    @classmethod
    def from_kernel(
        cls, kernel: Any, X: Any, noise: float = 0.0, eval_gradient: bool = False, harmonics: int | None = None
    ) -> MarkovPrior:
        """The prior of ``kernel`` at ``X`` (``eval_gradient``: unused, the gradient is taken when asked)."""
        return cls(kernel, X, noise, harmonics)

    @property
    def n(self) -> int:
        return int(self.group.shape[0])

    @property
    def noise(self) -> float:
        """The noise on each point: the latent noise and the kernel's ``WhiteKernel``."""
        return self.latent_noise + float(np.real(self.form.noise(self.theta)))

    def _steps(self, theta: Array, times: Array) -> tuple[Array, Array]:
        """The chain's steps at ``times``, the first from the stationary prior (:mod:`relaxep.posterior.kalman`)."""
        a, q = self.form.steps(theta, np.diff(times))
        m = self.form.m
        pinf = self.form.stationary_cov(theta)
        a = np.concatenate([np.zeros((m, m, 1), dtype=a.dtype), a], axis=2)
        q = np.concatenate([pinf[:, :, None] + np.zeros((m, m, 1), dtype=q.dtype), q], axis=2)
        return a, q

    def merged_sites(self, tau: Array, nu: Array, noise: Any) -> tuple[Array, Array, Array]:
        r"""The sites of :math:`g` at the distinct times: each point's :math:`(\tau, \nu)/(1 + \delta\tau)`, added
        over ties; and :math:`1 + \delta\tau` per point."""
        scale = 1.0 + noise * tau
        u = self.times.shape[0]
        dtype = np.result_type(tau, nu, noise)
        t = np.zeros(u, dtype=dtype)
        v = np.zeros(u, dtype=dtype)
        np.add.at(t, self.group, tau / scale)
        np.add.at(v, self.group, nu / scale)
        return t, v, scale

    def log_partition_at(self, theta: Array, tau: Array, nu: Array) -> Any:
        r""":math:`\log Z_q = \tfrac12\nu^\top\mu - \tfrac12\log|I + KT|` at the kernel's ``theta`` (real or complex)
        for the sites, by the filter alone."""
        a, q = self._steps(theta, self.times)
        noise = self.latent_noise + self.form.noise(theta)
        t, v, scale = self.merged_sites(tau, nu, noise)
        if np.any(np.real(scale) <= 0.0):
            raise ImproperPosteriorError("a site makes 1 + noise * tau <= 0")
        filt = kalman_filter(a, q, self.form.h, t, v)
        quad = filt.quad + np.sum(noise * nu**2 / scale)  # type: ignore[union-attr]
        log_det = filt.log_det + np.sum(np.log(scale))  # type: ignore[union-attr]
        return 0.5 * quad - 0.5 * log_det

    def posterior(
        self,
        site_precision: Array | None = None,
        site_mean_precision: Array | None = None,
        marginals_only: bool = False,
    ) -> MarkovPosterior:
        """The posterior for these sites, refreshed here (an improper one raises
        :class:`~relaxep.errors.ImproperPosteriorError` now, as the dense posterior's factorisation does)."""
        post = MarkovPosterior(self, site_precision, site_mean_precision)
        post.refresh()
        return post

    def cross_covariance(self, X_test: Any) -> tuple[Array, Array]:
        """Not a matrix here: the test times and the noise, which :meth:`MarkovPosterior.predict_latent` takes."""
        t = times_of(X_test, "X_test")
        return t, np.full(t.shape[0], self.noise)

    def predict_at(self, predict: Callable[[Array, Array], Any], X_test: Any) -> Any:
        """``predict`` (an :class:`~relaxep.inference.InferenceResult`'s or a posterior's ``predict_latent``) at
        ``X_test``, by the posterior's :meth:`MarkovPosterior.predict_latent` on the test times."""
        owner = getattr(predict, "__self__", None)
        post = getattr(owner, "posterior", owner)
        if not isinstance(post, MarkovPosterior):
            raise TypeError("a Markov prior predicts through its posterior's predict_latent")
        return post.predict_latent(*self.cross_covariance(X_test))


class MarkovPosterior(RefreshedPosterior):
    """The Gaussian posterior of a :class:`MarkovPrior` for given sites: the smoother's marginals, recomputed on
    the first read after the sites change (module docstring)."""

    def __init__(
        self, prior: MarkovPrior, site_precision: Array | None = None, site_mean_precision: Array | None = None
    ) -> None:
        self.prior = prior
        self._hold_sites(prior.n, site_precision, site_mean_precision)

    @property
    def n(self) -> int:
        return self.prior.n

    def refresh(self, marginals_only: bool = False) -> None:
        prior = self.prior
        noise = prior.noise
        tau, nu = self.site_precision, self.site_mean_precision
        t, v, scale = prior.merged_sites(tau, nu, noise)
        if np.any(scale <= 0.0) or not (np.all(np.isfinite(tau)) and np.all(np.isfinite(nu))):
            raise ImproperPosteriorError("a site makes 1 + noise * tau <= 0, or is not finite")
        out = kalman_smoother(prior.a, prior.q, prior.form.h, t, v)
        g_mean, g_var = out.mean[prior.group], out.var[prior.group]
        self._mean = (g_mean + noise * nu) / scale
        self._var = noise / scale + g_var / scale**2
        self._log_det = float(out.log_det + np.sum(np.log(scale)))
        self._stale = False

    def update_site(self, i: int, precision: float, mean_precision: float) -> bool:
        """Replace site ``i``; the next read refreshes (a sequential sweep costs :math:`O(n)` a site here: the
        parallel schedule is this representation's)."""
        self.set_sites(i, precision, mean_precision)
        return True

    def predict_latent(self, cross_kernel: Array, test_diag: Array) -> tuple[Array, Array]:
        r"""Latent mean and variance at the test times ``cross_kernel`` (:meth:`MarkovPrior.cross_covariance`), plus
        the noise ``test_diag``: the smoother over the training and test times, the test ones with flat sites."""
        prior = self.prior
        t_test = np.asarray(cross_kernel, dtype=float)
        if t_test.ndim != 1:
            raise TypeError("a Markov posterior predicts at test times (MarkovPrior.cross_covariance), not K_star")
        noise = prior.noise
        t, v, _ = prior.merged_sites(self.site_precision, self.site_mean_precision, noise)
        times, where = np.unique(np.concatenate([prior.times, t_test]), return_inverse=True)
        where = where.reshape(-1)
        u = prior.times.shape[0]
        tau, nu = np.zeros(times.shape[0]), np.zeros(times.shape[0])
        tau[where[:u]], nu[where[:u]] = t, v
        a, q = prior._steps(prior.theta, times)
        out = kalman_smoother(a, q, prior.form.h, tau, nu)
        test = where[u:]
        return out.mean[test], out.var[test] + np.asarray(test_diag, dtype=float)

    def prior_evidence_gradient(self, prior: MarkovPrior, kernel: Any) -> Array:
        r""":math:`\partial\log Z_q/\partial\theta` at the fixed sites, in the kernel's log-hyperparameters, by the
        complex step (module docstring)."""
        theta = np.asarray(kernel.theta, dtype=float)
        grad = np.empty(theta.size)
        for j in range(theta.size):
            shifted = theta.astype(complex)
            shifted[j] += 1j * _STEP
            grad[j] = np.imag(prior.log_partition_at(shifted, self.site_precision, self.site_mean_precision)) / _STEP
        return grad
