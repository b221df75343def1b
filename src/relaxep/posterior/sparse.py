r"""The sparse (FITC) EP posterior: inducing points, :math:`O(nM^2)` a refresh, :math:`O(nM)` memory.

The prior is the fully independent training conditional of Snelson & Ghahramani (2006),
used for EP by Naish-Guzman & Holden (2007, "The generalized FITC approximation", NIPS)
and in GPML's ``infEP`` with ``apxSparse``:

.. math::
    f \sim N(0,\ Q + G),\qquad Q = K_{fu} K_{uu}^{-1} K_{uf},\qquad
    G = \operatorname{diag}(g),\ g_i = k_{ii} - Q_{ii},

with :math:`M` inducing inputs :math:`Z` (:math:`K_{uu} = k(Z, Z)`, :math:`K_{uf} = k(Z, X)`).
It is held whitened: :math:`L_{uu}L_{uu}^\top = K_{uu}`, :math:`V = L_{uu}^{-1}K_{uf}`
(:math:`M \times n`, stored as its ``n x M`` transpose so that row chunks are contiguous), so
:math:`Q = V^\top V`, :math:`g_i = k_{ii} - \|v_i\|^2`.  With inducing inputs equal to the
training inputs, :math:`Q = K` and :math:`G = 0`: the dense prior exactly.

Given sites :math:`(\tau, \nu)` the posterior never divides by :math:`\tau` (sites of any sign):

.. math::
    d_i = 1 + g_i\tau_i,\quad w_i = \tau_i / d_i,\quad \beta_i = \nu_i / d_i,\quad
    B = I_M + V W V^\top,\quad m = B^{-1} V\beta,

the posterior of the whitened inducing values :math:`v = L_{uu}^{-1}u` being :math:`N(m, B^{-1})`,
and with :math:`s_i = \|L_B^{-1}v_i\|^2` (:math:`L_B L_B^\top = B`)

.. math::
    \mu_i = \frac{v_i^\top m + g_i\nu_i}{d_i},\qquad
    A_{ii} = \frac{g_i}{d_i} + \frac{s_i}{d_i^2},\qquad
    \log|I + (Q+G)T| = \sum_i \log d_i + \log|B|.

The posterior is proper iff every :math:`d_i > 0` and :math:`B` is positive definite.  No
``n x n`` array is formed anywhere: a refresh is one weighted Gram sum over row chunks of
:math:`V^\top` (``syrk``, :math:`nM^2` flops), one :math:`M \times M` Cholesky and one
triangular multiply per chunk for the marginals.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from relaxep._threads import n_threads
from relaxep._typing import Array
from relaxep._validation import check_prior_scale
from relaxep._xp import namespace, on_device_of, to_numpy

# the chunk kernels live in _sparse_linalg (shared with the Dask shards of inference.sharded)
from relaxep.posterior._sparse_linalg import (
    KUU_JITTER,
    conditional_variances,
    device_cross_kernel,
    inducing_factor,
    matrices_prior,
    multiply_rows,
    posterior_pass,
    predict_rows,
    rows_per_block,
    solve_rows,
    sparse_prior_rows,
)
from relaxep.posterior.base import Posterior, Prior, SiteProposer, SweepStats

__all__ = ["SparsePosterior", "SparsePrior"]


class SparsePrior(Prior):
    r"""The FITC prior :math:`N(0, Q + \operatorname{diag}(K - Q))` at ``X`` through inducing inputs ``Z``.

    Parameters
    ----------
    X : array_like of shape (n, d)
        Training inputs (copied).
    Z : array_like of shape (M, d)
        Inducing inputs (copied).
    kernel : callable
        ``kernel(A, B)`` the cross-covariance matrix and ``kernel.diag(A)`` the variances
        (any scikit-learn kernel).
    latent_noise : float
        Added to every prior variance :math:`k_{ii}` (and so to :math:`g`, not to :math:`Q`):
        the dense fit's ``K + s^2 I``.
    jitter : float
        Relative jitter on :math:`K_{uu}`: :math:`K_{uu} + \epsilon\,\overline{\operatorname{diag}K_{uu}}\,I`.
    chunk_size : int or None, default None
        Rows per pass (temporaries are ``chunk_size x M``): the row block one thread takes.  ``None``:
        :func:`~relaxep.posterior._sparse_linalg.rows_per_block` of ``M`` (1024 at ``M = 200``).
    n_jobs : int or None, default None
        Threads for the row blocks of every :math:`O(nM^2)` pass (building :math:`V^\top`, a refresh, a
        prediction), each with one BLAS thread; scikit-learn's convention (``-1`` every core, ``-k`` all but
        ``k - 1``), except that ``None`` uses the machine: ``OMP_NUM_THREADS`` where it is set, else every
        core this process may run on.  The blocks and the order of their sums do not depend on it, so
        neither does the posterior (:mod:`relaxep._threads`).

    Memory: :math:`V^\top` (``n x M``) and :math:`M \times M` factors; :math:`K_{uf}` is never held whole.

    Raises
    ------
    ValueError
        For inputs of the wrong shape or not finite;
        :class:`~relaxep.KernelNotPositiveDefiniteError` when :math:`K_{uu}` has no Cholesky
        factor (duplicated inducing inputs without jitter).
    """

    def __init__(
        self,
        X: ArrayLike,
        Z: ArrayLike,
        kernel: Any,
        *,
        latent_noise: float = 0.0,
        jitter: float = KUU_JITTER,
        chunk_size: int | None = None,
        n_jobs: int | None = None,
    ) -> None:
        X = _check_inputs(X, "X")  # (another array library's X stays there: relaxep._xp)
        Z = _check_inputs(to_numpy(Z), "Z")
        if Z.shape[1] != X.shape[1]:
            raise ValueError(f"Z must have {X.shape[1]} columns like X, got shape {Z.shape}")
        if not callable(kernel) or not hasattr(kernel, "diag"):
            raise TypeError(f"kernel must be callable as kernel(A, B) and have kernel.diag(A), got {kernel!r}")
        if not (float(latent_noise) >= 0.0 and float(jitter) >= 0.0):
            raise ValueError(f"latent_noise and jitter must be >= 0, got {latent_noise!r} and {jitter!r}")
        self.X, self.Z, self.kernel = X, Z, kernel
        self.latent_noise, self.jitter = float(latent_noise), float(jitter)
        self.chunk_size = rows_per_block(Z.shape[0]) if chunk_size is None else int(chunk_size)
        n_threads(n_jobs)  # refuses a bad n_jobs now
        self.n_jobs = n_jobs
        self.K_uu, self.L_uu, self.kuu_jitter = inducing_factor(kernel, Z, self.jitter)
        self.Vt, self.k_diag, self.g = sparse_prior_rows(
            kernel, X, Z, self.L_uu, self.latent_noise, self.chunk_size, self.n_jobs
        )
        self.K_uu, self.L_uu = on_device_of(self.K_uu, self.Vt), on_device_of(self.L_uu, self.Vt)
        check_prior_scale(to_numpy(self.k_diag), "the kernel's variances at X")

    @classmethod
    def from_matrices(cls, K_uu: ArrayLike, K_fu: ArrayLike, k_ff_diag: ArrayLike) -> SparsePrior:
        r"""The FITC prior from :math:`K_{uu}` (``M x M``), :math:`K_{fu}` (``n x M``) and
        :math:`\operatorname{diag}K_{ff}`.

        No jitter is added; predictions then take :math:`K_{*u}` and the test variances.
        """
        self = cls.__new__(cls)
        xp, numpy = namespace(K_uu, K_fu, k_ff_diag)
        if numpy:
            K_uu, K_fu, k_ff_diag = (
                np.array(K_uu, dtype=float),
                np.asarray(K_fu, dtype=float),
                np.array(k_ff_diag, dtype=float),
            )
        k_uu, k_fu, diag = K_uu, K_fu, k_ff_diag
        if k_uu.ndim != 2 or k_uu.shape[0] != k_uu.shape[1]:
            raise ValueError(f"K_uu must be a square matrix, got shape {k_uu.shape}")
        if k_fu.ndim != 2 or k_fu.shape[1] != k_uu.shape[0]:
            raise ValueError(f"K_fu must have shape (n, {k_uu.shape[0]}), got {k_fu.shape}")
        if diag.shape != (k_fu.shape[0],):
            raise ValueError(f"k_ff_diag must have shape ({k_fu.shape[0]},), got {diag.shape}")
        if not all(bool(xp.all(xp.isfinite(a))) for a in (k_uu, k_fu, diag)):
            raise ValueError("K_uu, K_fu or k_ff_diag contains NaN or inf")
        self.X = self.Z = self.kernel = None
        self.latent_noise, self.jitter, self.kuu_jitter = 0.0, 0.0, 0.0
        self.chunk_size = rows_per_block(k_uu.shape[0])
        self.n_jobs = None
        self.K_uu, self.L_uu, self.Vt = matrices_prior(k_uu, k_fu, self.chunk_size)
        self.k_diag = diag
        self.g = conditional_variances(diag, self.Vt)
        return self

    @property
    def n(self) -> int:
        return self.Vt.shape[0]

    @property
    def n_inducing(self) -> int:
        """:math:`M`, the number of inducing inputs."""
        return self.Vt.shape[1]

    def posterior(
        self,
        site_precision: Array | None = None,
        site_mean_precision: Array | None = None,
        marginals_only: bool = False,
    ) -> SparsePosterior:
        """The FITC posterior for these sites (it always keeps only the marginals, so ``marginals_only`` is moot)."""
        return SparsePosterior(self, site_precision, site_mean_precision)

    @classmethod
    def from_kernel(cls, kernel: Any, X: ArrayLike, Z: ArrayLike, noise: float = 0.0, **options: Any) -> SparsePrior:
        r"""The FITC prior of a scikit-learn kernel with inducing inputs ``Z`` and latent noise ``noise``
        (:meth:`DensePrior.from_kernel`'s arguments plus ``Z``; ``options``: ``jitter``, ``chunk_size``)."""
        return cls(X, Z, kernel, latent_noise=noise, **options)

    @property
    def test_block(self) -> int:  # type: ignore[override]
        """Rows of ``X_test`` per block of :meth:`predict_at`: the prior's ``chunk_size``."""
        return self.chunk_size

    def cross_covariance(self, X_test: ArrayLike) -> tuple[Array, Array]:
        r""":math:`K_{*u}` and the prior test variances :math:`k_{**}` (+ latent noise): what
        :meth:`SparsePosterior.predict_latent` takes.  Only for a prior built from a kernel."""
        if self.kernel is None:
            raise ValueError("this SparsePrior was built from matrices: pass K_*u and k_** yourself")
        X_test = _check_inputs(X_test, "X_test")
        if not namespace(X_test)[1]:
            cross, diag = device_cross_kernel(self.kernel, X_test, self.Z)
            return cross, diag + self.latent_noise
        return np.asarray(self.kernel(X_test, self.Z), dtype=float), np.asarray(
            self.kernel.diag(X_test), dtype=float
        ) + self.latent_noise

    def cross_kernel(self, X_test: ArrayLike) -> tuple[Array, Array]:
        """:meth:`cross_covariance` (deprecated name; removed in 0.4)."""
        warnings.warn(
            "SparsePrior.cross_kernel is cross_covariance: use .cross_covariance; removed in 0.4",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.cross_covariance(X_test)

    def dense_covariance(self) -> Array:
        """The ``n x n`` FITC covariance :math:`Q + G` (for tests and small problems only)."""
        return self.Vt @ self.Vt.T + np.diag(self.g)


def _check_inputs(A: ArrayLike, name: str) -> Array:
    xp, numpy = namespace(A)
    if numpy:
        try:
            A = np.array(A, dtype=float)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be a numeric array, got {type(A).__name__}") from exc
    elif A.dtype != xp.float64:
        A = xp.astype(A, xp.float64)  # float64 on every device
    if A.ndim != 2 or A.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty 2-d array (rows are inputs), got shape {A.shape}")
    if not bool(xp.all(xp.isfinite(A))):
        raise ValueError(f"{name} contains NaN or inf")
    return A


class SparsePosterior(Posterior):
    r"""The EP posterior under a FITC prior (module docstring): :math:`O(nM)` memory, :math:`O(nM^2)` a refresh.

    Holds the sites, :math:`d, w, \beta`, :math:`L_B`, :math:`L_B^{-1}`, :math:`m` and the
    marginals.  The sequential path (:meth:`update_site`, :meth:`apply_sequential`) keeps
    :math:`\Sigma = B^{-1}` and updates it by Sherman-Morrison, :math:`O(M^2)` a site; the
    refresh that ends a sweep recomputes everything from the sites.  It has no ``cov``.
    """

    def __init__(
        self, prior: SparsePrior, site_precision: Array | None = None, site_mean_precision: Array | None = None
    ) -> None:
        n = prior.n
        self.prior = prior
        # the sites live on the host in numpy, whatever the prior's library: the schedules and the rules
        # (O(n) element-wise work) are numpy code; a refresh moves them to the prior's device and back
        self.site_precision = np.zeros(n) if site_precision is None else np.array(to_numpy(site_precision), dtype=float)
        self.site_mean_precision = (
            np.zeros(n) if site_mean_precision is None else np.array(to_numpy(site_mean_precision), dtype=float)
        )
        if self.site_precision.shape != (n,) or self.site_mean_precision.shape != (n,):
            raise ValueError(f"site parameters must have shape ({n},)")
        self._sigma: Array | None = None
        self._factor_stale = True
        self.refresh()

    @property
    def n(self) -> int:
        return self.prior.n

    @property
    def mean(self) -> Array:  # type: ignore[override]
        r"""Posterior means :math:`\mu_i` (recomputed from the sites if they changed)."""
        if self._factor_stale:
            self.refresh()
        return self._mean

    @property
    def marginal_var(self) -> Array:
        r"""Posterior marginal variances :math:`A_{ii}`."""
        if self._factor_stale:
            self.refresh()
        return self._var

    @property
    def inducing_mean(self) -> Array:
        r""":math:`m`: the posterior mean of the whitened inducing values :math:`L_{uu}^{-1}u`."""
        if self._factor_stale:
            self.refresh()
        return self._m

    @property
    def chol_b(self) -> Array:
        r""":math:`L_B`, the Cholesky factor of :math:`B = I + VWV^\top`.

        :math:`B` is the posterior precision of :math:`L_{uu}^{-1}u`."""
        if self._factor_stale:
            self.refresh()
        return self._chol

    def set_sites(self, index: Array | slice, precision: Array, mean_precision: Array) -> None:
        self.site_precision[index] = precision
        self.site_mean_precision[index] = mean_precision
        self._factor_stale = True
        self._sigma = None

    def refresh(self, marginals_only: bool = False) -> None:
        """Recompute the posterior from the sites: one Gram pass over :math:`V^\\top`, one Cholesky, one marginal pass.

        Raises
        ------
        ImproperPosteriorError
            When some :math:`d_i \\le 0`, :math:`B` is not positive definite or a marginal
            variance is not positive.
        """
        p = self.prior
        tau, nu = (on_device_of(a, p.Vt) for a in (self.site_precision, self.site_mean_precision))
        chol, chol_inv, m, b, log_det, mean, var = posterior_pass(p.Vt, p.g, tau, nu, p.chunk_size, p.n_jobs)
        self._chol, self._chol_inv, self._m, self._b, self._log_det = chol, chol_inv, m, b, log_det
        self._mean, self._var = to_numpy(mean), to_numpy(var)
        self._sigma = None
        self._factor_stale = False

    def log_det_b(self) -> float:
        r""":math:`\log|I + (Q + G)T| = \sum_i \log d_i + \log|B|`."""
        if self._factor_stale:
            self.refresh()
        return self._log_det

    def log_partition(self) -> float:
        r""":math:`\log Z_q = \tfrac12\nu^\top\mu - \tfrac12\log|I + (Q+G)T|`."""
        return 0.5 * float(self.site_mean_precision @ self.mean) - 0.5 * self.log_det_b()

    def predict_latent(self, cross_kernel: Array, test_diag: Array) -> tuple[Array, Array]:
        r"""Latent predictive mean and variance from :math:`K_{*u}` (``m x M``, **not** :math:`K_{*f}`).

        With :math:`a_* = L_{uu}^{-1}k_{u*}` (FITC's test conditional, Snelson & Ghahramani 2006):

        .. math:: \mu_* = a_*^\top m,\qquad s^2_* = k_{**} - \|a_*\|^2 + \|L_B^{-1}a_*\|^2.

        Memory :math:`O(mM)`; row chunks of ``chunk_size``.
        """
        p = self.prior
        if cross_kernel.ndim != 2 or cross_kernel.shape[1] != p.n_inducing:
            raise ValueError(
                f"the sparse posterior predicts from K_*u of shape (m, {p.n_inducing}) (covariances to the "
                f"inducing inputs), got {cross_kernel.shape}"
            )
        m_ind = self.inducing_mean  # (refreshes a stale factor first)
        cross_kernel, test_diag = on_device_of(cross_kernel, p.Vt), on_device_of(test_diag, p.Vt)
        mean, var = predict_rows(p.L_uu, m_ind, self._chol_inv, cross_kernel, test_diag, p.chunk_size, p.n_jobs)
        return to_numpy(mean), to_numpy(var)

    def predict_latent_cov(self, cross_kernel: Array, test_kernel: Array) -> tuple[Array, Array]:
        r"""Latent predictive mean and covariance from :math:`K_{*u}`: :math:`K_{**} - A^\top A + R^\top R`,
        :math:`A = L_{uu}^{-1}K_{u*}`, :math:`R = L_B^{-1}A` (:meth:`predict_latent`'s, jointly; memory
        :math:`O(m^2 + mM)`)."""
        p = self.prior
        if cross_kernel.ndim != 2 or cross_kernel.shape[1] != p.n_inducing:
            raise ValueError(f"K_*u must have shape (m, {p.n_inducing}), got {cross_kernel.shape}")
        m_ind = self.inducing_mean  # (refreshes a stale factor first)
        cross_kernel, test_kernel = on_device_of(cross_kernel, p.Vt), on_device_of(test_kernel, p.Vt)
        a = solve_rows(p.L_uu, cross_kernel)
        r = multiply_rows(self._chol_inv, a)
        cov = test_kernel - a @ a.T + r @ r.T
        return a @ m_ind, 0.5 * (cov + cov.T)

    # ------------------------------------------------------- one-site updates
    def _ensure_sigma(self) -> Array:
        r""":math:`\Sigma = B^{-1}` at the current sites (kept current by the one-site updates)."""
        if not namespace(self.prior.Vt)[1]:
            raise TypeError("the sequential (one-site) updates run on numpy arrays only: use the parallel schedule")
        if self._sigma is None:
            if self._factor_stale:
                self.refresh()
            self._sigma = self._chol_inv.T @ self._chol_inv
        return self._sigma

    def _site_marginal(self, i: int) -> tuple[Array, Array, float, float]:
        p, sigma = self.prior, self._sigma
        v = p.Vt[i]
        sv = sigma @ v
        d = 1.0 + p.g[i] * self.site_precision[i]
        return v, sv, (v @ self._m + p.g[i] * self.site_mean_precision[i]) / d, p.g[i] / d + (v @ sv) / d**2

    def _apply_site(self, i: int, precision: float, mean_precision: float, v: Array, sv: Array, a_ii: float) -> bool:
        r"""Site ``i``: :math:`B \leftarrow B + \Delta w\, v_i v_i^\top`, :math:`b \leftarrow b + \Delta\beta v_i`.

        Sherman-Morrison on :math:`\Sigma = B^{-1}`, :math:`m = \Sigma b`; ``False`` (nothing
        changed) if the posterior would be improper."""
        p = self.prior
        d_tau = precision - self.site_precision[i]
        denom = 1.0 + d_tau * a_ii
        if not (denom > 0.0 and np.isfinite(denom)) or not np.isfinite(mean_precision):
            return False
        g_i = p.g[i]
        d_old, d_new = 1.0 + g_i * self.site_precision[i], 1.0 + g_i * precision
        if not d_new > 0.0:
            return False
        d_w = precision / d_new - self.site_precision[i] / d_old
        d_beta = mean_precision / d_new - self.site_mean_precision[i] / d_old
        sm = 1.0 + d_w * float(v @ sv)
        if not sm > 0.0:
            return False
        self._sigma -= (d_w / sm) * np.outer(sv, sv)
        self._sigma = 0.5 * (self._sigma + self._sigma.T)
        self._b = self._b + d_beta * v
        self._m = self._sigma @ self._b
        self.site_precision[i], self.site_mean_precision[i] = precision, mean_precision
        self._factor_stale = True  # L_B, the marginals and log|B|: the next read refreshes from the sites
        return True

    def update_site(self, i: int, precision: float, mean_precision: float) -> bool:
        """Replace site ``i`` (:math:`O(M^2)`); the marginals are recomputed from the sites on the next read."""
        self._ensure_sigma()
        v, sv, _, a_ii = self._site_marginal(i)
        return self._apply_site(i, precision, mean_precision, v, sv, a_ii)

    def apply_sequential(
        self, order: Sequence[int] | Array, propose: SiteProposer, fraction: float = 1.0, block_size: int = 1
    ) -> SweepStats:
        r"""The sequential sweep: each site's cavity from :math:`\Sigma = B^{-1}` and :math:`m`, then a
        Sherman-Morrison update, :math:`O(M^2)` a site (``block_size`` is not used: the update is already
        :math:`M \times M`).  The posterior is refreshed from the sites on the next read."""
        self._ensure_sigma()
        return super().apply_sequential(order, propose, fraction, block_size)

    def _site_view(self, i: int) -> tuple[float, float, Any]:
        v, sv, mu_i, a_ii = self._site_marginal(i)
        return mu_i, a_ii, (v, sv, a_ii)

    def _update_viewed_site(self, i: int, precision: float, mean_precision: float, handle: Any) -> bool:
        v, sv, a_ii = handle
        return self._apply_site(i, precision, mean_precision, v, sv, a_ii)
