"""
Failure-aware Bayesian optimisation: an EP classifier as BoTorch's constraint
=============================================================================

Some experiments fail and return nothing: here every point inside a hard-edged region (the grey disc) crashes. Each
round fits BoTorch's ``SingleTaskGP`` to the values of the experiments that succeeded and relaxep's
:class:`~relaxep.botorch.EPClassifierModel` (``GPClassifier``'s defaults: a learned kernel, the label-noise probit
likelihood) to which experiments failed, then proposes the point of highest ``LogConstrainedExpectedImprovement``:
the expected improvement times the classifier's probability of success, exact and differentiable (:math:`P(g > 0) =
\\Phi(\\mu / \\sqrt{1 + s^2})` for a probit link). The unconstrained maximum of the objective lies inside the
failure region, so an optimiser that ignores failures keeps proposing there. The best feasible value lies on the
disc's edge, so the proposals end up straddling that edge and about half of them fail there (on this run 12 of 23
experiments, 9 of them within 0.05 of the edge): the price of a maximum on a boundary that is only learned from
failures. Drawn: the objective, the failure region, the points tried (crosses failed), and the classifier's final
probability of success at 0.5 (white). Needs the ``botorch`` extra (``pip install "relaxep[botorch]"``); without it
the example says so and draws the classifier alone.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np

from relaxep import GPClassifier


def objective(x):
    """A smooth objective on the unit square, highest at (0.62, 0.55), inside the failure disc."""
    return np.exp(-6.0 * ((x[:, 0] - 0.62) ** 2 + (x[:, 1] - 0.55) ** 2)) + 0.4 * x[:, 0] * x[:, 1]


def fails(x):
    return (x[:, 0] - 0.6) ** 2 + (x[:, 1] - 0.55) ** 2 < 0.2**2


rng = np.random.default_rng(1)
X = rng.random((8, 2))  # eight random experiments to start
try:
    import torch
    from botorch.acquisition.analytic import LogConstrainedExpectedImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import ModelList, SingleTaskGP
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    from relaxep.botorch import EPClassifierModel
except ImportError as exc:  # the docs built without the extra
    print(f"BoTorch is not installed ({exc}): pip install 'relaxep[botorch]' to run the optimisation")
    torch = None

if torch is not None:
    torch.manual_seed(0)
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.double)
    for _ in range(15):
        ok = ~fails(X)
        tX = torch.as_tensor(X)
        y = torch.as_tensor(objective(X[ok]))[:, None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (BoTorch's advice on scaling: the square is already the unit one)
            gp = SingleTaskGP(tX[torch.as_tensor(ok)], y)
            fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
            feasibility = EPClassifierModel(tX, torch.as_tensor(ok, dtype=torch.double)[:, None])
            acq = LogConstrainedExpectedImprovement(
                ModelList(gp, feasibility), y.max(), objective_index=0, constraints={1: (0.0, None)}
            )
            x_next, _ = optimize_acqf(acq, bounds, q=1, num_restarts=5, raw_samples=128)
        X = np.vstack([X, x_next.numpy()])
    ok = ~fails(X)
    best = X[ok][np.argmax(objective(X[ok]))]
    print(f"{len(X)} experiments, {int((~ok).sum())} failed; best success {objective(best[None])[0]:.3f} at {best}")

ok = ~fails(X)
classifier = GPClassifier(random_state=0).fit(X, ok.astype(int))
grid = np.linspace(0, 1, 101)
G = np.stack(np.meshgrid(grid, grid), axis=-1).reshape(-1, 2)
fig, ax = plt.subplots(figsize=(5.2, 4.6))
ax.contourf(grid, grid, objective(G).reshape(101, 101), levels=20, cmap="viridis", alpha=0.8)
ax.add_patch(plt.Circle((0.6, 0.55), 0.2, color="0.3", alpha=0.35, label="fails"))
ax.contour(grid, grid, classifier.predict_proba(G)[:, 1].reshape(101, 101), levels=[0.5], colors="white")
ax.scatter(*X[ok].T, c="white", edgecolor="k", s=30, label="succeeded")
ax.scatter(*X[~ok].T, c="red", marker="x", s=40, label="failed")
ax.set(xlabel="$x_1$", ylabel="$x_2$", title="EP classifier as BoTorch's constraint", aspect="equal")
ax.legend(loc="lower left", fontsize=8)
plt.show()
