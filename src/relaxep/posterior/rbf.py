r"""The closed form of ``RBF`` and ``ConstantKernel * RBF``, :math:`k(x, z) = c\,\exp(-\tfrac12\sum_j (x_j -
z_j)^2/\ell_j^2)`, read from a scikit-learn kernel (:class:`ScaledRBF`) and evaluated in any array library
(:func:`rbf`).

What computes with it: the sparse evidence gradient (:mod:`relaxep.posterior.sparse_gradient`) and the
stochastic search, which need the kernel's derivatives in closed form, and every path on another array
library (:mod:`relaxep._xp`), dense or sparse, where a scikit-learn kernel cannot be evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel, Product

from relaxep._typing import Array
from relaxep._xp import ArraySpace, on_device_of

__all__ = ["ScaledRBF", "as_scaled_rbf", "rbf"]


@dataclass(frozen=True)
class ScaledRBF:
    r""":math:`k(x, z) = c\,\exp(-\tfrac12\sum_j (x_j - z_j)^2/\ell_j^2)`, read from a scikit-learn kernel.

    ``entries`` lists, in the order of the kernel's ``theta``, what each free log-parameter
    is: ``"constant"`` or ``"length_scale"`` (one entry per length scale).
    """

    constant: float
    length_scale: Array  # (d,) after broadcasting
    isotropic: bool
    entries: tuple[str, ...]


def as_scaled_rbf(kernel: Kernel, n_features: int) -> ScaledRBF:
    """The closed-form view of ``RBF``, ``ConstantKernel * RBF`` or ``RBF * ConstantKernel``.

    Raises
    ------
    TypeError
        For any other kernel (the gradient in the inducing inputs is written for these).
    """
    parts = [kernel.k1, kernel.k2] if isinstance(kernel, Product) else [kernel]
    rbfs = [k for k in parts if type(k) is RBF]  # (Matern is a subclass of RBF)
    consts = [k for k in parts if type(k) is ConstantKernel]
    if len(rbfs) != 1 or len(rbfs) + len(consts) != len(parts):
        raise TypeError(
            "kernel: learning a sparse GP's kernel and inducing inputs needs RBF or ConstantKernel * RBF "
            f"(closed-form gradients), got {kernel!r}; pass optimizer=None to keep another kernel fixed"
        )
    rbf = rbfs[0]
    constant = float(consts[0].constant_value) if consts else 1.0
    ls = np.atleast_1d(np.asarray(rbf.length_scale, dtype=float))
    isotropic = ls.size == 1
    if not isotropic and ls.size != n_features:
        raise ValueError(f"kernel: the RBF has {ls.size} length scales for {n_features} features")
    entries: list[str] = []
    for part in parts:
        for hp in part.hyperparameters:
            if hp.fixed:
                continue
            if hp.name == "constant_value":
                entries.append("constant")
            elif hp.name == "length_scale":
                entries += ["length_scale"] * (1 if isotropic else ls.size)
            else:  # pragma: no cover - RBF and ConstantKernel have no other hyperparameters
                raise TypeError(f"kernel: unexpected hyperparameter {hp.name}")
    return ScaledRBF(constant, np.broadcast_to(ls, (n_features,)).copy(), isotropic, tuple(entries))


def rbf(kern: ScaledRBF, A: Array, B: Array, space: ArraySpace) -> Array:
    r""":math:`k(A, B)` in ``space``, the arrays' (:mod:`relaxep._xp`): squared distances by one product."""
    xp = space.xp
    if space.on_host:
        As, Bs = A / kern.length_scale, B / kern.length_scale
        d2 = (As * As).sum(1)[:, None] + (Bs * Bs).sum(1)[None, :] - 2.0 * (As @ Bs.T)
        return kern.constant * np.exp(-0.5 * np.maximum(d2, 0.0))
    ls = on_device_of(kern.length_scale, A)
    As, Bs = A / ls, B / ls
    d2 = xp.sum(As * As, axis=1)[:, None] + xp.sum(Bs * Bs, axis=1)[None, :] - 2.0 * (As @ Bs.T)
    return kern.constant * xp.exp(-0.5 * xp.maximum(d2, xp.zeros_like(d2)))
