r"""The two-centre rule of :mod:`relaxep.likelihoods._panels` with a fixed number of nodes, in any array library.

Two centres :math:`c_1 \le c_2` with widths :math:`w_1, w_2`, the gap between them split at distances
:math:`g_1, g_2` from each and reaches :math:`R_1, R_2` beyond them: four panels

.. math:: [c_1 - R_1, c_1],\quad [c_1, c_1 + g_1],\quad [c_2 - g_2, c_2],\quad [c_2, c_2 + R_2],

each by ``n``-point Gauss-Legendre in :math:`t` after :math:`f = c_k + w_k\sinh t`.  numpy's rule sizes its panels
by the widest site of a group (a read of the data); here every site gets ``n`` nodes a panel, so a batch is
integrated with sizes known before the arrays are (:mod:`relaxep.likelihoods.robust_on`,
:mod:`relaxep.likelihoods.counts_on`).  The panel itself and the split of the gap are numpy's functions
(:func:`~relaxep.likelihoods._panels.panel`, :func:`~relaxep.likelihoods._panels.split_gap`), written once in the
array namespace; only the fixed count is this module's.
"""

from __future__ import annotations

from types import ModuleType
from typing import NamedTuple

from relaxep._typing import Array
from relaxep.likelihoods._panels import panel

__all__ = ["TwoCentreNodes", "two_centre_rule_on"]


class TwoCentreNodes(NamedTuple):
    r"""The rule's nodes on the last axis, ``2n`` for each centre: displacements :math:`w_k\sinh t` from the
    centre and weights (Gauss-Legendre's times the map's Jacobian :math:`w_k\cosh t`; zero in an empty panel), so
    that :math:`\int h \approx \sum_j \mathrm{weights1}_j\, h(c_1 + \mathrm{disp1}_j) + \sum_j
    \mathrm{weights2}_j\, h(c_2 + \mathrm{disp2}_j)`."""

    disp1: Array
    weights1: Array
    disp2: Array
    weights2: Array


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
    below = panel(xp, width1, -xp.asinh(reach1 / width1), zero, n)
    right1 = panel(xp, width1, zero, xp.asinh(gap1 / width1), n)
    left2 = panel(xp, width2, -xp.asinh(gap2 / width2), zero, n)
    above = panel(xp, width2, zero, xp.asinh(reach2 / width2), n)
    return TwoCentreNodes(
        xp.concat([below[0], right1[0]], axis=-1),
        xp.concat([below[1], right1[1]], axis=-1),
        xp.concat([left2[0], above[0]], axis=-1),
        xp.concat([left2[1], above[1]], axis=-1),
    )
