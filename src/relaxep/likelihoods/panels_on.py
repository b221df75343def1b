r"""The two-centre rule of :mod:`relaxep.likelihoods._panels` with a fixed number of nodes, in any array library.

Two centres :math:`c_1 \le c_2` with widths :math:`w_1, w_2`, the gap between them split at distances
:math:`g_1, g_2` from each and reaches :math:`R_1, R_2` beyond them: four panels

.. math:: [c_1 - R_1, c_1],\quad [c_1, c_1 + g_1],\quad [c_2 - g_2, c_2],\quad [c_2, c_2 + R_2],

each by ``n``-point Gauss-Legendre in :math:`t` after :math:`f = c_k + w_k\sinh t`.  numpy's rule sizes its panels
by the widest site of a group (a read of the data); here every site gets ``n`` nodes a panel, so a batch is
integrated with sizes known before the arrays are (:mod:`relaxep.likelihoods.robust_on`,
:mod:`relaxep.likelihoods.counts_on`).
"""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType
from typing import NamedTuple

import numpy as np

from relaxep._typing import Array

__all__ = ["TwoCentreNodes", "split_gap_on", "two_centre_rule_on"]


@lru_cache(maxsize=8)
def _legendre(n: int) -> tuple[Array, Array]:
    nodes, weights = np.polynomial.legendre.leggauss(n)
    return nodes, weights


class TwoCentreNodes(NamedTuple):
    r"""The rule's nodes on the last axis, ``2n`` for each centre: displacements :math:`w_k\sinh t` from the
    centre and weights (Gauss-Legendre's times the map's Jacobian :math:`w_k\cosh t`; zero in an empty panel), so
    that :math:`\int h \approx \sum_j \mathrm{weights1}_j\, h(c_1 + \mathrm{disp1}_j) + \sum_j
    \mathrm{weights2}_j\, h(c_2 + \mathrm{disp2}_j)`."""

    disp1: Array
    weights1: Array
    disp2: Array
    weights2: Array


def split_gap_on(xp: ModuleType, width1: Array, width2: Array, gap: Array) -> tuple[Array, Array]:
    r""":func:`relaxep.likelihoods._panels.split_gap` in ``xp``: :math:`g_1 = (g + (w_2^2 - w_1^2)/g)/2` clipped
    to :math:`[0, g]` (both maps then space their nodes equally at the split), :math:`g_2 = g - g_1`; both zero
    where the centres coincide."""
    some = gap > 0.0
    gap1 = 0.5 * (gap + (width2 - width1) * (width2 + width1) / xp.where(some, gap, 1.0))
    gap1 = xp.where(some, xp.minimum(xp.maximum(gap1, 0.0), gap), 0.0)
    return gap1, xp.maximum(gap - gap1, 0.0)


def _panel_on(xp: ModuleType, width: Array, t_lo: Array, t_hi: Array, n: int) -> tuple[Array, Array]:
    xi, omega = _legendre(n)
    device = getattr(width, "device", None)
    xi_d = xp.asarray(xi, dtype=width.dtype, device=device)
    omega_d = xp.asarray(omega, dtype=width.dtype, device=device)
    half = 0.5 * (t_hi - t_lo)[..., None]
    grow = xp.exp(0.5 * (t_hi + t_lo)[..., None] + half * xi_d)
    shrink = 1.0 / grow
    w = 0.5 * width[..., None]
    return w * (grow - shrink), (half * omega_d) * w * (grow + shrink)


def two_centre_rule_on(
    xp: ModuleType, width1: Array, width2: Array, gap1: Array, gap2: Array, reach1: Array, reach2: Array, n: int
) -> TwoCentreNodes:
    r"""The four panels of the module docstring, ``n`` nodes each.

    Parameters
    ----------
    xp : module
        The arrays' namespace.
    width1, width2 : array
        The maps' widths :math:`w_1, w_2 > 0` at the centres.
    gap1, gap2 : array
        Distances :math:`g_1, g_2 \ge 0` from each centre to the split.
    reach1, reach2 : array
        How far :math:`R_1, R_2 \ge 0` the rule extends below :math:`c_1` and above :math:`c_2`.
    n : int
        Gauss-Legendre nodes a panel.
    """
    zero = xp.zeros_like(width1)
    below = _panel_on(xp, width1, -xp.asinh(reach1 / width1), zero, n)
    right1 = _panel_on(xp, width1, zero, xp.asinh(gap1 / width1), n)
    left2 = _panel_on(xp, width2, -xp.asinh(gap2 / width2), zero, n)
    above = _panel_on(xp, width2, zero, xp.asinh(reach2 / width2), n)
    return TwoCentreNodes(
        xp.concat([below[0], right1[0]], axis=-1),
        xp.concat([below[1], right1[1]], axis=-1),
        xp.concat([left2[0], above[0]], axis=-1),
        xp.concat([left2[1], above[1]], axis=-1),
    )
