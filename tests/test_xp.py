"""The array-API path on the CPU: the helpers the standard lacks, and FITC's pure functions in another
array library (``array-api-strict``), each against SciPy/numpy or a closed form."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg, special

import relaxep._xp as rxp
from relaxep.errors import ImproperPosteriorError
from relaxep.posterior import fitc_rows as fitc

xs = pytest.importorskip("array_api_strict")
pytest.importorskip("array_api_compat")


def _strict(a):
    return xs.asarray(np.asarray(a, dtype=np.float64))


def _numpy(a):
    return np.from_dlpack(a)


def test_numpy_arrays_stay_on_numpys_path_with_or_without_dispatch(monkeypatch):
    assert rxp.namespace(np.ones(3)) is rxp.HOST
    assert (rxp.HOST.xp, rxp.HOST.on_host, rxp.HOST.device) == (np, True, None)
    monkeypatch.setattr(rxp, "_dispatch", lambda: True)
    assert rxp.namespace(np.ones(3), np.eye(2)) is rxp.HOST
    space = rxp.namespace(_strict([1.0]), None)
    assert space.on_host is False and space.device == _strict([1.0]).device


def test_an_array_space_pickles_by_its_librarys_name(dispatch):
    import pickle

    for space in (rxp.HOST, rxp.namespace(_strict([1.0]))):
        assert pickle.loads(pickle.dumps(space)) == space


def test_arrays_of_two_libraries_are_refused(dispatch):
    with pytest.raises(TypeError):
        rxp.namespace(_strict([1.0]), np.ones(1))


# ------------------------------------------------------------------ what the standard lacks
@pytest.mark.parametrize("xp", [np, xs], ids=["numpy", "array-api-strict"])
def test_cholesky_factor_or_none(xp):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(6, 6))
    spd = a @ a.T + 6 * np.eye(6)
    arr = spd if xp is np else _strict(spd)
    factor = np.asarray(_numpy(rxp.cholesky_lower(xp, arr)) if xp is xs else rxp.cholesky_lower(xp, arr))
    np.testing.assert_allclose(factor @ factor.T, spd, rtol=1e-13)
    assert np.all(np.triu(factor, 1) == 0.0)
    indefinite = spd - 20 * np.eye(6)
    assert rxp.cholesky_lower(xp, indefinite if xp is np else _strict(indefinite)) is None


@pytest.mark.parametrize("trans", [False, True])
def test_triangular_solves_agree_with_scipy(trans):
    rng = np.random.default_rng(1)
    lower = np.tril(rng.normal(size=(7, 7))) + 5 * np.eye(7)
    b = rng.normal(size=(7, 3))
    expected = linalg.solve_triangular(lower, b, lower=True, trans=1 if trans else 0)
    got = _numpy(rxp.solve_lower(xs, _strict(lower), _strict(b), trans=trans))
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose((lower.T if trans else lower) @ got, b, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", ["log_ndtr", "erfcx"])
def test_special_functions_agree_with_scipy_in_both_tails(name):
    x = np.array([-40.0, -8.0, -1.0, 0.0, 1.0, 8.0, 40.0])
    got = _numpy(getattr(rxp, name)(xs, _strict(x)))
    np.testing.assert_allclose(got, getattr(special, name)(x), rtol=1e-14)
    if name == "log_ndtr":
        assert np.isfinite(got).all()  # log Phi(-40) = -804.6, not -inf


# ------------------------------------------------------------------ FITC's pure functions
def _problem(n=300, m=12, seed=2):
    rng = np.random.default_rng(seed)
    Vt = 0.3 * rng.normal(size=(n, m))
    g = rng.uniform(0.05, 0.5, n)
    tau = rng.uniform(0.1, 2.0, n)
    tau[::9] = -0.05  # negative site precisions (Student-t) take the same functions
    nu = rng.normal(size=n)
    return Vt, g, tau, nu


def _posterior(Vt, g, tau, nu):
    space = rxp.namespace(Vt)
    gram, b, log_d, d_min = fitc.natural_sums(space, Vt, g, tau, nu)
    chol, chol_inv, m = fitc.factor_b(space, gram, b)
    mean, var = fitc.shard_marginals(space, Vt, g, tau, nu, chol_inv, m)
    return chol, chol_inv, m, mean, var, log_d, d_min


def test_the_fitc_posterior_in_another_library_is_numpys_and_the_dense_gaussians(dispatch):
    Vt, g, tau, nu = _problem()
    ours = _posterior(*(_strict(a) for a in (Vt, g, tau, nu)))
    assert not isinstance(ours[3], np.ndarray)  # computed in array-api-strict
    reference = _posterior(Vt, g, tau, nu)
    for got, want in zip(ours[:5], reference[:5], strict=True):
        np.testing.assert_allclose(_numpy(got), want, rtol=1e-10, atol=1e-12)
    assert ours[5] == pytest.approx(reference[5], rel=1e-12)
    # ground truth: N(0, Q + G) with the sites, dense
    A = np.linalg.inv(np.linalg.inv(Vt @ Vt.T + np.diag(g)) + np.diag(tau))
    np.testing.assert_allclose(_numpy(ours[4]), np.diag(A), rtol=1e-8)
    np.testing.assert_allclose(_numpy(ours[3]), A @ nu, rtol=1e-8, atol=1e-10)


def test_fitc_prediction_in_another_library_is_numpys(dispatch):
    Vt, g, tau, nu = _problem()
    rng = np.random.default_rng(3)
    a = rng.normal(size=(12, 12))
    K_uu = a @ a.T + 12 * np.eye(12)
    L_uu = np.linalg.cholesky(K_uu)
    K_su, k_ss = rng.normal(size=(40, 12)), rng.uniform(2.0, 3.0, 40)
    _, chol_inv, m, *_ = _posterior(Vt, g, tau, nu)
    want = fitc.predict_rows(rxp.HOST, L_uu, m, chol_inv, K_su, k_ss)
    got = fitc.predict_rows(rxp.namespace(_strict(K_su)), *(_strict(x) for x in (L_uu, m, chol_inv, K_su, k_ss)))
    for g_, w_ in zip(got, want, strict=True):
        np.testing.assert_allclose(_numpy(g_), w_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(  # ground truth: a_* = L^-1 k_u*, mean a_*^T m, var k** - |a|^2 + |L_B^-1 a|^2
        want[1],
        k_ss
        - np.sum((K_su @ np.linalg.inv(L_uu).T) ** 2, 1)
        + np.sum((K_su @ np.linalg.inv(L_uu).T @ chol_inv.T) ** 2, 1),
        rtol=1e-10,
    )


def test_an_improper_fitc_posterior_is_refused_in_another_library(dispatch):
    Vt, g, _, nu = _problem()
    tau = np.full(g.shape, -1.5)  # every d_i = 1 + g_i tau_i > 0, but B = I + V W V^T is indefinite
    space = rxp.namespace(_strict(Vt))
    gram, b, _, d_min = fitc.natural_sums(space, *(_strict(a) for a in (Vt, g, tau, nu)))
    assert d_min > 0.0
    with pytest.raises(ImproperPosteriorError):
        fitc.factor_b(space, gram, b)


def test_scikit_learns_switch_turns_the_array_api_path_on(array_api_python):
    code = (
        "import numpy as np, sklearn, array_api_strict as xs\n"
        "from relaxep._xp import namespace\n"
        "a = xs.asarray([1.0])\n"
        "print(namespace(a).on_host)\n"
        "with sklearn.config_context(array_api_dispatch=True):\n"
        "    print(namespace(a).on_host, namespace(np.ones(1)).on_host)\n"
    )
    out = array_api_python.run(code)
    assert out.stdout.split() == ["True", "False", "True"]


def test_a_fitc_posterior_from_another_librarys_matrices_keeps_its_algebra_there_and_is_numpys(dispatch):
    from relaxep.posterior import SparsePrior

    rng = np.random.default_rng(4)
    X, Z = rng.normal(size=(200, 2)), rng.normal(size=(10, 2))

    def k(A, B):
        return 1.3 * np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1) / 0.7**2)

    K_uu, K_fu, k_ff = k(Z, Z) + 1e-8 * np.eye(10), k(X, Z), np.full(200, 1.3)
    tau, nu = rng.uniform(0.1, 2.0, 200), rng.normal(size=200)
    tau[::11] = -0.05
    want = SparsePrior.from_matrices(K_uu, K_fu, k_ff).posterior(tau, nu)
    got = SparsePrior.from_matrices(_strict(K_uu), _strict(K_fu), _strict(k_ff)).posterior(_strict(tau), _strict(nu))
    assert not isinstance(got.prior.Vt, np.ndarray) and not isinstance(got.chol_b, np.ndarray)  # O(nM^2) there
    assert isinstance(got.mean, np.ndarray) and isinstance(got.site_precision, np.ndarray)  # O(n) on the host
    np.testing.assert_allclose(got.mean, want.mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.marginal_var, want.marginal_var, rtol=1e-10)
    assert got.log_det_b() == pytest.approx(want.log_det_b(), rel=1e-12)
    assert got.log_partition() == pytest.approx(want.log_partition(), rel=1e-12)
    X_test = rng.normal(size=(30, 2))
    pred_want = want.predict_latent(k(X_test, Z), np.full(30, 1.3))
    pred_got = got.predict_latent(_strict(k(X_test, Z)), _strict(np.full(30, 1.3)))
    for g_, w_ in zip(pred_got, pred_want, strict=True):
        np.testing.assert_allclose(g_, w_, rtol=1e-10, atol=1e-12)
    with pytest.raises(TypeError, match="parallel schedule"):
        got.update_site(0, 1.0, 0.0)


def test_relaxed_ep_on_a_fitc_prior_in_another_library_reaches_numpys_fixed_point(dispatch):
    """The host loop (Relaxed EP with a Student-t: the device loop does not run it; the rule and the likelihood's
    moments on the host) on a prior whose O(nM^2) algebra runs in array-api-strict: the same posterior and evidence
    as numpy's.  (EP on such a prior runs the device loop: tests/test_device_ep.py checks it against the host's.)"""
    from relaxep import RelaxedEP, StudentT, infer
    from relaxep.posterior import SparsePrior

    rng = np.random.default_rng(5)  # (150 rows: 5 s, 300 took 13; both 1e-12 apart, 6 and 16 sites negative)
    X, Z = rng.normal(size=(150, 2)), rng.normal(size=(15, 2))

    def k(A, B):
        return 2.0 * np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))

    K_uu, K_fu, k_ff = k(Z, Z) + 1e-8 * np.eye(15), k(X, Z), np.full(150, 2.0)
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_t(2, size=150)
    runs = [
        infer(SparsePrior.from_matrices(*m), y, StudentT(4, 0.1), RelaxedEP(), schedule="parallel", tol=1e-8)
        for m in ((K_uu, K_fu, k_ff), tuple(_strict(a) for a in (K_uu, K_fu, k_ff)))
    ]
    assert runs[0].status == runs[1].status == "converged"
    np.testing.assert_allclose(runs[1].mean, runs[0].mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(runs[1].marginal_var, runs[0].marginal_var, rtol=1e-8)
    assert runs[1].log_evidence == pytest.approx(runs[0].log_evidence, rel=1e-8)


def test_a_fitc_prior_on_another_librarys_inputs_evaluates_its_kernel_there(dispatch):
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Matern

    from relaxep.posterior import SparsePrior

    rng = np.random.default_rng(6)
    X, Z = rng.normal(size=(120, 3)), rng.normal(size=(9, 3))
    kernel = ConstantKernel(1.7) * RBF([0.8, 1.2, 2.0])
    want = SparsePrior(X, Z, kernel, latent_noise=1e-3)
    got = SparsePrior(_strict(X), Z, kernel, latent_noise=1e-3)
    assert not isinstance(got.Vt, np.ndarray)
    np.testing.assert_allclose(_numpy(got.Vt), want.Vt, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_numpy(got.g), want.g, rtol=1e-9, atol=1e-12)
    X_test = rng.normal(size=(20, 3))
    for g_, w_ in zip(got.cross_covariance(_strict(X_test)), want.cross_covariance(X_test), strict=True):
        np.testing.assert_allclose(_numpy(g_), w_, rtol=1e-12)  # and scikit-learn's kernel is the ground truth
    with pytest.raises(TypeError, match="RBF"):
        SparsePrior(_strict(X), Z, Matern(1.0))


def test_a_prior_says_where_its_arrays_live(dispatch):
    """``Prior.space``: the host's unless the representation holds another library's arrays (what the inference
    methods read, never a look-up of their own)."""
    from sklearn.gaussian_process.kernels import RBF

    from relaxep.posterior import DensePrior, Prior, SparsePrior
    from relaxep.posterior.dense_device import DeviceDensePrior

    X = np.random.default_rng(7).normal(size=(30, 2))
    K = RBF(1.0)(X) + 1e-8 * np.eye(30)
    assert Prior.space is rxp.HOST and DensePrior(K).space is rxp.HOST
    assert SparsePrior(X, X[:5], RBF(1.0)).space is rxp.HOST
    for prior in (SparsePrior(_strict(X), X[:5], RBF(1.0)), DeviceDensePrior(_strict(K))):
        assert prior.space == rxp.namespace(_strict(X)) and not prior.space.on_host


_ESTIMATOR_SCRIPT = """
import json, sys, warnings
import numpy as np, sklearn
from sklearn.gaussian_process.kernels import RBF, ConstantKernel as C
from relaxep import GPClassifier, Probit
from relaxep._xp import to_numpy
if sys.argv[1] == "torch":
    import torch
    lib = lambda a: torch.asarray(a, dtype=torch.float64) if a.dtype.kind == "f" else torch.asarray(a)
else:
    import array_api_strict as xs
    lib = lambda a: xs.asarray(a, device=xs.Device("device1"))  # no implicit numpy conversion, as on a GPU
warnings.simplefilter("ignore")
rng = np.random.default_rng(7)
X = rng.normal(size=(400, 2))
y = (X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * rng.normal(size=400) > 0.2).astype(np.int64)
Z, X_test = X[::20].copy(), rng.normal(size=(50, 2))
def make():
    return GPClassifier(C(1.5) * RBF(0.9), Probit(), inducing_points=Z, optimizer=None)
ref = make().fit(X, y)
if sys.argv[1] == "torch":  # a CUDA tensor cannot become a numpy array implicitly: neither may these
    def _refuse(*args, **kwargs):
        raise TypeError("implicit conversion of a torch tensor to numpy")
out = {}
searches = sys.argv[1] == "torch"  # (array-api-strict's: tests/test_stochastic_device.py, test_device_search.py)
if searches:
    st_ref = GPClassifier(C(1.0) * RBF(1.0), Probit(), inducing_points=Z, optimizer="stochastic",
                          optimizer_maxiter=40, random_state=0).fit(X, y)
    out["ref_theta"], out["ref_z"] = st_ref.kernel_.theta.tolist(), st_ref.inducing_points_.tolist()
    lb_ref = GPClassifier(inducing_points=10, random_state=0).fit(X, y)
    out["ref_lbfgs_theta"], out["ref_lbfgs_z"] = lb_ref.kernel_.theta.tolist(), lb_ref.inducing_points_.tolist()
    out["ref_lbfgs_proba"] = lb_ref.predict_proba(X_test)[:, 1].tolist()
    out["ref_st_proba"] = st_ref.predict_proba(X_test)[:, 1].tolist()
if sys.argv[1] == "torch":
    torch.Tensor.__array__ = _refuse
import relaxep.inference.site_updates as site_updates
device_runs = []
real_run = site_updates.run_on_device
site_updates.run_on_device = lambda *args, **kwargs: device_runs.append(1) or real_run(*args, **kwargs)
with sklearn.config_context(array_api_dispatch=True):
    clf = make().fit(lib(X), lib(y))
    out["device_runs"] = len(device_runs)
    p = clf.predict_proba(lib(X_test))
    out["kind"] = type(p).__module__.split(".")[0]
    out["proba"] = float(np.max(np.abs(to_numpy(p) - ref.predict_proba(X_test))))
    d = to_numpy(clf.decision_function(lib(X_test)))
    out["decision"] = float(np.max(np.abs(d - ref.decision_function(X_test))))
    out["labels"] = bool(np.array_equal(to_numpy(clf.predict(lib(X_test))), ref.predict(X_test)))
    out["evidence"] = abs(clf.log_marginal_likelihood_value_ - ref.log_marginal_likelihood_value_)
    out["train_kind"] = type(clf.X_train_).__module__.split(".")[0]
    if searches:
        st = GPClassifier(C(1.0) * RBF(1.0), Probit(), inducing_points=Z, optimizer="stochastic",
                          optimizer_maxiter=40, random_state=0).fit(lib(X), lib(y))
        out["theta"] = st.kernel_.theta.tolist()
        out["z"] = st.inducing_points_.tolist()
        out["st_proba"] = to_numpy(st.predict_proba(lib(X_test)))[:, 1].tolist()
        lbfgs = GPClassifier(inducing_points=10, random_state=0).fit(lib(X), lib(y))  # auto: L-BFGS-B, Z learned
        out["lbfgs_theta"], out["lbfgs_z"] = lbfgs.kernel_.theta.tolist(), lbfgs.inducing_points_.tolist()
        out["lbfgs_proba"] = to_numpy(lbfgs.predict_proba(lib(X_test)))[:, 1].tolist()
    try:
        GPClassifier(C(1.0) * RBF(1.0), multi_class="joint").fit(lib(X), lib(np.arange(400) % 3))
        out["refused"] = ""
    except TypeError as exc:
        out["refused"] = str(exc)
    y3 = np.digitize(X[:, 0] + 0.3 * rng.normal(size=400), [-0.5, 0.5])
    def ovr():
        return GPClassifier(C(1.5) * RBF(0.9), Probit(), inducing_points=Z, optimizer=None, multi_class="one_vs_rest")
    ovr_ref, ovr_dev = ovr().fit(X, y3), ovr().fit(lib(X), lib(y3))
    p3 = to_numpy(ovr_dev.predict_proba(lib(X_test)))
    out["ovr_proba"] = float(np.max(np.abs(p3 - ovr_ref.predict_proba(X_test))))
    out["ovr_labels"] = bool(np.array_equal(to_numpy(ovr_dev.predict(lib(X_test))), ovr_ref.predict(X_test)))
    out["ovr_kind"] = type(ovr_dev.predict_proba(lib(X_test))).__module__.split(".")[0]
    from sklearn.gaussian_process.kernels import Matern
    try:
        GPClassifier(Matern(1.0), Probit(), optimizer=None).fit(lib(X), lib(y))
        out["kernel"] = ""
    except TypeError as exc:
        out["kernel"] = str(exc)
print(json.dumps(out))
"""


# torch, where installed, with the slow studies (a second library through the same end-to-end script: array-api-strict
# is the stricter, and the one the test extra installs)
@pytest.mark.parametrize("library", ["array_api_strict", pytest.param("torch", marks=pytest.mark.slow)])
def test_gpclassifier_on_another_library_fits_there_and_predicts_as_on_numpy(array_api_python, library):
    """scikit-learn's convention end to end: with array_api_dispatch (and SCIPY_ARRAY_API=1), a sparse
    GPClassifier at a fixed kernel fitted on another library's arrays gives numpy's answer in that library."""
    import json

    pytest.importorskip(library)
    run = array_api_python.run(_ESTIMATOR_SCRIPT, library)
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["kind"] == out["train_kind"] == library.split("_")[0].replace("array", "array_api_strict")
    assert out["proba"] < 1e-8 and out["decision"] < 1e-8 and out["labels"]
    assert out["evidence"] < 1e-8
    assert out["device_runs"] >= 1  # its EP ran with the sites on the device (relaxep.inference.device_ep)
    # the searches on tensors that refuse numpy's implicit conversion, as CUDA's do (array-api-strict's searches are
    # numpy's in test_stochastic_device.py's and test_device_search.py's end-to-end scripts)
    if library == "torch":
        # the stochastic search (hyperparameters and inducing inputs, 40 steps from a fixed seed): numpy's answer
        np.testing.assert_allclose(out["theta"], out["ref_theta"], rtol=1e-8)
        np.testing.assert_allclose(out["z"], out["ref_z"], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(out["st_proba"], out["ref_st_proba"], rtol=1e-8, atol=1e-10)
        # the default below STOCHASTIC_FROM rows: L-BFGS-B on the FITC evidence, its gradient on the device
        np.testing.assert_allclose(out["lbfgs_theta"], out["ref_lbfgs_theta"], rtol=1e-6)
        # (50 L-BFGS-B iterations carry torch's summation order into Z at 2e-7: the search's path, not its answer)
        np.testing.assert_allclose(out["lbfgs_z"], out["ref_lbfgs_z"], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(out["lbfgs_proba"], out["ref_lbfgs_proba"], rtol=1e-6, atol=1e-8)
    # more than two classes: one-vs-rest fits there (numpy's answer), the joint model is refused at the door
    assert out["ovr_kind"] == out["kind"] and out["ovr_proba"] < 1e-8 and out["ovr_labels"]
    assert "joint multi-class model" in out["refused"] and "multi_class='one_vs_rest'" in out["refused"]
    assert out["kernel"].startswith("kernel:") and "RBF or ConstantKernel * RBF" in out["kernel"]


def test_a_sparse_prior_that_cannot_fit_on_the_device_is_refused_before_the_allocation(dispatch, monkeypatch):
    from sklearn.gaussian_process.kernels import RBF

    from relaxep import MemoryLimitError
    from relaxep.posterior import SparsePrior, fitc_prior

    monkeypatch.delenv("RELAXEP_MAX_MEMORY", raising=False)
    monkeypatch.setattr(rxp, "device_free_memory", lambda like: 1e6)  # a device with 1 MB free
    calls = []
    real = fitc_prior.rbf
    monkeypatch.setattr(fitc_prior, "rbf", lambda *a: calls.append(1) or real(*a))
    X = _strict(np.random.default_rng(8).normal(size=(2000, 2)))
    with pytest.raises(MemoryLimitError, match=r"n = 2000 rows with M = 50.*fewer inducing inputs"):
        SparsePrior(X, np.random.default_rng(9).normal(size=(50, 2)), RBF(1.0))
    assert not calls  # refused before the kernel was evaluated
    monkeypatch.setattr(rxp, "device_free_memory", lambda like: 1e9)  # room for it: built there
    assert not isinstance(SparsePrior(X, np.random.default_rng(9).normal(size=(50, 2)), RBF(1.0)).Vt, np.ndarray)
    assert calls


def test_float32_inputs_are_computed_in_float64(dispatch):
    torch = pytest.importorskip("torch")
    from sklearn.gaussian_process.kernels import RBF

    from relaxep.posterior import SparsePrior

    X = np.random.default_rng(10).normal(size=(50, 2))
    prior = SparsePrior(torch.asarray(X, dtype=torch.float32), X[:5], RBF(1.0))
    assert prior.Vt.dtype == torch.float64


def test_jax_numpy_is_not_numpy():
    import types

    assert rxp.is_numpy(np) and not rxp.is_numpy(types.ModuleType("jax.numpy"))


@pytest.mark.parametrize("library", ["numpy", "array_api_strict", "torch"])
def test_adding_to_the_diagonal_adds_to_the_diagonal_only(dispatch, library):
    lib = pytest.importorskip(library)
    a = np.arange(16.0).reshape(4, 4)
    for values in (2.5, np.array([1.0, -2.0, 3.0, 0.5])):
        arr = lib.asarray(a.copy()) if library != "numpy" else a.copy()
        v = values if np.ndim(values) == 0 else (lib.asarray(values) if library != "numpy" else values)
        xp = rxp.namespace(arr).xp if library != "numpy" else np
        got = np.from_dlpack(rxp.add_to_diagonal(xp, arr, v)) if library != "numpy" else rxp.add_to_diagonal(np, arr, v)
        np.testing.assert_array_equal(got, a + np.diag(np.broadcast_to(values, (4,))))
