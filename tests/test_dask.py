"""DaskGPClassifier on a LocalCluster of two worker processes this module starts: equal to the single-process sparse
fit."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, Matern
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import EP, ConvergentEP, Gaussian, GPClassifier, PowerEP, Probit
from relaxep.hyper import HalfStudentT

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from problems import local_dask_client  # noqa: E402
from relaxep.estimators.dask import DaskGPClassifier  # noqa: E402


@pytest.fixture(scope="module")
def client():
    """Two worker processes: the client's work and the shards' run in separate processes, as on a real cluster (on
    threads of the test process, once in three runs this module left the process at one BLAS thread)."""
    with local_dask_client(2, processes=True) as c:
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
    assert got.result_.status == ref.result_.status == "converged"
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
    assert got.result_.n_sweeps == ref.result_.n_sweeps


def test_dask_refuses_what_it_cannot_run(client, data):
    X, y, _ = data
    with pytest.raises(TypeError, match="rule must be a SiteRule"):
        DaskGPClassifier(client=client, rule="auto", optimizer=None).fit(X, y)
    with pytest.raises(ValueError, match="two classes"):
        DaskGPClassifier(client=client, optimizer=None).fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="chunked along rows only"):
        DaskGPClassifier(client=client, optimizer=None).fit(da.from_array(X, chunks=(500, 2)), y)


def test_what_a_shard_sends_back_is_of_size_m_squared_at_most():
    """The per-sweep traffic: scalars and the next candidate's M x M and M sums from the sweep map (M x M and M
    from a sums map where the step changes), never O(n)."""
    from relaxep._xp import HOST
    from relaxep.inference import shards
    from relaxep.posterior.fitc_rows import factor_b

    rng = np.random.default_rng(1)
    X, Z = rng.normal(size=(500, 3)), rng.normal(size=(7, 3))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    kernel = C(2.0) * RBF(1.0)
    L_uu = np.linalg.cholesky(kernel(Z) + 1e-6 * 2.0 * np.eye(7))
    state = shards.start(shards.prior(shards.new(X, y), Z, kernel, L_uu, 1e-6), False)
    state, (gram, b, log_d, d_min) = shards.sums(state, None)
    assert gram.shape == (7, 7) and b.shape == (7,) and np.isscalar(log_d) and np.isscalar(d_min)
    _, chol_inv, m = factor_b(HOST, gram, b)
    _, summary = shards.sweep(state, chol_inv, m, EP(), Probit(), True)
    assert all(v is None or np.isscalar(v) for v in summary.values())
    # with the next candidate's sums computed ahead: M x M and M more, the same as the sums map sends
    _, summary = shards.sweep(state, chol_inv, m, EP(), Probit(), True, 1.0)
    sums = summary.pop("sums")
    assert sums[0].shape == (7, 7) and sums[1].shape == (7,) and np.isscalar(sums[2]) and np.isscalar(sums[3])
    assert all(v is None or np.isscalar(v) for v in summary.values())
    # what a cluster of processes pickles (one of threads does not): the map's answer, and a shard's state (a
    # worker's, copied when the scheduler moves it); the copy sweeps to the same answer
    copy, answer = pickle.loads(pickle.dumps((state, (summary, sums))))
    assert answer[0] == summary and all(np.array_equal(a, b) for a, b in zip(answer[1], sums, strict=True))
    _, again = shards.sweep(copy, chol_inv, m, EP(), Probit(), True, 1.0)
    assert all(np.array_equal(a, b) for a, b in zip(again.pop("sums"), sums, strict=True)) and again == summary


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
    assert got.result_.status == "converged"
    assert np.abs(got.kernel_.theta).max() > 0.1 and not np.allclose(got.inducing_points_, ref.inducing_points_)

    def log_loss(p):
        return float(-np.mean(np.log(p[np.arange(yt.size), (yt == "b").astype(int)])))

    assert log_loss(got.predict_proba(Xt)) < log_loss(ref.predict_proba(Xt)) + 0.01


# ------------------------------------------------------------------ the predictions are GPClassifier's
KERNEL = C(2.0) * RBF(1.0)


@pytest.fixture(scope="module")
def fixed_pair(client, data):
    """The same fixed-hyperparameter sparse fit twice: on the shards and in one process (EP, parallel schedule,
    the same inducing inputs, jitter and tol); test rows with ties appended: 1000 units from every training
    and inducing input, so ``K_*u`` underflows to 0, the predictive mean is exactly 0 and P = 0.5 exactly."""
    X, y, Xt = data
    Z = np.random.default_rng(3).normal(size=(10, 3))
    common = dict(optimizer=None, inducing_points=Z, jitter=1e-6, tol=1e-4)
    ref = GPClassifier(KERNEL, Probit(), rule=EP(), schedule="parallel", **common).fit(X, y)
    Xd, yd = da.from_array(X, chunks=(400, 3)), da.from_array(y, chunks=400)
    got = DaskGPClassifier(client, KERNEL, Probit(), **common).fit(Xd, yd)
    ties = 1000.0 + np.random.default_rng(4).normal(size=(3, 3))
    return got, ref, np.vstack([Xt, ties]), len(Xt)


def test_dask_predictions_equal_gpclassifiers_ties_included(fixed_pair):
    got, ref, Xt, n_plain = fixed_pair
    d_ref = ref.decision_function(Xt)
    d = got.decision_function(da.from_array(Xt, chunks=150))
    assert isinstance(d, da.Array) and d.shape == (Xt.shape[0],)  # lazy for a Dask array
    d = d.compute()
    np.testing.assert_array_equal(d[n_plain:], 0.0)  # exact ties, on both
    np.testing.assert_array_equal(d_ref[n_plain:], 0.0)
    np.testing.assert_allclose(d, d_ref, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(got.decision_function(Xt), d_ref, rtol=1e-8, atol=1e-8)  # numpy in, numpy out
    for Xin in (Xt, da.from_array(Xt, chunks=150)):
        np.testing.assert_allclose(np.asarray(got.predict_proba(Xin)), ref.predict_proba(Xt), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(np.asarray(got.predict_log_proba(Xin)), ref.predict_log_proba(Xt), rtol=1e-8)
        labels = np.asarray(got.predict(Xin))
        np.testing.assert_array_equal(labels, ref.predict(Xt))
        assert (labels[n_plain:] == got.classes_[0]).all()  # a tie gives classes_[0] (p >= 0.5 gave classes_[1])
    assert isinstance(got.predict_proba(da.from_array(Xt, chunks=150)), da.Array)
    assert isinstance(got.predict(da.from_array(Xt, chunks=150)), da.Array)
    assert got.predict_proba(Xt)[n_plain:, 1].tolist() == [0.5] * (len(Xt) - n_plain)


def test_to_local_is_a_fitted_gpclassifier_that_pickles_and_predicts_as_the_dask_estimator(fixed_pair):
    """``to_local()``: a GPClassifier holding the posterior at the inducing inputs (no training rows); after a
    pickle round trip its probabilities, log-odds and labels are the Dask estimator's to 1e-10, and the
    single-process fit's to 1e-8; the evidence at other hyperparameters is refused by name."""
    import pickle

    got, ref, Xt, _ = fixed_pair
    local = pickle.loads(pickle.dumps(got.to_local()))
    assert type(local) is GPClassifier and local.X_train_ is None
    assert len(pickle.dumps(local)) < 50_000  # M = 10: nothing of size n
    Xd = da.from_array(Xt, chunks=150)
    np.testing.assert_allclose(local.predict_proba(Xt), got.predict_proba(Xd).compute(), rtol=0, atol=1e-10)
    np.testing.assert_allclose(local.decision_function(Xt), got.decision_function(Xt), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(local.predict(Xt), got.predict(Xd).compute())
    np.testing.assert_allclose(local.predict_proba(Xt), ref.predict_proba(Xt), rtol=1e-8, atol=1e-10)
    assert local.log_marginal_likelihood() == got.log_marginal_likelihood_value_
    with pytest.raises(ValueError, match="theta: this model was fitted on a Dask cluster"):
        local.log_marginal_likelihood(local.kernel_.theta)
    with pytest.raises(Exception, match="not fitted"):
        DaskGPClassifier().to_local()


def test_dask_decision_function_ranks_as_predict_proba(fixed_pair):
    got, _, Xt, n_plain = fixed_pair
    d, p1 = got.decision_function(Xt[:n_plain]), got.predict_proba(Xt[:n_plain])[:, 1]
    order = np.argsort(d, kind="stable")
    assert np.all(np.diff(p1[order]) >= 0.0)
    np.testing.assert_array_equal(order, np.argsort(p1, kind="stable"))
    np.testing.assert_array_equal(d > 0.0, p1 > 0.5)


def test_dask_result_is_a_sharded_result(fixed_pair):
    import dataclasses

    from relaxep.inference.sharded import ShardedResult

    got, ref, _, _ = fixed_pair
    result = got.result_
    assert isinstance(result, ShardedResult) and result.converged and result.status == "converged"
    assert isinstance(result.trace, np.ndarray) and result.n_sweeps == len(result.trace) == ref.result_.n_sweeps
    assert result.log_evidence == got.log_marginal_likelihood_value_
    assert result.log_evidence == pytest.approx(ref.result_.log_evidence, rel=1e-9)
    assert result.chol_inv.shape == (10, 10) and result.m.shape == (10,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = "max_sweeps"
    diverged = ShardedResult.diverged([0.5, 2.0])
    assert not diverged.converged and np.isnan(diverged.log_evidence) and diverged.chol_inv is None
    assert diverged.n_sweeps == 2


def test_dask_deprecated_attributes_warn_and_still_answer(fixed_pair):
    got = fixed_pair[0]
    for name, field in [("status_", "status"), ("n_sweeps_", "n_sweeps"), ("trace_", "trace")]:
        with pytest.warns(FutureWarning, match=rf"use result_\.{field} instead; removed in 0\.4"):
            value = getattr(got, name)
        np.testing.assert_array_equal(value, getattr(got.result_, field))
    assert not hasattr(DaskGPClassifier(), "status_")  # unfitted: absent, as other fitted attributes


class _NoCluster:
    """A client that fails on any use: the parameters are checked before any Dask work."""

    def __getattr__(self, name):
        raise AssertionError(f"the cluster was used ({name}) before the parameters were checked")


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"likelihood": "probit"}, TypeError, r"likelihood must be None or a binary .*Probit\(\).*not a name"),
        ({"likelihood": Gaussian()}, TypeError, "likelihood must be None or a binary"),
        ({"kernel": "rbf"}, TypeError, "kernel must be a scikit-learn Kernel"),
        ({"rule": "auto"}, TypeError, "rule must be a SiteRule .*'auto' and inference methods .*one process"),
        ({"rule": ConvergentEP()}, TypeError, "rule must be a SiteRule"),
        ({"kernel": C(1.0) * Matern(1.0)}, TypeError, "kernel: learning a sparse GP's kernel"),
        ({"max_sweeps": 0}, ValueError, "max_sweeps"),
    ],
    ids=["likelihood-str", "likelihood-regression", "kernel-str", "rule-auto", "rule-method", "kernel-no-gradient",
         "max_sweeps"],
)  # fmt: skip
def test_dask_refuses_bad_parameters_before_any_dask_work(data, params, error, match):
    X, y, _ = data
    with pytest.raises(error, match=match):
        DaskGPClassifier(client=_NoCluster(), **params).fit(X, y)


def test_the_local_estimator_takes_each_parameter_it_shares_with_the_dask_estimator():
    """``to_local``'s GPClassifier is built with every parameter the two estimators share, the objects given (the
    client, ``min_step`` and ``timeout`` are the cluster's)."""
    given = dict(
        kernel=RBF(2.0), likelihood=Probit(), rule=PowerEP(0.5), inducing_points=7, learn_inducing_points=False,
        inducing_init="random", optimizer=None, optimizer_subset=300, optimizer_maxiter=9, max_sweeps=11, tol=1e-3,
        jitter=1e-5, random_state=3, prior=HalfStudentT(4.0, 2.0),
    )  # fmt: skip
    assert given.keys() == DaskGPClassifier().get_params().keys() - {"client", "min_step", "timeout"}
    local = DaskGPClassifier(min_step=0.5, timeout=5.0, **given)._local_of(GPClassifier)
    assert type(local) is GPClassifier and all(local.get_params()[k] is v for k, v in given.items())


def test_dask_defaults_are_gpclassifiers_but_the_documented_ones():
    """Every parameter both estimators take has GPClassifier's default, except the two the class docstring
    gives a reason for (a cluster is for sparse fits; the evidence is learned on a subset on the client)."""
    ours, theirs = DaskGPClassifier().get_params(), GPClassifier().get_params()
    differ = {k for k in ours.keys() & theirs.keys() if ours[k] != theirs[k]}
    assert differ == {"inducing_points", "optimizer_subset"}
    assert ours["optimizer"] == "auto" and ours["rule"] is None  # None: EP() (GPClassifier's None: "auto")


def test_dask_non_convergence_warning_names_the_callers_file(client, data):
    """Models report, estimators warn: the warning of a fit stopped at max_sweeps points at this line."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    X, y, _ = data
    clf = DaskGPClassifier(client=client, kernel=C(2.0) * RBF(1.0), optimizer=None, inducing_points=8, max_sweeps=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.fit(da.from_array(X, chunks=(400, 3)), da.from_array(y, chunks=400))
    ours = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert clf.result_.status == "max_sweeps" and np.isnan(clf.result_.log_evidence)
    assert ours and all(w.filename == __file__ for w in ours)
