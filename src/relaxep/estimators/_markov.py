r"""The estimators' ``representation``: dense, or Markov (state space) for one input with a kernel that has a
state-space form (:mod:`relaxep.posterior.markov`), chosen once in ``fit``; and the prior factory of a Markov fit.

``representation="auto"`` goes Markov where it is exact and faster: one input column, numpy arrays, no inducing
points, a kernel :func:`~relaxep.posterior.state_space.is_markov` (Matérn 1/2, 3/2, 5/2, constants, sums and
products, a ``WhiteKernel``; the periodic kernel is approximate and left to ``"markov"``), an EP fit (scikit-learn's
exact Gaussian regression keeps its dense closed form) and at least :data:`MARKOV_FROM` rows.
"""

from __future__ import annotations

from typing import Any

from sklearn.gaussian_process.kernels import ExpSineSquared, Kernel

from relaxep._typing import Array
from relaxep._xp import namespace
from relaxep.estimators._models import _DensePriors
from relaxep.posterior.markov import MarkovPrior
from relaxep.posterior.state_space import is_markov, state_space

__all__ = ["MARKOV_FROM", "REPRESENTATIONS", "_MarkovPriors", "resolve_representation"]

#: ``representation="auto"`` goes Markov from this many rows: EP on a binary series (probit, Matérn 3/2, the
#: parallel schedule, 7 sweeps) took 0.14 s dense and 0.05 s Markov at 200 rows, 0.008 s and 0.03 s at 100
#: (2 cores, numpy's threads; the Markov pass's cost is its ~3 sqrt(n) loop iterations at this size)
MARKOV_FROM = 200

REPRESENTATIONS = ("auto", "dense", "markov")


def _periodic(kernel: Kernel) -> bool:
    """Whether ``kernel`` holds an ``ExpSineSquared`` (its state-space form is a truncation)."""
    if isinstance(kernel, ExpSineSquared):
        return True
    return any(_periodic(getattr(kernel, k)) for k in ("k1", "k2") if hasattr(kernel, k))


def resolve_representation(representation: Any, kernel: Kernel, X: Any, *, sparse: bool, exact: bool = False) -> str:
    """``"dense"``, ``"sparse"`` or ``"markov"`` for a fit of ``kernel`` on the rows ``X`` (module docstring);
    ``sparse``: ``inducing_points`` given; ``exact``: scikit-learn's closed-form Gaussian regression.  Refuses an
    unknown name, and ``"markov"`` where it cannot run, naming ``representation``."""
    if not isinstance(representation, str) or representation not in REPRESENTATIONS:
        raise ValueError(f"representation must be one of {REPRESENTATIONS}, got {representation!r}")
    if sparse:
        if representation == "markov":
            raise ValueError("representation='markov' takes no inducing_points: leave them None")
        return "sparse"
    if representation == "dense":
        return "dense"
    d = X.shape[1] if getattr(X, "ndim", 2) == 2 else 1
    if representation == "markov":
        if d != 1:
            raise ValueError(f"representation='markov' takes one input column (time), X has {d}")
        if not namespace(X).on_host:
            raise TypeError("representation='markov' runs on numpy arrays: pass X as numpy")
        try:
            state_space(kernel)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"representation='markov': {exc}") from None
        return "markov"
    n = X.shape[0]
    markov = (
        d == 1 and n >= MARKOV_FROM and not exact and namespace(X).on_host and kernel is not None and is_markov(kernel)
        and not _periodic(kernel)
    )  # fmt: skip
    return "markov" if markov else "dense"


class _MarkovPriors(_DensePriors):
    """Markov priors :math:`k(X, X) + \\text{noise}\\,I` of a state-space kernel (:class:`MarkovPrior`); the gradient is
    the dense factory's call, :meth:`MarkovPosterior.prior_evidence_gradient` (by the complex step)."""

    def build(self, kernel: Kernel, X: Any, Z: Array | None, eval_gradient: bool) -> MarkovPrior:  # type: ignore[override]
        return MarkovPrior.from_kernel(kernel, X, self.noise)
