"""A long fit's progress can be seen: ``verbose`` prints each evidence evaluation of the
hyperparameter search and ``callback`` receives it.  Ground truth: with the Gaussian likelihood
the evidence is scikit-learn's closed form, so the best reported value is the fitted
``log_marginal_likelihood_value_`` and is reached at the learned hyperparameters."""

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPClassifier, GPRegressor, Probit
from relaxep.estimators import SearchStep


def _regression(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 1))
    return X, np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)


def test_the_callback_sees_every_evaluation_and_the_best_is_the_fitted_evidence():
    X, y = _regression()
    steps: list[SearchStep] = []
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    gpr = GPRegressor(kernel, n_restarts_optimizer=1, random_state=0, callback=steps.append).fit(X, y)
    assert [s.evaluation for s in steps] == list(range(1, len(steps) + 1))
    assert {s.start for s in steps} == {0, 1}
    values = np.array([s.log_evidence for s in steps])
    np.testing.assert_array_equal([s.best for s in steps], np.maximum.accumulate(values))
    best = steps[int(np.argmax(values))]
    np.testing.assert_allclose(best.log_evidence, gpr.log_marginal_likelihood_value_, rtol=1e-10)
    np.testing.assert_allclose(best.parameters, gpr.kernel_.theta, atol=1e-10)
    closed_form = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)  # scikit-learn's, at each point
    for s in steps[:5]:
        np.testing.assert_allclose(s.log_evidence, closed_form.log_marginal_likelihood(s.parameters), rtol=1e-8)


def test_verbose_prints_one_line_per_evaluation(capsys):
    X, y = _regression()
    steps: list[SearchStep] = []
    GPClassifier(C(1.0) * RBF(1.0), Probit(), verbose=1, callback=steps.append).fit(X, (y > 0).astype(int))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[relaxep]")]
    assert len(lines) == len(steps) > 0
    assert "log evidence" in lines[-1] and f"evaluation {len(steps)}" in lines[-1]


def test_silent_by_default(capsys):
    X, y = _regression()
    GPRegressor(C(1.0) * RBF(1.0)).fit(X, y)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    "params, error",
    [({"verbose": -1}, ValueError), ({"verbose": "yes"}, TypeError), ({"callback": 3}, TypeError)],
)
def test_bad_progress_options_name_the_argument(params, error):
    X, y = _regression()
    name = next(iter(params))
    with pytest.raises(error, match=name):
        GPRegressor(**params).fit(X, y)
    with pytest.raises(error, match=name):
        GPClassifier(**params).fit(X, (y > 0).astype(int))
