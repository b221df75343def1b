r"""scikit-learn's kernels evaluated in torch: the covariances a fitted model needs at new points, differentiable
in the points.

Every kernel that :class:`~relaxep.GPClassifier` takes from scikit-learn, with its fitted hyperparameters (read
from the kernel, never learned here):

.. math::
    \text{RBF: } \exp(-\tfrac12 r^2),\quad
    \text{Matern}_{1/2}: e^{-r},\quad
    \text{Matern}_{3/2}: (1 + \sqrt3 r)e^{-\sqrt3 r},\quad
    \text{Matern}_{5/2}: (1 + \sqrt5 r + \tfrac53 r^2)e^{-\sqrt5 r},\quad
    \text{Matern}_\infty = \text{RBF},

:math:`r = \lVert (x - x')/\ell \rVert` (``length_scale`` :math:`\ell` a scalar or one per feature: ARD),
rational quadratic :math:`(1 + \lVert x - x'\rVert^2 / (2\alpha\ell^2))^{-\alpha}`, ``ConstantKernel`` :math:`c`,
``WhiteKernel`` :math:`\sigma^2\delta` (on :math:`k(X)` of one set only, as scikit-learn: zero between two sets,
even equal ones), and their sums and products.  Any other kernel (``DotProduct``, ``ExpSineSquared``,
``Exponentiation``, a Matern of another ``nu``, a subclass) is refused with a ``TypeError`` naming it, before
any work: :func:`check_kernel`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
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
from torch import Tensor

__all__ = ["SUPPORTED", "check_kernel", "kernel_matrix"]

#: what is evaluated in torch (by exact class: a subclass may compute something else)
SUPPORTED = (
    "ConstantKernel, RBF (isotropic or ARD), Matern (nu 0.5, 1.5, 2.5 or inf), RationalQuadratic, WhiteKernel, "
    "and sums and products of them"
)
_MATERN_NU = (0.5, 1.5, 2.5, math.inf)


def check_kernel(kernel: Kernel) -> None:
    """Refuse, with a ``TypeError`` naming it, a kernel (or a part of one) that :func:`kernel_matrix` does not
    evaluate in torch."""
    kind = type(kernel)
    if kind in (Sum, Product):
        check_kernel(kernel.k1)
        check_kernel(kernel.k2)
        return
    if kind is Matern and float(kernel.nu) not in _MATERN_NU:
        raise TypeError(
            f"{kernel!r}: a Matern kernel with nu={kernel.nu} is not evaluated in torch (nu 0.5, 1.5, 2.5 or inf "
            "are); refit with one of those"
        )
    if kind not in (ConstantKernel, RBF, Matern, RationalQuadratic, WhiteKernel):
        raise TypeError(
            f"{kind.__name__} ({kernel!r}) is not evaluated in torch for BoTorch; the kernels that are: {SUPPORTED}"
        )


def _scaled_sq_dist(x1: Tensor, x2: Tensor, length_scale: object) -> Tensor:
    r""":math:`\lVert (x - x')/\ell\rVert^2` for every pair, shape ``(..., n1, n2)``: differences, not the
    expanded square (exact where points coincide)."""
    scale = torch.as_tensor(np.asarray(length_scale, dtype=float), dtype=x1.dtype, device=x1.device)
    diff = x1.unsqueeze(-2) / scale - x2.unsqueeze(-3) / scale
    return (diff * diff).sum(-1)


def _distance(sq_dist: Tensor) -> Tensor:
    """:math:`r = \\sqrt{r^2}` with a zero (not NaN) gradient where :math:`r = 0`."""
    positive = sq_dist > 0.0
    return torch.where(positive, torch.sqrt(torch.where(positive, sq_dist, torch.ones_like(sq_dist))), 0.0)


def _batch_shape(x1: Tensor, x2: Tensor) -> torch.Size:
    return torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])


def kernel_matrix(kernel: Kernel, x1: Tensor, x2: Tensor | None = None) -> Tensor:
    r"""``kernel(x1, x2)`` in torch, shape ``(..., n1, n2)`` (batch dimensions broadcast); ``x2 = None``:
    ``kernel(x1)``, the one place a ``WhiteKernel`` adds its noise (on the diagonal).

    Parameters
    ----------
    kernel : sklearn Kernel
        One that :func:`check_kernel` accepts (its fitted hyperparameters).
    x1, x2 : Tensor of shape (..., n, d)
    """
    same = x2 is None
    x2 = x1 if x2 is None else x2
    kind = type(kernel)
    if kind is Sum:
        return kernel_matrix(kernel.k1, x1, None if same else x2) + kernel_matrix(kernel.k2, x1, None if same else x2)
    if kind is Product:
        return kernel_matrix(kernel.k1, x1, None if same else x2) * kernel_matrix(kernel.k2, x1, None if same else x2)
    shape = (*_batch_shape(x1, x2), x1.shape[-2], x2.shape[-2])
    if kind is ConstantKernel:
        return torch.full(shape, float(kernel.constant_value), dtype=x1.dtype, device=x1.device)
    if kind is WhiteKernel:
        zeros = torch.zeros(shape, dtype=x1.dtype, device=x1.device)
        if not same:
            return zeros
        return zeros + float(kernel.noise_level) * torch.eye(x1.shape[-2], dtype=x1.dtype, device=x1.device)
    if kind is RBF:
        return torch.exp(-0.5 * _scaled_sq_dist(x1, x2, kernel.length_scale))
    if kind is Matern:
        return _matern(float(kernel.nu), _scaled_sq_dist(x1, x2, kernel.length_scale))
    if kind is RationalQuadratic:
        sq = _scaled_sq_dist(x1, x2, 1.0)
        base = 1.0 + sq / (2.0 * float(kernel.alpha) * float(kernel.length_scale) ** 2)
        return base ** (-float(kernel.alpha))
    check_kernel(kernel)  # (raises, naming it)
    raise AssertionError(f"unreachable: {kernel!r}")  # pragma: no cover


def _matern(nu: float, sq_dist: Tensor) -> Tensor:
    """The Matern kernel of half-integer (or infinite) ``nu`` at scaled squared distances (scikit-learn's forms)."""
    if math.isinf(nu):
        return torch.exp(-0.5 * sq_dist)
    r = _distance(sq_dist)
    if nu == 0.5:
        return torch.exp(-r)
    if nu == 1.5:
        t = math.sqrt(3.0) * r
        return (1.0 + t) * torch.exp(-t)
    if nu == 2.5:
        t = math.sqrt(5.0) * r
        return (1.0 + t + t * t / 3.0) * torch.exp(-t)
    raise TypeError(f"Matern nu={nu} is not evaluated in torch (nu 0.5, 1.5, 2.5 or inf are)")
