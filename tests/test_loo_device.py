"""``loo()`` and ``loo_predict()`` of fits on another array library (issue 53: leave-one-out "runs on array-API arrays
where the fit did"): the one-process estimators fitted on array-api-strict arrays (a device that refuses numpy's
implicit conversion, as a GPU's does) and on torch CPU tensors give the numpy fit's leave-one-out to 1e-8, and their
results are comparable with the numpy fit's (the same rows' fingerprint)."""

from __future__ import annotations

import json

import pytest

from problems import DEVICE_ARRAYS

pytest.importorskip("array_api_compat")

_SCRIPT = (
    """
import json, sys, warnings
import numpy as np, sklearn
from sklearn.gaussian_process.kernels import RBF, ConstantKernel as C
from relaxep import GPClassifier, GPRegressor, Probit, StudentT, compare
from relaxep._xp import to_numpy
"""
    + DEVICE_ARRAYS
    + """warnings.simplefilter("ignore")
rng = np.random.default_rng(3)
X = rng.normal(size=(150, 2))
labels = (np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=150) > 0).astype(np.int64)
y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=150)
y[:8] += 4.0  # outliers for the Student-t
cases = {
    "sparse_probit_fixed": lambda: GPClassifier(C(1.2) * RBF([0.8, 1.1]), Probit(), inducing_points=X[::10].copy(),
                                                optimizer=None, tol=1e-10),
    "exact_regressor": lambda: GPRegressor(C(1.2) * RBF([0.8, 1.1]), alpha=1e-2, optimizer=None, normalize_y=True),
    "student_t_regressor": lambda: GPRegressor(C(1.2) * RBF([0.8, 1.1]), likelihood=StudentT(), optimizer=None,
                                               tol=1e-10),
}
def gap(a, b):
    a, b = np.asarray(to_numpy(a), dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1.0)))
out = {}
for name, make in cases.items():
    target = labels if "probit" in name else y
    ref = make().fit(X, target)
    want, want_predict = ref.loo(), ref.loo_predict()
    with sklearn.config_context(array_api_dispatch=True):
        est = make().fit(lib(X), lib(target))
        got, got_predict = est.loo(), est.loo_predict()
    row = {"kind": type(est.X_train_).__module__.split(".")[0]}
    row["pointwise"] = gap(got.pointwise, want.pointwise)
    row["in_sample"] = gap(got.in_sample, want.in_sample)
    row["elpd"] = abs(got.elpd_loo - want.elpd_loo) / abs(want.elpd_loo)
    row["mean"] = gap(got_predict.mean, want_predict.mean)
    row["var"] = gap(got_predict.var, want_predict.var)
    if want_predict.proba is not None:
        row["proba"] = gap(got_predict.proba, want_predict.proba)
    row["same_rows"] = got.fingerprint == want.fingerprint
    row["compared"] = float(np.max(np.abs(compare({"numpy": want, "device": got}).elpd_diff)))
    out[name] = row
print(json.dumps(out))
"""
)


# torch, where installed, with the slow studies (a second library through the same end-to-end script: array-api-strict
# is the stricter, and the one the test extra installs)
@pytest.mark.parametrize("library", ["array_api_strict", pytest.param("torch", marks=pytest.mark.slow)])
def test_loo_of_a_fit_on_another_library_is_the_numpy_fits(array_api_python, library):
    """A sparse GPClassifier at a fixed kernel, the exact GPRegressor (closed form, ``normalize_y``) and a Student-t
    EP regressor, each fitted on ``library``'s arrays (SciPy's array API on, scikit-learn's dispatch on): loo()'s
    pointwise and in-sample densities and loo_predict()'s moments and class probabilities equal the numpy fit's to
    1e-8 (relative, or absolute below 1), and the two results compare as fits of the same rows."""
    pytest.importorskip(library)
    run = array_api_python.run(_SCRIPT, library)  # (fails with the script's error if it exits non-zero)
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(out) == {"sparse_probit_fixed", "exact_regressor", "student_t_regressor"}
    for name, row in out.items():
        assert row["kind"] == library.split("_")[0].replace("array", "array_api_strict"), (name, row)
        for key in ("pointwise", "in_sample", "elpd", "mean", "var", "proba"):
            assert row.get(key, 0.0) < 1e-8, (name, key, row)
        assert row["same_rows"] and row["compared"] < 1e-8, (name, row)
    assert "proba" in out["sparse_probit_fixed"]
