"""The stochastic search with its M x M steps on another array library's device (the one loop of
:mod:`relaxep.estimators._stochastic` and :mod:`relaxep.inference.stochastic_ep` in that library's namespace), on
array-api-strict.

Ground truth: the search on numpy arrays, the same loop in numpy's namespace, so that array-api-strict (numpy
underneath) must give numpy's hyperparameters, inducing inputs, tied site, evidence trace and final sites to
rounding, through the damped step's halvings and the undone steps where K_uu has no factor (numpy evaluates K_uu
by scikit-learn's kernel and factors by SciPy, the device by the closed form and its own Cholesky); and the claim
of the modules: a step reads one short vector from the device and moves no M x M array either way (counted on
array-api-strict's conversions, as ``benchmarks/device_reads.py`` counts them; the host M x M path, counted the
same way, moves several a step).
"""

from __future__ import annotations

import collections
import json
import sys

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

import relaxep._xp as rxp
from relaxep.estimators import _stochastic as st
from relaxep.inference import stochastic_ep as sep
from relaxep.inference.tied_site import TiedSites
from relaxep.likelihoods import Gaussian, Logistic, NoisyProbit, Probit, StudentT
from relaxep.posterior.rbf import ScaledRBF

xs = pytest.importorskip("array_api_strict")
pytest.importorskip("array_api_compat")

N, M = 2000, 12


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(N, 3))
    f = np.sin(2.0 * X[:, 0]) + X[:, 1]
    labels = np.where(f + 0.3 * rng.normal(size=N) > 0, 1.0, -1.0)
    targets = np.sin(2.0 * X[:, 0]) + 0.2 * rng.normal(size=N)
    return X, labels, targets, X[:M].copy()


def _strict(a):
    return xs.asarray(a, device=xs.Device("device1"))  # (no implicit numpy conversion, as on a GPU)


def _learn(X, y, Z, kernel, likelihood, on, steps=60, batch=400, learn=(True, True)):
    """The search from ``Z`` on host ``X``: numpy's (``on="numpy"``), on array-api-strict's rows with the steps there
    (``"device"``) or with the host's M x M steps (``"host steps"``)."""
    rows = X if on == "numpy" else _strict(X)
    space = rxp.namespace(rows) if on == "device" else rxp.HOST
    options = st.StochasticOptions(batch_size=batch, max_steps=steps, report_every=20)
    batches = st.local_batches(rows, y, batch, np.random.RandomState(0))
    return st.learn_stochastic(kernel, likelihood, Z, y.shape[0], X.std(0), 1e-6, *learn, batches, options, space=space)


def _assert_same(device, host, rtol=1e-8):
    np.testing.assert_allclose(device.kernel.theta, host.kernel.theta, rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(device.likelihood.theta, host.likelihood.theta, rtol=rtol)
    np.testing.assert_allclose(device.Z, host.Z, rtol=rtol, atol=1e-10)
    scale = np.max(np.abs(host.sites.lam))
    np.testing.assert_allclose(device.sites.lam, host.sites.lam, rtol=0, atol=rtol * scale)
    np.testing.assert_allclose(device.sites.eta, host.sites.eta, rtol=0, atol=rtol * np.max(np.abs(host.sites.eta)))
    np.testing.assert_allclose(device.trace, host.trace, rtol=rtol)
    assert device.steps == host.steps


@pytest.mark.parametrize(
    ("kernel", "likelihood", "regression"),
    [
        (C(1.0) * RBF(1.0), Probit(), False),
        (C(2.0) * RBF([1.0, 2.0, 0.5]), NoisyProbit(0.02), False),  # ARD, the label-noise default
        (RBF(1.0), Probit(), False),  # no constant: a fixed 1
        (C(1.0) * RBF(1.0), Gaussian(0.2), True),  # the likelihood's noise learned too (its Adam on the host)
        (C(1.0) * RBF(1.0), StudentT(4, 0.3), True),  # moments on the host (no closed form there), scale learned
    ],
)
def test_steps_on_the_device_repeat_numpys(dispatch, problem, kernel, likelihood, regression):
    X, labels, targets, Z = problem
    y = targets if regression else labels
    host = _learn(X, y, Z, kernel, likelihood, "numpy", steps=40)  # (20 steps of warm-up, then 20 learning)
    device = _learn(X, y, Z, kernel, likelihood, "device", steps=40)
    assert not np.allclose(host.kernel.theta, kernel.theta) and not np.allclose(host.Z, Z)  # (it learned)
    _assert_same(device, host)
    # the final EP's start from the learned tied site (the estimators' next step) is numpy's too
    tau, nu = st.row_sites(device, _strict(X), y, 1e-6)
    tau0, nu0 = st.row_sites(host, X, y, 1e-6)
    np.testing.assert_allclose(tau, tau0, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(nu, nu0, rtol=1e-8, atol=1e-12)


def test_the_device_search_takes_its_own_steps(dispatch, problem, monkeypatch):
    """The rows on the device with ``space`` theirs keep the steps there (every minibatch's step and its sums in the
    rows' space, a read a step); with numpy's ``space`` the host's M x M steps (what ``benchmarks/gpu.py
    --stochastic-host`` compares)."""
    X, labels, _, Z = problem
    calls, spaces = collections.Counter(), collections.Counter()
    real_read, real_sums = st.read_scalars, sep.minibatch_sums
    monkeypatch.setattr(st, "read_scalars", lambda *a: calls.update(["read_scalars"]) or real_read(*a))

    def sums(step, X_, y_, *a):
        out = real_sums(step, X_, y_, *a)
        spaces.update([(step.space.on_host, rxp.namespace(out.lam).on_host, out.g_theta is not None)])
        return out

    monkeypatch.setattr(st, "minibatch_sums", sums)
    device = _learn(X, labels, Z, C(1.0) * RBF(1.0), Probit(), "device", steps=30)
    assert calls == {"read_scalars": 31}  # (a read a step and the start's)
    assert spaces == {(False, False, False): 20, (False, False, True): 10}  # (warm-up 20, then the gradient)
    calls.clear(), spaces.clear()
    host = _learn(X, labels, Z, C(1.0) * RBF(1.0), Probit(), "host steps", steps=30)
    assert spaces == {(True, True, False): 20, (True, True, True): 10}
    _assert_same(device, host)


def test_negative_site_precisions_halve_the_step_on_the_device_as_on_numpy(dispatch, monkeypatch):
    # test_stochastic's issue-43 problem: the label-noise likelihood's wrong-side rows give negative w_i and the
    # damped step must halve epsilon until I + n Lambda stays positive definite; the device's halvings are numpy's
    n, b = 5000, 50
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, 1.0, -1.0)
    y[rng.uniform(size=n) < 0.02] *= -1
    Z = X[np.random.default_rng(0).choice(n, 10, replace=False)]
    taken = {"host": [], "device": []}
    real = TiedSites.move_towards

    def move_towards(self, *a, **k):
        taken["host" if self.space.on_host else "device"].append(real(self, *a, **k))

    monkeypatch.setattr(TiedSites, "move_towards", move_towards)
    kernel, likelihood = C(10.0) * RBF(1.0), NoisyProbit(0.01)
    args = dict(steps=100, batch=b, learn=(False, False))
    host = _learn(X, y, Z, kernel, likelihood, "numpy", **args)
    device = _learn(X, y, Z, kernel, likelihood, "device", **args)
    assert taken["device"] == taken["host"]
    assert sum(eps < 0.1 for eps in taken["host"][20:]) >= 3  # (the halvings ran)
    _assert_same(device, host)
    assert np.linalg.eigvalsh(np.eye(10) + n * device.sites.lam)[0] > 0.0


def test_a_kuu_without_factor_undoes_the_step_on_the_device_as_on_numpy(dispatch, problem, monkeypatch):
    """Where K_uu at the new hyperparameters has no Cholesky factor, the loop undoes the Adam step and halves its
    rates before drawing a minibatch; the device reads that flag with the step before and must do the same.  K_uu
    is declared singular wherever the kernel's constant passes a threshold the search crosses: numpy's Cholesky
    raises there (no factor), the device's flags (a factor and a false flag)."""
    X, labels, _, Z = problem
    kernel, likelihood = C(1.0) * RBF(1.0), Probit()
    real = st.inducing_factor

    def constant(kern):
        return float(kern.constant) if isinstance(kern, ScaledRBF) else kern.k1.constant_value

    seen = []
    monkeypatch.setattr(
        st, "inducing_factor", lambda space, kern, Z_: seen.append(constant(kern)) or real(space, kern, Z_)
    )
    _learn(X, labels, Z, kernel, likelihood, "numpy")
    threshold = 0.5 * (seen[10] + seen[11])  # (the constant rises over the first steps of learning)
    assert seen[10] < threshold < max(seen)
    failures = collections.Counter()

    def factor(space, kern, Z_):
        k_uu, chol, ok = real(space, kern, Z_)
        if constant(kern) <= threshold:
            return k_uu, chol, ok
        failures["host" if space.on_host else "device"] += 1
        if space.on_host:
            return k_uu, None, False
        return k_uu, chol, space.xp.asarray(False, device=space.device)

    monkeypatch.setattr(st, "inducing_factor", factor)
    host = _learn(X, labels, Z, kernel, likelihood, "numpy")
    device = _learn(X, labels, Z, kernel, likelihood, "device")
    assert failures["host"] >= 2 and failures["device"] == failures["host"]
    _assert_same(device, host)


def _count_transfers(monkeypatch):
    """Every conversion of an array-api-strict array to the host (``__float__``, ``__bool__``, ``__int__``,
    ``__dlpack__``, ``__array__``) and every numpy array made one (``asarray``), by shape; but a special function's
    round trip through the host, which array-api-strict alone would take (PyTorch and CuPy have their own)."""
    reads, uploads = collections.Counter(), collections.Counter()

    def count(counter, shape):
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_name in _SPECIAL and frame.f_code.co_filename.endswith("_xp.py"):
                return
            frame = frame.f_back
        counter.update([shape])

    array_type = type(xs.asarray([1.0]))
    for name in ("__float__", "__bool__", "__int__", "__dlpack__", "__array__"):
        real = getattr(array_type, name)
        monkeypatch.setattr(
            array_type, name, lambda self, *a, _r=real, **k: count(reads, self.shape) or _r(self, *a, **k)
        )
    real_asarray = xs.asarray

    def asarray(obj, *args, **kwargs):
        if isinstance(obj, np.ndarray):
            count(uploads, obj.shape)
        return real_asarray(obj, *args, **kwargs)

    monkeypatch.setattr(xs, "asarray", asarray)
    return reads, uploads


_SPECIAL = ("normal_tail", "_special", "log_ndtr", "erfcx")


@pytest.mark.parametrize("likelihood", [Probit(), Logistic()], ids=["probit", "logistic-sinh-rule"])
def test_a_step_reads_one_short_vector_and_moves_no_m_by_m_array(dispatch, problem, monkeypatch, likelihood):
    """(The logistic's moments by the device's fixed-size rule, the probit's in closed form: both stay there.)"""
    X, labels, _, Z = problem
    kernel = C(1.0) * RBF([1.0, 1.0, 1.0])
    steps, batch = 40, 400  # (an epoch every 5 steps; 20 steps of warm-up, then 20 with the gradient)
    reads, uploads = _count_transfers(monkeypatch)
    _learn(X, labels, Z, kernel, likelihood, "device", steps=steps, batch=batch)
    # per step one read: the flags and the estimate's log-partitions (6 entries; 5 where K_uu does not move);
    # besides, the start's flag of K_uu, and at the end the learned vector and tied site
    assert reads[(6,)] + reads[(5,)] == steps
    assert reads[(1,)] == 1 and reads[(4 + M * 3,)] == 1 and reads[(M, M)] == 1 and reads[(M,)] == 1
    assert sum(reads.values()) == steps + 4
    # nothing moved to the device a step: each epoch's permutation once; the labels, Z, the rates, ... once
    assert uploads[(N,)] == steps // 5 + 1 and uploads[(M, M)] == 0
    assert sum(uploads.values()) <= steps // 5 + 10
    # the host's M x M steps on the same rows, counted the same way: M x M arrays each way every step
    reads.clear(), uploads.clear()
    _learn(X, labels, Z, kernel, likelihood, "host steps", steps=steps, batch=batch)
    assert reads[(M, M)] >= steps and uploads[(M, M)] >= 3 * steps and sum(reads.values()) >= 4 * steps


_ESTIMATOR_SCRIPT = """
import json, sys, warnings
import numpy as np, sklearn
from sklearn.gaussian_process.kernels import RBF, ConstantKernel as C
from relaxep import GPClassifier, Probit
from relaxep._xp import to_numpy
import relaxep.estimators._stochastic as st
if sys.argv[1] == "torch":
    import torch
    lib = lambda a: torch.asarray(a)
else:
    import array_api_strict as xs
    lib = lambda a: xs.asarray(a, device=xs.Device("device1"))
warnings.simplefilter("ignore")
rng = np.random.default_rng(3)
X = rng.normal(size=(1500, 2))
y = (np.sin(2 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=1500) > 0).astype(np.int64)
X_test = rng.normal(size=(50, 2))
fits = {
    "probit": lambda: GPClassifier(C(1.0) * RBF(1.0), Probit(), inducing_points=15, optimizer="stochastic",
                                   optimizer_maxiter=80, random_state=0),
    "default": lambda: GPClassifier(inducing_points=12, optimizer="stochastic", optimizer_maxiter=80, random_state=1),
}
import relaxep.estimators._models as models
calls = []
real = models.learn_stochastic
models.learn_stochastic = lambda *a, **k: calls.append(not a[-1].on_host) or real(*a, **k)
out = {}
for name, make in fits.items():
    ref = make().fit(X, y)
    with sklearn.config_context(array_api_dispatch=True):
        dev = make().fit(lib(X), lib(y))
        p = to_numpy(dev.predict_proba(lib(X_test)))[:, 1]
    out[name] = {"theta": [dev.kernel_.theta.tolist(), ref.kernel_.theta.tolist()],
                 "z": [dev.inducing_points_.tolist(), ref.inducing_points_.tolist()],
                 "proba": [p.tolist(), ref.predict_proba(X_test)[:, 1].tolist()]}
out["device_loops"] = sum(calls)
print(json.dumps(out))
"""


# torch, where installed, with the slow studies (a second library through the same end-to-end script: array-api-strict
# is the stricter, and the one the test extra installs)
@pytest.mark.parametrize("library", ["array_api_strict", pytest.param("torch", marks=pytest.mark.slow)])
def test_the_estimators_learned_fit_on_the_device_is_numpys(array_api_python, library):
    """GPClassifier's stochastic search (a probit and the label-noise default, kernel and Z learned, 80 steps from
    a fixed seed) on another library's arrays: numpy's hyperparameters, inducing inputs and probabilities."""
    pytest.importorskip(library)
    run = array_api_python.run(_ESTIMATOR_SCRIPT, library)
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out.pop("device_loops") == 2
    for name, got in out.items():
        np.testing.assert_allclose(*got["theta"], rtol=1e-8, err_msg=name)
        np.testing.assert_allclose(*got["z"], rtol=1e-8, atol=1e-10, err_msg=name)
        np.testing.assert_allclose(*got["proba"], rtol=1e-8, atol=1e-10, err_msg=name)
