"""
Three classes in one model
==========================

One joint GP model of three latent functions with a shared kernel, by nested EP for the
multinomial probit (Riihimaki, Jylanki & Vehtari 2013, JMLR 14), the default for more than two
classes.  Left: the three class colours mixed by the predictive probabilities.
Right: the entropy of the predictive distribution over the classes, highest where the classes
meet (at most :math:`\\log 3 = 1.10` nats, one third each); the learned length scale is long, so
the classes' regions extend far beyond the data.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_blobs

from relaxep import GPClassifier

X, y = make_blobs(150, centers=[(-2, 0), (2, 0), (0, 2.5)], cluster_std=1.1, random_state=0)
clf = GPClassifier().fit(X, y)
print(clf.kernel_, "status:", clf.result_.status)

gx, gy = np.meshgrid(np.linspace(-6, 6, 120), np.linspace(-4, 6.5, 100))
grid = np.column_stack([gx.ravel(), gy.ravel()])
proba = clf.predict_proba(grid)
colours = np.array([[0.85, 0.3, 0.2], [0.2, 0.4, 0.85], [0.25, 0.65, 0.3]])
image = (proba @ colours).reshape(*gx.shape, 3)
entropy = -np.sum(proba * np.log(np.clip(proba, 1e-300, None)), axis=1).reshape(gx.shape)

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
left.imshow(image, origin="lower", extent=(-6, 6, -4, 6.5), aspect="auto")
left.scatter(*X.T, c=colours[y], edgecolors="k", s=18)
left.set_title("predictive probabilities, mixed by class colour")
pcm = right.contourf(gx, gy, entropy, levels=12, cmap="viridis")
right.scatter(*X.T, c=colours[y], edgecolors="k", s=18)
right.set_title("predictive entropy [nats]")
fig.colorbar(pcm, ax=right)
plt.show()
