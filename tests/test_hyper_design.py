"""The CCD and grid over hyperparameters (relaxep.hyper.design) against closed forms and brute-force quadrature."""

import math
from itertools import combinations

import numpy as np
import pytest
from scipy.special import polygamma, psi

from relaxep.hyper import (
    ccd_design,
    fractional_factorial,
    grid_design,
    hessian_from_gradient,
    theta_design,
    weighted_moments,
)


def _gaussian(d, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d))
    precision = a @ a.T + d * np.eye(d)
    mean = rng.normal(size=d)

    def log_density(x):
        r = np.asarray(x) - mean
        return -0.5 * r @ precision @ r

    log_z = 0.5 * d * math.log(2 * math.pi) - 0.5 * np.linalg.slogdet(precision)[1]
    return log_density, mean, precision, log_z


def _mixture_cov(design):
    w, x = design.weights, design.points
    m = w @ x
    return m, (x - m).T @ ((x - m) * w[:, None])


# A skewed, correlated 2-d log density: x1 = log t1, t1 ~ Gamma(A, rate B); x2 = log t2, t2 | t1 ~ Gamma(C, rate t1).
A, B, C = 2.0, 1.0, 3.0


def _skewed_log_density(x):
    x = np.asarray(x, dtype=float)
    return (A + C) * x[..., 0] - B * np.exp(x[..., 0]) + C * x[..., 1] - np.exp(x[..., 0] + x[..., 1])


def _skewed_gradient(x):
    e1, e12 = B * np.exp(x[0]), np.exp(x[0] + x[1])
    return np.array([A + C - e1 - e12, C - e12])


def _skewed_hessian(x):
    e1, e12 = B * np.exp(x[0]), np.exp(x[0] + x[1])
    return -np.array([[e1 + e12, e12], [e12, e12]])


# Closed forms: E log t = psi(shape) - log rate, Var log t = psi'(shape); x2 = log t2 has mean psi(C) - x1 given x1.
SKEWED_MODE = np.array([math.log(A / B), math.log(C) - math.log(A / B)])
SKEWED_MEAN = np.array([psi(A) - math.log(B), psi(C) - psi(A) + math.log(B)])
SKEWED_SD = np.sqrt([polygamma(1, A), polygamma(1, A) + polygamma(1, C)])


def test_skewed_closed_forms_match_brute_force_quadrature():
    # 400 x 400 midpoint rule on a box holding all but ~1e-12 of the mass: checks the closed forms the tests use.
    g1 = np.linspace(-9.0, 4.0, 401)
    g2 = np.linspace(-6.0, 9.0, 401)
    c1, c2 = (g1[1:] + g1[:-1]) / 2, (g2[1:] + g2[:-1]) / 2
    x = np.stack(np.meshgrid(c1, c2, indexing="ij"), axis=-1).reshape(-1, 2)
    lp = _skewed_log_density(x)
    w = np.exp(lp - lp.max())
    mean, sd = weighted_moments(x, w)
    np.testing.assert_allclose(mean, SKEWED_MEAN, atol=1e-5)
    np.testing.assert_allclose(sd, SKEWED_SD, rtol=1e-4)
    np.testing.assert_allclose(_skewed_gradient(SKEWED_MODE), 0.0, atol=1e-12)


# (a) Gaussian: the CCD exactly, the grid to a stated tolerance.
@pytest.mark.parametrize("d", [1, 2, 3])
def test_ccd_reproduces_a_gaussians_mean_covariance_and_normaliser_exactly(d):
    log_density, mean, precision, log_z = _gaussian(d, seed=d)
    design = theta_design(log_density, mean, -precision, method="ccd")
    m, cov = _mixture_cov(design)
    np.testing.assert_allclose(m, mean, atol=1e-12)
    np.testing.assert_allclose(cov, np.linalg.inv(precision), rtol=1e-10, atol=1e-13)
    assert design.log_normaliser == pytest.approx(log_z, abs=1e-10)
    np.testing.assert_allclose(design.scales, 1.0, atol=1e-12)  # a Gaussian drops 2 at z = 2
    assert design.points.shape[0] == {1: 3, 2: 9, 3: 15}[d]


@pytest.mark.parametrize("d", [1, 2, 3])
def test_grid_reproduces_a_gaussians_moments_to_a_stated_tolerance(d):
    log_density, mean, precision, log_z = _gaussian(d, seed=d)
    sigma = np.linalg.inv(precision)
    chol = np.linalg.cholesky(precision)
    # measured, (variance ratio in every eigen-direction, log normaliser error): threshold 2.5 (GPstuff's default)
    # d=1 (0.996, -3e-4), d=2 (0.914, -0.023), d=3 (0.867, -0.057); threshold 6: (0.9999, -3e-6), (0.9987, -1.5e-4),
    # (0.9962, -7e-4), with 9, 57, 305 points against 7, 25, 87
    for threshold, low, logz_tol in ((2.5, {1: 0.99, 2: 0.9, 3: 0.85}[d], 0.07), (6.0, 0.99, 1e-3)):
        design = theta_design(log_density, mean, -precision, method="grid", threshold=threshold)
        m, cov = _mixture_cov(design)
        np.testing.assert_allclose(m, mean, atol=1e-12)  # the lattice walk is symmetric
        ratio = np.linalg.eigvalsh(chol.T @ cov @ chol)  # Sigma^-1/2 cov Sigma^-1/2's eigenvalues
        assert np.all((ratio > low) & (ratio < 1.0)), (threshold, ratio)
        assert -logz_tol < design.log_normaliser - log_z < 0
        np.testing.assert_allclose(design.weights.sum(), 1.0)
    assert np.max(np.abs(cov - sigma)) < 0.01 * np.max(np.diag(sigma))


def test_the_grid_walks_to_the_threshold_and_one_ring_beyond():
    # On a standard Gaussian, by brute-force enumeration: the points with |k|^2 / 2 < threshold and their neighbours.
    for d, threshold, step in ((2, 2.5, 1.0), (3, 2.5, 1.0), (2, 6.0, 0.75)):
        z, lp = grid_design(lambda x: -0.5 * x @ x, np.zeros(d), np.eye(d), step=step, threshold=threshold)
        box = np.stack(np.meshgrid(*[np.arange(-8, 9)] * d, indexing="ij"), axis=-1).reshape(-1, d)
        inner = box[0.5 * step**2 * np.sum(box**2, axis=1) < threshold - 1e-9]
        steps = np.concatenate([np.eye(d, dtype=int), -np.eye(d, dtype=int)])
        expected = {tuple(k) for k in inner} | {tuple(k + e) for k in inner for e in steps}
        assert {tuple(k) for k in np.rint(z / step).astype(int)} == expected
        np.testing.assert_allclose(lp, -0.5 * np.sum(z**2, axis=1))


# (b) the CCD weights integrate a standard normal's constant and second moments (closed form (2 pi)^(d/2)).
@pytest.mark.parametrize("d", range(1, 11))
def test_ccd_weights_integrate_a_standard_normal(d):
    z, w = ccd_design(d)
    kernel = w * np.exp(-0.5 * np.sum(z**2, axis=1))
    scale = (2 * math.pi) ** (d / 2)
    assert kernel.sum() == pytest.approx(scale, rel=1e-12)
    np.testing.assert_allclose(z.T @ (kernel[:, None] * z), scale * np.eye(d), atol=1e-11 * scale)
    np.testing.assert_allclose(kernel @ z, 0.0, atol=1e-11 * scale)
    radius = np.sqrt(np.sum(z[1:] ** 2, axis=1))
    np.testing.assert_allclose(radius, 1.1 * math.sqrt(d))  # all non-centre points on the f0 sqrt(d) sphere


@pytest.mark.parametrize("d", range(2, 13))
def test_fractional_factorial_has_resolution_v(d):
    # Resolution >= V: main effects and two-factor interactions are mutually orthogonal (no word shorter than 5).
    x = fractional_factorial(d)
    assert set(np.unique(x)) == {-1.0, 1.0}
    columns = [x[:, i] for i in range(d)] + [x[:, i] * x[:, j] for i, j in combinations(range(d), 2)]
    m = np.stack(columns, axis=1)
    np.testing.assert_array_equal(m.T @ m, x.shape[0] * np.eye(m.shape[1]))
    assert x.shape[0] == {2: 4, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 8: 64, 9: 128, 10: 128, 11: 128, 12: 256}[d]


# (c) the skewed 2-d density: CCD and grid against the closed forms.
def test_ccd_and_grid_on_a_skewed_density_are_near_the_truth():
    hessian = _skewed_hessian(SKEWED_MODE)
    results = {}
    for method, asymmetric in (("ccd", True), ("ccd", False), ("grid", True)):
        design = theta_design(_skewed_log_density, SKEWED_MODE, hessian, method=method, asymmetric=asymmetric)
        results[method, asymmetric] = weighted_moments(design.points, design.weights)
    # measured (mean error / true sd; sd ratio), x1 and x2: CCD (0.11, -0.018; 0.88, 0.89), CCD without the
    # skewness correction (0.15, -0.044; 0.86, 0.89), grid (0.036, -0.007; 0.93, 0.93), grid at threshold 6
    # (0.002, -0.001; 0.994, 0.995)
    design = theta_design(_skewed_log_density, SKEWED_MODE, hessian, method="grid", threshold=6.0)
    results["grid6", True] = weighted_moments(design.points, design.weights)
    tolerances = {("ccd", True): (0.15, 0.15), ("ccd", False): (0.2, 0.2), ("grid", True): (0.05, 0.08)}
    tolerances["grid6", True] = (0.01, 0.01)
    for key, (mean_tol, sd_tol) in tolerances.items():
        mean, sd = results[key]
        assert np.all(np.abs(mean - SKEWED_MEAN) <= mean_tol * SKEWED_SD), (key, mean, SKEWED_MEAN)
        assert np.all(np.abs(sd / SKEWED_SD - 1) <= sd_tol), (key, sd, SKEWED_SD)
    # the skewness correction brings the CCD's mean nearer the truth
    err = {k: np.max(np.abs(results[k][0] - SKEWED_MEAN) / SKEWED_SD) for k in results}
    assert err["ccd", True] < err["ccd", False]


def test_asymmetric_ccd_integrates_split_gaussians_exactly():
    # A product of two split normals, sides (0.6, 1.5) and (1.3, 0.8): the stretched CCD's normaliser is exact.
    sides = np.array([[0.6, 1.5], [1.3, 0.8]])

    def log_density(x):
        s = np.where(x >= 0, sides[:, 1], sides[:, 0])
        return -0.5 * np.sum((x / s) ** 2)

    # the Hessian at the mode is not defined; any negative definite one serves: take the identity's
    design = theta_design(log_density, np.zeros(2), -np.eye(2), method="ccd")
    np.testing.assert_allclose(design.scales, sides, rtol=1e-12)
    exact = np.sum(np.log(math.sqrt(2 * math.pi) * sides.mean(axis=1)))
    assert design.log_normaliser == pytest.approx(exact, abs=1e-12)
    mean, _ = weighted_moments(design.points, design.weights)
    truth = math.sqrt(2 / math.pi) * (sides[:, 1] - sides[:, 0])
    assert np.all(np.abs(mean - truth) < 0.05 * np.abs(truth))  # measured: 2.7% low
    plain = theta_design(log_density, np.zeros(2), -np.eye(2), method="ccd", asymmetric=False)
    mean, _ = weighted_moments(plain.points, plain.weights)
    assert np.all(np.abs(mean - truth) > 0.2 * np.abs(truth))  # measured: 23% low without the correction


# (d) the Hessian from the gradient.
@pytest.mark.parametrize("x", [SKEWED_MODE, np.array([-1.3, 2.2]), np.array([4.0, -3.0])])
def test_hessian_from_gradient_matches_the_closed_form(x):
    h = hessian_from_gradient(_skewed_gradient, x)
    exact = _skewed_hessian(x)
    assert np.max(np.abs(h - exact)) <= 1e-6 * np.max(np.abs(exact))
    np.testing.assert_array_equal(h, h.T)


def test_hessian_from_gradient_stays_inside_the_bounds():
    seen = []

    def gradient(x):
        seen.append(np.array(x))
        return _skewed_gradient(x)

    x = np.array([0.3, 1.0])
    lower, upper = np.array([0.3 - 5e-5, -10.0]), np.array([10.0, 1.0])
    h = hessian_from_gradient(gradient, x, lower=lower, upper=upper)
    exact = _skewed_hessian(x)
    assert np.max(np.abs(h - exact)) <= 1e-6 * np.max(np.abs(exact))
    visited = np.array(seen)
    assert np.all(visited >= lower) and np.all(visited <= upper)
    with pytest.raises(ValueError, match="step"):
        hessian_from_gradient(gradient, x, lower=x - 1e-5, upper=x + 1e-5)


# (e) the design sizes.
def test_design_sizes():
    sizes = [ccd_design(d)[0].shape[0] for d in range(1, 11)]
    assert sizes[1] == 9 and sizes[2] == 15
    assert sizes == [3, 9, 15, 25, 27, 45, 79, 81, 147, 149]


# Bounds, non-finite values, Hessians that are not negative definite.
@pytest.mark.parametrize("method", ["ccd", "grid"])
def test_points_outside_the_bounds_are_dropped_without_an_evaluation(method):
    log_density, mean, precision, _ = _gaussian(2, seed=5)
    upper = mean + np.array([0.3, 10.0])
    evaluated = []

    def logp(x):
        evaluated.append(np.array(x))
        return log_density(x)

    design = theta_design(logp, mean, -precision, method=method, upper=upper)
    assert design.n_dropped > 0
    assert np.all(np.array(evaluated) <= upper) and np.all(design.points <= upper)
    assert design.weights.sum() == pytest.approx(1.0) and np.all(design.weights > 0)


@pytest.mark.parametrize("method", ["ccd", "grid"])
@pytest.mark.parametrize("bad", [np.nan, -np.inf])
def test_a_non_finite_log_posterior_gets_weight_zero(method, bad):
    log_density, mean, precision, _ = _gaussian(2, seed=6)

    cut = mean[0] + 0.5 / math.sqrt(precision[0, 0])

    def logp(x):
        return bad if x[0] > cut else log_density(x)

    design = theta_design(logp, mean, -precision, method=method)
    hit = design.points[:, 0] > cut
    assert hit.any()
    assert np.all(design.weights[hit] == 0) and np.all(design.log_posterior[hit] == -np.inf)
    assert np.all(np.isfinite(design.weights)) and design.weights.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="not finite"):
        theta_design(lambda x: np.nan, mean, -precision, method=method)
    with pytest.raises(ValueError, match=r"\+inf"):
        theta_design(lambda x: np.inf, mean, -precision, method=method)


def test_a_hessian_not_negative_definite_is_refused_or_floored():
    log_density, mean, _, _ = _gaussian(2, seed=7)
    flat = np.diag([-2.0, 0.0])
    with pytest.raises(ValueError, match="not negative definite"):
        theta_design(log_density, mean, flat)
    design = theta_design(log_density, mean, flat, min_precision=0.25)
    assert design.n_floored == 1
    np.testing.assert_allclose(design.covariance, np.diag([0.5, 4.0]))
    with pytest.raises(ValueError, match="min_precision"):
        theta_design(log_density, mean, flat, min_precision=-1.0)


# (f) bad input.
def test_the_grid_refuses_a_large_dimension_before_evaluating():
    calls = []

    def logp(x):
        calls.append(1)
        return -0.5 * x @ x

    with pytest.raises(ValueError, match=r"d=6.*'ccd'"):
        theta_design(logp, np.zeros(6), -np.eye(6), method="grid")
    assert not calls
    with pytest.raises(ValueError, match="reached max_points"):  # a density that does not fall off
        grid_design(lambda x: 0.0, np.zeros(2), np.eye(2), max_points=60)


def test_bad_input_is_refused():
    log_density, mean, precision, _ = _gaussian(2)
    for d in (0, 2.5, True, 65):
        with pytest.raises(ValueError, match="d must be"):
            ccd_design(d)
    with pytest.raises(ValueError, match="f0"):
        ccd_design(3, f0=0.9)
    with pytest.raises(ValueError, match="method"):
        theta_design(log_density, mean, -precision, method="laplace")
    with pytest.raises(ValueError, match="hessian"):
        theta_design(log_density, mean, -precision[:1])
    with pytest.raises(ValueError, match="symmetric"):
        theta_design(log_density, mean, -precision + np.array([[0, 1.0], [0, 0]]))
    with pytest.raises(ValueError, match="x_map"):
        theta_design(log_density, mean, -precision, upper=mean - 1)
    with pytest.raises(ValueError, match="lower and upper"):
        theta_design(log_density, mean, -precision, lower=mean + 1, upper=mean)
    with pytest.raises(ValueError, match="lower and upper"):
        theta_design(log_density, mean, -precision, lower=[-9.0, -9.0, -9.0])
    with pytest.raises(ValueError, match="x_map"):
        theta_design(log_density, [np.nan, 0.0], -precision)
    with pytest.raises(ValueError, match="step"):
        hessian_from_gradient(_skewed_gradient, mean, step=0.0)
    with pytest.raises(ValueError, match="gradient"):
        hessian_from_gradient(lambda x: np.zeros(3), mean)
    with pytest.raises(ValueError, match="threshold"):
        grid_design(log_density, mean, np.eye(2), threshold=-1.0)
    with pytest.raises(ValueError, match="weights"):
        weighted_moments(np.zeros((3, 2)), [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="points"):
        weighted_moments(np.zeros(3), [1.0, 1.0, 1.0])


def test_weighted_moments_against_numpy():
    x = np.random.default_rng(3).normal(size=(50, 3))
    mean, sd = weighted_moments(x, np.ones(50) * 7.0)
    np.testing.assert_allclose(mean, x.mean(axis=0))
    np.testing.assert_allclose(sd, x.std(axis=0))
    w = np.r_[np.zeros(25), np.ones(25)]
    mean, sd = weighted_moments(x, w)
    np.testing.assert_allclose(mean, x[25:].mean(axis=0))
    np.testing.assert_allclose(sd, x[25:].std(axis=0))


def test_the_design_is_read_only():
    log_density, mean, precision, _ = _gaussian(2)
    design = theta_design(log_density, mean, -precision)
    with pytest.raises(ValueError):
        design.weights[0] = 1.0
    mean[0] += 1.0  # the caller's array is not the design's
    assert design.mode[0] != mean[0]
