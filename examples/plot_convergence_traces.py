"""
Convergence: where EP oscillates, and what converges instead
============================================================

Problem 4 of the robustness suite (``relaxep reproduce robustness``): 50 one-dimensional
inputs, a fifth of the labels flipped, the paper's noise-free label-noise step on a kernel of
amplitude 100.  EP oscillates: its change statistic :math:`R` (the largest change of a posterior
marginal, in its own units) never settles, and damping does not end it here.
:class:`~relaxep.ConvergentEP` descends on EP's free energy, so it cannot oscillate, and reaches
the fixed point EP was looking for; ``rule="auto"`` tries EP first and hands over.
"""

import matplotlib.pyplot as plt
import numpy as np

from relaxep import EP, ConvergentEP, infer
from relaxep.datasets import make_problem, problem_grid

K, y, _, _, _, likelihood = make_problem(problem_grid(30, max_n=400)[4])

fig, ax = plt.subplots(figsize=(6.5, 4))
for label, rule, kwargs in [
    ("EP (parallel)", EP(), dict(schedule="parallel")),
    ("EP (sequential)", EP(), {}),
    ("EP damped 0.5 (sequential)", EP(damping=0.5), {}),
    ("ConvergentEP", ConvergentEP(), {}),
    ("auto", "auto", {}),
]:
    res = infer(K, y, likelihood, rule, max_sweeps=100, **kwargs)
    ax.semilogy(np.arange(1, res.n_sweeps + 1), res.trace, label=f"{label}: {res.status}, {res.n_sweeps} sweeps")
ax.axhline(1e-3, color="grey", ls=":", label="tolerance")
ax.set(xlabel="sweep (ConvergentEP: outer iteration)", ylabel="R", title=f"n = {len(y)}, {likelihood!r}")
ax.legend(fontsize=8)
plt.show()
