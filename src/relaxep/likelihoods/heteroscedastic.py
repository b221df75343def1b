r"""Gaussian noise of input-dependent variance: :math:`y = f + \epsilon`, :math:`\epsilon \sim N(0, e^{g})`, two
latents per target (Tolvanen, Jylänki & Vehtari 2014, "Expectation propagation for nonstationary heteroscedastic
Gaussian process regression", MLSP).

EP with factorised sites needs the tilted distribution of one row at the cavities :math:`N(f | m_f, v_f)` and
:math:`N(g | m_g, v_g)`, at power :math:`\alpha` (Power EP; :math:`\alpha = 1` is EP):

.. math::
    \hat p(f, g) = \frac{1}{\hat Z} N(y | f, e^g)^{\alpha}\, N(f | m_f, v_f)\, N(g | m_g, v_g),\qquad
    N(y | f, e^g)^{\alpha} = \frac{(2\pi e^g)^{(1-\alpha)/2}}{\sqrt{\alpha}}\, N(y | f, e^g/\alpha).

The integral over :math:`f` is Gaussian, so everything reduces to one dimension in :math:`g`: with
:math:`s = e^g/\alpha`, :math:`V = v_f + s` and :math:`r = (y - m_f)^2`,

.. math::
    \hat Z = \int w(g)\, N(g | m_g, v_g)\, dg,\qquad
    \log w(g) = \tfrac{1-\alpha}{2}\log(2\pi e^g) - \tfrac12\log\alpha - \tfrac12\log(2\pi V) - \frac{r}{2V},

and given :math:`g` the tilted :math:`f` is :math:`N\big(m_f + v_f (y - m_f)/V,\ v_f s / V\big)`, so
:math:`E[f]` and :math:`E[f^2]` are averages of these conditional moments under the tilted density of :math:`g`,
whose moments are taken on the same nodes.

The rule (:func:`tilted_moments`): the tilted log density of :math:`g`, :math:`\varphi(g) = \log w(g) + \log
N(g | m_g, v_g)`, has every stationary point in :math:`[m_g - \alpha v_g/2,\ g^*]`, since
:math:`-\alpha/2 \le (\log w)' \le \tfrac{1-\alpha}{2} + \tfrac{\alpha r}{2} e^{-g}` (:func:`_bracket`: :math:`g^*`
by the Wright omega function); a Newton iteration safeguarded by bisection in that bracket finds a mode
:math:`\hat g` (the bracket's ends have :math:`\varphi' \ge 0` and :math:`\le 0`), and the trapezoid rule after
:math:`g = \hat g + a \sinh x` (:math:`a = \min(\ell, 1)`, :math:`\ell` the Laplace standard deviation at the
mode, 1 the scale on which :math:`\log w` bends) integrates over the bracket widened by 10 cavity standard
deviations, beyond which the density falls faster than the cavity's Gaussian.  Nodes are dense at the mode
and spread geometrically, so a tiny noise (:math:`e^{g} \ll v_f`) and a huge one are resolved alike;
:math:`V` and :math:`s/V` are formed in log space (``logaddexp``) and the sums by ``logsumexp``.

The density can have two modes: for a near-noiseless row one at the cavity, where :math:`e^g \ll v_f` and
:math:`w` is flat in :math:`g`, and one near :math:`\log (y - m_f)^2` (e.g. :math:`y = 0.1`, :math:`m_f = 0`,
:math:`v_f = 10^{-4}`, :math:`N(g | -16.5, 1)`: modes 8.5 apart holding 1 : 0.48 of the mass).  A scan of the
bracket on 65 points and a second Newton search from its best point find the other; one holding under
:math:`e^{-36}` of the other's mass is left out, else the nodes are centred between the two with a step that
puts at most half a Laplace standard deviation between nodes at either.  Against a brute-force integral the
moments agree to 1e-8 relative (1e-7 with two modes; ``tests/test_heteroscedastic.py``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr, wrightomega

from relaxep._numerics import logsumexp
from relaxep._typing import Array
from relaxep.likelihoods.two_latent import TiltedPair, TwoLatentLikelihood

__all__ = [
    "Heteroscedastic",
    "TiltedPair",
    "log_likelihood",
    "noise_sd_moments",
    "predictive_cdf",
    "predictive_log_density",
    "predictive_quantiles",
    "tilted_moments",
]

_LOG_2PI = float(np.log(2.0 * np.pi))
#: the trapezoid step in the sinh variable (error far below 1e-10 for the smooth tilted densities here)
_STEP = 0.05
_MIN_NODES, _MAX_NODES = 64, 8192
_NEWTON_ITERATIONS = 100
#: points of the scan of the bracket for a second mode
_SCAN = 65
#: a mode whose mass is below e^-36 of the other's (1e-16) is left out
_NEGLIGIBLE = 36.0


def log_likelihood(y: ArrayLike, f: ArrayLike, g: ArrayLike) -> Array:
    r""":math:`\log N(y | f, e^g) = -\tfrac12(\log 2\pi + g + (y - f)^2 e^{-g})` (broadcast)."""
    y, f, g = (np.asarray(a, dtype=float) for a in (y, f, g))
    return -0.5 * (_LOG_2PI + g + (y - f) ** 2 * np.exp(-g))


def _log_w_parts(g: Array, r: Array, log_vf: Array, power: float) -> tuple[Array, Array, Array]:
    r""":math:`\log w(g)` (module docstring), :math:`s/V` and :math:`r/V`, in log space."""
    log_s = g - np.log(power)
    log_v = np.logaddexp(log_vf, log_s)
    r_over_v = r * np.exp(-log_v)
    log_w = 0.5 * (1.0 - power) * (_LOG_2PI + g) - 0.5 * np.log(power) - 0.5 * (_LOG_2PI + log_v) - 0.5 * r_over_v
    return log_w, np.exp(log_s - log_v), r_over_v


def _bracket(mean_g: Array, var_g: Array, r: Array, power: float) -> tuple[Array, Array]:
    r"""An interval :math:`[m_g - \alpha v_g/2,\ g^*]` holding every mode of the tilted :math:`g` (module docstring).

    With :math:`c = (1-\alpha)/2` and :math:`B = \alpha r/2`, :math:`(\log w)' \le c + B e^{-g}`, so a mode has
    :math:`g - m_g \le v_g (c + B e^{-g})`, whose right side falls as :math:`g` rises: :math:`g \le g^*`, the root of
    :math:`g = m_g + v_g (c + B e^{-g})`, in closed form by the Wright omega function
    :math:`\omega(z) = W(e^z)`: :math:`g^* = m_g + v_g c + \omega(\log(v_g B) - m_g - v_g c)`.  Beyond
    :math:`g^*` the log density falls at least as fast as :math:`-(g - g^*)^2/(2 v_g)`.
    """
    base = mean_g + var_g * 0.5 * (1.0 - power)
    with np.errstate(divide="ignore"):
        log_vb = np.log(var_g * 0.5 * power * r)
    return mean_g - 0.5 * power * var_g, base + wrightomega(log_vb - base)


def _mode(
    mean_g: Array, var_g: Array, r: Array, log_vf: Array, power: float, start: Array | None = None
) -> tuple[Array, Array]:
    r"""A mode :math:`\hat g` of the tilted density of :math:`g` and :math:`-1/\varphi''(\hat g)` (module docstring).

    .. math::
        (\log w)' = \tfrac{1-\alpha}{2} - \tfrac12\frac{s}{V} + \tfrac12\frac{r}{V}\frac{s}{V},\qquad
        (\log w)'' = -\tfrac12\frac{s}{V}\frac{v_f}{V} + \tfrac12\frac{r}{V}\frac{s}{V}\Big(1 - 2\frac{s}{V}\Big).
    """
    lo, hi = _bracket(mean_g, var_g, r, power)

    def derivatives(g: Array) -> tuple[Array, Array]:
        _, s_v, r_v = _log_w_parts(g, r, log_vf, power)
        d1 = 0.5 * (1.0 - power) - 0.5 * s_v + 0.5 * r_v * s_v - (g - mean_g) / var_g
        d2 = -0.5 * s_v * (1.0 - s_v) + 0.5 * r_v * s_v * (1.0 - 2.0 * s_v) - 1.0 / var_g
        return d1, d2  # (v_f / V = 1 - s / V)

    g = np.clip(mean_g if start is None else start, lo, hi)
    for _ in range(_NEWTON_ITERATIONS):
        d1, d2 = derivatives(g)
        lo, hi = np.where(d1 > 0, g, lo), np.where(d1 > 0, hi, g)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = g - d1 / d2
        newton = (d2 < 0) & (step >= lo) & (step <= hi)  # (at the mode the step is g, an end of the bracket)
        g_new = np.where(newton, step, 0.5 * (lo + hi))
        done = np.all(np.abs(g_new - g) <= 1e-9 * (1.0 + np.abs(g)))
        g = g_new
        if done:
            break
    _, d2 = derivatives(g)
    return g, 1.0 / np.maximum(-d2, 1e-300)


def tilted_moments(
    y: ArrayLike, mean_f: ArrayLike, var_f: ArrayLike, mean_g: ArrayLike, var_g: ArrayLike, power: float = 1.0
) -> TiltedPair:
    r"""Normaliser and marginal moments of :math:`N(y | f, e^g)^{\alpha} N(f | m_f, v_f) N(g | m_g, v_g)`.

    The one-dimensional rule of the module docstring, vectorised over rows: with nodes :math:`g_k` and
    normalised weights :math:`w_k` (trapezoid weight times the tilted density),

    .. math::
        \hat Z = \sum_k \text{weight}_k,\quad E[g] = \sum_k w_k g_k,\quad
        E[f] = \sum_k w_k \Big(m_f + \frac{v_f (y - m_f)}{V_k}\Big),\quad
        \operatorname{Var}[f] = \sum_k w_k \frac{v_f s_k}{V_k} + \sum_k w_k (E[f | g_k] - E[f])^2.

    Parameters
    ----------
    y, mean_f, var_f, mean_g, var_g : array_like
        Targets and the two cavities (broadcast; variances positive).
    power : float
        :math:`\alpha \in (0, 1]`.

    Returns
    -------
    TiltedPair
    """
    y, mean_f, var_f, mean_g, var_g = np.broadcast_arrays(
        *(np.asarray(a, dtype=float) for a in (y, mean_f, var_f, mean_g, var_g))
    )
    power = float(power)
    if not 0.0 < power <= 1.0:
        raise ValueError(f"power must be in (0, 1], got {power}")
    r, log_vf = (y - mean_f) ** 2, np.log(var_f)
    lo, hi = _bracket(mean_g, var_g, r, power)
    mode, lap_var = _mode(mean_g, var_g, r, log_vf, power)
    # a second mode: the best point of a scan of the bracket, refined (the tilted density can have two, one at
    # the cavity where w is flat, e^g << v_f, and one where e^g is near (y - m_f)^2)
    scan = lo[..., None] + (hi - lo)[..., None] * np.linspace(0.0, 1.0, _SCAN)
    best = np.take_along_axis(scan, np.argmax(_log_density(scan, r, log_vf, mean_g, var_g, power), axis=-1)[..., None],
                              axis=-1)[..., 0]  # fmt: skip
    other, other_var = _mode(mean_g, var_g, r, log_vf, power, start=best)
    mass = _log_density(mode, r, log_vf, mean_g, var_g, power) + 0.5 * np.log(lap_var)
    other_mass = _log_density(other, r, log_vf, mean_g, var_g, power) + 0.5 * np.log(other_var)
    sd, other_sd = np.sqrt(lap_var), np.sqrt(other_var)
    apart = np.abs(other - mode) > 3.0 * np.maximum(sd, other_sd)
    both = apart & (np.abs(other_mass - mass) < _NEGLIGIBLE)
    swap = apart & (other_mass > mass) & ~both  # (the scan found the mode that holds the mass)
    mode, sd = np.where(swap, other, mode), np.where(swap, other_sd, sd)
    # one mode: nodes centred there; two: centred between them, each resolved (spacing at most half its sd)
    centre = np.where(both, 0.5 * (mode + other), mode)
    scale = np.minimum(np.where(both, np.minimum(sd, other_sd), sd), 1.0)
    step = np.full(centre.shape, _STEP)
    if np.any(both):
        spacing = np.minimum(sd / np.hypot(scale, mode - centre), other_sd / np.hypot(scale, other - centre))
        step = np.where(both, np.minimum(_STEP, 0.5 * spacing), step)
    lo, hi = lo - 10.0 * np.sqrt(var_g), hi + 10.0 * np.sqrt(var_g)
    reach = np.maximum(np.maximum(centre - lo, hi - centre), 12.0 * sd)
    half_width = np.arcsinh(reach / scale)
    out = [np.empty(centre.shape) for _ in range(5)]
    for rows in (~both, both):  # (a common node count per group: the rare two-mode rows need more)
        if np.any(rows):
            parts = _integrate(y[rows], mean_f[rows], var_f[rows], mean_g[rows], var_g[rows], r[rows], log_vf[rows],
                               power, centre[rows], scale[rows], half_width[rows], step[rows])  # fmt: skip
            for target, part in zip(out, parts, strict=True):
                target[rows] = part
    return TiltedPair(*out)


def _log_density(g: Array, r: Array, log_vf: Array, mean_g: Array, var_g: Array, power: float) -> Array:
    r"""The tilted log density of :math:`g` up to a constant, :math:`\log w(g) - (g - m_g)^2 / (2 v_g)`, at nodes
    ``g`` (a trailing axis beyond the rows')."""
    extra = g.ndim - np.ndim(r)
    expand = (...,) + (None,) * extra
    log_w, _, _ = _log_w_parts(g, r[expand], log_vf[expand], power)
    return log_w - 0.5 * (g - mean_g[expand]) ** 2 / var_g[expand]


def _integrate(
    y: Array, mean_f: Array, var_f: Array, mean_g: Array, var_g: Array, r: Array, log_vf: Array, power: float,
    centre: Array, scale: Array, half_width: Array, step_bound: Array,
) -> tuple[Array, Array, Array, Array, Array]:  # fmt: skip
    r"""The trapezoid rule after :math:`g = c + a\sinh x` on :math:`|x| \le` ``half_width``, steps at most
    ``step_bound``: :math:`(\log\hat Z, E f, \operatorname{Var} f, E g, \operatorname{Var} g)`."""
    needed = np.ceil(2.0 * half_width / step_bound) + 1
    n_nodes = int(np.clip(np.max(needed, initial=_MIN_NODES), _MIN_NODES, _MAX_NODES))
    x = np.linspace(-1.0, 1.0, n_nodes) * half_width[..., None]
    step = 2.0 * half_width[..., None] / (n_nodes - 1)
    g = centre[..., None] + scale[..., None] * np.sinh(x)
    log_w, s_v, _ = _log_w_parts(g, r[..., None], log_vf[..., None], power)
    log_terms = (
        np.log(step * scale[..., None] * np.cosh(x))
        + log_w
        - 0.5 * (g - mean_g[..., None]) ** 2 / var_g[..., None]
        - 0.5 * (_LOG_2PI + np.log(var_g[..., None]))
    )
    log_z = logsumexp(log_terms, axis=-1)
    weights = np.exp(log_terms - log_z[..., None])
    m_g = np.sum(weights * g, axis=-1)
    v_g = np.sum(weights * (g - m_g[..., None]) ** 2, axis=-1)
    cond_mean = mean_f[..., None] + (1.0 - s_v) * (y - mean_f)[..., None]  # (v_f / V = 1 - s / V)
    m_f = np.sum(weights * cond_mean, axis=-1)
    v_f = np.sum(weights * (var_f[..., None] * s_v + (cond_mean - m_f[..., None]) ** 2), axis=-1)
    return log_z, m_f, v_f, m_g, v_g


def predictive_log_density(y: ArrayLike, mean_f: ArrayLike, var_f: ArrayLike, mean_g: ArrayLike,
                           var_g: ArrayLike) -> Array:  # fmt: skip
    r""":math:`\log\int N(y | \mu_f, v_f + e^g)\, N(g | \mu_g, v_g)\, dg` per row: the log predictive density of a new
    target under :math:`q(f_*) q(g_*)` (the tilted normaliser at power 1, :func:`tilted_moments`)."""
    return tilted_moments(y, mean_f, var_f, mean_g, var_g).log_z


def _hermite(mean_g: Array, var_g: Array, n_nodes: int = 64) -> tuple[Array, Array]:
    """Gauss-Hermite nodes of :math:`N(g | \\mu_g, v_g)` (last axis) and their log weights."""
    x, w = np.polynomial.hermite_e.hermegauss(n_nodes)
    return mean_g[..., None] + np.sqrt(var_g)[..., None] * x, np.log(w / np.sqrt(2.0 * np.pi))


def predictive_cdf(y: ArrayLike, mean_f: ArrayLike, var_f: ArrayLike, mean_g: ArrayLike, var_g: ArrayLike) -> Array:
    r""":math:`P(y_* \le y) = \int \Phi\big((y - \mu_f)/\sqrt{v_f + e^g}\big)\, N(g | \mu_g, v_g)\, dg` (64-node
    Gauss-Hermite rule in :math:`g`)."""
    y, mean_f, var_f, mean_g, var_g = np.broadcast_arrays(
        *(np.asarray(a, dtype=float) for a in (y, mean_f, var_f, mean_g, var_g))
    )
    g, log_w = _hermite(mean_g, var_g)
    sd = np.sqrt(var_f[..., None] + np.exp(g))
    return np.sum(np.exp(log_w) * ndtr((y - mean_f)[..., None] / sd), axis=-1)


def _quantile_bracket(q: float, mean_f: Array, var_f: Array, mean_g: Array, var_g: Array) -> tuple[Array, Array]:
    """The quantiles of the Gauss-Hermite components of the predictive mixture, lowest and highest per row (a
    mixture's quantile lies between its components')."""
    from scipy.special import ndtri

    g, _ = _hermite(mean_g, var_g)
    sd = np.sqrt(var_f[..., None] + np.exp(g))
    z = float(ndtri(q))
    lo = mean_f + z * np.min(sd, axis=-1)
    hi = mean_f + z * np.max(sd, axis=-1)
    return np.minimum(lo, hi), np.maximum(lo, hi)


def noise_sd_moments(mean_g: ArrayLike, var_g: ArrayLike) -> tuple[Array, Array]:
    r"""Mean and standard deviation of the noise sd :math:`e^{g/2}` for :math:`g \sim N(\mu, v)` (lognormal):

    .. math:: E[e^{g/2}] = e^{\mu/2 + v/8},\qquad
        \operatorname{sd}[e^{g/2}] = e^{\mu/2 + v/8}\sqrt{e^{v/4} - 1}.
    """
    mean_g, var_g = np.asarray(mean_g, dtype=float), np.asarray(var_g, dtype=float)
    mean = np.exp(0.5 * mean_g + 0.125 * var_g)
    return mean, mean * np.sqrt(np.expm1(0.25 * var_g))


class Heteroscedastic(TwoLatentLikelihood):
    r"""Gaussian noise of input-dependent variance, :math:`p(y | f, g) = N(y | f, e^g)` (module docstring): the
    tilted rule :func:`tilted_moments`, the predictive's distribution function :func:`predictive_cdf` (64-node
    Gauss-Hermite in :math:`g`) and its quantiles by bisection between the components' quantiles."""

    def tilted(
        self, y: Array, mean_f: Array, var_f: Array, mean_g: Array, var_g: Array, power: float = 1.0
    ) -> TiltedPair:
        return tilted_moments(y, mean_f, var_f, mean_g, var_g, power)

    def _log_lik2(self, y: Array, f: Array, g: Array) -> Array:
        return log_likelihood(y, f, g)

    def predictive_cdf(self, y: ArrayLike, mean_f: ArrayLike, var_f: ArrayLike, mean_g: ArrayLike,
                       var_g: ArrayLike) -> Array:  # fmt: skip
        return predictive_cdf(y, mean_f, var_f, mean_g, var_g)

    def predictive_bracket(self, q: float, mean_f: Array, var_f: Array, mean_g: Array,
                           var_g: Array) -> tuple[Array, Array]:  # fmt: skip
        return _quantile_bracket(q, mean_f, var_f, mean_g, var_g)

    @staticmethod
    def scale_moments(mean_g: ArrayLike, var_g: ArrayLike) -> tuple[Array, Array]:
        """The noise sd's mean and sd under :math:`q(g)` (:func:`noise_sd_moments`)."""
        return noise_sd_moments(mean_g, var_g)


def predictive_quantiles(q: float, mean_f: ArrayLike, var_f: ArrayLike, mean_g: ArrayLike, var_g: ArrayLike) -> Array:
    r"""The ``q`` quantile of the predictive mixture :math:`\int N(y | \mu_f, v_f + e^g) N(g | \mu_g, v_g)\,dg`:
    :meth:`Heteroscedastic.predictive_quantiles` (bisection on :func:`predictive_cdf` between the quantiles of
    the Gauss-Hermite components)."""
    return Heteroscedastic().predictive_quantiles(q, mean_f, var_f, mean_g, var_g)
