"""DaskGPClassifier on a LocalCluster this module starts: equal to the single-process sparse fit."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import EP, GPClassifier, PowerEP, Probit

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from relaxep.estimators.dask import DaskGPClassifier  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 1500
    X = rng.normal(size=(n, 3))
    f = 2.0 * np.sin(X[:, 0]) + X[:, 1]
    y = np.where(rng.uniform(size=n) < 0.5 * (1.0 + np.tanh(f)), "b", "a")
    return X, y, rng.normal(size=(400, 3))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"optimizer": None, "kernel": C(2.0) * RBF(1.0), "rule": EP()},
        {"optimizer": None, "kernel": C(2.0) * RBF(1.0), "rule": PowerEP(0.8), "inducing_init": "random"},
        {"optimizer_subset": 300, "optimizer_maxiter": 10, "rule": EP()},
        # learning on every shard (7 s) runs with the slow studies; learning on a subset by default
        pytest.param({"optimizer_subset": None, "optimizer_maxiter": 8, "rule": EP()}, marks=pytest.mark.slow),
    ],
    ids=["fixed-EP", "fixed-PowerEP", "learned-on-a-subset", "learned-on-the-shards"],
)
def test_dask_fit_equals_the_single_process_fit(client, data, kwargs):
    X, y, Xt = data
    common = dict(likelihood=Probit(), inducing_points=12, random_state=0, **kwargs)
    ref = GPClassifier(**common).fit(X, y)
    Xd, yd = da.from_array(X, chunks=(400, 3)), da.from_array(y, chunks=400)  # 4 shards on 2 workers
    got = DaskGPClassifier(client=client, **common).fit(Xd, yd, gather_sites=True)
    assert got.status_ == ref.result_.status == "converged"
    np.testing.assert_allclose(got.inducing_points_, ref.inducing_points_, atol=1e-10)
    np.testing.assert_allclose(got.kernel_.theta, ref.kernel_.theta, atol=1e-10)
    if "optimizer_maxiter" in kwargs:  # the learned cases did learn
        assert np.abs(got.kernel_.theta - np.zeros(2)).max() > 0.1
    p = got.predict_proba(da.from_array(Xt, chunks=150))
    assert isinstance(p, da.Array)
    np.testing.assert_allclose(p.compute(), ref.predict_proba(Xt), atol=1e-6)
    np.testing.assert_allclose(got.predict_proba(Xt), ref.predict_proba(Xt), atol=1e-6)  # numpy in, numpy out
    np.testing.assert_array_equal(got.predict(da.from_array(Xt, chunks=150)).compute(), ref.predict(Xt))
    np.testing.assert_allclose(got.site_precision_, ref.result_.site_precision, rtol=1e-6, atol=1e-9)
    assert got.log_marginal_likelihood_value_ == pytest.approx(ref.log_marginal_likelihood_value_, rel=1e-9)
    assert got.n_sweeps_ == ref.result_.n_sweeps


def test_dask_refuses_what_it_cannot_run(client, data):
    X, y, _ = data
    with pytest.raises(TypeError, match="rule must be a SiteRule"):
        DaskGPClassifier(client=client, rule="auto", optimizer=None).fit(X, y)
    with pytest.raises(ValueError, match="two classes"):
        DaskGPClassifier(client=client, optimizer=None).fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="chunked along rows only"):
        DaskGPClassifier(client=client, optimizer=None).fit(da.from_array(X, chunks=(500, 2)), y)


def test_what_a_shard_sends_back_is_of_size_m_squared_at_most():
    """The per-sweep traffic: scalars from the sweep map, M x M and M from the sums map, never O(n)."""
    from relaxep.inference.sharded import _shard_data, _shard_prior, _shard_start, _shard_sums, _shard_sweep
    from relaxep.posterior.sparse import factor_b

    rng = np.random.default_rng(1)
    X, Z = rng.normal(size=(500, 3)), rng.normal(size=(7, 3))
    y = np.where(X[:, 0] > 0, 1, 0)
    kernel = C(2.0) * RBF(1.0)
    L_uu = np.linalg.cholesky(kernel(Z) + 1e-6 * 2.0 * np.eye(7))
    state = _shard_start(_shard_prior(_shard_data(X, y, np.array([0, 1])), Z, kernel, L_uu, 1e-6), False)
    state, (gram, b, log_d, d_min) = _shard_sums(state, None)
    assert gram.shape == (7, 7) and b.shape == (7,) and np.isscalar(log_d) and np.isscalar(d_min)
    _, chol_inv, m = factor_b(gram, b)
    _, summary = _shard_sweep(state, chol_inv, m, EP(), Probit(), True)
    assert all(v is None or np.isscalar(v) for v in summary.values())


def test_old_module_path_warns_and_still_works():
    import relaxep.dask as old

    with pytest.warns(FutureWarning, match="relaxep.estimators.dask"):
        assert old.DaskGPClassifier is DaskGPClassifier


def test_dask_stochastic_search_maps_minibatches_over_the_shards(client, data):
    """optimizer="stochastic": each step one map over the shards' minibatches, then EP on the shards from the
    learned tied site; it predicts as well as the single-process full-evidence search of the kernel."""
    X, y, _ = data
    rng = np.random.default_rng(7)
    Xt = rng.normal(size=(1000, 3))
    ft = 2.0 * np.sin(Xt[:, 0]) + Xt[:, 1]
    yt = np.where(rng.uniform(size=1000) < 0.5 * (1.0 + np.tanh(ft)), "b", "a")
    common = dict(likelihood=Probit(), inducing_points=12, random_state=0)
    ref = GPClassifier(**common, learn_inducing_points=False).fit(X, y)
    Xd, yd = da.from_array(X, chunks=(400, 3)), da.from_array(y, chunks=400)
    got = DaskGPClassifier(client=client, optimizer="stochastic", optimizer_maxiter=60, **common).fit(Xd, yd)
    assert got.status_ == "converged"
    assert np.abs(got.kernel_.theta).max() > 0.1 and not np.allclose(got.inducing_points_, ref.inducing_points_)

    def log_loss(p):
        return float(-np.mean(np.log(p[np.arange(yt.size), (yt == "b").astype(int)])))

    assert log_loss(got.predict_proba(Xt)) < log_loss(ref.predict_proba(Xt)) + 0.01
