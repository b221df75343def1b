"""
A hundred thousand points with two hundred inducing inputs
==========================================================

Sparse (FITC) EP on :math:`10^5` points of two interleaved moons with 10% of the labels
flipped.  The kernel and the inducing inputs (black crosses, started by k-means) are learned
on 5 000 rows by the sparse EP evidence and its gradient; the posterior is then fitted on all
rows, at :math:`O(n M^2)` a sweep and no :math:`n \\times n` array.  The colours are
:math:`P(y = 1 \\mid x)`, the black line the decision boundary; a dense fit would need an
80 GB kernel matrix.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_moons
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPClassifier, Probit

X, y = make_moons(100_000, noise=0.15, random_state=0)
flip = np.random.default_rng(0).random(y.size) < 0.1
y = np.where(flip, 1 - y, y)

start = time.perf_counter()
clf = GPClassifier(
    C(1.0) * RBF(1.0), Probit(), inducing_points=200, optimizer_subset=5_000, optimizer_maxiter=30, random_state=0
).fit(X, y)
print(f"fit: {time.perf_counter() - start:.1f} s, {clf.kernel_}, status {clf.result_.status}")

gx, gy = np.meshgrid(np.linspace(-1.6, 2.6, 200), np.linspace(-1.1, 1.6, 150))
proba = clf.predict_proba(np.column_stack([gx.ravel(), gy.ravel()]))[:, 1].reshape(gx.shape)
fig, ax = plt.subplots(figsize=(7, 4.5))
ax.contourf(gx, gy, proba, levels=np.linspace(0, 1, 11), cmap="RdBu_r", alpha=0.8)
ax.contour(gx, gy, proba, levels=[0.5], colors="k")
shown = np.random.default_rng(1).choice(y.size, 2_000, replace=False)
ax.scatter(*X[shown].T, c=y[shown], cmap="RdBu_r", s=3, edgecolors="none")
Z = clf.inducing_points_
ax.scatter(Z[:, 0], Z[:, 1], marker="x", c="k", s=25, label=f"{len(Z)} learned inducing inputs")
ax.set_title(f"Sparse EP on {y.size:,} points (2 000 shown)")
ax.legend(loc="lower left")
plt.show()
