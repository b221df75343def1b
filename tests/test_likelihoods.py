"""Closed-form and quadrature likelihood answers against adaptive 1-D quadrature."""

import inspect

import numpy as np
import pytest
from scipy import stats
from scipy.special import log_ndtr, ndtr

import relaxep.likelihoods as likmod
from oracles import RTOL, lik_fn, positive_truncated_normal, tilted_quad
from relaxep import (
    AsymmetricLaplace,
    Binomial,
    Gamma,
    Gaussian,
    HurdleNegativeBinomial,
    HurdlePoisson,
    Laplace,
    Logistic,
    NegativeBinomial,
    NoisyStep,
    OrdinalProbit,
    Poisson,
    Probit,
    StudentT,
    Tobit,
    ZeroInflatedNegativeBinomial,
    ZeroInflatedPoisson,
)
from relaxep.likelihoods import BinaryLikelihood, NoisyProbit


def _hurdle_nb_at_1(mu, r=2.0, pi=0.3):
    """(1 - pi) NB(1 | r, mu) / (1 - NB(0 | r, mu)), NB2 written out: r mu/(r + mu) (r/(r + mu))^r over
    1 - (r/(r + mu))^r, the latter by expm1 (both ~ mu as mu -> 0)."""
    return (1 - pi) * r * mu / (r + mu) * (r / (r + mu)) ** r / -np.expm1(-r * np.log1p(mu / r))


#: every likelihood with its t(g) written independently (oracles.lik_fn)
LIKELIHOODS = {
    "step eps=0.2": (NoisyStep(0.2), lik_fn("step", 0.2)),
    "step eps=0": (NoisyStep(0.0), lik_fn("step", 0.0)),
    "step eps=0.01": (NoisyStep(0.01), lik_fn("step", 0.01)),
    "probit": (Probit(), lik_fn("probit")),
    "logistic": (Logistic(), lik_fn("logistic")),
    "noisy probit eps=0.05": (NoisyProbit(0.05, 1.0), lik_fn("noisy-probit", 0.05, 1.0)),
    "noisy probit eps=0.2 scale=0.3": (NoisyProbit(0.2, 0.3), lik_fn("noisy-probit", 0.2, 0.3)),
    "noisy probit eps=0.1 scale=0.05": (NoisyProbit(0.1, 0.05), lik_fn("noisy-probit", 0.1, 0.05)),
    # regression likelihoods at the target y = 1 (more in tests/test_regression_likelihoods.py)
    "gaussian noise=0.5": (Gaussian(0.5), lik_fn("gaussian", 0.5)),
    "student-t df=4 scale=0.3": (StudentT(4.0, 0.3), lik_fn("student-t", 4.0, 0.3)),
    "laplace scale=0.7": (Laplace(0.7), lik_fn("laplace", scale=0.7)),
    # ordinal and counts at the target y = 1 (the middle of three classes; one event)
    "ordinal probit K=3": (
        OrdinalProbit([-1.0, 1.0], 1.0),
        lambda g: ndtr(1.0 - np.asarray(g)) - ndtr(-1.0 - np.asarray(g)),
    ),
    "poisson": (Poisson(), lambda g: np.exp(np.asarray(g) - np.exp(np.asarray(g)))),  # lambda e^-lambda
    # the target 1.0 is at the limit (censored) or inside (observed)
    "tobit left-censored at 1": (
        Tobit(lower=1.0, noise=0.5),
        lambda g: ndtr((1.0 - np.asarray(g)) / 0.5**0.5),
    ),
    "tobit observed": (Tobit(lower=-5.0, noise=0.5), lik_fn("gaussian", 0.5)),
    "negative binomial r=2": (
        NegativeBinomial(2.0),
        lambda g: 8.0 * np.exp(np.asarray(g)) / (2.0 + np.exp(np.asarray(g))) ** 3,  # r p^r (1 - p), p = r / (r + mu)
    ),
    # the GLM likelihoods at y = 1 (one success in one trial; one event; more in tests/test_glm_likelihoods.py)
    "binomial 1 of 1": (Binomial(), lambda g: 1.0 / (1.0 + np.exp(-np.asarray(g)))),
    # (the densities written out, checked against scipy.stats on a grid of latents: quad calls them point by point,
    # and scipy.stats' per-call overhead was ~3/4 of this file's time)
    "gamma shape=2 at 1": (  # y^(a-1) e^(-y/theta) / (Gamma(a) theta^a), a = 2, theta = mu / 2
        Gamma(2.0),
        lambda g: 4.0 * np.exp(-2.0 * np.asarray(g) - 2.0 * np.exp(-np.asarray(g))),
    ),
    "zip pi=0.3 at 1": (ZeroInflatedPoisson(0.3), lambda g: 0.7 * np.exp(np.asarray(g) - np.exp(np.asarray(g)))),
    "zinb pi=0.3 r=2 at 1": (  # 0.7 r p^r (1 - p), p = r / (r + mu)
        ZeroInflatedNegativeBinomial(0.3, 2.0),
        lambda g: 0.7 * 8.0 * np.exp(np.asarray(g)) / (2.0 + np.exp(np.asarray(g))) ** 3,
    ),
    "hurdle poisson pi=0.3 at 1": (  # 0.7 mu e^-mu / (1 - e^-mu)
        HurdlePoisson(0.3),
        lambda g: 0.7 * np.exp(np.asarray(g) - np.exp(np.asarray(g))) / -np.expm1(-np.exp(np.asarray(g))),
    ),
    "hurdle nb pi=0.3 r=2 at 1": (
        HurdleNegativeBinomial(0.3, 2.0),
        lambda g: _hurdle_nb_at_1(np.exp(np.asarray(g))),
    ),
    "asymmetric laplace tau=0.8 at 1": (
        AsymmetricLaplace(0.8, 0.5),
        lambda g: 0.32 * np.exp(-((1.0 - np.asarray(g)) / 0.5) * (0.8 - ((1.0 - np.asarray(g)) < 0))),
    ),
}
BINARY = [key for key, (lik, _) in LIKELIHOODS.items() if isinstance(lik, BinaryLikelihood)]
CAVITIES = [(0.3, 1.0), (-2.0, 0.5), (4.0, 9.0), (-0.7, 25.0), (1.5, 0.01)]
POWERS = [1.0, 0.8, 0.5]


def test_every_likelihood_is_tested():
    """Every concrete scalar likelihood the package exports has a row in LIKELIHOODS (GPflow's meta-test);
    the multi-class ones (one latent per class) are checked in tests/test_multiclass.py, the two-latent ones
    in tests/test_heteroscedastic.py and tests/test_two_latent_model.py, the survival ones (targets are rows of
    log-times) in tests/test_survival_likelihoods.py and tests/test_coxph.py."""
    classes = {
        obj
        for obj in vars(likmod).values()
        if isinstance(obj, type)
        and issubclass(obj, likmod.Likelihood)
        and not issubclass(obj, likmod.MulticlassLikelihood)
        and not issubclass(obj, likmod.TwoLatentLikelihood)
        and not issubclass(obj, likmod.SurvivalLikelihood)
        and obj is not likmod.Beta  # (proportions in (0, 1): y = 1 has no density; tests/test_glm_likelihoods.py)
        and not inspect.isabstract(obj)
    }
    tested = {type(lik) for lik, _ in LIKELIHOODS.values()}
    assert classes == tested


@pytest.mark.parametrize("key", LIKELIHOODS)
@pytest.mark.parametrize("power", POWERS)
@pytest.mark.parametrize("cavity", CAVITIES)
def test_log_z_and_tilted_moments_equal_quadrature(key, power, cavity):
    lik, t = LIKELIHOODS[key]
    mean, var = cavity
    log_z, t_mean, t_var = tilted_quad(t, mean, var, power)
    out = lik.log_z(1.0, mean, var, power)
    m, v = out.moments(mean, var)
    assert out.log_z == pytest.approx(log_z, rel=RTOL, abs=RTOL)
    assert m == pytest.approx(t_mean, rel=RTOL, abs=RTOL * np.sqrt(var))
    assert v == pytest.approx(t_var, rel=RTOL * 10, abs=RTOL * var)


@pytest.mark.parametrize("key", LIKELIHOODS)
@pytest.mark.parametrize("cavity", CAVITIES)
def test_expected_log_likelihood_equals_quadrature(key, cavity):
    lik, t = LIKELIHOODS[key]
    if isinstance(lik, NoisyStep) and lik.eps == 0.0:
        pytest.skip("log t = -inf on g < 0 but that region has zero tilted mass; covered below")
    *_, expected = tilted_quad(t, *cavity, extra=lambda g: np.log(float(t(g))))
    assert float(lik.expected_log_lik(1.0, *cavity)) == pytest.approx(expected, rel=RTOL, abs=RTOL)


def test_noise_free_step_expected_log_likelihood_is_zero():
    assert NoisyStep(0.0).expected_log_lik(1.0, np.array([-3.0, 0.0, 2.0]), np.ones(3)) == pytest.approx(0.0)


TAILS = {
    "step eps=0.2": (NoisyStep(0.2), lik_fn("step", 0.2)),
    "step eps=0": (NoisyStep(0.0), lik_fn("step", 0.0)),
    "probit": (Probit(), lik_fn("probit")),
    "logistic": (Logistic(), lik_fn("logistic")),
    "noisy probit eps=0.05": (NoisyProbit(0.05), lik_fn("noisy-probit", 0.05, 1.0)),
}


@pytest.mark.parametrize("key", TAILS)
@pytest.mark.parametrize("z", [-40.0, -38.0, 40.0])
def test_far_in_the_tails_equals_quadrature(key, z):
    """|z| = 38-40 cavity sds from the transition, where the normal-cdf ratios change regime: log Z and
    the tilted mean and variance against adaptive quadrature, at the tolerances of the main test above.

    The tilted moments pass through the derivatives (``mean + var d1``, ``var + var^2 d2``), so a
    wrong tail ratio shows there: at z = -40 the probit's tilted mean is 64 away from the cavity's
    and its variance a fifth of it.  Where quadrature over the cavity's range cannot see the mass (the
    noise-free step below its jump: all of it within 0.05 of 0), the reference is the truncated normal
    integrated on its own scale (``oracles.positive_truncated_normal``).  Probit also against its
    closed form with scipy's ``log_ndtr`` and Mills ratio, derivatives included."""
    lik, t = TAILS[key]
    var = 4.0
    mean = z * np.sqrt(var)
    out = lik.log_z(1.0, mean, var)
    m, v = out.moments(mean, var)
    if isinstance(lik, NoisyStep) and lik.eps == 0.0 and z < 0:
        log_z, t_mean, t_var = positive_truncated_normal(mean, var)
    else:
        log_z, t_mean, t_var = tilted_quad(t, mean, var)
    assert out.log_z == pytest.approx(log_z, rel=RTOL, abs=RTOL)
    assert m == pytest.approx(t_mean, rel=RTOL, abs=RTOL * np.sqrt(var))
    assert v == pytest.approx(t_var, rel=RTOL * 10, abs=RTOL * var)
    if isinstance(lik, Probit):
        # log Z = log Phi(k), k = mean / sqrt(1 + var); d1 = r / s, d2 = -r (k + r) / s^2, r = N(k) / Phi(k)
        s = np.sqrt(1.0 + var)
        k = mean / s
        r = np.exp(stats.norm.logpdf(k) - log_ndtr(k))
        assert out.log_z == pytest.approx(log_ndtr(k), rel=1e-14)
        assert out.dlog_z == pytest.approx(r / s, rel=1e-11)
        assert out.d2log_z == pytest.approx(-r * (k + r) / s**2, rel=1e-8)  # k + r cancels: 1e-10 in the reference


def test_noisy_step_tail_derivatives_against_quadrature():
    """At z = -8 the naive N(z)/Phi(z) is fine, but the tilted correction is tiny: check it."""
    lik = NoisyStep(0.05)
    log_z, m, _ = tilted_quad(lik_fn("step", 0.05), -8.0, 1.0)
    out = lik.log_z(1.0, -8.0, 1.0)
    assert out.log_z == pytest.approx(log_z, rel=1e-10)
    assert out.moments(-8.0, 1.0)[0] == pytest.approx(m, rel=1e-8)


@pytest.mark.parametrize(
    "lik, closed",
    [
        (NoisyStep(0.1), lambda m, v: 0.1 + 0.8 * __import__("scipy.stats").stats.norm.cdf(m / np.sqrt(v))),
        (Probit(), lambda m, v: __import__("scipy.stats").stats.norm.cdf(m / np.sqrt(1 + v))),
        (
            NoisyProbit(0.1, 0.5),
            lambda m, v: 0.1 + 0.8 * __import__("scipy.stats").stats.norm.cdf(m / np.sqrt(0.25 + v)),
        ),
    ],
    ids=["step", "probit", "noisy-probit"],
)
def test_predict_closed_forms(lik, closed):
    m, v = np.array([-1.0, 0.0, 2.5]), np.array([0.3, 1.0, 4.0])
    np.testing.assert_allclose(lik.predict(m, v), closed(m, v), rtol=1e-12)


def test_logistic_predictive_equals_quadrature():
    from scipy import integrate, stats
    from scipy.special import expit

    for m, v in [(0.5, 2.0), (-3.0, 0.1)]:
        expected = integrate.quad(lambda f, m=m, v=v: expit(f) * stats.norm.pdf(f, m, np.sqrt(v)), -50, 50)[0]
        assert Logistic().predict(m, v) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("eps", [-0.1, 0.5, 0.7, np.nan])
def test_eps_outside_range_is_rejected(eps):
    with pytest.raises(ValueError, match="eps"):
        NoisyStep(eps)
    with pytest.raises(ValueError, match="eps"):
        NoisyProbit(eps)


@pytest.mark.parametrize("scale", [0.0, -1.0, np.inf])
def test_noisy_probit_scale_must_be_positive(scale):
    with pytest.raises(ValueError, match="scale"):
        NoisyProbit(0.1, scale)


def test_noisy_probit_contains_probit_and_tends_to_the_step():
    m, v = np.array([-3.0, 0.2, 2.0]), np.array([0.5, 2.0, 9.0])
    for power in (1.0, 0.6):
        a, b = NoisyProbit(0.0, 1.0).log_z(1.0, m, v, power), Probit().log_z(1.0, m, v, power)
        np.testing.assert_allclose(a.log_z, b.log_z, rtol=1e-10)
        np.testing.assert_allclose(a.d2log_z, b.d2log_z, rtol=1e-8)
    np.testing.assert_allclose(
        NoisyProbit(0.1, 1e-6).log_z(1.0, m, v).log_z, NoisyStep(0.1).log_z(1.0, m, v).log_z, rtol=1e-10
    )


@pytest.mark.parametrize("power", [0.0, -0.5, 1.5])
def test_power_outside_range_is_rejected(power):
    with pytest.raises(ValueError, match="power"):
        Probit().log_z(1.0, 0.0, 1.0, power)


def test_likelihood_parameters_round_trip():
    lik = NoisyStep(0.2)
    assert lik.get_params() == {"eps": 0.2}
    assert lik.set_params(eps=0.3).eps == 0.3
    assert NoisyStep(0.3) == lik and NoisyStep(0.1) != lik
    assert repr(lik) == "NoisyStep(eps=0.3)"


@pytest.mark.parametrize("key", LIKELIHOODS)
@pytest.mark.parametrize("cavity", [*CAVITIES, (-6.0, 1.0)])
def test_tilted_cumulants_equal_quadrature(key, cavity):
    """The four cumulants the double-loop EP's Newton steps use, against adaptive quadrature."""
    lik, t = LIKELIHOODS[key]
    mean, var = cavity
    _, m, v = tilted_quad(t, mean, var)
    *_, c3 = tilted_quad(t, mean, var, extra=lambda g: (g - m) ** 3)
    *_, c4 = tilted_quad(t, mean, var, extra=lambda g: (g - m) ** 4)
    k1, k2, k3, k4 = (float(k) for k in lik.tilted_cumulants(1.0, mean, var))
    assert k1 == pytest.approx(m, rel=RTOL, abs=RTOL * np.sqrt(var))
    assert k2 == pytest.approx(v, rel=RTOL * 10, abs=RTOL * var)
    assert k3 == pytest.approx(c3, rel=1e-6, abs=1e-9 * var**1.5)
    assert k4 == pytest.approx(c4 - 3.0 * v**2, rel=1e-6, abs=1e-9 * var**2)


@pytest.mark.parametrize("key", BINARY)
def test_binary_likelihoods_fold_the_label_inside(key):
    """p(y | f) = t(y f): for y = -1 the answers are those at the mirrored cavity, with the odd
    derivatives and cumulants negated (the folding happens once, in BinaryLikelihood)."""
    lik, _ = LIKELIHOODS[key]
    m, v = np.array([-1.3, 0.2, 2.5]), np.array([0.5, 1.0, 3.0])
    down, up = lik.log_z(-1.0, m, v), lik.log_z(1.0, -m, v)
    np.testing.assert_array_equal(down.log_z, up.log_z)
    np.testing.assert_array_equal(down.dlog_z, -up.dlog_z)
    np.testing.assert_array_equal(down.d2log_z, up.d2log_z)
    k_down, k_up = lik.tilted_cumulants(-1.0, m, v), lik.tilted_cumulants(1.0, -m, v)
    for k, (a, b) in enumerate(zip(k_down, k_up, strict=True)):
        np.testing.assert_array_equal(a, -b if k % 2 == 0 else b)
    np.testing.assert_array_equal(lik.log_lik(-1.0, m), lik.log_lik(1.0, -m))
    with pytest.raises(ValueError, match="-1 or \\+1"):
        lik.check_targets(np.array([0.0, 1.0]))


def test_the_old_module_name_rules_warns_and_resolves():
    import relaxep.rules as rules
    import relaxep.sites as sites

    with pytest.warns(FutureWarning, match="relaxep.sites"):
        assert rules.EP is sites.EP
    with pytest.warns(FutureWarning, match="relaxep.inference"):
        from relaxep.inference import DoubleLoopEP

        assert rules.DoubleLoopEP is DoubleLoopEP
    with pytest.raises(AttributeError):
        rules.NoSuchRule
