"""Elliptical slice sampling against exact posterior moments by 2-D quadrature."""

from __future__ import annotations

import numpy as np
import pytest

from oracles import lik_fn
from relaxep import KernelNotPositiveDefiniteError, NoisyStep, Probit
from relaxep.mcmc import elliptical_slice

K2 = np.array([[1.5, 0.9], [0.9, 1.2]])
Y2 = np.array([1.0, -1.0])


def _grid_moments(K, y, t, half_width=9.0, m=1200):
    """Posterior mean and variances of f by the midpoint rule on a 2-D grid of cells, the likelihood
    ``prod_i t(y_i f_i)`` from ``oracles.lik_fn`` (not the sampler's ``log_lik``).  The step's jump at
    ``f_i = 0`` lies on a cell boundary, so each cell is on one side of it: the rule's error is
    O(h^2) on both sides (h = 0.015 here; about 1e-5 on the moments)."""
    h = 2.0 * half_width / m
    g = -half_width + h * (np.arange(m) + 0.5)
    f1, f2 = np.meshgrid(g, g, indexing="ij")
    F = np.stack([f1.ravel(), f2.ravel()], 1)
    prior = -0.5 * np.einsum("ij,jk,ik->i", F, np.linalg.inv(K), F)
    w = np.exp(prior) * t(y[0] * F[:, 0]) * t(y[1] * F[:, 1])
    w /= w.sum()
    mean = w @ F
    return mean, w @ (F - mean) ** 2


CASES = {
    "probit": (Probit(), lik_fn("probit")),
    "step": (NoisyStep(0.1), lik_fn("step", 0.1)),
    "hard": (NoisyStep(0.0), lik_fn("step", 0.0)),
}


# the noisy step (eps = 0.1) runs with the slow studies: the noise-free step, the same likelihood's code with its
# -inf region besides, and the probit (finite log-likelihoods) run by default
@pytest.mark.parametrize("key", ["probit", pytest.param("step", marks=pytest.mark.slow), "hard"])
def test_moments_match_quadrature_within_monte_carlo_error(key):
    likelihood, t = CASES[key]
    res = elliptical_slice(K2, Y2, likelihood, n_samples=8000, n_burn=500, n_chains=4, random_state=0)
    mean, var = _grid_moments(K2, Y2, t)
    assert res.converged
    assert np.all(np.abs(res.mean - mean) < 5 * res.mean_se + 2e-3)
    np.testing.assert_allclose(res.var, var, rtol=0.05)


# the label-noise cases take 6-9 s each: the probit case runs by default, the two steps with the slow studies
@pytest.mark.parametrize(
    "key", ["probit", pytest.param("step", marks=pytest.mark.slow), pytest.param("hard", marks=pytest.mark.slow)]
)
def test_a_wrong_gaussian_approximation_leaves_the_target_exact(key):
    """Sampling on the ellipses of N(m, S) with the residual factor: any (m, S) gives the same
    posterior; here m is shifted by a standard deviation and S is three times too wide."""
    likelihood, t = CASES[key]
    approx = (np.array([1.0, -0.5]), 3.0 * K2)
    res = elliptical_slice(K2, Y2, likelihood, n_samples=8000, n_burn=500, random_state=2, approx=approx)
    mean, var = _grid_moments(K2, Y2, t)
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
