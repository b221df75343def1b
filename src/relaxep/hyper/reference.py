r"""Ground truth for the posterior of a GP's hyperparameters :math:`\theta` (log space).

Two references, independent of any integration design, against which CCD or grid integration of EP is tested:

* :func:`grid_reference`: brute force.  With cells of width :math:`h_k` centred on a regular grid
  :math:`\{\theta_g\}` over a box, :math:`w_g = e^{\ell(\theta_g)} / \sum_{g'} e^{\ell(\theta_{g'})}` for the
  unnormalised log density :math:`\ell`; moments are :math:`\sum_g w_g\, \theta_g` (the midpoint rule,
  error :math:`O(h^2)` for a smooth density that is negligible at the box's faces).
* :func:`pseudo_marginal_mcmc`: Metropolis-Hastings in :math:`\theta` with :math:`p(y|\theta)` replaced by an
  unbiased importance-sampling estimate (Filippone & Girolami 2014, "Pseudo-marginal Bayesian inference for
  Gaussian processes", IEEE TPAMI 36(11); Andrieu & Roberts 2009 for exactness):

  .. math:: \hat p(y|\theta) = \frac1N \sum_{j=1}^N \frac{p(y|f_j)\, N(f_j|0, K_\theta)}{q(f_j)},
     \qquad f_j \sim q,

  :math:`q` EP's Gaussian approximation of :math:`p(f|y,\theta)`, its covariance optionally inflated by :math:`c`,
  or a multivariate t with EP's mean and scale.  For a bounded :math:`p(y|f)` the weights' variance is at most
  :math:`\int N(f|0,K)^2/q(f)\,df`: finite for the t always, for a Gaussian :math:`N(m, cS)` only where
  :math:`2K^{-1} - (cS)^{-1}` is positive definite.  The chain
  keeps the current estimate and accepts :math:`\theta'` with probability
  :math:`\min\{1, \hat p(y|\theta') p(\theta') / [\hat p(y|\theta) p(\theta)]\}`; its stationary law in
  :math:`\theta` is the exact :math:`p(\theta|y)` whatever :math:`N`.

``theta`` is the log of the positive hyperparameters (scikit-learn's ``kernel.theta``); a prior given on the
positive scale needs the Jacobian :math:`\sum_k \theta_k` (:func:`log_space_density`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg
from scipy.special import gammaln, logsumexp

from relaxep._threads import fit_threads
from relaxep._typing import Array
from relaxep.inference.driver import infer
from relaxep.likelihoods import Likelihood

__all__ = [
    "GridReference",
    "PseudoMarginalResult",
    "effective_sample_size",
    "ep_importance_proposal",
    "grid_reference",
    "log_evidence_estimate",
    "log_space_density",
    "pseudo_marginal_mcmc",
]


def log_space_density(log_pdf: Callable[[Array], Array]) -> Callable[[Array], Any]:
    r"""The log density of :math:`\theta = \log\phi` from independent log densities of :math:`\phi > 0`:
    :math:`\log p_\theta(\theta) = \sum_k [\log p_\phi(e^{\theta_k}) + \theta_k]` (the Jacobian
    :math:`|d\phi/d\theta| = e^{\theta}`).  ``log_pdf`` maps :math:`\phi` to elementwise log densities, one per
    coordinate (e.g. ``scipy.stats.gamma(a, scale=s).logpdf``).  The result takes a point ``(d,)`` (a float back)
    or a batch ``(m, d)`` (``(m,)`` back, for :func:`grid_reference`'s ``batched``)."""

    def log_density(theta: Array) -> Any:
        t = np.asarray(theta, dtype=float)
        total = np.sum(log_pdf(np.exp(t)) + t, axis=-1)
        return float(total) if t.ndim < 2 else total

    return log_density


@dataclass(frozen=True)
class GridReference:
    r"""The posterior of :math:`\theta` on a regular grid (:func:`grid_reference`).

    Attributes
    ----------
    axes : tuple of ndarray
        The cell centres along each coordinate.
    points : ndarray (m, d)
        Every grid point (the first coordinate varies slowest).
    log_density : ndarray (m,)
        The unnormalised log density at ``points``.
    weights : ndarray (m,)
        Normalised weights :math:`w_g`, summing to one.
    log_normaliser : float
        :math:`\log \int e^{\ell}\, d\theta \approx \operatorname{logsumexp}_g \ell(\theta_g) + \sum_k \log h_k`
        (with :math:`\ell = \log p(y|\theta) + \log p(\theta)`: the log evidence of the model).
    mean, sd : ndarray (d,)
        Posterior means and standard deviations of each coordinate.
    cov : ndarray (d, d)
        Posterior covariance (e.g. a random walk's proposal).
    marginals : tuple of ndarray
        The marginal density of each coordinate at its axis' centres (integrating to one by the midpoint rule).
    """

    axes: tuple[Array, ...]
    points: Array
    log_density: Array
    weights: Array
    log_normaliser: float
    mean: Array
    sd: Array
    cov: Array
    marginals: tuple[Array, ...]

    def mixture(self, rtol: float = 1e-10) -> tuple[Array, Array]:
        r"""Points and weights of a predictive mixture :math:`\sum_g w_g\, p(y_*|x_*, \theta_g)`: the points whose
        weight is at least ``rtol`` times the largest, their weights renormalised to sum to one."""
        if not 0.0 <= rtol < 1.0:
            raise ValueError(f"rtol must lie in [0, 1), got {rtol!r}")
        keep = self.weights >= rtol * self.weights.max()
        return self.points[keep], self.weights[keep] / self.weights[keep].sum()


def grid_reference(
    log_density: Callable[[Array], Any],
    lower: ArrayLike,
    upper: ArrayLike,
    n_points: int | Sequence[int],
    *,
    batched: bool = False,
    max_points: int = 2_000_000,
) -> GridReference:
    r"""Brute-force posterior of :math:`\theta` on the cell centres of a regular grid over a box.

    Axis :math:`k` has ``n_points[k]`` cells of width :math:`h_k = (u_k - l_k)/n_k`, centred at
    :math:`l_k + (i + \tfrac12) h_k`; the weights are :math:`w_g \propto e^{\ell(\theta_g)}` and every moment is the
    midpoint rule (module docstring).  The box must hold all but a negligible part of the mass.

    Parameters
    ----------
    log_density : callable
        :math:`\ell(\theta)`, unnormalised (``-inf`` outside the support).  With ``batched`` it takes an
        ``(m, d)`` array and returns ``(m,)`` values; else one point ``(d,)`` and returns a float.
    lower, upper : array_like (d,)
        The box, ``lower < upper``.
    n_points : int or sequence of int
        Cells per axis (one int: the same on every axis), each at least 2.
    batched : bool
        Evaluate all points in one call.
    max_points : int
        Refuse a grid of more points than this.
    """
    lo, hi = np.atleast_1d(np.asarray(lower, dtype=float)), np.atleast_1d(np.asarray(upper, dtype=float))
    if lo.ndim != 1 or lo.shape != hi.shape:
        raise ValueError(f"lower and upper must be vectors of one length, got shapes {lo.shape} and {hi.shape}")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo < hi)):
        raise ValueError(f"lower must be finite and below upper, got lower={lo} and upper={hi}")
    d = lo.size
    counts = np.broadcast_to(np.asarray(n_points), (d,))
    if counts.dtype.kind not in "iu" or np.any(counts < 2):
        raise ValueError(f"n_points must be integers of at least 2 (one, or one per axis), got {n_points!r}")
    total = int(np.prod(counts.astype(float)))
    if total > max_points:
        raise ValueError(f"n_points={n_points!r} gives {total} grid points in {d} dimensions, more than {max_points}")
    widths = (hi - lo) / counts
    axes = tuple(lo[k] + widths[k] * (np.arange(counts[k]) + 0.5) for k in range(d))
    points = np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=1)
    if batched:
        values = np.asarray(log_density(points), dtype=float)
        if values.shape != (total,):
            raise ValueError(f"a batched log_density must return shape ({total},), got {values.shape}")
    else:
        values = np.array([float(log_density(p)) for p in points])
    if np.any(np.isnan(values)) or np.any(values == np.inf):
        raise ValueError("log_density returned NaN or +inf on the grid")
    if not np.any(np.isfinite(values)):
        raise ValueError("log_density is -inf at every grid point: the box misses the support")
    log_z = float(logsumexp(values))
    weights = np.exp(values - log_z)
    mean = weights @ points
    centred = points - mean
    cov = (weights[:, None] * centred).T @ centred
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    cube = weights.reshape(tuple(counts))
    marginals = tuple(cube.sum(axis=tuple(j for j in range(d) if j != k)) / widths[k] for k in range(d))
    log_normaliser = log_z + float(np.sum(np.log(widths)))
    return GridReference(axes, points, values, weights, log_normaliser, mean, sd, cov, marginals)


def ep_importance_proposal(K: Array, y: Array, likelihood: Likelihood, **infer_options: Any) -> tuple[Array, Array]:
    r"""The mean and covariance of EP's :math:`q(f) = N(m, S) \approx p(f|y)` under the prior :math:`N(0, K)`
    (:func:`~relaxep.infer`, cold started, so :math:`q` is a function of :math:`K` alone).  A run that ends
    unconverged keeps its last finite posterior; one without falls back to the prior :math:`N(0, K)` (any
    :math:`q` keeps the estimate unbiased, a poor one only noisier)."""
    try:
        res = infer(K, y, likelihood, **infer_options)
        mean, cov = np.asarray(res.mean, dtype=float), np.asarray(res.cov, dtype=float)
        if np.all(np.isfinite(mean)) and np.all(np.isfinite(cov)):
            return mean, cov
    except (ArithmeticError, RuntimeError, np.linalg.LinAlgError):  # improper or diverged; bad input raises
        pass
    return np.zeros(len(y)), np.asarray(K, dtype=float)


def _chol(S: Array, name: str) -> Array:
    try:
        return linalg.cholesky(S, lower=True)
    except linalg.LinAlgError as err:
        raise ValueError(f"{name} is not positive definite") from err


def _log_gaussian(F: Array, mean: Array, L: Array) -> Array:
    """log N(f | mean, L L^T) for each row of F."""
    Z = linalg.solve_triangular(L, (F - mean).T, lower=True)
    return -0.5 * np.sum(Z * Z, axis=0) - np.sum(np.log(np.diag(L))) - 0.5 * L.shape[0] * np.log(2.0 * np.pi)


def log_evidence_estimate(
    K: Array,
    y: Array,
    likelihood: Likelihood,
    mean: Array,
    cov: Array,
    n_importance: int,
    rng: np.random.Generator,
    *,
    df: float | None = None,
    inflation: float = 1.0,
) -> float:
    r"""One importance-sampling estimate :math:`\log \hat p(y|\theta)`, in log space:

    .. math:: \log \hat p = \operatorname{logsumexp}_j \big[\log p(y|f_j) + \log N(f_j|0,K) - \log q(f_j)\big]
       - \log N,

    :math:`f_j \sim q`, with :math:`q = N(m, cS)` (``df`` None) or the multivariate t with ``df`` degrees of
    freedom, location :math:`m` and scale :math:`cS`, :math:`c` the ``inflation``.  :math:`\hat p` (not its log)
    is unbiased for :math:`p(y|\theta)` (Filippone & Girolami 2014).
    """
    if n_importance < 1:
        raise ValueError(f"n_importance must be a positive integer, got {n_importance!r}")
    if not inflation > 0.0:
        raise ValueError(f"inflation must be positive, got {inflation!r}")
    if df is not None and not df > 0.0:
        raise ValueError(f"df must be positive or None, got {df!r}")
    n = len(y)
    for name, value, shape in (("K", K, (n, n)), ("mean", mean, (n,)), ("cov", cov, (n, n))):
        if np.shape(value) != shape:
            raise ValueError(f"{name} must have shape {shape} for {n} targets, got {np.shape(value)}")
    with fit_threads(n, dense=True):
        return _log_evidence_estimate(K, y, likelihood, mean, cov, n_importance, rng, df, inflation)


def _log_evidence_estimate(
    K: Array, y: Array, likelihood: Likelihood, mean: Array, cov: Array, n_importance: int, rng: Any, df: Any, c: float
) -> float:
    n = len(y)
    L_prior, L_q = _chol(np.asarray(K, dtype=float), "K"), _chol(c * np.asarray(cov, dtype=float), "cov")
    Z = rng.standard_normal((n_importance, n))
    if df is None:
        F = mean + Z @ L_q.T
        log_q = _log_gaussian(F, mean, L_q)
    else:
        scale = np.sqrt(rng.chisquare(df, n_importance) / df)
        F = mean + (Z @ L_q.T) / scale[:, None]
        maha = np.sum(linalg.solve_triangular(L_q, (F - mean).T, lower=True) ** 2, axis=0)
        log_q = (
            gammaln(0.5 * (df + n))
            - gammaln(0.5 * df)
            - 0.5 * n * np.log(df * np.pi)
            - np.sum(np.log(np.diag(L_q)))
            - 0.5 * (df + n) * np.log1p(maha / df)
        )
    log_w = likelihood.log_lik(y, F).sum(axis=-1) + _log_gaussian(F, np.zeros(n), L_prior) - log_q
    return float(logsumexp(log_w) - np.log(n_importance))


def effective_sample_size(chain: ArrayLike) -> Array:
    r"""Effective sample size of each column of ``chain`` (steps, d) by Geyer's (1992) initial monotone sequence:
    :math:`n / \hat\tau`, :math:`\hat\tau = -1 + 2\sum_{k<K} \Gamma_k`, :math:`\Gamma_k = \rho_{2k} + \rho_{2k+1}`
    summed while positive and made non-increasing.  A column that never moves gets 1."""
    x = np.asarray(chain, dtype=float)
    x = x[:, None] if x.ndim == 1 else x
    n = x.shape[0]
    if n < 4:
        raise ValueError(f"chain needs at least 4 steps, got {n}")
    c = x - x.mean(axis=0)
    spectrum = np.fft.rfft(c, 2 * n, axis=0)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), axis=0)[:n] / n
    ess = np.ones(x.shape[1])
    for k in range(x.shape[1]):
        if acov[0, k] <= 0.0:
            continue
        rho = acov[:, k] / acov[0, k]
        pairs = rho[: 2 * (n // 2)].reshape(-1, 2).sum(axis=1)
        stop = np.flatnonzero(pairs <= 0.0)
        pairs = np.minimum.accumulate(pairs[: stop[0] if stop.size else pairs.size])
        tau = max(-1.0 + 2.0 * pairs.sum(), 1.0 / n)
        ess[k] = min(n / tau, n * np.log10(n))
    return ess


@dataclass(frozen=True)
class PseudoMarginalResult:
    r"""A pseudo-marginal Metropolis-Hastings chain in :math:`\theta` (:func:`pseudo_marginal_mcmc`).

    Attributes
    ----------
    chain : ndarray (n_steps, d)
        :math:`\theta` after each kept step (burn-in dropped).
    log_estimates : ndarray (n_steps,)
        The chain's current :math:`\log\hat p(y|\theta)` at each kept step.
    acceptance_rate : float
        Accepted proposals over all steps, burn-in included.
    mean, sd : ndarray (d,)
        Posterior means and standard deviations of :math:`\theta` from the kept steps.
    ess : ndarray (d,)
        Effective sample sizes (:func:`effective_sample_size`).
    mean_se : ndarray (d,)
        Monte Carlo standard errors of ``mean``, ``sd / sqrt(ess)``.
    proposal_cov : ndarray (d, d)
        The random walk's covariance as used (scaled).
    """

    chain: Array
    log_estimates: Array
    acceptance_rate: float
    mean: Array
    sd: Array
    ess: Array
    mean_se: Array
    proposal_cov: Array


def _kernel_matrix(kernel: Any, X: Array, theta: Array, jitter: float) -> Array:
    K = kernel.clone_with_theta(theta)(X) if hasattr(kernel, "clone_with_theta") else kernel(theta)
    return np.asarray(K, dtype=float) + jitter * np.eye(len(X))


def pseudo_marginal_mcmc(
    X: ArrayLike,
    y: ArrayLike,
    kernel: Any,
    likelihood: Likelihood,
    log_prior: Callable[[Array], float],
    theta0: ArrayLike,
    proposal_cov: ArrayLike,
    *,
    n_steps: int = 2000,
    n_burn: int = 0,
    n_importance: int = 64,
    proposal_scale: float | None = None,
    df: float | None = None,
    inflation: float = 1.0,
    jitter: float = 1e-8,
    random_state: int | np.random.Generator | None = None,
    **infer_options: Any,
) -> PseudoMarginalResult:
    r"""Pseudo-marginal random-walk Metropolis-Hastings for :math:`p(\theta|y) \propto p(y|\theta)\, p(\theta)`
    (Filippone & Girolami 2014; module docstring for the estimate and the acceptance ratio).

    Parameters
    ----------
    X : array_like (n, p)
        Training inputs (passed to the kernel).
    y : array_like (n,)
        Targets for ``likelihood`` (labels in ``{-1, +1}`` for a binary one).
    kernel : scikit-learn kernel or callable
        A kernel whose ``clone_with_theta(theta)(X)`` is :math:`K_\theta` (``theta`` its log hyperparameters),
        or a callable ``theta -> K``.  ``jitter`` is added to the diagonal (part of the model).
    likelihood : Likelihood
    log_prior : callable
        :math:`\log p(\theta)` up to a constant (``-inf`` outside the support; a proposal there is rejected).
    theta0 : array_like (d,)
        The start (inside the support).
    proposal_cov : array_like (d, d)
        The random walk's covariance before scaling (e.g. the inverse Hessian of the log posterior at its mode).
    n_steps, n_burn : int
        Kept steps, and steps run before them and dropped.
    n_importance : int
        Importance samples :math:`N` per estimate.
    proposal_scale : float, optional
        Multiplies ``proposal_cov``; default :math:`2.38^2/d` (Roberts, Gelman & Gilks 1997).
    df, inflation : float
        The importance density: a multivariate t with ``df`` degrees of freedom (None: Gaussian) and EP's
        covariance times ``inflation``.
    random_state : int, Generator or None
    **infer_options
        Passed to :func:`~relaxep.infer` (e.g. ``rule``, ``tol``).  EP runs cold at every proposal, so
        :math:`q` depends on :math:`\theta'` alone (a warm start would tie it to the chain's path).
    """
    X_arr, y_arr = np.asarray(X), np.asarray(y, dtype=float)
    theta = np.atleast_1d(np.asarray(theta0, dtype=float)).copy()
    d = theta.size
    cov = np.atleast_2d(np.asarray(proposal_cov, dtype=float))
    if cov.shape != (d, d):
        raise ValueError(f"proposal_cov must be ({d}, {d}) for a theta0 of {d} coordinates, got {cov.shape}")
    if n_steps < 4 or n_burn < 0:
        raise ValueError(f"n_steps must be at least 4 and n_burn non-negative, got {n_steps!r} and {n_burn!r}")
    scale = 2.38**2 / d if proposal_scale is None else float(proposal_scale)
    if not scale > 0.0:
        raise ValueError(f"proposal_scale must be positive, got {proposal_scale!r}")
    step_factor = _chol(scale * cov, "proposal_cov")
    rng = np.random.default_rng(random_state)

    def log_estimate(t: Array) -> float:
        K = _kernel_matrix(kernel, X_arr, t, jitter)
        m, S = ep_importance_proposal(K, y_arr, likelihood, **infer_options)
        return log_evidence_estimate(K, y_arr, likelihood, m, S, n_importance, rng, df=df, inflation=inflation)

    cur_prior = float(log_prior(theta))
    if not np.isfinite(cur_prior):
        raise ValueError(f"theta0 must lie inside the prior's support, log_prior(theta0) = {cur_prior}")
    chain, estimates, accepted = np.empty((n_steps, d)), np.empty(n_steps), 0
    with fit_threads(len(y_arr), dense=True):
        cur_est = log_estimate(theta)
        for step in range(n_burn + n_steps):
            prop = theta + step_factor @ rng.standard_normal(d)
            prop_prior = float(log_prior(prop))
            if np.isfinite(prop_prior):
                prop_est = log_estimate(prop)
                if np.log(rng.uniform()) < prop_est + prop_prior - cur_est - cur_prior:
                    theta, cur_prior, cur_est, accepted = prop, prop_prior, prop_est, accepted + 1
            if step >= n_burn:
                chain[step - n_burn], estimates[step - n_burn] = theta, cur_est
    ess = effective_sample_size(chain)
    sd = chain.std(axis=0, ddof=1)
    return PseudoMarginalResult(
        chain, estimates, accepted / (n_burn + n_steps), chain.mean(axis=0), sd, ess, sd / np.sqrt(ess), scale * cov
    )
