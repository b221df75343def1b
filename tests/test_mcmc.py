"""Elliptical slice sampling against exact posterior moments by 2-D quadrature."""

from __future__ import annotations

import numpy as np
import pytest

from relaxep import KernelNotPositiveDefiniteError, NoisyStep, Probit
from relaxep.mcmc import elliptical_slice

K2 = np.array([[1.5, 0.9], [0.9, 1.2]])
Y2 = np.array([1.0, -1.0])


def _grid_moments(K, y, likelihood, half_width=9.0, m=1201):
    """Posterior mean and variances of f on a 2-D grid (the step's jump lies on a grid line)."""
    g = np.linspace(-half_width, half_width, m)
    f1, f2 = np.meshgrid(g, g, indexing="ij")
    F = np.stack([f1.ravel(), f2.ravel()], 1)
    prior = -0.5 * np.einsum("ij,jk,ik->i", F, np.linalg.inv(K), F)
    w = np.exp(prior + likelihood.log_lik(y, F).sum(1))
    w /= w.sum()
    mean = w @ F
    return mean, w @ (F - mean) ** 2


@pytest.mark.parametrize("likelihood", [Probit(), NoisyStep(0.1), NoisyStep(0.0)], ids=["probit", "step", "hard"])
def test_moments_match_quadrature_within_monte_carlo_error(likelihood):
    res = elliptical_slice(K2, Y2, likelihood, n_samples=8000, n_burn=500, n_chains=4, random_state=0)
    mean, var = _grid_moments(K2, Y2, likelihood)
    assert res.converged
    assert np.all(np.abs(res.mean - mean) < 5 * res.mean_se + 2e-3)
    np.testing.assert_allclose(res.var, var, rtol=0.05)


# the label-noise cases take 6-9 s each: the probit case runs by default, the two steps with the slow studies
@pytest.mark.parametrize(
    "likelihood",
    [
        Probit(),
        pytest.param(NoisyStep(0.1), marks=pytest.mark.slow),
        pytest.param(NoisyStep(0.0), marks=pytest.mark.slow),
    ],
    ids=["probit", "step", "hard"],
)
def test_a_wrong_gaussian_approximation_leaves_the_target_exact(likelihood):
    """Sampling on the ellipses of N(m, S) with the residual factor: any (m, S) gives the same
    posterior; here m is shifted by a standard deviation and S is three times too wide."""
    approx = (np.array([1.0, -0.5]), 3.0 * K2)
    res = elliptical_slice(K2, Y2, likelihood, n_samples=8000, n_burn=500, random_state=2, approx=approx)
    mean, var = _grid_moments(K2, Y2, likelihood)
    assert res.converged
    assert np.all(np.abs(res.mean - mean) < 5 * res.mean_se + 2e-3)
    np.testing.assert_allclose(res.var, var, rtol=0.05)


def test_rhat_flags_chains_that_have_not_mixed():
    """Forty samples from over-dispersed starts with a strong prior correlation: R-hat >> 1."""
    K = np.array([[1.0, 0.999], [0.999, 1.0]]) * 100.0
    res = elliptical_slice(K, Y2[:1].repeat(2), Probit(), n_samples=40, n_burn=0, n_chains=4, random_state=1)
    assert not res.converged and res.rhat > 1.05


def test_bad_input():
    with pytest.raises(ValueError, match="multiple of 40"):
        elliptical_slice(K2, Y2, Probit(), n_samples=50)
    with pytest.raises(KernelNotPositiveDefiniteError, match="not positive definite"):
        elliptical_slice(np.ones((2, 2)), Y2, Probit(), n_samples=40)
    with pytest.raises(ValueError, match="approx must be"):
        elliptical_slice(K2, Y2, Probit(), n_samples=40, approx=(np.zeros(3), K2))
    with pytest.raises(ValueError, match="NaN"):
        elliptical_slice(K2, Y2, Probit(), n_samples=40, approx=(np.array([np.nan, 0.0]), K2))
