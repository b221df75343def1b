r"""Ground truth by Markov chain Monte Carlo: elliptical slice sampling of the GP latent.

Elliptical slice sampling (Murray, Adams & MacKay 2010) samples
:math:`p(f \mid y) \propto N(f \mid 0, K) \prod_i t(y_i f_i)` without tuning: from the
current :math:`f` and a prior draw :math:`\nu \sim N(0, K)` it proposes points
:math:`f\cos\theta + \nu\sin\theta` on the ellipse through both, shrinking the bracket of
:math:`\theta` until :math:`\log L > \log L(f) + \log U`.  Every step is accepted, and a
hard constraint (the noise-free step, ``eps = 0``) is handled exactly, provided the chain
starts inside it.  Where the posterior is far narrower than the prior (large kernel
amplitudes, long length-scales) prior ellipses mix slowly; given a Gaussian approximation
:math:`N(m, S)` of the posterior, the sampler instead runs on the ellipses of
:math:`N(m, S)` with the exact residual factor

.. math:: \log \tilde L(f) = \log N(f | 0, K) - \log N(f | m, S) + \sum_i \log t(y_i f_i),

so the target is unchanged (any :math:`S` is correct; a good one mixes fast; Nishihara,
Murray & Adams 2014).  Several chains run in lock step (vectorised); convergence is checked
with the split-:math:`\hat R` of Gelman et al. (2013) on :math:`f` and :math:`f^2`, and the
Monte Carlo error of the mean by batch means.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg

from relaxep._memory import check_memory, dense_bytes
from relaxep._threads import small_matrix_threads
from relaxep._typing import Array
from relaxep._validation import check_kernel_matrix, cholesky_factor
from relaxep.likelihoods import Likelihood

__all__ = ["MCMCResult", "MulticlassMCMCResult", "elliptical_slice", "elliptical_slice_multiclass"]


@dataclass(frozen=True)
class MCMCResult:
    """Posterior moments of ``f`` from several elliptical-slice chains.

    Attributes
    ----------
    mean, var : ndarray (n,)
        Posterior mean and marginal variances of ``f`` (all chains pooled).
    mean_se : ndarray (n,)
        Monte Carlo standard error of ``mean`` (batch means, 20 batches per chain).
    rhat : float
        The largest split-:math:`\\hat R` over coordinates, for :math:`f` and :math:`f^2`.
    n_chains, n_samples : int
        Chains and kept samples per chain.
    log_lik_evals : int
        Likelihood evaluations per chain (1 + shrinkage steps per sample, on average).
    """

    mean: Array
    var: Array
    mean_se: Array
    rhat: float
    n_chains: int
    n_samples: int
    log_lik_evals: int

    @property
    def converged(self) -> bool:
        """``rhat < 1.01`` (a strict threshold for the classic split-:math:`\\hat R` of Gelman et al. 2013)."""
        return bool(self.rhat < 1.01)


def _split_rhat(s1: Array, s2: Array, count: int) -> Array:
    r"""Split-:math:`\hat R` from per-sequence sums ``s1`` and sums of squares ``s2`` (m, n)."""
    seq_mean = s1 / count
    seq_var = (s2 - count * seq_mean**2) / (count - 1)
    w = seq_var.mean(axis=0)
    b_over_n = seq_mean.var(axis=0, ddof=1)
    var_plus = (count - 1) / count * w + b_over_n
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt(var_plus / w)
    return np.where(w > 0, r, np.where(b_over_n > 0, np.inf, 1.0))


def _slice_on_ellipses(
    F: Array,
    cur: Array,
    point: Callable[[Array, Array, Array], Array],
    log_lik: Callable[[Array], Array],
    rng: np.random.Generator,
) -> int:
    r"""One elliptical slice step for every chain at once (Murray, Adams & MacKay 2010, Fig. 2).

    Each chain draws a log-likelihood threshold below ``cur`` and a first angle :math:`\theta`; chain ``k``
    proposes ``point(k, cos theta_k, sin theta_k)`` on its ellipse; a proposal above the chain's threshold
    is accepted (``F`` and ``cur`` updated in place),
    else the angle bracket :math:`[\theta - 2\pi, \theta]` shrinks towards 0 and a new angle is
    drawn in it.  Ends when every chain has accepted (it always does: the bracket shrinks to the
    current point).  Returns the number of log-likelihood evaluations.
    """
    n_chains = F.shape[0]
    threshold = cur + np.log(rng.uniform(size=n_chains))
    theta = rng.uniform(0.0, 2.0 * np.pi, n_chains)
    lo, hi = theta - 2.0 * np.pi, theta.copy()
    active = np.arange(n_chains)
    evals = 0
    while active.size:
        evals += active.size
        prop = point(active, np.cos(theta[active]), np.sin(theta[active]))
        ll = log_lik(prop)
        ok = ll > threshold[active]
        F[active[ok]] = prop[ok]
        cur[active[ok]] = ll[ok]
        rej = active[~ok]
        neg = theta[rej] < 0.0
        lo[rej] = np.where(neg, theta[rej], lo[rej])
        hi[rej] = np.where(neg, hi[rej], theta[rej])
        theta[rej] = rng.uniform(lo[rej], hi[rej])
        active = rej
    return evals


class _ChainSums:
    r"""Sums over the kept samples, as the chains run: of :math:`f`, :math:`f^2` and :math:`f^4` per half-chain
    (for split-:math:`\hat R`) and of :math:`f` per batch of each chain (20 batches, for batch means)."""

    def __init__(self, n_chains: int, n_samples: int, size: int) -> None:
        self.n_chains, self.n_samples, self.size = n_chains, n_samples, size
        self.half, self.batch = n_samples // 2, n_samples // 20
        self.s1 = np.zeros((2 * n_chains, size))
        self.s2 = np.zeros((2 * n_chains, size))
        self.s4 = np.zeros((2 * n_chains, size))
        self.batch_sum = np.zeros((n_chains, 20, size))

    def add(self, k: int, flat: Array) -> None:
        """Kept sample ``k`` of every chain, ``flat`` of shape ``(n_chains, size)``."""
        rows = np.arange(self.n_chains) * 2 + (k >= self.half)
        F2 = flat * flat
        self.s1[rows] += flat
        self.s2[rows] += F2
        self.s4[rows] += F2 * F2
        self.batch_sum[:, k // self.batch] += flat

    def summary(self) -> tuple[Array, Array, Array, float]:
        r"""The pooled mean and variance (not clipped), the batch-means standard error of the mean and
        :math:`\hat R`."""
        total = self.n_chains * self.n_samples
        mean = self.s1.sum(axis=0) / total
        var = self.s2.sum(axis=0) / total - mean**2
        batch_means = (self.batch_sum / self.batch).reshape(-1, self.size)
        mean_se = batch_means.std(axis=0, ddof=1) / np.sqrt(batch_means.shape[0])
        s1, s2, s4, half = self.s1, self.s2, self.s4, self.half
        rhat = max(float(np.max(_split_rhat(s1, s2, half))), float(np.max(_split_rhat(s2, s4, half))))
        return mean, var, mean_se, rhat


def _check_sampler_memory(K: Any, n_samples: Any, n_chains: Any) -> None:
    """Refuse before allocating: ``K``'s factor and copy, and the stored draws (``n_chains x n_samples x n``)."""
    shape = np.shape(K)
    n = int(shape[-1]) if len(shape) >= 2 else 0
    try:
        draws = 8.0 * float(n_samples) * float(n_chains) * n * (shape[0] if len(shape) == 3 else 1)
    except (TypeError, ValueError):
        return  # _check_chains names the bad argument
    check_memory(
        dense_bytes(n, 2) + draws,
        f"elliptical slice sampling on n = {n} points ({n_chains} chains x {n_samples} samples)",
        "draw fewer samples or chains, or sample a smaller problem",
    )


def _lower_solve(low: Array) -> Callable[[Array], Array]:
    """``b -> L^{-1} b`` for a lower triangular ``L``: LAPACK's ``trtrs`` called as ``scipy.linalg.solve_triangular``
    calls it (the same result), without its per-call checks (the sampler solves a few columns thousands of times)."""
    (trtrs,) = linalg.get_lapack_funcs(("trtrs",), (low,))
    fortran = low.flags.f_contiguous
    a = low if fortran else low.T

    def solve(b: Array) -> Array:
        x, info = trtrs(a, b, lower=int(fortran), trans=int(not fortran))
        if info != 0:
            raise linalg.LinAlgError(f"triangular solve failed (trtrs info {info})")
        return x

    return solve


def _check_chains(n_samples: int, n_burn: int, n_chains: int) -> None:
    if n_samples < 40 or n_samples % 40:
        raise ValueError(f"n_samples must be a positive multiple of 40, got {n_samples}")
    if n_chains < 2 or n_burn < 0:
        raise ValueError(f"need n_chains >= 2 and n_burn >= 0, got {n_chains} and {n_burn}")


def _prior_of_chains(
    K: ArrayLike, n_samples: int, n_burn: int, n_chains: int, random_state: Any
) -> tuple[Array, Array, np.random.Generator]:
    """A sampler's door: its memory (refused before allocating), ``K`` checked, the chains' sizes checked; returns
    ``K``, its Cholesky factor (elliptical slice sampling draws from :math:`N(0, K)`: ``K`` must be positive
    definite) and the generator."""
    _check_sampler_memory(K, n_samples, n_chains)
    K = check_kernel_matrix(K)
    _check_chains(n_samples, n_burn, n_chains)
    return K, cholesky_factor(K), np.random.default_rng(random_state)


def _run_chains(
    F: Array,
    log_lik: Callable[[Array], Array],
    prior_draw: Callable[[], Array],
    centre: Array | float,
    steps: tuple[int, int],
    rng: np.random.Generator,
    keep: Callable[[int], None],
) -> int:
    r"""Elliptical slice steps of every chain from the states ``F`` (``(n_chains, ...)``, updated in place) on
    the ellipses :math:`c + (f - c)\cos\theta + \nu\sin\theta` about the centre :math:`c`, with
    :math:`\nu` = ``prior_draw()`` a step: ``steps = (n_burn, n_samples)``, ``keep(k)`` called after kept step
    ``k``.  Returns the log-likelihood evaluations of all chains."""
    cur = log_lik(F)
    if not np.all(np.isfinite(cur)):
        raise ValueError("the chains' starting points have zero likelihood")
    per_chain = (slice(None),) + (None,) * (F.ndim - 1)  # an angle's cos and sin broadcast over a state
    n_burn, n_samples = steps
    evals = 0
    with small_matrix_threads():  # small products in a loop: one BLAS thread (relaxep._threads)
        for it in range(n_burn + n_samples):
            nu = prior_draw()

            def on_ellipse(a: Array, c: Array, s: Array, nu: Array = nu) -> Array:
                return centre + (F[a] - centre) * c[per_chain] + nu[a] * s[per_chain]

            evals += _slice_on_ellipses(F, cur, on_ellipse, log_lik, rng)
            if it >= n_burn:
                keep(it - n_burn)
    return evals


def elliptical_slice(
    K: ArrayLike,
    y: ArrayLike,
    likelihood: Likelihood,
    *,
    n_samples: int = 5000,
    n_burn: int = 1000,
    n_chains: int = 4,
    random_state: int | np.random.Generator | None = None,
    approx: tuple[ArrayLike, ArrayLike] | None = None,
) -> MCMCResult:
    r"""Sample :math:`p(f \mid y) \propto N(f \mid 0, K) \prod_i p(y_i \mid f_i)` by elliptical slice sampling.

    Parameters
    ----------
    K : array_like (n, n)
        Prior covariance; must have a Cholesky factor (add jitter for singular kernels).
    y : array_like (n,)
        Targets, checked by ``likelihood.check_targets`` (labels in {-1, +1} for a binary likelihood).
    likelihood : Likelihood
        Its :meth:`~relaxep.likelihoods.Likelihood.log_lik` is the target's log factor.
    n_samples, n_burn, n_chains : int
        Kept samples per chain (a multiple of 40: two halves of 20 batches), discarded
        warm-up samples, chains.  Chain ``c`` starts at :math:`f = y\,\delta_c` with
        over-dispersed :math:`\delta_c \in [0.1, 3]`, inside any hard constraint (rows of targets: their first
        column, or the last where the first is infinite, as a left-censored survival row's; 0 where neither is finite).
    random_state : int, Generator or None
    approx : (mean, cov), optional
        A Gaussian approximation of the posterior whose ellipses the sampler follows (the
        target stays exact).  Chains then start at ``mean`` plus over-dispersed draws from
        ``cov``; a draw outside a hard constraint is replaced by the default start.

    Returns
    -------
    MCMCResult
    """
    K, chol, rng = _prior_of_chains(K, n_samples, n_burn, n_chains, random_state)
    n = K.shape[0]
    classes = {"both_classes": False} if likelihood.class_targets else {}  # one class is a valid posterior here
    y = likelihood.check_targets(y, n, **classes)
    centre = np.zeros(n)
    base_chol = chol
    if approx is not None:
        centre = np.asarray(approx[0], dtype=float)
        cov = np.asarray(approx[1], dtype=float)
        if centre.shape != (n,) or cov.shape != (n, n):
            raise ValueError(f"approx must be (mean (n,), cov (n, n)) with n = {n}")
        if not (np.all(np.isfinite(centre)) and np.all(np.isfinite(cov))):
            raise ValueError("approx contains NaN or inf")
        try:
            base_chol = linalg.cholesky(0.5 * (cov + cov.T), lower=True, check_finite=False)
        except linalg.LinAlgError as exc:
            raise ValueError("approx's covariance has no Cholesky factor") from exc

    solve_prior, solve_base = _lower_solve(chol), _lower_solve(base_chol)

    def log_gauss(f: Array, c: Array, solve: Callable[[Array], Array]) -> Array:
        z = solve((f - c).T)
        return -0.5 * np.sum(z * z, axis=0)

    def log_lik(f: Array) -> Array:
        ll = likelihood.log_lik(y, f).sum(axis=-1)
        if approx is not None:
            ll = ll + log_gauss(f, np.zeros(n), solve_prior) - log_gauss(f, centre, solve_base)
        return ll

    start = y if y.ndim == 1 else np.where(np.isfinite(y[:, 0]), y[:, 0], y[:, -1])  # rows: their (finite) values
    F = np.where(np.isfinite(start), start, 0.0) * np.geomspace(0.1, 3.0, n_chains)[:, None]
    if approx is not None:
        draws = centre + np.geomspace(0.5, 2.0, n_chains)[:, None] * (rng.standard_normal((n_chains, n)) @ base_chol.T)
        inside = np.isfinite(log_lik(draws))
        F = np.where(inside[:, None], draws, F)
    sums = _ChainSums(n_chains, n_samples, n)

    def prior_draw() -> Array:
        return rng.standard_normal((n_chains, n)) @ base_chol.T

    evals = _run_chains(F, log_lik, prior_draw, centre, (n_burn, n_samples), rng, lambda k: sums.add(k, F))
    mean, var, mean_se, rhat = sums.summary()
    return MCMCResult(mean, np.maximum(var, 0.0), mean_se, rhat, n_chains, n_samples, evals // n_chains)


@dataclass(frozen=True)
class MulticlassMCMCResult:
    """Posterior moments of the ``C`` latent functions from elliptical-slice chains.

    Attributes
    ----------
    mean, var : ndarray (n, C)
        Posterior means and marginal variances of :math:`f_{ic}`.
    cov : ndarray (n, C, C)
        Posterior covariance of the ``C`` latents of each point.
    mean_se : ndarray (n, C)
        Monte Carlo standard error of ``mean`` (batch means, 20 batches per chain).
    rhat : float
        Largest split-:math:`\\hat R` over coordinates, for :math:`f` and :math:`f^2`.
    samples : ndarray (m, n, C)
        Every 10th kept sample of every chain (for predictive checks).
    """

    mean: Array
    var: Array
    cov: Array
    mean_se: Array
    rhat: float
    samples: Array


def elliptical_slice_multiclass(
    K: ArrayLike,
    y: ArrayLike,
    likelihood: object,
    n_classes: int,
    *,
    n_samples: int = 4000,
    n_burn: int = 1000,
    n_chains: int = 4,
    random_state: int | np.random.Generator | None = None,
) -> MulticlassMCMCResult:
    r"""Elliptical slice sampling of :math:`p(F | y) \propto \prod_c N(f_c | 0, K) \prod_i p(y_i | F_i)`.

    The :math:`C` latent functions are one vector of length :math:`nC` with the block-diagonal
    prior :math:`I_C \otimes K`; a step proposes :math:`F \cos\theta + \nu \sin\theta` with
    :math:`\nu` a prior draw of all :math:`C` functions (Murray, Adams & MacKay 2010).

    Parameters
    ----------
    K : array_like (n, n)
        The kernel shared by the classes (positive definite).
    y : array_like (n,)
        Class indices in ``{0, ..., C-1}``.
    likelihood : relaxep.multiclass.MulticlassLikelihood
        Its exact ``log_lik(y, F)`` (``F`` of shape ``(chains, n, C)``) is the target's factor.
    n_classes : int
    n_samples, n_burn, n_chains : int
        Kept samples per chain (a multiple of 40), warm-up, chains (>= 2).
    random_state : int, Generator or None

    Returns
    -------
    MulticlassMCMCResult
    """
    K, chol, rng = _prior_of_chains(K, n_samples, n_burn, n_chains, random_state)
    n = K.shape[0]
    y = np.asarray(y)
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer) or np.any((y < 0) | (y >= n_classes)):
        raise ValueError(f"y must hold {n} class indices in [0, {n_classes})")
    C = int(n_classes)

    def draw() -> Array:  # (chains, n, C) prior draws
        return np.einsum("ij,kjc->kic", chol, rng.standard_normal((n_chains, n, C)))

    def log_lik(F: Array) -> Array:
        return likelihood.log_lik(y, F).sum(axis=-1)

    F = 0.5 * draw()
    F[:, np.arange(n), y] += 1.0  # start where every label is the argmax (finite for hard likelihoods)
    sums = _ChainSums(n_chains, n_samples, n * C)
    outer = np.zeros((n, C, C))
    kept = []

    def keep(k: int) -> None:
        sums.add(k, F.reshape(n_chains, -1))
        outer[...] += np.einsum("kic,kid->icd", F, F)
        if k % 10 == 0:
            kept.append(F.copy())

    _run_chains(F, log_lik, draw, 0.0, (n_burn, n_samples), rng, keep)
    mean, var, mean_se, rhat = sums.summary()
    m = mean.reshape(n, C)
    cov = outer / (n_chains * n_samples) - m[:, :, None] * m[:, None, :]
    return MulticlassMCMCResult(
        m, np.maximum(var, 0.0).reshape(n, C), cov, mean_se.reshape(n, C), rhat, np.concatenate(kept)
    )
