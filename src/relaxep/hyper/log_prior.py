r"""The log prior of a search's vector of log-hyperparameters: the estimator's ``prior`` resolved, entry by entry.

.. math:: \log p(\theta) = \sum_j \log p_j(\theta_j),

one :class:`~relaxep.hyper.priors.HyperPrior` per entry (the elements of an ARD ``length_scale`` each their own).
An estimator's ``prior`` is

- ``"auto"``: the defaults below, scaled to the data (:class:`DataScales`);
- ``None``: :class:`~relaxep.hyper.priors.LogUniform` everywhere (type-II maximum likelihood);
- a :class:`~relaxep.hyper.priors.HyperPrior`: that prior on every learned hyperparameter;
- a dict from names to priors (``None``: log-uniform), over the defaults.  A key names a hyperparameter by its
  full name (``"k2__length_scale"``, ``"likelihood__scale"``, in a model of two kernels ``"kernel1__..."``) or by
  its last part (``"length_scale"``: every length-scale); a key that names no learned hyperparameter is refused.

The defaults (``docs/decisions.md``, "Default hyperpriors"): on a ``length_scale``, GPstuff's half-Student-t
(:math:`\nu = 4`) in units of the feature's standard deviation (GPstuff's demos standardise the inputs; here the
prior is scaled instead) times :math:`\sqrt d`, as distances between rows grow with the dimension (Hvarfner,
Hellsten & Nardi 2024): each feature's sd for an ARD kernel, :math:`\sqrt{\sum_j s_j^2}` for an isotropic one; on an
amplitude (``constant_value``, ``noise_level``: variances) a half-Student-t (:math:`\nu = 4`) on its square root,
in units of the latent's scale (1 for a classifier's latent, the targets' root mean square for a regressor's); on a
likelihood's scale parameters (its ``output_scale_hyperparameters``) the same, in the targets' units; log-uniform on
everything else (a likelihood's degrees of freedom, cut-points, a constant mean, periodicities).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from relaxep._typing import Array
from relaxep._xp import namespace, to_numpy
from relaxep.hyper.priors import HalfStudentT, HyperPrior, LogUniform

__all__ = ["DataScales", "Entry", "LogPrior", "check_prior", "input_scales", "resolve_prior"]

#: the degrees of freedom of the default half-Student-t priors (GPstuff's ``prior_t`` default)
DEFAULT_DF = 4.0


@dataclass(frozen=True)
class DataScales:
    """What the default priors are scaled by: ``inputs``, each feature's standard deviation (``None``: inputs that
    are not numeric columns, whose length-scales get no default), and ``outputs``, the scale of each kernel's latent
    function (the first also that of the likelihood's scale parameters)."""

    inputs: Array | None = None
    outputs: tuple[float, ...] = (1.0,)


@dataclass(frozen=True)
class Entry:
    """One entry of a search's ``theta``: its hyperparameter's full ``name``, the kernel ``block`` it belongs to
    (``-1``: the likelihood's or the mean's), its ``element`` and the hyperparameter's ``size`` (an ARD length-scale
    has one entry per feature), and for a likelihood's scale parameter the power of the targets' scale it carries
    (``output_power``: 2 for a variance, 1 for a standard deviation, 0 for none)."""

    name: str
    block: int = 0
    element: int = 0
    size: int = 1
    output_power: int = 0

    @property
    def short(self) -> str:
        return self.name.rsplit("__", 1)[-1]

    def matches(self, key: str) -> bool:
        return self.name == key or self.name.endswith("__" + key)


def input_scales(X: Any) -> Array | None:
    """Each feature's standard deviation of the rows ``X`` (numpy, or another array library's: one reduction where
    they live, read once), or ``None`` where ``X`` is not a 2-d array of numbers (a kernel on strings or structures:
    its length-scales get no default).  (Dask's estimators read their shards' moments instead.)"""
    if X is None or isinstance(X, (list, tuple)) or not hasattr(X, "shape") or len(X.shape) != 2:
        return None
    dtype = getattr(X, "dtype", None)
    if dtype is not None and getattr(dtype, "kind", "f") not in "fiub":
        return None
    if isinstance(X, np.ndarray):
        return np.std(X, axis=0)
    xp = namespace(X).xp
    return np.asarray(to_numpy(xp.std(X, axis=0)), dtype=float)


def check_prior(prior: Any) -> None:
    """``prior``: ``"auto"``, ``None``, a :class:`HyperPrior` or a dict of them (``TypeError`` naming ``prior``)."""
    if prior is None or isinstance(prior, HyperPrior) or (isinstance(prior, str) and prior == "auto"):
        return
    if isinstance(prior, Mapping):
        for key, value in prior.items():
            if not isinstance(key, str) or not (value is None or isinstance(value, HyperPrior)):
                raise TypeError(
                    "prior: a dict's keys must be hyperparameter names and its values relaxep.hyper priors "
                    f"(HalfStudentT, LogNormal, Gamma, InverseGamma, LogUniform) or None, got {key!r}: {value!r}"
                )
        return
    raise TypeError(
        "prior must be 'auto', None (log-uniform: type-II maximum likelihood), a relaxep.hyper prior (e.g. "
        f"HalfStudentT(4, 1.0)) or a dict from hyperparameter names to priors, got {prior!r}"
    )


def default_prior(entry: Entry, scales: DataScales) -> HyperPrior:
    """The default prior of one entry (module docstring)."""
    short = entry.short
    if short == "length_scale" and scales.inputs is not None and entry.block >= 0:
        inputs = np.asarray(scales.inputs, dtype=float)  # (the typical distance between rows grows as sqrt(d))
        scale = (
            inputs[entry.element] * np.sqrt(inputs.size) if entry.size == inputs.size else np.sqrt(np.sum(inputs**2))
        )
        return HalfStudentT(DEFAULT_DF, float(scale)) if np.isfinite(scale) and scale > 0 else LogUniform()
    if short in ("constant_value", "noise_level") and entry.block >= 0:
        return HalfStudentT(DEFAULT_DF, _output(scales, entry.block), sqrt=True)
    if entry.output_power:
        return HalfStudentT(DEFAULT_DF, _output(scales, 0), sqrt=entry.output_power == 2)
    return LogUniform()


def _output(scales: DataScales, block: int) -> float:
    outputs = scales.outputs
    value = float(outputs[block] if block < len(outputs) else outputs[0])
    return value if np.isfinite(value) and value > 0 else 1.0


class LogPrior:
    """:math:`\\log p(\\theta)` and its gradient over a search's ``theta`` (module docstring): ``priors[j]`` on
    entry ``j``.  Called as ``log_prior(theta)`` for ``(value, gradient)``."""

    def __init__(self, entries: Sequence[Entry], priors: Sequence[HyperPrior]) -> None:
        self.entries, self.priors = tuple(entries), tuple(priors)

    @property
    def flat(self) -> bool:
        """Whether every entry's prior is log-uniform (the search is then type-II maximum likelihood)."""
        return all(isinstance(p, LogUniform) for p in self.priors)

    @property
    def proper(self) -> bool:
        return all(p.proper for p in self.priors)

    def __call__(self, theta: Array) -> tuple[float, Array]:
        theta = np.asarray(theta, dtype=float)
        grad = np.zeros_like(theta)
        value = 0.0
        for j, prior in enumerate(self.priors):
            v, g = prior.log_density(theta[j])
            value += float(v)
            grad[j] = float(g)
        return value, grad

    def gradient_in(self, theta: Array, xp: Any) -> Array:
        """The gradient at ``theta``, an array of the library ``xp`` (on its device: no read)."""
        return xp.stack([prior.log_density(theta[j], xp)[1] for j, prior in enumerate(self.priors)])

    def part(self, start: int, stop: int) -> LogPrior:
        """The prior of the entries ``start:stop`` (a block of the search's vector)."""
        return LogPrior(self.entries[start:stop], self.priors[start:stop])

    def __repr__(self) -> str:
        return "LogPrior(" + ", ".join(f"{e.name}={p!r}" for e, p in zip(self.entries, self.priors, strict=True)) + ")"


def resolve_prior(prior: Any, entries: Sequence[Entry], scales: DataScales) -> LogPrior:
    """The :class:`LogPrior` of ``entries`` for an estimator's ``prior`` (module docstring)."""
    check_prior(prior)
    if prior is None:
        return LogPrior(entries, [LogUniform()] * len(entries))
    if isinstance(prior, HyperPrior):
        return LogPrior(entries, [prior] * len(entries))
    priors = [default_prior(entry, scales) for entry in entries]
    if isinstance(prior, Mapping):
        for key, value in prior.items():
            hits = [j for j, entry in enumerate(entries) if entry.matches(key)]
            if not hits:
                names = sorted({entry.name for entry in entries})
                raise ValueError(f"prior: {key!r} names no learned hyperparameter; the learned ones are {names}")
            for j in hits:
                priors[j] = LogUniform() if value is None else value
    return LogPrior(entries, priors)
