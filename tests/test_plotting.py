"""The decision-boundary figure draws what the classifier predicts."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure
from sklearn.gaussian_process.kernels import RBF

from relaxep import GPClassifier, Probit
from relaxep.datasets import make_synthetic
from relaxep.plotting import plot_decision_boundary


@pytest.fixture(scope="module")
def fitted():
    X, y, _ = make_synthetic(30, 0.0, random_state=0)
    return GPClassifier(RBF(0.7), likelihood=Probit(), optimizer=None).fit(X, y), X, y


def test_the_half_contour_is_where_the_classifier_is_undecided(fitted):
    clf, X, y = fitted
    ax = Figure().subplots()
    out = plot_decision_boundary(clf, X, y, ax=ax, resolution=60)
    assert out is ax
    boundary = ax.collections[1] if hasattr(ax.collections[1], "get_paths") else None
    vertices = np.concatenate([p.vertices for p in ax.collections[1].get_paths() if len(p.vertices)])
    assert boundary is not None and len(vertices) > 10
    proba = clf.predict_proba(vertices)[:, 1]
    np.testing.assert_allclose(proba, 0.5, atol=0.05)  # contour of a 60 x 60 grid
    assert len(ax.get_legend().get_texts()) == 2


def test_bad_input_is_named(fitted):
    clf, X, _ = fitted
    with pytest.raises(ValueError, match="shape"):
        plot_decision_boundary(clf, np.c_[X, X[:, :1]], ax=Figure().subplots())
    with pytest.raises(ValueError, match="resolution"):
        plot_decision_boundary(clf, X, ax=Figure().subplots(), resolution=1)
