"""Scale extremes: a prior whose variances underflow or overflow EP's moments is refused with a
clear error, never answered with a converged status on a wrong answer.

Ground truth: the noise-free and noisy step likelihoods make ``a K`` and ``K`` the same problem
(``p(y | f)`` depends on the sign of ``f`` only), so the probabilities must agree at every amplitude
that is accepted.
"""

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF

from relaxep import GPClassifier, NoisyStep, Probit, infer
from relaxep.posterior import SparsePrior


def _problem():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 1))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(30) > 0, 1, -1)
    return X, y, RBF(1.0)(X) + 1e-6 * np.eye(30)


@pytest.mark.parametrize("amplitude", [1e-300, 1e-200, 1e200, 1e300])
def test_amplitudes_beyond_float64s_reach_are_refused(amplitude):
    _, y, K = _problem()
    with pytest.raises(ValueError, match="rescale the kernel's amplitude"):
        infer(amplitude * K, y, NoisyStep(0.1))


@pytest.mark.parametrize("amplitude", [1e-140, 1e-50, 1e50, 1e140])
def test_accepted_amplitudes_give_the_amplitude_one_answer_for_a_step_likelihood(amplitude):
    X, y, K = _problem()
    K_star, k_diag = RBF(1.0)(X[:5], X), np.full(5, 1.0 + 1e-6)
    reference = NoisyStep(0.1).predict(*infer(K, y, NoisyStep(0.1)).predict_latent(K_star, k_diag))
    result = infer(amplitude * K, y, NoisyStep(0.1))
    assert result.converged
    p = result.likelihood.predict(*result.predict_latent(amplitude * K_star, amplitude * k_diag))
    np.testing.assert_allclose(p, reference, atol=1e-6)


def test_the_sparse_prior_and_the_estimator_refuse_too():
    X, y, _ = _problem()
    with pytest.raises(ValueError, match="prior variances"):
        SparsePrior(X, X[:5], 1e-300 * RBF(1.0))
    with pytest.raises(ValueError, match="prior variances"):
        GPClassifier(1e-300 * RBF(1.0), Probit(), optimizer=None, jitter=0.0).fit(X, y)
