"""Every fitted model meets one protocol (``relaxep/estimators/_model.py``): ``predict_latent(X, full_cov=False)``,
``log_evidence``, ``loo_terms()`` and ``integrate``; the estimator asks it and never switches on its class.  The
claims: the two paths of ``predict_latent`` agree (the blocks' variances are the full covariance's diagonal); the
estimator's ``loo()`` is the model's terms in the units of ``y``; one-vs-rest ends its fit in the common epilogue,
with a ``result_`` whose evidence is its binary models' mean (scikit-learn's convention)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPClassifier, GPHeteroscedasticRegressor, GPRegressor, StudentT
from relaxep.estimators._model import LooTerms


def _data(n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2))
    f = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1]
    return X, f, (f > 0).astype(int), np.digitize(f, [-0.5, 0.5])


X, F, LABELS, CLASSES = _data()
Y = 3.0 + 2.0 * F + 0.2 * np.random.default_rng(1).standard_normal(F.size)
X_TEST = _data(7, seed=5)[0]
KERNEL = C(1.0) * RBF(1.0)

FITS = {
    "dense binary": lambda: GPClassifier(KERNEL, optimizer=None).fit(X, LABELS),
    "sparse binary": lambda: GPClassifier(KERNEL, optimizer=None, inducing_points=X[::5]).fit(X, LABELS),
    "exact": lambda: GPRegressor(KERNEL + WhiteKernel(0.1), optimizer=None, normalize_y=True).fit(X, Y),
    "student-t": lambda: GPRegressor(KERNEL, likelihood=StudentT(), optimizer=None, normalize_y=True).fit(X, Y),
    "integrated": lambda: GPRegressor(KERNEL + WhiteKernel(0.1), normalize_y=True, integrate="ccd").fit(X, Y),
    "two-latent": lambda: GPHeteroscedasticRegressor(optimizer=None).fit(X, Y),
    "joint": lambda: GPClassifier(KERNEL, optimizer=None, multi_class="joint").fit(X, CLASSES),
    "one-vs-rest": lambda: GPClassifier(KERNEL, optimizer=None).fit(X, CLASSES),
}
ONE_LATENT = ("dense binary", "sparse binary", "exact", "student-t", "integrated", "two-latent")


@pytest.fixture(scope="module")
def fitted() -> dict:
    return {}


def _fit(fitted: dict, case: str):
    if case not in fitted:
        fitted[case] = FITS[case]()
    return fitted[case]


@pytest.mark.parametrize("case", ONE_LATENT)
def test_predict_latent_variances_are_the_full_covariances_diagonal(fitted, case):
    """``predict_latent(X)`` (in blocks of rows) and ``predict_latent(X, full_cov=True)`` (one covariance) are two
    computations: the means agree and the variances are the covariance's diagonal, to 1e-10."""
    model = _fit(fitted, case).model_
    mean, var = (np.asarray(a, dtype=float) for a in model.predict_latent(X_TEST))
    mean_full, cov = (np.asarray(a, dtype=float) for a in model.predict_latent(X_TEST, full_cov=True))
    np.testing.assert_allclose(mean_full.reshape(mean.shape), mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.diag(cov), var.reshape(-1), rtol=0, atol=1e-10)
    assert np.all(np.linalg.eigvalsh(0.5 * (cov + cov.T)) > -1e-10)


@pytest.mark.parametrize("case", ["joint", "one-vs-rest"])
def test_multiclass_models_refuse_a_covariance_across_rows(fitted, case):
    model = _fit(fitted, case).model_
    mean, _ = model.predict_latent(X_TEST)
    assert mean.shape[:2] == (X_TEST.shape[0], 3)
    with pytest.raises(ValueError, match="full_cov"):
        model.predict_latent(X_TEST, full_cov=True)


@pytest.mark.parametrize("case", list(FITS))
def test_loo_is_the_models_terms_in_the_units_of_y(fitted, case):
    """``loo()`` is the model's :class:`LooTerms`, densities less the log of ``normalize_y``'s scale, probabilities
    of labels as they are; ``loo_predict()``'s latent is the terms' in ``y``'s units."""
    est = _fit(fitted, case)
    terms = est.model_.loo_terms()
    assert isinstance(terms, LooTerms) and terms.loo.shape == (X.shape[0],)
    result = est.loo()
    regression = case in ("exact", "student-t", "integrated", "two-latent")
    assert result.is_density is terms.is_density is regression
    shift = np.log(np.std(Y)) if regression else 0.0
    np.testing.assert_allclose(result.pointwise, terms.loo - shift, rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.in_sample, terms.in_sample - shift, rtol=0, atol=1e-12)
    pred = est.loo_predict()
    if regression:
        np.testing.assert_allclose(pred.mean, np.mean(Y) + np.std(Y) * terms.latent[0], rtol=0, atol=1e-10)
        np.testing.assert_allclose(pred.var, np.var(Y) * terms.latent[1], rtol=0, atol=1e-10)
    else:  # the leave-one-out probabilities of the labels, whose logs are the pointwise terms
        labels = np.searchsorted(est.classes_, LABELS if len(est.classes_) == 2 else CLASSES)
        observed = pred.proba[np.arange(X.shape[0]), labels]
        # (the joint model's leave-one-out density is the inner EP's log Z, its probabilities the predictive's
        # quadrature: two approximations, 0.4% apart here; the others compute one integral two ways)
        rtol = 1e-2 if case == "joint" else 1e-9
        np.testing.assert_allclose(np.log(observed), result.pointwise, rtol=rtol, atol=1e-9)


def test_one_vs_rest_goes_through_the_common_epilogue(fitted):
    """One-vs-rest has a ``result_`` as every fit: its log evidence the binary models' mean (scikit-learn's
    convention), its status the worst of theirs; refitted on two classes, its ``estimators_`` are gone."""
    est = FITS["one-vs-rest"]()
    values = [e.log_marginal_likelihood_value_ for e in est.estimators_]
    assert est.result_.log_evidence == pytest.approx(np.mean(values), abs=1e-12)
    assert est.log_marginal_likelihood_value_ == pytest.approx(np.mean(values), abs=1e-12)
    assert est.result_.status == "converged" and est.result_.converged
    assert est.result_.n_sweeps == max(e.result_.n_sweeps for e in est.estimators_)
    assert [r.log_evidence for r in est.result_.results] == [e.result_.log_evidence for e in est.estimators_]
    assert 0.01 <= est.model_.link_noise_ <= 10.0
    est.fit(X, LABELS)
    assert not hasattr(est, "estimators_") and est.result_.log_evidence == est.log_marginal_likelihood_value_
