"""How the library uses the machine's cores: row blocks on a thread pool, each with one BLAS thread.

Two kinds of work, two rules (measured in ``benchmarks/results/threads.md``):

* **Small matrices in a loop** (the stochastic search's ``M x M`` step, ``M`` of a few hundred) gain
  nothing from a BLAS thread pool and pay its start and synchronisation at every call: on 2 cores a
  stochastic fit at 10^5 rows took 31 s with OpenBLAS's default threads against 13 s with one.  Such
  loops run under :func:`small_matrix_threads`: one BLAS thread, the caller's setting given back on exit.
* **Independent row blocks** (the sparse posterior's :math:`O(nM^2)` passes, the minibatch's rows, the
  per-site Newton solves) run on :func:`each_block` / :func:`fold_blocks`: a pool of ``n_jobs`` threads
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
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from itertools import islice
from numbers import Integral
from typing import Any, TypeVar

import joblib
from threadpoolctl import ThreadpoolController

__all__ = ["each_block", "fold_blocks", "n_threads", "small_matrix_threads"]

T = TypeVar("T")
B = TypeVar("B")

_CONTROLLER: ThreadpoolController | None = None


def _controller() -> ThreadpoolController:
    """The loaded thread pools, inspected once (``threadpool_limits`` inspects them at every call: 0.2 ms)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


def small_matrix_threads() -> AbstractContextManager:
    """A context in which BLAS uses one thread (the caller's limits are restored on exit)."""
    return _controller().limit(limits=1, user_api="blas")


def n_threads(n_jobs: int | None) -> int:
    """The thread count ``n_jobs`` asks for on this machine (module docstring); ``ValueError`` naming
    ``n_jobs`` for 0, a non-integer or a negative count beyond the cores."""
    cores = joblib.cpu_count()
    if n_jobs is None:
        env = os.environ.get("OMP_NUM_THREADS", "")
        return max(1, min(int(env), cores)) if env.strip().isdigit() and int(env) > 0 else cores
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral) or n_jobs == 0:
        raise ValueError(f"n_jobs must be a nonzero int or None (-1: every core), got {n_jobs!r}")
    if n_jobs > 0:
        return int(n_jobs)
    return max(1, cores + 1 + int(n_jobs))


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
    """``take(work(b))`` for the blocks in order, ``work`` on a pool; no block starts after an exception."""
    threads = min(n_threads(n_jobs), len(blocks))
    with small_matrix_threads():
        if threads <= 1:
            for block in blocks:
                take(work(block))
            return
        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="relaxep-rows")
        try:
            queue = iter(blocks)
            pending: deque[Future] = deque(pool.submit(work, b) for b in islice(queue, 2 * threads))
            while pending:
                value = pending.popleft().result()
                pending.extend(pool.submit(work, b) for b in islice(queue, 1))
                take(value)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
