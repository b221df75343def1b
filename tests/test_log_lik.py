"""Pointwise ``log p(y | f)`` of every likelihood against a formula written independently of relaxep.

``log_lik`` is the target factor of the MCMC references (:mod:`relaxep.mcmc`), which the EP tests
treat as the truth, so it is checked here point by point, tails included: scipy's closed forms for
the scalar likelihoods, adaptive quadrature (``oracles.multinomial_probit_log_lik``) for the
multinomial probit, and the argmax rule for the robust max.  The table must name every concrete
likelihood class that :mod:`relaxep.likelihoods` exports, so a new one cannot be forgotten.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from scipy import special, stats
from scipy.special import expit

import relaxep.likelihoods as likmod
from oracles import multinomial_probit_log_lik
from relaxep.likelihoods import (
    AsymmetricLaplace,
    Beta,
    Binomial,
    Gamma,
    Gaussian,
    Heteroscedastic,
    HurdleNegativeBinomial,
    HurdlePoisson,
    Laplace,
    Logistic,
    MultinomialProbit,
    NegativeBinomial,
    NoisyProbit,
    NoisyStep,
    OrdinalProbit,
    Poisson,
    Probit,
    RobustMax,
    StudentT,
    Tobit,
    ZeroInflatedNegativeBinomial,
    ZeroInflatedPoisson,
)
from relaxep.likelihoods.aft import LogLogisticAFT, LogNormalAFT, WeibullAFT
from relaxep.likelihoods.coxph import CoxPH

#: rounding-level agreement: every reference is a closed form (or a quadrature to 1e-12) evaluated in
#: log space, and ``log p`` is never computed from a cancelling difference on either side
RTOL = 1e-12

#: folded latents g = y f for the binary likelihoods: the far tails (|g| = 38-40, where the normal-cdf
#: ratios change regime, and 1e3), the transition, and g = 0 exactly
G = np.array([-1e3, -40.0, -38.0, -10.0, -3.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 3.0, 10.0, 38.0, 40.0, 1e3])
#: residuals y - f for the regression likelihoods, up to 1e6 (relative to scales 0.01..100)
R = np.array([-1e6, -1e3, -30.0, -1.0, -1e-3, 0.0, 1e-3, 0.7, 5.0, 1e3, 1e6])


def _noisy_step(eps):
    # eps + (1 - 2 eps) Theta(g), with Theta(0) = 1/2 (the documented value on the null set g = 0)
    return lambda g: np.log(eps + (1 - 2 * eps) * np.heaviside(g, 0.5))


def _noisy_probit(eps, scale):
    return lambda g: np.logaddexp(np.log(eps), np.log(1 - 2 * eps) + stats.norm.logcdf(g / scale))


#: scalar likelihoods: (instance, reference log p as a function of the folded latent g (binary) or
#: of (y, f) (regression))
BINARY = {
    "step eps=0.1": (NoisyStep(0.1), _noisy_step(0.1)),
    "step eps=0.01": (NoisyStep(0.01), _noisy_step(0.01)),
    "step eps=0": (NoisyStep(0.0), _noisy_step(0.0)),
    "probit": (Probit(), stats.norm.logcdf),
    "logistic": (Logistic(), lambda g: -np.logaddexp(0.0, -g)),
    "noisy probit eps=0.05": (NoisyProbit(0.05, 1.0), _noisy_probit(0.05, 1.0)),
    "noisy probit eps=0.2 scale=0.3": (NoisyProbit(0.2, 0.3), _noisy_probit(0.2, 0.3)),
}
REGRESSION = {
    "gaussian noise=0.5": (Gaussian(0.5), lambda y, f: stats.norm.logpdf(y, f, np.sqrt(0.5))),
    "gaussian noise=1e-4": (Gaussian(1e-4), lambda y, f: stats.norm.logpdf(y, f, 1e-2)),
    "student-t df=4 scale=0.3": (StudentT(4.0, 0.3), lambda y, f: stats.t.logpdf(y - f, 4.0, scale=0.3)),
    "student-t df=1 scale=100": (StudentT(1.0, 100.0), lambda y, f: stats.t.logpdf(y - f, 1.0, scale=100.0)),
    "student-t df=30 scale=0.01": (StudentT(30.0, 0.01), lambda y, f: stats.t.logpdf(y - f, 30.0, scale=0.01)),
    # written out: scipy's laplace.logpdf is log(pdf), -inf once the density underflows
    "laplace scale=0.7": (Laplace(0.7), lambda y, f: -np.log(2 * 0.7) - np.abs(y - f) / 0.7),
    "laplace scale=0.01": (Laplace(0.01), lambda y, f: -np.log(2 * 0.01) - np.abs(y - f) / 0.01),
    "asymmetric laplace tau=0.2 scale=0.5": (
        AsymmetricLaplace(0.2, 0.5),
        lambda y, f: np.log(0.16 / 0.5) - ((y - f) / 0.5) * (0.2 - ((y - f) < 0)),
    ),
    # y = -3 left-censored, 1.5 right-censored, 0 observed
    "tobit lower=-3 upper=1.5 noise=0.5": (
        Tobit(lower=-3.0, upper=1.5, noise=0.5),
        lambda y, f: np.where(
            y == -3.0,
            stats.norm.logcdf((-3.0 - f) / np.sqrt(0.5)),
            np.where(y == 1.5, stats.norm.logcdf((f - 1.5) / np.sqrt(0.5)), stats.norm.logpdf(y, f, np.sqrt(0.5))),
        ),
    ),
}


def _interval_log_prob(lo, hi):
    """log(Phi(hi) - Phi(lo)) by scipy, from the tail the interval lies in (no cancelling difference)."""
    upper = lo > 0.0
    return np.where(
        upper,
        np.log(stats.norm.sf(np.where(upper, lo, 0.0)) - stats.norm.sf(np.where(upper, hi, 0.0))),
        np.log(stats.norm.cdf(np.where(upper, 0.0, hi)) - stats.norm.cdf(np.where(upper, 0.0, lo))),
    )


#: likelihoods of class indices and counts: (instance, targets, reference log p(y | f))
DISCRETE = {
    "ordinal probit K=4": (
        OrdinalProbit([-1.0, 0.2, 1.5], 0.7),
        np.array([0.0, 1.0, 2.0, 3.0]),
        lambda y, f: _interval_log_prob(
            (np.array([-np.inf, -1.0, 0.2, 1.5])[y.astype(int)] - f) / 0.7,
            (np.array([-1.0, 0.2, 1.5, np.inf])[y.astype(int)] - f) / 0.7,
        ),
    ),
    "poisson": (Poisson(), np.array([0.0, 1.0, 7.0, 300.0]), lambda y, f: stats.poisson.logpmf(y, np.exp(f))),
    "negative binomial r=0.5": (
        NegativeBinomial(0.5),
        np.array([0.0, 1.0, 7.0, 300.0]),
        lambda y, f: stats.nbinom.logpmf(y, 0.5, 0.5 / (0.5 + np.exp(f))),
    ),
    # the GLM likelihoods (their tilted integrals: tests/test_glm_likelihoods.py)
    "binomial one trial": (Binomial(), np.array([0.0, 1.0]), lambda y, f: stats.binom.logpmf(y, 1, expit(f))),
    "beta phi=4": (
        Beta(4.0),
        np.array([0.1, 0.5, 0.93]),
        lambda y, f: stats.beta.logpdf(y, 4 * expit(f), 4 * expit(-f)),
    ),
    "gamma shape=2": (
        Gamma(2.0),
        np.array([0.2, 1.0, 40.0]),
        lambda y, f: stats.gamma.logpdf(y, 2.0, scale=np.exp(f) / 2),
    ),
    "zero-inflated poisson pi=0.3": (
        ZeroInflatedPoisson(0.3),
        np.array([0.0, 1.0, 7.0, 30.0]),
        lambda y, f: np.log(0.3 * (y == 0) + 0.7 * stats.poisson.pmf(y, np.exp(f))),
    ),
    "zero-inflated nb pi=0.3 r=2": (
        ZeroInflatedNegativeBinomial(0.3, 2.0),
        np.array([0.0, 1.0, 7.0, 30.0]),
        lambda y, f: np.log(0.3 * (y == 0) + 0.7 * stats.nbinom.pmf(y, 2.0, 2.0 / (2.0 + np.exp(f)))),
    ),
    "hurdle poisson pi=0.3": (
        HurdlePoisson(0.3),
        np.array([0.0, 1.0, 7.0, 30.0]),
        lambda y, f: np.where(
            y == 0, np.log(0.3), np.log(0.7) + stats.poisson.logpmf(y, np.exp(f)) - np.log(-np.expm1(-np.exp(f)))
        ),
    ),
    "hurdle nb pi=0.3 r=2": (
        HurdleNegativeBinomial(0.3, 2.0),
        np.array([0.0, 1.0, 7.0, 30.0]),
        lambda y, f: np.where(
            y == 0,
            np.log(0.3),
            np.log(0.7)
            + stats.nbinom.logpmf(y, 2.0, 2.0 / (2.0 + np.exp(f)))
            - np.log(-np.expm1(-2.0 * np.log1p(np.exp(f) / 2.0))),
        ),
    ),
}
#: multi-class likelihoods: (instance, number of classes, lowest f_y - f_j of the rows): the multinomial
#: probit's 48-node Gauss-Hermite rule is exact to rounding while the label's latent lies at most about
#: 10 (C = 3) or 5 (C = 4) below the others; further below it loses digits (relative error in log p:
#: C = 3, 1e-7 at 16 below and 1e-2 at 20; C = 4, 3e-10 at 10; C = 5, 2e-10 at 6), where no posterior
#: that the MCMC samples lives
MULTICLASS = {
    "multinomial probit C=3": (MultinomialProbit(), 3, -10.0, RTOL),
    "multinomial probit C=4": (MultinomialProbit(), 4, -5.0, 1e-11),  # the rule's error: up to 1.3e-12 here
    "robust max eps=0.1 C=3": (RobustMax(0.1), 3, -40.0, RTOL),
    "robust max eps=0.3 C=4": (RobustMax(0.3), 4, -40.0, RTOL),
    "robust max eps=0.05 C=2": (RobustMax(0.05), 2, -40.0, RTOL),
}


#: survival likelihoods: (instance, scipy's law of T at the latent f) for the AFT models; rows [log lo, log hi]
SURVIVAL = {
    "weibull shape=1.7": (WeibullAFT(1.7, location=0.3), lambda f: stats.weibull_min(1.7, scale=np.exp(0.3 + f))),
    "log-logistic shape=2.5": (LogLogisticAFT(2.5, location=-0.2), lambda f: stats.fisk(2.5, scale=np.exp(-0.2 + f))),
    "log-normal sigma=0.6": (LogNormalAFT(0.6, location=0.1), lambda f: stats.lognorm(0.6, scale=np.exp(0.1 + f))),
}
_COX = CoxPH(breaks=(1.0, 2.5), hazards=(0.4, 0.9, 1.6))


def _cox_cumulative(t):
    """The Cox model's baseline cumulative hazard, summed by hand over its three intervals."""
    edges = np.array([0.0, 1.0, 2.5, np.inf])
    return np.sum(np.clip(np.minimum(t[..., None], edges[1:]) - edges[:-1], 0.0, None) * [0.4, 0.9, 1.6], axis=-1)


@pytest.mark.parametrize("key", SURVIVAL)
def test_survival_log_lik_equals_scipys_law(key):
    """An event's log density of T, a right-censored row's log survival, a left-censored row's log CDF and an
    interval's log mass, against scipy's law at every latent of a grid."""
    lik, law = SURVIVAL[key]
    t = np.array([0.3, 1.2, 4.0])
    f = np.linspace(-2.0, 2.0, 9)[:, None]
    inf = np.full(t.shape, np.inf)
    rows = {
        "event": (np.column_stack([np.log(t), np.log(t)]), law(f).logpdf(t)),
        "right": (np.column_stack([np.log(t), inf]), law(f).logsf(t)),
        "left": (np.column_stack([-inf, np.log(t)]), law(f).logcdf(t)),
        "interval": (  # (from the upper tail, S(l) - S(u), where the CDFs' difference cancels)
            np.column_stack([np.log(t), np.log(2 * t)]),
            law(f).logsf(t) + np.log1p(-np.exp(law(f).logsf(2 * t) - law(f).logsf(t))),
        ),
    }
    for y, expected in rows.values():
        np.testing.assert_allclose(lik.log_lik(y, f), expected, rtol=1e-10)


def test_cox_log_lik_equals_the_piecewise_formula():
    """h(t | f) = lambda_0(t) e^f, S = exp(-Lambda_0(t) e^f): an event f + log lambda_0(t) - Lambda_0(t) e^f, a
    right-censored row -Lambda_0(t) e^f, an interval log(S(l) - S(u))."""
    t = np.array([0.3, 1.2, 4.0])
    f = np.linspace(-2.0, 2.0, 9)[:, None]
    rate = np.array([0.4, 0.9, 1.6])[np.searchsorted([1.0, 2.5], t, side="right")]
    H, H2 = _cox_cumulative(t), _cox_cumulative(2 * t)
    event = np.column_stack([np.log(t), np.log(t)])
    right = np.column_stack([np.log(t), np.full(3, np.inf)])
    interval = np.column_stack([np.log(t), np.log(2 * t)])
    np.testing.assert_allclose(_COX.log_lik(event, f), f + np.log(rate) - H * np.exp(f), rtol=1e-10)
    np.testing.assert_allclose(_COX.log_lik(right, f), -H * np.exp(f), rtol=1e-10)
    expected = np.log(np.exp(-H * np.exp(f)) - np.exp(-H2 * np.exp(f)))
    np.testing.assert_allclose(_COX.log_lik(interval, f), expected, rtol=1e-10)


#: two-latent likelihoods: (instance, reference log p(y | f, g))
TWO_LATENT = {
    "heteroscedastic": (Heteroscedastic(), lambda y, f, g: stats.norm.logpdf(y, f, np.exp(0.5 * g))),
}


@pytest.mark.parametrize("key", TWO_LATENT)
def test_two_latent_log_lik_equals_the_formula(key):
    """log p(y | f, g) at a grid of both latents, with the latents apart or on a last axis of 2 (GPflow's F)."""
    lik, ref = TWO_LATENT[key]
    y = np.array([-3.0, 0.0, 0.4, 12.0])[:, None, None]
    f = np.linspace(-5.0, 5.0, 11)[None, :, None]
    g = np.linspace(-8.0, 6.0, 8)[None, None, :]
    expected = ref(y, f, g)
    np.testing.assert_allclose(lik.log_lik(y, f, g), expected, rtol=RTOL)
    F = np.stack(np.broadcast_arrays(f, g), axis=-1)
    np.testing.assert_allclose(lik.log_lik(y, F), expected, rtol=RTOL)


def test_every_exported_likelihood_has_a_reference_formula():
    """GPflow's meta-test, for log_lik: a concrete likelihood class without a row fails here."""
    classes = {
        obj
        for obj in vars(likmod).values()
        if isinstance(obj, type) and issubclass(obj, likmod.Likelihood) and not inspect.isabstract(obj)
    }
    tables = (BINARY, REGRESSION, DISCRETE, MULTICLASS, TWO_LATENT, SURVIVAL)
    tested = {type(lik) for table in tables for lik, *_ in table.values()} | {CoxPH}
    assert classes - tested == set(), "likelihoods without a log_lik formula in tests/test_log_lik.py"
    assert tested <= classes


@pytest.mark.parametrize("key", BINARY)
def test_binary_log_lik_equals_the_formula(key):
    """log p(y | f) = log t(y f) for both labels, every (y, f) of the grid in one call."""
    lik, ref = BINARY[key]
    y = np.array([-1.0, 1.0])[:, None]
    f = G[None, :]
    with np.errstate(divide="ignore"):
        expected = ref(y * f)
    got = lik.log_lik(y, f)
    assert got.shape == expected.shape
    # -inf (the noise-free step's wrong side) must sit exactly where the formula has it
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=0.0)


@pytest.mark.parametrize("key", REGRESSION)
def test_regression_log_lik_equals_the_formula(key):
    lik, ref = REGRESSION[key]
    y = np.array([0.0, 1.5, -3.0])[:, None]
    f = y - R[None, :]
    expected = ref(y, f)
    got = lik.log_lik(y, f)
    assert np.all(np.isfinite(expected))
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=0.0)


@pytest.mark.parametrize("key", DISCRETE)
def test_ordinal_and_count_log_lik_equals_the_formula(key):
    """log p(y | f) against scipy's distributions, each target at latents from -6 to 6 (where scipy's own
    log of a cdf difference keeps its digits)."""
    lik, targets, ref = DISCRETE[key]
    y = targets[:, None]
    f = np.linspace(-6.0, 6.0, 25)[None, :]
    expected = ref(y, f)
    got = lik.log_lik(y, f)
    assert np.all(np.isfinite(expected))
    # (atol: where p is within 1e-12 of one, log p ~ -1e-12 and scipy's 1 - tail keeps only its absolute digits)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-15)


def _latents(n_classes, lowest, rng):
    """(N, C) latent rows and labels: random rows at three spreads (those whose label lies more than
    ``-lowest`` below another class dropped), then rows where the label's latent f_0 is ``gap`` away from
    the others (tied at 0, or spread over [-1, 1]), ``gap`` from ``lowest`` to 40 above."""
    F = np.concatenate([rng.normal(scale=s, size=(12, n_classes)) for s in (0.3, 1.5, 4.0)])
    y = rng.integers(0, n_classes, F.shape[0])
    gaps = np.array([lowest, -6.0, -3.0, -1.0, 0.5, 4.0, 12.0, 40.0])
    structured = np.concatenate(
        [
            np.column_stack([gaps, np.zeros((gaps.size, n_classes - 1))]),
            np.column_stack([gaps, np.tile(np.linspace(-1.0, 1.0, n_classes - 1), (gaps.size, 1))]),
        ]
    )
    F = np.concatenate([F, structured])
    y = np.concatenate([y, np.zeros(structured.shape[0], dtype=int)])
    label_minus_other = F[np.arange(y.size), y][:, None] - F
    keep = label_minus_other.min(axis=1) >= lowest - 1e-9
    return F[keep], y[keep]


def _multiclass_reference(lik, F, y):
    if isinstance(lik, MultinomialProbit):
        return np.array([multinomial_probit_log_lik(f, int(c)) for f, c in zip(F, y, strict=True)])
    eps, n_classes = float(lik.eps), F.shape[1]
    with np.errstate(divide="ignore"):
        return np.array(
            [np.log(1 - eps) if np.argmax(f) == c else np.log(eps / (n_classes - 1)) for f, c in zip(F, y, strict=True)]
        )


@pytest.mark.parametrize("key", MULTICLASS)
def test_multiclass_log_lik_equals_the_formula(key):
    """Multinomial probit: P(f_y + e_y > f_j + e_j for all j != y), e ~ N(0, I), by adaptive quadrature
    over e_y; robust max: 1 - eps at the argmax, eps / (C - 1) elsewhere.  Also in the sampler's batched
    shape (chains, N, C).  Where p is within 1e-12 of 1, log p has only absolute digits on either side:
    hence ``atol``, a relative error of 1e-14 in p itself."""
    lik, n_classes, lowest, rtol = MULTICLASS[key]
    F, y = _latents(n_classes, lowest, np.random.default_rng(n_classes))
    assert F.shape[0] > 40
    expected = _multiclass_reference(lik, F, y)
    got = lik.log_lik(y, F)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-14)
    # the sampler's layout (chains, N, C); p depends on f only through its differences: shifted chains agree
    batch = np.stack([F, F + 3.0, F - 0.5])
    np.testing.assert_allclose(lik.log_lik(y, batch), np.stack([expected] * 3), rtol=rtol, atol=1e-14)


def test_the_multinomial_probit_oracle_is_the_orthant_probability():
    """The quadrature oracle against a second method: with v_j = e_j - e_y ~ N(0, I + 1 1^T),
    p(y | f) = P(v_j < f_y - f_j for all j), scipy's multivariate normal CDF.  In two dimensions
    (C = 3) scipy uses a bivariate algorithm good to about 1e-15; in three (C = 4) a randomised
    quasi-Monte Carlo rule, checked loosely (its default error target is 1e-5 absolute)."""
    rng = np.random.default_rng(0)
    for n_classes, tol in ((3, 1e-12), (4, 1e-3)):
        for f in rng.normal(scale=1.5, size=(8, n_classes)):
            d = f[0] - f[1:]
            cov = np.eye(n_classes - 1) + 1.0
            p = stats.multivariate_normal.cdf(d, np.zeros(n_classes - 1), cov)
            assert multinomial_probit_log_lik(f, 0) == pytest.approx(np.log(p), rel=tol, abs=tol)


def _mills(g):
    """``phi(g) / Phi(g)`` from scipy, in log space."""
    return np.exp(stats.norm.logpdf(g) - special.log_ndtr(g))


# the derivatives of log t(g) that place the sinh rule's nodes (QuadratureLikelihood._folded_dlog_lik):
# closed forms from scipy, t the folded likelihood
_DERIVATIVES = {
    "probit": (Probit(), lambda g: (_mills(g), -_mills(g) * (g + _mills(g)))),
    "logistic": (Logistic(), lambda g: (special.expit(-g), -special.expit(g) * special.expit(-g))),
    "noisy-probit": (
        NoisyProbit(0.1, 0.5),
        lambda g: (
            0.8 * stats.norm.pdf(g / 0.5) / 0.5 / (0.1 + 0.8 * stats.norm.cdf(g / 0.5)),
            -((0.8 * stats.norm.pdf(g / 0.5) / 0.5 / (0.1 + 0.8 * stats.norm.cdf(g / 0.5))) ** 2)
            - (g / 0.25) * 0.8 * stats.norm.pdf(g / 0.5) / 0.5 / (0.1 + 0.8 * stats.norm.cdf(g / 0.5)),
        ),
    ),
}


@pytest.mark.parametrize("key", sorted(_DERIVATIVES))
def test_the_derivatives_of_log_t_equal_their_closed_forms(key):
    lik, formula = _DERIVATIVES[key]
    g = np.array([-8.0, -3.0, -1.0, -0.2, 0.0, 0.3, 1.0, 3.0, 8.0])
    d1, d2 = lik._folded_dlog_lik(g)
    e1, e2 = formula(g)
    np.testing.assert_allclose(d1, e1, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(d2, e2, rtol=1e-9, atol=1e-14)


def test_probit_log_z_is_log_ndtr_of_the_scaled_mean_to_rounding():
    """At power 1 the probit's log Z is closed form, log Phi(y m / sqrt(1 + v)) with its derivatives, to
    rounding (quadrature reaches 1e-10: the closed form, not the rule, must answer at u = 1)."""
    y = np.array([1.0, -1.0, 1.0, -1.0, 1.0])
    m = np.array([0.3, 2.0, -4.0, -0.5, 6.0])
    v = np.array([0.5, 1.0, 3.0, 0.1, 10.0])
    lz = Probit().log_z(y, m, v)
    s = np.sqrt(1.0 + v)
    z = y * m / s
    r = _mills(z)
    np.testing.assert_allclose(lz.log_z, special.log_ndtr(z), rtol=1e-14)
    np.testing.assert_allclose(lz.dlog_z, y * r / s, rtol=1e-13)
    np.testing.assert_allclose(lz.d2log_z, -r * (z + r) / (1.0 + v), rtol=1e-12)
