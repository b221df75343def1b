r"""The dense prior and posterior on another array library (:mod:`relaxep._xp`): :class:`DeviceDensePrior` (the
kernel matrix and cross-covariances of an RBF kernel on the device) and :class:`DeviceDensePosterior` (the parallel
schedule's refresh, predictions and the evidence gradient of an RBF kernel), written once against the array API.
:class:`~relaxep.posterior.DensePrior` chooses this twin once, when it receives another library's array.

The numpy path (:class:`~relaxep.posterior.DensePosterior`) keeps its LAPACK specialisations (``potri``,
``trtri``, a single-precision factor far from the fixed point, the BLAS-3 sequential sweep); everything here
is the same algebra in the operations every library has.  With :math:`S = \operatorname{diag}(\sqrt{\max(\tau,
0)})`, :math:`B = I + SKS = LL^\top` and :math:`V = L^{-1}SK`,

.. math::
    A_+ = K - V^\top V,\qquad \mu_+ = K\nu - V^\top(V\nu),\qquad \log|I + KT_+| = 2\textstyle\sum_i\log L_{ii}

(Rasmussen & Williams 2006, Algorithm 3.5); negative sites :math:`N` enter by Woodbury on top of :math:`A_+`
(:func:`~relaxep.posterior._dense_linalg.negative_sites_correction`, numpy's too): :math:`A = A_+ + Z^\top Z`,
:math:`Z = L_C^{-1}A_{+,N}^\top`, :math:`C = -T_N^{-1} - A_{+,NN}`.  The marginals are the direct
:math:`K_{ii} - \|V_{\cdot i}\|^2` (one triangular solve with ``n`` right-hand sides, the :math:`O(n^3)` step a GPU
is built for).  The parallel schedule's device loop (:mod:`relaxep.inference.device_ep`) keeps the sites and the
marginals here and refreshes by :meth:`DeviceDensePrior.device_pass`, which reads nothing back where no site
precision is negative (:func:`positive_sites_pass`); the host loops move the sites here and the marginals back
(:func:`dense_pass`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from relaxep._memory import FIT_REMEDY
from relaxep._typing import Array
from relaxep._xp import (
    ArraySpace,
    add_to_diagonal,
    check_device_memory,
    cholesky_flagged,
    cholesky_lower,
    namespace,
    on_device_of,
    solve_lower,
    to_numpy,
)
from relaxep.errors import ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.posterior._dense_linalg import (
    DIRECT_BELOW_MARGINALS,
    TINY,
    b_matrix,
    evidence_r,
    negative_sites_correction,
)
from relaxep.posterior.base import MatrixPrior, RefreshedPosterior, SiteProposer, SweepStats
from relaxep.posterior.dense_posterior import DensePredictions
from relaxep.posterior.rbf import as_scaled_rbf, rbf

__all__ = [
    "DeviceDensePosterior",
    "DeviceDensePrior",
    "check_device_matrix",
    "dense_pass",
    "device_cross_covariance",
    "device_kernel_matrix",
    "positive_sites_pass",
    "rbf_evidence_gradient",
    "rbf_trace_gradient",
]


def dense_pass(space: ArraySpace, K: Any, tau: Array, nu: Array) -> tuple[Any, Any, Any, float, Array, Array]:
    r"""One refresh from the sites (``tau``, ``nu`` on the host):
    :math:`(L, V, Z, \log|I + KT|, \mu, \operatorname{diag}A)`, the first three in ``K``'s library
    (``Z`` ``None`` without negative sites), the marginals on the host (:func:`device_dense_pass`'s).

    Raises
    ------
    KernelNotPositiveDefiniteError
        If :math:`B` has no Cholesky factor (then ``K`` is not positive semi-definite).
    ImproperPosteriorError
        If the negative sites make :math:`C` indefinite, or a marginal variance is not positive.
    """
    chol, v, z, log_det, mean, var = device_dense_pass(space, K, on_device_of(tau, K), on_device_of(nu, K))
    return chol, v, z, log_det, to_numpy(mean), to_numpy(var)


def device_dense_pass(space: ArraySpace, K: Any, tau: Any, nu: Any) -> tuple[Any, Any, Any, float, Any, Any]:
    r""":func:`dense_pass` with the sites and the marginals in ``K``'s library, on its device: with
    :math:`S = \operatorname{diag}(\max(\tau, 0))`, :math:`LL^\top = B = I + S^{1/2}KS^{1/2}`,
    :math:`V = L^{-1}S^{1/2}K`, the marginals :math:`A_{ii} = K_{ii} - \|v_i\|^2`, :math:`\mu = K\nu -
    V^\top V\nu`, corrected by the negative sites' rank-:math:`k` term (module docstring)."""
    xp = space.xp
    chol, _, v, var, mean, log_det = _positive_sites(space, K, tau, nu, flagged=False)
    log_det = float(log_det)
    idx = xp.nonzero(tau < -float(TINY))[0]  # (a subnormal negative precision is a flat site)
    z = None
    if idx.shape[0]:
        a_plus = xp.take(K, idx, axis=1) - v.T @ xp.take(v, idx, axis=1)  # A+'s columns N, n x k
        z, mean, log_det_c = negative_sites_correction(xp, a_plus, mean, tau, idx)
        var, log_det = var + xp.sum(z * z, axis=0), log_det + log_det_c
    if not bool(xp.all(var > 0.0)):
        raise ImproperPosteriorError("a posterior marginal variance is not positive")
    return chol, v, z, log_det, mean, var


def _positive_sites(space: ArraySpace, K: Any, tau: Any, nu: Any, flagged: bool) -> tuple[Any, ...]:
    r"""The positive sites' part of a refresh, ``(L, ok, V, A_+ diagonal, mu_+, log|I + KT_+|)`` (the last a 0-d
    array): :math:`S = \operatorname{diag}(\max(\tau, 0))`, :math:`LL^\top = I + S^{1/2}KS^{1/2}`,
    :math:`V = L^{-1}S^{1/2}K`, :math:`A_{+,ii}` and :math:`\mu_+` by numpy's formulas (:func:`_accurate_marginals`).
    ``flagged``: the factor's flag ``ok`` a 0-d array, not read (:func:`~relaxep._xp.cholesky_flagged`); else read
    (``ok`` True).  :class:`~relaxep.errors.KernelNotPositiveDefiniteError` where there is no factor (then ``K`` is
    not positive semi-definite)."""
    xp = space.xp
    sw = xp.sqrt(xp.maximum(tau, xp.zeros_like(tau)))
    b = b_matrix(K, sw, xp=xp)
    chol, chol_ok = cholesky_flagged(xp, b) if flagged else (cholesky_lower(xp, b), True)
    del b
    if chol is None:
        raise KernelNotPositiveDefiniteError(
            "the kernel matrix K is not positive semi-definite (B = I + S^1/2 K S^1/2 has no Cholesky factor)"
        )
    linv = solve_lower(xp, chol, xp.eye(K.shape[0], dtype=K.dtype, device=getattr(K, "device", None)))
    v = linv @ (sw[:, None] * K)  # (L^-1 S^1/2 K: numpy's direct columns, trmm with L^-1)
    var, mean = _accurate_marginals(xp, K, linv, v, sw, nu)
    return chol, chol_ok, v, var, mean, 2.0 * xp.sum(xp.log(xp.linalg.diagonal(chol)))


def _accurate_marginals(xp: Any, K: Any, linv: Any, v: Any, sw: Any, nu: Any) -> tuple[Any, Any]:
    r"""The positive sites' marginals by numpy's formulas (:func:`~relaxep.posterior._dense_linalg.
    marginals_from_inverse`, :func:`~relaxep.posterior._dense_linalg.marginal_mean`), elementwise choices as
    ``xp.where``: with :math:`L^{-1}` (``linv``), :math:`v = L^{-1}S^{1/2}K` and the share
    :math:`\tau_i A_{ii} = 1 - \|L^{-1}e_i\|^2`, :math:`A_{ii} = (1 - \|L^{-1}e_i\|^2)/\tau_i` where the share is
    at least
    :data:`~relaxep.posterior._dense_linalg.DIRECT_BELOW_MARGINALS`, else :math:`K_{ii} - \|v_i\|^2`; the mean
    :math:`(z_i - u_i + v'_i)/\sqrt{\tau_i}` on those sites, :math:`(K(S^{1/2}u + \nu_w - S^{1/2}v'))_i`
    elsewhere.  GPML's :math:`K_{ii} - \|v_i\|^2` alone loses the digits of a strong site (the noise-free step:
    1e-8 relative, the convergence statistic's floor above a tolerance of 1e-8, where numpy's converged)."""
    share = 1.0 - xp.sum(linv * linv, axis=0)
    tau_plus = sw * sw
    by_share = (share >= DIRECT_BELOW_MARGINALS) & (sw != 0.0)
    one = xp.ones_like(share)
    var = xp.where(by_share, share / xp.where(by_share, tau_plus, one), xp.linalg.diagonal(K) - xp.sum(v * v, axis=0))
    strong = (share >= DIRECT_BELOW_MARGINALS) & (sw > 0.0)
    zero = xp.zeros_like(nu)
    safe_sw = xp.where(strong, sw, one)
    z = xp.where(strong, nu / safe_sw, zero)
    weak_nu = xp.where(strong, zero, nu)

    def solve_b(b: Any) -> Any:
        return linv.T @ (linv @ b)

    u = solve_b(z)
    w = solve_b(sw * (K @ weak_nu))
    mean = xp.where(strong, (z - u + w) / safe_sw, K @ (sw * u + weak_nu - sw * w))
    return var, mean


def positive_sites_pass(space: ArraySpace, K: Any, tau: Any, nu: Any) -> tuple[Any, Any, Any, Any]:
    r""":func:`device_dense_pass` for sites known to have :math:`\tau_i \ge 0` (no Woodbury term), with nothing
    read back: ``(mean, var, log|I + KT|, ok)``, the last two 0-d arrays on the device, ``ok`` whether :math:`B`
    has a Cholesky factor, every site is finite and every :math:`A_{ii} > 0`.  Where the library raises on a
    factor that does not exist, :class:`~relaxep.errors.KernelNotPositiveDefiniteError`, as
    :func:`device_dense_pass` does.  The same operations as :func:`device_dense_pass`, so the same digits."""
    xp = space.xp
    _, chol_ok, _, var, mean, log_det = _positive_sites(space, K, tau, nu, flagged=True)
    ok = chol_ok & xp.all(xp.isfinite(tau)) & xp.all(xp.isfinite(nu)) & xp.all(var > 0.0)
    return mean, var, log_det, ok


def rbf_evidence_gradient(
    space: ArraySpace, K: Any, cov: Any, alpha: Array, tau: Array, X: Any, kern: Any, noise: float
) -> Array:
    r"""The EP evidence gradient (:func:`~relaxep.posterior._dense_linalg.evidence_gradient`),
    :math:`\tfrac12\operatorname{tr}((\alpha\alpha^\top - R)\,\partial K/\partial\theta_j)`, :math:`R = T - TAT`,
    for an RBF kernel by :func:`rbf_trace_gradient`."""
    xp = space.xp
    tau_d, alpha_d = on_device_of(tau, K), on_device_of(alpha, K)
    inner = alpha_d[:, None] * alpha_d[None, :] - evidence_r(xp, tau_d, cov)
    return rbf_trace_gradient(space, inner, add_to_diagonal(xp, xp.asarray(K, copy=True), -noise), X, kern)


def rbf_trace_gradient(space: ArraySpace, inner: Any, K: Any, X: Any, kern: Any) -> Array:
    r""":math:`\tfrac12\operatorname{tr}(M\,\partial K/\partial\theta_j)` for symmetric :math:`M` (``inner``)
    and :math:`k(x, z) = c\exp(-\tfrac12\sum_j (x_j - z_j)^2/\ell_j^2)` (``kern``:
    :class:`~relaxep.posterior.rbf.ScaledRBF`; ``K`` without noise), without the ``n x n x p`` tensor
    :math:`\partial K/\partial\theta`: with :math:`W = M\circ K` and :math:`\tilde x = x/\ell`,

    .. math::
        \tfrac12\operatorname{tr}\Big(M\frac{\partial K}{\partial\log c}\Big) = \tfrac12\textstyle\sum_{ik}W_{ik},\qquad
        \tfrac12\operatorname{tr}\Big(M\frac{\partial K}{\partial\log\ell_j}\Big)
        = \tfrac12\sum_{ik}W_{ik}(\tilde x_{ij} - \tilde x_{kj})^2
        = \textstyle\sum_i \tilde x_{ij}^2 (W\mathbf 1)_i - \tilde x_j^\top W\tilde x_j,

    :math:`O(n^2 d)`.  In the order of ``kern.entries`` (the kernel's free ``theta``).
    """
    xp = space.xp
    w = inner * K
    xs = X / on_device_of(kern.length_scale, X)
    per_dim = to_numpy(xp.sum(xs * xs * xp.sum(w, axis=1)[:, None], axis=0) - xp.sum(xs * (w @ xs), axis=0))
    grads: list[float] = []
    for entry in dict.fromkeys(kern.entries):  # (each kind once, in order)
        if entry == "constant":
            grads.append(0.5 * float(xp.sum(w)))
        else:
            grads += [float(per_dim.sum())] if kern.isotropic else list(per_dim)
    return np.array(grads, dtype=float)


class DeviceDensePosterior(DensePredictions, RefreshedPosterior):
    """The dense posterior of a :class:`~relaxep.posterior.DensePrior` whose ``K`` is another library's: the
    parallel schedule's marginals, :math:`\\log Z_q`, predictions (numpy's equations,
    :class:`~relaxep.posterior.dense_posterior.DensePredictions`, from :meth:`_reduction_factors` here) and (on
    demand) ``cov``, on ``K``'s device.
    The sequential schedule is numpy's only (one-site updates are latency-bound)."""

    def __init__(
        self,
        space: ArraySpace,
        kernel: Any,
        site_precision: Array | None = None,
        site_mean_precision: Array | None = None,
    ):
        self.space, self.kernel = space, kernel
        self._hold_sites(kernel.shape[0], site_precision, site_mean_precision)  # (on the host: RefreshedPosterior)
        self.refresh()

    @property
    def n(self) -> int:
        return self.kernel.shape[0]

    @property
    def cov(self) -> Any:
        r"""The posterior covariance :math:`A = K - V^\top V + Z^\top Z`, in ``K``'s library (formed on demand)."""
        if self._stale:
            self.refresh()
        cov = self.kernel - self._v.T @ self._v
        if self._z is not None:
            cov = cov + self._z.T @ self._z
        return 0.5 * (cov + cov.T)

    def refresh(self, marginals_only: bool = False) -> None:
        """Recompute the posterior from the sites (:func:`dense_pass`)."""
        if not (np.all(np.isfinite(self.site_precision)) and np.all(np.isfinite(self.site_mean_precision))):
            raise ImproperPosteriorError("site parameters are not finite")
        self._chol = self._v = self._z = None  # (freed before the next ones are made: device memory)
        self._chol, self._v, self._z, self._log_det, self._mean, self._var = dense_pass(
            self.space, self.kernel, self.site_precision, self.site_mean_precision
        )
        self._stale = False

    def _factor_state(self) -> tuple[Any, bool]:
        if self._stale:
            self.refresh()
        return self._chol, self._z is not None

    def _solve_i_plus_tk(self, rhs: Any) -> Any:
        xp, K = self.space.xp, self.kernel
        tau = self.space.put(self.site_precision)
        return xp.linalg.solve(add_to_diagonal(xp, tau[:, None] * K, 1.0), rhs)  # (I + T K)^-1 rhs

    def evidence_gradient(self, X: Any, kern: Any, noise: float) -> Array:
        """:func:`rbf_evidence_gradient` at the current sites."""
        return rbf_evidence_gradient(self.space, self.kernel, self.cov, self.alpha, self.site_precision, X, kern, noise)

    def prior_evidence_gradient(self, prior: DeviceDensePrior, kernel: Any) -> Array:
        """:meth:`evidence_gradient` at ``prior``'s inputs and noise, for ``kernel`` (``RBF`` or
        ``ConstantKernel * RBF``): numpy's :meth:`DensePosterior.prior_evidence_gradient
        <relaxep.posterior.DensePosterior.prior_evidence_gradient>` signature."""
        return self.evidence_gradient(prior.X, as_scaled_rbf(kernel, prior.X.shape[1]), prior.noise)

    def update_site(self, i: int, precision: float, mean_precision: float) -> bool:
        raise TypeError(_SEQUENTIAL)

    def apply_sequential(
        self, order: Sequence[int] | Array, propose: SiteProposer, fraction: float = 1.0, block_size: int = 1
    ) -> SweepStats:
        raise TypeError(_SEQUENTIAL)


_SEQUENTIAL = "the sequential (one-site) updates run on numpy arrays only: use the parallel schedule"


# ------------------------------------------------------------------ the prior on the device
class DeviceDensePrior(MatrixPrior):
    """:class:`~relaxep.posterior.DensePrior`'s twin for a ``K`` of another array library (:mod:`relaxep._xp`):
    ``K`` checked once (:func:`check_device_matrix`), posteriors (:class:`DeviceDensePosterior`) and, built
    :meth:`from_kernel`, the cross-covariances of an RBF kernel, all on ``K``'s device.  ``DensePrior(K)``,
    :func:`~relaxep.posterior.as_prior` and :meth:`DensePrior.from_kernel <relaxep.posterior.DensePrior.from_kernel>`
    make it for such arrays.  It keeps no ``kernel_gradient``: the device's evidence gradient is the RBF's closed
    form (:meth:`DeviceDensePosterior.evidence_gradient`)."""

    def __init__(self, K: Any, check_psd: bool = True, *, space: ArraySpace | None = None) -> None:
        #: ``K``'s library and device (:class:`~relaxep._xp.ArraySpace`)
        self.space = namespace(K) if space is None else space
        #: the ``n x n`` prior covariance, on the device
        self.K = check_device_matrix(self.space, K, check_psd)

    @classmethod
    def from_kernel(
        cls, kernel: Any, X: Any, noise: float = 0.0, eval_gradient: bool = False, check_psd: bool = True,
        *, space: ArraySpace | None = None,
    ) -> DeviceDensePrior:  # fmt: skip
        r"""The prior :math:`N(0, k(X, X) + \sigma^2 I)` for ``RBF`` or ``ConstantKernel * RBF`` on ``X``'s device
        (:func:`device_kernel_matrix`; ``eval_gradient`` is moot: no :math:`\partial K/\partial\theta` is kept)."""
        space = namespace(X) if space is None else space
        prior = cls(device_kernel_matrix(space, kernel, X, noise), check_psd, space=space)
        prior.covariance_function, prior.X, prior.noise = kernel, X, float(noise)
        return prior

    def _posterior_for(self, tau: Array | None, nu: Array | None, marginals_only: bool) -> DeviceDensePosterior:
        return DeviceDensePosterior(self.space, self.K, tau, nu)

    def posterior_pass(self, tau: Any, nu: Any) -> tuple[Any, Any, Any, float, Any, Any]:
        r"""A refresh from device sites: ``(L, V, Z, log|I + KT|, mu, A_ii)`` on the device
        (:func:`device_dense_pass`), what :mod:`relaxep.inference.device_ep` runs each sweep."""
        return device_dense_pass(self.space, self.K, tau, nu)

    def device_pass(self, tau: Any, nu: Any, nonnegative: bool = False) -> tuple[Any, Any, Any, Any]:
        r""":meth:`SparsePrior.device_pass <relaxep.posterior.SparsePrior.device_pass>`'s answer, ``(mean, var,
        log|I + KT|, ok)``.  With ``nonnegative`` (the caller knows every :math:`\tau_i \ge 0`: no Woodbury term)
        nothing is read back (:func:`positive_sites_pass`: the last two 0-d arrays on the device); else from
        :meth:`posterior_pass`, whose checks read back (the negative sites' count sets an array's shape)."""
        if nonnegative:
            return positive_sites_pass(self.space, self.K, tau, nu)
        try:
            _chol, _v, _z, log_det, mean, var = self.posterior_pass(tau, nu)
        except ImproperPosteriorError:
            return None, None, float("nan"), False
        return mean, var, log_det, True

    def posterior_mean(self, site_precision: Array, site_mean_precision: Array) -> Array:
        """The posterior mean (on the host) from one refresh (:func:`dense_pass`)."""
        tau, nu = (np.asarray(to_numpy(a), float) for a in (site_precision, site_mean_precision))
        return dense_pass(self.space, self.K, tau, nu)[4]

    def cross_covariance(self, X_test: Any) -> tuple[Any, Any]:
        r""":math:`K_{*f} = k(X_*, X)` and :math:`k(x_*, x_*) + \sigma^2` on the device
        (:func:`device_cross_covariance`)."""
        if self.covariance_function is None:
            return super().cross_covariance(X_test)
        return device_cross_covariance(self.space, self.covariance_function, X_test, self.X, self.noise)


# ------------------------------------------------------------------ the prior's matrices on the device
def device_kernel_matrix(space: ArraySpace, kernel: Any, X: Any, noise: float) -> Any:
    r""":math:`K = k(X, X) + \sigma^2 I` in ``X``'s library, for ``RBF`` or ``ConstantKernel * RBF``
    (:func:`~relaxep.posterior.rbf.rbf`; ``TypeError`` for any other kernel), after the memory guard:
    ``K``, the factor of :math:`B`, :math:`SK` and :math:`V` in a refresh, :math:`4.5n^2` doubles on the device
    (4.2 measured: ``torch`` on the CPU, n = 4000, peak resident memory of a fit).  Not yet checked
    (:class:`DeviceDensePrior` checks it)."""
    n = X.shape[0]
    check_device_memory(X, 4.5 * 8.0 * n * n, f"a dense GP on n = {n} points", FIT_REMEDY + ", or the CPU")
    K = rbf(as_scaled_rbf(kernel, X.shape[1]), X, X, space)
    return add_to_diagonal(space.xp, K, float(noise)) if noise else K


def device_cross_covariance(space: ArraySpace, kernel: Any, X_test: Any, X: Any, noise: float) -> tuple[Any, Any]:
    r""":math:`K_{*f} = k(X_*, X)` and :math:`k(x_*, x_*) + \sigma^2` in ``X``'s library (``X_test`` moved there)."""
    kern = as_scaled_rbf(kernel, X.shape[1])
    X_test = space.put(X_test)
    diag = space.xp.full((X_test.shape[0],), kern.constant + float(noise), dtype=X.dtype, device=space.device)
    return rbf(kern, X_test, X, space), diag


def check_device_matrix(space: ArraySpace, K: Any, check_psd: bool = False) -> Any:
    """``K`` (another library's) as a float64 covariance: square, finite, symmetric to roundoff, and with
    ``check_psd`` a Cholesky factor with a relative jitter of 1e-10.  ``ValueError`` otherwise."""
    xp = space.xp
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be a square matrix, got shape {tuple(K.shape)}")
    K = K if K.dtype == xp.float64 else xp.astype(K, xp.float64)  # float64 on every device
    if not bool(xp.all(xp.isfinite(K))):
        raise ValueError("K must be finite")
    scale = float(xp.max(xp.abs(xp.linalg.diagonal(K)))) if K.shape[0] else 1.0
    if K.shape[0] and float(xp.max(xp.abs(K - K.T))) > 1e-10 * scale:
        raise ValueError("K must be symmetric")
    if check_psd and K.shape[0]:
        if cholesky_lower(xp, add_to_diagonal(xp, xp.asarray(K, copy=True), 1e-10 * scale)) is None:
            raise KernelNotPositiveDefiniteError("the kernel matrix K is not positive semi-definite")
    return K
