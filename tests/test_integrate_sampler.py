"""The CCD mixture over a probit classifier's hyperparameters against pseudo-marginal MCMC (issue 54, ground truth
for theta): the chain targets the exact posterior p(theta | y) (an unbiased importance-sampling estimate of the
evidence, Filippone & Girolami 2014), independent of EP's evidence and of the design."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPClassifier, Probit
from relaxep.hyper import HalfStudentT, weighted_moments
from relaxep.hyper.reference import pseudo_marginal_mcmc


def _log_prior(theta):
    """half-t(4, 1) on the amplitude sqrt(exp(theta_0)) and half-t(4, 1.5) on the length-scale exp(theta_1), as
    densities of theta (the Jacobians 0.5 sqrt(v) and v), written with scipy."""
    amplitude, length = np.exp(0.5 * theta[0]), np.exp(theta[1])
    return np.log(2 * stats.t(4.0, scale=1.0).pdf(amplitude) * 0.5 * amplitude) + np.log(
        2 * stats.t(4.0, scale=1.5).pdf(length) * length
    )


@pytest.mark.slow
def test_the_ccd_moments_of_log_theta_match_a_pseudo_marginal_chain():
    rng = np.random.default_rng(4)
    X = rng.uniform(-2.0, 2.0, (40, 1))
    y = np.where(np.sin(2 * X[:, 0]) + 0.5 * rng.standard_normal(40) > 0, 1, -1)
    prior = {"constant_value": HalfStudentT(4.0, 1.0, sqrt=True), "length_scale": HalfStudentT(4.0, 1.5)}
    fitted = GPClassifier(C(1.0) * RBF(1.0), Probit(), prior=prior, integrate="ccd").fit(X, y)
    mean, sd = weighted_moments(fitted.hyper_samples_.points, fitted.hyper_samples_.weights)
    chain = pseudo_marginal_mcmc(
        X, y.astype(float), C(1.0) * RBF(1.0), Probit(), _log_prior, fitted.kernel_.theta, np.diag(sd**2),
        n_steps=4000, n_burn=500, n_importance=16, df=4.0, random_state=0,
    )  # fmt: skip
    assert chain.ess.min() > 150
    # the design is a Gaussian-like quadrature: its means within a fifth of a posterior sd, sds within 25%
    np.testing.assert_array_less(np.abs(mean - chain.mean), 0.2 * chain.sd + 3 * chain.mean_se)
    np.testing.assert_allclose(sd, chain.sd, rtol=0.25)
