r"""The FITC posterior (:class:`SparsePosterior`) of a :class:`~relaxep.posterior.SparsePrior`: the sites, the
refresh that recomputes the posterior from them in row blocks (the prior's ``posterior_pass``: stored rows by
:func:`~relaxep.posterior.fitc_rows.posterior_pass`, recomputed ones by
:func:`~relaxep.posterior.fitc_rows.blocked_pass`), predictions, and the sequential path's :math:`O(M^2)`
Sherman-Morrison updates of :math:`\Sigma = B^{-1}`.

The equations are in :mod:`relaxep.posterior.sparse` (the prior's module) and :mod:`relaxep.posterior.fitc_rows`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from relaxep._typing import Array
from relaxep._xp import on_device_of, to_numpy
from relaxep.posterior.base import RefreshedPosterior, SiteProposer, SweepStats, _refreshed
from relaxep.posterior.fitc_rows import FITCRows, multiply_rows, predict_rows, solve_rows

__all__ = ["SparsePosterior"]


class SparsePosterior(RefreshedPosterior):
    r"""The EP posterior under a FITC prior (module docstring): :math:`O(nM)` memory, :math:`O(nM^2)` a refresh.

    Holds the sites, :math:`d, w, \beta`, :math:`L_B`, :math:`L_B^{-1}`, :math:`m` and the
    marginals.  The sequential path (:meth:`update_site`, :meth:`apply_sequential`) keeps
    :math:`\Sigma = B^{-1}` and updates it by Sherman-Morrison, :math:`O(M^2)` a site; the
    refresh that ends a sweep recomputes everything from the sites.  It has no ``cov``.
    """

    def __init__(
        self, prior: FITCRows, site_precision: Array | None = None, site_mean_precision: Array | None = None
    ) -> None:
        self.prior = prior
        # the sites live on the host in numpy, whatever the prior's library (RefreshedPosterior)
        self._hold_sites(prior.n, site_precision, site_mean_precision)
        self._sigma: Array | None = None
        self.refresh()

    @property
    def n(self) -> int:
        return self.prior.n

    inducing_mean = _refreshed(
        "_m", r":math:`m`: the posterior mean of the whitened inducing values :math:`L_{uu}^{-1}u`."
    )
    chol_b = _refreshed(
        "_chol",
        r":math:`L_B`, the Cholesky factor of :math:`B = I + VWV^\top` (the posterior precision of "
        r":math:`L_{uu}^{-1}u`).",
    )

    def set_sites(self, index: Array | slice, precision: Array, mean_precision: Array) -> None:
        super().set_sites(index, precision, mean_precision)
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
        tau, nu = (on_device_of(a, p.L_uu) for a in (self.site_precision, self.site_mean_precision))
        chol, chol_inv, m, b, log_det, mean, var = p.posterior_pass(tau, nu)
        self._chol, self._chol_inv, self._m, self._b, self._log_det = chol, chol_inv, m, b, log_det
        self._mean, self._var = to_numpy(mean), to_numpy(var)
        self._sigma = None
        self._stale = False

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
        cross_kernel, test_diag = on_device_of(cross_kernel, p.L_uu), on_device_of(test_diag, p.L_uu)
        mean, var = predict_rows(
            p.space, p.L_uu, m_ind, self._chol_inv, cross_kernel, test_diag, p.chunk_size, p.n_jobs
        )
        return to_numpy(mean), to_numpy(var)

    def predict_latent_cov(self, cross_kernel: Array, test_kernel: Array) -> tuple[Array, Array]:
        r"""Latent predictive mean and covariance from :math:`K_{*u}`: :math:`K_{**} - A^\top A + R^\top R`,
        :math:`A = L_{uu}^{-1}K_{u*}`, :math:`R = L_B^{-1}A` (:meth:`predict_latent`'s, jointly; memory
        :math:`O(m^2 + mM)`)."""
        p = self.prior
        if cross_kernel.ndim != 2 or cross_kernel.shape[1] != p.n_inducing:
            raise ValueError(f"K_*u must have shape (m, {p.n_inducing}), got {cross_kernel.shape}")
        m_ind = self.inducing_mean  # (refreshes a stale factor first)
        cross_kernel, test_kernel = on_device_of(cross_kernel, p.L_uu), on_device_of(test_kernel, p.L_uu)
        a = solve_rows(p.space, p.L_uu, cross_kernel)
        r = multiply_rows(p.space, self._chol_inv, a)
        cov = test_kernel - a @ a.T + r @ r.T
        return a @ m_ind, 0.5 * (cov + cov.T)

    # ------------------------------------------------------- one-site updates
    def _ensure_sigma(self) -> Array:
        r""":math:`\Sigma = B^{-1}` at the current sites (kept current by the one-site updates)."""
        if not self.prior.space.on_host:
            raise TypeError("the sequential (one-site) updates run on numpy arrays only: use the parallel schedule")
        if self._sigma is None:
            if self._stale:
                self.refresh()
            self._sigma = self._chol_inv.T @ self._chol_inv
        return self._sigma

    def _site_marginal(self, i: int) -> tuple[Array, Array, float, float]:
        p, sigma = self.prior, self._sigma
        v = p.Vt[i] if p.Vt is not None else p.row_block(slice(i, i + 1))[0][0]  # (recomputed rows: row i's)
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
        self._stale = True  # L_B, the marginals and log|B|: the next read refreshes from the sites
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
