"""The array-API path on a CUDA GPU (PyTorch or CuPy): skipped cleanly without one.

The same checks as ``tests/test_xp.py`` and ``tests/test_xp_dense.py`` (which run them on the CPU with
array-api-strict and PyTorch), on the device: the FITC and dense posteriors and the estimators' predictions
equal numpy's to 1e-8, and the arrays stay on the device."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from relaxep.posterior import SparsePrior  # noqa: E402


def test_the_fitc_posterior_on_the_gpu_is_numpys(dispatch):
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    rng = np.random.default_rng(0)
    X, Z = rng.normal(size=(5000, 4)), rng.normal(size=(60, 4))
    tau, nu = rng.uniform(0.1, 2.0, 5000), rng.normal(size=5000)
    kernel = C(1.5) * RBF(1.1)
    want = SparsePrior(X, Z, kernel).posterior(tau, nu)
    got = SparsePrior(torch.asarray(X, device="cuda"), Z, kernel).posterior(tau, nu)
    assert got.prior.Vt.is_cuda and got.chol_b.is_cuda
    np.testing.assert_allclose(got.mean, want.mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got.marginal_var, want.marginal_var, rtol=1e-8)
    assert got.log_det_b() == pytest.approx(want.log_det_b(), rel=1e-10)


def test_a_classifier_fitted_on_the_gpu_predicts_as_on_numpy(array_api_python):
    code = """
import numpy as np, sklearn, torch, warnings
from sklearn.gaussian_process.kernels import RBF, ConstantKernel as C
from relaxep import GPClassifier, Probit
warnings.simplefilter("ignore")
rng = np.random.default_rng(1)
X = rng.normal(size=(20000, 3)); y = (X[:, 0] + 0.4 * rng.normal(size=20000) > 0).astype(np.int64)
Xt = rng.normal(size=(500, 3))
for optimizer in (None, "stochastic"):
    make = lambda: GPClassifier(C(1.0) * RBF(1.0), Probit(), inducing_points=50, optimizer=optimizer,
                                optimizer_maxiter=100, random_state=0)
    ref = make().fit(X, y).predict_proba(Xt)
    with sklearn.config_context(array_api_dispatch=True):
        p = make().fit(torch.asarray(X, device="cuda"), torch.asarray(y, device="cuda")).predict_proba(
            torch.asarray(Xt, device="cuda"))
    assert p.is_cuda
    print(float(np.max(np.abs(p.cpu().numpy() - ref))))
"""
    out = array_api_python.run(code)
    gaps = [float(v) for v in out.stdout.split()]
    assert len(gaps) == 2 and max(gaps) < 1e-8


def test_the_dense_posterior_on_the_gpu_is_numpys(dispatch):
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from relaxep.posterior import DensePrior

    rng = np.random.default_rng(2)
    X = rng.normal(size=(3000, 4))
    tau, nu = rng.uniform(0.1, 2.0, 3000), rng.normal(size=3000)
    tau[:5] = -0.02  # negative sites enter by Woodbury on the device too
    kernel = C(1.5) * RBF(1.1)
    want = DensePrior.from_kernel(kernel, X, 1e-6).posterior(tau, nu)
    got = DensePrior.from_kernel(kernel, torch.asarray(X, device="cuda"), 1e-6).posterior(tau, nu)
    assert got.kernel.is_cuda
    np.testing.assert_allclose(got.mean, want.mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got.marginal_var, want.marginal_var, rtol=1e-8)
    assert got.log_det_b() == pytest.approx(want.log_det_b(), rel=1e-10)


def test_dense_estimators_fitted_on_the_gpu_answer_as_on_numpy(array_api_python):
    code = """
import numpy as np, sklearn, torch, warnings
from sklearn.gaussian_process.kernels import RBF, ConstantKernel as C
from relaxep import GPClassifier, GPRegressor, Probit, StudentT
warnings.simplefilter("ignore")
rng = np.random.default_rng(4)
X = rng.normal(size=(2000, 3)); f = np.sin(2 * X[:, 0])
labels = (f + 0.4 * rng.normal(size=2000) > 0).astype(np.int64); y = f + 0.1 * rng.normal(size=2000)
Xt = rng.normal(size=(300, 3))
cuda = lambda a: torch.asarray(a, device="cuda")
cases = [
    (lambda: GPClassifier(C(1.0) * RBF(1.0), Probit(), optimizer=None, tol=1e-10), labels, "predict_proba"),
    (lambda: GPRegressor(C(1.0) * RBF(1.0), alpha=1e-2, optimizer=None), y, "predict"),
    (lambda: GPRegressor(C(1.0) * RBF(1.0), likelihood=StudentT(), optimizer=None, tol=1e-10), y, "predict"),
]
for make, target, method in cases:
    ref = getattr(make().fit(X, target), method)(Xt)
    with sklearn.config_context(array_api_dispatch=True):
        p = getattr(make().fit(cuda(X), cuda(target)), method)(cuda(Xt))
    assert p.is_cuda
    print(float(np.max(np.abs(p.cpu().numpy() - ref))))
"""
    out = array_api_python.run(code)
    gaps = [float(v) for v in out.stdout.split()]
    assert len(gaps) == 3 and max(gaps) < 1e-8
