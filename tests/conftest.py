"""Fixtures shared by the test modules (the builders live in ``problems.py``, the oracles in ``oracles.py``)."""

from __future__ import annotations

import os
import sys

import pytest
from threadpoolctl import threadpool_limits

import problems
import relaxep._xp as rxp
import relaxep.inference.site_updates as site_updates
from relaxep.datasets import make_problem, problem_grid
from script_runner import ScriptRunner

if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # Under pytest-xdist the workers share the cores: each worker's BLAS and OpenMP pools get its share of them (one
    # thread each with addopts' -n 2 on two cores), not a pool as large as the machine per worker, whose idle
    # threads (OpenBLAS's spin) only take the cores from the other worker (the suite ran ~15% slower so).  A test
    # about thread counts sets its own (``threadpool_limits(limits=2)``); subprocesses start with the defaults.
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    WORKER_THREADS = max(1, _cores // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    _LIMITS = [threadpool_limits(limits=WORKER_THREADS)]

    def pytest_collection_finish(session):
        """The same for the pools of what the test modules imported (PyTorch's MKL, OpenMP and ATen threads)."""
        _LIMITS.append(threadpool_limits(limits=WORKER_THREADS))
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(WORKER_THREADS)


@pytest.fixture(scope="session")
def toy_problem():
    """The paper's five-point toy: ``(K = X X^T, y, X)``."""
    return problems.TOY_X @ problems.TOY_X.T, problems.TOY_Y, problems.TOY_X


@pytest.fixture(scope="session")
def oscillating():
    """``(K, y, eps)`` on which plain EP oscillates (see ``problems.oscillating_problem``)."""
    return problems.oscillating_problem()


@pytest.fixture(scope="session")
def hard_suite_problem():
    """Problem 4 of the robustness suite (n = 50, amplitude 100): EP and damped EP both fail.
    Returns ``(K, y, likelihood)``."""
    K, y, _, _, _, lik = make_problem(problem_grid(30, max_n=400)[4])
    return K, y, lik


@pytest.fixture(scope="module")
def dask_client():
    """A Dask client of an in-process cluster (two one-thread workers, threads of this process) for a test module's
    Dask equality tests, closed at the module's end; skipped without ``distributed``.  (One cluster for the session
    was tried: alive beside the other modules' tests in a pytest-xdist worker, it left
    test_inference.py::test_blas_threads_is_applied_and_restored seeing one BLAS thread.)  The tests whose point is
    a worker process (test_dask.py's, test_dask_faults.py's) start a cluster of processes."""
    pytest.importorskip("dask.array")
    pytest.importorskip("distributed")
    with problems.local_dask_client(2, processes=False) as client:
        yield client


@pytest.fixture(scope="session")
def array_api_python():
    """Runs a script as ``python -c`` with ``SCIPY_ARRAY_API=1`` (SciPy's array API on, which must be set before
    SciPy is imported): one server interpreter for the session, each script in a fork of it
    (``script_runner.py``); ``.run(code, *args)`` returns its ``CompletedProcess`` and fails on a non-zero exit."""
    runner = ScriptRunner()
    yield runner
    runner.close()


@pytest.fixture
def dispatch(monkeypatch):
    """scikit-learn's ``array_api_dispatch`` on, as far as relaxep reads it (the real switch also needs
    ``SCIPY_ARRAY_API=1`` before scipy is imported: the estimator tests check it in a subprocess)."""
    monkeypatch.setattr(rxp, "_dispatch", lambda: True)


@pytest.fixture
def device_runs(monkeypatch):
    """scikit-learn's ``array_api_dispatch`` on as relaxep reads it, and the site rules of the fits the device loop
    ran (:func:`relaxep.inference.site_updates.run_on_device`), in order."""
    monkeypatch.setattr(rxp, "_dispatch", lambda: True)
    runs = []
    original = site_updates.run_on_device

    def counted(*args, **kwargs):
        runs.append(args[0].site_rule)
        return original(*args, **kwargs)

    monkeypatch.setattr(site_updates, "run_on_device", counted)
    return runs
