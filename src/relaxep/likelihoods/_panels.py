r"""A quadrature rule on the real line around two centres: sinh-mapped Gauss-Legendre panels.

A tilted density :math:`p(y|f)^u N(f | \mu, s^2)` with a heavy-tailed likelihood has up to two
features far apart and of very different widths: the cavity's bulk near :math:`\mu` (width
:math:`\approx s`) and the likelihood's peak near :math:`y` (width :math:`\approx` its scale).
The rule here takes two centres :math:`c_1 \le c_2` with widths :math:`w_1, w_2`, a split point
between them and a reach beyond each, and covers the line by four panels,

.. math::
    [c_1 - R_1, c_1],\quad [c_1, c_1 + g_1],\quad [c_2 - g_2, c_2],\quad [c_2, c_2 + R_2],
    \qquad g_1 + g_2 = c_2 - c_1,

each by :math:`n`-point Gauss-Legendre in :math:`x` after :math:`f = c_k + w_k \sinh x`.  The
map puts nodes at spacing :math:`\approx w_k` at the centre and spreads them geometrically
outwards, so a peak of width :math:`w_k` and a Gaussian or polynomial fall-off many widths away
are both resolved with a few dozen nodes per panel (the substitution of Takahasi & Mori 1974's
double-exponential rules, in its single-exponential form; Gauss-Legendre instead of the
trapezoid because the panels end at the split, where the integrand does not vanish).

Nodes are returned as displacements from their own centre, so the caller can place them in
whichever frame (offset from :math:`y`, or from :math:`\mu`) keeps full relative precision.
"""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType

import numpy as np

from relaxep._typing import Array

__all__ = ["NODES_PER_UNIT", "node_levels", "panel", "panel_counts", "split_gap", "two_centre_rule"]

#: Gauss-Legendre nodes per unit of the sinh variable x (tuned against scipy.integrate.quad)
NODES_PER_UNIT = 10.0
_MIN_NODES, _MAX_NODES = 12, 160


@lru_cache(maxsize=64)
def _legendre(n: int) -> tuple[Array, Array]:
    nodes, weights = np.polynomial.legendre.leggauss(n)
    return nodes, weights


def panel(xp: ModuleType, width: Array, x_lo: Array, x_hi: Array, n: int) -> tuple[Array, Array]:
    """Displacements ``w sinh x`` and weights ``GL weight * w cosh x`` of one ``n``-node panel on
    ``[x_lo, x_hi]`` (zero if empty), in the array namespace ``xp``."""
    xi, omega = (xp.asarray(v, dtype=width.dtype, device=getattr(width, "device", None)) for v in _legendre(n))
    half = 0.5 * (x_hi - x_lo)[..., None]
    grow = xp.exp(0.5 * (x_hi + x_lo)[..., None] + half * xi)
    shrink = 1.0 / grow
    w = 0.5 * width[..., None]
    return w * (grow - shrink), (half * omega) * w * (grow + shrink)


def _count(extent: Array) -> int:
    top = float(np.max(extent, initial=0.0))
    return int(np.clip(np.ceil(NODES_PER_UNIT * top), _MIN_NODES, _MAX_NODES))


def split_gap(width1: Array, width2: Array, gap: Array, xp: ModuleType = np) -> tuple[Array, Array]:
    r"""Where the gap :math:`c_2 - c_1 \ge 0` between the centres is split: the distances :math:`g_1, g_2`
    from each centre to the point where both maps place nodes equally densely (spacing
    :math:`\approx \sqrt{w^2 + d^2}` at distance :math:`d`), :math:`g_1 = (g + (w_2^2 - w_1^2)/g)/2`
    clipped to :math:`[0, g]`; both zero where the centres coincide.  In the array namespace ``xp``."""
    some = gap > 0.0
    gap1 = 0.5 * (gap + (width2 - width1) * (width2 + width1) / xp.where(some, gap, 1.0))
    gap1 = xp.where(some, xp.minimum(xp.maximum(gap1, 0.0), gap), 0.0)
    return gap1, xp.maximum(gap - gap1, 0.0)


#: the node counts sites are grouped by (:func:`node_levels`)
_LEVELS = np.array([12, 16, 24, 32, 48, 64, 96, 128, 160])


def node_levels(width1: Array, width2: Array, gap1: Array, gap2: Array, reach1: Array, reach2: Array) -> Array:
    """Per site, the panel size :func:`two_centre_rule` would need for that site alone, rounded up
    to one of a few levels, so that sites can be integrated in groups: the rule sizes its panels
    for the widest site it is given, and one outlier would otherwise set 160 nodes a panel for all."""
    top = np.maximum.reduce(
        [np.arcsinh(reach1 / width1), np.arcsinh(gap1 / width1), np.arcsinh(gap2 / width2), np.arcsinh(reach2 / width2)]
    )
    need = np.clip(np.ceil(NODES_PER_UNIT * top), _MIN_NODES, _MAX_NODES)
    return _LEVELS[np.searchsorted(_LEVELS, need)]


def _extents(width1: Array, width2: Array, gap1: Array, gap2: Array, reach1: Array, reach2: Array) -> list[Array]:
    """The four panels' extents in the sinh variable."""
    return [
        np.arcsinh(reach1 / width1),
        np.arcsinh(gap1 / width1),
        np.arcsinh(gap2 / width2),
        np.arcsinh(reach2 / width2),
    ]


def panel_counts(
    width1: Array, width2: Array, gap1: Array, gap2: Array, reach1: Array, reach2: Array
) -> tuple[int, int, int, int]:
    """The node counts of the four panels :func:`two_centre_rule` gives these sites (sized for the widest
    site of each panel), so that the sites can be integrated in row blocks with the digits of one call."""
    a, b, c, d = (_count(e) for e in _extents(width1, width2, gap1, gap2, reach1, reach2))
    return a, b, c, d


def two_centre_rule(
    width1: Array,
    width2: Array,
    gap1: Array,
    gap2: Array,
    reach1: Array,
    reach2: Array,
    counts: tuple[int, int, int, int] | None = None,
) -> tuple[Array, Array, Array]:
    r"""Nodes and log-weights of the four-panel rule (nodes on a new last axis).

    Parameters
    ----------
    width1, width2 : ndarray
        Widths :math:`w_1, w_2 > 0` of the sinh maps at the centres.
    gap1, gap2 : ndarray
        Distances :math:`g_1, g_2 \ge 0` from each centre to the split point.
    reach1, reach2 : ndarray
        How far :math:`R_1, R_2 \ge 0` the rule extends below :math:`c_1` and above :math:`c_2`.
    counts : tuple of 4 int, optional
        The panels' node counts (:func:`panel_counts` of a larger set of sites); default these sites'.

    Returns
    -------
    disp : ndarray
        Each node's displacement from its own centre.
    second : ndarray of bool
        Whether the node belongs to the second centre.
    weights : ndarray
        The quadrature weights including the map's Jacobian (zero in empty panels):
        :math:`\int h(f) df \approx \sum_k \mathrm{weights}_k\, h(c_{(k)} + \mathrm{disp}_k)`.
    """
    ext = _extents(width1, width2, gap1, gap2, reach1, reach2)
    sizes = counts if counts is not None else tuple(_count(e) for e in ext)
    zero = np.zeros_like(ext[0])
    parts = [
        panel(np, width1, -ext[0], zero, sizes[0]),
        panel(np, width1, zero, ext[1], sizes[1]),
        panel(np, width2, -ext[2], zero, sizes[2]),
        panel(np, width2, zero, ext[3], sizes[3]),
    ]
    disp = np.concatenate([p[0] for p in parts], axis=-1)
    weights = np.concatenate([p[1] for p in parts], axis=-1)
    second = np.zeros(disp.shape[-1], dtype=bool)
    second[parts[0][0].shape[-1] + parts[1][0].shape[-1] :] = True
    return disp, np.broadcast_to(second, disp.shape), weights
