"""The figure of the user-guide page on priors and integration: ``python docs/images/hyper_integration_figure.py``
(writes ``hyper_integration.png`` beside this file and prints the moments it compares; about 12 minutes on two
cores, nearly all of it the brute-force grid: one EP fit per grid point).

Ripley's synth (250 training points), a probit GP classifier with ``ConstantKernel * RBF`` (two log-hyperparameters,
the amplitude and the length-scale) under the default priors, integrated by the CCD (left) and by the grid (right),
over the brute-force posterior of theta: the EP log evidence plus the log prior on a ``N x N`` grid within 4.5
standard deviations (the CCD mixture's) of the MAP, normalised there (:func:`relaxep.hyper.reference.grid_reference`).
``--n`` sets N (default 40), ``--cache FILE.npz`` keeps the grid's log posterior between runs.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPClassifier, Probit
from relaxep.datasets import load_synth
from relaxep.hyper.design import weighted_moments
from relaxep.hyper.reference import grid_reference
from relaxep.plotting import plot_hyper_samples

HERE = Path(__file__).parent


def fit(X: np.ndarray, y: np.ndarray, integrate: str) -> GPClassifier:
    return GPClassifier(C(1.0) * RBF(1.0), Probit(), integrate=integrate).fit(X, y)


def reference_posterior(clf: GPClassifier, n: int, cache: Path | None) -> object:
    """The brute-force posterior of theta on an n x n grid: the fitted model's EP log evidence (from its sites) plus
    its log prior (the one the MAP search climbed)."""
    _, sd = weighted_moments(clf.hyper_samples_.points, clf.hyper_samples_.weights)
    centre = clf.hyper_samples_.points[0]
    lower, upper = centre - 4.5 * sd, centre + 4.5 * sd
    if cache is not None and cache.exists():
        stored = np.load(cache)
        values = dict(zip(map(tuple, stored["points"]), stored["values"], strict=True))
    else:
        values = {}

    def log_posterior(theta: np.ndarray) -> float:
        key = tuple(theta)
        if key not in values:
            values[key] = float(clf.log_marginal_likelihood(theta)) + clf.log_prior(theta)
        return values[key]

    reference = grid_reference(log_posterior, lower, upper, n)
    if cache is not None:
        np.savez(cache, points=np.array(list(values)), values=np.array(list(values.values())))
    return reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=HERE / "hyper_integration.png")
    args = parser.parse_args()
    X, y = load_synth("train")
    fits = {method: fit(X, y, method) for method in ("ccd", "grid")}
    reference = reference_posterior(fits["ccd"], args.n, args.cache)
    print(f"reference ({args.n} x {args.n}): mean {np.round(reference.mean, 3)}, sd {np.round(reference.sd, 3)}")
    fig, panels = plt.subplots(1, 2, figsize=(9.5, 4.0), sharex=True, sharey=True)
    for panel, (method, clf) in zip(panels, fits.items(), strict=True):
        samples = clf.hyper_samples_
        mean, sd = weighted_moments(samples.points, samples.weights)
        print(f"{method} ({len(samples.weights)} points): mean {np.round(mean, 3)}, sd {np.round(sd, 3)}")
        plot_hyper_samples(clf, reference=reference, ax=panel)
        panel.set_title(f'integrate="{method}": {len(samples.weights)} points', fontsize=10)
    panels[1].set_ylabel("")
    X_test, y_test = load_synth("test")
    for method, clf in (("map", fit(X, y, "map")), *fits.items()):
        p = clf.predict_proba(X_test)[np.arange(len(y_test)), y_test]
        print(f"{method}: test log predictive density {np.mean(np.log(p)):.4f} a row, loo {clf.loo().elpd_loo:.3f}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    main()
