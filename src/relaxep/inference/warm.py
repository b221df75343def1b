r"""Warm starts: the sites a run starts from, as a value, and the one policy that carries them between runs.

A hyperparameter search runs inference at many nearby hyperparameters; started from the last
converged sites :math:`(\tau_i, \nu_i)`, EP reaches the new fixed point in a few sweeps instead of
tens.  :class:`Sites` is that start (what :func:`~relaxep.infer` reads of its ``init``, and
:attr:`InferenceResult.sites <relaxep.InferenceResult.sites>`); :class:`WarmStarts` is the policy
every model that runs inference repeatedly owns (the dense and sparse latent models, the joint
multi-class model and the sharded FITC model of Dask):

1. start warm, from the last kept start (where one is kept);
2. where the warm run diverged, run again from zero sites (cold);
3. keep the start of a run that converged.

A run that neither diverged nor converged leaves the kept start as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from relaxep._typing import Array

__all__ = ["Sites", "WarmStarts"]


@dataclass(frozen=True)
class Sites:
    r"""Site parameters to start inference from: precisions :math:`\tau_i` and precision-means :math:`\nu_i`.

    Attributes
    ----------
    site_precision, site_mean_precision : ndarray of shape (n,)
        The natural parameters of the Gaussian sites :math:`\tilde t_i(f_i) \propto
        \exp(-\tfrac12\tau_i f_i^2 + \nu_i f_i)` (not folded; a negative :math:`\tau_i` is a site
        of a non-log-concave likelihood).
    relaxation : ndarray of shape (n,)
        Relaxed EP's :math:`b_i` at each site's last update (zeros: no relaxation, the default).
    """

    site_precision: Array
    site_mean_precision: Array
    relaxation: Array = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        tau = np.array(self.site_precision, dtype=float)
        nu = np.array(self.site_mean_precision, dtype=float)
        if tau.ndim != 1 or nu.shape != tau.shape:
            raise ValueError(
                f"site_precision and site_mean_precision must be 1-d of one length, got {tau.shape} and {nu.shape}"
            )
        b = np.zeros_like(tau) if self.relaxation is None else np.array(self.relaxation, dtype=float)
        if b.shape != tau.shape:
            raise ValueError(f"relaxation must have shape {tau.shape}, got {b.shape}")
        for name, value in (("site_precision", tau), ("site_mean_precision", nu), ("relaxation", b)):
            value.flags.writeable = False
            object.__setattr__(self, name, value)

    @property
    def n(self) -> int:
        """The number of sites."""
        return int(self.site_precision.shape[0])


def _sites_of(result: Any) -> Any:
    return result.sites


class WarmStarts:
    """Warm; cold if the warm run diverged; keep if converged (module docstring).

    Parameters
    ----------
    enabled : bool
        ``False``: every run starts cold and nothing is kept (``warm_start=False`` of the estimators).
    keep : callable
        What to keep of a converged result (default: its ``sites``, a :class:`Sites` for an
        :class:`~relaxep.InferenceResult`); the start the next run receives.
    """

    def __init__(self, enabled: bool = True, keep: Callable[[Any], Any] = _sites_of) -> None:
        self.enabled, self.keep = bool(enabled), keep
        self.start: Any = None

    def run(self, infer: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``infer(*args, init=start, **kwargs)`` under the policy; returns the result of the run that counts."""
        init = self.start if self.enabled else None
        result = infer(*args, init=init, **kwargs)
        if result.status == "diverged" and init is not None:
            result = infer(*args, init=None, **kwargs)
        if result.status == "converged" and self.enabled:
            self.start = self.keep(result)
        return result

    def reset(self, start: Any = None) -> None:
        """Forget the kept start, or replace it by ``start`` (e.g. the sites a stochastic search learned)."""
        self.start = start

    @contextmanager
    def held(self) -> Iterator[None]:
        """Runs inside leave the kept start as it was (``log_marginal_likelihood(theta)`` of a fitted model)."""
        saved = self.start
        try:
            yield
        finally:
            self.start = saved
