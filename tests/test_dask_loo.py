"""loo() and loo_predict() of the Dask estimators, from the cavities on the shards: equal to those of the one-process
estimator fitted on the same rows with the same kernel and inducing inputs (which the Dask fit equals), and
comparable with it by ``relaxep.compare`` (the same fingerprint)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

import relaxep
from relaxep import EP, GPClassifier, GPRegressor, Poisson, Probit, StudentT
from relaxep.errors import ClusterError

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from relaxep.estimators.dask import DaskGPClassifier, DaskGPRegressor  # noqa: E402


@pytest.fixture(scope="module")
def client(dask_client):
    return dask_client  # the module's in-process cluster (conftest.py)


@pytest.fixture(scope="module")
def data():
    """300 rows in 3 shards: labels of a sine, heavy-tailed targets with 15 gross outliers, and counts with
    exposures."""
    rng = np.random.default_rng(3)
    n = 300
    X = rng.normal(size=(n, 2))
    f = 2.0 * np.sin(X[:, 0]) + X[:, 1]
    labels = np.where(rng.uniform(size=n) < 0.5 * (1.0 + np.tanh(f)), "b", "a")
    y = 3.0 + 2.0 * (0.5 * f + 0.1 * rng.standard_t(3, size=n))
    y[:15] += 6.0
    exposure = rng.uniform(0.5, 2.0, size=n)
    counts = rng.poisson(exposure * np.exp(0.5 * f)).astype(float)
    return X, labels, y, X[::20].copy(), counts, exposure


def _dask(*arrays):
    return tuple(da.from_array(a, chunks=(100, *a.shape[1:])) for a in arrays)  # 3 shards on 2 workers


@pytest.fixture(scope="module")
def fits(client, data):
    X, labels, y, Z, counts, exposure = data
    common = dict(optimizer=None, inducing_points=Z, learn_inducing_points=False, rule=EP())
    kernel, student = C(2.0) * RBF(1.0), dict(kernel=C(1.0) * RBF(1.0), likelihood=StudentT(), normalize_y=True)
    classifiers = [est(kernel=kernel, likelihood=Probit(), **common) for est in (GPClassifier, DaskGPClassifier)]
    regressors = [est(**student, **common) for est in (GPRegressor, DaskGPRegressor)]
    poisson = [est(kernel=C(0.5) * RBF(1.0), likelihood=Poisson(), **common) for est in (GPRegressor, DaskGPRegressor)]
    classifiers[1].client = regressors[1].client = poisson[1].client = client
    return {
        "classifier": (classifiers[0].fit(X, labels), classifiers[1].fit(*_dask(X, labels))),
        "student-t": (regressors[0].fit(X, y), regressors[1].fit(*_dask(X, y))),
        "poisson": (
            poisson[0].fit(X, counts, exposure=exposure),
            poisson[1].fit(*_dask(X, counts), exposure=_dask(exposure)[0]),
        ),
    }


@pytest.mark.parametrize("case", ["classifier", "student-t", "poisson"])
def test_dask_loo_equals_the_one_process_estimators(fits, case):
    """The pointwise leave-one-out densities (in y's units: the Student-t's with normalize_y undone), the in-sample
    ones and the cavities equal the one-process fit's to 1e-8 (measured: 6e-15 at most); compare() takes the two as
    fits of the same rows (the Poisson's: of its counts, without their exposures)."""
    ref, got = fits[case]
    assert got.result_.status == ref.result_.status == "converged"
    a, b = ref.loo(), got.loo()
    assert b.n == 300 and b.n_improper == 0
    np.testing.assert_allclose(b.pointwise, a.pointwise, rtol=0, atol=1e-8)
    np.testing.assert_allclose(b.in_sample, a.in_sample, rtol=0, atol=1e-8)
    np.testing.assert_allclose(b.loo_mean, a.loo_mean, rtol=0, atol=1e-8)
    np.testing.assert_allclose(b.loo_var, a.loo_var, rtol=0, atol=1e-8)
    assert b.p_loo > 0.5  # (the in-sample densities are not the leave-one-out ones)
    assert b.fingerprint == a.fingerprint
    table = relaxep.compare({"one process": a, "dask": b})
    assert abs(table.elpd_diff[1]) < 1e-6
    p, q = ref.loo_predict(), got.loo_predict()
    np.testing.assert_allclose(q.mean, p.mean, rtol=0, atol=1e-8)
    np.testing.assert_allclose(q.var, p.var, rtol=0, atol=1e-8)
    if case == "classifier":
        np.testing.assert_allclose(q.proba, p.proba, rtol=0, atol=1e-8)
        np.testing.assert_array_equal(q.predict(), p.predict())
    for criterion in ("tail", "influence"):  # the rows each names, from the shards' cavities as from its own
        np.testing.assert_array_equal(b.outliers(criterion), a.outliers(criterion))


def test_dask_loo_refuses_other_rows_and_a_pickled_estimator(fits, data):
    """compare() refuses a fit of other rows (one label or one input changed); a pickled Dask estimator has no terms
    left."""
    X, labels = data[:2]
    ref, got = fits["classifier"]
    other = labels.copy()
    other[0] = "a" if other[0] == "b" else "b"
    moved = X.copy()
    moved[150, 1] += 1e-6
    for changed in (clone(ref).fit(X, other), clone(ref).fit(moved, labels)):
        with pytest.raises(ValueError, match="different rows"):
            relaxep.compare([changed, got])
    copy = pickle.loads(pickle.dumps(got))
    with pytest.raises(RuntimeError, match="fit it again"):
        copy.loo()


def test_dask_loo_says_the_cluster_lost_its_terms(client, data):
    """Terms whose futures the cluster cancelled (a restart keeps none): a ClusterError that says to fit again."""
    X, labels = data[0][:100], data[1][:100]
    model = DaskGPClassifier(client, optimizer=None, inducing_points=5).fit(*_dask(X, labels))
    client.cancel(model._loo_futures)
    with pytest.raises(ClusterError, match="fit again"):
        model.loo()


@pytest.mark.parametrize("case", ["classifier", "student-t", "poisson"])
def test_dask_evidence_and_prior_are_the_one_process_estimators(fits, case):
    """On the one estimator base the Dask estimators answer ``log_marginal_likelihood()`` (the fitted value, the
    one-process fit's to 1e-8) and ``log_prior(theta)`` (the one-process estimator's default prior, scaled by the same
    rows' feature spreads and targets, at any theta: to 1e-10); the evidence at another theta needs the training
    rows, which stay on the cluster, and is refused saying so."""
    ref, got = fits[case]
    assert got.log_marginal_likelihood() == got.log_marginal_likelihood_value_
    np.testing.assert_allclose(got.log_marginal_likelihood(), ref.log_marginal_likelihood(), rtol=0, atol=1e-8)
    theta = ref.kernel_.theta + np.array([0.3, -0.2])
    np.testing.assert_allclose(got.log_prior(theta), ref.log_prior(theta), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got.log_prior(), ref.log_prior(), rtol=1e-10, atol=1e-10)
    assert got.log_prior(theta) != got.log_prior()  # (a prior that reads theta)
    with pytest.raises(ValueError, match="Dask cluster"):
        got.log_marginal_likelihood(theta)
    with pytest.raises(ValueError, match="theta must"):
        got.log_prior(np.zeros(7))
