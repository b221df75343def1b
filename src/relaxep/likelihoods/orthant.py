r"""The inner EP of nested EP: Gaussian expectations of products of probit (or step) factors.

For :math:`z \sim N(a, V)` in :math:`d` dimensions and a scale :math:`s \ge 0`, EP approximates

.. math:: Z = E_{N(z | a, V)} \prod_{j=1}^{d} \Phi(z_j / s)

(:math:`s = 0` is the step :math:`H(z_j)`: ``Z`` is then the orthant probability
:math:`P(z > 0)`) with one rank-one Gaussian site :math:`\exp(-\tau_j z_j^2 / 2 + \nu_j z_j)`
per factor, updated sequentially (Minka 2001; for the multinomial probit this is the inner EP
of Riihimaki, Jylanki & Vehtari 2013, JMLR 14, Section 4).  Every function is batched over
``N`` independent problems (the leading axis).  The factors are log-concave, so every site
precision stays non-negative.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr

from relaxep._numerics import normal_cdf_ratio
from relaxep._typing import Array

__all__ = [
    "ep_log_z",
    "gaussian_log_integral",
    "inner_ep",
    "inner_log_z",
    "inner_posterior",
    "site_log_normalisers",
    "tilted_1d",
]


def inner_posterior(a: Array, V: Array, tau: Array, nu: Array) -> tuple[Array, Array]:
    r"""Mean and covariance of :math:`N(z | a, V) \prod_j \exp(-\tau_j z_j^2/2 + \nu_j z_j)`.

    :math:`V_p = V - V T^{1/2} (I + T^{1/2} V T^{1/2})^{-1} T^{1/2} V` and
    :math:`m_p = (I - V_p T) a + V_p \nu` (no inverse of ``V`` is formed).
    """
    d = a.shape[-1]
    st = np.sqrt(tau)
    B = np.eye(d) + st[:, :, None] * V * st[:, None, :]
    VS = V * st[:, None, :]
    X = np.linalg.solve(B, np.swapaxes(VS, 1, 2))
    Vp = V - VS @ X
    Vp = 0.5 * (Vp + np.swapaxes(Vp, 1, 2))
    mp = a + np.einsum("nij,nj->ni", Vp, nu - tau * a)
    return mp, Vp


def _cavity(mp: Array, Vp: Array, tau: Array, nu: Array, j: int) -> tuple[Array, Array, Array]:
    vj = Vp[:, j, j]
    den = 1.0 - tau[:, j] * vj
    ok = den > 1e-12
    den = np.where(ok, den, 1.0)
    return vj / den, (mp[:, j] - vj * nu[:, j]) / den, ok


def tilted_1d(mc: Array, vc: Array, scale: float) -> tuple[Array, Array, Array]:
    r"""``log Z``, mean and variance of :math:`\Phi(z / s) N(z | m, v)`.

    With :math:`k = m / \sqrt{s^2 + v}` and :math:`r = N(k) / \Phi(k)` (computed through ``erfcx``):
    :math:`\log Z = \log\Phi(k)`, mean :math:`m + v r / \sqrt{s^2+v}`, variance
    :math:`v - v^2 r (k + r) / (s^2 + v)`.
    """
    sc = np.sqrt(scale * scale + vc)
    k = mc / sc
    r = normal_cdf_ratio(k)
    mean = mc + vc * r / sc
    var = vc - vc * vc * r * (k + r) / (sc * sc)
    return log_ndtr(k), mean, np.maximum(var, 1e-14 * vc)


def inner_ep(
    a: Array,
    V: Array,
    tau: Array,
    nu: Array,
    scale: float = 1.0,
    max_sweeps: int = 1,
    tol: float = 1e-10,
) -> tuple[Array, Array, Array, Array]:
    r"""Sequential EP over the factors :math:`\Phi(z_j / s)` of :math:`N(z | a, V)`, warm-started.

    Parameters
    ----------
    a, V : ndarray (N, d), (N, d, d)
        The Gaussian (for nested EP, the cavity of ``z``).
    tau, nu : ndarray (N, d)
        Starting sites (not modified).
    scale : float
        ``s`` (1 for the multinomial probit, 0 for the step of the robust max).
    max_sweeps, tol : int, float
        Sweeps over the ``d`` factors; stop when no site precision moves by more than
        ``tol * (1 + tau)``.

    Returns
    -------
    tau, nu, mp, Vp
        The new sites and the posterior :math:`N(m_p, V_p)` they give.
    """
    tau = tau.copy()
    nu = nu.copy()
    mp, Vp = inner_posterior(a, V, tau, nu)
    d = a.shape[-1]
    for _ in range(max_sweeps):
        delta = 0.0
        for j in range(d):
            vc, mc, ok = _cavity(mp, Vp, tau, nu, j)
            _, mhat, vhat = tilted_1d(mc, vc, scale)
            t_new = np.maximum(1.0 / vhat - 1.0 / vc, 0.0)
            n_new = mhat / vhat - mc / vc
            dt = np.where(ok, t_new - tau[:, j], 0.0)
            dn = np.where(ok, n_new - nu[:, j], 0.0)
            delta = max(delta, float(np.max(np.abs(dt) / (1.0 + tau[:, j]), initial=0.0)))
            vj = Vp[:, j, j].copy()
            mj = mp[:, j].copy()
            col = Vp[:, :, j].copy()
            den = 1.0 + dt * vj
            Vp -= (dt / den)[:, None, None] * col[:, :, None] * col[:, None, :]
            mp += ((dn - dt * mj) / den)[:, None] * col
            tau[:, j] += dt
            nu[:, j] += dn
        if delta < tol:
            break
    Vp = 0.5 * (Vp + np.swapaxes(Vp, 1, 2))
    return tau, nu, mp, Vp


def site_log_normalisers(a: Array, V: Array, tau: Array, nu: Array, scale: float) -> Array:
    r""":math:`\sum_j \log \tilde s_j`, the site normalisers at the cavities of the posterior of ``(tau, nu)``.

    :math:`\log \tilde s_j = \log Z_j + \tfrac12\log(1 + \tau_j v_j) - \tfrac12 (m_j/v_j + \nu_j)^2/(1/v_j + \tau_j)
    + \tfrac12 m_j^2 / v_j` for the cavity :math:`N(m_j, v_j)` of factor ``j``.
    """
    mp, Vp = inner_posterior(a, V, tau, nu)
    total = np.zeros(a.shape[0])
    for j in range(a.shape[-1]):
        vc, mc, _ = _cavity(mp, Vp, tau, nu, j)
        lz, _, _ = tilted_1d(mc, vc, scale)
        t, v = tau[:, j], nu[:, j]
        total += lz + 0.5 * np.log1p(t * vc) - 0.5 * (mc / vc + v) ** 2 / (1.0 / vc + t) + 0.5 * mc**2 / vc
    return total


def gaussian_log_integral(a: Array, V: Array, tau: Array, nu: Array) -> Array:
    r""":math:`\log \int N(z | a, V) \exp(-z^T T z / 2 + \nu^T z)\, dz`.

    :math:`= -\tfrac12 \log|I + V T| + \tfrac12 [a^T (I + T V)^{-1} (\nu - T a) + \nu^T m_p]`.
    """
    d = a.shape[-1]
    mp, _ = inner_posterior(a, V, tau, nu)
    _, logdet = np.linalg.slogdet(np.eye(d) + V * tau[:, None, :])
    w = np.linalg.solve(np.eye(d) + tau[:, :, None] * V, (nu - tau * a)[:, :, None])[:, :, 0]
    return -0.5 * logdet + 0.5 * (np.einsum("ni,ni->n", a, w) + np.einsum("ni,ni->n", nu, mp))


def inner_log_z(a: Array, V: Array, tau: Array, nu: Array, scale: float = 1.0) -> Array:
    """EP's approximation of :math:`\\log E_{N(a, V)} \\prod_j \\Phi(z_j / s)` at the sites ``(tau, nu)``."""
    return site_log_normalisers(a, V, tau, nu, scale) + gaussian_log_integral(a, V, tau, nu)


def ep_log_z(a: Array, V: Array, scale: float, max_sweeps: int = 50, tol: float = 1e-9) -> tuple[Array, Array, Array]:
    """Run the inner EP from zero sites to convergence; ``(log Z, mean, cov)`` of the tilted ``z``."""
    zero = np.zeros(a.shape)
    tau, nu, mp, Vp = inner_ep(a, V, zero, zero, scale, max_sweeps=max_sweeps, tol=tol)
    return inner_log_z(a, V, tau, nu, scale), mp, Vp
