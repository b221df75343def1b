r"""The three BLAS-3 calls of the row-block passes, made without holding Python's GIL.

scipy's ``scipy.linalg.blas`` wrappers hold the GIL for the whole BLAS call, so two threads running
``dsyrk`` on two row blocks take as long as one thread running both (measured: 0.090 s against 0.085 s
for 4 x 20 calls at ``1024 x 200``).  The same routines are exported as C function pointers by scipy's
public Cython API (``scipy.linalg.cython_blas``); called through :mod:`ctypes`, which releases the GIL
for a foreign call, the two threads take 0.054 s.  Where that API cannot be read (a scipy without it),
the ``scipy.linalg.blas`` wrappers are used: the same answer, one block at a time.

Each function takes C-ordered ``n x M`` rows :math:`Y` (a row block of :math:`V^\top`) and a lower
triangular ``M x M`` matrix; the rows are never written.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np
from scipy.linalg.blas import dsyrk, dtrmm, dtrsm

from relaxep._typing import Array

__all__ = ["rows_solve_lower_t", "rows_times_lower_t", "syrk_rows"]

_P = ctypes.POINTER
_CHAR, _INT, _DOUBLE = ctypes.c_char, ctypes.c_int, ctypes.c_double
_SIGNATURES = {
    # uplo, trans, n, k, alpha, a, lda, beta, c, ldc
    "dsyrk": (_P(_CHAR), _P(_CHAR), _P(_INT), _P(_INT), _P(_DOUBLE), _P(_DOUBLE), _P(_INT), _P(_DOUBLE),
              _P(_DOUBLE), _P(_INT)),
    # side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb (dtrmm and dtrsm alike)
    "dtrmm": (_P(_CHAR), _P(_CHAR), _P(_CHAR), _P(_CHAR), _P(_INT), _P(_INT), _P(_DOUBLE), _P(_DOUBLE),
              _P(_INT), _P(_DOUBLE), _P(_INT)),
}  # fmt: skip
_SIGNATURES["dtrsm"] = _SIGNATURES["dtrmm"]


def _load() -> dict[str, Callable] | None:
    """The C routines of ``scipy.linalg.cython_blas`` as :mod:`ctypes` functions (``None`` if unreadable)."""
    try:
        from scipy.linalg import cython_blas

        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        out = {}
        for name, args in _SIGNATURES.items():
            capsule = cython_blas.__pyx_capi__[name]
            out[name] = ctypes.CFUNCTYPE(None, *args)(get_pointer(capsule, get_name(capsule)))
        return out
    except (ImportError, AttributeError, KeyError, ValueError, TypeError):  # pragma: no cover - old scipy
        return None


_C = _load()


def _ref(value: object) -> object:
    return ctypes.byref(value)  # type: ignore[arg-type]


def _ptr(a: Array) -> object:
    return a.ctypes.data_as(_P(_DOUBLE))


def syrk_rows(gram: Array, rows: Array, alpha: float) -> Array:
    r"""``gram`` :math:`+\ \alpha Y^\top Y` in its lower triangle, in place (``gram``: Fortran-ordered ``M x M``)."""
    n, m = rows.shape
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    if gram.shape != (m, m):
        raise ValueError(f"gram must be {m} x {m} for rows of {m} columns, got shape {gram.shape}")
    usable = gram.dtype == np.float64 and gram.flags.f_contiguous and gram.flags.writeable
    if _C is None or not usable:  # scipy's wrapper copies or refuses what BLAS cannot write in place
        return dsyrk(alpha, rows.T, beta=1.0, c=gram, trans=0, lower=1, overwrite_c=1)
    if n:
        ld = _INT(max(m, 1))
        _C["dsyrk"](_ref(_CHAR(b"L")), _ref(_CHAR(b"N")), _ref(_INT(m)), _ref(_INT(n)), _ref(_DOUBLE(alpha)),
                    _ptr(rows), _ref(ld), _ref(_DOUBLE(1.0)), _ptr(gram), _ref(ld))  # fmt: skip
    return gram


def _triangular(name: str, lower: Array, rows: Array, trans: bytes = b"N") -> Array:
    """``dtrmm``/``dtrsm`` from the left (``op(L) = L`` or, ``trans="T"``, :math:`L^\top`) on the Fortran
    ``M x n`` view of a copy of the C-ordered rows (scipy's wrapper where the C routines cannot be read)."""
    n, m = rows.shape
    if lower.shape != (m, m):
        raise ValueError(f"the triangular factor must be {m} x {m} for rows of {m} columns, got shape {lower.shape}")
    if _C is None:  # pragma: no cover - old scipy
        routine = {"dtrmm": dtrmm, "dtrsm": dtrsm}[name]
        return routine(1.0, lower, np.ascontiguousarray(rows).T, side=0, lower=1, trans_a=int(trans == b"T"), diag=0).T
    out = np.array(rows, dtype=np.float64, order="C")  # a copy: the caller's rows are not written
    lower = np.asfortranarray(lower, dtype=np.float64)
    if n:
        ld = _INT(max(m, 1))
        _C[name](_ref(_CHAR(b"L")), _ref(_CHAR(b"L")), _ref(_CHAR(trans)), _ref(_CHAR(b"N")), _ref(_INT(m)),
                 _ref(_INT(n)), _ref(_DOUBLE(1.0)), _ptr(lower), _ref(ld), _ptr(out), _ref(ld))  # fmt: skip
    return out


def rows_times_lower_t(lower: Array, rows: Array) -> Array:
    r""":math:`Y L^\top` (``dtrmm``)."""
    return _triangular("dtrmm", lower, rows)


def rows_solve_lower_t(lower: Array, rows: Array) -> Array:
    r""":math:`Y L^{-\top}`, that is :math:`(L^{-1}Y^\top)^\top` (``dtrsm``)."""
    return _triangular("dtrsm", lower, rows)


def rows_solve_lower(lower: Array, rows: Array) -> Array:
    r""":math:`Y L^{-1}`, that is :math:`(L^{-\top}Y^\top)^\top` (``dtrsm`` with the factor transposed)."""
    return _triangular("dtrsm", lower, rows, b"T")
