"""Parallel EP with the sites on the device (:mod:`relaxep.inference.device_ep`), checked with ``array-api-strict``.

Ground truth: the host loop (numpy arrays, :class:`~relaxep.inference.SiteUpdates` with the parallel schedule),
whose iterates the device loop repeats rule for rule, so every fit must equal it to rounding; the likelihoods'
device closed forms against their numpy ``log_z`` (numpy itself: bit for bit).  And the claim of the module:
a sweep sends no length-n array between host and device, and reads back one array of scalars (the special
functions a library lacks, array-api-strict's all, are :mod:`relaxep._special_xp`'s, on the device).  That the
estimators' EP runs take this loop on another library's arrays is checked with their answers in ``test_xp.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import EP, Gaussian, NoisyProbit, NoisyStep, Probit, infer
from relaxep.posterior import DensePrior, SparsePrior
from relaxep.posterior.dense_device import DeviceDensePrior

xs = pytest.importorskip("array_api_strict")
pytest.importorskip("array_api_compat")

KERNEL = C(2.0) * RBF(1.0)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 3))
    f = np.sin(2.0 * X[:, 0]) + X[:, 1]
    labels = np.where(f + 0.3 * rng.normal(size=1500) > 0, 1.0, -1.0)
    labels[:60] *= -1.0  # flipped labels: negative site precisions under the label-noise likelihood
    return X, labels, f + 0.2 * rng.normal(size=1500), X[:30].copy()


@pytest.mark.parametrize(
    ("likelihood", "binary", "damping"),
    [(Probit(), True, 1.0), (NoisyProbit(0.01, 1.0), True, 1.0), (NoisyProbit(0.01, 1.0), True, 0.6),
     (Gaussian(0.04), False, 1.0)],
    ids=["probit", "noisy-probit", "noisy-probit-damped", "gaussian"],
)  # fmt: skip
@pytest.mark.parametrize("representation", ["sparse", "dense"])
def test_the_device_loop_is_the_host_loop(dispatch, problem, likelihood, binary, damping, representation):
    """Same status, sweeps, steps, sites, marginals and evidence as the numpy path (1e-8), for a sparse prior and
    for a dense one (its device twin, DeviceDensePrior)."""
    X, labels, targets, Z = problem
    y = labels if binary else targets
    if representation == "sparse":
        host_prior, device_prior = SparsePrior(X, Z, KERNEL), SparsePrior(xs.asarray(X), Z, KERNEL)
    else:  # (the first 400 rows: n x n)
        X, y = X[:400], y[:400]
        K = KERNEL(X) + 1e-8 * np.eye(400)
        host_prior, device_prior = DensePrior(K), DensePrior(xs.asarray(K))
        assert isinstance(device_prior, DeviceDensePrior)
    # (dense: numpy's early sweeps factor in single precision, so the two share the fixed point, not the path)
    tol = 1e-6 if representation == "sparse" else 1e-10
    host = infer(host_prior, y, likelihood, EP(damping), schedule="parallel", tol=tol)
    device = infer(device_prior, y, likelihood, EP(damping), schedule="parallel", tol=tol)
    assert host.status == device.status == "converged"
    if representation == "sparse":
        assert host.n_sweeps == device.n_sweeps
        np.testing.assert_array_equal(host.step_sizes, device.step_sizes)
    for a, b in [(host.mean, device.mean), (host.marginal_var, device.marginal_var)]:
        np.testing.assert_allclose(b, a, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(device.site_precision, host.site_precision, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(device.site_mean_precision, host.site_mean_precision, rtol=1e-8, atol=1e-10)
    assert device.log_evidence == pytest.approx(host.log_evidence, rel=1e-10)
    if isinstance(likelihood, NoisyProbit):  # (not log-concave: the flipped labels made negative sites)
        assert np.any(host.site_precision < 0)


@pytest.mark.parametrize("likelihood", [Probit(), NoisyProbit(0.02, 0.7), NoisyStep(0.1), Gaussian(0.3)])
def test_the_device_closed_forms_are_log_zs(likelihood):
    """``log_z_on`` with numpy is ``log_z`` bit for bit; on array-api-strict, to rounding, far in both tails (5e-13:
    its log_ndtr/erfcx are relaxep._special_xp's, an ulp from SciPy's, which the curvature's cancellation
    -r(z + r) grows by about z^2; against mpmath the device's d2log_z is the closer, 1.1e-13 against 2.2e-13)."""
    rng = np.random.default_rng(1)
    y = np.where(rng.random(400) < 0.5, -1.0, 1.0) if likelihood.class_targets else rng.normal(size=400)
    mean, var = 12.0 * rng.normal(size=400), np.exp(3.0 * rng.normal(size=400))
    ref = likelihood.log_z(y, mean, var)
    same = likelihood.log_z_on(np, y, mean, var)
    strict = likelihood.log_z_on(xs, xs.asarray(y), xs.asarray(mean), xs.asarray(var))
    for field in ("log_z", "dlog_z", "d2log_z"):
        np.testing.assert_array_equal(getattr(same, field), getattr(ref, field))
        np.testing.assert_allclose(np.from_dlpack(getattr(strict, field)), getattr(ref, field), rtol=5e-13, atol=0)


def _count_transfers(monkeypatch):
    """Count length-n arrays taken to the host (``np.from_dlpack``) and to the device (``xs.asarray`` of numpy), and
    every read (``np.from_dlpack`` of any size)."""
    counts = {"to_host": 0, "to_device": 0, "reads": 0}
    from_dlpack, asarray = np.from_dlpack, xs.asarray

    def counted_from_dlpack(x, *args, **kwargs):
        out = from_dlpack(x, *args, **kwargs)
        counts["to_host"] += out.size > 16
        counts["reads"] += 1
        return out

    def counted_asarray(x, *args, **kwargs):
        counts["to_device"] += isinstance(x, np.ndarray) and x.size > 16
        return asarray(x, *args, **kwargs)

    monkeypatch.setattr(np, "from_dlpack", counted_from_dlpack)
    monkeypatch.setattr(xs, "asarray", counted_asarray)
    return counts


@pytest.mark.parametrize("representation", ["sparse", "dense"])
def test_a_sweep_moves_at_most_one_array_each_way(dispatch, problem, monkeypatch, representation):
    """Per sweep no length-n array either way and one read (its scalars; array-api-strict's log_ndtr/erfcx are
    relaxep._special_xp's, on the device); the host loops moved 5 (sparse) and 3 (dense) each way."""
    X, labels, _, Z = problem
    if representation == "sparse":
        prior = SparsePrior(xs.asarray(X), Z, KERNEL)
    else:
        X, labels = X[:400], labels[:400]
        prior = DensePrior(xs.asarray(KERNEL(X) + 1e-8 * np.eye(400)))
    counts = _count_transfers(monkeypatch)
    result = infer(prior, labels, NoisyProbit(0.01, 1.0), EP(), schedule="parallel", tol=1e-6)
    sweeps = result.n_sweeps
    assert sweeps >= 5 and result.converged
    # (the start: the sites and y; the end: the sites and marginals, and the host posterior's refresh: measured 6
    # and 9 (sparse), 5 and 5 (dense); the reads 7 (sparse) and 6 (dense) beyond one a sweep)
    assert counts["to_host"] <= 12 and counts["to_device"] <= 12, (counts, sweeps)
    assert counts["reads"] <= sweeps + 10, (counts, sweeps)


@pytest.mark.parametrize("collapsed", [False, True], ids=["fitc", "collapsed-bound"])
def test_the_sparse_evidence_gradient_on_the_device_is_numpys(dispatch, problem, collapsed):
    """The gradient in theta and Z (L-BFGS-B's on a sparse model) computed on the device equals numpy's (1e-10)."""
    from relaxep.posterior.sparse_gradient import sparse_evidence_gradient

    X, labels, targets, Z = problem
    conditional = "dtc" if collapsed else "fitc"
    tau, nu = (np.full(len(targets), 25.0), targets * 25.0) if collapsed else (None, None)
    grads = []
    for inputs in (X, xs.asarray(X)):
        prior = SparsePrior(inputs, Z, KERNEL, conditional=conditional)
        if collapsed:
            post = prior.posterior(tau, nu)
        else:
            post = infer(prior, labels, NoisyProbit(0.01, 1.0), EP(), schedule="parallel", tol=1e-6).posterior
        grads.append(sparse_evidence_gradient(post, KERNEL, collapsed=collapsed))
    (theta_h, z_h), (theta_d, z_d) = grads
    np.testing.assert_allclose(theta_d, theta_h, rtol=1e-10)
    np.testing.assert_allclose(z_d, z_h, rtol=1e-10, atol=1e-10 * np.max(np.abs(z_h)))


def test_a_dense_sweep_without_negative_sites_reads_back_once(dispatch, problem, monkeypatch):
    """The dense refresh reads nothing back where no site precision is negative now or proposed (the probit's never
    are): every host conversion of the fit (scalars, flags and arrays) is one a sweep plus the fit's start and end,
    where the refresh that checks for negative sites read three more a sweep."""
    X, labels, _, _ = problem
    prior = DensePrior(xs.asarray(KERNEL(X[:300]) + 1e-8 * np.eye(300)))
    reads = []
    array_type = type(xs.asarray([1.0]))
    for name in ("__float__", "__bool__", "__int__", "__index__", "__dlpack__"):
        original = getattr(array_type, name)
        monkeypatch.setattr(array_type, name, lambda self, *a, _o=original, **k: reads.append(1) or _o(self, *a, **k))
    result = infer(prior, labels[:300], Probit(), EP(), schedule="parallel", tol=1e-8)
    reference = infer(KERNEL(X[:300]) + 1e-8 * np.eye(300), labels[:300], Probit(), EP(), schedule="parallel", tol=1e-8)
    assert result.converged and result.n_sweeps >= 5
    np.testing.assert_allclose(result.site_precision, reference.site_precision, rtol=1e-8, atol=1e-12)
    assert len(reads) <= result.n_sweeps + 16, (len(reads), result.n_sweeps)


def _noise_free_step_problem():
    """300 rows of a two-blob mixture, 10% of the labels flipped: the noise-free step's sites grow to 5e6 times the
    smallest (the marginals of strong sites are where GPML's :math:`K_{ii} - \\|v_i\\|^2` loses its digits)."""
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(0, 0.8, (150, 2)), rng.normal((2.5, -1), 0.8, (150, 2))]
    y = np.r_[np.ones(150), -np.ones(150)]
    y[rng.random(300) < 0.1] *= -1
    return (C(1.0) * RBF(1.0))(X) + 1e-6 * np.eye(300), y


def test_the_noise_free_step_converges_on_the_device_where_numpy_does(dispatch):
    """``rule="auto"`` on the noise-free step at tol 1e-8: numpy's EP converged where the device's was abandoned
    (its marginal variances 1e-8 off numpy's at strong sites, the statistic's floor) and convergent EP stalled.
    Now the device's refresh takes numpy's formulas: the same status, and its marginals numpy's to rounding."""
    K, y = _noise_free_step_problem()
    host = infer(DensePrior(K), y, NoisyStep(0.0), "auto", tol=1e-8, schedule="parallel")
    device_prior = DensePrior(xs.asarray(K))
    device = infer(device_prior, y, NoisyStep(0.0), "auto", tol=1e-8, schedule="parallel")
    assert host.status == device.status == "converged"
    assert [(type(a.method), a.status) for a in device.attempts] == [(type(a.method), a.status) for a in host.attempts]
    np.testing.assert_allclose(device.mean, host.mean, rtol=0, atol=1e-7)
    tau, nu = host.site_precision, host.site_mean_precision
    numpys = DensePrior(K).posterior(tau, nu, marginals_only=True)  # (the sweeps' refresh)
    mean, var, _, _ = device_prior.device_pass(xs.asarray(tau), xs.asarray(nu))
    # (1e-8 before; 1e-11 with two BLAS threads, 7e-10 with one (the means 6e-11): the strong sites' conditioning)
    np.testing.assert_allclose(np.asarray(var), numpys.marginal_var, rtol=1e-9)
    np.testing.assert_allclose(np.asarray(mean), numpys.mean, rtol=1e-9, atol=1e-11)
