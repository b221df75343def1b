"""
Three classes: one-vs-rest (the default) and the joint model
============================================================

The default for more than two classes (``multi_class="auto"``) is one binary EP model per class, each
learning its own kernel, joined by the multinomial probit of the binary latents; ``multi_class="joint"``
is one model of three latent functions with a shared kernel, by nested EP for the multinomial probit
(Riihimaki, Jylanki & Vehtari 2013, JMLR 14).  Each panel mixes the three class colours by the
predictive probabilities; the title gives the leave-one-out log predictive density per row (``loo()``,
higher is better).  The bottom row is the entropy of the predictive distribution over the classes,
highest where the classes meet (at most :math:`\\log 3 = 1.10` nats, one third each).
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_blobs

from relaxep import GPClassifier

X, y = make_blobs(150, centers=[(-2, 0), (2, 0), (0, 2.5)], cluster_std=1.1, random_state=0)
default = GPClassifier().fit(X, y)  # one-vs-rest
for k, binary in enumerate(default.estimators_):
    print(f"class {k} against the rest: {binary.kernel_}, status {binary.result_.status}")
joint = GPClassifier(multi_class="joint").fit(X, y)
print(f"joint: {joint.kernel_}, status {joint.result_.status}")

gx, gy = np.meshgrid(np.linspace(-6, 6, 120), np.linspace(-4, 6.5, 100))
grid = np.column_stack([gx.ravel(), gy.ravel()])
colours = np.array([[0.85, 0.3, 0.2], [0.2, 0.4, 0.85], [0.25, 0.65, 0.3]])

fig, axes = plt.subplots(2, 2, figsize=(10, 8), sharex=True, sharey=True)
for column, (name, clf) in enumerate([("one-vs-rest (default)", default), ("joint", joint)]):
    proba = clf.predict_proba(grid)
    image = (proba @ colours).reshape(*gx.shape, 3)
    entropy = -np.sum(proba * np.log(np.clip(proba, 1e-300, None)), axis=1).reshape(gx.shape)
    elpd = clf.loo().elpd_loo / len(y)
    top, bottom = axes[0, column], axes[1, column]
    top.imshow(image, origin="lower", extent=(-6, 6, -4, 6.5), aspect="auto")
    top.scatter(*X.T, c=colours[y], edgecolors="k", s=18)
    top.set_title(f"{name}: LOO {elpd:.4f} nats per row")
    pcm = bottom.contourf(gx, gy, entropy, levels=np.linspace(0, np.log(3), 12), cmap="viridis")
    bottom.scatter(*X.T, c=colours[y], edgecolors="k", s=18)
    bottom.set_title("predictive entropy [nats]")
fig.colorbar(pcm, ax=axes[1, :])
plt.show()
