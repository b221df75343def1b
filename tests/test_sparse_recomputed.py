"""The FITC prior with its rows recomputed in row blocks (``SparsePrior(rows="recomputed")``): no ``n x M``
array held, the stored prior's answers (posterior pass, EP, predictions, gradient) on numpy and on another
array library (``array-api-strict``), and ``rows="auto"`` choosing by the memory guard."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

import relaxep._xp as rxp
from relaxep import EP, MemoryLimitError, Probit, infer
from relaxep._memory import ENV_VAR
from relaxep.errors import ImproperPosteriorError
from relaxep.posterior import SparsePrior, fitc_blocks, fitc_prior, fitc_rows
from relaxep.posterior.fitc_blocks import recomputed_bytes, stored_bytes
from relaxep.posterior.sparse_gradient import sparse_evidence_gradient

KERNEL = C(1.7) * RBF([0.8, 1.3])
NOISE = 1e-3
OUTPUTS = ("chol", "chol_inv", "m", "b", "log_det", "mean", "var")


def _problem(n: int = 150, m: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    X, Z = rng.normal(size=(n, 2)), rng.normal(size=(m, 2))
    y = np.where(np.sin(2.0 * X[:, 0]) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    tau, nu = rng.uniform(0.1, 2.0, n), rng.normal(size=n)
    tau[::11] = -0.05  # negative sites: d_i = 1 + g_i tau_i still positive
    return X, Z, y, tau, nu


def _pair(X, Z, **options):
    return tuple(SparsePrior(X, Z, KERNEL, latent_noise=NOISE, rows=r, **options) for r in ("stored", "recomputed"))


def _assert_outputs(got, want, rtol, atol=0.0):
    """Each output to ``rtol`` elementwise, or to ``rtol`` of its largest entry (``atol`` at least)."""
    for name, g_, w_ in zip(OUTPUTS, got, want, strict=True):
        scale = rtol * float(np.max(np.abs(_host(w_))))
        np.testing.assert_allclose(_host(g_), _host(w_), rtol=rtol, atol=max(atol, scale), err_msg=name)


def _host(a):
    return a if isinstance(a, (float, np.ndarray)) else np.from_dlpack(a)


# ------------------------------------------------------------------ numpy
@pytest.mark.parametrize("conditional", ["fitc", "dtc"])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_recomputed_rows_give_the_stored_posterior_pass(conditional, n_jobs):
    X, Z, _, tau, nu = _problem()
    stored, recomputed = _pair(X, Z, chunk_size=7, n_jobs=n_jobs, conditional=conditional)  # 22 blocks
    assert (stored.rows, recomputed.rows) == ("stored", "recomputed")
    assert recomputed.Vt is None and stored.Vt.shape == (150, 12)
    assert (recomputed.n, recomputed.n_inducing) == (150, 12)
    np.testing.assert_array_equal(recomputed.g, stored.g)
    assert recomputed.trace_gap == stored.trace_gap and (conditional == "fitc") == (stored.trace_gap == 0.0)
    rows, g = recomputed.row_block(slice(14, 21))
    np.testing.assert_allclose(rows, stored.Vt[14:21], rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(g, stored.g[14:21])
    want = fitc_rows.posterior_pass(stored.space, stored.Vt, stored.g, tau, nu, 7, n_jobs)  # what refresh called
    _assert_outputs(stored.posterior_pass(tau, nu), want, rtol=0.0)  # "stored": today's pass, bit for bit
    _assert_outputs(recomputed.posterior_pass(tau, nu), want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(recomputed.dense_covariance(), stored.dense_covariance(), rtol=1e-12, atol=1e-15)


def test_recomputed_rows_raise_where_the_stored_pass_raises():
    X, Z, _, tau, nu = _problem()
    stored, recomputed = _pair(X, Z, chunk_size=7)
    bad = [
        (np.where(np.arange(150) == 3, np.nan, tau), nu, "not finite"),
        (tau, np.where(np.arange(150) == 3, np.inf, nu), "not finite"),
        (np.where(np.arange(150) == 100, -2.0 / stored.g[100], tau), nu, "1 \\+ g_i tau_i"),
    ]
    dtc = _pair(X, Z, chunk_size=7, conditional="dtc")  # g = latent noise: d > 0, B indefinite
    for prior in (stored, recomputed, *dtc):
        for t, v, message in bad[: 3 if prior.conditional == "fitc" else 2]:
            with pytest.raises(ImproperPosteriorError, match=message):
                prior.posterior_pass(t, v)
    for prior in dtc:
        with pytest.raises(ImproperPosteriorError, match="not positive definite"):
            prior.posterior_pass(np.full(150, -5.0), nu)


def test_ep_predictions_and_gradient_on_recomputed_rows_are_the_stored_ones():
    X, Z, y, _, _ = _problem(seed=1)
    X_test = np.random.default_rng(2).normal(size=(40, 2))
    runs = [infer(p, y, Probit(), EP(), schedule="parallel", tol=1e-9) for p in _pair(X, Z, chunk_size=7)]
    assert runs[0].status == runs[1].status == "converged" and runs[0].n_sweeps == runs[1].n_sweeps
    np.testing.assert_allclose(runs[1].mean, runs[0].mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(runs[1].marginal_var, runs[0].marginal_var, rtol=1e-10)
    assert runs[1].log_evidence == pytest.approx(runs[0].log_evidence, rel=1e-10)
    preds = [r.posterior.prior.predict_at(r.posterior.predict_latent, X_test) for r in runs]
    for got, want in zip(preds[1], preds[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    cov = [r.posterior.predict_latent_cov(r.posterior.prior.cross_covariance(X_test)[0], KERNEL(X_test)) for r in runs]
    np.testing.assert_allclose(cov[1][1], cov[0][1], rtol=1e-10, atol=1e-12)
    grads = [sparse_evidence_gradient(r.posterior) for r in runs]  # (the row blocks of row_block)
    for got, want in zip(grads[1], grads[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_the_sequential_schedule_reads_recomputed_rows_one_at_a_time():
    X, Z, y, _, _ = _problem(n=80, seed=3)
    runs = [infer(p, y, Probit(), EP(), schedule="sequential", tol=1e-9) for p in _pair(X, Z, chunk_size=7)]
    assert runs[0].status == runs[1].status == "converged"
    np.testing.assert_allclose(runs[1].mean, runs[0].mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(runs[1].marginal_var, runs[0].marginal_var, rtol=1e-10)
    assert runs[1].log_evidence == pytest.approx(runs[0].log_evidence, rel=1e-10)


def test_rows_is_checked_and_from_kernel_passes_it_on():
    X, Z, *_ = _problem(n=30)
    with pytest.raises(ValueError, match="rows must be one of"):
        SparsePrior(X, Z, KERNEL, rows="lazy")
    prior = SparsePrior.from_kernel(KERNEL, X, Z, NOISE, rows="recomputed", chunk_size=7)
    assert prior.rows == "recomputed" and prior.Vt is None
    assert SparsePrior.from_kernel(KERNEL, X, Z, NOISE).rows == "stored"  # auto, with memory to spare


# ------------------------------------------------------------------ the memory guard
def test_auto_recomputes_the_rows_where_the_stored_rows_would_be_refused(monkeypatch):
    X, Z, _, tau, nu = _problem(n=3000, m=40, seed=4)
    need = {
        "stored": stored_bytes(rxp.HOST, 3000, 40, 7, 1),
        "recomputed": recomputed_bytes(rxp.HOST, 3000, 40, 7, 1),
    }
    assert need["recomputed"] < need["stored"] / 3  # 0.3 MB against 1.3 MB
    options = {"latent_noise": NOISE, "chunk_size": 7, "n_jobs": 1}
    monkeypatch.setenv(ENV_VAR, "inf")
    assert SparsePrior(X, Z, KERNEL, **options).rows == "stored"
    monkeypatch.setenv(ENV_VAR, str(int(0.5 * (need["recomputed"] + need["stored"]))))
    auto = SparsePrior(X, Z, KERNEL, **options)
    assert auto.rows == "recomputed" and auto.Vt is None
    assert SparsePrior(X, Z, KERNEL, rows="stored", **options).rows == "stored"  # asked for: numpy has no guard
    monkeypatch.setenv(ENV_VAR, "inf")
    stored = SparsePrior(X, Z, KERNEL, **options)
    _assert_outputs(auto.posterior_pass(tau, nu), stored.posterior_pass(tau, nu), rtol=1e-12)
    monkeypatch.setenv(ENV_VAR, str(int(0.5 * need["recomputed"])))
    for rows in ("auto", "recomputed"):
        with pytest.raises(MemoryLimitError) as info:
            SparsePrior(X, Z, KERNEL, rows=rows, **options)
        message = str(info.value)
        assert "n = 3000 rows with M = 40" in message and 'rows="recomputed"' in message
        assert "fewer inducing inputs" in message and ENV_VAR in message
        assert ('rows="stored" did not fit' in message) == (rows == "auto")


# ------------------------------------------------------------------ another array library
@pytest.fixture
def strict(monkeypatch):
    """array-api-strict with scikit-learn's ``array_api_dispatch`` on (``config_context`` where SciPy's array API
    support is on, which needs ``SCIPY_ARRAY_API=1`` before SciPy is imported; else the switch as relaxep reads
    it, as tests/test_xp.py does), and device blocks of 64 rows so that a pass has several."""
    xs = pytest.importorskip("array_api_strict")
    pytest.importorskip("array_api_compat")
    import sklearn

    monkeypatch.setattr(fitc_prior, "DEVICE_ROWS", 64)
    try:
        context = sklearn.config_context(array_api_dispatch=True)
        context.__enter__()
    except RuntimeError:  # SciPy's array API support is off in this process
        monkeypatch.setattr(rxp, "_dispatch", lambda: True)
        yield xs
        return
    try:
        yield xs
    finally:
        context.__exit__(None, None, None)


def test_recomputed_rows_on_another_library_are_numpys_stored_rows(strict, monkeypatch):
    X, Z, y, tau, nu = _problem(n=300, seed=5)
    want = SparsePrior(X, Z, KERNEL, latent_noise=NOISE, rows="stored")
    stored, recomputed = _pair(strict.asarray(X), Z)
    assert (stored.rows, recomputed.rows, recomputed.Vt) == ("stored", "recomputed", None)
    assert not isinstance(recomputed.g, np.ndarray) and not isinstance(recomputed.L_uu, np.ndarray)
    np.testing.assert_allclose(_host(recomputed.g), want.g, rtol=1e-10, atol=1e-14)
    rows, _ = recomputed.row_block(slice(60, 130))  # across a device block's edge
    np.testing.assert_allclose(_host(rows), want.Vt[60:130], rtol=1e-10, atol=1e-14)
    expected = want.posterior_pass(tau, nu)
    blocks, real = [], fitc_blocks.device_cross_kernel
    monkeypatch.setattr(fitc_blocks, "device_cross_kernel", lambda *a: blocks.append(a[2].shape[0]) or real(*a))
    got = recomputed.posterior_pass(strict.asarray(tau), strict.asarray(nu))  # the device loop's call
    assert blocks == [64, 64, 64, 64, 44] * 2  # the sums, then the marginals: a block of K_Xu at a time
    assert not isinstance(got[5], np.ndarray)  # (the marginals on the device)
    _assert_outputs(got, expected, rtol=1e-10, atol=1e-13)
    _assert_outputs(recomputed.posterior_pass(tau, nu), expected, rtol=1e-10, atol=1e-13)  # numpy sites moved
    _assert_outputs(stored.posterior_pass(strict.asarray(tau), strict.asarray(nu)), expected, rtol=1e-10, atol=1e-13)
    with pytest.raises(ImproperPosteriorError, match="1 \\+ g_i tau_i"):
        recomputed.posterior_pass(strict.asarray(np.where(np.arange(300) == 200, -2.0 / want.g[200], tau)), nu)
    runs = [infer(p, y, Probit(), EP(), schedule="parallel", tol=1e-9) for p in (want, recomputed)]
    assert runs[0].status == runs[1].status == "converged"
    np.testing.assert_allclose(runs[1].mean, runs[0].mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(runs[1].marginal_var, runs[0].marginal_var, rtol=1e-10)
    assert runs[1].log_evidence == pytest.approx(runs[0].log_evidence, rel=1e-10)
    X_test = np.random.default_rng(6).normal(size=(50, 2))
    want_pred = want.predict_at(runs[0].posterior.predict_latent, X_test)
    for x in (X_test, strict.asarray(X_test)):  # test inputs on the host, or on the device (its closed form)
        for got_, want_ in zip(recomputed.predict_at(runs[1].posterior.predict_latent, x), want_pred, strict=True):
            np.testing.assert_allclose(got_, want_, rtol=1e-10, atol=1e-12)


def test_auto_on_a_device_too_small_for_the_stored_rows_recomputes_them(strict, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    X, Z, _, tau, nu = _problem(n=2000, m=50, seed=7)
    space = rxp.namespace(strict.asarray(X))
    need = {"stored": stored_bytes(space, 2000, 50, 7, 1), "recomputed": recomputed_bytes(space, 2000, 50, 7, 1)}
    free = {"bytes": 0.5 * (need["stored"] + need["recomputed"])}  # (the host: no device memory to read)
    monkeypatch.setattr(rxp, "device_free_memory", lambda like: None if isinstance(like, np.ndarray) else free["bytes"])
    prior = SparsePrior(strict.asarray(X), Z, KERNEL, latent_noise=NOISE)
    assert prior.rows == "recomputed" and prior.Vt is None
    want = SparsePrior(X, Z, KERNEL, latent_noise=NOISE).posterior_pass(tau, nu)
    _assert_outputs(prior.posterior_pass(strict.asarray(tau), strict.asarray(nu)), want, rtol=1e-10, atol=1e-13)
    with pytest.raises(MemoryLimitError, match=r'n = 2000 rows with M = 50.*rows="stored".*rows="recomputed"'):
        SparsePrior(strict.asarray(X), Z, KERNEL, rows="stored")  # asked for: the device guard names the remedy
    free["bytes"] = 0.5 * need["recomputed"]
    with pytest.raises(MemoryLimitError, match=r'rows="recomputed".*on the device.*fewer inducing inputs.*CPU'):
        SparsePrior(strict.asarray(X), Z, KERNEL)
