r"""The prior of a utility's comparisons: :class:`ComparisonKernel`, the covariance of linear functionals
:math:`f(p) - s\,f(q)` of a Gaussian process :math:`f \sim GP(0, k)`.

A comparison "``p`` is preferred to ``q``" observes the difference :math:`d = f(p) - f(q)` (Chu & Ghahramani 2005,
*Preference learning with Gaussian processes*, ICML), and an item's utility is :math:`f(p)` itself.  Both are rows
``[p, q, s]`` of one input space (width :math:`2D + 1`): ``s = 1`` a comparison, ``s = 0`` an item (``q``
ignored).  Their covariance is

.. math:: \operatorname{cov}(f(p) - s f(q),\ f(p') - s' f(q'))
        = k(p, p') - s' k(p, q') - s\, k(q, p') + s s' k(q, q'),

so a GP classifier of comparisons on this kernel, every label "first preferred", is the preference model: EP's
probit sites on :math:`d`, its evidence and its gradient in the base kernel's hyperparameters, and the utility's
predictive at item rows, all from the one-latent machinery.  The kernel is positive semi-definite for any real
``s`` (a covariance of linear functionals); over comparisons it is singular where they form cycles or outnumber
the items (the dense posterior does not need :math:`K^{-1}`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.gaussian_process.kernels import Hyperparameter, Kernel

from relaxep._typing import Array

__all__ = ["ComparisonKernel", "encode_comparisons", "encode_items"]

#: rows of the paired diagonal :math:`k(p_i, q_i)` evaluated per block (memory ``block**2`` floats)
_DIAG_BLOCK = 512


def encode_items(X: Array) -> Array:
    """Rows ``[x, 0, 0]``: the utilities :math:`f(x)` (``X``: ``(n, D)``)."""
    X = np.asarray(X, dtype=float)
    return np.hstack([X, np.zeros_like(X), np.zeros((X.shape[0], 1))])


def encode_comparisons(X: Array, comparisons: Array) -> Array:
    """Rows ``[x_a, x_b, 1]``: the differences :math:`f(x_a) - f(x_b)` of each comparison ``(a, b)`` (row indices
    into ``X``)."""
    X = np.asarray(X, dtype=float)
    return np.hstack([X[comparisons[:, 0]], X[comparisons[:, 1]], np.ones((comparisons.shape[0], 1))])


class ComparisonKernel(Kernel):
    r"""Covariance of :math:`f(p) - s f(q)` for :math:`f \sim GP(0, k)` (module docstring), rows ``[p, q, s]``.

    Parameters
    ----------
    kernel : sklearn Kernel
        The utility's kernel :math:`k` on items of ``n_features`` columns; its hyperparameters are this kernel's
        (named ``kernel__...``), its gradient this kernel's by the same linear combination.
    n_features : int
        :math:`D`, the width of an item.
    """

    def __init__(self, kernel: Kernel, n_features: int) -> None:
        self.kernel = kernel
        self.n_features = n_features

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        params: dict[str, Any] = dict(kernel=self.kernel, n_features=self.n_features)
        if deep:
            params.update(("kernel__" + k, v) for k, v in self.kernel.get_params().items())
        return params

    @property
    def hyperparameters(self) -> list[Hyperparameter]:
        return [
            Hyperparameter("kernel__" + h.name, h.value_type, h.bounds, h.n_elements)
            for h in self.kernel.hyperparameters
        ]

    @property
    def theta(self) -> Array:
        return self.kernel.theta

    @theta.setter
    def theta(self, theta: Array) -> None:
        self.kernel.theta = theta

    @property
    def bounds(self) -> Array:
        return self.kernel.bounds

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.kernel == other.kernel and self.n_features == other.n_features  # type: ignore[attr-defined]

    def __hash__(self) -> int:  # (sklearn's Kernel defines __eq__ only; keep the object hashable by identity)
        return id(self)

    def is_stationary(self) -> bool:
        return False

    @property
    def requires_vector_input(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"ComparisonKernel({self.kernel!r})"

    def _split(self, X: ArrayLike) -> tuple[Array, Array, Array]:
        X = np.asarray(X, dtype=float)
        D = self.n_features
        if X.ndim != 2 or X.shape[1] != 2 * D + 1:
            raise ValueError(f"ComparisonKernel takes rows [p, q, s] of width {2 * D + 1}, got shape {X.shape}")
        return X[:, :D], X[:, D : 2 * D], X[:, 2 * D]

    def __call__(self, X: ArrayLike, Y: ArrayLike | None = None, eval_gradient: bool = False) -> Any:
        r""":math:`k(p,p') - s' k(p,q') - s k(q,p') + s s' k(q,q')`, the four blocks from one evaluation of the
        base kernel on the stacked points (and its gradient, where asked, combined alike; ``Y = None`` only)."""
        if eval_gradient and Y is not None:
            raise ValueError("Gradient can only be evaluated when Y is None.")
        p, q, s = self._split(X)
        if Y is None:
            p2, q2, s2 = p, q, s
        else:
            p2, q2, s2 = self._split(Y)
        n, m = p.shape[0], p2.shape[0]
        pairs = s != 0.0
        # the base kernel once on the distinct points (m comparisons among n items: n, not 2m), then gathered
        left, at = np.unique(np.vstack([p, q[pairs]]), axis=0, return_inverse=True)
        if Y is None:
            out, at2 = self.kernel(left, eval_gradient=eval_gradient), at
        else:
            right, at2 = np.unique(np.vstack([p2, q2[s2 != 0.0]]), axis=0, return_inverse=True)
            out = self.kernel(left, right)
        small, grad = out if eval_gradient else (out, None)
        K = self._combine(small[np.ix_(at, at2)], n, m, s, pairs, s2, s2 != 0.0)
        if not eval_gradient:
            return K
        G = np.empty((n, m, grad.shape[2]))
        for j in range(grad.shape[2]):
            G[:, :, j] = self._combine(grad[:, :, j][np.ix_(at, at2)], n, m, s, pairs, s2, s2 != 0.0)
        return K, G

    @staticmethod
    def _combine(big: Array, n: int, m: int, s: Array, pairs: Array, s2: Array, pairs2: Array) -> Array:
        """The four blocks of the stacked evaluation ``big`` (rows ``[p; q of the pairs]``, columns alike)
        weighted by ``s`` and ``s'``."""
        K = np.array(big[:n, :m])
        if pairs2.any():
            K[:, pairs2] -= big[:n, m:] * s2[pairs2]
        if pairs.any():
            K[pairs, :] -= s[pairs, None] * big[n:, :m]
            if pairs2.any():
                K[np.ix_(pairs, pairs2)] += s[pairs, None] * s2[pairs2] * big[n:, m:]
        return K

    def diag(self, X: ArrayLike) -> Array:
        r""":math:`k(p,p) - 2 s\,k(p,q) + s^2 k(q,q)`, the paired :math:`k(p_i, q_i)` in blocks."""
        p, q, s = self._split(X)
        out = np.asarray(self.kernel.diag(p), dtype=float).copy()
        pairs = np.flatnonzero(s != 0.0)
        if pairs.size:
            out[pairs] += s[pairs] ** 2 * np.asarray(self.kernel.diag(q[pairs]), dtype=float)
            for start in range(0, pairs.size, _DIAG_BLOCK):
                rows = pairs[start : start + _DIAG_BLOCK]
                out[rows] -= 2.0 * s[rows] * np.diagonal(self.kernel(p[rows], q[rows]))
        return out
