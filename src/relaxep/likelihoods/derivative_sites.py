r"""A likelihood of values and of derivatives: the user's likelihood on the rows that observe :math:`f`, and on the
rows that observe a partial derivative :math:`f' = \partial f/\partial x_d` either its sign (a monotonicity
constraint, Riihimäki & Vehtari 2010) or its value (a measured slope).

Site :math:`i`'s factor is

.. math::
    p(y_i | f_i) \ \text{(a value row)},\qquad
    \Phi\!\left(\frac{s_i f'_i}{\nu}\right) \ \text{(a sign row, } s_i = \pm 1\text{)},\qquad
    N(v_i | f'_i, \sigma_i^2) \ \text{(an observed derivative)}.

The probit's steepness :math:`\nu` is :data:`STEEPNESS` by default, GPstuff's ``gp_monotonic`` choice: the factor is
then a step to within :math:`10^{-6}` of the derivative's scale, a hard constraint that EP's Gaussian sites soften
only as much as the posterior needs.  Its tilted integral is the probit's at :math:`g = f'/\nu`:
:math:`\log Z = \log\Phi(s\mu/\sqrt{\nu^2 + \sigma^2})` and the derivatives in :math:`\mu` scaled by
:math:`1/\nu`, :math:`1/\nu^2`.  An observed derivative's is closed form at every power :math:`u`:
:math:`\log Z_u = \tfrac{1-u}{2}\log(2\pi\sigma_i^2) - \tfrac12\log u + \log N(v_i | \mu, s^2 + \sigma_i^2/u)`.

Targets are rows: the user's likelihood's target (``width`` columns), then ``kind`` (0: a value, +1 or -1: a sign,
2: an observed derivative), the derivative's value and its noise variance (:func:`derivative_rows`).  Everything
else (the predictive, the hyperparameters) is the user's likelihood's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from relaxep._typing import Array
from relaxep.likelihoods.base import Likelihood, TiltedLogZ
from relaxep.likelihoods.binary import Probit

__all__ = ["OBSERVED", "STEEPNESS", "DerivativeSites", "derivative_rows"]

#: the sign constraint's probit steepness :math:`\nu` (GPstuff's ``gp_monotonic``)
STEEPNESS = 1e-6
#: the ``kind`` of an observed derivative's row
OBSERVED = 2

_PROBIT = Probit()


def derivative_rows(targets: ArrayLike, kinds: ArrayLike, values: ArrayLike, noise: ArrayLike) -> Array:
    """Rows for :class:`DerivativeSites`: the value rows' ``targets`` (kind 0; a vector or rows of ``width``
    columns) followed by ``len(kinds)`` derivative rows (a sign +1/-1 or :data:`OBSERVED`, their values, noise)."""
    t = np.asarray(targets, dtype=float)
    t = t[:, None] if t.ndim == 1 else t
    kinds = np.asarray(kinds, dtype=float).reshape(-1)
    m = kinds.shape[0]
    filler = np.broadcast_to(t[:1], (m, t.shape[1])) if t.shape[0] else np.zeros((m, t.shape[1]))
    top = np.column_stack([t, np.zeros((t.shape[0], 3))])
    bottom = np.column_stack([filler, kinds, np.broadcast_to(values, (m,)), np.broadcast_to(noise, (m,))])
    return np.vstack([top, bottom])


class DerivativeSites(Likelihood):
    """The user's ``likelihood`` on value rows, and sign constraints or observed values on derivative rows (module
    docstring).

    Parameters
    ----------
    likelihood : Likelihood
        The values' likelihood.
    width : int
        Columns of its targets (1: a scalar per row; 2: rows such as ``[count, log exposure]``).
    steepness : float
        The sign constraint's probit steepness :math:`\\nu`.
    """

    def __init__(self, likelihood: Likelihood, width: int = 1, steepness: float = STEEPNESS) -> None:
        if not isinstance(likelihood, Likelihood):
            raise TypeError(f"likelihood must be a relaxep Likelihood, got {likelihood!r}")
        if not (np.isfinite(steepness) and steepness > 0.0):
            raise ValueError(f"steepness must be a positive number, got {steepness!r}")
        self.likelihood, self.width, self.steepness = likelihood, int(width), float(steepness)
        for flag in ("kind", "is_density", "class_targets", "has_cumulants", "heavy_tailed", "latent_is_link"):
            setattr(self, flag, getattr(likelihood, flag))
        self.target_width = self.width + 3

    def __getattr__(self, name: str) -> Any:
        """The values' likelihood's attribute (its predictive, its hyperparameters' values)."""
        if name == "likelihood" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.likelihood, name)

    # ------------------------------------------------------------ hyperparameters: the values' likelihood's
    @property
    def hyperparameters(self) -> list:
        return self.likelihood.hyperparameters

    @property
    def n_dims(self) -> int:
        return self.likelihood.n_dims

    @property
    def theta(self) -> Array:
        return self.likelihood.theta

    @property
    def bounds(self) -> Array:
        return self.likelihood.bounds

    def clone_with_theta(self, theta: ArrayLike) -> DerivativeSites:
        return DerivativeSites(self.likelihood.clone_with_theta(theta), self.width, self.steepness)

    # ------------------------------------------------------------ rows
    def _split(self, y: Array) -> tuple[Array, Array, Array, Array]:
        """``(the values' targets, kind, value, noise)`` of the rows ``y``."""
        w = self.width
        targets = y[..., 0] if w == 1 else y[..., :w]
        return targets, y[..., w], y[..., w + 1], y[..., w + 2]

    def check_targets(self, y: ArrayLike, n: int | None = None, both_classes: bool = True) -> Array:
        arr = np.asarray(y, dtype=float)
        if arr.ndim != 2 or arr.shape[1] != self.target_width:
            raise ValueError(f"y must be rows of {self.target_width} columns (derivative_rows), got {arr.shape}")
        if n is not None and arr.shape[0] != n:
            raise ValueError(f"y has {arr.shape[0]} rows, expected {n}")
        targets, kind, value, noise = self._split(arr)
        values = kind == 0
        extra = {"both_classes": both_classes} if self.likelihood.class_targets else {}
        self.likelihood.check_targets(targets[values], None, **extra)
        if not np.all(np.isin(kind, (0.0, 1.0, -1.0, float(OBSERVED)))):
            raise ValueError("a derivative row's kind must be +1 or -1 (a sign) or 2 (an observed value)")
        observed = kind == OBSERVED
        if not (np.all(np.isfinite(value[observed])) and np.all(noise[observed] > 0.0)):
            raise ValueError("an observed derivative needs a finite value and a positive noise variance")
        return arr

    # ------------------------------------------------------------ the three kinds of rows
    def _parts(self, y: Array) -> tuple[Array, Array, Array, Array, Array, Array]:
        targets, kind, value, noise = self._split(y)
        return kind == 0, np.isin(kind, (1.0, -1.0)), kind == OBSERVED, targets, kind, value, noise  # type: ignore[return-value]

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        mean, var = np.broadcast_arrays(mean, var)
        values, signs, observed, targets, kind, value, noise = self._parts(y)
        out = [np.zeros(mean.shape) for _ in range(3)]
        if np.any(values):
            lz = self.likelihood.log_z(targets[values], mean[values], var[values], power)
            for o, a in zip(out, (lz.log_z, lz.dlog_z, lz.d2log_z), strict=True):
                o[values] = a
        if np.any(signs):
            nu = self.steepness
            lz = _PROBIT.log_z(kind[signs], mean[signs] / nu, var[signs] / nu**2, power)
            out[0][signs], out[1][signs], out[2][signs] = lz.log_z, lz.dlog_z / nu, lz.d2log_z / nu**2
        if np.any(observed):
            v, s2 = noise[observed], var[observed] + noise[observed] / power
            r = value[observed] - mean[observed]
            out[0][observed] = (
                0.5 * (1.0 - power) * np.log(2.0 * np.pi * v) - 0.5 * np.log(power)
                - 0.5 * np.log(2.0 * np.pi * s2) - 0.5 * r**2 / s2
            )  # fmt: skip
            out[1][observed], out[2][observed] = r / s2, -1.0 / s2
        return TiltedLogZ(*out)

    def _log_lik(self, y: Array, f: Array) -> Array:
        values, signs, observed, targets, kind, value, noise = self._parts(y)
        out = np.zeros(np.broadcast_shapes(f.shape, kind.shape))
        f = np.broadcast_to(f, out.shape)
        out[..., values] = self.likelihood.log_lik(targets[values], f[..., values])
        out[..., signs] = _PROBIT.log_lik(kind[signs], f[..., signs] / self.steepness)
        r = value[observed] - f[..., observed]
        out[..., observed] = -0.5 * np.log(2.0 * np.pi * noise[observed]) - 0.5 * r**2 / noise[observed]
        return out

    def _tilted_gaussian(self, value: Array, noise: Array, mean: Array, var: Array) -> tuple[Array, Array]:
        m = mean + var * (value - mean) / (var + noise)
        return m, var - var**2 / (var + noise)

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        mean, var = np.broadcast_arrays(mean, var)
        values, signs, observed, targets, kind, value, noise = self._parts(y)
        out = np.zeros(mean.shape)
        if np.any(values):
            out[values] = self.likelihood.expected_log_lik(targets[values], mean[values], var[values])
        nu = self.steepness
        if np.any(signs):
            out[signs] = _PROBIT.expected_log_lik(kind[signs], mean[signs] / nu, var[signs] / nu**2)
        if np.any(observed):
            v = noise[observed]
            m, s2 = self._tilted_gaussian(value[observed], v, mean[observed], var[observed])
            out[observed] = -0.5 * np.log(2.0 * np.pi * v) - 0.5 * ((value[observed] - m) ** 2 + s2) / v
        return out

    def _tilted_cumulants(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        mean, var = np.broadcast_arrays(mean, var)
        values, signs, observed, targets, kind, value, noise = self._parts(y)
        out = [np.zeros(mean.shape) for _ in range(4)]
        if np.any(values):
            parts = self.likelihood.tilted_cumulants(targets[values], mean[values], var[values])
            for o, a in zip(out, parts, strict=True):
                o[values] = a
        nu = self.steepness
        if np.any(signs):
            parts = _PROBIT.tilted_cumulants(kind[signs], mean[signs] / nu, var[signs] / nu**2)
            for power, (o, a) in enumerate(zip(out, parts, strict=True), start=1):
                o[signs] = a * nu**power
        if np.any(observed):
            out[0][observed], out[1][observed] = self._tilted_gaussian(
                value[observed], noise[observed], mean[observed], var[observed]
            )
        return out[0], out[1], out[2], out[3]

    def dlog_z_dtheta(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
        y = np.asarray(y, dtype=float)
        mean, var = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(var, dtype=float))
        values, _, _, targets, _, _, _ = self._parts(y)
        out = np.zeros((*mean.shape, self.n_dims))
        if np.any(values) and self.n_dims:
            out[values] = self.likelihood.dlog_z_dtheta(targets[values], mean[values], var[values])
        return out
