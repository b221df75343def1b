r"""The dense posterior on the host (numpy, LAPACK): :class:`DensePosterior`, the state ``(A, mu, tau, nu)`` of

.. math:: q(f) \propto N(f | 0, K) \prod_i \exp(-\tau_i f_i^2 / 2 + \nu_i f_i)
        = N(f | \mu, A),\quad A = (K^{-1} + T)^{-1},\ \mu = A \nu,

:math:`T = \operatorname{diag}(\tau)`.  :math:`K^{-1}` is never formed: with all
:math:`\tau_i \ge 0`, :math:`A = K - V^\top V`, :math:`V = L^{-1} S^{1/2} K`,
:math:`L L^\top = B = I + S^{1/2} K S^{1/2}` (GPML Alg. 3.5); with some :math:`\tau_i < 0`
(legal EP sites), :math:`A = (I + K T)^{-1} K` by an LU solve.  Both survive a singular
``K`` (the linear kernel).

It implements the :class:`~relaxep.posterior.base.Posterior` protocol: the rank-one site update, the
sequential sweep in BLAS-3 blocks (:func:`~relaxep.posterior._dense_linalg.blocked_sweep`), the refresh from
the sites, :math:`\log Z_q`, predictions and the evidence gradient.  Its prior is
:class:`~relaxep.posterior.DensePrior` (:mod:`relaxep.posterior.dense`); another array library's twin is
:class:`~relaxep.posterior.dense_device.DeviceDensePosterior`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import linalg
from scipy.linalg.blas import dgemm, dger

from relaxep._typing import Array
from relaxep._validation import NOT_PSD_ADVICE
from relaxep._xp import HOST, ArraySpace, solve_lower
from relaxep.errors import ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.posterior._dense_linalg import (
    TINY,
    b_matrix,
    blocked_sweep,
    covariance_plus,
    evidence_gradient,
    marginal_mean,
    marginals_from_inverse,
    single_factors,
    triangular_inverse,
    woodbury_negative_sites,
)
from relaxep.posterior.base import Posterior, SiteProposer, SweepStats

__all__ = ["DensePosterior", "DensePredictions"]


class DensePredictions:
    r"""The dense latent predictions, written once in the namespace of :attr:`space` (numpy's here; a device's for
    :class:`~relaxep.posterior.dense_device.DeviceDensePosterior`):

    .. math::
        \mu_* = K_{*}\alpha,\qquad
        s^2_* = k_{**} - \operatorname{diag}\big(K_* (K + T^{-1})^{-1} K_*^\top\big),

    with :math:`(K + T^{-1})^{-1} = S^{1/2}B^{-1}S^{1/2}` or :math:`(I + T K)^{-1} T`, from the factors ``(P, Q)``
    of :meth:`_reduction_factors`, the representation's.
    """

    #: the array library and device of ``K``
    space: ArraySpace = HOST
    n: int
    alpha: Array

    def predict_latent(self, cross_kernel: Array, test_diag: Array) -> tuple[Array, Array]:
        """Latent predictive mean and variance at test points (``cross_kernel`` :math:`K_*`, ``test_diag``
        :math:`k_{**}`)."""
        xp = self.space.xp
        left, right, mean = self._predictive(cross_kernel)
        var = self.space.put(test_diag) - xp.sum(left * right, axis=0)
        return mean, xp.maximum(var, xp.zeros_like(var))

    def predict_latent_cov(self, cross_kernel: Array, test_kernel: Array) -> tuple[Array, Array]:
        r"""Latent predictive mean and covariance :math:`K_{**} - K_* (K + T^{-1})^{-1} K_*^\top`
        (:meth:`predict_latent`'s, jointly at the test points; ``test_kernel`` is :math:`K_{**}`)."""
        left, right, mean = self._predictive(cross_kernel)
        cov = self.space.put(test_kernel) - left.T @ right
        return mean, 0.5 * (cov + cov.T)

    def _predictive(self, cross_kernel: Array) -> tuple[Array, Array, Array]:
        if cross_kernel.ndim != 2 or cross_kernel.shape[1] != self.n:
            raise ValueError(
                f"K_star must have shape (m, {self.n}) (covariances to the training inputs), got {cross_kernel.shape}"
            )
        cross_kernel = self.space.put(cross_kernel)
        left, right = self._reduction_factors(cross_kernel)
        return left, right, cross_kernel @ self.space.put(self.alpha)

    def _reduction_factors(self, cross_kernel: Array) -> tuple[Array, Array]:
        r"""``(P, Q)`` with :math:`P^\top Q = K_* (K + T^{-1})^{-1} K_*^\top`: :math:`P = Q = L^{-1} S^{1/2}
        K_*^\top` for non-negative sites, else :math:`P = K_*^\top`, :math:`Q = (I + TK)^{-1} T K_*^\top`
        (:meth:`_solve_i_plus_tk`)."""
        xp = self.space.xp
        chol, negative = self._factor_state()
        tau = self.space.put(self.site_precision)
        if not negative:
            v = solve_lower(xp, chol, xp.sqrt(xp.maximum(tau, xp.zeros_like(tau)))[:, None] * cross_kernel.T)
            return v, v
        return cross_kernel.T, self._solve_i_plus_tk(tau[:, None] * cross_kernel.T)

    def _factor_state(self) -> tuple[Array, bool]:
        """The current factor :math:`L` of :math:`B` (refreshed where stale) and whether some site is negative."""
        raise NotImplementedError

    def _solve_i_plus_tk(self, rhs: Array) -> Array:
        """:math:`(I + TK)^{-1}` ``rhs``."""
        raise NotImplementedError


class DensePosterior(DensePredictions, Posterior):
    """Mutable dense posterior ``N(mean, cov)`` of ``f`` given site parameters.

    ``marginals_only=True`` defers ``cov`` to its first access (see :meth:`refresh`).
    Holds ``K`` (not copied; never written), ``cov`` (``n x n``), ``mean``,
    ``site_precision``, ``site_mean_precision`` and, during a blocked sweep, the sweep's
    deferred rank-one corrections (:meth:`apply_sequential`, up to another ``n x n``).
    """

    def __init__(
        self,
        kernel: Array,
        site_precision: Array | None = None,
        site_mean_precision: Array | None = None,
        marginals_only: bool = False,
    ):
        n = kernel.shape[0]
        self.kernel = kernel
        self.site_precision = np.zeros(n) if site_precision is None else np.array(site_precision, dtype=float)
        self.site_mean_precision = (
            np.zeros(n) if site_mean_precision is None else np.array(site_mean_precision, dtype=float)
        )
        self._cov = np.empty((n, n), order="F")
        self._cov_stale = False  # True after refresh(marginals_only=True)
        self._marginal_var = np.empty(n)
        self._pending: tuple[Array, Array] | None = None  # deferred  A -= V diag(k) V^T
        self._many_weak_sites = False  # last full refresh: over a quarter of sites weak (see below)
        self.mean = np.empty(n)
        self._chol: Array | None = None  # Cholesky factor of B = I + S K S, S = sqrt(max(T, 0))
        self._log_det: float | None = None  # log|I + K T| at the current sites
        self._has_negative = False  # some tau < 0 (entered by Woodbury on top of B)
        self._lu: tuple[Array, Array] | None = None  # LU of I + T K, formed on demand for predictions
        self.refresh(marginals_only=marginals_only)

    # ------------------------------------------------------------------ state
    @property
    def n(self) -> int:
        return self.kernel.shape[0]

    @property
    def cov(self) -> Array:
        """The posterior covariance ``A`` (computed on demand after a marginals-only refresh)."""
        if self._cov_stale:
            self.refresh()
        if self._pending is not None:
            vectors, coefficients = self._pending
            self._pending = None
            self._downdate(vectors, coefficients)
        return self._cov

    @cov.setter
    def cov(self, value: Array) -> None:
        self._cov = value
        self._cov_stale = False

    @property
    def marginal_var(self) -> Array:
        """Posterior marginal variances, ``diag(A)``."""
        if self._cov_stale:
            return self._marginal_var
        return np.diagonal(self.cov)

    # ----------------------------------------------------------- rank-one step
    def update_site(self, i: int, precision: float, mean_precision: float) -> bool:
        r"""Replace site ``i`` and update ``(A, mu)`` by a rank-one correction.

        .. math::
            A \leftarrow A - \frac{\Delta\tau}{1 + \Delta\tau A_{ii}} a_i a_i^\top,\qquad
            \mu \leftarrow \mu + \frac{\Delta\nu - \Delta\tau\,\mu_i}{1 + \Delta\tau A_{ii}} a_i.

        Returns ``False`` (and changes nothing) when the new marginal variance
        :math:`A_{ii}/(1 + \Delta\tau A_{ii})` would not be positive.
        """
        d_tau = precision - self.site_precision[i]
        d_nu = mean_precision - self.site_mean_precision[i]
        a_ii = self.cov[i, i]
        denom = 1.0 + d_tau * a_ii
        if not (denom > 0.0 and np.isfinite(denom)) or not np.isfinite(d_nu):
            return False
        col = self.cov[:, i].copy()
        self.mean += ((d_nu - d_tau * self.mean[i]) / denom) * col
        # In-place BLAS rank-one update; cov is Fortran-ordered.
        self.cov = dger(-d_tau / denom, col, col, a=self.cov, overwrite_a=True)
        self.site_precision[i] = precision
        self.site_mean_precision[i] = mean_precision
        self._invalidate()
        return True

    def set_sites(self, index: Array | slice, precision: Array, mean_precision: Array) -> None:
        """Overwrite site parameters without touching ``(cov, mean)``; call :meth:`refresh` next."""
        self.site_precision[index] = precision
        self.site_mean_precision[index] = mean_precision
        self._invalidate()

    def _downdate(self, vectors: Array, coefficients: Array) -> None:
        r"""Apply accumulated rank-one corrections at once: :math:`A \leftarrow A - V \operatorname{diag}(k) V^\top`.

        One BLAS-3 ``gemm`` (rank ``len(k)``) in place of ``len(k)`` rank-one passes over ``A``.
        """
        if coefficients.size:
            self.cov = dgemm(-1.0, vectors * coefficients, vectors, beta=1.0, c=self.cov, trans_b=1, overwrite_c=1)
        self._invalidate()

    def _defer_downdate(self, vectors: Array, coefficients: Array) -> None:
        r"""Record :math:`A \leftarrow A - V \operatorname{diag}(k) V^\top` without applying it.

        It is applied on the next access to :attr:`cov` (one ``gemm``), or dropped by
        :meth:`refresh`, which recomputes ``A`` from the sites: a sweep that ends in a
        refresh never pays for it.  ``vectors`` is kept, not copied.
        """
        self._pending = (vectors, coefficients)
        self._invalidate()

    # ---------------------------------------------------------- blocked sweep
    def apply_sequential(
        self, order: Sequence[int] | Array, propose: SiteProposer, fraction: float = 1.0, block_size: int = 1
    ) -> SweepStats:
        r"""The sequential sweep in blocks of ``block_size`` sites (same iterates, BLAS-3).

        ``block_size = 1`` is the literal loop of :meth:`Posterior.apply_sequential` (one
        rank-one update of :math:`A` per site).  Otherwise, within a block :math:`J`, site
        :math:`j` needs only :math:`A_{jj}`, :math:`\mu_j` and, for later sites, the columns
        :math:`A_{:,J}`.  The covariance :math:`A_0` of the sweep's start is not written: the
        block's panel is formed as :math:`P = A_{0,:J} - V D V_{J}^\top` from the corrections
        :math:`(k_t, a_t)` recorded so far (one ``gemm``, :math:`2 n m B` flops after :math:`m`
        updates, :math:`n^3` per sweep in all, half of updating all of :math:`A` after every
        block).  After each site the panel receives :math:`P \leftarrow P - k\, a\, a_J^\top`
        (:math:`a` the site's current column, :math:`k = \Delta\tau/(1 + \Delta\tau A_{jj})`)
        and the mean its rank-one step.  The sweep's corrections are left deferred
        (:meth:`_defer_downdate`): the refresh that ends the sweep recomputes :math:`A` anyway.
        Memory: :math:`A_0`, the ``n x m`` corrections (at most ``n x n``) and one ``n x B`` panel.
        """
        if block_size <= 1:
            return super().apply_sequential(order, propose, fraction)
        cov0 = self.cov  # applies any earlier deferred corrections first; not written below
        tau, nu, order = self.site_precision, self.site_mean_precision, np.asarray(order, dtype=np.intp)
        vectors, coefs, stats = blocked_sweep(
            cov0, self.mean, tau, nu, order, propose, fraction, block_size, self.set_sites
        )
        self._defer_downdate(vectors, coefs)
        return stats

    # ------------------------------------------------------------- refresh
    def refresh(self, marginals_only: bool = False) -> None:
        r"""Recompute ``cov`` and ``mean`` from the sites by one factorisation.

        With ``marginals_only=True`` (and all ``tau >= 0``) only ``diag(A)`` and the mean
        are formed, from :math:`A = S^{-1/2}(I - B^{-1})S^{-1/2}` (since
        :math:`S^{1/2} K S^{1/2} = B - I`):

        .. math::
            A_{ii} = \frac{1 - (B^{-1})_{ii}}{\tau_i},\qquad
            (B^{-1})_{ii} = \sum_k (L^{-1})_{ki}^2,\qquad
            \mu_i = \tau_i^{-1/2} \big(B^{-1} S^{1/2} K \nu\big)_i

        (:func:`~relaxep.posterior._dense_linalg.marginal_mean`; GPML's :math:`K(\nu - S^{1/2} B^{-1} S^{1/2}K\nu)`
        where a site holds under 0.1% of its posterior precision),

        one Cholesky and one triangular inverse, :math:`2n^3/3` flops instead of
        :math:`7n^3/3` for the full ``cov``.  Where :math:`1 - (B^{-1})_{ii} = \tau_i A_{ii}`
        is below 1e-3 (the site holds under 0.1% of the posterior precision, so the
        subtraction would lose more than three digits) the variance is recomputed directly,
        :math:`A_{ii} = K_{ii} - \|L^{-1} S^{1/2} K_{\cdot i}\|^2`.  ``cov`` is formed on
        first access.

        Raises
        ------
        KernelNotPositiveDefiniteError
            If ``B`` fails its Cholesky with all ``tau >= 0`` (then ``K`` is not PSD).
        ImproperPosteriorError
            If some ``tau < 0`` and the resulting ``A`` is not positive definite.
        """
        K, tau, nu = self.kernel, self.site_precision, self.site_mean_precision
        self._pending = None
        self._invalidate()
        if not (np.all(np.isfinite(tau)) and np.all(np.isfinite(nu))):
            raise ImproperPosteriorError("site parameters are not finite")
        n = self.n
        if not np.any(tau):  # flat sites: the posterior is the prior, B = I
            self._chol, self._log_det = np.eye(n), 0.0
            self.cov = np.array(K, order="F")
            self.mean = K @ nu
            return
        tau_plus = np.maximum(tau, 0.0)
        sw = np.sqrt(tau_plus)
        single = single_factors(K, sw) if self.coarse and marginals_only else None
        if single is not None:
            chol, linv = single
        else:
            try:
                chol = linalg.cholesky(b_matrix(K, sw), lower=True, overwrite_a=True, check_finite=False)
            except linalg.LinAlgError as exc:
                raise KernelNotPositiveDefiniteError(
                    f"the kernel matrix K is not positive semi-definite (B = I + S^1/2 K S^1/2 has no Cholesky "
                    f"factor). {NOT_PSD_ADVICE}"
                ) from exc
            linv = triangular_inverse(chol) if marginals_only else None
        log_det = float(2.0 * np.sum(np.log(np.diagonal(chol))))
        negative = np.flatnonzero(tau < -TINY)  # (a subnormal negative precision is a flat site)
        correction = None
        if negative.size:
            correction, mean, log_det_c = woodbury_negative_sites(self.kernel, chol, sw, tau, nu, negative)
            log_det += log_det_c
            if marginals_only:
                var = marginals_from_inverse(K, linv, sw, tau_plus)  # diag(A+), then the Woodbury term
                self._set_marginals(var + np.einsum("ij,ij->j", correction, correction), mean)
        elif marginals_only:
            var = marginals_from_inverse(K, linv, sw, tau_plus)
            self._set_marginals(var, marginal_mean(K, lambda b: linv.T @ (linv @ b), sw, nu, var * tau_plus))
        if single is not None:  # a single-precision factor is not kept: the evidence refactorises in double
            self._has_negative = bool(negative.size)
            return
        self._chol, self._log_det, self._has_negative = chol, log_det, bool(negative.size)
        if marginals_only:
            return
        cov, self._many_weak_sites = covariance_plus(K, chol, sw, tau_plus, self._many_weak_sites)
        if correction is not None:
            cov += correction.T @ correction  # A = A+ + A+_N C^-1 A+_N^T
            cov = 0.5 * (cov + cov.T)
            if np.any(np.diagonal(cov) <= 0.0):
                raise ImproperPosteriorError("a posterior marginal variance is not positive")
            self.cov = np.asfortranarray(cov)
            self.mean = mean
            return
        self.cov = np.asfortranarray(cov)
        share = tau_plus * np.diagonal(self.cov)
        self.mean = marginal_mean(K, lambda b: linalg.cho_solve((chol, True), b, check_finite=False), sw, nu, share)

    def _invalidate(self) -> None:
        self._chol = self._lu = self._log_det = None

    def _set_marginals(self, var: Array, mean: Array) -> None:
        if not np.all(var > 0.0):
            raise ImproperPosteriorError("a posterior marginal variance is not positive")
        self._marginal_var = var
        self.mean = mean
        self._cov_stale = True

    def log_det_b(self) -> float:
        r""":math:`\log|I + K T|` (:math:`= \log|B|` when all :math:`\tau \ge 0`)."""
        if self._log_det is None:
            self.refresh(marginals_only=self._cov_stale)
        return float(self._log_det)

    def log_partition(self) -> float:
        r""":math:`\log Z_q = \tfrac12 \nu^\top\mu - \tfrac12\log|I + K T|`."""
        return 0.5 * float(self.site_mean_precision @ self.mean) - 0.5 * self.log_det_b()

    # ---------------------------------------------------------- prediction
    def _factor_state(self) -> tuple[Array, bool]:
        if self._log_det is None:
            self.refresh(marginals_only=self._cov_stale)
        return self._chol, self._has_negative

    def _solve_i_plus_tk(self, rhs: Array) -> Array:
        """By LAPACK's LU of :math:`I + TK`, kept for the next predictions."""
        if self._lu is None:
            m = self.site_precision[:, None] * self.kernel
            m[np.diag_indices(self.n)] += 1.0  # I + T K
            self._lu = linalg.lu_factor(m, check_finite=False)
        return linalg.lu_solve(self._lu, rhs)

    # ------------------------------------------------------------ gradient
    def evidence_gradient(self, kernel_gradient: Array) -> Array:
        """:func:`~relaxep.posterior._dense_linalg.evidence_gradient` at the current sites."""
        return evidence_gradient(self.alpha, self.site_precision, self.cov.T, kernel_gradient)  # (cov.T: C order)

    def prior_evidence_gradient(self, prior: Any, kernel: Any) -> Array:
        """:meth:`evidence_gradient` from ``prior``'s kept :math:`\\partial K/\\partial\\theta` (the one signature the
        device twin shares: :meth:`DeviceDensePosterior.prior_evidence_gradient
        <relaxep.posterior.dense_device.DeviceDensePosterior.prior_evidence_gradient>`); ``kernel`` unused."""
        if getattr(prior, "kernel_gradient", None) is None:
            raise ValueError("the dense prior was built without eval_gradient=True: no kernel gradient kept")
        return self.evidence_gradient(prior.kernel_gradient)
