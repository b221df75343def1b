"""The Dask estimators on any cluster: the same answer on 1, 2 and 4 workers (the reductions run in shard order),
a chunking's answer to the convergence tolerance, a bounded wait, and a clear message without Dask."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import EP, ClusterError, Probit

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from problems import local_dask_client  # noqa: E402
from relaxep.estimators.dask import DaskGPClassifier  # noqa: E402


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    n = 600
    X = rng.normal(size=(n, 2))
    f = np.sin(2.0 * X[:, 0]) + 0.5 * X[:, 1]
    labels = np.where(rng.uniform(size=n) < 0.5 * (1.0 + np.tanh(2.0 * f)), 1, 0)
    y = f + 0.1 * rng.standard_t(3, size=n)
    y[:30] += 4.0
    return X, labels, y, rng.normal(size=(200, 2)), X[::40].copy()


def _fits(client, data: tuple, chunk: int, tol: float = 1e-4) -> tuple:
    """A fixed-kernel classifier (sites gathered) on ``client``'s cluster (the regressor runs on the same
    ``ShardedFITC``, whose reductions these tests are about)."""
    X, labels, _, Xt, Z = data
    common = dict(inducing_points=Z, optimizer=None, rule=EP(), tol=tol)
    Xd = da.from_array(X, chunks=(chunk, 2))
    clf = DaskGPClassifier(client, C(2.0) * RBF(1.0), Probit(), **common)
    clf.fit(Xd, da.from_array(labels, chunks=chunk), gather_sites=True)
    return clf.site_precision_, clf.site_mean_precision_, clf.predict_proba(Xt)[:, 1]


@pytest.fixture(scope="module")
def by_workers(data, dask_client):
    """Six shards of 100 rows, fitted on 1, 2 and 4 workers (EP to tol = 1e-8); the 2-worker one is the module's."""
    fits = {2: _fits(dask_client, data, chunk=100, tol=1e-8)}
    for workers in (1, 4):
        with local_dask_client(workers) as client:
            fits[workers] = _fits(client, data, chunk=100, tol=1e-8)
    return fits


def test_one_two_and_four_workers_give_the_same_sites_with_the_same_chunks(by_workers):
    """The partial sums are reduced in shard order, so the sites and the probabilities agree to 1e-12; they are
    bitwise equal on one machine (summed in another order they differ by ~6e-15)."""
    for other in (by_workers[2], by_workers[4]):
        for a, b in zip(by_workers[1], other, strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
            np.testing.assert_array_equal(a, b)


def test_another_chunking_gives_the_answer_to_the_convergence_tolerance(data, by_workers, dask_client):
    """Two shards against six (another summation order): the same fixed point, to the tolerance EP ran to."""
    coarse = _fits(dask_client, data, chunk=300, tol=1e-8)
    for a, b in zip(coarse[2:], by_workers[2][2:], strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-7)


def test_a_map_that_does_not_answer_in_time_raises_a_cluster_error(data):
    X, labels, *_ = data
    with local_dask_client(1) as client:
        model = DaskGPClassifier(client, likelihood=Probit(), inducing_points=5, optimizer=None, timeout=1e-9)
        with pytest.raises(ClusterError, match=r"did not answer one map over the shards within timeout=1e-09"):
            model.fit(da.from_array(X, chunks=(300, 2)), da.from_array(labels, chunks=300))
        assert not hasattr(model, "result_")


_HIDDEN = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("dask", "distributed"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
import numpy as np
from relaxep import DaskGPClassifier, DaskGPRegressor
X = np.random.default_rng(0).normal(size=(40, 2))
for est, y in ((DaskGPClassifier(optimizer=None), X[:, 0] > 0), (DaskGPRegressor(optimizer=None), X[:, 0])):
    try:
        est.fit(X, y)
    except ModuleNotFoundError as exc:
        print(type(est).__name__, exc.name, "|", exc)
"""


def test_without_dask_both_estimators_say_what_to_install():
    """With Dask hidden from imports, ``relaxep`` imports, and each Dask estimator's ``fit`` raises a
    ``ModuleNotFoundError`` that names the extra to install, not a bare 'No module named dask'."""
    run = subprocess.run(
        [sys.executable, "-c", _HIDDEN], capture_output=True, text=True, check=True, env=dict(os.environ)
    )
    lines = run.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["DaskGPClassifier", "DaskGPRegressor"]
    for line in lines:
        assert line.split()[1] == "dask" and 'pip install "relaxep[dask]"' in line, line
