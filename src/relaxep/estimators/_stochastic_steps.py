r"""The stochastic search's schedule and steps (:mod:`relaxep.estimators._stochastic`, one loop for every array
library): the options, Adam (Kingma & Ba 2015, "Adam: a method for stochastic optimization", ICLR) in any array
namespace, the learning rate's annealing and what a search returns."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep.inference.tied_site import TiedSites
from relaxep.likelihoods import Likelihood

__all__ = ["Adam", "Learned", "StochasticOptions", "annealed"]


@dataclass(frozen=True)
class StochasticOptions:
    r"""The schedule: a fixed budget of steps, no tuning (defaults measured at ``n = 10^5``, ``M = 200``:
    benchmarks/results/sparse.md).

    ``batch_size`` rows a step; ``max_steps`` steps; Adam's ``learning_rate`` for the
    log-hyperparameters (the inducing inputs': times each feature's standard deviation), constant,
    then down linearly to a tenth over the last ``anneal`` fraction of the steps; ``damping`` the
    site step :math:`\epsilon` once ``warmup`` steps at the initial hyperparameters (site step
    :math:`1/t`, an average) have brought the sites near their fixed point; ``report_every``
    steps between reports of the evidence estimate (its exponential average over about 50 steps).
    """

    batch_size: int = 1000
    max_steps: int = 1000
    learning_rate: float = 0.02
    damping: float = 0.1
    warmup: int = 20
    anneal: float = 0.5
    report_every: int = 50

    @classmethod
    def for_steps(cls, steps: int | None) -> StochasticOptions:
        """The defaults with ``optimizer_maxiter`` steps (``None``: the default number)."""
        return cls() if steps is None else cls(max_steps=int(steps))


class Adam:
    """Adam ascending an objective (Kingma & Ba 2015), per-coordinate step sizes ``rates``, in the array namespace
    ``xp`` of ``rates`` (numpy's by default)."""

    def __init__(
        self, rates: Array, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8, xp: ModuleType = np
    ) -> None:
        self.rates, self.beta1, self.beta2, self.eps, self.xp = rates, beta1, beta2, eps, xp
        self.m = xp.zeros_like(rates)
        self.v = xp.zeros_like(rates)
        self.t = 0

    def step(self, x: Array, grad: Array, factor: float = 1.0) -> Array:
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad**2
        m_hat = self.m / (1 - self.beta1**self.t)
        v_hat = self.v / (1 - self.beta2**self.t)
        return x + factor * self.rates * m_hat / (self.xp.sqrt(v_hat) + self.eps)


@dataclass
class Learned:
    """What :func:`learn_stochastic` returns."""

    kernel: Kernel
    likelihood: Likelihood
    Z: Array
    sites: TiedSites
    steps: int
    trace: Array  # the per-point evidence estimate every report_every steps


def annealed(step: int, options: StochasticOptions) -> float:
    """The learning rate's factor: 1, then down linearly to 0.1 over the last ``anneal`` fraction of the steps."""
    start = (1.0 - options.anneal) * options.max_steps
    if step <= start:
        return 1.0
    return 1.0 - 0.9 * (step - start) / max(options.max_steps - start, 1.0)
