"""decision_function ranks test points as predict_proba does, and predict is the argmax of both.

Ground truth: scikit-learn's own ``check_decision_proba_consistency``; the predictive's log-odds
from its closed forms (probit, noisy step) or adaptive quadrature (logistic) at the latent
moments; the normal tail by ``scipy.stats.norm.sf`` where ``1 - p`` would round to zero.  Below
the estimators, a run's result predicts through its likelihood at ``predict_latent``.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.stats import rankdata
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.utils.estimator_checks import check_decision_proba_consistency

from oracles import normal_pdf, quad
from problems import curved_problem
from relaxep import EP, GPClassifier, Logistic, NoisyProbit, NoisyStep, Probit, infer
from relaxep.multiclass import MultinomialProbit, RobustMax

BINARY = [Probit(), Logistic(), NoisyStep(0.1), NoisyProbit(0.05)]


def _kernel(learned: bool):
    return C(1.0) * RBF(1.0) if learned else C(1.0, "fixed") * RBF(1.0, "fixed")


@pytest.mark.parametrize("learned", [False, True], ids=["fixed-kernel", "learned-kernel"])
@pytest.mark.parametrize("lik", BINARY, ids=repr)
def test_scikit_learns_decision_proba_consistency_check_passes(lik, learned):
    """With the kernel fixed at C(1) * RBF(1), the latent mean (the former decision_function)
    failed this check: 9 of 20 ranks differed from predict_proba's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check_decision_proba_consistency("GPClassifier", GPClassifier(_kernel(learned), likelihood=lik))


def _blobs(n_classes, seed=0):
    centers = [(0, 0), (2.5, 2.5), (0, 3)][:n_classes]
    X, y = make_blobs(n_samples=60, centers=centers, cluster_std=1.2, random_state=seed)
    Xt, _ = make_blobs(n_samples=200, centers=centers, cluster_std=2.5, random_state=seed + 1)
    return X, y, Xt


def _expected_log_odds(lik, mean, var):
    """log P(+1) - log P(-1) of the predictive, computed independently of the library."""
    if isinstance(lik, Probit):
        z = mean / np.sqrt(1.0 + var)
        return stats.norm.logcdf(z) - stats.norm.logsf(z)
    if isinstance(lik, NoisyStep):
        p = lik.eps + (1 - 2 * lik.eps) * stats.norm.cdf(mean / np.sqrt(var))
        return np.log(p) - np.log1p(-p)
    if isinstance(lik, Logistic):
        out = []
        for m, v in zip(mean, var, strict=True):
            s = math.sqrt(v)
            lo, hi = m - 12 * s, m + 12 * s

            def side(sign, m=m, s=s, lo=lo, hi=hi):
                return quad(lambda f: normal_pdf(f, m, s) / (1 + math.exp(-sign * f)), lo, hi, epsabs=0, epsrel=1e-12)

            out.append(math.log(side(1.0)) - math.log(side(-1.0)))
        return np.array(out)
    raise AssertionError(lik)


@pytest.mark.parametrize("lik", [Probit(), NoisyStep(0.1), Logistic()], ids=repr)
def test_decision_function_is_the_predictive_log_odds(lik):
    X, y, Xt = _blobs(2)
    clf = GPClassifier(_kernel(False), likelihood=lik).fit(X, y)
    mean, var = clf.latent_mean_and_variance(Xt[:40])
    d = clf.decision_function(Xt[:40])
    assert d.shape == (40,)
    np.testing.assert_allclose(d, _expected_log_odds(lik, mean, var), rtol=1e-8, atol=1e-8)
    proba = clf.predict_proba(Xt[:40])
    np.testing.assert_allclose(np.log(proba[:, 1]) - np.log(proba[:, 0]), d, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(clf.predict_log_proba(Xt[:40]), np.log(proba), rtol=1e-12, atol=1e-14)


def test_the_label_noise_floor_bounds_the_log_odds():
    X, y, Xt = _blobs(2)
    eps = 0.1
    d = GPClassifier(_kernel(False), likelihood=NoisyStep(eps)).fit(X, y).decision_function(Xt)
    bound = math.log((1 - eps) / eps)
    assert np.all(np.abs(d) <= bound + 1e-12)
    assert np.max(np.abs(d)) > 0.9 * bound  # points far from the boundary reach near the floor


def test_the_small_probability_keeps_its_digits_in_the_tail():
    """Probit log-odds at z = 12: P(-1) = Phi(-12) ~ 1.8e-33, which 1 - P(+1) rounds to 0."""
    lik = Probit()
    mean, var = np.array([12.0 * math.sqrt(2.0), -9.0]), np.array([1.0, 0.0])
    d = lik.predict_log_odds(mean, var)
    z = mean / np.sqrt(1.0 + var)
    np.testing.assert_allclose(np.exp(-np.abs(d)), stats.norm.sf(np.abs(z)) / stats.norm.cdf(np.abs(z)), rtol=1e-10)
    assert np.sign(d).tolist() == [1.0, -1.0]


def _assert_columns_rank_as_probabilities(scores, proba):
    """scikit-learn's check, column by column: equal ranks, or (where rounding ties the
    probabilities) scores rising with the probability's rank."""
    for c in range(proba.shape[1]):
        a, b = proba[:, c].round(10), scores[:, c].round(10)
        rank_proba = rankdata(a)
        if np.array_equal(rank_proba, rankdata(b)):
            continue
        grouped = np.array([b[rank_proba == g].max() for g in np.sort(np.unique(rank_proba))])
        np.testing.assert_array_equal(np.argsort(grouped), np.arange(grouped.size))


@pytest.mark.parametrize(
    "params",
    [
        {"likelihood": MultinomialProbit()},
        {"likelihood": RobustMax(0.05)},
        {"likelihood": Probit(), "multi_class": "one_vs_rest"},
    ],
    ids=["joint-multinomial-probit", "joint-robust-max", "one-vs-rest"],
)
def test_multiclass_scores_are_log_probabilities_and_predict_is_their_argmax(params):
    X, y, Xt = _blobs(3)
    clf = GPClassifier(_kernel(False), max_sweeps=100, **params).fit(X, y)
    scores, proba = clf.decision_function(Xt), clf.predict_proba(Xt)
    assert scores.shape == proba.shape == (len(Xt), 3)
    np.testing.assert_allclose(np.exp(scores), proba, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    _assert_columns_rank_as_probabilities(scores, proba)
    pred = clf.predict(Xt)
    np.testing.assert_array_equal(pred, clf.classes_[np.argmax(scores, axis=1)])
    np.testing.assert_array_equal(pred, clf.classes_[np.argmax(proba, axis=1)])


@pytest.mark.parametrize("lik", BINARY, ids=repr)
def test_binary_predict_is_the_argmax_of_proba_and_the_sign_of_the_score(lik):
    X, y, Xt = _blobs(2)
    clf = GPClassifier(_kernel(False), likelihood=lik).fit(X, np.where(y == 1, "b", "a"))
    d, proba, pred = clf.decision_function(Xt), clf.predict_proba(Xt), clf.predict(Xt)
    np.testing.assert_array_equal(pred, clf.classes_[np.argmax(proba, axis=1)])
    np.testing.assert_array_equal(pred, clf.classes_[(d > 0).astype(int)])
    assert np.all(np.argsort(d, kind="stable") == np.argsort(proba[:, 1], kind="stable")) or np.all(
        np.diff(proba[np.argsort(d), 1]) >= 0
    )


def test_predictions_are_probabilities_and_agree_with_the_training_posterior():
    K, y = curved_problem(50, 2)
    for lik in (NoisyStep(0.1), Probit(), Logistic()):
        res = infer(K, y, lik, EP())
        mean, var = res.predict_latent(K, np.diag(K))
        np.testing.assert_allclose(mean, res.mean, atol=1e-7)
        np.testing.assert_allclose(var, np.diag(res.cov), atol=1e-7)
        p = lik.predict(mean, var)
        assert np.all((p >= 0) & (p <= 1))


def test_prediction_refuses_negative_prior_variances():
    K, y = curved_problem(20, 1)
    res = infer(K, y, Probit(), EP())
    with pytest.raises(ValueError, match="k_star_diag"):
        res.predict_latent(K[:3], np.array([1.0, -0.5, 1.0]))


def test_the_binary_heads_of_a_result_are_deprecated_and_answer_as_before():
    K, y = curved_problem(20, 1)
    res = infer(K, y, Probit(), EP())
    mean, var = res.predict_latent(K[:3], np.diag(K)[:3])
    with pytest.warns(FutureWarning, match=r"predict_proba is binary-only and is removed in 0\.4"):
        p = res.predict_proba(K[:3], np.diag(K)[:3])
    np.testing.assert_array_equal(p, np.clip(Probit().predict(mean, np.maximum(var, 1e-300)), 0.0, 1.0))
    with pytest.warns(FutureWarning, match=r"predict_log_odds is binary-only and is removed in 0\.4"):
        d = res.predict_log_odds(K[:3], np.diag(K)[:3])
    np.testing.assert_array_equal(d, Probit().predict_log_odds(mean, np.maximum(var, 1e-300)))
