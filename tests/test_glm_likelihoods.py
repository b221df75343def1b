"""The GLM likelihoods (binomial, beta, gamma, zero-inflated and hurdle counts, asymmetric Laplace) against ground
truth: adaptive quadrature of the tilted written from scipy's densities (``glm_reference``), finite differences of
log Z, the closed-form limits (one trial is the Bernoulli, no inflation is the plain count, tau = 1/2 is the
Laplace), elliptical slice sampling of the exact posterior, and the refusal of bad targets."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

import glm_reference as ref
from relaxep import (
    EP,
    AsymmetricLaplace,
    Beta,
    Binomial,
    Gamma,
    HurdleNegativeBinomial,
    HurdlePoisson,
    Laplace,
    Logistic,
    NegativeBinomial,
    Poisson,
    Probit,
    ZeroInflatedNegativeBinomial,
    ZeroInflatedPoisson,
    infer,
)
from relaxep.mcmc import elliptical_slice


def _parts(lz):
    return lz.log_z, lz.dlog_z, lz.d2log_z


MEANS = [-20.0, -3.0, 0.0, 2.0, 15.0]
VARIANCES = [1e-4, 1e-1, 1.0, 10.0, 1e4]


def _cases():
    """(id, likelihood, target, reference log-likelihood of f)."""
    out = []
    for k, n in [(0, 10), (3, 10), (10, 10), (37, 100)]:
        for link in ("logit", "probit"):
            out.append(
                (f"binomial-{link}-{k}of{n}", Binomial(link), np.array([k, np.log(n)]), ref.binomial(k, n, link))
            )
    for y, phi in [(0.01, 5.0), (0.3, 5.0), (0.97, 5.0), (0.5, 300.0), (0.999, 300.0), (0.2, 0.5)]:
        out.append((f"beta-{y}-{phi}", Beta(phi), y, ref.beta(y, phi)))
    for y, a in [(0.01, 2.0), (1.0, 2.0), (50.0, 2.0), (0.5, 0.3), (3.0, 100.0)]:
        out.append((f"gamma-{y}-{a}", Gamma(a), y, ref.gamma(y, a)))
    for cls, kw in [(ZeroInflatedPoisson, {}), (ZeroInflatedNegativeBinomial, {"dispersion": 2.0}),
                    (HurdlePoisson, {}), (HurdleNegativeBinomial, {"dispersion": 0.5})]:  # fmt: skip
        hurdle = cls.hurdle
        pi = 0.3
        lik = cls(pi, **kw)
        for y, o in [(0, 0.0), (1, 0.0), (5, 1.0), (60, 0.0)]:
            log_lik = ref.zero_modified(y, o, pi, kw.get("dispersion"), hurdle)
            out.append((f"{cls.__name__}-{y}", lik, np.array([y, o]), log_lik))
    for tau in (0.05, 0.5, 0.9):
        out.append(
            (f"asymmetric-laplace-{tau}", AsymmetricLaplace(tau, 0.7), 1.3, ref.asymmetric_laplace(1.3, tau, 0.7))
        )
    return out


CASES = _cases()


QUICK = {"binomial-logit-3of10", "binomial-probit-0of10", "beta-0.3-5.0", "beta-0.5-300.0", "gamma-1.0-2.0",
         "ZeroInflatedPoisson-0", "ZeroInflatedNegativeBinomial-5", "HurdlePoisson-1", "HurdleNegativeBinomial-60",
         "asymmetric-laplace-0.9"}  # fmt: skip


def test_the_references_densities_are_scipy_stats():
    """glm_reference's beta, gamma and Poisson log densities (scipy.stats' own formulas) against scipy.stats, and its
    binomial log pmf against mpmath's."""
    ref.check_scipy_densities()
    ref.check_binomial_formula()


@pytest.mark.parametrize("power", [1.0, 0.5])
@pytest.mark.parametrize(
    "case", [c if c[0] in QUICK else pytest.param(c, marks=pytest.mark.slow) for c in CASES], ids=[c[0] for c in CASES]
)
def test_tilted_log_z_mean_and_variance_match_adaptive_quadrature(case, power, request):
    """log Z to 1e-10 (absolutely), the tilted mean to 1e-10 tilted sd, the variance to 1e-10 relatively, over cavity
    means -20 to 15 and variances 1e-4 to 1e4 (1e-6 in the corner where a narrow cavity sits hundreds of its sd
    from the likelihood: log Z below -1e4, or variance 1e-4 at mean -20 or 15).  The default suite takes one
    or two targets a family and a third of the cavities; ``-m slow`` every target and cavity."""
    name, lik, y, log_lik = case
    full = request.config.getoption("-m") == "slow"
    for mean, var in itertools.product(MEANS, VARIANCES) if full else zip(MEANS[::2], VARIANCES[::-2], strict=True):
        lz = lik.log_z(y, mean, var, power)
        m, v = lz.moments(mean, var)
        kinks = (float(y),) if isinstance(lik, AsymmetricLaplace) else ()
        r_lz, r_mean, r_var = ref.tilted(log_lik, mean, var, power, kinks=kinks)
        # (the corner of a narrow cavity far out, hundreds to thousands of its sd from the likelihood: there the log
        # tilted is a difference of numbers up to 1e6 and both rules lose digits; measured up to 4e-10 absolute in
        # the mean, 1.4e-7 tilted sd, for the gamma)
        corner = r_lz < -1e4 or (var <= 1e-4 and abs(mean) >= 20.0)
        tol = 1e-6 if corner else 1e-10
        where = f"{name}: mean={mean}, var={var}, u={power}"
        assert abs(float(lz.log_z) - r_lz) <= tol * max(1.0, abs(r_lz) * 1e-3), where
        assert abs(float(m) - r_mean) <= tol * np.sqrt(r_var), where
        assert abs(float(v) - r_var) <= tol * r_var, where


LEARNED = [
    ("beta", Beta(4.0), np.array([0.2, 0.5, 0.93])),
    ("gamma", Gamma(1.7), np.array([0.3, 1.0, 12.0])),
    ("zip", ZeroInflatedPoisson(0.25), np.array([[0, 0.0], [2, 0.5], [7, 0.0]])),
    ("zinb", ZeroInflatedNegativeBinomial(0.25, 1.5), np.array([[0, 0.0], [2, 0.5], [7, 0.0]])),
    ("hurdle-poisson", HurdlePoisson(0.4), np.array([[0, 0.0], [1, 0.5], [7, 0.0]])),
    ("hurdle-nb", HurdleNegativeBinomial(0.4, 0.8), np.array([[0, 0.0], [1, 0.5], [7, 0.0]])),
    ("asymmetric-laplace", AsymmetricLaplace(0.8, 0.6), np.array([-1.0, 0.3, 2.0])),
]


@pytest.mark.parametrize("case", LEARNED, ids=[c[0] for c in LEARNED])
def test_evidence_gradients_match_finite_differences_of_log_z(case):
    """dlog_z_dtheta (the tilted expectation of d log p / d theta) against central differences of log Z in theta,
    and d log Z / d mu, d2 log Z / d mu2 against differences in the cavity mean."""
    _, lik, y = case
    mean, var = np.array([-0.4, 0.3, 1.1]), np.array([0.5, 2.0, 0.2])
    grad = lik.dlog_z_dtheta(y, mean, var)
    theta = lik.theta
    h = 1e-5
    for j in range(theta.size):
        step = np.zeros_like(theta)
        step[j] = h
        up = lik.clone_with_theta(theta + step).log_z(y, mean, var).log_z
        down = lik.clone_with_theta(theta - step).log_z(y, mean, var).log_z
        np.testing.assert_allclose(grad[:, j], (up - down) / (2 * h), rtol=1e-6, atol=1e-8)
    lz = lik.log_z(y, mean, var)
    up, down = lik.log_z(y, mean + 1e-4, var).log_z, lik.log_z(y, mean - 1e-4, var).log_z
    np.testing.assert_allclose(lz.dlog_z, (up - down) / 2e-4, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(lz.d2log_z, (up - 2 * lz.log_z + down) / 1e-8, rtol=1e-4, atol=1e-6)


def test_one_trial_is_the_bernoulli():
    """Binomial with one trial: log Z and its derivatives are Logistic's and Probit's at labels 2k - 1."""
    mean, var = np.linspace(-6, 6, 13), np.geomspace(1e-3, 1e3, 13)
    for link, binary in (("logit", Logistic()), ("probit", Probit())):
        for k in (0.0, 1.0):
            a = Binomial(link).log_z(np.column_stack([np.full(13, k), np.zeros(13)]), mean, var)
            b = binary.log_z(np.full(13, 2 * k - 1), mean, var)
            for x, z in zip(_parts(a), _parts(b), strict=True):
                np.testing.assert_allclose(x, z, rtol=1e-9, atol=1e-11)


def test_no_inflation_is_the_plain_count_model():
    """A zero-inflated model whose zero probability tends to 0 is the Poisson (the NB), to that probability."""
    y = np.array([[0, 0.0], [3, 0.4], [11, -0.5]])
    mean, var = np.array([0.2, 1.0, 2.0]), np.array([0.3, 3.0, 30.0])
    for zi, plain in (
        (ZeroInflatedPoisson(1e-9), Poisson()),
        (ZeroInflatedNegativeBinomial(1e-9, 2.5), NegativeBinomial(2.5)),
    ):
        a, b = zi.log_z(y, mean, var), plain.log_z(y, mean, var)
        for x, z in zip(_parts(a), _parts(b), strict=True):
            np.testing.assert_allclose(x, z, rtol=1e-7, atol=1e-8)


def test_the_median_asymmetric_laplace_is_the_laplace():
    """tau = 1/2 with scale s is the Laplace with scale 2s: log Z, its derivatives and E[log p], at powers 1 and 0.4."""
    y, mean, var = np.array([0.0, 1.0, -2.0]), np.array([0.3, 5.0, -2.1]), np.array([0.01, 4.0, 100.0])
    for power in (1.0, 0.4):
        a, b = AsymmetricLaplace(0.5, 0.8).log_z(y, mean, var, power), Laplace(1.6).log_z(y, mean, var, power)
        for x, z in zip(_parts(a), _parts(b), strict=True):
            np.testing.assert_allclose(x, z, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(
        AsymmetricLaplace(0.5, 0.8).expected_log_lik(y, mean, var),
        Laplace(1.6).expected_log_lik(y, mean, var),
        rtol=1e-12,
    )


def test_five_thousand_trials_and_all_or_no_successes_stay_finite():
    """Binomial EP at 5 000 trials a row, with 0, some and all successes: a converged fit, no NaN; log Z there
    against quadrature to 1e-8."""
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(0, 5, 40))[:, None]
    n = np.full(40, 5000.0)
    p = 1 / (1 + np.exp(-(np.sin(2 * X[:, 0]) * 6)))
    k = rng.binomial(5000, p).astype(float)
    k[:3], k[-3:] = 0.0, 5000.0
    K = (C(4.0) * RBF(1.0))(X) + 1e-8 * np.eye(40)
    for link in ("logit", "probit"):
        res = infer(K, np.column_stack([k, np.log(n)]), Binomial(link), EP(), tol=1e-8, max_sweeps=500)
        assert res.converged and np.all(np.isfinite(res.mean)) and np.isfinite(res.log_evidence)
    for kk, link in ((0, "logit"), (2500, "logit"), (5000, "probit")):
        lz = Binomial(link).log_z(np.array([kk, np.log(5000.0)]), 0.5, 3.0).log_z
        assert abs(lz - ref.tilted(ref.binomial(kk, 5000, link), 0.5, 3.0, 1.0)[0]) <= 1e-8


def _posterior_problem(name, n, seed=0):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0, 6, n))[:, None]
    f = np.sin(1.3 * X[:, 0])
    if name == "binomial":
        trials = rng.integers(1, 12, n).astype(float)
        return X, np.column_stack([rng.binomial(trials.astype(int), 1 / (1 + np.exp(-f))), np.log(trials)]), Binomial()
    if name == "beta":
        mu = 1 / (1 + np.exp(-f))
        return X, rng.beta(mu * 8, (1 - mu) * 8), Beta(8.0)
    if name == "gamma":
        return X, rng.gamma(2.0, np.exp(f) / 2.0), Gamma(2.0)
    if name in ("zip", "hurdle"):
        counts = rng.poisson(np.exp(f + 0.5)) * (rng.uniform(size=n) > 0.3)
        lik = ZeroInflatedPoisson(0.3) if name == "zip" else HurdlePoisson(float(np.mean(counts == 0)))
        return X, np.column_stack([counts, np.zeros(n)]).astype(float), lik
    return X, f + rng.laplace(0, 0.3, n), AsymmetricLaplace(0.7, 0.3)


@pytest.mark.parametrize(
    "n, tol", [(50, 0.1), pytest.param(200, 0.05, marks=pytest.mark.slow)], ids=["50-rows", "200-rows"]
)
@pytest.mark.parametrize(
    "name",
    [
        "binomial",
        "beta",
        *(pytest.param(n, marks=pytest.mark.slow) for n in ("gamma", "zip", "hurdle", "asymmetric-laplace")),
    ],
)
def test_ep_marginals_match_elliptical_slice_sampling(name, n, tol):
    """EP's posterior means within ``tol`` posterior sd of a long elliptical-slice run of the exact posterior, and
    its variances within 25%."""
    X, y, lik = _posterior_problem(name, n)
    K = (C(1.0) * RBF(1.0))(X) + 1e-8 * np.eye(n)
    res = infer(K, y, lik, EP(), tol=1e-8, max_sweeps=500)
    mc = elliptical_slice(K, y, lik, n_samples=4000 if n <= 50 else 8000, n_burn=500, n_chains=4, random_state=0,
                          approx=(res.mean, res.cov))  # fmt: skip
    assert res.converged and mc.converged
    sd = np.sqrt(mc.var)
    assert np.max(np.abs(res.mean - mc.mean) / sd) <= tol
    ratio = res.marginal_var / mc.var
    assert np.all((ratio >= 0.75) & (ratio <= 1.25))


@pytest.mark.parametrize(
    "lik, bad, what",
    [
        (Binomial(), np.array([[3.0, np.log(2.0)]]), "successes above trials"),
        (Binomial(), np.array([[-1.0, 0.0]]), "non-negative"),
        (Binomial(), np.array([[1.0, np.log(2.5)]]), "whole numbers"),
        (Beta(), np.array([0.2, 1.0]), "strictly inside"),
        (Beta(), np.array([0.0, 0.5]), "strictly inside"),
        (Gamma(), np.array([1.0, 0.0]), "positive"),
        (ZeroInflatedPoisson(), np.array([1.0, -2.0]), "non-negative"),
        (HurdleNegativeBinomial(), np.array([1.5]), "non-negative integer"),
    ],
)
def test_bad_targets_are_refused_naming_y(lik, bad, what):
    with pytest.raises(ValueError, match=what):
        lik.check_targets(bad)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: ZeroInflatedPoisson(1.2), "zero_inflation"),
        (lambda: HurdlePoisson(0.0), "zero_probability"),
        (lambda: Beta(precision=-1.0), "precision"),
        (lambda: Gamma(shape=0.0), "shape"),
        (lambda: AsymmetricLaplace(quantile=1.0).check_targets([1.0]), "quantile"),
        (lambda: Binomial("cloglog").check_targets([1.0]), "link"),
    ],
)
def test_bad_parameters_are_refused_by_name(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_the_asymmetric_laplace_on_another_array_library_is_numpys():
    """Its closed form is written once in the array namespace: on array_api_strict arrays log Z, its derivatives
    and E[log p] are numpy's (every power), and the numpy-only likelihoods answer there from the host."""
    xs = pytest.importorskip("array_api_strict")
    y, mean, var = np.array([0.0, 1.0, -2.0]), np.array([0.3, 5.0, -2.1]), np.array([0.01, 4.0, 100.0])
    lik = AsymmetricLaplace(0.2, 0.6)
    assert lik.on_device(0.5)
    for power in (1.0, 0.5):
        got = lik.log_z_on(xs, *(xs.asarray(a) for a in (y, mean, var)), power)
        for a, b in zip(_parts(got), _parts(lik.log_z(y, mean, var, power)), strict=True):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12, atol=1e-14)
    e = lik.expected_log_lik_on(xs, *(xs.asarray(a) for a in (y, mean, var)))
    np.testing.assert_allclose(np.asarray(e), lik.expected_log_lik(y, mean, var), rtol=1e-12)
    assert not Beta().on_device(1.0)  # (a device fit computes its sites on the host)


def test_the_asymmetric_laplace_cumulants_match_quadrature():
    """The tilted's third and fourth cumulants (convergent EP's Newton steps need them) by the two-centre rule at the
    kink, against adaptive quadrature split there."""
    for tau, mean, var in ((0.1, 0.0, 1.0), (0.9, 3.0, 0.2), (0.3, -2.0, 10.0)):
        lik = AsymmetricLaplace(tau, 0.5)
        k1, k2, k3, k4 = (float(v) for v in lik.tilted_cumulants(1.0, mean, var))
        log_lik = ref.asymmetric_laplace(1.0, tau, 0.5)
        _, m, v = ref.tilted(log_lik, mean, var, 1.0, kinks=(1.0,))
        _, _, _, c3, c4 = ref.tilted(log_lik, mean, var, 1.0, kinks=(1.0,),
                                     extras=(lambda f, m=m: (f - m) ** 3, lambda f, m=m: (f - m) ** 4))  # fmt: skip
        np.testing.assert_allclose([k1, k2, k3, k4], [m, v, c3, c4 - 3 * v**2], rtol=1e-7, atol=1e-9 * v**2)
