r"""The array namespace a computation runs in, and the operations the array API standard lacks.

relaxep follows scikit-learn's convention for other array libraries: with
``sklearn.set_config(array_api_dispatch=True)`` (or inside ``sklearn.config_context(array_api_dispatch=True)``),
arrays of another library that implements the `array API standard <https://data-apis.org/array-api/>`_
(PyTorch, CuPy, JAX, ``array-api-strict``) are computed in that library, on their device; numpy
arrays, or any arrays with dispatch off, take the numpy and SciPy path, unchanged.  The namespace
comes from ``array-api-compat`` (an optional dependency: ``pip install relaxep[array-api]``).

The standard has no triangular solve, no :math:`\log\Phi` or :math:`\operatorname{erfcx}`, and its
Cholesky factorisation fails differently in each library (numpy raises, CuPy returns NaN).  Each is
one function here, per library: SciPy for numpy, ``torch.linalg`` and ``torch.special`` for PyTorch,
``cupyx.scipy`` for CuPy, ``jax.scipy`` for JAX; any other library's triangular solve is a general solve,
and the special functions a library lacks (all of them in ``array-api-strict``, ``erfcx`` in JAX) are
:mod:`relaxep._special_xp`'s, written in the standard's elementwise functions (Cody's rational
approximations, to rounding), on the arrays' own device: no round trip through the host.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import numpy as np
import scipy.special
from scipy import linalg

from relaxep import _special_xp

__all__ = [
    "HOST",
    "ArraySpace",
    "adaptive_or_fixed",
    "add_to_diagonal",
    "check_device_memory",
    "cholesky_flagged",
    "cholesky_lower",
    "device_free_memory",
    "erfcx",
    "expit",
    "inverse_mills",
    "is_numpy",
    "log_expit",
    "log_ndtr",
    "namespace",
    "normal_tail",
    "on_device_of",
    "read_scalars",
    "solve_lower",
    "to_numpy",
]


@dataclass(frozen=True)
class ArraySpace:
    """Where a computation runs: the array namespace ``xp``, whether it is numpy's on the host (``on_host``: the
    numpy and SciPy path, unchanged) and the arrays' ``device`` (``None`` on the host).

    Chosen once, by :func:`namespace`, when an object receives its arrays; the object holds it and passes it to
    the primitives that branch (scikit-learn's ``xp=``), instead of inspecting its arrays again.
    """

    xp: ModuleType
    on_host: bool
    device: Any = None

    def put(self, values: Any) -> Any:
        """``values`` (numpy, a list, or this library's arrays) as float64 arrays of this space, on its device;
        on the host, ``values`` themselves."""
        if self.on_host:
            return values
        return self.xp.asarray(values, dtype=self.xp.float64, device=self.device)

    def __reduce__(self) -> tuple:
        """Pickled by the namespace's module name (a module does not pickle): Dask ships priors and steps."""
        return (_space, (getattr(self.xp, "__name__", ""), self.on_host, self.device))


def _space(name: str, on_host: bool, device: Any) -> ArraySpace:
    return HOST if on_host else ArraySpace(importlib.import_module(name), False, device)


#: numpy on the host
HOST = ArraySpace(np, True)


def namespace(*arrays: Any) -> ArraySpace:
    """The :class:`ArraySpace` of ``arrays``.

    :data:`HOST` where scikit-learn's ``array_api_dispatch`` is off or every array is a numpy array or a
    Python scalar; otherwise the namespace of ``array_api_compat`` and the first array's device.
    ``TypeError`` for arrays of several libraries, or where ``array-api-compat`` is not installed.
    """
    arrays = tuple(a for a in arrays if a is not None and not isinstance(a, (np.generic, int, float)))
    if all(isinstance(a, np.ndarray) for a in arrays) or not _dispatch():
        return HOST
    try:
        import array_api_compat
    except ImportError as exc:  # pragma: no cover - the optional dependency
        raise TypeError("arrays other than numpy's need array-api-compat: pip install relaxep[array-api]") from exc
    arrays = tuple(a for a in arrays if array_api_compat.is_array_api_obj(a))  # (lists and tuples are numpy's)
    if all(isinstance(a, np.ndarray) for a in arrays):
        return HOST
    xp = array_api_compat.array_namespace(*arrays)
    if array_api_compat.is_numpy_namespace(xp):
        return HOST
    return ArraySpace(xp, False, getattr(arrays[0], "device", None))


def is_numpy(xp: ModuleType) -> bool:
    """Whether ``xp`` is numpy (or array-api-compat's wrapper of it)."""
    return xp is np or getattr(xp, "__name__", "") in ("numpy", "array_api_compat.numpy")  # (not jax.numpy)


_T = TypeVar("_T")


def adaptive_or_fixed(xp: ModuleType, adaptive: Callable[[], _T], fixed: Callable[[], _T]) -> _T:
    """A quadrature likelihood's tilted integral in ``xp``: numpy's ``adaptive`` rule (its sizes read from the data,
    free on the host), else the ``fixed``-size rule (every size known before the arrays are: nothing read back from
    a device).  The two are different algorithms by design, agreeing within their stated bounds; this is the one
    place a likelihood chooses between them."""
    return adaptive() if is_numpy(xp) else fixed()


def _dispatch() -> bool:
    import sklearn

    return bool(sklearn.get_config().get("array_api_dispatch", False))


def _library(xp: ModuleType) -> str:
    """``"numpy"``, ``"torch"``, ``"cupy"``, ``"jax"`` or ``"other"``."""
    if is_numpy(xp):
        return "numpy"
    name = getattr(xp, "__name__", "")
    for library in ("torch", "cupy", "jax"):
        if library in name.split("."):
            return library
    return "other"


# ------------------------------------------------------------------ host and device
def to_numpy(x: Any) -> np.ndarray:
    """``x`` as a numpy array on the host (from any library and device; a numpy array itself)."""
    if isinstance(x, np.ndarray):
        return x
    library = type(x).__module__.split(".")[0]
    if library == "torch":
        return x.detach().cpu().numpy()
    if library == "cupy":
        return x.get()
    if library in ("jax", "jaxlib") or not hasattr(x, "__dlpack__"):
        return np.asarray(x)  # (lists, and numpy-like objects)
    return np.from_dlpack(x)


def on_device_of(values: np.ndarray, like: Any, *, keep_dtype: bool = False) -> Any:
    """``values`` (numpy) as an array of ``like``'s library, dtype (or, ``keep_dtype``, their own) and
    device; ``values`` themselves where ``like`` is numpy's."""
    space = namespace(like)
    if space.on_host:
        return values
    dtype = None if keep_dtype else like.dtype
    return space.xp.asarray(values, dtype=dtype, device=getattr(like, "device", None))


# ------------------------------------------------------------------ memory
def device_free_memory(like: Any) -> float | None:
    """Free bytes on ``like``'s device (a CUDA GPU through PyTorch or CuPy); ``None`` elsewhere (the host's
    memory is :mod:`relaxep._memory`'s)."""
    library = type(like).__module__.split(".")[0]
    if library == "torch" and getattr(like, "is_cuda", False):
        import torch

        return float(torch.cuda.mem_get_info(like.device)[0])
    if library == "cupy":
        return float(like.device.mem_info[0])
    return None


def check_device_memory(like: Any, nbytes: float, what: str, remedy: str) -> None:
    """Refuse, before allocating, a computation of ``nbytes`` on ``like``'s device: a
    :class:`~relaxep.MemoryLimitError` with the bytes and the remedy, not an out-of-memory error from deep
    inside the library.  On the host, :func:`relaxep._memory.check_memory`."""
    from relaxep._memory import ENV_VAR, check_memory, format_bytes
    from relaxep.errors import MemoryLimitError

    free = device_free_memory(like)
    if free is None or os.environ.get(ENV_VAR) is not None:
        check_memory(nbytes, what, remedy)
        return
    if nbytes > free:
        raise MemoryLimitError(
            f"{what} needs about {format_bytes(nbytes)} on the device, more than its {format_bytes(free)} free: "
            f"{remedy}."
        )


# ------------------------------------------------------------------ linear algebra
def cholesky_lower(xp: ModuleType, a: Any) -> Any | None:
    r"""The lower Cholesky factor :math:`L L^\top = A` of a symmetric matrix, or ``None`` where :math:`A`
    is not positive definite (numpy's ``LinAlgError``, PyTorch's error, CuPy's NaN: one answer)."""
    if _library(xp) == "numpy":
        try:
            return linalg.cholesky(a, lower=True, check_finite=False)
        except linalg.LinAlgError:
            return None
    factor, ok = cholesky_flagged(xp, a)
    return factor if factor is not None and bool(ok) else None


def cholesky_flagged(xp: ModuleType, a: Any) -> tuple[Any | None, Any]:
    r""":math:`L` and whether it is a Cholesky factor, the flag a 0-d array of ``a``'s library, so that nothing
    waits for the device (PyTorch's ``info``, or a finite diagonal); ``(None, False)`` where the library raises
    instead (array-api-strict: numpy underneath)."""
    if _library(xp) == "torch":
        import torch

        factor, info = torch.linalg.cholesky_ex(a)
        return factor, info == 0
    try:
        factor = xp.linalg.cholesky(a)
    except Exception:
        return None, False
    return factor, xp.all(xp.isfinite(xp.linalg.diagonal(factor)))


def solve_lower(xp: ModuleType, lower: Any, b: Any, *, trans: bool = False) -> Any:
    r""":math:`L^{-1}B` (or :math:`L^{-\top}B` with ``trans``) for lower-triangular :math:`L`, ``B`` a matrix."""
    library = _library(xp)
    if library == "numpy":
        return linalg.solve_triangular(lower, b, lower=True, trans=1 if trans else 0, check_finite=False)
    if library == "torch":
        import torch

        return torch.linalg.solve_triangular(lower.mT if trans else lower, b, upper=trans)
    if library == "cupy":
        from cupyx.scipy.linalg import solve_triangular

        return solve_triangular(lower, b, lower=True, trans=1 if trans else 0)
    if library == "jax":
        from jax.scipy.linalg import solve_triangular

        return solve_triangular(lower, b, lower=True, trans=1 if trans else 0)
    return xp.linalg.solve(xp.linalg.matrix_transpose(lower) if trans else lower, b)


def add_to_diagonal(xp: ModuleType, a: Any, values: Any) -> Any:
    r""":math:`A + \operatorname{diag}(v)` (``values`` a scalar or a vector of ``a``'s library), in place where the
    library allows it (numpy, PyTorch, CuPy: no ``n x n`` temporary; ``a`` must be the caller's own work array),
    else as a new array."""
    library = _library(xp)
    n = a.shape[0]
    if library in ("numpy", "cupy"):
        a[xp.arange(n), xp.arange(n)] += values
        return a
    if library == "torch":
        a.diagonal().add_(values)
        return a
    eye = xp.eye(n, dtype=a.dtype, device=getattr(a, "device", None))
    return a + eye * (values[None, :] if getattr(values, "ndim", 0) else values)


# ------------------------------------------------------------------ special functions
def log_ndtr(xp: ModuleType, x: Any) -> Any:
    r""":math:`\log\Phi(x)`, accurate in both tails."""
    return _special(xp, x, "log_ndtr")


def erfcx(xp: ModuleType, x: Any) -> Any:
    r""":math:`\operatorname{erfcx}(x) = e^{x^2}\operatorname{erfc}(x)`."""
    return _special(xp, x, "erfcx")


def log_expit(xp: ModuleType, x: Any) -> Any:
    r""":math:`\log\sigma(x) = -\log(1 + e^{-x})`: SciPy's on numpy, PyTorch's ``logsigmoid``; elsewhere
    :math:`\min(x, 0) - \operatorname{log1p}(e^{-|x|})` (no overflow, no cancellation)."""
    library = _library(xp)
    if library == "numpy":
        return scipy.special.log_expit(x)
    if library == "torch":
        import torch

        return torch.nn.functional.logsigmoid(x)
    return xp.minimum(x, xp.zeros_like(x)) - xp.log1p(xp.exp(-xp.abs(x)))


def expit(xp: ModuleType, x: Any) -> Any:
    r""":math:`\sigma(x) = 1/(1 + e^{-x})`: SciPy's on numpy, PyTorch's ``sigmoid``; elsewhere from
    :math:`e^{-|x|}`, :math:`1/(1 + e^{-|x|})` or :math:`e^{-|x|}/(1 + e^{-|x|})` by the sign (no overflow, and
    :math:`\sigma(-x)` for large :math:`x` to full relative precision)."""
    library = _library(xp)
    if library == "numpy":
        return scipy.special.expit(x)
    if library == "torch":
        import torch

        return torch.special.expit(x)
    small = xp.exp(-xp.abs(x))
    big = 1.0 / (1.0 + small)
    return xp.where(x >= 0.0, big, small * big)


def normal_tail(xp: ModuleType, z: Any) -> tuple[Any, Any]:
    r""":math:`\log\Phi(z)` and the inverse Mills ratio :math:`N(z)/\Phi(z) = \sqrt{2/\pi}/\operatorname{erfcx}
    (-z/\sqrt2)` (:func:`relaxep._numerics.normal_cdf_ratio`), the pair every probit-type tilted moment needs.
    numpy: SciPy's functions, the host formulas exactly; PyTorch and CuPy: their own, on the device; another
    library: :mod:`relaxep._special_xp`'s where it has none, on the device too (no host round trip)."""
    return log_ndtr(xp, z), inverse_mills(xp, z)


def inverse_mills(xp: ModuleType, z: Any) -> Any:
    r"""The inverse Mills ratio :math:`N(z)/\Phi(z) = \sqrt{2/\pi}/\operatorname{erfcx}(-z/\sqrt2)` alone
    (numpy: :func:`relaxep._numerics.normal_cdf_ratio`'s digits)."""
    return _SQRT_2_OVER_PI / erfcx(xp, -z / _SQRT_2)


_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
_SQRT_2 = float(np.sqrt(2.0))


def _special(xp: ModuleType, x: Any, name: str) -> Any:
    library = _library(xp)
    if library == "numpy":
        return getattr(scipy.special, name)(x)
    if library == "torch":
        import torch

        return getattr(torch.special, name)(x)
    if library == "cupy":
        import cupyx.scipy.special

        return getattr(cupyx.scipy.special, name)(x)
    if library == "jax" and name == "log_ndtr":
        import jax.scipy.special

        return jax.scipy.special.log_ndtr(x)
    return getattr(_special_xp, name)(xp, x)  # (the standard's functions only: on the device, to rounding)


def read_scalars(space: ArraySpace, values: Sequence[Any]) -> list[float]:
    """``values`` (0-d arrays of ``space``, flags among them, or Python and numpy numbers) as Python floats, the
    device's arrays brought to the host in one transfer (one wait for the device)."""
    out: list[Any] = list(values)
    held = [i for i, v in enumerate(out) if not isinstance(v, (bool, int, float, np.generic, np.ndarray))]
    if held:
        xp = space.xp
        column = xp.stack([xp.astype(xp.reshape(out[i], ()), xp.float64) for i in held])
        for i, value in zip(held, to_numpy(column).tolist(), strict=True):
            out[i] = value
    return [float(v) for v in out]
