"""Gaussian, Student-t and Laplace likelihoods against adaptive quadrature, closed forms and Monte Carlo."""

import math
import warnings

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.integrate import IntegrationWarning
from scipy.special import stdtr

from oracles import regression_tilted_quad
from relaxep import Gaussian, Laplace, Likelihood, StudentT

POWERS = [1.0, 0.8, 0.5]


def t_log_pdf(df, scale, y):
    """log t_df(y - f; scale) as a scalar function of f, written out (not scipy's)."""
    const = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi) - math.log(scale)
    return lambda f: const - 0.5 * (df + 1) * math.log1p(((y - f) / scale) ** 2 / df)


def t_dlog_pdf_dlog_scale(df, scale, y):
    return lambda f: (df + 1) * ((y - f) / scale) ** 2 / (df + ((y - f) / scale) ** 2) - 1.0


def laplace_log_pdf(scale, y):
    return lambda f: -math.log(2 * scale) - abs(y - f) / scale


# (likelihood, y, cavity mean, cavity variance, log p(y|f), width, d log p / d log scale)
CASES = {
    "t ordinary": (StudentT(4.0, 0.3), 0.0, 0.2, 1.0),
    "t outlier 20 sd (bimodal)": (StudentT(4.0, 0.3), 0.0, 20.0, 1.0),
    "t outlier 50 sd, narrow cavity": (StudentT(4.0, 0.1), 0.0, 5.0, 0.01),
    "t heavy df=1.5": (StudentT(1.5, 1.0), 1.0, 9.0, 4.0),
    "t tiny scale": (StudentT(4.0, 1e-4), 0.0, 0.5, 1.0),
    "t huge scale": (StudentT(3.0, 1e3), 2.0, -1.0, 1e-2),
    "t residual 1e6": (StudentT(4.0, 1.0), 1e6, 0.0, 1.0),
    "laplace ordinary": (Laplace(0.5), 0.0, 0.4, 1.0),
    "laplace outlier 30 sd": (Laplace(0.5), 0.0, 30.0, 1.0),
    "laplace tiny scale": (Laplace(1e-3), 1.0, 0.0, 1.0),
    "laplace huge scale": (Laplace(1e3), 0.0, 3.0, 0.5),
}


def _oracle_args(lik, y):
    if isinstance(lik, StudentT):
        return t_log_pdf(lik.df, lik.scale, y), lik.scale, t_dlog_pdf_dlog_scale(lik.df, lik.scale, y)
    return laplace_log_pdf(lik.scale, y), lik.scale, lambda f: abs(y - f) / lik.scale - 1.0


@pytest.mark.parametrize("key", CASES)
@pytest.mark.parametrize("power", POWERS)
def test_log_z_and_tilted_moments_equal_quadrature(key, power):
    lik, y, mean, var = CASES[key]
    log_p, width, _ = _oracle_args(lik, y)
    ref = regression_tilted_quad(log_p, y, mean, var, power, width)
    out = lik.log_z(y, mean, var, power)
    m, v = out.moments(mean, var)
    assert float(out.log_z) == pytest.approx(ref["log_z"], rel=1e-8, abs=1e-8)
    assert float(m) == pytest.approx(ref["mean"], abs=1e-8 * math.sqrt(ref["var"]))
    assert float(v) == pytest.approx(ref["var"], rel=1e-8, abs=1e-8 * var)


@pytest.mark.parametrize("key", CASES)
def test_cumulants_expected_log_lik_and_gradient_equal_quadrature(key):
    lik, y, mean, var = CASES[key]
    log_p, width, dlog_p = _oracle_args(lik, y)
    ref = regression_tilted_quad(log_p, y, mean, var, 1.0, width, extras=(log_p, dlog_p))
    k1, k2, k3, k4 = (float(k) for k in lik.tilted_cumulants(y, mean, var))
    assert k1 == pytest.approx(ref["mean"], abs=1e-8 * math.sqrt(ref["var"]))
    assert k2 == pytest.approx(ref["var"], rel=1e-8, abs=1e-8 * var)
    assert k3 == pytest.approx(ref["k3"], rel=1e-6, abs=1e-8 * ref["var"] ** 1.5)
    assert k4 == pytest.approx(ref["k4"], rel=1e-6, abs=1e-8 * ref["var"] ** 2)
    elog, dtheta = ref["extras"]
    assert float(lik.expected_log_lik(y, mean, var)) == pytest.approx(elog, rel=1e-8, abs=1e-8)
    assert float(lik.dlog_z_dtheta(y, mean, var)[0]) == pytest.approx(dtheta, rel=1e-8, abs=1e-8)


@pytest.mark.parametrize(
    "lik",
    [
        Gaussian(0.3),
        StudentT(4.0, 0.3),
        StudentT(2.5, 0.7, df_bounds=(0.5, 100.0)),
        StudentT(6.0, 0.2, df_bounds=(0.5, 100.0), scale_bounds="fixed"),
        Laplace(0.4),
    ],
    ids=repr,
)
def test_dlog_z_dtheta_equals_finite_differences(lik):
    y, mean, var = np.array([0.0, 0.0, 1.0]), np.array([0.3, 8.0, -2.0]), np.array([1.0, 0.5, 2.0])
    grad = lik.dlog_z_dtheta(y, mean, var)
    assert grad.shape == (3, lik.n_dims)
    h = 1e-5
    for k in range(lik.n_dims):
        step = np.zeros(lik.n_dims)
        step[k] = h
        up = lik.clone_with_theta(lik.theta + step).log_z(y, mean, var).log_z
        down = lik.clone_with_theta(lik.theta - step).log_z(y, mean, var).log_z
        np.testing.assert_allclose(grad[:, k], (up - down) / (2 * h), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("power", POWERS)
def test_gaussian_equals_the_closed_forms(power):
    noise, y, mean, var = 0.3, np.array([0.5, 4.0]), np.array([0.0, -1.0]), np.array([1.0, 0.2])
    lik = Gaussian(noise)
    out = lik.log_z(y, mean, var, power)
    # N(y|f, noise)^u N(f|mean, var) integrates to (2 pi noise)^((1-u)/2) u^(-1/2) N(y | mean, var + noise/u)
    total = var + noise / power
    expected = (
        (1 - power) / 2 * np.log(2 * np.pi * noise) - 0.5 * np.log(power) + stats.norm.logpdf(y, mean, np.sqrt(total))
    )
    np.testing.assert_allclose(out.log_z, expected, rtol=1e-12)
    m, v = out.moments(mean, var)
    precision = 1 / var + power / noise
    np.testing.assert_allclose(v, 1 / precision, rtol=1e-12)
    np.testing.assert_allclose(m, (mean / var + power * y / noise) / precision, rtol=1e-12)
    k1, k2, k3, k4 = lik.tilted_cumulants(y, mean, var)
    post_var = 1 / (1 / var + 1 / noise)
    np.testing.assert_allclose(k2, post_var, rtol=1e-12)
    np.testing.assert_array_equal(k3, 0.0)
    np.testing.assert_array_equal(k4, 0.0)
    post_mean = post_var * (mean / var + y / noise)
    np.testing.assert_allclose(k1, post_mean, rtol=1e-12)
    # E[log N(y | f, noise)] under N(post_mean, post_var)
    elog = -0.5 * np.log(2 * np.pi * noise) - ((y - post_mean) ** 2 + post_var) / (2 * noise)
    np.testing.assert_allclose(lik.expected_log_lik(y, mean, var), elog, rtol=1e-12)


def test_gaussian_quadrature_default_would_agree():
    """The closed forms equal adaptive quadrature too (one case, at u = 0.5)."""
    lik = Gaussian(0.3)
    ref = regression_tilted_quad(
        lambda f: -0.5 * math.log(2 * math.pi * 0.3) - (1 - f) ** 2 / 0.6, 1.0, -0.5, 2.0, 0.5, 0.5
    )
    out = lik.log_z(1.0, -0.5, 2.0, 0.5)
    assert float(out.log_z) == pytest.approx(ref["log_z"], abs=1e-10)


RESIDUALS = [0.0, 1e-3, 1.0, 1e3, 1e6, -1e6]
CAVITY_VARIANCES = [1e-8, 1e-2, 1.0, 1e8]
EPS = np.finfo(float).eps


def _gaussian_closed_forms(noise, y, mean, var, power):
    """log Z, d log Z / d mean, d2 log Z / d mean2 at the power, and (at power 1) the tilted mean and
    variance, E[log N(y | f, noise)] and d log Z / d log noise: all Gaussian integrals (scipy's logpdf)."""
    total = var + noise / power
    log_z = (
        (1 - power) / 2 * np.log(2 * np.pi * noise) - 0.5 * np.log(power) + stats.norm.logpdf(y, mean, np.sqrt(total))
    )
    post_var = var * noise / (var + noise)
    post_mean = (mean * noise + y * var) / (var + noise)
    elog = -0.5 * np.log(2 * np.pi * noise) - ((y - post_mean) ** 2 + post_var) / (2 * noise)
    dtheta = noise * (0.5 * (y - mean) ** 2 / (var + noise) ** 2 - 0.5 / (var + noise))
    return log_z, (y - mean) / total, -1.0 / total, post_mean, post_var, elog, dtheta


def _quadrature_is_reliable(resid, var, scale):
    """The oracle evaluates the integrand at f itself: f's rounding (eps |f|, f near the residual) must be
    negligible against both widths, the cavity's sd and the likelihood's scale (1e-11 of them; 40 of the
    72 points pass).  Among the points left out, a residual of 1e6 under a cavity sd of 1e-4 moves quad's
    tilted variance by 1e-7 relative (1e-3 for the Laplace of scale 1e-6, where it can also divide by
    zero): there only finiteness is checked."""
    return EPS * abs(resid) <= 1e-11 * min(math.sqrt(var), scale)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("lik", [StudentT(4.0, 1.0), StudentT(1.0, 1.0), Laplace(1.0), Gaussian(1.0)], ids=repr)
@pytest.mark.parametrize("power", [1.0, 0.5])
def test_extreme_residuals_scales_and_variances_against_closed_forms_and_quadrature(lik, power):
    """Residuals up to 1e6, likelihood scales 1e-6..1e6, cavity variances 1e-8..1e8 (24 points per scale):
    no floating-point warnings, everything finite; the Gaussian equal to its closed forms at every point
    (rtol 1e-12), the Student-t and the Laplace equal to adaptive quadrature wherever it is reliable.

    The tilted mean and variance are ``mean + var d1`` and ``var + var^2 d2``: where the tilted variance is
    far below the cavity's (a narrow likelihood under a wide cavity, down to 1e-20 of it here) the sums
    cancel, and a few ulps of their terms are all that the (log Z, d1, d2) answer can carry; those are
    added to the quadrature tolerance (1e-8, as in the tests above).  The tilted cumulants (u = 1) carry
    the variance in full, and are held to 1e-8 with no such floor."""
    checked = 0
    for scale in [1e-6, 1.0, 1e6]:
        value = {"noise": scale**2} if isinstance(lik, Gaussian) else {"scale": scale}
        lik_s = type(lik)(**{**lik.get_params(), **value})
        resid = np.array(RESIDUALS)[:, None]
        var = np.array(CAVITY_VARIANCES)[None, :]
        y, mean = np.zeros_like(resid), resid + 0 * var
        out = lik_s.log_z(y, mean, var, power)
        for arr in (out.log_z, out.dlog_z, out.d2log_z):
            assert np.all(np.isfinite(arr))
        k = lik_s.tilted_cumulants(y, mean, var)
        assert all(np.all(np.isfinite(c)) for c in k) and np.all(k[1] > 0)
        elog = lik_s.expected_log_lik(y, mean, var)
        dtheta = lik_s.dlog_z_dtheta(y, mean, var)[..., 0]
        assert np.all(np.isfinite(elog)) and np.all(np.isfinite(dtheta))
        if isinstance(lik, Gaussian):
            noise = scale**2
            log_z, d1, d2, k1, k2, e_log, d_theta = _gaussian_closed_forms(noise, y, mean, var, power)
            np.testing.assert_allclose(out.log_z, log_z, rtol=1e-12)
            np.testing.assert_allclose(out.dlog_z, d1, rtol=1e-12)
            np.testing.assert_allclose(out.d2log_z, np.broadcast_to(d2, out.d2log_z.shape), rtol=1e-12)
            # the tilted mean is the cavity's moved by var d1: to within the rounding of the cavity mean
            assert np.all(np.abs(k[0] - k1) <= 1e-12 * np.abs(k1) + 4 * EPS * np.abs(mean))
            np.testing.assert_allclose(k[1], np.broadcast_to(k2, k[1].shape), rtol=1e-12)
            np.testing.assert_array_equal(k[2], 0.0)
            np.testing.assert_array_equal(k[3], 0.0)
            np.testing.assert_allclose(elog, e_log, rtol=1e-12)
            # d log Z / d log noise is a difference of two terms of size noise / (var + noise) (1/2 each here)
            terms = noise * (0.5 * (y - mean) ** 2 / (var + noise) ** 2 + 0.5 / (var + noise))
            assert np.all(np.abs(dtheta - d_theta) <= 1e-12 * np.abs(d_theta) + 8 * EPS * terms)
            continue
        log_p, width, dlog_p = _oracle_args(lik_s, 0.0)
        t_mean, t_var = out.moments(mean, var)
        for i, j in np.ndindex(out.log_z.shape):
            r, v = float(mean[i, j]), float(var[0, j])
            if not _quadrature_is_reliable(r, v, scale):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", IntegrationWarning)  # its roundoff notices at epsrel 1e-12
                ref = regression_tilted_quad(
                    log_p, 0.0, r, v, power, width, extras=(log_p, dlog_p) if power == 1 else ()
                )
            d1, d2 = abs(float(out.dlog_z[i, j])), abs(float(out.d2log_z[i, j]))
            assert float(out.log_z[i, j]) == pytest.approx(ref["log_z"], rel=1e-8, abs=1e-8)
            floor_mean, floor_var = 4 * EPS * (abs(r) + v * d1), 8 * EPS * (v + v * v * d2)
            assert abs(t_mean[i, j] - ref["mean"]) <= 1e-8 * math.sqrt(ref["var"]) + floor_mean
            assert abs(t_var[i, j] - ref["var"]) <= 1e-8 * ref["var"] + floor_var
            if power == 1.0:  # the cumulants, E[log p] and the gradient are at u = 1
                # the cumulants are summed over the tilted distribution's own nodes: no cancellation floor
                assert abs(k[0][i, j] - ref["mean"]) <= 1e-8 * math.sqrt(ref["var"]) + 4 * EPS * abs(r)
                assert k[1][i, j] == pytest.approx(ref["var"], rel=1e-8)
                assert float(elog[i, j]) == pytest.approx(ref["extras"][0], rel=1e-8, abs=1e-8)
                assert float(dtheta[i, j]) == pytest.approx(ref["extras"][1], rel=1e-8, abs=1e-8)
            checked += 1
    assert checked == (0 if isinstance(lik, Gaussian) else 40)  # 8, 15 and 17 of the 24 points per scale


def _laplace_cdf(x, b):
    return 0.5 * math.exp(x / b) if x < 0 else 1.0 - 0.5 * math.exp(-x / b)


@pytest.mark.parametrize(
    "lik, noise, cdf",
    [
        (StudentT(4.0, 0.5), stats.t(4.0, scale=0.5), lambda x: stdtr(4.0, x / 0.5)),
        (StudentT(1.0, 0.2), stats.t(1.0, scale=0.2), lambda x: 0.5 + math.atan(x / 0.2) / math.pi),
        (Laplace(0.3), stats.laplace(scale=0.3), lambda x: _laplace_cdf(x, 0.3)),
        (Gaussian(0.2), stats.norm(scale=math.sqrt(0.2)), lambda x: 0.5 * math.erfc(-x / math.sqrt(0.4))),
    ],
    ids=["t4", "cauchy", "laplace", "gaussian"],
)
def test_predict_interval_against_quadrature_and_monte_carlo(lik, noise, cdf):
    mean, var, level = np.array([1.0, -3.0]), np.array([0.3, 4.0]), 0.9
    low, high = lik.predict_interval(mean, var, level)
    np.testing.assert_allclose(high - mean, mean - low, rtol=1e-12)
    for m, v, q in zip(mean, var, low, strict=True):
        # P(y* <= low) = int F(low - f) N(f | m, v) df = (1 - level) / 2, by adaptive quadrature
        sd = math.sqrt(v)
        prob = integrate.quad(
            lambda f, m=m, sd=sd, q=q: (
                cdf(q - f) * math.exp(-0.5 * ((f - m) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
            ),
            m - 40 * sd,
            m + 40 * sd,
            points=[q, m],
            epsabs=1e-13,
            limit=500,
        )[0]
        assert prob == pytest.approx(0.5 * (1 - level), abs=1e-9)
    rng = np.random.default_rng(0)
    draws = 100_000
    f = mean[:, None] + np.sqrt(var)[:, None] * rng.standard_normal((2, draws))
    y = f + noise.rvs(size=(2, draws), random_state=rng)
    below, above = np.mean(y < low[:, None], axis=1), np.mean(y > high[:, None], axis=1)
    tol = 5 * math.sqrt(0.05 * 0.95 / draws)
    np.testing.assert_allclose(below, 0.05, atol=tol)
    np.testing.assert_allclose(above, 0.05, atol=tol)


def test_gaussian_interval_is_the_closed_form():
    mean, var = np.array([0.0, 2.0, -1.0]), np.array([1.0, 0.1, 1e-6])
    half = stats.norm.ppf(0.975) * np.sqrt(var + 0.5)
    low, high = Gaussian(0.5).predict_interval(mean, var, 0.95)
    np.testing.assert_allclose(low, mean - half, rtol=1e-12)
    np.testing.assert_allclose(high, mean + half, rtol=1e-12)
    # the generic root-finder on the predictive CDF (what StudentT and Laplace use) finds the same ends
    low, high = Likelihood.predict_interval(Gaussian(0.5), mean, var, 0.95)
    np.testing.assert_allclose(low, mean - half, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(high, mean + half, rtol=1e-10, atol=1e-10)


def test_predict_y_adds_the_noise_variance():
    mean, var = np.array([0.5, -1.0]), np.array([0.2, 3.0])
    for lik, noise_var in [(Gaussian(0.3), 0.3), (StudentT(5.0, 0.4), 0.16 * 5 / 3), (Laplace(0.5), 0.5)]:
        m, v = lik.predict_y(mean, var)
        np.testing.assert_array_equal(m, mean)
        np.testing.assert_allclose(v, var + noise_var, rtol=1e-12)
    assert np.all(np.isinf(StudentT(2.0, 1.0).predict_y(mean, var)[1]))


@pytest.mark.parametrize(
    "make, name, error",
    [
        (lambda: Gaussian(0.0), "noise", ValueError),
        (lambda: Gaussian(-1.0), "noise", ValueError),
        (lambda: Gaussian("1"), "noise", TypeError),
        (lambda: Gaussian(1.0, noise_bounds="free"), "noise_bounds", ValueError),
        (lambda: StudentT(df=0.0), "df", ValueError),
        (lambda: StudentT(df=np.inf), "df", ValueError),
        (lambda: StudentT(scale=np.nan), "scale", ValueError),
        (lambda: StudentT(scale=None), "scale", TypeError),
        (lambda: StudentT(df_bounds=(0.0, 1.0)), "df_bounds", ValueError),
        (lambda: StudentT(scale_bounds=(2.0, 1.0)), "scale_bounds", ValueError),
        (lambda: Laplace(-0.5), "scale", ValueError),
        (lambda: Laplace(True), "scale", TypeError),
        (lambda: Laplace(scale_bounds=(1.0,)), "scale_bounds", ValueError),
        (lambda: StudentT().predict_interval(0.0, 1.0, level=1.0), "level", ValueError),
        (lambda: Gaussian().predict_interval(0.0, 1.0, level=0.0), "level", ValueError),
    ],
)
def test_bad_parameters_are_rejected_by_name(make, name, error):
    with pytest.raises(error, match=name):
        make()


def test_hyperparameters_theta_and_clone():
    lik = StudentT(4.0, 0.3, df_bounds=(1.0, 100.0))
    assert [h.name for h in lik.hyperparameters] == ["df", "scale"]
    np.testing.assert_allclose(lik.theta, np.log([4.0, 0.3]))
    np.testing.assert_allclose(lik.bounds, np.log([[1.0, 100.0], [1e-5, 1e5]]))
    clone = lik.clone_with_theta(np.log([8.0, 0.5]))
    assert (clone.df, clone.scale) == pytest.approx((8.0, 0.5))
    assert clone.df_bounds == (1.0, 100.0)
    assert StudentT().n_dims == 1 and Gaussian(noise_bounds="fixed").n_dims == 0 and Laplace().n_dims == 1
