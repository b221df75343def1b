"""Refuse before allocating: a dense computation that cannot fit in the memory available is refused
with one clear error (n, the bytes needed, the remedy), before its first n x n array exists."""

import tracemalloc

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPClassifier, GPRegressor, MemoryLimitError, Probit, StudentT, infer
from relaxep._memory import ENV_VAR, available_memory, check_memory, parse_bytes
from relaxep.mcmc import elliptical_slice
from relaxep.multiclass import infer_multiclass

N = 2000  # one n x n float64 matrix: 32 MB


@pytest.fixture
def limit_1mb(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "1MB")


def _data(n, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    return X, (X[:, 0] > 0).astype(int) if classes == 2 else rng.integers(0, classes, n)


@pytest.mark.parametrize(
    "make",
    [
        lambda: GPClassifier(C(1.0) * RBF(1.0), Probit()),
        lambda: GPClassifier(C(1.0, "fixed") * RBF(1.0, "fixed"), Probit()),
        lambda: GPRegressor(C(1.0) * RBF(1.0)),
        lambda: GPRegressor(C(1.0) * RBF(1.0), likelihood=StudentT()),
    ],
    ids=["classifier-learned", "classifier-fixed", "regressor-gaussian", "regressor-student-t"],
)
def test_a_dense_fit_that_cannot_fit_is_refused_before_allocating(make, limit_1mb):
    X, y = _data(N)
    tracemalloc.start()
    try:
        with pytest.raises(MemoryLimitError) as info:
            make().fit(X, y.astype(float) if isinstance(make(), GPRegressor) else y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * N * N / 4  # not one n x n matrix was allocated
    message = str(info.value)
    assert f"n = {N}" in message and "inducing_points" in message and ENV_VAR in message
    assert "MiB" in message  # the bytes needed
    assert isinstance(info.value, MemoryError)


def test_the_sparse_remedy_fits_where_the_dense_fit_is_refused(monkeypatch):
    X, y = _data(N)
    monkeypatch.setenv(ENV_VAR, "20MB")  # below one n x n matrix, above n x M
    with pytest.raises(MemoryLimitError):
        GPClassifier(C(1.0, "fixed") * RBF(1.0, "fixed"), Probit()).fit(X, y)
    clf = GPClassifier(
        C(1.0, "fixed") * RBF(1.0, "fixed"), Probit(), inducing_points=50, optimizer=None, random_state=0
    ).fit(X, y)
    assert clf.score(X, y) > 0.9


def test_infer_refuses_the_workspace_beside_a_given_k(limit_1mb):
    K = np.eye(400)  # 1.3 MB: the posterior would need three more
    with pytest.raises(MemoryLimitError, match="n = 400"):
        infer(K, np.ones(400))


def test_joint_multiclass_and_mcmc_and_predictive_covariance_are_refused(limit_1mb, monkeypatch):
    K = np.eye(300) + 0.0  # 0.7 MB
    y = np.arange(300) % 3
    with pytest.raises(MemoryLimitError, match="one_vs_rest"):
        infer_multiclass(K, y, n_classes=3)
    with pytest.raises(MemoryLimitError, match="chains"):
        elliptical_slice(K, np.where(y > 0, 1, -1), Probit(), n_samples=2000, n_chains=4)
    monkeypatch.setenv(ENV_VAR, "inf")
    X, _ = _data(50)
    gpr = GPRegressor(optimizer=None).fit(X, X[:, 0])
    monkeypatch.setenv(ENV_VAR, "1MB")
    with pytest.raises(MemoryLimitError, match="return_std"):
        gpr.predict(np.zeros((1000, 2)), return_cov=True)
    assert gpr.predict(np.zeros((1000, 2)), return_std=True)[1].shape == (1000,)


def test_small_problems_pass_and_the_limit_can_be_lifted(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "inf")
    check_memory(1e30, "anything", "nothing")  # inf turns the check off
    monkeypatch.delenv(ENV_VAR)
    found = available_memory()
    if found is not None:  # Linux: MemAvailable (and the cgroup's limit)
        assert 0 < found[0] < 1e15
        with pytest.raises(MemoryLimitError, match="needs about"):
            check_memory(2 * found[0] + 1e9, "a test", "a remedy")
    check_memory(1e3, "a small thing", "nothing")


@pytest.mark.parametrize(
    "text, expected", [("1e9", 1e9), ("8GiB", 8 * 2**30), ("500 MB", 5e8), ("64kib", 65536), ("inf", np.inf)]
)
def test_limits_parse_with_units(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "lots", "-1GB", "0", "5 parsecs"])
def test_a_bad_limit_is_a_clear_error(text):
    with pytest.raises(ValueError, match=ENV_VAR):
        parse_bytes(text)
