"""
Robust regression: a Student-t likelihood by EP beside scikit-learn's Gaussian process
======================================================================================

Three hundred noisy observations of :math:`\\sin(2x)`, 15% of them replaced by outliers 2 to 5
units off.  scikit-learn's ``GaussianProcessRegressor`` (``C * RBF + WhiteKernel``, learned,
``normalize_y=True``, as its users fit it) explains the outliers with a larger noise and a
shorter or longer length-scale, and its mean follows them.  ``GPRegressor`` with a Student-t
likelihood (EP, its scale learned with the kernel by the EP evidence) gives them the heavy
tail and keeps the function; its band is the central 95% of the predictive of a target.
Run as a script with a path to save the figure (the README's).
"""

import sys
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPRegressor, StudentT

rng = np.random.default_rng(0)
n = 300
X = rng.uniform(-3, 3, (n, 1))
y = np.sin(2 * X[:, 0]) + rng.normal(0, 0.1, n)
outlier = rng.random(n) < 0.15
y[outlier] += rng.choice([-1, 1], outlier.sum()) * rng.uniform(2, 5, outlier.sum())
X_test = np.linspace(-3, 3, 500)[:, None]
f_test = np.sin(2 * X_test[:, 0])

with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    gauss = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), normalize_y=True).fit(X, y)
robust = GPRegressor(C(1.0) * RBF(1.0), likelihood=StudentT(), normalize_y=True).fit(X, y)

fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
for ax, name, model in (
    (axes[0], "scikit-learn GPR (Gaussian noise)", gauss),
    (axes[1], "relaxep GPRegressor(likelihood=StudentT())", robust),
):
    mean, std = model.predict(X_test, return_std=True)
    rmse = np.sqrt(np.mean((mean - f_test) ** 2))
    ax.fill_between(X_test[:, 0], mean - 1.96 * std, mean + 1.96 * std, color="C0", alpha=0.25, label="95% latent")
    ax.plot(X_test[:, 0], f_test, "k--", lw=1, label="true function")
    ax.plot(X_test[:, 0], mean, "C0", lw=2, label="posterior mean")
    ax.scatter(X[~outlier, 0], y[~outlier], s=6, c="0.4")
    ax.scatter(X[outlier, 0], y[outlier], s=14, c="C3", label="outliers (15%)")
    status = f"; EP {model.result_.status}" if model is robust else ""
    ax.set_title(f"{name}\nRMSE to the true function {rmse:.3f}{status}", fontsize=9)
    ax.set_ylim(-4, 4)  # (a few outliers lie beyond)
axes[0].legend(loc="lower left", fontsize=8)
fig.tight_layout()
if len(sys.argv) > 1:
    fig.savefig(sys.argv[1], dpi=110)
else:
    plt.show()
