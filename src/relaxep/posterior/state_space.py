r"""Kernels of one input as linear stochastic differential equations: the state-space form of a stationary
Gaussian process (Hartikainen & Särkkä 2010; Solin & Särkkä 2014 for the periodic kernel).

A stationary kernel :math:`k(t - t')` of a scalar input with a rational spectral density is the covariance of
:math:`f(t) = H x(t)`, where the state :math:`x \in \mathbb{R}^m` follows :math:`\dot x = F x + L w` with
white noise :math:`w`.  Between two inputs :math:`\Delta t` apart the state moves by the exact discretisation

.. math::
    x_{k+1} = A_k x_k + q_k,\qquad A_k = e^{F \Delta t_k},\qquad q_k \sim N(0, Q_k),\qquad
    Q_k = P_\infty - A_k P_\infty A_k^\top,

with :math:`P_\infty` the stationary covariance, so that :math:`k(\Delta t) = H A(\Delta t) P_\infty H^\top`.

Forms written here (each exact but the periodic one):

* Matérn :math:`\nu = 1/2, 3/2, 5/2` (``Matern(nu=...)``): :math:`m = \nu + 1/2`, :math:`F` the companion
  matrix of :math:`(s + \lambda)^m`, :math:`\lambda = \sqrt{2\nu}/\ell`; :math:`F + \lambda I` is nilpotent, so
  :math:`A(\Delta t) = e^{-\lambda\Delta t}\sum_{j<m} (F + \lambda I)^j \Delta t^j / j!` in closed form.
* A constant (``ConstantKernel``): one state that never moves (:math:`A = 1`, :math:`Q = 0`).
* The periodic kernel (``ExpSineSquared``) to ``J`` harmonics: :math:`\exp(-2\sin^2(\pi\tau/p)/\ell^2) =
  \sum_{j\ge0} q_j^2\cos(j\omega_0\tau)`, :math:`\omega_0 = 2\pi/p`, :math:`q_0^2 = I_0(\ell^{-2})e^{-\ell^{-2}}`,
  :math:`q_j^2 = 2 I_j(\ell^{-2})e^{-\ell^{-2}}`; each harmonic an undamped oscillator of two states
  (Solin & Särkkä 2014).  The truncation leaves out :math:`1 - \sum_{j\le J} q_j^2` of the variance
  (:func:`periodic_truncation`).
* Sums: the states side by side (block-diagonal :math:`F`, :math:`P_\infty`; :math:`H` concatenated).
* Products: the Kronecker product of the two forms (:math:`A = A_1\otimes A_2`, :math:`P_\infty =
  P_{\infty,1}\otimes P_{\infty,2}`, :math:`H = H_1 \otimes H_2`): a constant times a kernel scales it; a
  periodic kernel times a Matérn is the quasi-periodic kernel.
* A ``WhiteKernel`` in the top-level sum is noise on each :math:`f_i` apart from the process
  (:attr:`StateSpace.noise`).

Every matrix is a function of the kernel's log-hyperparameters ``theta`` (scikit-learn's ``kernel.theta``),
written so that a complex ``theta`` flows through (the evidence's gradient is taken by the complex step).
Matrices over many steps are held "structure of arrays": shape ``(m, m, k)``, the steps last.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import factorial

import numpy as np
from scipy.special import ive
from sklearn.gaussian_process.kernels import (
    ConstantKernel,
    ExpSineSquared,
    Kernel,
    Matern,
    Product,
    Sum,
    WhiteKernel,
)

from relaxep._typing import Array
from relaxep.posterior._kernel_theta import hyperparameter_values

__all__ = [
    "MAX_HARMONICS",
    "PERIODIC_TOL",
    "StateSpace",
    "is_markov",
    "periodic_truncation",
    "state_space",
]

#: the periodic kernel's harmonics: the fewest whose left-out variance :func:`periodic_truncation` is below this
#: fraction (at the kernel's hyperparameters when the form is made), at most :data:`MAX_HARMONICS`
PERIODIC_TOL = 1e-4
#: the cap on the harmonics (each adds two states, times the other factor's in a product)
MAX_HARMONICS = 16

_MATERN_NU = (0.5, 1.5, 2.5)


@dataclass(frozen=True)
class _Form:
    """One kernel's state-space form, as functions of ``theta`` (real or complex)."""

    m: int
    h: Array  # (m,) the measurement row H
    pinf: Callable[[Array], Array]  # theta -> (m, m)
    transition: Callable[[Array, Array], Array]  # (theta, dt (k,)) -> (m, m, k)


@dataclass(frozen=True)
class StateSpace:
    """A kernel's state-space form (:func:`state_space`).

    Attributes
    ----------
    m : int
        The state's dimension.
    h : ndarray of shape (m,)
        :math:`H`: :math:`f = H x`.
    harmonics : int or None
        The periodic factor's harmonics (``None``: none).
    """

    m: int
    h: Array
    _pinf: Callable[[Array], Array]
    _transition: Callable[[Array, Array], Array]
    _noise: Callable[[Array], Array]
    harmonics: int | None = None

    def stationary_cov(self, theta: Array) -> Array:
        r""":math:`P_\infty` at ``theta``, shape ``(m, m)``."""
        return self._pinf(theta)

    def transition(self, theta: Array, dt: Array) -> Array:
        r""":math:`A_k = e^{F\Delta t_k}` for each step, shape ``(m, m, k)``."""
        return self._transition(theta, np.asarray(dt, dtype=float))

    def noise(self, theta: Array) -> Array:
        """The white noise's variance (0 where the kernel has no ``WhiteKernel``)."""
        return self._noise(theta)

    def steps(self, theta: Array, dt: Array) -> tuple[Array, Array]:
        r""":math:`A_k` and :math:`Q_k = P_\infty - A_k P_\infty A_k^\top` for the steps ``dt``, each
        ``(m, m, k)``."""
        a = self.transition(theta, dt)
        pinf = self.stationary_cov(theta)
        apa = np.einsum("ilk,mlk->imk", np.einsum("ijk,jl->ilk", a, pinf), a)  # (two products: O(m^3) a step)
        q = pinf[:, :, None] - apa
        return a, 0.5 * (q + q.transpose(1, 0, 2))

    def covariance(self, theta: Array, dt: Array) -> Array:
        r""":math:`k(\Delta t) = H A(\Delta t) P_\infty H^\top` at lags ``dt >= 0`` (the noise left out)."""
        a = self.transition(theta, np.abs(np.asarray(dt, dtype=float)))
        return np.einsum("i,ijk,jl,l->k", self.h, a, self.stationary_cov(theta), self.h)


def is_markov(kernel: Kernel) -> bool:
    """Whether :func:`state_space` has a form for ``kernel`` (without building it)."""
    try:
        _parse(kernel, 0, np.asarray(kernel.theta), top=True)
    except (TypeError, ValueError):
        return False
    return True


def periodic_truncation(length_scale: float, harmonics: int) -> float:
    r"""The variance the periodic kernel's first ``harmonics`` harmonics leave out: :math:`1 - \sum_{j \le J}
    q_j^2` (the largest error of the truncated covariance, at lags that are whole periods)."""
    x = 1.0 / float(length_scale) ** 2
    kept = ive(0, x) + 2.0 * sum(ive(j, x) for j in range(1, harmonics + 1))
    return float(max(1.0 - kept, 0.0))


def state_space(kernel: Kernel, harmonics: int | None = None) -> StateSpace:
    """The state-space form of a scikit-learn ``kernel`` of one input (module docstring).

    ``harmonics``: the periodic kernel's (``None``: the fewest that leave out less than :data:`PERIODIC_TOL` of
    its variance, at most :data:`MAX_HARMONICS`).

    Raises
    ------
    TypeError
        For a kernel with no finite state-space form here (the RBF, say: use ``Matern(nu=2.5)``, or the dense
        representation).
    ValueError
        For a Matérn with an ``nu`` other than 0.5, 1.5, 2.5, or a length scale of more than one input.
    """
    if harmonics is not None and (isinstance(harmonics, bool) or int(harmonics) != harmonics or harmonics < 1):
        raise ValueError(f"harmonics must be None or an integer >= 1, got {harmonics!r}")
    theta = np.asarray(kernel.theta, dtype=float)
    form, noise, used, periodic = _parse(kernel, 0, theta, top=True, harmonics=harmonics)
    if used != theta.size:  # (a kernel whose theta the walk did not account for)
        raise TypeError(f"kernel {kernel!r}: its hyperparameters do not match its state-space form")
    return StateSpace(form.m, form.h, form.pinf, form.transition, noise, periodic)


def _values(kernel: Kernel, offset: int) -> tuple[dict[str, Callable[[Array], Array]], int]:
    """:func:`~relaxep.posterior._kernel_theta.hyperparameter_values` of a leaf ``kernel``, each a scalar (one
    input)."""
    for hp in kernel.hyperparameters:
        if hp.n_elements != 1:
            raise ValueError(f"{type(kernel).__name__}.{hp.name}: one input only (a scalar), got {hp.n_elements}")
    values, used = hyperparameter_values(kernel, offset)
    return {name: (lambda theta, f=f: f(theta)[0]) for name, f in values.items()}, used


def _parse(
    kernel: Kernel, offset: int, theta: Array, top: bool = False, harmonics: int | None = None
) -> tuple[_Form, Callable[[Array], Array], int, int | None]:
    """``(form, noise(theta), entries of theta used, harmonics)`` of ``kernel`` whose entries start at ``offset``."""
    zero = lambda theta: 0.0  # noqa: E731
    if isinstance(kernel, Sum):
        used, forms, noises, periodic = 0, [], [], None
        for k in (kernel.k1, kernel.k2):
            if isinstance(k, WhiteKernel):
                if not top:
                    raise TypeError("WhiteKernel: only in the kernel's top-level sum (noise on each point)")
                vals, u = _values(k, offset + used)
                noises.append(vals["noise_level"])
            else:
                f, nz, u, p = _parse(k, offset + used, theta, top=top, harmonics=harmonics)
                forms.append(f)
                noises.append(nz)
                periodic = periodic or p
            used += u
        if not forms:
            raise TypeError("a sum of two WhiteKernels has no process: add a Matern kernel")
        form = forms[0] if len(forms) == 1 else _sum(*forms)
        return form, (lambda th: sum(n(th) for n in noises)), used, periodic
    if isinstance(kernel, Product):
        f1, _, u1, p1 = _parse(kernel.k1, offset, theta, harmonics=harmonics)
        f2, _, u2, p2 = _parse(kernel.k2, offset + u1, theta, harmonics=harmonics)
        if p1 and p2:
            raise TypeError("a product of two periodic kernels: not supported; use one ExpSineSquared")
        return _product(f1, f2), zero, u1 + u2, p1 or p2
    if isinstance(kernel, WhiteKernel):
        raise TypeError("WhiteKernel alone has no process: add a Matern kernel, e.g. Matern(nu=1.5) + WhiteKernel()")
    vals, used = _values(kernel, offset)
    if isinstance(kernel, ConstantKernel):
        return _constant(vals["constant_value"]), zero, used, None
    if isinstance(kernel, Matern):
        if float(kernel.nu) not in _MATERN_NU:
            raise ValueError(f"Matern(nu={kernel.nu}): the state-space forms are for nu in {_MATERN_NU}")
        return _matern(float(kernel.nu), vals["length_scale"]), zero, used, None
    if isinstance(kernel, ExpSineSquared):
        ell, period = vals["length_scale"], vals["periodicity"]
        if harmonics is None:
            value = float(np.real(ell(theta)))
            harmonics = next(
                (j for j in range(1, MAX_HARMONICS + 1) if periodic_truncation(value, j) < PERIODIC_TOL),
                MAX_HARMONICS,
            )
        return _periodic(ell, period, int(harmonics)), zero, used, int(harmonics)
    raise TypeError(
        f"{type(kernel).__name__} has no finite state-space form: representation='markov' takes Matern "
        "(nu = 0.5, 1.5, 2.5), ConstantKernel, ExpSineSquared (to a number of harmonics), their sums and products, "
        "and a WhiteKernel in the top-level sum; for an RBF use Matern(nu=2.5) or representation='dense'"
    )


def _constant(value: Callable[[Array], Array]) -> _Form:
    """One state that never moves: :math:`k = c`."""

    def pinf(theta: Array) -> Array:
        return np.reshape(value(theta), (1, 1)) * np.ones((1, 1))

    def transition(theta: Array, dt: Array) -> Array:
        return np.ones((1, 1, dt.shape[0]))

    return _Form(1, np.ones(1), pinf, transition)


def _matern(nu: float, length_scale: Callable[[Array], Array]) -> _Form:
    r"""Matérn-:math:`\nu` of unit variance: :math:`F` the companion of :math:`(s + \lambda)^m`."""
    m = int(nu + 0.5)
    binomial = [[1.0], [1.0, 2.0], [1.0, 3.0, 3.0]][m - 1]  # (s + lam)^m = s^m + sum_j c_j lam^(m-j) s^j

    def rate(theta: Array) -> Array:
        return np.sqrt(2.0 * nu) / length_scale(theta)

    def nilpotent(lam: Array) -> Array:
        f = np.zeros((m, m), dtype=np.result_type(lam, float))
        f[np.arange(m - 1), np.arange(1, m)] = 1.0
        f[m - 1, :] = [-binomial[j] * lam ** (m - j) for j in range(m)]
        return f + lam * np.eye(m)

    def pinf(theta: Array) -> Array:
        lam = rate(theta)
        if m == 1:
            return np.ones((1, 1)) + 0.0 * lam
        if m == 2:
            return np.array([[1.0 + 0.0 * lam, 0.0 * lam], [0.0 * lam, lam**2]])
        kappa = lam**2 / 3.0
        z = 0.0 * lam
        return np.array([[1.0 + z, z, -kappa], [z, kappa, z], [-kappa, z, lam**4]])

    def transition(theta: Array, dt: Array) -> Array:
        lam = rate(theta)
        n = nilpotent(lam)
        out = np.zeros((m, m, dt.shape[0]), dtype=np.result_type(lam, float))
        power = np.eye(m, dtype=out.dtype)
        for j in range(m):
            out += power[:, :, None] * (dt**j / factorial(j))
            power = power @ n
        return out * np.exp(-lam * dt)

    h = np.zeros(m)
    h[0] = 1.0
    return _Form(m, h, pinf, transition)


def _periodic(length_scale: Callable[[Array], Array], period: Callable[[Array], Array], harmonics: int) -> _Form:
    """The periodic kernel to ``harmonics`` harmonics: a constant state and an oscillator per harmonic."""
    m = 2 * harmonics + 1
    h = np.zeros(m)
    h[0] = 1.0
    h[1::2] = 1.0

    def pinf(theta: Array) -> Array:
        x = length_scale(theta) ** -2
        q2 = [ive(0, x)] + [2.0 * ive(j, x) for j in range(1, harmonics + 1)]
        diag = [q2[0]] + [q for q in q2[1:] for _ in range(2)]
        out = np.zeros((m, m), dtype=np.result_type(*diag, float))
        out[np.arange(m), np.arange(m)] = diag
        return out

    def transition(theta: Array, dt: Array) -> Array:
        omega = 2.0 * np.pi / period(theta)
        out = np.zeros((m, m, dt.shape[0]), dtype=np.result_type(omega, float))
        out[0, 0] = 1.0
        for j in range(1, harmonics + 1):
            c, s = np.cos(j * omega * dt), np.sin(j * omega * dt)
            i = 2 * j - 1
            out[i, i], out[i, i + 1], out[i + 1, i], out[i + 1, i + 1] = c, -s, s, c
        return out

    return _Form(m, h, pinf, transition)


def _sum(a: _Form, b: _Form) -> _Form:
    """The states side by side."""
    m = a.m + b.m

    def pinf(theta: Array) -> Array:
        pa, pb = a.pinf(theta), b.pinf(theta)
        out = np.zeros((m, m), dtype=np.result_type(pa, pb))
        out[: a.m, : a.m], out[a.m :, a.m :] = pa, pb
        return out

    def transition(theta: Array, dt: Array) -> Array:
        ta, tb = a.transition(theta, dt), b.transition(theta, dt)
        out = np.zeros((m, m, dt.shape[0]), dtype=np.result_type(ta, tb))
        out[: a.m, : a.m], out[a.m :, a.m :] = ta, tb
        return out

    return _Form(m, np.concatenate([a.h, b.h]), pinf, transition)


def _product(a: _Form, b: _Form) -> _Form:
    """The Kronecker product of the two forms (a product of two stationary processes' covariances)."""
    m = a.m * b.m

    def pinf(theta: Array) -> Array:
        return np.kron(a.pinf(theta), b.pinf(theta))

    def transition(theta: Array, dt: Array) -> Array:
        ta, tb = a.transition(theta, dt), b.transition(theta, dt)
        return np.einsum("ijk,abk->iajbk", ta, tb).reshape(m, m, dt.shape[0])

    return _Form(m, np.kron(a.h, b.h), pinf, transition)
