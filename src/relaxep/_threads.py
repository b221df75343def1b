"""How many BLAS threads the small-matrix loops run with: one, restored on exit.

A loop of small products and solves (the stochastic search's ``M x M`` step, ``M`` of a few hundred)
gains nothing from a BLAS thread pool and pays its start and synchronisation at every call: measured on
2 cores, a stochastic fit at 10^5 rows (``M = 100``, 500 steps, then 3 EP sweeps) took 31 s with
OpenBLAS's default threads against 13 s with one; with its steps under this limit, 15 s
(``python benchmarks/threads.py``: benchmarks/results/threads.md).  :func:`small_matrix_threads` limits
BLAS to one thread for the duration of such a loop (``threadpoolctl``) and gives the caller's setting
back on exit, whatever it was.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from threadpoolctl import threadpool_limits

__all__ = ["small_matrix_threads"]


def small_matrix_threads() -> AbstractContextManager:
    """A context in which BLAS uses one thread (the caller's limits are restored on exit)."""
    return threadpool_limits(limits=1, user_api="blas")
