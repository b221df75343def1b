r"""Multi-class likelihoods: the multinomial probit and the robust max (multi-class label noise).

Both depend on the latent vector :math:`f \in \mathbb{R}^C` of a point with label ``y`` only
through the :math:`C - 1` differences :math:`w = B^T f`, :math:`w_j = f_y - f_{o_j}`, where
:math:`o_1 < \dots < o_{C-1}` are the other classes and :math:`B = [e_y - e_{o_j}]_j`.

* Multinomial probit (Girolami & Rogers 2006; Riihimaki, Jylanki & Vehtari 2013, JMLR 14, eq. 3):

  .. math:: p(y | f) = \int N(u | 0, 1) \prod_{j} \Phi(u + f_y - f_{o_j})\, du,

  i.e. :math:`P(z > 0)` for :math:`z = u 1 + w + \epsilon`, :math:`\epsilon \sim N(0, I)`.
* Robust max (Kim & Ghahramani 2006; Hernandez-Lobato et al. 2011; the noisy step of Qi & Guo
  for :math:`C = 2`):

  .. math:: p(y | f) = (1 - \varepsilon)\,[y = \arg\max f] + \frac{\varepsilon}{C - 1}\,[y \ne \arg\max f]
            = \varepsilon' + \kappa\, [w > 0],\quad \varepsilon' = \frac{\varepsilon}{C-1},\
            \kappa = 1 - \varepsilon - \varepsilon'.

Their tilted moments under a Gaussian :math:`N(f | m, S)` reduce to Gaussian orthant integrals
in :math:`C - 1` dimensions, which the inner EP (:mod:`relaxep.posterior.multiclass._inner`) approximates.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr

from relaxep._numerics import logsumexp
from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep.likelihoods.base import Likelihood, TiltedLogZ
from relaxep.likelihoods.orthant import ep_log_z

__all__ = [
    "MulticlassLikelihood",
    "MultinomialProbit",
    "RobustMax",
    "difference_matrices",
    "independent_log_proba",
    "other_classes",
]

_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(48)
_GH_LOGW = np.log(_GH_WEIGHTS / _GH_WEIGHTS.sum())
#: the independent latents' predictive (:func:`independent_log_proba`): 96 nodes (48 leave 3e-7, 96 below 1e-11)
_GH96_NODES, _GH96_WEIGHTS = np.polynomial.hermite_e.hermegauss(96)
_GH96_LOGW = np.log(_GH96_WEIGHTS / _GH96_WEIGHTS.sum())


def other_classes(y: Array, n_classes: int) -> Array:
    """``(N, C - 1)``: for each label, the other classes in increasing order."""
    y = np.asarray(y, dtype=int)
    grid = np.broadcast_to(np.arange(n_classes), (y.size, n_classes))
    return grid[grid != y[:, None]].reshape(y.size, n_classes - 1)


def independent_log_proba(mean: ArrayLike, var: ArrayLike, noise: float = 1.0, block: int = 1024) -> Array:
    r"""The multinomial probit's predictive of independent Gaussian latents, ``(N, C)`` log probabilities.

    With :math:`f_j \sim N(m_j, v_j)` independent and :math:`y = \arg\max_j (f_j + \tau e_j)`,
    :math:`e_j \sim N(0, 1)` (the multinomial probit, Girolami & Rogers 2006; :math:`\tau` the link's ``noise``,
    which divides out: the latents at :math:`m / \tau`, :math:`v / \tau^2` with unit noise), the sums
    :math:`f_j + e_j` (at :math:`\tau = 1`) are independent :math:`N(m_j, 1 + v_j)`, so

    .. math::
        p(y = c) = \int N(w | m_c, 1 + v_c) \prod_{j \ne c} \Phi\Big(\frac{w - m_j}{\sqrt{1 + v_j}}\Big) dw,

    one dimension, by 96-node Gauss-Hermite quadrature in :math:`w`, summed in log space (``log_ndtr``) and
    normalised over the classes: within 1e-9 of adaptive quadrature (``tests/test_multiclass_link.py``); a
    class whose probability lies beyond the rule's reach (about 13 standard deviations of :math:`w`) gets a
    lower value, still finite.  ``block`` rows at a time (memory ``96 N C^2`` floats a block).
    """
    mean = np.atleast_2d(np.asarray(mean, dtype=float))
    var = np.atleast_2d(np.asarray(var, dtype=float))
    if mean.shape != var.shape or mean.shape[1] < 2:
        raise ValueError(f"mean and var must have the same shape (N, C) with C >= 2, got {mean.shape}, {var.shape}")
    if np.any(var < 0) or not np.all(np.isfinite(var)) or not np.all(np.isfinite(mean)):
        raise ValueError("mean must be finite and var finite and non-negative")
    if not (np.isfinite(noise) and noise > 0):
        raise ValueError(f"noise must be positive and finite, got {noise!r}")
    mean, var = mean / noise, var / noise**2
    out = np.empty(mean.shape)
    n_classes = mean.shape[1]
    off = ~np.eye(n_classes, dtype=bool)  # (c, j): j != c
    for start in range(0, mean.shape[0], block):
        m, sd = mean[start : start + block], np.sqrt(1.0 + var[start : start + block])
        w = m[None, :, :] + sd[None, :, :] * _GH96_NODES[:, None, None]  # (nodes, N, c)
        z = (w[..., None] - m[None, :, None, :]) / sd[None, :, None, :]  # (nodes, N, c, j)
        lp = np.where(off, log_ndtr(z), 0.0).sum(-1)  # (nodes, N, c)
        out[start : start + block] = logsumexp(lp + _GH96_LOGW[:, None, None], axis=0)
    return out - logsumexp(out, axis=1, keepdims=True)


def difference_matrices(y: Array, n_classes: int) -> Array:
    r"""``(N, C, C - 1)``: :math:`B_i = [e_{y_i} - e_{o_j}]_j`, so that :math:`w_i = B_i^T f_i`."""
    y = np.asarray(y, dtype=int)
    n = y.size
    others = other_classes(y, n_classes)
    B = np.zeros((n, n_classes, n_classes - 1))
    rows = np.arange(n)
    for j in range(n_classes - 1):
        B[rows, y, j] = 1.0
        B[rows, others[:, j], j] = -1.0
    return B


def _check_moments(mean: ArrayLike, cov: ArrayLike, y: ArrayLike) -> tuple[Array, Array, Array]:
    mean = np.atleast_2d(np.asarray(mean, dtype=float))
    cov = np.asarray(cov, dtype=float)
    if cov.ndim == 2:
        cov = cov[None]
    y = np.atleast_1d(np.asarray(y))
    n, c = mean.shape
    if c < 2:
        raise ValueError(f"mean must have at least two classes (columns), got shape {mean.shape}")
    if cov.shape != (n, c, c):
        raise ValueError(f"cov must have shape {(n, c, c)} to match mean, got {cov.shape}")
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer) or np.any((y < 0) | (y >= c)):
        raise ValueError(f"y must hold {n} integer class indices in [0, {c}), got {y!r}")
    return mean, cov, y.astype(int)


class MulticlassLikelihood(Likelihood):
    r"""A likelihood of a label ``y`` in ``{0, ..., C-1}`` given the ``C`` latent values of a point.

    It shares the base with the scalar likelihoods, as GPflow's ``MultiClass`` does: ``latent_dim``
    is ``None`` (one latent function per class, ``C`` from the data), and GPML's question is asked
    in ``C`` dimensions, :meth:`log_z` ``(y, mean (N, C), var (N, C, C))`` giving ``log Z``, its
    gradient ``(N, C)`` and Hessian ``(N, C, C)`` in the cavity mean, from :meth:`tilted_moments`
    (:math:`\nabla \log Z = S^{-1}(\hat m - m)`, :math:`\nabla^2 \log Z = S^{-1}(\hat S - S) S^{-1}`,
    by solves of the small ``C x C`` systems).  Joint multi-class EP
    (:func:`~relaxep.multiclass.infer_multiclass`) asks :meth:`tilted_moments` directly.  There is
    no power (``u = 1``) and no :math:`E[\log p]` or cumulants: Relaxed EP and the convergent
    methods are scalar (``has_cumulants = False``).
    """

    kind: ClassVar[str] = "multiclass"
    is_density: ClassVar[bool] = False  # P(y = k | f): a probability
    latent_dim: ClassVar[int | None] = None  # type: ignore[assignment]
    has_cumulants: ClassVar[bool] = False
    #: the scale of the inner EP's factors: 1 (probit) or 0 (step)
    inner_scale: float = 1.0

    def check_targets(self, y: ArrayLike, n: int | None = None) -> Array:
        """Class indices: a one-dimensional integer array of ``n`` entries in ``{0, 1, ...}``."""
        arr = np.asarray(y)
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer) or np.any(arr < 0):
            raise ValueError(f"y must hold non-negative integer class indices, got {arr!r}")
        if n is not None and arr.shape[0] != n:
            raise ValueError(f"length mismatch: K has {n} rows but y has {arr.shape[0]} labels")
        return arr

    def tilted_moments(self, mean: ArrayLike, cov: ArrayLike, y: ArrayLike) -> tuple[Array, Array, Array]:
        r"""EP's ``log Z``, mean and covariance of :math:`p(y_i | f) N(f | m_i, S_i)`, batched over ``i``.

        Parameters
        ----------
        mean, cov : array_like (N, C), (N, C, C)
        y : array_like (N,)
            Class indices.
        """
        raise NotImplementedError

    def read_targets(self, y: ArrayLike, log_exposure: ArrayLike | None = None) -> Array:
        """Class indices, a one-dimensional integer array (:meth:`check_targets`; a ``ValueError`` naming ``y``
        otherwise)."""
        self._no_exposure(log_exposure)
        return self.check_targets(y)

    def loo_tail(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, pointwise: ArrayLike) -> Array:
        r"""Each row's leave-one-out tail probability: of the classes no more probable than the observed one,
        :math:`\sum_k P_k [P_k \le P_{y_i}(1 + 10^{-12})]`, :math:`P_k` the leave-one-out class probabilities
        (:meth:`predict_proba` at the cavity; 0 where the cavity is not finite); ``pointwise`` unused.

        Parameters
        ----------
        y : array_like of shape (n,)
            Class indices.
        mean, var : array_like of shape (n, C) and (n, C, C)
            The cavities' means and covariances.
        pointwise : array_like of shape (n,)
            :math:`\log p(y_i | y_{-i})`.
        """
        y = np.asarray(y).astype(int)
        mean, var = np.asarray(mean, dtype=float), np.asarray(var, dtype=float)
        ok = np.all(np.isfinite(mean), axis=1) & np.all(np.isfinite(var), axis=(1, 2))
        proba = np.full(mean.shape, np.nan)
        if np.any(ok):
            proba[ok] = self.predict_proba(mean[ok], var[ok])
        observed = proba[np.arange(y.shape[0]), y]
        return np.sum(np.where(proba <= observed[:, None] * (1 + 1e-12), proba, 0.0), axis=1)

    def predict(self, mean: ArrayLike, var: ArrayLike) -> Array:
        """The predictive class probabilities, :meth:`predict_proba`."""
        return self.predict_proba(mean, var)

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        if power != 1.0:
            raise ValueError(f"{type(self).__name__} answers for power u = 1 only, got {power}")
        log_z, tilted_mean, tilted_cov = self.tilted_moments(mean, var, y.astype(int))
        mean, var = np.atleast_2d(mean), var if var.ndim == 3 else var[None]
        grad = np.linalg.solve(var, (tilted_mean - mean)[..., None])[..., 0]
        left = np.linalg.solve(var, tilted_cov - var)  # S^-1 (S_hat - S)
        hess = np.swapaxes(np.linalg.solve(var, np.swapaxes(left, -1, -2)), -1, -2)
        return TiltedLogZ(log_z, grad, 0.5 * (hess + np.swapaxes(hess, -1, -2)))

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        raise NotImplementedError(f"{type(self).__name__} has no E[log p]: Relaxed EP is for scalar likelihoods")

    def _tilted_cumulants(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        raise NotImplementedError(f"{type(self).__name__} has no tilted cumulants (has_cumulants is False)")

    def predict_proba(self, mean: ArrayLike, cov: ArrayLike) -> Array:
        r""":math:`p(y_* = c) = \int p(c | f) N(f | \mu_*, \Sigma_*) df` for every class, ``(N, C)``, rows sum to 1."""
        return np.exp(self.predict_log_proba(mean, cov))

    def predict_log_proba(self, mean: ArrayLike, cov: ArrayLike) -> Array:
        r""":math:`\log p(y_* = c)` for every class, ``(N, C)``: each class's ``log Z`` at the predictive,
        normalised in log space (:math:`\log Z_c - \log \sum_k Z_k`)."""
        mean = np.atleast_2d(np.asarray(mean, dtype=float))
        cov = np.asarray(cov, dtype=float)
        n, c = mean.shape
        log_p = np.empty((n, c))
        for k in range(c):
            log_p[:, k] = self.tilted_moments(mean, cov, np.full(n, k))[0]
        return log_p - logsumexp(log_p, axis=1, keepdims=True)


class MultinomialProbit(MulticlassLikelihood):
    r"""The multinomial probit :math:`p(y | f) = E_{u \sim N(0,1)} \prod_{j \ne y} \Phi(u + f_y - f_j)`.

    The likelihood of nested EP (Riihimaki, Jylanki & Vehtari 2013, JMLR 14).  For :math:`C = 2`
    it is the probit :math:`\Phi((f_y - f_{\bar y}) / \sqrt 2)`.
    """

    inner_scale = 1.0

    def _log_lik(self, y: Array, F: Array) -> Array:
        r"""Gauss-Hermite quadrature (48 nodes) over ``u`` of :math:`\sum_{j \ne y} \log\Phi(u + f_y - f_j)`."""
        y = np.asarray(y, dtype=int)
        fy = np.take_along_axis(F, np.broadcast_to(y[:, None], (*F.shape[:-1], 1)), axis=-1)
        d = fy - F  # (..., N, C); zero at y
        lp = log_ndtr(_GH_NODES.reshape((-1,) + (1,) * d.ndim) + d)  # (nodes, ..., N, C)
        mask = np.arange(F.shape[-1]) == y[:, None]
        lp = np.where(mask, 0.0, lp).sum(axis=-1)  # (nodes, ..., N)
        return logsumexp(lp + _GH_LOGW.reshape((-1,) + (1,) * (lp.ndim - 1)), axis=0)

    def tilted_moments(self, mean: ArrayLike, cov: ArrayLike, y: ArrayLike) -> tuple[Array, Array, Array]:
        r"""Inner EP on :math:`z = u 1 + B^T f \sim N(B^T m, 1 1^T + B^T S B)` with factors :math:`\Phi(z_j)`.

        The tilted :math:`f` follows from the tilted ``z`` by the regression of ``f`` on ``z``:
        :math:`E[f] = m + S B V^{-1} (m_z - a)`, :math:`Cov[f] = S + S B V^{-1} (V_z - V) V^{-1} B^T S`.
        """
        mean, cov, y = _check_moments(mean, cov, y)
        B = difference_matrices(y, mean.shape[1])
        a = np.einsum("nci,nc->ni", B, mean)
        SB = cov @ B
        V = np.swapaxes(B, 1, 2) @ SB + 1.0
        log_z, mz, Vz = ep_log_z(a, V, 1.0)
        return log_z, *_regress(mean, cov, SB, a, V, mz, Vz)


class RobustMax(MulticlassLikelihood):
    r"""The robust max: :math:`1 - \varepsilon` if :math:`y = \arg\max f`, else :math:`\varepsilon / (C - 1)`.

    Parameters
    ----------
    eps : float in [0, 1)
        The probability that a label was replaced by one of the other classes uniformly at random.

    Notes
    -----
    With :math:`w = B^T f \sim N(a, W)`, :math:`a = B^T m`, :math:`W = B^T S B`, the tilted
    distribution is the mixture :math:`(\varepsilon' N(f | m, S) + \kappa P\, N_{w > 0}(f)) / Z`,
    :math:`Z = \varepsilon' + \kappa P`, :math:`P = P(w > 0)`, whose component moments come from
    the orthant probability and the truncated-Gaussian moments of ``w`` (the inner EP with step
    factors, ``scale = 0``) regressed back to ``f``.  For :math:`C = 2` it is the noisy step
    :math:`\varepsilon + (1 - 2\varepsilon) H(f_y - f_{\bar y})` of Qi & Guo.
    """

    inner_scale = 0.0

    def __init__(self, eps: float = 0.05) -> None:
        if check_unit_interval(eps, "eps") >= 1.0:
            raise ValueError(f"eps must be < 1, got {eps}")
        self.eps = eps  # stored as given (scikit-learn's clone checks identity)

    def _weights(self, n_classes: int) -> tuple[float, float]:
        eps = float(self.eps)
        floor = eps / (n_classes - 1)
        return floor, 1.0 - eps - floor

    def _log_lik(self, y: Array, F: Array) -> Array:
        """Exact: :math:`\\log(1 - \\varepsilon)` at the argmax, else :math:`\\log(\\varepsilon / (C - 1))`."""
        y = np.asarray(y, dtype=int)
        floor, kappa = self._weights(F.shape[-1])
        hit = np.argmax(F, axis=-1) == y
        with np.errstate(divide="ignore"):
            return np.where(hit, np.log(floor + kappa), np.log(floor))

    def tilted_moments_w(self, a: Array, W: Array) -> tuple[Array, Array, Array]:
        r"""``log Z``, mean and covariance of :math:`(\varepsilon' + \kappa [w > 0]) N(w | a, W)` (batched).

        The mixture of the untouched Gaussian (weight :math:`\varepsilon' / Z`) and the
        Gaussian truncated to the positive orthant (weight :math:`\kappa P / Z`), its moments
        and ``P`` by the inner EP with step factors.
        """
        floor, kappa = self._weights(a.shape[1] + 1)
        log_p, mw, Ww = ep_log_z(a, W, 0.0)
        with np.errstate(divide="ignore"):
            log_floor = np.log(floor)
        if kappa > 0:
            log_z = np.logaddexp(log_floor, np.log(kappa) + log_p)
            w1 = np.exp(np.log(kappa) + log_p - log_z)
        else:
            log_z, w1 = np.full_like(log_p, log_floor), np.zeros_like(log_p)
        w0 = 1.0 - w1
        m = w0[:, None] * a + w1[:, None] * mw
        d0, d1 = a - m, mw - m
        S = w0[:, None, None] * (W + d0[:, :, None] * d0[:, None, :]) + w1[:, None, None] * (
            Ww + d1[:, :, None] * d1[:, None, :]
        )
        return log_z, m, 0.5 * (S + np.swapaxes(S, 1, 2))

    def tilted_moments(self, mean: ArrayLike, cov: ArrayLike, y: ArrayLike) -> tuple[Array, Array, Array]:
        r"""The moments in ``w`` (:meth:`tilted_moments_w`) regressed back to ``f``.

        Exact for the mixture: ``f | w`` is the same Gaussian in both components.
        """
        mean, cov, y = _check_moments(mean, cov, y)
        B = difference_matrices(y, mean.shape[1])
        a = np.einsum("nci,nc->ni", B, mean)
        SB = cov @ B
        W = np.swapaxes(B, 1, 2) @ SB
        W = 0.5 * (W + np.swapaxes(W, 1, 2))
        log_z, mw, Ww = self.tilted_moments_w(a, W)
        return log_z, *_regress(mean, cov, SB, a, W, mw, Ww)


def _regress(mean: Array, cov: Array, SB: Array, a: Array, V: Array, mz: Array, Vz: Array) -> tuple[Array, Array]:
    """Moments of ``f`` when ``z`` (jointly Gaussian with ``f``, ``Cov(f, z) = S B``) moves to ``N(mz, Vz)``."""
    G = np.swapaxes(np.linalg.solve(V, np.swapaxes(SB, 1, 2)), 1, 2)  # S B V^{-1}
    m = mean + np.einsum("nci,ni->nc", G, mz - a)
    S = cov + G @ (Vz - V) @ np.swapaxes(G, 1, 2)
    return m, 0.5 * (S + np.swapaxes(S, 1, 2))
