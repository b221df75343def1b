"""A lost worker does not change the answer: a DaskGPClassifier fit whose worker process is killed
mid-fit finishes with the predictions of an undisturbed single-process fit (Dask recomputes the
lost shards from their graph; the nanny restarts the worker)."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from relaxep import EP, GPClassifier, Probit

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from relaxep.estimators.dask import DaskGPClassifier  # noqa: E402


@pytest.mark.slow
def test_a_worker_killed_mid_fit_leaves_the_predictions_unchanged():
    rng = np.random.default_rng(1)
    n = 4000
    X = rng.normal(size=(n, 3))
    y = np.where(rng.uniform(size=n) < 0.5 * (1.0 + np.tanh(2.0 * np.sin(X[:, 0]) + X[:, 1])), 1, 0)
    Xt = rng.normal(size=(300, 3))
    common = dict(likelihood=Probit(), inducing_points=20, random_state=0, rule=EP())
    common.update(optimizer_subset=None, optimizer_maxiter=15)
    reference = GPClassifier(**common).fit(X, y)
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        victim = sorted(client.scheduler_info()["workers"])[0]
        pid = client.run(os.getpid, workers=[victim])[victim]
        model = DaskGPClassifier(client=client, **common)
        Xd, yd = da.from_array(X, chunks=(500, 3)), da.from_array(y, chunks=500)
        outcome: dict = {}

        def fit() -> None:
            try:
                outcome["model"] = model.fit(Xd, yd)
            except BaseException as exc:  # reported below
                outcome["error"] = exc

        worker = threading.Thread(target=fit)
        start = time.perf_counter()
        worker.start()
        time.sleep(2.0)
        assert worker.is_alive(), "the fit ended before the worker could be killed: make the problem larger"
        os.kill(pid, signal.SIGKILL)  # the worker process dies at once, mid-task
        worker.join(timeout=600)
        elapsed = time.perf_counter() - start
    assert "error" not in outcome, outcome.get("error")
    assert elapsed > 2.0
    assert model.result_.status == reference.result_.status == "converged"
    np.testing.assert_allclose(model.predict_proba(Xt), reference.predict_proba(Xt), atol=1e-8)
