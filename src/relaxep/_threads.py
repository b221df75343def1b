"""How the library uses the machine's cores: row blocks on a thread pool, each with one BLAS thread.

Two kinds of work, two rules (measured in ``benchmarks/results/threads.md``):

* **A whole fit** runs under :func:`fit_threads`: one BLAS thread, except for the factorisations of a
  large dense posterior (:data:`DENSE_BLAS_FROM`).
* **Small matrices in a loop** (the stochastic search's ``M x M`` step, ``M`` of a few hundred) gain
  nothing from a BLAS thread pool and pay its start and synchronisation at every call: on 2 cores a
  stochastic fit at 10^5 rows took 31 s with OpenBLAS's default threads against 13 s with one.  Such
  loops run under :func:`small_matrix_threads`: one BLAS thread, the caller's setting given back on exit.
* **Independent row blocks** (the sparse posterior's :math:`O(nM^2)` passes, the minibatch's rows)
  run on :func:`each_block` / :func:`fold_blocks`: a pool of ``n_jobs`` threads
  (numpy and scipy release the GIL in BLAS and in their element-wise loops), every block with one BLAS
  thread.  The blocks are fixed by the data, never by the thread count, and their partial sums are added
  in block order, so 1, 2 or 16 threads give the same bits.

``n_jobs`` follows scikit-learn's convention (a positive count, ``-1`` every core, ``-k`` all but
``k - 1``) with one difference, documented where it is a parameter: ``None`` uses the machine
(``OMP_NUM_THREADS`` where it is set, as scikit-learn's OpenMP estimators read it, else the cores this
process may run on), since threads share the data and cost no copies.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import lru_cache
from itertools import islice
from numbers import Integral
from typing import Any, TypeVar

import joblib
from threadpoolctl import ThreadpoolController

__all__ = ["DENSE_BLAS_FROM", "each_block", "fit_threads", "fold_blocks", "n_threads", "small_matrix_threads"]

T = TypeVar("T")
B = TypeVar("B")

_CONTROLLER: ThreadpoolController | None = None


def _controller() -> ThreadpoolController:
    """The loaded thread pools, inspected once (``threadpool_limits`` inspects them at every call: 0.2 ms)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


@contextmanager
def small_matrix_threads() -> Iterator[None]:
    """A context in which BLAS uses one thread, the caller's limits restored when the last such context
    ends.  threadpoolctl's limits are the process's: contexts entered and left by several threads out of
    order would restore each other's saved setting, and could leave BLAS at one thread for good.  So
    the first context in sets the limit and the last one out restores it (a count under a lock)."""
    global _DEPTH, _LIMITER
    with _LIMIT_LOCK:
        if _DEPTH == 0:
            _LIMITER = _controller().limit(limits=1, user_api="blas")
        _DEPTH += 1
    try:
        yield
    finally:
        with _LIMIT_LOCK:
            _DEPTH -= 1
            if _DEPTH == 0 and _LIMITER is not None:
                _LIMITER.restore_original_limits()
                _LIMITER = None


_LIMIT_LOCK = threading.Lock()
_DEPTH = 0
_LIMITER: Any = None


#: a dense posterior of this many sites or more factorises with the caller's BLAS threads; below, with one.
#: Measured on 2 cores (probit EP at a fixed kernel, default threads against one): n = 2000 1.12x slower,
#: n = 3000 1.17x faster, n = 4000 1.5x faster; a learned fit at n = 1000 was 1.8x slower (a Cholesky
#: factor took 25 ms on two threads against 11 ms on one, the threads' spinning between the calls
#: slowing the element-wise work around them)
DENSE_BLAS_FROM = 2500


def fit_threads(n_sites: int, dense: bool) -> AbstractContextManager:
    """The BLAS threads a fit runs with: the caller's for a dense posterior of at least
    :data:`DENSE_BLAS_FROM` sites (its :math:`O(n^3)` factorisations gain from them), else one (a sparse
    fit's parallel work is its row blocks', :func:`each_block`); the caller's setting restored on exit."""
    return nullcontext() if dense and n_sites >= DENSE_BLAS_FROM else small_matrix_threads()


def n_threads(n_jobs: int | None) -> int:
    """The thread count ``n_jobs`` asks for on this machine (module docstring; a negative count beyond the
    cores gives 1); ``ValueError`` naming ``n_jobs`` for 0 or a non-integer."""
    cores = _cores()
    if n_jobs is None:
        env = os.environ.get("OMP_NUM_THREADS", "")
        return max(1, min(int(env), cores)) if env.strip().isdigit() and int(env) > 0 else cores
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral) or n_jobs == 0:
        raise ValueError(f"n_jobs must be a nonzero int or None (-1: every core), got {n_jobs!r}")
    if n_jobs > 0:
        return int(n_jobs)
    return max(1, cores + 1 + int(n_jobs))


@lru_cache(maxsize=1)
def _cores() -> int:
    """The cores this process may use (affinity and cgroup quota: ``joblib.cpu_count``), read once: it reads
    files at every call, and a refresh asks for it twice."""
    return joblib.cpu_count()


def each_block(work: Callable[[B], Any], blocks: Sequence[B], n_jobs: int | None) -> None:
    """``work(block)`` for every block, on ``n_threads(n_jobs)`` threads with one BLAS thread each.

    The blocks must write disjoint outputs; the first exception raised by a block is raised here.
    """
    _in_order(work, blocks, n_jobs, lambda value: None)


def fold_blocks(part: Callable[[B], T], blocks: Sequence[B], n_jobs: int | None, combine: Callable[[T, T], T]) -> T:
    r"""``combine(...combine(combine(part(b_0), part(b_1)), part(b_2))..., part(b_k))``: the blocks' parts
    computed on ``n_threads(n_jobs)`` threads (one BLAS thread each) and combined in block order, so the
    answer does not depend on the thread count.  At most ``2 n_jobs`` parts are held at once."""
    if not len(blocks):
        raise ValueError("fold_blocks needs at least one block")
    total: list = []

    def take(value: T) -> None:
        total[:] = [value if not total else combine(total[0], value)]

    _in_order(part, blocks, n_jobs, take)
    return total[0]


def _in_order(work: Callable[[B], T], blocks: Sequence[B], n_jobs: int | None, take: Callable[[T], None]) -> None:
    """``take(work(b))`` for the blocks in order, ``work`` on the pool; no block starts after an exception.

    A block's own row blocks (a nested call, on a pool thread) run in that thread, one after another."""
    threads = min(n_threads(n_jobs), len(blocks))
    nested = threading.current_thread().name.startswith(_PREFIX)
    with small_matrix_threads():
        if threads <= 1 or nested:
            for block in blocks:
                take(work(block))
            return
        pool = _pool(threads)
        queue = iter(blocks)
        pending: deque[Future] = deque(pool.submit(work, b) for b in islice(queue, 2 * threads))
        try:
            while pending:
                value = pending.popleft().result()
                pending.extend(pool.submit(work, b) for b in islice(queue, 1))
                take(value)
        finally:
            for future in pending:
                future.cancel()
            wait(pending)


_PREFIX = "relaxep-rows"
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(threads: int) -> ThreadPoolExecutor:
    """The process's pool of ``threads`` threads, started on first use and kept (starting 2 threads at every
    pass cost 0.3 s of a 3.8 s learned fit at ``M = 50``); a forked child starts its own."""
    with _POOLS_LOCK:
        if threads not in _POOLS:
            _POOLS[threads] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=_PREFIX)
        return _POOLS[threads]


def _forget_pools() -> None:
    """In a forked child: it has the dict but not the threads, and the locks may have been held at the fork."""
    global _POOLS_LOCK, _LIMIT_LOCK
    _POOLS.clear()
    _POOLS_LOCK, _LIMIT_LOCK = threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)
