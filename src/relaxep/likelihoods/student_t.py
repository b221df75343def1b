r"""The Student-t likelihood for robust regression, integrated around both modes of its tilted.

.. math::
    p(y | f) = \frac{\Gamma(\frac{\nu+1}{2})}{\Gamma(\frac{\nu}{2})\sqrt{\nu\pi}\,\sigma}
    \Big(1 + \frac{(y - f)^2}{\nu\sigma^2}\Big)^{-\frac{\nu+1}{2}}

is not log-concave: an outlier (a cavity far from :math:`y`) makes the tilted
:math:`p(y|f)^u N(f | \mu, s^2)` bimodal, and EP's site precisions negative (Jylanki, Vanhatalo &
Vehtari 2011, JMLR 12, "Robust Gaussian process regression with a Student-t likelihood").  No closed
form exists; the integrals here are by the two-centre rule of :mod:`relaxep.likelihoods._panels`,
with its centres at the tilted's modes.  With :math:`x = f - y`, :math:`r = \mu - y`,
:math:`a = \nu\sigma^2` and :math:`p = u(\nu + 1)`, the stationary points of the log tilted solve the cubic

.. math:: (x - r)(a + x^2) + s^2 p\, x = 0,

whose roots all lie between :math:`0` and :math:`r`: a mode near the likelihood's peak, a mode near
the cavity and the antimode between them (or one mode).  The cubic's critical points split
:math:`[0, r]` into brackets on which it is monotone, and a safeguarded Newton iteration finds each
root.  The two modes are the centres; with one mode, the second centre is the likelihood's peak
:math:`x = 0` (if the mode is on the cavity's side) or the cubic's critical point on the cavity's
side, a shoulder of the tilted (if the mode is on the likelihood's side).  Each centre's width is
:math:`1/\sqrt{\max(|h''|, 1/s^2)}`, :math:`h` the log tilted, and the panels meet where both maps
space their nodes equally, :math:`w_1^2 + g_1^2 = w_2^2 + g_2^2`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import ClassVar, NamedTuple

import numpy as np
from scipy import stats
from scipy.special import digamma, gammaln, stdtr

from relaxep._typing import Array
from relaxep._xp import adaptive_or_fixed
from relaxep.likelihoods._panels import node_levels, panel_counts, split_gap, two_centre_rule
from relaxep.likelihoods.base import Likelihood, TiltedLogZ, check_hyperparameter
from relaxep.likelihoods.robust_on import student_t_log_z_on

__all__ = ["StudentT"]

_TAIL = 40.0  # the rule covers the tilted down to exp(-40) of its density at the centres
_NEWTON_ITERATIONS = 100
#: sites integrated together: a block's (sites x nodes) arrays stay in the cache (10^5 sites in blocks of 1024
#: integrated 2.4x faster than in one, the same digits: the panels sized for the whole group, ``panel_counts``)
_BLOCK = 1024


def _cubic_modes(r: Array, s2: Array, a: float, p: float) -> tuple[Array, Array, Array]:
    r"""The two centres, as offsets from :math:`y` in the frame where :math:`r \ge 0`.

    Works in units of :math:`L = \max(r, s, \sqrt a)`.  Returns ``c1`` (likelihood side), ``c2``
    (cavity side) and a mask: ``c2`` is a root (so its offset from :math:`\mu` can be written
    without cancellation).
    """
    scale = np.maximum(np.maximum(r, np.sqrt(s2)), np.sqrt(a))
    rt, at = r / scale, a / scale**2
    ct = at + p * s2 / scale**2

    def cubic(x: Array) -> Array:
        return ((x - rt) * x + ct) * x - rt * at

    disc = rt * rt - 3.0 * ct
    has_crit = disc > 0.0
    root_disc = np.sqrt(np.maximum(disc, 0.0))
    x2 = np.where(has_crit, (rt + root_disc) / 3.0, rt)
    x1 = np.where(has_crit, ct / np.where(has_crit, rt + root_disc, 1.0), 0.0)
    g1, g2 = cubic(x1), cubic(x2)
    three = has_crit & (g1 > 0.0) & (g2 < 0.0)
    low_root = has_crit & ~three & (g2 >= 0.0)  # the only root is in [0, x1]
    high_root = has_crit & ~three & ~low_root  # the only root is in [x2, r]
    # the modes' brackets, on which the cubic is monotone (slot 0: likelihood side, 1: cavity side);
    # with no critical points the one root is in [0, r]
    lo = np.stack([np.zeros_like(rt), x2], axis=-1)
    hi = np.stack([np.where(has_crit, x1, rt), rt], axis=-1)
    x = np.clip(np.stack([rt * at / ct, rt], axis=-1), lo, hi)
    wmin = np.minimum(np.sqrt(at), np.sqrt(s2) / scale)[..., None]
    rt2, ct2, at2 = rt[..., None], ct[..., None], at[..., None]
    g_lo = ((lo - rt2) * lo + ct2) * lo - rt2 * at2
    unused = ~np.stack([~has_crit | three | low_root, three | high_root], axis=-1)
    for _ in range(_NEWTON_ITERATIONS):
        gx = ((x - rt2) * x + ct2) * x - rt2 * at2
        slope = (3.0 * x - 2.0 * rt2) * x + ct2
        same = np.sign(gx) == np.sign(g_lo)
        lo, hi = np.where(same, x, lo), np.where(same, hi, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = x - gx / slope
        bad = ~np.isfinite(step) | (step < lo) | (step > hi)
        x_new = np.where(bad, 0.5 * (lo + hi), step)
        done = np.abs(x_new - x) <= 1e-13 * np.abs(x) + 1e-6 * wmin
        x = x_new
        if np.all(done | (gx == 0.0) | unused):
            break
    roots = x * scale[..., None]
    x2u = x2 * scale
    # without a mode on the likelihood's side, its peak (x = 0) is the centre there
    c1 = np.where(three | low_root, roots[..., 0], 0.0)
    c2 = np.where(three | high_root, roots[..., 1], np.where(low_root, x2u, roots[..., 0]))
    return c1, c2, three | high_root


class _Geometry(NamedTuple):
    """Per site: the residual's sign and size, the cavity variance, the tilted's two centres (and whether
    the second is a root of the cubic), and the two-centre rule's widths, gaps and reaches."""

    sign: Array
    r: Array
    var: Array
    c1: Array
    c2: Array
    c2_is_root: Array
    w1: Array
    w2: Array
    gap1: Array
    gap2: Array
    reach1: Array
    reach2: Array


class StudentT(Likelihood):
    r"""Student-t noise: :math:`y = f + \sigma\,\epsilon`, :math:`\epsilon \sim t_\nu`.

    Parameters
    ----------
    df : float
        Degrees of freedom :math:`\nu > 0` (4 by default, Jylanki et al. 2011's choice).
    scale : float
        Scale :math:`\sigma > 0` (not a variance).
    df_bounds, scale_bounds : pair of float or "fixed"
        Bounds for learning ``df`` and ``scale`` (scikit-learn's kernel convention); ``df`` is
        fixed by default.

    Notes
    -----
    ``log Z`` of :math:`p(y|f)^u N(f|\mu, s^2)` for any power :math:`u \in (0, 1]` is computed by the
    two-centre rule in log space; the derivatives in :math:`\mu` come from the tilted moments,
    :math:`\partial_\mu \log Z = (E f - \mu)/s^2`, :math:`\partial^2_\mu \log Z = (\operatorname{Var} f - s^2)/s^4`,
    or, where the cavity is narrower than the likelihood (:math:`s^2 < \nu\sigma^2`, and those
    differences would cancel), from :math:`E[u\,l']` and :math:`E[u l'' + u^2 l'^2] - (E[u l'])^2`,
    :math:`l = \log p(y|f)`.  Against ``scipy.integrate.quad`` the rule agrees to 1e-8 (see
    ``tests/test_regression_likelihoods.py``).  One tilted integral (:meth:`_log_z_in`): on another array
    library's device, every power, the same two-centre geometry with fixed sizes (:mod:`relaxep.likelihoods.robust_on`).
    """

    hyperparameter_names = ("df", "scale")
    output_scale_hyperparameters: ClassVar[dict[str, int]] = {"scale": 1}
    heavy_tailed = True
    tilted_on_device: ClassVar[bool] = True

    def __init__(
        self,
        df: float = 4.0,
        scale: float = 1.0,
        df_bounds: tuple[float, float] | str = "fixed",
        scale_bounds: tuple[float, float] | str = (1e-5, 1e5),
    ) -> None:
        self.df, self.df_bounds = check_hyperparameter(df, df_bounds, "df")
        self.scale, self.scale_bounds = check_hyperparameter(scale, scale_bounds, "scale")

    # ------------------------------------------------------------ pointwise
    @property
    def _log_norm(self) -> float:
        nu, sigma = float(self.df), float(self.scale)
        return float(gammaln(0.5 * (nu + 1.0)) - gammaln(0.5 * nu) - 0.5 * np.log(nu * np.pi) - np.log(sigma))

    def _log1p_q(self, x: Array) -> Array:
        r""":math:`\log(1 + x^2 / (\nu\sigma^2))` without overflow."""
        z = x * (1.0 / float(self.scale))
        with np.errstate(over="ignore"):  # beyond 1e154 scales the density is zero either way
            return np.log1p(z * z * (1.0 / float(self.df)))

    def _log_lik(self, y: Array, f: Array) -> Array:
        return self._log_norm - 0.5 * (float(self.df) + 1.0) * self._log1p_q(y - f)

    def _dlog_lik_dtheta(self, y: Array, f: Array) -> Array:
        return self._dlog_t_dtheta(y - f)

    def _dlog_t_dtheta(self, x: Array) -> Array:
        nu = float(self.df)
        z = x * (1.0 / float(self.scale))
        with np.errstate(over="ignore"):
            q = z * z * (1.0 / nu)
        frac = q / (1.0 + q)  # in [0, 1): no overflow
        cols = []
        learned = [not h.fixed for h in self.hyperparameters]
        if learned[0]:  # d/d log nu
            dnu = 0.5 * (digamma(0.5 * (nu + 1.0)) - digamma(0.5 * nu)) - 0.5 / nu
            cols.append(nu * (dnu - 0.5 * np.log1p(q) + 0.5 * (nu + 1.0) / nu * frac))
        if learned[1]:  # d/d log sigma
            cols.append((nu + 1.0) * frac - 1.0)
        return np.stack(cols, axis=-1)

    # ------------------------------------------------------------ the tilted integrals
    def _geometry(self, y: Array, mean: Array, var: Array, power: float) -> _Geometry:
        r"""Per site (flat arrays): the residual's sign and size, the tilted's two centres, the
        rule's widths, gaps and reaches, and whether the second centre is a root of the cubic."""
        nu, sigma = float(self.df), float(self.scale)
        a = nu * sigma**2
        p = power * (nu + 1.0)
        resid = mean - y
        sign = np.where(resid < 0.0, -1.0, 1.0)
        r = np.abs(resid)
        s = np.sqrt(var)
        c1, c2, c2_is_root = _cubic_modes(r, var, a, p)

        def width(x: Array) -> Array:
            curv = 1.0 / var + p / (a + x * x) * (a - x * x) / (a + x * x)
            return 1.0 / np.sqrt(np.maximum(np.abs(curv), 1.0 / var))

        w1, w2 = width(c1), width(c2)
        gap1, gap2 = split_gap(w1, w2, np.maximum(c2 - c1, 0.0))
        # reaches: below c1 the Gaussian falls and the likelihood rises at most by its ratio at c1;
        # above c2 the Gaussian rises until mu; both until exp(-40) of the density at the centre
        lift = 0.5 * p * np.log1p(c1 * c1 / a)
        reach1 = s * np.sqrt(2.0 * (_TAIL + lift))
        reach2 = (r - c2) + np.sqrt((r - c2) ** 2 + 2.0 * _TAIL * var)
        return _Geometry(sign, r, var, c1, c2, c2_is_root, w1, w2, gap1, gap2, reach1, reach2)

    def _rule(
        self, geometry: _Geometry, power: float, counts: tuple[int, int, int, int] | None = None
    ) -> tuple[Array, ...]:
        r"""The rule on :math:`p^u N`: sign, nodes (offset from y and from mu, flipped), normalised weights, log Z;
        ``counts`` the panels' node counts (default these sites')."""
        sign, r, var, c1, c2, c2_is_root, w1, w2, gap1, gap2, reach1, reach2 = geometry
        nu, a = float(self.df), float(self.df) * float(self.scale) ** 2
        p = power * (nu + 1.0)
        disp, second, jac = two_centre_rule(w1, w2, gap1, gap2, reach1, reach2, counts)
        # the cavity-side mode's offset from mu, from the stationarity condition (no cancellation)
        with np.errstate(invalid="ignore"):
            delta2 = np.where(c2_is_root, -var * p * c2 / (a + c2 * c2), c2 - r)
        x_nodes = np.where(second, c2[..., None], c1[..., None]) + disp
        e_nodes = np.where(second, delta2[..., None], (c1 - r)[..., None]) + disp
        log_terms = (-0.5 * power * (nu + 1.0)) * self._log1p_q(x_nodes) - (0.5 / var[..., None]) * e_nodes**2
        top = np.max(log_terms, axis=-1, keepdims=True)
        terms = jac * np.exp(log_terms - top)
        total = np.sum(terms, axis=-1)
        log_z = top[..., 0] + np.log(total) + power * self._log_norm - 0.5 * np.log(2.0 * np.pi * var)
        return sign, x_nodes, e_nodes, terms / total[..., None], log_z

    def _tilted_sums(
        self, y: Array, mean: Array, var: Array, power: float, reduce: Callable[..., tuple[Array, ...]]
    ) -> tuple[Array, ...]:
        """``reduce(sign, x, e, weights, log_z, var)`` (per-site sums over the rule's nodes), with the
        sites integrated in groups of equal panel size (:func:`~relaxep.likelihoods._panels.node_levels`), a group
        in blocks of :data:`_BLOCK` sites on the group's panels (the digits of one call)."""
        y, mean, var = np.broadcast_arrays(y, mean, var)
        shape = y.shape
        y, mean, var = y.ravel(), mean.ravel(), var.ravel()
        geometry = self._geometry(y, mean, var, power)
        g = geometry
        levels = node_levels(g.w1, g.w2, g.gap1, g.gap2, g.reach1, g.reach2)
        groups = [np.flatnonzero(levels == level) for level in np.unique(levels)]
        if len(groups) <= 1 and y.size <= _BLOCK:
            outs = reduce(*self._rule(geometry, power), var)
        else:
            outs = None
            for idx in groups:
                group = _Geometry(*(a[idx] for a in geometry))
                counts = panel_counts(group.w1, group.w2, group.gap1, group.gap2, group.reach1, group.reach2)
                for start in range(0, idx.size, _BLOCK):
                    rows = slice(start, start + _BLOCK)
                    part = reduce(*self._rule(_Geometry(*(a[rows] for a in group)), power, counts), group.var[rows])
                    if outs is None:
                        outs = tuple(np.empty((y.size, *np.shape(q)[1:])) for q in part)
                    for out, q in zip(outs, part, strict=True):
                        out[idx[rows]] = q
        return tuple(np.reshape(out, shape + np.shape(out)[1:]) for out in outs)

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        return self._log_z_in(np, y, mean, var, power)

    def _log_z_in(self, xp: ModuleType, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        """The tilted integral, around both modes of the tilted at every power: on numpy the adaptive two-centre
        rule (module docstring), elsewhere the fixed-size one of :mod:`~relaxep.likelihoods.robust_on`."""

        def fixed() -> TiltedLogZ:
            y_b, mean_b, var_b = xp.broadcast_arrays(y, mean, var)
            return student_t_log_z_on(xp, mean_b - y_b, var_b, float(self.df), float(self.scale), self._log_norm, power)

        sums = partial(self._tilted_sums, y, mean, var, power, partial(self._log_z_sums, power=power))
        return adaptive_or_fixed(xp, lambda: TiltedLogZ(*sums()), fixed)

    def _log_z_sums(
        self, sign: Array, x: Array, e: Array, weights: Array, log_z: Array, var: Array, power: float
    ) -> tuple[Array, Array, Array]:
        e_mean = np.sum(weights * e, axis=-1)
        e_var = np.sum(weights * (e - e_mean[..., None]) ** 2, axis=-1)
        nu, a = float(self.df), float(self.df) * float(self.scale) ** 2
        dl = -(nu + 1.0) * x / (a + x * x)  # d log p / d f in the flipped frame
        d2l = -(nu + 1.0) / (a + x * x) * (a - x * x) / (a + x * x)
        g1 = power * np.sum(weights * dl, axis=-1)
        g2 = np.sum(weights * (power * d2l + (power * dl) ** 2), axis=-1) - g1**2
        narrow = var < a  # the moment differences would cancel: use the derivatives' expectations
        dlog_z = np.where(narrow, g1, e_mean / var)
        d2log_z = np.where(narrow, g2, (e_var - var) / var**2)
        return log_z, sign * dlog_z, d2log_z

    def _log_predictive(self, y: Array, mean: Array, var: Array) -> Array:
        return self._tilted_sums(y, mean, var, 1.0, lambda sign, x, e, weights, log_z, var: (log_z,))[0]

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        def sums(sign: Array, x: Array, e: Array, weights: Array, log_z: Array, var: Array) -> tuple[Array]:
            return (np.sum(weights * self._log_lik(0.0, x), axis=-1),)

        return self._tilted_sums(y, mean, var, 1.0, sums)[0]

    def _tilted_cumulants(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        def sums(sign: Array, x: Array, e: Array, weights: Array, log_z: Array, var: Array) -> tuple[Array, ...]:
            e_mean = np.sum(weights * e, axis=-1)
            d = e - e_mean[..., None]
            wd2 = weights * d * d
            k2 = np.sum(wd2, axis=-1)
            k4 = np.sum(wd2 * d * d, axis=-1) - 3.0 * k2**2
            return sign * e_mean, k2, sign * np.sum(wd2 * d, axis=-1), k4

        shift, k2, k3, k4 = self._tilted_sums(y, mean, var, 1.0, sums)
        return np.broadcast_to(mean, shift.shape) + shift, k2, k3, k4

    def _dlog_z_dtheta(self, y: Array, mean: Array, var: Array) -> Array:
        def sums(sign: Array, x: Array, e: Array, weights: Array, log_z: Array, var: Array) -> tuple[Array]:
            return (np.sum(weights[..., None] * self._dlog_t_dtheta(x), axis=-2),)

        return self._tilted_sums(y, mean, var, 1.0, sums)[0]

    # ------------------------------------------------------------ predictive
    def _noise(self) -> stats.rv_continuous:
        return stats.t(float(self.df), loc=0.0, scale=float(self.scale))

    def _cdf(self, y: Array, f: Array) -> Array:
        return stdtr(float(self.df), (y - f) / float(self.scale))

    def _noise_variance(self) -> float:
        nu = float(self.df)
        return float(self.scale) ** 2 * nu / (nu - 2.0) if nu > 2.0 else np.inf
