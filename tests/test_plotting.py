"""The figures draw what the estimators hold: the decision boundary where the classifier predicts 0.5; an integrated
fit's design points with areas in proportion to their weights, its Gaussian's ellipses at the weights' Mahalanobis
radii (numpy's weighted covariance), and a brute-force reference's contours where a Gaussian's mass lies."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure
from sklearn.gaussian_process.kernels import RBF, ConstantKernel

from relaxep import GPClassifier, Probit
from relaxep.datasets import make_synthetic
from relaxep.hyper.reference import grid_reference
from relaxep.plotting import plot_decision_boundary, plot_hyper_samples


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


# ------------------------------------------------------------------ the design over the hyperparameters


@pytest.fixture(scope="module")
def integrated():
    X, y, _ = make_synthetic(40, 0.0, random_state=1)
    kernel = ConstantKernel(1.0) * RBF(1.0)
    return GPClassifier(kernel, likelihood=Probit(), integrate="ccd").fit(X, y)


def _markers(ax):
    return next(c for c in ax.collections if len(c.get_offsets()) > 1 and len(c.get_sizes()) > 1)


def test_design_points_are_drawn_with_area_in_the_order_of_their_weights(integrated):
    samples = integrated.hyper_samples_
    ax = Figure().subplots()
    assert plot_hyper_samples(integrated, ax=ax) is ax
    markers = _markers(ax)
    np.testing.assert_allclose(markers.get_offsets(), samples.points)  # all K points, in the design's coordinates
    sizes = markers.get_sizes()
    assert len(sizes) == len(samples.weights) == 9  # the CCD in two dimensions
    np.testing.assert_allclose(sizes / sizes.max(), samples.weights / samples.weights.max())
    map_line = next(line for line in ax.get_lines() if line.get_label() == "MAP")
    np.testing.assert_allclose(np.ravel(map_line.get_xydata()), integrated.kernel_.theta)  # the fitted MAP
    assert ax.get_xlabel() == "log k1__constant_value" and ax.get_ylabel() == "log k2__length_scale"
    # the ellipses: Mahalanobis radius 1 and 2 under the weights' covariance, by numpy's weighted covariance
    cov = np.cov(samples.points.T, aweights=samples.weights, bias=True)
    mean = np.average(samples.points, axis=0, weights=samples.weights)
    curves = [line.get_xydata() for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(curves) == 2
    for radius, curve in zip((1.0, 2.0), curves, strict=True):
        r2 = np.einsum("ij,jk,ik->i", curve - mean, np.linalg.inv(cov), curve - mean)
        np.testing.assert_allclose(np.sqrt(r2), radius, rtol=1e-9)


@pytest.mark.parametrize("dims", [(0, 1), ("length_scale_b", "amplitude")], ids=["xy", "yx-by-name"])
def test_reference_contours_are_a_gaussians_ellipses(dims):
    """A Gaussian's grid reference: the contour holding mass 1 - exp(-r^2/2) is the ellipse of radius r."""
    from relaxep.estimators._mixture import HyperSamples

    mean, cov = np.array([0.5, -1.0, 0.0]), np.array([[0.4, 0.15, 0.0], [0.15, 0.2, 0.05], [0.0, 0.05, 1.0]])
    precision = np.linalg.inv(cov)
    reference = grid_reference(
        lambda t: -0.5 * np.einsum("ij,jk,ik->i", t - mean, precision, t - mean),
        mean - 4.5 * np.sqrt(np.diag(cov)), mean + 4.5 * np.sqrt(np.diag(cov)), (60, 70, 50), batched=True,
    )  # fmt: skip
    names = ("amplitude", "length_scale_a", "length_scale_b")
    samples = HyperSamples(mean[None, :] + 0.1 * np.eye(3)[:2], np.array([0.6, 0.4]), names, np.zeros(2))
    ax = Figure().subplots()
    plot_hyper_samples(samples, dims, reference=reference, ax=ax)
    i, j = [names.index(d) if isinstance(d, str) else d for d in dims]
    sub = np.linalg.inv(cov[np.ix_([i, j], [i, j])])
    lines = next(c for c in ax.collections if type(c).__name__ == "QuadContourSet" and not c.filled)
    assert len(lines.levels) == 2
    vertices = [p.vertices for p in lines.get_paths()]
    for radius, v in zip((2.0, 1.0), vertices, strict=True):  # levels ascend: the outer ellipse first
        d = v - mean[[i, j]]
        np.testing.assert_allclose(np.sqrt(np.einsum("ij,jk,ik->i", d, sub, d)), radius, atol=0.05 * radius)


def test_hyper_samples_bad_input_is_named(integrated, fitted):
    with pytest.raises(ValueError, match="hyper_samples_"):
        plot_hyper_samples(fitted[0], ax=Figure().subplots())
    with pytest.raises(ValueError, match="dims"):
        plot_hyper_samples(integrated, (0, 0), ax=Figure().subplots())
    with pytest.raises(ValueError, match="dims"):
        plot_hyper_samples(integrated, ("nope", 1), ax=Figure().subplots())
