"""
Decision boundary with predictive uncertainty
=============================================

The default classifier on the paper's two-class problem with curved classes.  The colours
are :math:`P(y = +1 \\mid x)`, the black line is the decision boundary (probability 0.5), and
the dashed grey contours are the latent posterior standard deviation: small near the data,
growing away from it, where the probability falls back towards one half.
"""

import matplotlib.pyplot as plt

from relaxep import GPClassifier
from relaxep.datasets import make_synthetic
from relaxep.plotting import plot_decision_boundary

X, y, _ = make_synthetic(n_per_class=100, flip_rate=0.0, random_state=0)
clf = GPClassifier().fit(X, y)
print(clf.kernel_, "status:", clf.result_.status, "sweeps:", clf.result_.n_sweeps)

ax = plot_decision_boundary(clf, X, y)
ax.set_title("GPClassifier(): EP on the noisy probit, learned kernel")
plt.show()
