"""A second two-latent model, written as a user would on the base classes: one likelihood (a Gaussian whose log
standard deviation is the second latent, its tilted rule by Gauss-Hermite quadrature, independent of the
heteroscedastic likelihood's adaptive rule) and a thin estimator, checked against answers it does not compute."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.base import RegressorMixin, clone
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.utils.validation import validate_data

from relaxep import GPHeteroscedasticRegressor
from relaxep.estimators._base import _GPEstimatorBase
from relaxep.estimators._hyper import ConstantMean
from relaxep.estimators._search import ROBUST
from relaxep.estimators._two_latent_model import _TwoLatentModel
from relaxep.likelihoods import Heteroscedastic, TwoLatentLikelihood
from relaxep.likelihoods.two_latent import TiltedPair

_X, _W = np.polynomial.hermite_e.hermegauss(120)
_LOG_W = np.log(_W / np.sqrt(2 * np.pi))


class LogScaleGaussian(TwoLatentLikelihood):
    r""":math:`p(y | f, g) = N(y | f, e^{2g})`: :math:`g` the log noise sd.  Given :math:`g` the integral over
    :math:`f` is Gaussian (:math:`s = e^{2g}/\alpha`, :math:`V = v_f + s`); the one over :math:`g` is a 120-node
    Gauss-Hermite rule on its cavity."""

    def tilted(self, y, mean_f, var_f, mean_g, var_g, power=1.0):
        rows = np.broadcast_arrays(y, mean_f, var_f, mean_g, var_g)
        y, mf, vf, mg, vg = (np.asarray(a, dtype=float)[..., None] for a in rows)
        g = mg + np.sqrt(vg) * _X
        s = np.exp(2 * g) / power
        V = vf + s
        log_w = (0.5 * (1 - power) * np.log(2 * np.pi * power * s) - 0.5 * np.log(power)
                 - 0.5 * np.log(2 * np.pi * V) - 0.5 * (y - mf) ** 2 / V)  # fmt: skip
        log_z = logsumexp(_LOG_W + log_w, axis=-1)
        p = np.exp(_LOG_W + log_w - log_z[..., None])
        cond_mean = mf + vf * (y - mf) / V
        m_f, m_g = np.sum(p * cond_mean, -1), np.sum(p * g, -1)
        v_f = np.sum(p * (vf * s / V + (cond_mean - m_f[..., None]) ** 2), -1)
        return TiltedPair(log_z, m_f, v_f, m_g, np.sum(p * (g - m_g[..., None]) ** 2, -1))

    def _log_lik2(self, y, f, g):
        return -0.5 * np.log(2 * np.pi) - g - 0.5 * (y - f) ** 2 * np.exp(-2 * g)


class GPLogScaleRegressor(RegressorMixin, _GPEstimatorBase):
    """GP regression with a GP on the log noise sd: the estimator base, the two-latent model, the likelihood."""

    search_policy = ROBUST

    def __init__(self, kernel=None, scale_kernel=None, *, scale_mean=-1.0, scale_mean_bounds=(-8.0, 3.0),
                 optimizer="fmin_l_bfgs_b", n_restarts_optimizer=0, max_sweeps=300, tol=1e-6,
                 random_state=None):  # fmt: skip
        self.kernel, self.scale_kernel, self.scale_mean, self.scale_mean_bounds = (kernel, scale_kernel, scale_mean,
                                                                                   scale_mean_bounds)  # fmt: skip
        self.optimizer, self.n_restarts_optimizer, self.random_state = optimizer, n_restarts_optimizer, random_state
        self.max_sweeps, self.tol = max_sweeps, tol

    def fit(self, X, y):
        self._check_parameters()
        X, y = validate_data(self, X, y, y_numeric=True)
        model = _TwoLatentModel(LogScaleGaussian(), X, y, None, "auto", self.max_sweeps, self.tol)
        kernels = (clone(self.kernel or C(1.0) * RBF(1.0)), clone(self.scale_kernel or C(0.25) * RBF(1.0)))
        search = self._search() if self.optimizer is not None else None
        return self._finish(model, model.fit(kernels, ConstantMean(self.scale_mean, self.scale_mean_bounds), search,
                                             self._rng()))  # fmt: skip

    def _check_theta(self, theta):
        assert theta.shape == (self.kernel_.theta.size + self.model_.kernels_[1].theta.size + 1,)

    def predict(self, X):
        return self.model_.latent("f", validate_data(self, X, reset=False))[0]


def hetero_set(n, seed):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-3.0, 3.0, size=(n, 1)), axis=0)
    return X, np.sin(X[:, 0]) + 0.08 * np.exp(0.6 * X[:, 0]) * rng.standard_normal(n)


@pytest.mark.parametrize("power", [1.0, 0.7])
@pytest.mark.parametrize("case", [(0.5, 0.0, 1.0, -1.0, 0.5), (2.0, 0.3, 0.2, 0.0, 0.2), (-0.4, 0.1, 3.0, -2.0, 1.0)])
def test_the_tilted_moments_are_the_heteroscedastic_rules_reparametrised(case, power):
    """With :math:`g' = 2g` the likelihood is :class:`Heteroscedastic`'s, whose adaptive rule agrees with dblquad
    to 1e-8: the normaliser and :math:`f`'s moments equal, :math:`g`'s halved and quartered."""
    y, mf, vf, mg, vg = case
    got = LogScaleGaussian().tilted(y, mf, vf, mg, vg, power)
    want = Heteroscedastic().tilted(y, mf, vf, 2 * mg, 4 * vg, power)
    np.testing.assert_allclose([got.log_z, got.mean_f, got.var_f, 2 * got.mean_g, 4 * got.var_g],
                               [want.log_z, want.mean_f, want.var_f, want.mean_g, want.var_g],
                               rtol=1e-8, atol=1e-10)  # fmt: skip
    np.testing.assert_allclose(LogScaleGaussian().log_lik(y, [[mf, mg]]), Heteroscedastic().log_lik(y, mf, 2 * mg))


def test_a_constant_scale_is_gaussian_process_regression():
    """A scale kernel of amplitude 1e-10 and a fixed mean: scikit-learn's GPR with noise variance e^{2c}."""
    X, y = hetero_set(30, 0)
    kernel, c = C(0.8, "fixed") * RBF(0.9, "fixed"), np.log(0.2)
    est = GPLogScaleRegressor(kernel, C(1e-10, "fixed") * RBF(1.0, "fixed"), scale_mean=c, scale_mean_bounds=None,
                              optimizer=None, tol=1e-9).fit(X, y)  # fmt: skip
    gpr = GaussianProcessRegressor(kernel, alpha=np.exp(2 * c) + 1e-8, optimizer=None).fit(X, y)  # (+ the jitter)
    Xt = np.linspace(-3.5, 3.5, 9)[:, None]
    np.testing.assert_allclose(est.predict(Xt), gpr.predict(Xt), atol=1e-7)
    assert est.log_marginal_likelihood_value_ == pytest.approx(gpr.log_marginal_likelihood_value_, abs=1e-7)


def test_the_fit_is_the_heteroscedastic_regressors_reparametrised():
    """EP's fixed point is invariant under :math:`g' = 2g`: the same evidence and posteriors as
    :class:`~relaxep.GPHeteroscedasticRegressor` with the scale kernel times 4 and the mean times 2; the learned fit
    climbs the evidence, and its gradient (through the base's ``log_marginal_likelihood``) is central differences'."""
    X, y = hetero_set(30, 1)
    est = GPLogScaleRegressor(C(1.0) * RBF(1.0), C(0.25) * RBF(0.7), scale_mean=-1.5, optimizer=None).fit(X, y)
    het = GPHeteroscedasticRegressor(C(1.0) * RBF(1.0), C(1.0) * RBF(0.7), noise_mean=-3.0, optimizer=None,
                                     normalize_y=False, tol=1e-6, max_sweeps=300).fit(X, y)  # fmt: skip
    assert est.result_.converged
    assert est.log_marginal_likelihood_value_ == pytest.approx(het.log_marginal_likelihood_value_, abs=1e-6)
    mean_g, var_g = est.model_.latent("g", X)
    want_g, want_var = het.model_.latent("g", X)
    np.testing.assert_allclose([2 * mean_g, 4 * var_g], [want_g, want_var], rtol=1e-5, atol=1e-6)
    learned = GPLogScaleRegressor(C(1.0) * RBF(1.0), C(0.25) * RBF(0.7), scale_mean=-1.5).fit(X, y)
    assert learned.log_marginal_likelihood_value_ > est.log_marginal_likelihood_value_ + 1.0
    theta = np.concatenate([learned.kernel_.theta, learned.model_.kernels_[1].theta, [learned.model_.offset]])
    value, grad = learned.log_marginal_likelihood(theta, eval_gradient=True)
    assert value == pytest.approx(learned.log_marginal_likelihood_value_, abs=1e-6)
    h = 1e-4
    fd = [(learned.log_marginal_likelihood(theta + h * e) - learned.log_marginal_likelihood(theta - h * e)) / (2 * h)
          for e in np.eye(theta.size)]  # fmt: skip
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-5)
