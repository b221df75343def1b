"""The ordinal probit likelihood (Chu & Ghahramani 2005) against references written independently of relaxep.

Pointwise ``log p(y|f)`` against scipy's normal cdf differences (mpmath in the tails); the tilted
``log Z``, mean and variance at powers 1 (closed form) and 0.5 (quadrature rule) against adaptive
``scipy.integrate.quad``; the evidence gradient in ``theta`` against central differences of ``log Z``
(and of the EP evidence); the predictive class probabilities against quadrature; EP's posterior
against elliptical slice sampling.
"""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import log_ndtr
from sklearn.base import clone
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from threadpoolctl import threadpool_limits

from oracles import normal_pdf
from relaxep import EP, DensePrior, infer
from relaxep.estimators._hyper import HyperVector
from relaxep.inference.evidence import likelihood_evidence_gradient
from relaxep.likelihoods import OrdinalProbit
from relaxep.mcmc import elliptical_slice

#: (cut-points, noise sd): two classes; three and five classes with cut-points far apart and 0.01 apart
CONFIGS = {
    "K=2": ([0.3], 1.0),
    "K=3 far": ([-1.0, 1.5], 0.3),
    "K=3 close": ([0.2, 0.21], 0.3),
    "K=5 far": ([-4.0, -1.0, 0.5, 3.0], 0.6),
    "K=5 close": ([-0.02, -0.01, 0.0, 0.01], 0.2),
}
MEANS = [-8.0, -1.5, 0.2, 3.0, 8.0]
VARIANCES = [1e-3, 0.7, 25.0]
TOL = 1e-8


def _ref_log_lik(k: int, f: np.ndarray, cuts: list[float], sigma: float) -> np.ndarray:
    """log(Phi(c) - Phi(a)) by scipy's log_ndtr, in the lower tail's frame (mirrored when both ends are positive)."""
    b = np.concatenate([[-np.inf], cuts, [np.inf]])
    f = np.asarray(f, dtype=float)
    a, c = (b[k] - f) / sigma, (b[k + 1] - f) / sigma
    upper = a > 0
    a, c = np.where(upper, -c, a), np.where(upper, -a, c)
    with np.errstate(divide="ignore"):
        return log_ndtr(c) + np.log1p(-np.exp(log_ndtr(a) - log_ndtr(c)))


def _quad_tilted(k: int, cuts: list[float], sigma: float, m: float, v: float, u: float) -> tuple[float, float, float]:
    """log Z, mean and variance of p(y=k|f)^u N(f|m, v) by adaptive quadrature, split at the mode, the cavity's
    mean and a few scales around the cut-points (each piece to 1e-13), relative to the density at the mode."""
    sd = np.sqrt(v)

    def h(f):
        return u * _ref_log_lik(k, f, cuts, sigma) - 0.5 * (f - m) ** 2 / v

    grid = np.linspace(m - 40 * sd - 20, m + 40 * sd + 20, 20001)  # (the mode and support only place the pieces)
    hg = h(grid)
    top, mode = hg.max(), grid[hg.argmax()]
    support = grid[hg > top - 80]
    lo, hi = support.min() - 1e-3, support.max() + 1e-3
    near = [c + t * s for c in cuts for s in (sigma, sd) for t in (-10, -3, -1, 0, 1, 3, 10)]
    near += [mode + t * s for s in (sigma, sd) for t in (-10, -3, -1, 1, 3, 10)]
    pts = np.unique(np.round([lo, hi, mode, *[p for p in [m, *near] if lo < p < hi]], 10))

    edges = [-np.inf, *cuts, np.inf]

    def h_at(f: float) -> float:
        """``h`` at one point, as ``_ref_log_lik`` computes it (quad calls point by point: no arrays built, and the
        math module's log1p and exp on floats, no errstate)."""
        a, c = (edges[k] - f) / sigma, (edges[k + 1] - f) / sigma
        if a > 0:
            a, c = -c, -a
        ratio = math.exp(float(log_ndtr(a) - log_ndtr(c)))
        log_lik = float(log_ndtr(c)) + (math.log1p(-ratio) if ratio < 1.0 else -math.inf)
        return u * log_lik - 0.5 * (f - m) ** 2 / v

    def integral(power, shift=0.0):
        def g(f):
            return (f - m - shift) ** power * np.exp(h_at(f) - top)

        # the integrand is 1 at the mode: pieces far below it need no relative accuracy (epsabs)
        return sum(integrate.quad(g, a, c, epsabs=1e-18, epsrel=1e-13, limit=200)[0] for a, c in pairwise(pts))

    z = integral(0)
    mean = integral(1) / z
    var = integral(2, mean) / z
    return top + np.log(z) - 0.5 * np.log(2 * np.pi * v), m + mean, var


# ------------------------------------------------------------------ pointwise
@pytest.mark.parametrize("key", CONFIGS)
def test_log_lik_equals_normal_cdf_differences(key):
    cuts, sigma = CONFIGS[key]
    lik = OrdinalProbit(cuts, noise=sigma)
    b = np.concatenate([[-np.inf], cuts, [np.inf]])
    f = np.linspace(-3.0, 3.0, 41)
    for k in range(len(cuts) + 1):
        p = stats.norm.cdf((b[k + 1] - f) / sigma) - stats.norm.cdf((b[k] - f) / sigma)
        moderate = p > 1e-3  # where the difference of cdfs keeps its digits
        got = lik.log_lik(float(k), f)
        np.testing.assert_allclose(got[moderate], np.log(p[moderate]), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(got, _ref_log_lik(k, f, cuts, sigma), rtol=1e-11, atol=1e-12)
    # broadcasting: targets (n, 1) against latents (1, m), as MCMC calls it
    y = np.arange(len(cuts) + 1, dtype=float)[:, None]
    assert lik.log_lik(y, f[None, :]).shape == (len(cuts) + 1, f.size)


@pytest.mark.parametrize("key", ["K=3 far", "K=5 close"])
def test_log_lik_in_the_tails_equals_mpmath(key):
    import mpmath  # (in the test extra: a fresh clone runs this test, it does not skip it)

    mpmath.mp.dps = 50
    cuts, sigma = CONFIGS[key]
    lik = OrdinalProbit(cuts, noise=sigma)
    b = [-mpmath.inf, *[mpmath.mpf(c) for c in cuts], mpmath.inf]
    for k in range(len(cuts) + 1):
        for f in (-400.0, -30.0, -9.0, 9.0, 30.0, 400.0):
            a, c = (b[k] - f) / sigma, (b[k + 1] - f) / sigma
            p = mpmath.ncdf(-a) - mpmath.ncdf(-c) if a > 0 else mpmath.ncdf(c) - mpmath.ncdf(a)
            assert float(lik.log_lik(float(k), f)) == pytest.approx(float(mpmath.log(p)), rel=1e-13)


# ------------------------------------------------------------------ tilted moments
@pytest.mark.parametrize("power", [1.0, 0.5])
@pytest.mark.parametrize(
    "key", [pytest.param(k, marks=pytest.mark.slow) if k.startswith("K=5") else k for k in CONFIGS]
)  # (five classes: 12 s of quadrature; the slow run)
def test_tilted_log_z_and_moments_equal_adaptive_quadrature(key, power):
    """Every class, cavity means -8..8 and variances 1e-3..25: log Z (relative to Z), mean and variance to 1e-8."""
    cuts, sigma = CONFIGS[key]
    lik = OrdinalProbit(cuts, noise=sigma)
    for k in range(len(cuts) + 1):
        for m in MEANS:
            for v in VARIANCES:
                log_z, t_mean, t_var = _quad_tilted(k, cuts, sigma, m, v, power)
                out = lik.log_z(float(k), m, v, power)
                got_mean, got_var = out.moments(m, v)
                case = f"class {k}, cavity ({m}, {v})"
                assert float(out.log_z) == pytest.approx(log_z, rel=0, abs=TOL), case
                assert float(got_mean) == pytest.approx(t_mean, rel=TOL, abs=TOL * np.sqrt(t_var)), case
                assert float(got_var) == pytest.approx(t_var, rel=TOL), case


@pytest.mark.parametrize(
    ("cuts", "sigma", "k", "m", "v", "power"),
    [
        ([-0.005, 0.005], 0.01, 1, -7.0, 40.0, 1.0),
        ([-0.005, 0.005], 0.01, 1, 5.0, 25.0, 1.0),
        ([-1.0, 1.0], 0.02, 1, 1.07, 12.0, 0.5),
        ([-1.0, 1.0], 0.02, 1, -1.07, 12.0, 0.8),
    ],
    ids=["sliver-below", "sliver-above", "edge-0.5", "edge-0.8"],
)
def test_small_noise_and_wide_cavities_equal_adaptive_quadrature(cuts, sigma, k, m, v, power):
    """Where the tilted variance is the noise's, v / sigma^2 = 1e5 times below the cavity's: a sliver class
    0.01 wide (its log Z, N/Phi ratios and curvature must keep every digit), and a cavity just beyond an
    edge of a wide class at power < 1 (the rule must resolve the edge's width beside the mode)."""
    log_z, t_mean, t_var = _quad_tilted(k, cuts, sigma, m, v, power)
    out = OrdinalProbit(cuts, noise=sigma).log_z(float(k), m, v, power)
    got_mean, got_var = out.moments(m, v)
    assert float(out.log_z) == pytest.approx(log_z, rel=0, abs=TOL)
    assert float(got_mean) == pytest.approx(t_mean, rel=TOL, abs=TOL * np.sqrt(t_var))
    assert float(got_var) == pytest.approx(t_var, rel=TOL)


def test_tilted_cumulants_and_expected_log_lik_equal_quadrature():
    cuts, sigma = CONFIGS["K=3 far"]
    lik = OrdinalProbit(cuts, noise=sigma)
    for k, m, v in [(0, 0.5, 1.0), (1, -3.0, 0.2), (2, 0.0, 9.0), (1, 0.2, 0.01)]:
        _, t_mean, t_var = _quad_tilted(k, cuts, sigma, m, v, 1.0)
        k1, k2, _, _ = lik.tilted_cumulants(float(k), m, v)
        assert float(k1) == pytest.approx(t_mean, rel=1e-9, abs=1e-9)
        assert float(k2) == pytest.approx(t_var, rel=1e-9)
        log_z = _quad_tilted(k, cuts, sigma, m, v, 1.0)[0]
        sd = np.sqrt(v)

        def weighted(f, k=k, m=m, v=v, log_z=log_z):
            log_p = _ref_log_lik(k, f, cuts, sigma)
            return log_p * np.exp(log_p - 0.5 * (f - m) ** 2 / v - 0.5 * np.log(2 * np.pi * v) - log_z)

        pts = sorted({*cuts, m})
        expected = integrate.quad(weighted, m - 12 * sd - 5, m + 12 * sd + 5, points=pts, limit=400, epsrel=1e-12)[0]
        assert float(lik.expected_log_lik(float(k), m, v)) == pytest.approx(expected, rel=1e-9, abs=1e-10)


def test_arrays_broadcast_and_match_scalars():
    cuts, sigma = CONFIGS["K=5 far"]
    lik = OrdinalProbit(cuts, noise=sigma)
    y = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 2.0])
    m = np.array([-5.0, -2.0, 0.0, 1.0, 6.0, 30.0])
    v = np.array([0.1, 1.0, 4.0, 0.01, 2.0, 1e-3])
    for power in (1.0, 0.5):
        out = lik.log_z(y, m, v, power)
        for i in range(y.size):
            one = lik.log_z(y[i], m[i], v[i], power)
            assert out.log_z[i] == pytest.approx(float(one.log_z), rel=1e-13, abs=1e-13)
            assert out.d2log_z[i] == pytest.approx(float(one.d2log_z), rel=1e-12, abs=1e-15)
        assert np.all(np.isfinite(out.d2log_z)) and np.all(out.d2log_z < 0)  # log-concave: site precisions > 0


# ------------------------------------------------------------------ hyperparameters
def _central_difference(fn, theta, h=1e-5):
    cols = []
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = h
        cols.append((fn(theta + e) - fn(theta - e)) / (2 * h))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("key", ["K=2", "K=3 far", "K=5 far", "K=5 close"])
@pytest.mark.parametrize("learn", ["both", "cut_points", "noise"])
def test_evidence_gradient_in_theta_equals_central_differences(key, learn):
    cuts, sigma = CONFIGS[key]
    kwargs = {"noise_bounds": "fixed"} if learn == "cut_points" else {}
    if learn == "noise":
        kwargs["cut_points_bounds"] = "fixed"
    lik = OrdinalProbit(cuts, noise=sigma, **kwargs)
    n_classes = len(cuts) + 1
    assert lik.n_dims == {"both": n_classes, "cut_points": n_classes - 1, "noise": 1}[learn]
    y = np.repeat(np.arange(n_classes, dtype=float), 6)
    rng = np.random.default_rng(0)
    m = rng.uniform(-4.0, 4.0, y.size)
    v = np.exp(rng.uniform(np.log(0.01), np.log(10.0), y.size))
    theta = lik.theta
    grad = lik.dlog_z_dtheta(y, m, v)
    fd = _central_difference(lambda t: lik.clone_with_theta(t).log_z(y, m, v).log_z, theta)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
    f = rng.uniform(-3.0, 3.0, y.size)
    fd_lik = _central_difference(lambda t: lik.clone_with_theta(t).log_lik(y, f), theta)
    np.testing.assert_allclose(lik._dlog_lik_dtheta(y, f), fd_lik, rtol=1e-6, atol=1e-7)


def test_theta_layout_bounds_and_round_trip():
    lik = OrdinalProbit([-1.0, 0.5, 2.0], noise=0.4, noise_bounds=(1e-2, 1e2), cut_points_bounds=((-5, 5), (0.1, 10)))
    np.testing.assert_allclose(lik.theta, [-1.0, np.log(1.5), np.log(1.5), np.log(0.4)], rtol=1e-15)
    np.testing.assert_allclose(
        lik.bounds, [[-5, 5], np.log([0.1, 10]), np.log([0.1, 10]), np.log([1e-2, 1e2])], rtol=1e-15
    )
    back = lik.clone_with_theta(lik.theta)
    np.testing.assert_allclose(back.cut_points, [-1.0, 0.5, 2.0], rtol=1e-15)
    assert back.noise == pytest.approx(0.4, rel=1e-15)
    moved = lik.clone_with_theta([0.3, np.log(2.0), np.log(0.5), np.log(1.5)])
    np.testing.assert_allclose(moved.cut_points, [0.3, 2.3, 2.8], rtol=1e-15)
    assert moved.noise == pytest.approx(1.5)
    # the search's vector: kernel block (fixed: empty), then the likelihood's, and back
    hyper = HyperVector(ConstantKernel(1.0, "fixed") * RBF(1.0, "fixed"), lik)
    np.testing.assert_array_equal(hyper.theta, lik.theta)
    np.testing.assert_array_equal(hyper.theta_bounds, lik.bounds)
    assert hyper.split(hyper.x0)[1] == back
    assert OrdinalProbit([0.0], cut_points_bounds="fixed", noise_bounds="fixed").n_dims == 0
    # parameters: scikit-learn's clone, equality and hashing with an array of cut-points
    arr = OrdinalProbit(np.array([-0.5, 0.5]), noise=0.3)
    assert clone(arr) == arr == OrdinalProbit([-0.5, 0.5], noise=0.3)
    assert hash(arr) == hash(OrdinalProbit((-0.5, 0.5), noise=0.3))
    assert OrdinalProbit().set_params(cut_points=[0.0, 1.0]).n_classes == 3


@pytest.mark.slow
def test_ep_evidence_gradient_equals_differences_of_the_ep_evidence():
    """At an EP fixed point the evidence's gradient in theta is the sum of the sites' d log Z / d theta."""
    X, y = _ordinal_problem()
    prior = DensePrior.from_kernel(_KERNEL, X, noise=1e-8)
    lik = OrdinalProbit([-0.5, 0.5], noise=0.3)
    res = infer(prior, y, lik, EP(), tol=1e-10, max_sweeps=500)
    grad = likelihood_evidence_gradient(res.posterior, lik, y)

    def evidence(t):
        return infer(prior, y, lik.clone_with_theta(t), EP(), tol=1e-10, max_sweeps=500).log_evidence

    np.testing.assert_allclose(grad, _central_difference(evidence, lik.theta), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ predictive
@pytest.mark.parametrize("key", CONFIGS)
def test_class_probabilities_equal_integration_and_sum_to_one(key):
    cuts, sigma = CONFIGS[key]
    lik = OrdinalProbit(cuts, noise=sigma)
    mean = np.array([-6.0, -0.5, 0.0, 0.205, 2.0, 7.0])
    var = np.array([0.5, 2.0, 1e-3, 0.3, 10.0, 1.0])
    probs = lik.class_probabilities(mean, var)
    assert probs.shape == (mean.size, len(cuts) + 1)
    for i, (m, v) in enumerate(zip(mean, var, strict=True)):
        sd = np.sqrt(v)
        for k in range(len(cuts) + 1):

            def integrand(f, k=k, m=m, sd=sd):
                return np.exp(_ref_log_lik(k, f, cuts, sigma)) * normal_pdf(f, m, sd)

            pts = sorted(c for c in {*cuts, m} if m - 15 * sd < c < m + 15 * sd)
            ref = integrate.quad(integrand, m - 15 * sd, m + 15 * sd, points=pts or None, limit=400, epsrel=1e-12)[0]
            assert probs[i, k] == pytest.approx(ref, rel=1e-8, abs=1e-14), (m, v, k)
    far = lik.class_probabilities(np.array([-1e3, -40.0, 40.0, 1e3]), np.array([1e-4, 1.0, 1.0, 1e4]))
    np.testing.assert_allclose(np.sum(probs, axis=-1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.sum(far, axis=-1), 1.0, rtol=0, atol=1e-12)
    expected, spread = lik.predict_y(mean, var)
    k = np.arange(len(cuts) + 1)
    np.testing.assert_allclose(expected, probs @ k, rtol=1e-14)
    np.testing.assert_allclose(spread, probs @ k**2 - (probs @ k) ** 2, rtol=1e-9, atol=1e-14)
    np.testing.assert_array_equal(lik.predict(mean, var), probs)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "cut_points",
    [[0.5, 0.5], [1.0, 0.0], [0.0, np.nan], [np.inf], [], [[0.0, 1.0]], 0.0, ["a", "b"]],
    ids=["tied", "decreasing", "nan", "inf", "empty", "2-d", "scalar", "strings"],
)
def test_bad_cut_points_are_refused_naming_them(cut_points):
    with pytest.raises(ValueError, match="cut_points"):
        OrdinalProbit(cut_points)


def test_cut_points_unset_are_refused_naming_them():
    lik = OrdinalProbit(noise=0.5)
    for use in (
        lambda: lik.log_z(0.0, 0.0, 1.0),
        lambda: lik.log_lik(0.0, 0.0),
        lambda: lik.theta,
        lambda: lik.n_dims,
        lambda: lik.class_probabilities(0.0, 1.0),
    ):
        with pytest.raises(ValueError, match="cut_points"):
            use()
    assert lik.check_targets([0, 1, 4]).tolist() == [0.0, 1.0, 4.0]  # no class count yet: any non-negative integers


@pytest.mark.parametrize(
    "y", [[0, 1, 3], [0, 1, -1], [0, 1.5, 2], [0, np.nan, 1], [0, np.inf, 1], [[0, 1]], ["a", "b"], [1, 1, 1]]
)
def test_bad_targets_are_refused_naming_y(y):
    lik = OrdinalProbit([-0.5, 0.5])
    with pytest.raises(ValueError, match="y"):
        lik.check_targets(y)


def test_bad_targets_in_the_numerics_and_bad_options_are_refused():
    lik = OrdinalProbit([-0.5, 0.5])
    with pytest.raises(ValueError, match="y"):
        lik.log_z(np.array([0.0, 2.5]), 0.0, 1.0)
    with pytest.raises(ValueError, match="y"):
        lik.log_lik(3.0, 0.0)
    assert lik.check_targets([2, 2], both_classes=False).tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="noise"):
        OrdinalProbit([0.0], noise=0.0)
    with pytest.raises(ValueError, match="cut_points_bounds"):
        OrdinalProbit([0.0], cut_points_bounds=(1.0, 2.0))
    with pytest.raises(ValueError, match="cut_points_bounds"):
        OrdinalProbit([0.0], cut_points_bounds=((1.0, 2.0), (0.0, 1.0)))
    with pytest.raises(ValueError, match="theta"):
        lik.clone_with_theta([0.0])


# ------------------------------------------------------------------ end to end
_KERNEL = ConstantKernel(1.0, "fixed") * RBF(1.0, "fixed")


def _ordinal_problem(n=30, seed=3):
    """Three classes from a known latent 1.2 sin(1.5 x) through the cut-points (-0.5, 0.5) and noise sd 0.3."""
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-3.0, 3.0, n))[:, None]
    y = np.digitize(1.2 * np.sin(1.5 * X[:, 0]) + rng.normal(0.0, 0.3, n), [-0.5, 0.5]).astype(float)
    return X, y


def test_ep_posterior_matches_elliptical_slice_sampling():
    """EP's latent marginals within 0.2 posterior sds of the sampler's means, variances within [0.8, 1.25]."""
    X, y = _ordinal_problem()
    assert set(np.unique(y)) == {0.0, 1.0, 2.0}
    lik = OrdinalProbit(cut_points=[-0.5, 0.5], noise=0.3)
    res = infer(DensePrior.from_kernel(_KERNEL, X, noise=1e-8), y, lik, EP(), tol=1e-8, max_sweeps=500)
    assert res.converged
    K = _KERNEL(X) + 1e-8 * np.eye(X.shape[0])
    with threadpool_limits(limits=1, user_api="blas"):  # 30 x 30 solves: threads only add overhead
        mcmc = elliptical_slice(
            K, y, lik, n_samples=2000, n_burn=500, n_chains=4, random_state=1, approx=(res.mean, res.cov)
        )
    assert mcmc.converged
    sd = np.sqrt(mcmc.var)
    assert np.all(np.abs(res.mean - mcmc.mean) <= 0.2 * sd)
    ratio = res.marginal_var / mcmc.var
    assert np.all((ratio >= 0.8) & (ratio <= 1.25)), (ratio.min(), ratio.max())


def test_a_cavity_far_beyond_the_classes_gives_the_tilted_at_the_class_edge():
    r"""The convergent methods evaluate cavities far out (mean 1e7, variance 7e5: met fitting ORCA's toy with
    rule="auto"; the mode's bracket reached -1e16 and the panels overflowed to NaN).  There the cavity is a
    straight slope :math:`s = (m - b)/v` in log density across the class's upper edge :math:`b`, so the tilted is
    :math:`e^{sf}\Phi((b - f)/\sigma)`: an exponential below the edge convolved with the noise, whose mean is
    :math:`b - 1/s + s\sigma^2` and variance :math:`1/s^2 + \sigma^2` (closed forms)."""
    cuts, sigma = [-2.1, -0.9, -0.35, 0.58], 0.0224
    lik = OrdinalProbit(cuts, noise=sigma)
    y, m, v = np.array([1.0, 0.0]), np.array([1.0147e7, 2.86e6]), np.array([6.85e5, 1e6])
    edge = np.array([-0.9, -2.1])
    slope = (m - edge) / v
    mean, k2, k3, k4 = lik.tilted_cumulants(y, m, v)
    assert np.all(np.isfinite(k3)) and np.all(np.isfinite(k4))
    np.testing.assert_allclose(mean, edge - 1 / slope + slope * sigma**2, rtol=1e-4)
    np.testing.assert_allclose(k2, 1 / slope**2 + sigma**2, rtol=1e-3)
