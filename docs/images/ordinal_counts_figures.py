"""The figures of the user-guide pages on ordinal labels and counts: ``python docs/images/ordinal_counts_figures.py``
(writes ``ordinal_cut_points.png`` and ``count_rate.png`` beside this file)."""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPOrdinalClassifier, GPRegressor, NegativeBinomial, Poisson
from relaxep.experiments.studies.counts import lgcp, log_rate

HERE = Path(__file__).parent


def ordinal_figure() -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(150, 1))
    f = np.sin(1.3 * X[:, 0]) + 0.3 * X[:, 0]
    y = np.searchsorted([-0.6, 0.5], f + 0.3 * rng.normal(size=150))
    model = GPOrdinalClassifier(random_state=0).fit(X, y)
    grid = np.linspace(-3, 3, 300)[:, None]
    mean, var = model.latent_mean_and_variance(grid)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    top.plot(grid[:, 0], mean, color="k", label="latent mean")
    top.fill_between(grid[:, 0], mean - 2 * np.sqrt(var), mean + 2 * np.sqrt(var), color="0.8", label="±2 sd")
    for b in model.likelihood_.cut_points:
        top.axhline(b, color="C3", ls="--", lw=1)
    top.set_ylabel("latent f (dashed: learned cut-points)")
    top.legend(loc="upper left")
    p = model.predict_proba(grid)
    for k in range(p.shape[1]):
        bottom.plot(grid[:, 0], p[:, k], label=f"P(y = {k})")
    bottom.scatter(X[:, 0], y / (p.shape[1] - 1), c="k", s=6, label="data (class / (K - 1))")
    bottom.set_xlabel("x")
    bottom.set_ylabel("class probability")
    bottom.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(HERE / "ordinal_cut_points.png", dpi=110)


def count_figure() -> None:
    X, y, width = lgcp(100, 0)
    grid = np.linspace(0, 10, 300)[:, None]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.bar(X[:, 0], y / width, width=width, color="0.85", label="counts / bin width")
    ax.plot(grid[:, 0], np.exp(log_rate(grid[:, 0])), color="k", lw=1, label="true rate")
    for name, lik, colour in (("Poisson EP", Poisson(), "C0"), ("negative binomial EP", NegativeBinomial(), "C1")):
        model = GPRegressor(C(1.0) * RBF(1.0) + C(1.0), likelihood=lik).fit(X, y, exposure=np.full(y.size, width))
        mean, var = model.latent_mean_and_variance(grid)
        ax.plot(grid[:, 0], model.predict(grid), color=colour, label=f"{name}: predictive mean rate")
        ax.fill_between(grid[:, 0], np.exp(mean - 2 * np.sqrt(var)), np.exp(mean + 2 * np.sqrt(var)), color=colour,
                        alpha=0.15)  # fmt: skip
    ax.set_xlabel("x")
    ax.set_ylabel("rate")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "count_rate.png", dpi=110)


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    ordinal_figure()
    count_figure()
