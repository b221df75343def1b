r"""The plan of a fit: which search learns the hyperparameters (``optimizer="auto"`` resolved once) and, for a
sparse fit, where the inducing inputs start and what is learned on which rows.

Each estimator builds and validates its plan in ``fit``, from its parameters; the models below
read the plan, never the estimator.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.utils.validation import check_random_state

from relaxep._typing import Array
from relaxep._xp import namespace, to_numpy
from relaxep.estimators._inducing import check_inducing_points, check_sparse_options, initial_inducing_points

__all__ = [
    "SPARSE_FTOL",
    "SPARSE_MAXFUN",
    "SPARSE_MAXITER",
    "STOCHASTIC_FROM",
    "SparseFit",
    "dense_or",
    "resolve_optimizer",
]

#: ``optimizer="auto"`` learns a sparse model stochastically from this many training rows; below it, L-BFGS-B
#: on the full EP evidence for at most :data:`SPARSE_MAXITER` iterations.  The stochastic search's cost is
#: its fixed budget of steps, the same at every ``n`` (6-7 s at M = 100 from 2000 to 25 000 rows, 2 cores);
#: L-BFGS-B's evaluations cost ``O(n M^2)`` each and, where the inducing inputs are learned, their number has
#: no bound: under the label-noise default the evidence keeps rising by about 0.01 nats an evaluation as
#: the amplitude climbs to its bound (15 000 rows: 776 s).  Measured (benchmarks/results/
#: defaults_at_scale.md): at 5000 rows the stochastic search reached the test NLL of 50 L-BFGS-B iterations
#: (0.1579 against 0.1587) in the same time, at an amplitude of 13.8 sd against 116.
STOCHASTIC_FROM = 5_000

#: ``optimizer="auto"``'s iteration cap for L-BFGS-B on a sparse model (below :data:`STOCHASTIC_FROM` rows,
#: or on ``optimizer_subset`` rows) where ``optimizer_maxiter`` is ``None``: the sparse benchmark's setting
#: (benchmarks/results/sparse.md), a few seconds at 5000 rows and M = 100
SPARSE_MAXITER = 50
#: and its cap on evidence evaluations: on the label-noise default's flat evidence 50 iterations took 1631
#: evaluations (300 rows, M = 20: 14 s) as each line search crawled along the amplitude's bound
SPARSE_MAXFUN = 150
#: and its stop on the evidence's ridge: L-BFGS-B ends where an iteration raises the evidence by less than this
#: fraction of it (scipy's ``ftol``; 6e-4 nats at 3000 rows).  Along the ridge the path multiplies any difference
#: of rounding by about 2.5 an evaluation (numpy against numpy on inputs moved by 1e-15: 0.14 apart in Z after 50
#: iterations; one BLAS thread against two: 0.05; array-api-strict against numpy: 0.08), so the budget's end point
#: was not a function of the data.  Stopped here, numpy and array-api-strict agree to 2e-10 on five draws of 3000
#: rows (M = 30), 1-3x sooner, the evidence 0.01-0.47 nats lower, the test NLL the same or lower (to 1.5e-4)
SPARSE_FTOL = 1e-6

_NAMES = ("auto", "fmin_l_bfgs_b", "stochastic")


def resolve_optimizer(optimizer: Any, *, sparse: bool, n: int, subset: int | None, n_restarts: int) -> Any:
    """``optimizer`` with ``"auto"`` resolved: ``"stochastic"`` for sparse fits on at least
    :data:`STOCHASTIC_FROM` rows with neither ``optimizer_subset`` nor restarts, else ``"fmin_l_bfgs_b"``;
    ``None`` and callables unchanged.  Refuses unknown names and ``"stochastic"`` where it cannot run."""
    if optimizer is None or callable(optimizer):
        return optimizer
    if not isinstance(optimizer, str) or optimizer not in _NAMES:
        raise ValueError(
            f"unknown optimizer {optimizer!r}: use 'auto', 'fmin_l_bfgs_b', 'stochastic', a callable or None"
        )
    if optimizer == "stochastic":
        if not sparse:
            raise ValueError(
                "optimizer='stochastic' learns sparse models only: pass inducing_points= or another optimizer"
            )
        if n_restarts:
            raise ValueError("n_restarts_optimizer: optimizer='stochastic' has no restarts; set it to 0")
        return "stochastic"
    if optimizer == "auto" and sparse and subset is None and not n_restarts and n >= STOCHASTIC_FROM:
        return "stochastic"
    return "fmin_l_bfgs_b"


def dense_or(method: Any, optimizer: Any, n_restarts: int) -> Any:
    """``method`` (a sparse plan's), else ``optimizer`` resolved for a dense fit (``None`` stays ``None``)."""
    if method is not None:
        return method
    return resolve_optimizer(optimizer, sparse=False, n=0, subset=None, n_restarts=n_restarts)


def check_maxiter(maxiter: Any) -> int | None:
    """``optimizer_maxiter``: ``None`` or an integer >= 1."""
    if maxiter is not None and (isinstance(maxiter, bool) or not isinstance(maxiter, numbers.Integral) or maxiter < 1):
        raise ValueError(f"optimizer_maxiter must be None or an integer >= 1, got {maxiter!r}")
    return None if maxiter is None else int(maxiter)


@dataclass(frozen=True)
class SparseFit:
    """How a sparse (FITC) model is fitted, decided once by the estimator.

    Attributes
    ----------
    Z : ndarray of shape (M, d)
        The initial inducing inputs (given, or placed by ``inducing_init``).
    learn_theta : bool
        Learn the kernel's and the likelihood's hyperparameters.
    learn_z : bool
        Learn the inducing inputs with them.
    method : {"fmin_l_bfgs_b", "stochastic"}, callable or None
        The search (``optimizer`` with ``"auto"`` resolved); ``None``: nothing is learned.
    subset : int or None
        Learn on this many random rows (L-BFGS-B or a callable), then fit on all.
    maxiter : int or None
        L-BFGS-B's iterations or the stochastic search's steps (``None``: the default).
    rng : RandomState
        The fit's private generator (placement, subset, minibatches, restarts).
    n_jobs : int or None
        Threads for the row blocks (:mod:`relaxep._threads`; ``None``: the machine).
    maxfun : int or None
        L-BFGS-B's evidence evaluations (``None``: scipy's default); set with ``"auto"``'s iteration cap,
        since on a flat evidence each iteration's line search can take dozens.
    ftol : float or None
        L-BFGS-B's relative stop on the evidence (``None``: scipy's default); :data:`SPARSE_FTOL` with ``"auto"``'s
        iteration cap.
    """

    Z: Array
    learn_theta: bool
    learn_z: bool
    method: Any
    subset: int | None
    maxiter: int | None
    rng: np.random.RandomState
    n_jobs: int | None = None
    maxfun: int | None = None
    ftol: float | None = None

    @property
    def learns(self) -> bool:
        return self.method is not None and (self.learn_theta or self.learn_z)

    @property
    def stochastic(self) -> bool:
        return self.learns and isinstance(self.method, str) and self.method == "stochastic"

    @classmethod
    def plan(
        cls,
        X: Array,
        *,
        inducing_points: Any,
        inducing_init: str,
        learn_inducing_points: Any,
        optimizer: Any,
        optimizer_subset: Any,
        optimizer_maxiter: Any,
        n_restarts: int,
        random_state: Any,
        n_learned: int,
        n_jobs: int | None = None,
    ) -> SparseFit:
        """The plan from an estimator's parameters (each validated and named, ``n_jobs`` by the estimator),
        ``n_learned`` hyperparameters."""
        spec = check_inducing_points(inducing_points, X.shape[1])
        check_sparse_options(learn_inducing_points, optimizer_subset)
        method = resolve_optimizer(optimizer, sparse=True, n=X.shape[0], subset=optimizer_subset, n_restarts=n_restarts)
        # a private generator: random_state=None must not draw from numpy's global one
        try:
            rng = np.random.RandomState() if random_state is None else check_random_state(random_state)
        except ValueError as exc:
            raise ValueError(f"random_state: {exc}") from None
        on_host = namespace(X).on_host
        Z = initial_inducing_points(X if on_host else to_numpy(X), spec, inducing_init, rng)  # placed on the host
        learn_z = bool(learn_inducing_points) and method is not None
        subset = None if optimizer_subset is None else int(optimizer_subset)
        learn_theta = method is not None and n_learned > 0
        if not on_host and (learn_theta or learn_z) and subset is not None and method != "stochastic":
            raise TypeError(
                f"optimizer_subset={subset!r}: L-BFGS-B on a subset of rows needs numpy arrays; on other array "
                "libraries learn on all rows (optimizer_subset=None) or pass optimizer='stochastic'"
            )
        maxiter, maxfun, ftol = check_maxiter(optimizer_maxiter), None, None
        if maxiter is None and optimizer == "auto" and method == "fmin_l_bfgs_b":
            maxiter, maxfun, ftol = SPARSE_MAXITER, SPARSE_MAXFUN, SPARSE_FTOL
        return cls(Z, learn_theta, learn_z, method, subset, maxiter, rng, n_jobs, maxfun, ftol)
