r"""Relaxed EP (Qi & Guo, Section 5): EP with a relaxed cavity whose strength is chosen per site.

The relaxation :math:`r_i(g) = \exp(-b (g - m_i)^2/2)` (:math:`b \ge 0` a precision, centred
at the site's mean) multiplies the cavity before moment matching; :math:`b^*` minimises the
KL of the relaxed tilted distribution to its projection plus the penalty :math:`c\,b`
(:doc:`the decisions page </decisions>` derives the closed form and corrects the paper's Appendix B).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import ClassVar, Literal

import numpy as np

from relaxep._typing import Array
from relaxep.likelihoods import Likelihood, NoisyStep, TiltedLogZ
from relaxep.sites.base import Cavity, Site, SiteRule, check_damping, relaxed_cavity, site_from_tilted
from relaxep.sites.paper import paper_site, paper_terms

__all__ = [
    "SITE_STEPS",
    "RelaxedEP",
    "TiltedPieces",
    "derived_site",
    "line_search",
    "relaxed_cavity",
    "relaxed_kl",
    "relaxed_objective",
    "relaxed_q",
]

#: the site columns the objective takes, each 1-d over the sites: cavity mean and variance, site precision and
#: mean, marginal variance
SiteColumns = tuple[Array, Array, Array, Array, Array]


def relaxed_kl(likelihood: Likelihood, y: Array, mean: Array, var: Array) -> Array:
    r"""KL between a tilted distribution and its Gaussian projection.

    For :math:`p \propto p(y|f) N(f | \tilde h, \tilde\lambda)` with normaliser
    :math:`\hat Z` and moments :math:`(\hat h, \hat\lambda)`,

    .. math::
        \mathrm{KL}(p \,\|\, N(\hat h, \hat\lambda))
        = E_p[\log t] - \log\hat Z + \tfrac12 \log\frac{\hat\lambda}{\tilde\lambda}
          + \tfrac12 - \frac{\hat\lambda + (\hat h - \tilde h)^2}{2\tilde\lambda}
        = E_p[\log t] - \log\hat Z + \tfrac12\log(1 + \tilde\lambda d_2)
          - \tfrac12\tilde\lambda (d_2 + d_1^2),

    the second form using :math:`\hat\lambda = \tilde\lambda(1 + \tilde\lambda d_2)`
    and :math:`\hat h - \tilde h = \tilde\lambda d_1`.
    """
    return tilted_kl(np, likelihood.log_z(y, mean, var), likelihood.expected_log_lik(y, mean, var), var)


def tilted_kl(xp: ModuleType, lz: TiltedLogZ, expected: Array, var: Array) -> Array:
    r""":func:`relaxed_kl` from its pieces, in the namespace ``xp``: :math:`E_p[\log t] - \log\hat Z +
    \tfrac12\log(1 + \tilde\lambda d_2) - \tfrac12\tilde\lambda(d_2 + d_1^2)`, ``expected`` the first term,
    ``lz`` :math:`\log\hat Z, d_1, d_2` at the cavity of variance ``var`` (one formula: numpy's digits on the
    device, :mod:`relaxep.sites.relaxed_on`)."""
    return expected - lz.log_z + 0.5 * xp.log1p(var * lz.d2log_z) - 0.5 * var * (lz.d2log_z + lz.dlog_z**2)


def relaxed_objective(
    likelihood: Likelihood,
    y: Array,
    relaxation: Array,
    cavity_mean: Array,
    cavity_var: Array,
    site_mean: Array,
    relax_weight: float,
    penalty: Literal["absolute", "scale_free"] = "absolute",
) -> Array:
    r"""The derived REP objective :math:`Q(b) = \mathrm{KL}(p_b \| \mathrm{proj}\, p_b) + c\, b`.

    :math:`p_b \propto p(y|f)\, r_b\, q^{\setminus i}`, :math:`r_b(f) = \exp(-b (f - m_i)^2/2)`,
    :math:`b \ge 0` a precision (:doc:`the decisions page </decisions>`).  With ``penalty="scale_free"`` it is
    :math:`c\, b \lambda` (a dimensionless precision ratio), which makes ``c``
    independent of the kernel amplitude.
    """
    if penalty not in ("absolute", "scale_free"):
        raise ValueError(f"penalty must be 'absolute' or 'scale_free', got {penalty!r}")
    columns = (cavity_mean, cavity_var, None, site_mean, None)
    return relaxed_q(TiltedPieces(np, likelihood), y, relaxation, columns, relax_weight, penalty=penalty)  # type: ignore[arg-type]


class RelaxedEP(SiteRule):
    r"""Relaxed EP (paper Section 5) with relaxation :math:`r_i(g) = \exp(-b (g - m_i)^2/2)`.

    1. :math:`b^* = \arg\min_{b \ge 0} Q(b)`, :math:`Q(b) = \mathrm{KL}(p_b \| \mathrm{proj}\,p_b) + c b`
       (:func:`relaxed_objective`), found on ``b = 0`` plus a log grid scaled by
       :math:`1/\lambda`, then refined by three zooms (:meth:`optimal_relaxation`).
    2. Relaxed cavity :math:`(\tilde h, \tilde\lambda)` (:func:`relaxed_cavity`).
    3. EP moment matching there gives :math:`(\tau_b, \nu_b)`.
    4. ``variant="derived"`` (default): the new site is :math:`(\tau_b, \nu_b)` (step (e) is
       the identity, :doc:`the decisions page </decisions>`).  ``variant="paper"``: the printed step (e),
       :math:`\tau = \tau_b + b`, :math:`\nu = \nu_b + b\, m_i`, with the printed Q.

    With ``c`` huge, :math:`b^* = 0` everywhere and REP equals EP exactly.

    Parameters
    ----------
    c : float
        The l1 weight (``relax_weight``), ``c >= 0``.  It is not scale-free: REP with
        ``c`` on ``K`` equals REP with ``c s^2`` on ``s^2 K``.
    variant : {"derived", "paper"}
    penalty : {"absolute", "scale_free"}
        ``"scale_free"`` penalises :math:`c\, b \lambda` instead of :math:`c\, b`.
    damping : float
    """

    #: the line search's grid of :math:`b\lambda`: 0, then 33 points from :math:`10^{-4}` to :math:`10^4`
    grid: ClassVar[Array] = np.concatenate([[0.0], np.logspace(-4.0, 4.0, 33)])
    #: the zooms after the grid, and the points of each
    n_zoom: ClassVar[int] = 3
    zoom_points: ClassVar[int] = 17

    def __init__(
        self,
        c: float = 10.0,
        variant: Literal["derived", "paper"] = "derived",
        penalty: Literal["absolute", "scale_free"] = "absolute",
        damping: float = 1.0,
    ) -> None:
        if isinstance(c, bool) or not isinstance(c, int | float | np.integer | np.floating):
            raise TypeError(f"relaxation weight c must be a real number, got {c!r}")
        if not (float(c) >= 0.0):
            raise ValueError(f"relaxation weight c must be >= 0, got {c!r}")
        if variant not in ("derived", "paper"):
            raise ValueError(f"variant must be 'derived' or 'paper', got {variant!r}")
        if penalty not in ("absolute", "scale_free"):
            raise ValueError(f"penalty must be 'absolute' or 'scale_free', got {penalty!r}")
        if variant == "paper" and penalty != "absolute":
            raise ValueError("the paper variant uses the printed, absolute penalty c*b")
        self.c = c
        self.variant = variant
        self.penalty = penalty
        self.damping = check_damping(damping)

    def objective(self, likelihood: Likelihood, y: Array, relaxation: Array, cavity: Cavity, site: Site) -> Array:
        """``Q(b)`` of this rule's variant (arrays broadcast)."""
        columns = (cavity.mean, cavity.var, site.precision, site.mean, site.marginal_var)
        return self.q(TiltedPieces(np, likelihood), y, relaxation, columns)

    def q(self, tilted: TiltedPieces, y: Array, relaxation: Array, columns: SiteColumns) -> Array:
        """:func:`relaxed_q` of this rule's variant, penalty and weight."""
        return relaxed_q(tilted, y, relaxation, columns, float(self.c), self.variant, self.penalty)

    def optimal_relaxation(self, likelihood: Likelihood, y: Array, cavity: Cavity, site: Site) -> Array:
        r"""Line search :math:`b^* = \arg\min_{b\ge0} Q(b)` (:func:`line_search`), for
        every site at once; the arrays broadcast, ``y`` may hold a row of the likelihood's ``target_width`` a site
        (a count and its log exposure)."""
        cols = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (cavity.mean, cavity.var, site.precision,
                                                                          site.mean, site.marginal_var)))  # fmt: skip
        y = np.asarray(y, dtype=float)
        width = likelihood.target_width
        rows = width > 1 and y.shape[-1:] == (width,) and y.ndim > np.ndim(cavity.mean)
        shape = np.broadcast_shapes(cols[0].shape, y.shape[:-1] if rows else y.shape)
        columns = tuple(np.broadcast_to(c, shape).ravel() for c in cols)
        y = np.broadcast_to(y, shape + y.shape[-1:] if rows else shape).reshape((-1, width) if rows else (-1,))
        searched = np.ones(columns[0].shape, dtype=bool)
        return line_search(self, TiltedPieces(np, likelihood), y, columns, searched).reshape(shape)  # type: ignore[arg-type]

    def relaxed_site(
        self, tilted: TiltedPieces, y: Array, cavity_mean: Array, cavity_var: Array, site_mean: Array, b: Array
    ) -> tuple[Array, Array]:
        r"""The undamped site at relaxations ``b``, in ``tilted.xp``: EP's moment matching at the relaxed cavity
        (:func:`~relaxep.sites.relaxed_cavity`), :math:`\tau_b = -d_2/(1 + \tilde\lambda d_2)`,
        :math:`\nu_b = (d_1 - \tilde h d_2)/(1 + \tilde\lambda d_2)` (:func:`~relaxep.sites.site_from_tilted`), then
        the variant's step (e) (:data:`SITE_STEPS`)."""
        mean, var = relaxed_cavity(cavity_mean, cavity_var, site_mean, b)
        lz = tilted.log_z(y, mean, var)
        tau_b, nu_b = site_from_tilted(lz.dlog_z, lz.d2log_z, mean, var)
        return SITE_STEPS[self.variant](tau_b, nu_b, b, site_mean)

    def _propose(self, likelihood: Likelihood, y: Array, cavity: Cavity, site: Site) -> tuple[Array, Array, Array]:
        b = self.optimal_relaxation(likelihood, y, cavity, site)
        tau, nu = self.relaxed_site(TiltedPieces(np, likelihood), y, cavity.mean, cavity.var, site.mean, b)
        return tau, nu, b


def derived_site(tau_b: Array, nu_b: Array, relaxation: Array, site_mean: Array) -> tuple[Array, Array]:
    """Step (e) of the derived rule is the identity (:doc:`the decisions page </decisions>`)."""
    return tau_b, nu_b


#: each variant's site step (e): from the site :math:`(\tau_b, \nu_b)` at the relaxed cavity, the relaxation
#: :math:`b` and the site mean :math:`m_i`, the new site
SITE_STEPS: dict[str, Callable[[Array, Array, Array, Array], tuple[Array, Array]]] = {
    "derived": derived_site,
    "paper": paper_site,
}


@dataclass(frozen=True)
class TiltedPieces:
    r"""What Relaxed EP reads of ``likelihood`` at the relaxed cavities, in the namespace ``xp``:
    :math:`\log\hat Z, d_1, d_2` (:class:`~relaxep.likelihoods.TiltedLogZ`) and :math:`E_{\hat p}[\log t]`.

    On the host numpy's rules (:meth:`~relaxep.likelihoods.Likelihood.log_z`,
    :meth:`~relaxep.likelihoods.Likelihood.expected_log_lik`); with ``on_device`` the device's, on the arrays'
    device (:meth:`~relaxep.likelihoods.Likelihood.log_z_on` at :math:`u = 1`,
    :meth:`~relaxep.likelihoods.Likelihood.log_z_and_expected_on`: numpy's formula for the closed forms, within
    1e-8 for the sinh rule).  Every other step of the rule is one formula for both.
    """

    xp: ModuleType
    likelihood: Likelihood
    on_device: bool = False

    def log_z(self, y: Array, mean: Array, var: Array) -> TiltedLogZ:
        r""":math:`\log\hat Z, d_1, d_2` at the cavities ``(mean, var)``."""
        if self.on_device:
            return self.likelihood.log_z_on(self.xp, y, mean, var, 1.0)
        return self.likelihood.log_z(y, mean, var)

    def log_z_and_expected(self, y: Array, mean: Array, var: Array) -> tuple[TiltedLogZ, Array]:
        r""":meth:`log_z` and :math:`E_{\hat p}[\log t]` at the cavities ``(mean, var)``."""
        if self.on_device:
            return self.likelihood.log_z_and_expected_on(self.xp, y, mean, var)
        return self.likelihood.log_z(y, mean, var), self.likelihood.expected_log_lik(y, mean, var)


def relaxed_q(
    tilted: TiltedPieces,
    y: Array,
    relaxation: Array,
    columns: SiteColumns,
    c: float,
    variant: Literal["derived", "paper"] = "derived",
    penalty: Literal["absolute", "scale_free"] = "absolute",
) -> Array:
    r""":math:`Q(b)` of Relaxed EP's ``variant`` and ``penalty`` with weight ``c`` at relaxations :math:`b` (arrays
    broadcast), in ``tilted.xp``.

    At the relaxed cavity :math:`\tilde\lambda = (1/\lambda + b)^{-1}`, :math:`\tilde h = \tilde\lambda(h/\lambda
    + b m_i)` (:func:`~relaxep.sites.relaxed_cavity`), from :math:`\log\hat Z, d_1, d_2` and :math:`E[\log t]`
    there (:class:`TiltedPieces`):

    .. math::
        Q(b) = E[\log t] - \log\hat Z + \tfrac12\log(1 + \tilde\lambda d_2) - \tfrac12\tilde\lambda(d_2 + d_1^2)
        + c\,b\ (\text{or } c\,b\lambda,\ \texttt{penalty="scale\_free"}),

    the derived variant (:func:`relaxed_objective`, :func:`tilted_kl`), or the paper's printed one
    (:func:`~relaxep.sites.paper.paper_relaxed_objective`, :func:`~relaxep.sites.paper.paper_terms`; the
    ``NoisyStep`` only).  ``columns``: the cavity means :math:`h_i` and variances :math:`\lambda_i`, the site
    precisions :math:`\tau_i` and means :math:`m_i`, the marginal variances :math:`A_{ii}`.
    """
    cavity_mean, cavity_var, tau, site_mean, marginal_var = columns
    if variant == "paper" and not isinstance(tilted.likelihood, NoisyStep):
        raise ValueError("the paper's printed Q(b) is defined for the NoisyStep likelihood only")
    mean, var = relaxed_cavity(cavity_mean, cavity_var, site_mean, relaxation)
    lz, expected = tilted.log_z_and_expected(y, mean, var)
    if variant == "paper":
        return paper_terms(
            tilted.xp, lz, expected, relaxation, (mean, var), cavity_mean, cavity_var, site_mean, tau, marginal_var, c
        )
    cost = relaxation * cavity_var if penalty == "scale_free" else relaxation
    return tilted_kl(tilted.xp, lz, expected, var) + c * cost


def line_search(
    rule: RelaxedEP,
    tilted: TiltedPieces,
    y: Array,
    columns: SiteColumns,
    searched: Array,
    site_points: int | None = None,
) -> Array:
    r""":math:`b^* = \arg\min_{b \ge 0} Q(b)` (:func:`relaxed_q`) for every site, in ``tilted.xp``.

    1. **The grid** :math:`b \in \{0\} \cup \{10^{-4}, \dots, 10^4\}/\lambda` (``rule.grid``, 34 points,
       :math:`\lambda` the cavity variance).  Its best point :math:`b_k` (the first of equal minima) brackets
       :math:`[b_{k-1}, b_{k+1}]`.
    2. **Three zooms** (``rule.n_zoom``) of 17 points (``rule.zoom_points``) across the bracket; a zoom's best
       replaces the best so far where its :math:`Q` is strictly lower, and the next bracket is
       :math:`b^* \pm (hi - lo)/16` (clipped at 0).
    3. :math:`0` where :math:`Q(0) \le Q_{best}`, else :math:`b_{best}`; and :math:`0` at every site where no
       ``searched`` site's grid minimum left :math:`b = 0` (Q rises on the only side of 0).

    Each stage's points are visited in order with a running minimum (a point replaces the best where its
    :math:`Q` is strictly lower: ``argmin``'s first of equal minima).  An evaluation of :math:`Q` takes
    :math:`\lfloor` ``site_points`` :math:`/ n\rfloor` points of a stage (at least 1) as one 1-d vector of sites,
    so memory is bounded (:data:`relaxep.sites.relaxed_on.SITE_POINTS`); ``None`` (the host): the whole stage, as
    numpy's adaptive rules, which size their nodes on the batch, always saw it.  A likelihood computed elementwise
    gives the same iterates either way.  On the host the last rule's test is read back once, after the grid, and
    the zooms skipped where it holds; on a device it is an ``xp.where`` (nothing is read back).  On the host with
    ``site_points=None`` the running minimum is read off each stage's table of :math:`Q` by ``argmin`` instead
    (``_host_line_search``: the same iterates, no Python step per point).

    Parameters
    ----------
    rule : RelaxedEP
        Its variant, penalty, weight ``c``, grid and zooms.
    tilted : TiltedPieces
        The likelihood's pieces, in the namespace ``xp`` of the arrays.
    y : array
        The sites' targets (a row a site where the likelihood's ``target_width`` is above 1).
    columns : tuple of array
        :func:`relaxed_q`'s, each 1-d over the ``n`` sites.
    searched : array of bool
        The sites the search is handed (the proper cavities); the others' :math:`b` are any values, and they
        do not take part in the last rule's test.
    site_points : int, optional
        The most site-points an evaluation of :math:`Q` takes.
    """
    if site_points is None and not tilted.on_device:
        return _host_line_search(rule, tilted, y, columns, searched)
    xp = tilted.xp
    cavity_var = columns[1]
    stages = _Stages(rule, tilted, y, columns, site_points)
    grid = [float(g) for g in rule.grid]
    last = len(grid) - 1
    zero = xp.zeros_like(cavity_var)
    best_b = zero_q = best_q = lo = hi = zero
    moved = xp.zeros_like(cavity_var, dtype=xp.bool)  # (numpy's argmin k > 0)
    for p, b, value in stages([g / cavity_var for g in grid]):
        if p == 0:
            best_b, zero_q, best_q, lo, hi = b, value, value, b, grid[1] / cavity_var
            continue
        better = value < best_q
        best_q, best_b = xp.where(better, value, best_q), xp.where(better, b, best_b)
        lo = xp.where(better, grid[p - 1] / cavity_var, lo)
        hi = xp.where(better, grid[min(p + 1, last)] / cavity_var, hi)
        moved = moved | better
    moved_any = xp.any(moved & searched)
    if not tilted.on_device and not bool(moved_any):
        return zero
    frac = [float(f) for f in np.linspace(0.0, 1.0, rule.zoom_points)]
    for _ in range(rule.n_zoom):
        for _p, b, value in stages([lo + (hi - lo) * f for f in frac]):
            better = value < best_q
            best_q, best_b = xp.where(better, value, best_q), xp.where(better, b, best_b)
        width = (hi - lo) / (rule.zoom_points - 1)
        lo, hi = xp.maximum(best_b - width, zero), best_b + width
    found = xp.where(zero_q <= best_q, zero, best_b)
    return xp.where(moved_any, found, zero)


def _host_line_search(rule: RelaxedEP, tilted: TiltedPieces, y: Array, columns: SiteColumns, searched: Array) -> Array:
    """:func:`line_search` on the host, each stage's running minimum read off its ``(points, n)`` table of
    :math:`Q` by ``argmin`` (its first of equal minima is the running minimum's strict replacement): the same
    :math:`Q` evaluations and the same iterates, without a Python step per point (a sequential sweep searches one
    site at a time, 85 points a site)."""
    cavity_var = np.asarray(columns[1])
    stages = _Stages(rule, tilted, y, columns, None)
    grid = np.asarray(rule.grid, dtype=float)
    last = grid.size - 1
    values = stages.table(grid[:, None] / cavity_var)
    sites = np.arange(cavity_var.shape[0])
    k = np.argmin(values, axis=0)
    zero_q, best_q = values[0], values[k, sites]
    zero = np.zeros_like(cavity_var)
    if not np.any((k > 0) & np.asarray(searched, dtype=bool)):
        return zero
    best_b = grid[k] / cavity_var
    lo, hi = grid[np.maximum(k - 1, 0)] / cavity_var, grid[np.minimum(k + 1, last)] / cavity_var
    frac = np.linspace(0.0, 1.0, rule.zoom_points)[:, None]
    for _ in range(rule.n_zoom):
        points = lo + (hi - lo) * frac
        values = stages.table(points)
        k = np.argmin(values, axis=0)
        zoom_q = values[k, sites]
        better = zoom_q < best_q
        best_q, best_b = np.where(better, zoom_q, best_q), np.where(better, points[k, sites], best_b)
        width = (hi - lo) / (rule.zoom_points - 1)
        lo, hi = np.maximum(best_b - width, zero), best_b + width
    return np.where(zero_q <= best_q, zero, best_b)


class _Stages:
    r""":math:`Q` at a stage's points (each an array of one :math:`b` per site), ``group`` points an evaluation:
    their relaxations concatenated into one vector of sites against the columns and targets repeated as often, so
    a likelihood sees 1-d sites as ever and each site-point is computed as alone; :math:`+\infty` where
    :math:`Q` is not finite."""

    def __init__(self, rule: RelaxedEP, tilted: TiltedPieces, y: Array, columns: SiteColumns, site_points: int | None):
        self.rule, self.tilted, self.y, self.columns = rule, tilted, y, columns
        self.n = int(columns[1].shape[0])
        self.group = None if site_points is None else max(1, site_points // max(self.n, 1))
        xp = tilted.xp
        self._concat = xp.concat if hasattr(xp, "concat") else xp.concatenate  # (numpy before 2.0)
        self._tiled: dict[int, tuple[Array, SiteColumns]] = {}

    def _repeated(self, times: int) -> tuple[Array, SiteColumns]:
        if times == 1:
            return self.y, self.columns
        if times not in self._tiled:
            tiled = tuple(self._concat([c] * times, axis=0) for c in self.columns)
            self._tiled[times] = (self._concat([self.y] * times, axis=0), tiled)  # type: ignore[assignment]
        return self._tiled[times]

    def table(self, points: Array) -> Array:
        """The host's whole stage at once: :math:`Q` at ``points`` (numpy, ``(p, n)``, a row a point), ``(p, n)``."""
        y, columns = self._repeated(points.shape[0])
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            value = self.rule.q(self.tilted, y, points.reshape(-1), columns)
        return np.where(np.isfinite(value), value, np.inf).reshape(points.shape)

    def __call__(self, points: list[Array]) -> Iterator[tuple[int, Array, Array]]:
        """``(index, b, Q(b))`` for each of ``points`` in order."""
        xp, n = self.tilted.xp, self.n
        group = len(points) if self.group is None else self.group
        for first in range(0, len(points), group):
            chunk = points[first : first + group]
            y, columns = self._repeated(len(chunk))
            b = chunk[0] if len(chunk) == 1 else self._concat(chunk, axis=0)
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                value = self.rule.q(self.tilted, y, b, columns)
            value = xp.where(xp.isfinite(value), value, xp.full_like(value, float("inf")))
            for j, point in enumerate(chunk):
                yield first + j, point, value if len(chunk) == 1 else value[j * n : (j + 1) * n]
