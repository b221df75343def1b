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
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from relaxep._threads import n_threads
from relaxep._typing import Array
from relaxep._validation import check_prior_scale
from relaxep._xp import HOST, ArraySpace, namespace, on_device_of, to_numpy
from relaxep.errors import ImproperPosteriorError
from relaxep.posterior.base import Prior
from relaxep.posterior.fitc_blocks import choose_rows, kernel_rows, recomputed_prior_rows, row_blocks, row_factors

# the row-block functions live in fitc_prior (the rows), fitc_rows (the refresh) and row_algebra, shared with the
# Dask shards and the stochastic search
from relaxep.posterior.fitc_prior import (
    KUU_JITTER,
    conditional_variances,
    device_cross_kernel,
    inducing_factor,
    matrices_prior,
    sparse_prior_rows,
)
from relaxep.posterior.fitc_rows import blocked_pass, device_pass, posterior_pass
from relaxep.posterior.row_algebra import rows_per_block
from relaxep.posterior.sparse_posterior import SparsePosterior

__all__ = ["DTC_FLOOR", "SparsePosterior", "SparsePrior"]

#: the smallest diagonal a ``conditional="dtc"`` prior keeps, relative to the mean prior variance
DTC_FLOOR = 1e-12


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
        :func:`~relaxep.posterior.row_algebra.rows_per_block` of ``M`` (1024 at ``M = 200``).
    conditional : {"fitc", "dtc"}, default "fitc"
        The diagonal kept beside :math:`Q`: ``"fitc"`` :math:`g_i = k_{ii} - Q_{ii}` (+ ``latent_noise``), the
        prior above; ``"dtc"`` only ``latent_noise``, at least :data:`DTC_FLOOR` times the mean prior variance
        (the deterministic training conditional, :math:`f \sim N(0, Q)`), with :math:`\operatorname{tr}(K - Q)`
        kept as :attr:`trace_gap` for Titsias' (2009) collapsed bound (:mod:`relaxep.estimators._sparse_gaussian`).
    n_jobs : int or None, default None
        Threads for the row blocks of every :math:`O(nM^2)` pass (building :math:`V^\top`, a refresh, a
        prediction), each with one BLAS thread; scikit-learn's convention (``-1`` every core, ``-k`` all but
        ``k - 1``), except that ``None`` uses the machine: ``OMP_NUM_THREADS`` where it is set, else every
        core this process may run on.  The blocks and the order of their sums do not depend on it, so
        neither does the posterior (:mod:`relaxep._threads`).
    rows : {"auto", "stored", "recomputed"}, default "auto"
        ``"stored"``: hold :math:`V^\top`; ``"recomputed"``: hold :math:`X`, :math:`L_{uu}`, :math:`k_{ii}` and
        :math:`g` only, every pass rebuilding the rows block by block from ``X``
        (:mod:`relaxep.posterior.fitc_blocks`: the same rows, twice the kernel's work a refresh); ``"auto"``:
        ``"stored"`` where the memory guard lets it, else ``"recomputed"``.  The choice is :attr:`rows`.

    Memory: :math:`V^\top` (``n x M``) and :math:`M \times M` factors; :math:`K_{uf}` is never held whole.
    With ``rows="recomputed"``, :math:`O(n + M^2)` and one block of rows (``chunk_size`` rows a thread on
    numpy, :data:`~relaxep.posterior.fitc_prior.DEVICE_ROWS` on a device).

    Raises
    ------
    ValueError
        For inputs of the wrong shape or not finite, or an unknown ``rows``;
        :class:`~relaxep.KernelNotPositiveDefiniteError` when :math:`K_{uu}` has no Cholesky
        factor (duplicated inducing inputs without jitter); :class:`~relaxep.MemoryLimitError` when even the
        recomputed rows do not fit (or, on a device, the stored rows asked for).
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
        conditional: str = "fitc",
        rows: str = "auto",
    ) -> None:
        #: where the rows live and are computed (:class:`~relaxep._xp.ArraySpace`): ``X``'s, chosen once
        self.space = namespace(X)
        X = _check_inputs(self.space, X, "X")  # (another array library's X stays there: relaxep._xp)
        Z = _check_inputs(HOST, to_numpy(Z), "Z")
        if Z.shape[1] != X.shape[1]:
            raise ValueError(f"Z must have {X.shape[1]} columns like X, got shape {Z.shape}")
        if not callable(kernel) or not hasattr(kernel, "diag"):
            raise TypeError(f"kernel must be callable as kernel(A, B) and have kernel.diag(A), got {kernel!r}")
        if not (float(latent_noise) >= 0.0 and float(jitter) >= 0.0):
            raise ValueError(f"latent_noise and jitter must be >= 0, got {latent_noise!r} and {jitter!r}")
        if conditional not in ("fitc", "dtc"):
            raise ValueError(f'conditional must be "fitc" or "dtc", got {conditional!r}')
        self.X, self.Z, self.kernel = X, Z, kernel
        self.latent_noise, self.jitter = float(latent_noise), float(jitter)
        self.chunk_size = rows_per_block(Z.shape[0]) if chunk_size is None else int(chunk_size)
        n_threads(n_jobs)  # refuses a bad n_jobs now
        self.n_jobs = n_jobs
        #: ``"stored"`` (:math:`V^\top` held as :attr:`Vt`) or ``"recomputed"`` (:attr:`Vt` is ``None``)
        self.rows = choose_rows(self.space, X, Z.shape[0], rows, self.chunk_size, self.n_jobs)
        self.K_uu, self.L_uu, self.kuu_jitter = inducing_factor(kernel, Z, self.jitter)
        if self.rows == "stored":
            self.Vt, self.k_diag, self.g = sparse_prior_rows(
                self.space, kernel, X, Z, self.L_uu, self.latent_noise, self.chunk_size, self.n_jobs
            )
        self.K_uu, self.L_uu = on_device_of(self.K_uu, X), on_device_of(self.L_uu, X)
        #: on a device, for recomputed rows: ``Z`` there and :math:`L_{uu}^{-\top}` (:func:`kernel_rows`)
        self._row_factors: tuple[Array, Array] | None = None
        if self.rows == "recomputed":
            self.Vt = None
            if not self.space.on_host:
                self._row_factors = row_factors(self.space, Z, self.L_uu)
            self.k_diag, self.g = recomputed_prior_rows(
                self.space, kernel, X, Z, self.L_uu, self.latent_noise, self.chunk_size, self.n_jobs
            )
        check_prior_scale(to_numpy(self.k_diag), "the kernel's variances at X")
        #: :math:`\operatorname{tr}(K - Q)` where ``conditional="dtc"`` (the diagonal it leaves out), else 0
        self.conditional, self.trace_gap = conditional, 0.0
        if conditional == "dtc":
            self.trace_gap = max(float(self.space.xp.sum(self.g)) - self.latent_noise * self.n, 0.0)
            # (a floor of DTC_FLOOR times the mean prior variance keeps every marginal positive where a row's kernel
            # to every inducing input underflows; it moves the bound by about n DTC_FLOOR tau / 2)
            floor = DTC_FLOOR * float(self.space.xp.mean(self.k_diag))
            self.g = self.space.xp.full_like(self.g, max(self.latent_noise, floor))

    @classmethod
    def from_matrices(cls, K_uu: ArrayLike, K_fu: ArrayLike, k_ff_diag: ArrayLike) -> SparsePrior:
        r"""The FITC prior from :math:`K_{uu}` (``M x M``), :math:`K_{fu}` (``n x M``) and
        :math:`\operatorname{diag}K_{ff}`.

        No jitter is added; predictions then take :math:`K_{*u}` and the test variances.
        """
        self = cls.__new__(cls)
        self.space = space = namespace(K_uu, K_fu, k_ff_diag)
        xp = space.xp
        if space.on_host:
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
        self.conditional, self.trace_gap, self.rows = "fitc", 0.0, "stored"
        self.chunk_size = rows_per_block(k_uu.shape[0])
        self.n_jobs = None
        self.K_uu, self.L_uu, self.Vt = matrices_prior(space, k_uu, k_fu, self.chunk_size)
        self.k_diag = diag
        self.g = conditional_variances(space, diag, self.Vt)
        return self

    @property
    def n(self) -> int:
        return self.g.shape[0]

    @property
    def n_inducing(self) -> int:
        """:math:`M`, the number of inducing inputs."""
        return self.L_uu.shape[0]

    def row_block(self, c: slice) -> tuple[Array, Array]:
        r""":math:`V_c^\top` (``len(c) x M``) and :math:`g_c` for the rows ``c``: a view of :attr:`Vt`, or the rows
        recomputed from ``X`` (``rows="recomputed"``: :func:`~relaxep.posterior.fitc_blocks.kernel_rows`), in the
        prior's array library."""
        if self.Vt is not None:
            return self.Vt[c, :], self.g[c]
        return kernel_rows(self.space, self.kernel, self.X, self.Z, self.L_uu, c, self._row_factors), self.g[c]

    def device_pass(self, tau: Array, nu: Array, nonnegative: bool = False) -> tuple[Array, Array, Any, Any]:
        r"""``(mean, var, log|I + KT|, ok)`` from device sites with nothing read back where the rows are stored on
        another library's device (:func:`~relaxep.posterior.fitc_rows.device_pass`: the last two 0-d arrays there);
        else :meth:`posterior_pass`'s, ``ok`` ``False`` where it raises ``ImproperPosteriorError``.
        ``nonnegative`` (the caller knows every :math:`\tau_i \ge 0`) changes nothing here: FITC's pass takes
        negative sites without a Woodbury term."""
        if self.Vt is not None and not self.space.on_host:
            _chol, _inv, _m, _b, log_det, mean, var, ok = device_pass(self.space, self.Vt, self.g, tau, nu)
            return mean, var, log_det, ok
        try:
            _chol, _inv, _m, _b, log_det, mean, var = self.posterior_pass(tau, nu)
        except ImproperPosteriorError:
            return None, None, float("nan"), False
        return mean, var, log_det, True

    def posterior_pass(self, tau: Array, nu: Array) -> tuple[Array, Array, Array, Array, float, Array, Array]:
        r"""A refresh from the sites :math:`(\tau, \nu)` (arrays of the prior's library; numpy on the host):
        ``(L_B, L_B^{-1}, m, b, log|I + (Q+G)T|, mu, A_ii)``.

        Stored rows: :func:`~relaxep.posterior.fitc_rows.posterior_pass`; recomputed rows:
        :func:`~relaxep.posterior.fitc_rows.blocked_pass` over :meth:`row_block` (the same function; the same
        answer, bit for bit on numpy).  Raises :class:`~relaxep.ImproperPosteriorError` where the sites make the
        posterior improper.
        """
        if not self.space.on_host:  # (numpy sites: moved to the prior's device)
            tau, nu = (on_device_of(a, self.L_uu) if isinstance(a, np.ndarray) else a for a in (tau, nu))
        if self.Vt is not None:
            return posterior_pass(self.space, self.Vt, self.g, tau, nu, self.chunk_size, self.n_jobs)
        blocks = row_blocks(self.space, self.n, self.chunk_size)
        return blocked_pass(self.space, lambda c: self.row_block(c)[0], self.g, tau, nu, blocks, self.n_jobs)

    def _posterior_for(self, tau: Array | None, nu: Array | None, marginals_only: bool) -> SparsePosterior:
        """The FITC posterior for these sites (it always keeps only the marginals, so ``marginals_only`` is moot)."""
        return SparsePosterior(self, tau, nu)

    @classmethod
    def from_kernel(cls, kernel: Any, X: ArrayLike, Z: ArrayLike, noise: float = 0.0, **options: Any) -> SparsePrior:
        r"""The FITC prior of a scikit-learn kernel with inducing inputs ``Z`` and latent noise ``noise``
        (:meth:`DensePrior.from_kernel`'s arguments plus ``Z``; ``options``: ``jitter``, ``chunk_size``,
        ``n_jobs``, ``conditional``, ``rows``)."""
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
        space = namespace(X_test)  # (test inputs of their own library: the kernel's closed form there)
        X_test = _check_inputs(space, X_test, "X_test")
        if not space.on_host:
            cross, diag = device_cross_kernel(space, self.kernel, X_test, self.Z)
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
        Vt = self.Vt
        if Vt is None:  # (rows="recomputed": assembled from the row blocks)
            parts = [self.row_block(c)[0] for c in row_blocks(self.space, self.n, self.chunk_size)]
            Vt = np.vstack(parts) if self.space.on_host else self.space.xp.concat(parts, axis=0)
        return Vt @ Vt.T + np.diag(self.g)


def _check_inputs(space: ArraySpace, A: ArrayLike, name: str) -> Array:
    xp = space.xp
    if space.on_host:
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
