"""A likelihood written by a user in one file runs through every inference path.

With Gaussian noise every tilted distribution is Gaussian, so EP (and Power EP, fractional EP,
REP, the convergent methods) is exact: the posterior must be GP regression's closed form,
:math:`\\mu = K (K + \\sigma^2 I)^{-1} y`, :math:`\\Sigma = K - K (K + \\sigma^2 I)^{-1} K`, and the EP
evidence :math:`\\log N(y | 0, K + \\sigma^2 I)` (Rasmussen & Williams 2006, eqs. 2.25-2.30).
"""

import numpy as np
import pytest
from scipy import linalg
from scipy.stats import multivariate_normal
from sklearn.gaussian_process.kernels import RBF

import relaxep._xp as rxp
from custom_gaussian import Gaussian
from relaxep import EP, ConvergentEP, DoubleLoopEP, FractionalEP, PowerEP, RelaxedEP, SparsePrior, infer
from relaxep.likelihoods import BinaryLikelihood, Probit, TiltedLogZ
from relaxep.mcmc import elliptical_slice

NOISE = 0.3
KERNEL = RBF(0.8)


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 1))
    y = np.sin(2 * X[:, 0]) + np.sqrt(NOISE) * rng.standard_normal(n)
    return X, y


def gp_regression(K, y, noise):
    """Closed-form posterior mean, covariance and log marginal likelihood."""
    C = K + noise * np.eye(len(y))
    mean = K @ linalg.solve(C, y, assume_a="pos")
    cov = K - K @ linalg.solve(C, K, assume_a="pos")
    return mean, cov, multivariate_normal(np.zeros(len(y)), C).logpdf(y)


RULES = {
    "EP": EP(),
    "PowerEP": PowerEP(0.6),
    "FractionalEP": FractionalEP(0.5),
    "RelaxedEP": RelaxedEP(1.0),
    "auto": "auto",
}
# The convergent methods start where the tilted family reaches the marginals (relaxep.inference.start):
# not the prior here (sigma^2 < k(x, x) would need an r-cavity precision 1/k - 1/sigma^2 < 0).
CONVERGENT = [pytest.param(m, id=type(m).__name__) for m in (ConvergentEP(), DoubleLoopEP())]


@pytest.mark.parametrize("rule", [*RULES.values(), *CONVERGENT], ids=[*RULES.keys(), "ConvergentEP", "DoubleLoopEP"])
def test_ep_on_a_user_written_gaussian_likelihood_is_exact_gp_regression(rule):
    X, y = _data()
    K = KERNEL(X)
    res = infer(K, y, Gaussian(NOISE), rule, tol=1e-12, max_sweeps=50)
    mean, cov, log_ml = gp_regression(K, y, NOISE)
    assert res.converged
    np.testing.assert_allclose(res.mean, mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(res.marginal_var, np.diag(cov), rtol=0, atol=1e-10)
    np.testing.assert_allclose(res.site_precision, 1.0 / NOISE, rtol=1e-10)  # the sites are the likelihood
    assert res.log_evidence == pytest.approx(log_ml, abs=1e-10)
    if rule == "auto":
        assert len(res.attempts) == 1  # EP converged at once: no later stage ran


@pytest.mark.parametrize("rule", [EP(), RelaxedEP(1.0), "auto"], ids=["EP", "RelaxedEP", "auto"])
def test_sparse_prior_with_inducing_inputs_at_the_training_inputs_is_exact(rule):
    """FITC with Z = X: its prior covariance Q + diag(K - Q) (Q = K_fu K_uu^-1 K_uf, K_uu with the
    prior's jitter) is a dense matrix we can write down; EP on it is GP regression with that matrix."""
    X, y = _data(30, seed=1)
    prior = SparsePrior(X, X, KERNEL)
    K = KERNEL(X)
    Q = K @ linalg.solve(K + 1e-6 * np.eye(len(y)), K, assume_a="pos")
    K_fitc = Q + np.diag(np.diag(K - Q))
    res = infer(prior, y, Gaussian(NOISE), rule, tol=1e-12, max_sweeps=50)
    mean, cov, log_ml = gp_regression(K_fitc, y, NOISE)
    assert res.converged
    np.testing.assert_allclose(res.mean, mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(res.marginal_var, np.diag(cov), rtol=0, atol=1e-10)
    assert res.log_evidence == pytest.approx(log_ml, abs=1e-9)
    full_mean, _, _ = gp_regression(K, y, NOISE)
    np.testing.assert_allclose(res.mean, full_mean, atol=1e-4)  # and Z = X recovers the full GP


def test_mcmc_on_the_user_written_likelihood_samples_the_gp_regression_posterior():
    X, y = _data(3, seed=2)
    K = KERNEL(X) + 1e-8 * np.eye(3)
    mcmc = elliptical_slice(K, y, Gaussian(NOISE), n_samples=4000, n_burn=500, n_chains=4, random_state=0)
    mean, cov, _ = gp_regression(K, y, NOISE)
    assert mcmc.converged
    assert np.all(np.abs(mcmc.mean - mean) < 5 * mcmc.mean_se)
    np.testing.assert_allclose(mcmc.var, np.diag(cov), rtol=0.1)


def test_default_hooks_take_the_tilted_moments_from_log_z():
    """E[log p(y|f)] and the cumulants by the Gauss-Hermite default equal the Gaussian closed forms."""
    lik = Gaussian(NOISE)
    y, m, v = np.array([0.3, -2.0]), np.array([1.0, 0.5]), np.array([0.5, 2.0])
    post_var = 1.0 / (1.0 / v + 1.0 / NOISE)
    post_mean = post_var * (m / v + y / NOISE)
    k1, k2, k3, k4 = lik.tilted_cumulants(y, m, v)
    np.testing.assert_allclose(k1, post_mean, rtol=1e-12)
    np.testing.assert_allclose(k2, post_var, rtol=1e-12)
    np.testing.assert_allclose([k3, k4], 0.0, atol=1e-12)
    expected = -0.5 * (np.log(2 * np.pi * NOISE) + ((y - post_mean) ** 2 + post_var) / NOISE)
    np.testing.assert_allclose(lik.expected_log_lik(y, m, v), expected, rtol=1e-12)


def test_regression_targets_are_checked():
    K = np.eye(2)
    with pytest.raises(ValueError, match="NaN"):
        infer(K, np.array([0.1, np.nan]), Gaussian())
    with pytest.raises(ValueError, match="length"):
        infer(K, np.array([0.1, 0.2, 0.3]), Gaussian())


# ------------------------------------------------------------ one formula for numpy and the device
class _MyProbit(BinaryLikelihood):
    """The device example of docs/user_guide/custom_likelihood.md, as written there."""

    closed_form_on_device = True

    def _folded_log_lik(self, g):
        return rxp.log_ndtr(np, g)

    def _folded_log_z_in(self, xp, mean, var, power):
        if power != 1.0:
            raise NotImplementedError("u = 1 only")
        scale = xp.sqrt(1.0 + var)
        z = mean / scale
        log_cdf, r = rxp.normal_tail(xp, z)
        return TiltedLogZ(log_cdf, r / scale, -r * (z + r) / scale**2)


def _cavities():
    rng = np.random.default_rng(3)
    return np.resize([-1.0, 1.0], 50), rng.normal(0.0, 5.0, 50), np.exp(rng.uniform(-4.0, 4.0, 50))


def test_one_formula_is_numpys_and_the_devices(dispatch, monkeypatch):
    """The guide's example: numpy's digits are the library's probit's, and ``log_z`` on array-api-strict arrays
    answers there, by the same formula (to rounding), without a host copy."""
    xs = pytest.importorskip("array_api_strict")
    y, mean, var = _cavities()
    lik, ref = _MyProbit(), Probit().log_z(y, mean, var)
    out = lik.log_z(y, mean, var)

    def no_host(*_):
        raise AssertionError("the host's form was called for device arrays")

    monkeypatch.setattr(_MyProbit, "_log_z", no_host)
    on = lik.log_z(xs.asarray(y), xs.asarray(mean), xs.asarray(var))
    for field in ("log_z", "dlog_z", "d2log_z"):
        np.testing.assert_array_equal(getattr(out, field), getattr(ref, field))
        got = getattr(on, field)
        assert isinstance(got, type(xs.asarray(0.0)))
        np.testing.assert_allclose(np.from_dlpack(got), getattr(ref, field), rtol=1e-12, atol=0.0)


def test_a_numpy_only_likelihood_answers_device_arrays_from_the_host(dispatch, monkeypatch):
    """A likelihood with a numpy form only (the user's Gaussian) or none at that power (the example at u = 0.5):
    ``log_z`` computes on the host and puts the answer back on the arrays' library."""
    xs = pytest.importorskip("array_api_strict")
    y, mean, var = _cavities()
    for lik, power in ((Gaussian(NOISE), 1.0), (_MyProbit(), 0.5)):
        if power != 1.0:  # (no numpy rule below u = 1 either: the host's answer is the library probit's)
            monkeypatch.setattr(_MyProbit, "_folded_log_z", lambda self, m, v, u: Probit()._folded_log_z(m, v, u))
        ref = lik.log_z(y, mean, var, power)
        out = lik.log_z(xs.asarray(y), xs.asarray(mean), xs.asarray(var), power)
        for field in ("log_z", "dlog_z", "d2log_z"):
            got = getattr(out, field)
            assert isinstance(got, type(xs.asarray(0.0)))
            np.testing.assert_array_equal(np.from_dlpack(got), getattr(ref, field))
