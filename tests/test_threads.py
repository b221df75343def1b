"""Small-matrix loops run with one BLAS thread, and the caller's thread settings come back unchanged."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from threadpoolctl import threadpool_info, threadpool_limits

import relaxep.estimators._stochastic as stochastic
from relaxep import GPClassifier, GPRegressor, Probit, SparsePrior
from relaxep._blas import rows_solve_lower_t, rows_times_lower_t, syrk_rows
from relaxep._threads import each_block, fold_blocks


def _blas_threads() -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_the_stochastic_step_runs_on_one_blas_thread_and_restores_the_callers_setting(monkeypatch):
    seen = []
    real = stochastic.inducing_factor

    def spy(*args, **kwargs):
        seen.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(stochastic, "inducing_factor", spy)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(int)
    clf = GPClassifier(C(1.0) * RBF(1.0), Probit(), inducing_points=8, optimizer="stochastic", optimizer_maxiter=5)
    with threadpool_limits(limits=2, user_api="blas"):
        caller = _blas_threads()
        clf.fit(X, y)
        after = _blas_threads()
    assert seen and all(threads == [1] * len(threads) for threads in seen[:5])  # the learning loop's steps
    assert after == caller


# ------------------------------------------------------------------ the thread count
def test_n_jobs_follows_scikit_learns_convention_and_none_uses_the_machine(monkeypatch):
    import joblib

    from relaxep._threads import n_threads

    cores = joblib.cpu_count()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert n_threads(None) == cores
    assert n_threads(-1) == cores
    assert n_threads(3) == 3
    assert n_threads(-cores - 5) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert n_threads(None) == 1  # as scikit-learn's OpenMP estimators read it
    for bad in (0, 1.5, "2", True):
        with pytest.raises(ValueError, match="n_jobs"):
            n_threads(bad)


@pytest.mark.parametrize("make", [lambda: GPClassifier(n_jobs=0), lambda: GPRegressor(n_jobs="all")])
def test_estimators_refuse_a_bad_n_jobs_naming_it(make):
    X = np.linspace(0, 1, 10)[:, None]
    with pytest.raises(ValueError, match="n_jobs"):
        make().fit(X, (X[:, 0] > 0.5).astype(int))


# ------------------------------------------------------------------ the blocks
def test_the_blocks_run_on_separate_threads_at_once():
    """Two blocks that each wait for the other finish only if two threads run them together."""
    barrier = threading.Barrier(2, timeout=10)
    seen = []

    def work(block):
        barrier.wait()
        seen.append((block, threading.get_ident(), _blas_threads()))

    each_block(work, [0, 1], n_jobs=2)
    assert sorted(b for b, _, _ in seen) == [0, 1]
    assert len({ident for _, ident, _ in seen}) == 2
    assert all(threads == [1] * len(threads) for _, _, threads in seen)  # one BLAS thread per block


def test_fold_combines_the_parts_in_block_order_whatever_finishes_first():
    rng = np.random.default_rng(0)
    delays = rng.uniform(0.0, 0.01, size=12)

    def part(i):
        time.sleep(delays[i])
        return [i]

    for jobs in (1, 2, 5):
        assert fold_blocks(part, list(range(12)), jobs, lambda a, b: a + b) == list(range(12))


def test_an_error_in_a_block_is_raised_and_the_callers_blas_setting_comes_back():
    def work(i):
        if i == 3:
            raise RuntimeError("block 3")
        return np.ones((50, 50)) @ np.ones((50, 50))

    with threadpool_limits(limits=2, user_api="blas"):
        caller = _blas_threads()
        with pytest.raises(RuntimeError, match="block 3"):
            each_block(work, list(range(8)), n_jobs=2)
        assert _blas_threads() == caller


# ------------------------------------------------------------------ BLAS without the GIL
def test_the_gil_free_blas_calls_agree_with_numpy_and_leave_their_input_alone():
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(300, 40))
    lower = np.tril(rng.normal(size=(40, 40))) + 8.0 * np.eye(40)
    before = rows.copy()
    gram = syrk_rows(np.zeros((40, 40), order="F"), rows, -2.0)
    np.testing.assert_allclose(np.tril(gram), np.tril(-2.0 * rows.T @ rows), rtol=1e-13, atol=1e-11)
    assert np.all(np.triu(gram, 1) == 0.0)  # only the lower triangle is written
    np.testing.assert_allclose(rows_times_lower_t(lower, rows), rows @ lower.T, rtol=1e-13, atol=1e-11)
    np.testing.assert_allclose(lower @ rows_solve_lower_t(lower, rows).T, rows.T, rtol=1e-12, atol=1e-11)
    np.testing.assert_array_equal(rows, before)
    np.testing.assert_allclose(  # a C-ordered factor (the transpose's memory) reads the same matrix
        rows_times_lower_t(np.ascontiguousarray(lower), rows), rows @ lower.T, rtol=1e-13, atol=1e-11
    )


# ------------------------------------------------------------------ the same answer on any number of threads
def test_the_sparse_posterior_is_the_same_on_one_thread_and_on_two_and_is_fitcs():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(900, 3))
    Z = X[::30]
    tau, nu = rng.uniform(0.05, 2.0, 900), rng.normal(size=900)
    tau[::7] = -0.02  # negative sites (non-log-concave likelihoods) go through the same passes
    posts = [SparsePrior(X, Z, C(1.5) * RBF(0.8), chunk_size=64, n_jobs=jobs).posterior(tau, nu) for jobs in (1, 2)]
    for name in ("mean", "marginal_var"):
        np.testing.assert_allclose(getattr(posts[0], name), getattr(posts[1], name), rtol=1e-12, atol=0)
    assert abs(posts[0].log_det_b() - posts[1].log_det_b()) <= 1e-12 * abs(posts[0].log_det_b())
    # ground truth: the dense Gaussian with FITC's covariance Q + G and these sites
    cov = posts[0].prior.dense_covariance()
    A = np.linalg.inv(np.linalg.inv(cov) + np.diag(tau))
    np.testing.assert_allclose(posts[1].marginal_var, np.diag(A), rtol=1e-7)
    np.testing.assert_allclose(posts[1].mean, A @ nu, rtol=1e-7, atol=1e-9)
    X_test = rng.normal(size=(500, 3))
    preds = [post.predict_latent(*post.prior.cross_covariance(X_test)) for post in posts]
    np.testing.assert_allclose(preds[0][0], preds[1][0], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(preds[0][1], preds[1][1], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("optimizer", [None, "fmin_l_bfgs_b", "stochastic"])
def test_a_sparse_fit_gives_the_same_classifier_on_one_thread_and_on_two(optimizer):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2500, 2))
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.4 * rng.normal(size=2500) > 0.3).astype(int)
    fits = [
        GPClassifier(
            C(1.0) * RBF(1.0), Probit(), inducing_points=12, optimizer=optimizer, optimizer_maxiter=15,
            random_state=0, n_jobs=jobs,
        ).fit(X, y)
        for jobs in (1, 2)
    ]  # fmt: skip
    np.testing.assert_allclose(fits[0].kernel_.theta, fits[1].kernel_.theta, rtol=1e-12)
    np.testing.assert_allclose(fits[0].decision_function(X), fits[1].decision_function(X), rtol=1e-12, atol=1e-13)
    assert fits[0].log_marginal_likelihood_value_ == pytest.approx(fits[1].log_marginal_likelihood_value_, rel=1e-12)


def test_a_forked_child_runs_its_blocks_on_its_own_threads():
    import multiprocessing as mp

    if "fork" not in mp.get_all_start_methods():
        pytest.skip("no fork on this platform")
    each_block(lambda i: None, [0, 1, 2], n_jobs=2)  # the parent's pool exists before the fork
    with mp.get_context("fork").Pool(1) as pool:
        out = pool.apply_async(_blocks_in_child).get(timeout=30)  # a child without its own threads hangs
    assert out == [0, 1, 4, 9]


def _blocks_in_child() -> list:
    return fold_blocks(lambda i: [i * i], [0, 1, 2, 3], 2, lambda a, b: a + b)


def test_limits_entered_and_left_out_of_order_by_two_threads_give_the_callers_setting_back():
    """Thread A enters, B enters, A leaves, B leaves: the caller's setting is back at the end
    (threadpoolctl's limits are the process's; OpenBLAS may ignore a setting made from a second thread,
    so what B's block sees in between is not asserted)."""
    from relaxep._threads import small_matrix_threads

    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with small_matrix_threads():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def second():
        a_in.wait(10)
        with small_matrix_threads():
            b_in.set()
            a_out.wait(10)
            seen["after A left"] = _blas_threads()

    caller = _blas_threads()
    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert "after A left" in seen
    assert _blas_threads() == caller  # (each context restoring its own saved setting left BLAS at one thread)


def test_one_vs_rest_keeps_n_jobs_1_on_one_thread():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(90, 2))
    y = np.repeat([0, 1, 2], 30)
    clf = GPClassifier(C(1.0) * RBF(1.0), multi_class="one_vs_rest", optimizer=None, n_jobs=1).fit(X, y)
    assert [e.n_jobs for e in clf.estimators_] == [1, 1, 1]


def test_the_gil_free_blas_refuses_a_factor_of_the_wrong_size():
    rows = np.ones((4, 5))
    with pytest.raises(ValueError, match="5 x 5"):
        rows_times_lower_t(np.eye(3), rows)
    with pytest.raises(ValueError, match="5 x 5"):
        syrk_rows(np.zeros((3, 3), order="F"), rows, 1.0)
    post = SparsePrior(
        np.random.default_rng(5).normal(size=(20, 2)), np.zeros((5, 2)) + np.arange(5)[:, None], RBF(1.0)
    )
    with pytest.raises(ValueError, match=r"K_\*u must have shape \(m, 5\)"):
        post.posterior().predict_latent_cov(np.ones((3, 300)), np.eye(3))
