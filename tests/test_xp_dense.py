"""The dense representation and the closed-form regressor on another array library (``array-api-strict`` on
the CPU, torch where installed), each against a closed form computed in numpy by inverses (small n) or
scikit-learn's kernel gradient, and the estimators end to end against the numpy path."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

import relaxep._xp as rxp
from problems import DEVICE_ARRAYS
from relaxep.errors import ImproperPosteriorError
from relaxep.posterior import DensePrior, as_prior
from relaxep.posterior.dense_device import DeviceDensePosterior, DeviceDensePrior, rbf_trace_gradient
from relaxep.posterior.rbf import as_scaled_rbf

xs = pytest.importorskip("array_api_strict")
pytest.importorskip("array_api_compat")


def _strict(a):
    return xs.asarray(np.asarray(a, dtype=np.float64))


def _numpy(a):
    return np.from_dlpack(a)


def _problem(n=60, negative=0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    kernel = C(1.3) * RBF([0.8, 1.7])
    K = kernel(X) + 1e-6 * np.eye(n)
    tau = rng.uniform(0.2, 4.0, n)
    tau[:negative] = -0.05  # legal EP sites of a non-log-concave likelihood
    return X, kernel, K, tau, rng.normal(size=n)


def _closed_form(K, tau, nu):
    """The Gaussian N(K^-1 + T) by inverses: the posterior's covariance, mean and log|I + K T|."""
    A = np.linalg.inv(np.linalg.inv(K) + np.diag(tau))
    return A, A @ nu, np.linalg.slogdet(np.eye(len(tau)) + K @ np.diag(tau))


@pytest.mark.parametrize("negative", [0, 3])
def test_the_dense_posterior_in_another_library_is_the_gaussian_of_its_sites(dispatch, negative):
    X, kernel, K, tau, nu = _problem(negative=negative)
    A, mean, (sign, log_det) = _closed_form(K, tau, nu)
    post = DensePrior(_strict(K)).posterior(tau, nu)
    assert isinstance(post, DeviceDensePosterior)
    for prior in (DensePrior(_strict(K)), as_prior(_strict(K))):  # the device twin, chosen once
        assert isinstance(prior, DeviceDensePrior) and not prior.space.on_host
    assert type(DensePrior(K)) is DensePrior and type(as_prior(K)) is DensePrior
    np.testing.assert_allclose(post.marginal_var, np.diag(A), rtol=1e-8)
    np.testing.assert_allclose(post.mean, mean, rtol=1e-8, atol=1e-10)
    assert sign > 0 and post.log_det_b() == pytest.approx(log_det, rel=1e-10)
    np.testing.assert_allclose(_numpy(post.cov), A, rtol=1e-8, atol=1e-10)
    # predictions: K_* (K + T^-1)^-1 K_*^T by an inverse
    X_test = np.random.default_rng(1).normal(size=(7, 2))
    Ks, Kss = kernel(X_test, X), kernel(X_test)
    reduce = Ks @ np.linalg.inv(K + np.diag(1.0 / tau)) @ Ks.T
    alpha = np.linalg.solve(K, mean)
    m, v = post.predict_latent(_strict(Ks), _strict(np.diag(Kss)))
    np.testing.assert_allclose(_numpy(m), Ks @ alpha, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(_numpy(v), np.diag(Kss - reduce), rtol=1e-7, atol=1e-10)
    m, cov = post.predict_latent_cov(_strict(Ks), Kss)
    np.testing.assert_allclose(_numpy(cov), Kss - reduce, rtol=1e-7, atol=1e-10)


def test_improper_sites_are_refused_in_another_library(dispatch):
    *_, K, tau, nu = _problem()
    tau[:5] = -50.0  # far more negative precision than the prior allows
    with pytest.raises(ImproperPosteriorError):
        DensePrior(_strict(K)).posterior(tau, nu)


@pytest.mark.parametrize(
    "kernel", [C(1.3) * RBF([0.8, 1.7]), RBF(0.9) * C(0.7), RBF([0.5, 2.0]), C(2.0, "fixed") * RBF(1.1)]
)
def test_the_rbf_trace_gradient_is_scikit_learns_kernel_gradient(dispatch, kernel):
    """1/2 tr(M dK/dtheta) in closed form against scikit-learn's dK (the ground truth of the kernel's derivative)."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 2))
    M = rng.normal(size=(40, 40))
    M = M + M.T
    K, dK = kernel(X, eval_gradient=True)
    want = 0.5 * np.einsum("ij,jik->k", M, dK)
    got = rbf_trace_gradient(rxp.namespace(_strict(K)), _strict(M), _strict(K), _strict(X), as_scaled_rbf(kernel, 2))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_the_device_evidence_gradient_is_numpys(dispatch):
    X, kernel, _, tau, nu = _problem(negative=2)
    want = DensePrior.from_kernel(kernel, X, 1e-6, eval_gradient=True)
    got = DensePrior.from_kernel(kernel, _strict(X), 1e-6)
    assert got.kernel_gradient is None and not isinstance(got.K, np.ndarray)
    g_want = want.posterior(tau, nu).evidence_gradient(want.kernel_gradient)
    g_got = got.posterior(tau, nu).evidence_gradient(_strict(X), as_scaled_rbf(kernel, 2), 1e-6)
    np.testing.assert_allclose(g_got, g_want, rtol=1e-8)
    # one signature for both representations (review 4.4): each reads what it needs from its prior
    np.testing.assert_array_equal(want.posterior(tau, nu).prior_evidence_gradient(want, kernel), g_want)
    np.testing.assert_array_equal(got.posterior(tau, nu).prior_evidence_gradient(got, kernel), g_got)
    plain = DensePrior.from_kernel(kernel, X, 1e-6)
    with pytest.raises(ValueError, match="eval_gradient"):
        plain.posterior(tau, nu).prior_evidence_gradient(plain, kernel)


def test_a_dense_prior_that_cannot_fit_on_the_device_is_refused_before_the_allocation(dispatch, monkeypatch):
    from relaxep import MemoryLimitError
    from relaxep.posterior import dense_device

    monkeypatch.delenv("RELAXEP_MAX_MEMORY", raising=False)
    monkeypatch.setattr(rxp, "device_free_memory", lambda like: 1e6)  # a device with 1 MB free
    calls = []
    real = dense_device.rbf
    monkeypatch.setattr(dense_device, "rbf", lambda *a: calls.append(1) or real(*a))
    X = _strict(np.random.default_rng(8).normal(size=(2000, 2)))
    with pytest.raises(MemoryLimitError, match=r"n = 2000 points.*inducing"):
        DensePrior.from_kernel(RBF(1.0), X)
    assert not calls


_SCRIPT = (
    """
import json, sys, warnings
import numpy as np, sklearn
from sklearn.gaussian_process.kernels import RBF, ConstantKernel as C
from relaxep import GPClassifier, GPRegressor, Probit, StudentT, Gaussian, Laplace, RelaxedEP
from relaxep._xp import to_numpy
"""
    + DEVICE_ARRAYS
    + """warnings.simplefilter("ignore")
rng = np.random.default_rng(3)
X, X_test = rng.normal(size=(80, 2)), rng.normal(size=(30, 2))
labels = (np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=80) > 0).astype(np.int64)
y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=80)
y[:8] += 4.0  # outliers for the Student-t
theta = np.log([1.4, 0.7, 1.3])
out = {}
def gap(a, b):
    return float(np.max(np.abs(to_numpy(a) - np.asarray(b))))
cases = {
    "probit_fixed": lambda: GPClassifier(C(1.2) * RBF([0.8, 1.1]), Probit(), optimizer=None, tol=1e-10),
    "rep_fixed": lambda: GPClassifier(C(1.2) * RBF([0.8, 1.1]), Probit(), rule=RelaxedEP(), optimizer=None,
                                    tol=1e-10),
    "probit_learned": lambda: GPClassifier(C(1.0) * RBF([1.0, 1.0]), Probit(), optimizer_maxiter=15),
    "exact_fixed": lambda: GPRegressor(C(1.2) * RBF([0.8, 1.1]), alpha=1e-2, optimizer=None),
    "exact_learned": lambda: GPRegressor(C(1.0) * RBF([1.0, 1.0]), likelihood=Gaussian(0.1), normalize_y=True),
    "sparse_student_fixed": lambda: GPRegressor(C(1.2) * RBF([0.8, 1.1]), likelihood=StudentT(),
                                               inducing_points=X[::10].copy(), optimizer=None, tol=1e-10),
    "laplace_fixed": lambda: GPRegressor(C(1.2) * RBF([0.8, 1.1]), likelihood=Laplace(), optimizer=None, tol=1e-10),
    "student_fixed": lambda: GPRegressor(C(1.2) * RBF([0.8, 1.1]), likelihood=StudentT(), optimizer=None,
                                        tol=1e-10),
}
if sys.argv[1] == "array_api_strict":  # (REP's quadrature costs ~4 ms an op there: test_device_relaxed has its loop)
    del cases["rep_fixed"]
for name, make in cases.items():
    target = labels if "probit" in name or "rep" in name else y
    ref = make().fit(X, target)
    with sklearn.config_context(array_api_dispatch=True):
        est = make().fit(lib(X), lib(target))
        row = {"kind": type(est.X_train_).__module__.split(".")[0], "device": str(est.X_train_.device)}
        if isinstance(est, GPClassifier):
            p = est.predict_proba(lib(X_test))
            row["out_kind"] = type(p).__module__.split(".")[0]
            row["out_device"] = str(p.device)
            row["predict"] = gap(p, ref.predict_proba(X_test))
        else:
            m, s = est.predict(lib(X_test), return_std=True)
            m0, s0 = ref.predict(X_test, return_std=True)
            row["out_kind"] = type(m).__module__.split(".")[0]
            row["out_device"] = str(m.device)
            row["predict"] = max(gap(m, m0), gap(s, s0))
            row["cov"] = gap(est.predict(lib(X_test), return_cov=True)[1], ref.predict(X_test, return_cov=True)[1])
            row["lpd"] = gap(est.log_predictive_density(lib(X_test), lib(np.sin(2 * X_test[:, 0]))),
                             ref.log_predictive_density(X_test, np.sin(2 * X_test[:, 0])))
        row["evidence"] = abs(est.log_marginal_likelihood_value_ - ref.log_marginal_likelihood_value_)
        row["theta"] = gap(est.kernel_.theta, ref.kernel_.theta)
        at = theta if est.kernel_.theta.size == 3 else np.append(theta, 0.0)
        lml, grad = est.log_marginal_likelihood(at, eval_gradient=True)  # (sparse: the FITC gradient on the device)
        lml0, grad0 = ref.log_marginal_likelihood(at, eval_gradient=True)
        row["grad_at"] = float(np.max(np.abs(grad - grad0)) / np.max(np.abs(grad0)))
        row["lml_at"] = abs(lml - lml0) / abs(lml0)
    out[name] = row
print(json.dumps(out))
"""
)


# torch, where installed, with the slow studies (a second library through the same end-to-end script: array-api-strict
# is the stricter, and the one the test extra installs)
@pytest.mark.parametrize("library", ["array_api_strict", pytest.param("torch", marks=pytest.mark.slow)])
def test_dense_estimators_on_another_library_fit_there_and_answer_as_on_numpy(array_api_python, library):
    """scikit-learn's convention end to end for dense models: probit EP and REP at a fixed kernel, L-BFGS-B on
    the EP evidence, the closed-form regressor (fixed and learned), Student-t EP: numpy's fixed point to 1e-8
    (converged to tol = 1e-10: the numpy path's early sweeps factor in single precision, so only the fixed
    point, not the path to it, is shared), the evidence and its gradient at a given theta always.  (REP runs on torch
    only: on array-api-strict, where each op costs milliseconds, test_device_relaxed runs its loop.)"""
    pytest.importorskip(library)
    run = array_api_python.run(_SCRIPT, library)
    out = json.loads(run.stdout.strip().splitlines()[-1])
    kind = "array_api_strict" if library == "array_api_strict" else "torch"
    assert len(out) == (7 if library == "array_api_strict" else 8)
    for name, row in out.items():
        assert row["kind"] == row["out_kind"] == kind and row["device"] == row["out_device"], name
        assert row["lml_at"] < 1e-8 and row["grad_at"] < 1e-7, (name, row)
        if "learned" in name:  # the optimiser's path amplifies roundoff: the same optimum, to its tolerance
            assert row["theta"] < 1e-3 and row["predict"] < 1e-4, (name, row)
        else:
            assert row["theta"] == 0.0 and row["predict"] < 1e-8 and row["evidence"] < 1e-8, (name, row)
        if "cov" in row and "learned" not in name:
            assert row["cov"] < 1e-8 and row["lpd"] < 1e-8, (name, row)
