r"""The joint prior of a Gaussian process and its first partial derivatives (Solak et al. 2003; Riihimäki &
Vehtari 2010): the covariance blocks of stationary kernels, written once.

Rows are *augmented inputs*: an input :math:`x` and what is observed there, :math:`f(x)` (``dim = -1``) or
:math:`\partial f(x)/\partial x_d` (``dim = d``).  For a stationary kernel of the scaled squared distance,
:math:`k(x, x') = c\,g(s)`, :math:`s = \sum_j \delta_j^2/\ell_j^2`, :math:`\delta = x - x'`,

.. math::
    \operatorname{cov}(f, f') = c\,g, \qquad
    \operatorname{cov}(\partial_d f, f') = c\,g'(s)\,\frac{2\delta_d}{\ell_d^2}, \qquad
    \operatorname{cov}(f, \partial'_e f') = -c\,g'(s)\,\frac{2\delta_e}{\ell_e^2},

.. math::
    \operatorname{cov}(\partial_d f, \partial'_e f') = -c\Big[4 g''(s)\,\frac{\delta_d\delta_e}{\ell_d^2\ell_e^2}
    + 2 g'(s)\,\frac{[d = e]}{\ell_d^2}\Big],

with, for the kernels here (scikit-learn's parameterisations, :math:`r = \sqrt s`):

* ``RBF``: :math:`g = e^{-s/2}`, :math:`g' = -g/2`, :math:`s g'' = s g/4`;
* ``Matern(nu=1.5)``: :math:`g = (1+\sqrt3 r)e^{-\sqrt3 r}`, :math:`g' = -\tfrac32 e^{-\sqrt3 r}`,
  :math:`s g'' = \tfrac{3\sqrt3}{4} r e^{-\sqrt3 r}`;
* ``Matern(nu=2.5)``: :math:`g = (1+\sqrt5 r+\tfrac53 s)e^{-\sqrt5 r}`,
  :math:`g' = -\tfrac56(1+\sqrt5 r)e^{-\sqrt5 r}`, :math:`s g'' = \tfrac{25}{12} s e^{-\sqrt5 r}`;
* ``RationalQuadratic``: :math:`g = b^{-\alpha}`, :math:`b = 1+\tfrac{s}{2\alpha}`,
  :math:`g' = -\tfrac12 b^{-\alpha-1}`, :math:`s g'' = s\tfrac{\alpha+1}{4\alpha} b^{-\alpha-2}`.

The mixed term is computed as :math:`(s g'')\,u_d u_e/s` with :math:`u = \delta/\ell`, which is 0 at :math:`s = 0`
(where the Matérn-3/2's :math:`g''` is unbounded but :math:`|u_d u_e|/s \le 1` and :math:`s g'' \to 0`).  Sums add
blocks, a ``ConstantKernel`` factor scales them (a constant alone has zero derivatives), a ``WhiteKernel`` in the
top-level sum adds its noise to the values' diagonal of the training matrix only.  Every block is a function of
the kernel's log-hyperparameters ``theta``, written so that a complex ``theta`` flows through:
:func:`joint_gradient` takes :math:`\partial K/\partial\theta` by the complex step, exactly to rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import (
    RBF,
    ConstantKernel,
    Kernel,
    Matern,
    Product,
    RationalQuadratic,
    Sum,
    WhiteKernel,
)

from relaxep._typing import Array
from relaxep.posterior._kernel_theta import hyperparameter_values

__all__ = ["VALUE", "augmented", "check_derivative_kernel", "joint_covariance", "joint_gradient"]

#: the ``dim`` of a row that observes :math:`f` itself
VALUE = -1
_STEP = 1e-20

#: ``(theta, X1, d1, X2, d2, same) -> block``
_Block = Callable[[Array, Array, Array, Array, Array, bool], Array]


def augmented(X: Any, dims: Any = None) -> tuple[Array, Array]:
    """Rows ``X`` (2-D) with what each observes: ``dims`` (an int for all, an array, or ``None``: the values)."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    d = np.full(X.shape[0], VALUE, dtype=np.intp) if dims is None else np.broadcast_to(np.asarray(dims), X.shape[:1])
    d = np.asarray(d, dtype=np.intp)
    if np.any((d < VALUE) | (d >= X.shape[1])):
        raise ValueError(f"a derivative's dimension must be in [0, {X.shape[1] - 1}] (or -1 for a value)")
    return X, d


def check_derivative_kernel(kernel: Kernel) -> None:
    """Refuses, naming the kernel, one whose derivative blocks are not written here."""
    _parse(kernel, 0, top=True)


def joint_covariance(
    kernel: Kernel, X1: Array, d1: Array, X2: Array | None = None, d2: Array | None = None, theta: Array | None = None
) -> Array:
    """The covariance of the augmented rows ``(X1, d1)`` with ``(X2, d2)`` (the same rows where omitted, with a
    ``WhiteKernel``'s noise on the values' diagonal), at ``theta`` (default ``kernel.theta``; complex allowed)."""
    theta = np.asarray(kernel.theta if theta is None else theta)
    block, _ = _parse(kernel, 0, top=True)
    same = X2 is None
    if same:
        X2, d2 = X1, d1
    return block(theta, X1, d1, X2, d2, same)  # type: ignore[arg-type]


def joint_gradient(kernel: Kernel, X: Array, dims: Array) -> Array:
    r""":math:`\partial K/\partial\theta_j` of the training rows' joint covariance, shape ``(n, n, n_theta)``
    (scikit-learn's ``eval_gradient`` layout), by the complex step."""
    theta = np.asarray(kernel.theta, dtype=float)
    out = np.empty((X.shape[0], X.shape[0], theta.size))
    for j in range(theta.size):
        shifted = theta.astype(complex)
        shifted[j] += 1j * _STEP
        out[:, :, j] = np.imag(joint_covariance(kernel, X, dims, theta=shifted)) / _STEP
    return out


def _parse(kernel: Kernel, offset: int, top: bool = False) -> tuple[_Block, int]:
    """``(block, entries of theta used)`` of ``kernel`` whose entries start at ``offset``."""
    if isinstance(kernel, Sum):
        b1, u1 = _parse(kernel.k1, offset, top)
        b2, u2 = _parse(kernel.k2, offset + u1, top)
        return (lambda th, X1, d1, X2, d2, same: b1(th, X1, d1, X2, d2, same) + b2(th, X1, d1, X2, d2, same)), u1 + u2
    if isinstance(kernel, Product):
        first = isinstance(kernel.k1, ConstantKernel)
        if not (first or isinstance(kernel.k2, ConstantKernel)):
            raise TypeError(
                f"{kernel!r}: derivative blocks are written for sums and products with a ConstantKernel; a product of "
                "two kernels is not supported"
            )
        if first:
            values, uc = hyperparameter_values(kernel.k1, offset)
            block, ub = _parse(kernel.k2, offset + uc)
        else:
            block, ub = _parse(kernel.k1, offset)
            values, uc = hyperparameter_values(kernel.k2, offset + ub)
        c = values["constant_value"]
        return (lambda th, X1, d1, X2, d2, same: c(th)[0] * block(th, X1, d1, X2, d2, same)), ub + uc
    vals, used = hyperparameter_values(kernel, offset)
    if isinstance(kernel, ConstantKernel):

        def constant(th: Array, X1: Array, d1: Array, X2: Array, d2: Array, same: bool) -> Array:
            c = vals["constant_value"](th)[0]
            return c * ((d1[:, None] == VALUE) & (d2[None, :] == VALUE))

        return constant, used
    if isinstance(kernel, WhiteKernel):
        if not top:
            raise TypeError("WhiteKernel: only in the kernel's top-level sum (noise on each value)")

        def white(th: Array, X1: Array, d1: Array, X2: Array, d2: Array, same: bool) -> Array:
            noise = vals["noise_level"](th)[0]
            eye = np.diag((d1 == VALUE).astype(float)) if same else np.zeros((X1.shape[0], X2.shape[0]))
            return noise * eye

        return white, used
    profile = _profile(kernel, vals)
    return _stationary(profile, vals["length_scale"]), used


def _profile(kernel: Kernel, vals: dict[str, Callable[[Array], Array]]) -> Callable[[Array, Array], tuple[Array, ...]]:
    """``(theta, s) -> (g, g', s g'')`` of a stationary kernel (module docstring's table)."""
    if isinstance(kernel, Matern) and float(kernel.nu) == 1.5:

        def m32(th: Array, s: Array) -> tuple[Array, ...]:
            r = np.sqrt(3.0 * s)
            e = np.exp(-r)
            return (1.0 + r) * e, -1.5 * e, 0.75 * r * e

        return m32
    if isinstance(kernel, Matern) and float(kernel.nu) == 2.5:

        def m52(th: Array, s: Array) -> tuple[Array, ...]:
            r = np.sqrt(5.0 * s)
            e = np.exp(-r)
            return (1.0 + r + 5.0 * s / 3.0) * e, -(5.0 / 6.0) * (1.0 + r) * e, (25.0 / 12.0) * s * e

        return m52
    if type(kernel) is RBF:  # (scikit-learn's Matern is a subclass of RBF)

        def rbf(th: Array, s: Array) -> tuple[Array, ...]:
            g = np.exp(-0.5 * s)
            return g, -0.5 * g, 0.25 * s * g

        return rbf
    if isinstance(kernel, RationalQuadratic):
        alpha = vals["alpha"]

        def rq(th: Array, s: Array) -> tuple[Array, ...]:
            a = alpha(th)[0]
            base = 1.0 + s / (2.0 * a)
            return base**-a, -0.5 * base ** (-a - 1.0), s * (a + 1.0) / (4.0 * a) * base ** (-a - 2.0)

        return rq
    raise TypeError(
        f"{type(kernel).__name__}{'' if not isinstance(kernel, Matern) else f'(nu={kernel.nu})'} has no derivative "
        "blocks here: use RBF, Matern(nu=1.5 or 2.5) or RationalQuadratic (with ConstantKernel factors, sums, a "
        "WhiteKernel); Matern(nu=0.5) is not differentiable"
    )


def _stationary(profile: Callable[[Array, Array], tuple[Array, ...]], length_scale: Callable[[Array], Array]) -> _Block:
    def block(th: Array, X1: Array, d1: Array, X2: Array, d2: Array, same: bool) -> Array:
        ell = np.broadcast_to(length_scale(th), (X1.shape[1],))
        delta = X1[:, None, :] - X2[None, :, :]
        u = delta / ell
        s = np.sum(u * u, axis=-1)
        g, g1, sg2 = profile(th, s)
        value1, value2 = d1 == VALUE, d2 == VALUE
        i1, i2 = np.maximum(d1, 0), np.maximum(d2, 0)
        # the derivative's coordinate at each pair (rows x columns)
        u_d = np.take_along_axis(u, np.broadcast_to(i1[:, None, None], (*s.shape, 1)), axis=-1)[..., 0]
        u_e = np.take_along_axis(u, np.broadcast_to(i2[None, :, None], (*s.shape, 1)), axis=-1)[..., 0]
        l_d, l_e = ell[i1][:, None], ell[i2][None, :]
        real = np.real(s)
        mixed = np.where(real > 0.0, sg2 * u_d * u_e / np.where(real > 0.0, s, 1.0), 0.0)
        rows, cols = value1[:, None], value2[None, :]
        return np.select(
            [rows & cols, cols, rows],
            [g, 2.0 * g1 * u_d / l_d, -2.0 * g1 * u_e / l_e],
            -(4.0 * mixed / (l_d * l_e) + 2.0 * g1 * (i1[:, None] == i2[None, :]) / (l_d * l_e)),
        )

    return block
