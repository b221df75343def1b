"""Priors on the hyperparameters (issue 54): each density against scipy's, with the log-parameter's Jacobian; the
MAP against an independent optimisation of scikit-learn's evidence plus the prior; the defaults hold the amplitude
where type-II maximum likelihood lets it run away."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import integrate, optimize, stats
from sklearn.datasets import make_classification
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

import relaxep
from relaxep.estimators._hyper import HyperVector
from relaxep.hyper import (
    DataScales,
    Gamma,
    HalfStudentT,
    InverseGamma,
    LogNormal,
    LogUniform,
    Uniform,
    resolve_prior,
)

# each prior beside scipy's density of u = v (or sqrt(v)), v = exp(theta)
CASES = [
    (HalfStudentT(4.0, 2.0), lambda u: 2 * stats.t(4.0, scale=2.0).pdf(u), 1.0),
    (HalfStudentT(3.0, 0.5, sqrt=True), lambda u: 2 * stats.t(3.0, scale=0.5).pdf(u), 0.5),
    (LogNormal(0.3, 0.7), stats.lognorm(0.7, scale=np.exp(0.3)).pdf, 1.0),
    (Gamma(2.5, 1.5), stats.gamma(2.5, scale=1 / 1.5).pdf, 1.0),
    (InverseGamma(3.0, 2.0, sqrt=True), stats.invgamma(3.0, scale=2.0).pdf, 0.5),
]


@pytest.mark.parametrize(("prior", "pdf", "power"), CASES)
def test_each_prior_is_scipys_density_of_the_log_parameter(prior, pdf, power):
    theta = np.linspace(-3.0, 3.0, 13)
    u = np.exp(power * theta)
    expected = np.log(pdf(u)) + np.log(power * u)  # |du/dtheta| = power * u
    value, slope = prior.log_density(theta)
    np.testing.assert_allclose(value, expected, rtol=1e-12, atol=1e-12)
    h = 1e-6
    numeric = (prior.log_density(theta + h)[0] - prior.log_density(theta - h)[0]) / (2 * h)
    np.testing.assert_allclose(slope, numeric, rtol=1e-6, atol=1e-7)
    total, _ = integrate.quad(lambda t: np.exp(prior.log_density(t)[0]), -60, 60, limit=400)
    assert abs(total - 1.0) < 1e-7


def test_the_improper_priors_are_flat_and_sloped_in_theta():
    theta = np.array([-2.0, 0.0, 5.0])
    np.testing.assert_array_equal(LogUniform().log_density(theta)[0], 0.0)
    np.testing.assert_allclose(Uniform(sqrt=True).log_density(theta)[0] - np.log(0.5), 0.5 * theta)
    assert not LogUniform().proper and HalfStudentT().proper


def test_bad_prior_parameters_and_specs_are_named():
    with pytest.raises(ValueError, match="scale"):
        HalfStudentT(4.0, -1.0)
    with pytest.raises(ValueError, match="sigma"):
        LogNormal(0.0, 0.0)
    with pytest.raises(TypeError, match="prior"):
        relaxep.GPClassifier(prior="flat").fit([[0.0], [1.0]], [0, 1])
    X, y = make_classification(20, 2, n_redundant=0, random_state=0)
    with pytest.raises(ValueError, match="lenght_scale"):
        relaxep.GPClassifier(prior={"lenght_scale": HalfStudentT()}).fit(X, y)


def test_names_match_by_full_name_or_last_part_over_the_defaults():
    hyper = HyperVector(C(1.0) * RBF([1.0, 2.0]), relaxep.StudentT(4.0, 0.5))
    scales = DataScales(np.array([2.0, 3.0]), (5.0,))
    auto = resolve_prior("auto", hyper.entries(), scales)
    assert auto.priors[0] == HalfStudentT(4.0, 5.0, sqrt=True)  # the amplitude, in the targets' scale
    r2 = np.sqrt(2.0)  # ARD: each feature's sd times sqrt(d)
    assert auto.priors[1:3] == (HalfStudentT(4.0, 2.0 * r2), HalfStudentT(4.0, 3.0 * r2))
    assert auto.priors[3] == HalfStudentT(4.0, 5.0)  # the Student-t's scale (a standard deviation)
    mixed = resolve_prior({"length_scale": LogNormal(), "k1__constant_value": None}, hyper.entries(), scales)
    assert mixed.priors[:3] == (LogUniform(), LogNormal(), LogNormal()) and mixed.priors[3] == auto.priors[3]
    assert resolve_prior(None, hyper.entries(), scales).flat


def _independent_map(X, y, alpha, prior):
    """argmax of scikit-learn's closed-form evidence plus the prior, by scipy from several starts."""
    gpr = GaussianProcessRegressor(C(1.0) * RBF(1.0), alpha=alpha, optimizer=None).fit(X, y)

    def objective(theta):
        lml, grad = gpr.log_marginal_likelihood(theta, eval_gradient=True)
        lp, glp = zip(*(p.log_density(t) for p, t in zip(prior, theta, strict=True)), strict=True)
        return -(lml + sum(lp)), -(grad + np.array(glp))

    best = min(
        (optimize.minimize(objective, x0, jac=True, method="BFGS") for x0 in ([0.0, 0.0], [1.0, -1.0], [-1.0, 1.0])),
        key=lambda r: r.fun,
    )
    return best.x


def test_the_search_finds_the_map_of_the_evidence_plus_the_prior():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (12, 1))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.standard_normal(12)
    prior = (HalfStudentT(4.0, 0.5, sqrt=True), LogNormal(np.log(3.0), 0.5))
    spec = {"constant_value": prior[0], "length_scale": prior[1]}
    fitted = relaxep.GPRegressor(C(1.0) * RBF(1.0), alpha=0.1, prior=spec).fit(X, y)
    expected = _independent_map(X, y, 0.1, prior)
    np.testing.assert_allclose(fitted.kernel_.theta, expected, atol=2e-4)
    ml_ii = relaxep.GPRegressor(C(1.0) * RBF(1.0), alpha=0.1).fit(X, y)  # the Gaussian model's "auto": ML-II
    assert np.max(np.abs(ml_ii.kernel_.theta - expected)) > 0.05  # (the prior moved the answer)
    # log_marginal_likelihood stays the evidence, not the posterior
    gpr = GaussianProcessRegressor(C(1.0) * RBF(1.0), alpha=0.1, optimizer=None).fit(X, y)
    np.testing.assert_allclose(
        fitted.log_marginal_likelihood(fitted.kernel_.theta), gpr.log_marginal_likelihood(fitted.kernel_.theta)
    )


def test_the_progress_reports_the_log_prior_of_each_evaluation():
    X, y = make_classification(40, 2, n_redundant=0, random_state=1)
    steps = []
    fitted = relaxep.GPClassifier(callback=steps.append).fit(X, y)
    sd = np.std(X, axis=0)
    prior = (HalfStudentT(4.0, 1.0, sqrt=True), HalfStudentT(4.0, float(np.sqrt(np.sum(sd**2)))))
    for step in steps[:3]:
        expected = sum(p.log_density(t)[0] for p, t in zip(prior, step.parameters, strict=True))
        np.testing.assert_allclose(step.log_prior, expected, rtol=1e-12)
        assert fitted.log_prior(step.parameters) == pytest.approx(expected, rel=1e-12)
    assert max(s.log_evidence + s.log_prior for s in steps) == pytest.approx(steps[-1].best)
    assert fitted.log_marginal_likelihood_value_ == pytest.approx(
        fitted.log_marginal_likelihood(fitted.kernel_.theta), abs=1e-6
    )


def test_the_default_prior_holds_the_amplitude_where_ml_ii_runs_away():
    amplitudes = {"auto": [], None: []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(3):
            X, y = make_classification(30, 4, class_sep=2.0, random_state=seed + 1)
            for prior in amplitudes:
                kernel = relaxep.GPClassifier(random_state=0, prior=prior).fit(X, y).kernel_
                amplitudes[prior].append(np.sqrt(kernel.k1.constant_value))
    assert max(amplitudes["auto"]) < 10.0
    assert min(amplitudes[None]) > 100.0  # (type-II maximum likelihood runs to the bound: the test can fail)


@pytest.mark.parametrize(
    "make",
    [
        lambda: relaxep.GPOrdinalClassifier(),
        lambda: relaxep.GPRegressor(likelihood=relaxep.StudentT(4.0, 0.5)),
        lambda: relaxep.GPRegressor(inducing_points=8, random_state=0),
    ],
)
def test_each_estimator_climbs_the_posterior_by_default(make):
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, (40, 2))
    f = np.sin(2 * X[:, 0]) + X[:, 1]
    y = np.digitize(f, [-0.5, 0.5]) if isinstance(make(), relaxep.GPOrdinalClassifier) else f
    y = y + (0.0 if isinstance(make(), relaxep.GPOrdinalClassifier) else 0.2 * rng.standard_normal(40))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto, flat = make().fit(X, y), make().set_params(prior=None).fit(X, y)
    # ML-II's answer is the evidence's maximum; the MAP gives up evidence for prior density
    assert flat.log_marginal_likelihood_value_ >= auto.log_marginal_likelihood_value_ - 1e-6
    assert not np.allclose(auto.kernel_.theta, flat.kernel_.theta, atol=1e-3)
