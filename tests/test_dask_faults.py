"""Faults on a cluster.  A lost worker does not change the answer: a fit whose worker process is killed mid-fit
(four workers) ends with the predictions of the same fit undisturbed, to 1e-10 (Dask recomputes the lost shards
from their graph, the nanny restarts the worker, and the reductions run in shard order), for both estimators
and during the stochastic search.  A lost or restarted scheduler ends the fit with a ``ClusterError`` within
the estimator's ``timeout``, not a hang."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from relaxep import EP, ClusterError, GPClassifier, Probit, StudentT

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from problems import local_dask_client  # noqa: E402
from relaxep.estimators.dask import DaskGPClassifier, DaskGPRegressor  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    n = 4000
    X = rng.normal(size=(n, 3))
    f = 2.0 * np.sin(X[:, 0]) + X[:, 1]
    labels = np.where(rng.uniform(size=n) < 0.5 * (1.0 + np.tanh(f)), 1, 0)
    y = 0.5 * f + 0.1 * rng.standard_t(3, size=n)
    y[:60] += 4.0
    return da.from_array(X, chunks=(500, 3)), labels, y, rng.normal(size=(300, 3))


@pytest.fixture(scope="module")
def client():
    with local_dask_client(4, processes=True) as c:
        yield c


def _fit_killing_a_worker(client, model, X, y, delay):
    """``model.fit(X, y)`` with one worker process killed (SIGKILL) ``delay`` seconds in."""
    victim = sorted(client.scheduler_info()["workers"])[0]
    pid = client.run(os.getpid, workers=[victim])[victim]
    outcome: dict = {}

    def fit() -> None:
        try:
            outcome["model"] = model.fit(X, y)
        except BaseException as exc:  # reported below
            outcome["error"] = exc

    worker = threading.Thread(target=fit)
    worker.start()
    time.sleep(delay)
    assert worker.is_alive(), "the fit ended before the worker could be killed: make the problem larger"
    os.kill(pid, signal.SIGKILL)  # the worker process dies at once, mid-task
    worker.join(timeout=600)
    assert "error" not in outcome, outcome.get("error")
    client.wait_for_workers(4, timeout=60)  # (the nanny brings it back)
    return outcome["model"]


CASES = {
    "classifier-learned-on-the-shards": lambda c: DaskGPClassifier(
        c, likelihood=Probit(), rule=EP(), inducing_points=20, optimizer_subset=None, optimizer_maxiter=15,
        random_state=0,
    ),
    "regressor-learned-on-the-shards": lambda c: DaskGPRegressor(
        c, likelihood=StudentT(), rule=EP(), inducing_points=20, optimizer="fmin_l_bfgs_b", optimizer_subset=None,
        optimizer_maxiter=8, random_state=0,
    ),
    "classifier-stochastic-search": lambda c: DaskGPClassifier(
        c, likelihood=Probit(), rule=EP(), inducing_points=20, optimizer="stochastic", optimizer_maxiter=300,
        random_state=0,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_a_worker_killed_mid_fit_leaves_the_predictions_unchanged(client, data, case):
    X, labels, y, Xt = data
    target = da.from_array(y if "regressor" in case else labels, chunks=500)
    start = time.perf_counter()
    calm = CASES[case](client).fit(X, target)
    elapsed = time.perf_counter() - start
    hit = _fit_killing_a_worker(client, CASES[case](client), X, target, delay=0.4 * elapsed)
    assert hit.result_.status == calm.result_.status == "converged"
    # (not bitwise: on 16 cores a fit with a killed worker moved the probabilities by 2.6e-14, cause not
    # established; bitwise here on 2 cores)
    np.testing.assert_allclose(hit.kernel_.theta, calm.kernel_.theta, rtol=0, atol=1e-10)
    if "regressor" in case:
        for a, b in zip(hit.predict(Xt, return_std=True), calm.predict(Xt, return_std=True), strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)
    else:
        np.testing.assert_allclose(hit.predict_proba(Xt), calm.predict_proba(Xt), rtol=0, atol=1e-10)


def test_the_killed_worker_fit_is_also_the_single_process_fit(client, data):
    """The classifier learned on the shards, undisturbed: GPClassifier's answer on the same rows to 1e-8."""
    X, labels, _, Xt = data
    common = dict(likelihood=Probit(), inducing_points=20, random_state=0, rule=EP())
    common.update(optimizer_subset=None, optimizer_maxiter=15)
    reference = GPClassifier(**common).fit(X.compute(), labels)
    model = DaskGPClassifier(client=client, **common).fit(X, da.from_array(labels, chunks=500))
    np.testing.assert_allclose(model.predict_proba(Xt), reference.predict_proba(Xt), atol=1e-8)


def test_a_restarted_cluster_ends_the_fit_with_a_cluster_error(client, data):
    """``client.restart()`` mid-fit cancels every future, the shards' state with them: ``ClusterError`` at once."""
    X, labels, _, _ = data
    model = CASES["classifier-learned-on-the-shards"](client)
    model.set_params(timeout=60)
    timer = threading.Timer(1.5, client.restart)
    start = time.perf_counter()
    timer.start()
    with pytest.raises(ClusterError, match="the cluster lost the shards' state"):
        model.fit(X, da.from_array(labels, chunks=500))
    timer.join()
    assert time.perf_counter() - start < 30.0
    client.wait_for_workers(4, timeout=60)


def test_a_killed_scheduler_ends_the_fit_with_a_cluster_error_within_the_timeout(tmp_path, data):
    """A scheduler process killed mid-fit: ``ClusterError`` (its futures cancelled, or the wait timed out),
    within ``timeout`` seconds plus slack, never a hang."""
    X, labels, _, _ = data
    file = tmp_path / "scheduler.json"
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--port", "0", "--dashboard-address", ":0",
         "--scheduler-file", str(file)], **quiet,
    )  # fmt: skip
    workers = []
    try:
        deadline = time.time() + 60
        while not file.exists() and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        worker = [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(file)]
        workers = [subprocess.Popen([*worker, "--nthreads", "1", "--no-dashboard"], **quiet) for _ in range(2)]
        with distributed.Client(scheduler_file=str(file)) as remote:
            remote.wait_for_workers(2, timeout=60)
            model = CASES["classifier-learned-on-the-shards"](remote)
            model.set_params(timeout=10)
            threading.Timer(2.0, scheduler.kill).start()
            start = time.perf_counter()
            with pytest.raises(ClusterError):
                model.fit(X, da.from_array(labels, chunks=500))
            assert time.perf_counter() - start < 10 + 20
    finally:
        for process in [scheduler, *workers]:
            process.kill()
