r"""Relaxed EP (Qi & Guo, Section 5): EP with a relaxed cavity whose strength is chosen per site.

The relaxation :math:`r_i(g) = \exp(-b (g - m_i)^2/2)` (:math:`b \ge 0` a precision, centred
at the site's mean) multiplies the cavity before moment matching; :math:`b^*` minimises the
KL of the relaxed tilted distribution to its projection plus the penalty :math:`c\,b`
(:doc:`the decisions page </decisions>` derives the closed form and corrects the paper's Appendix B).
"""

from __future__ import annotations

from types import ModuleType
from typing import Literal

import numpy as np

from relaxep._typing import Array
from relaxep.likelihoods import Likelihood, TiltedLogZ
from relaxep.sites.base import Cavity, Site, SiteRule, check_damping, relaxed_cavity, site_from_tilted
from relaxep.sites.paper import paper_relaxed_objective, paper_site

__all__ = ["RelaxedEP", "relaxed_cavity", "relaxed_kl", "relaxed_objective"]


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
    mean, var = relaxed_cavity(cavity_mean, cavity_var, site_mean, relaxation)
    cost = relaxation * cavity_var if penalty == "scale_free" else relaxation
    return relaxed_kl(likelihood, y, mean, var) + relax_weight * cost


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

    _grid = np.concatenate([[0.0], np.logspace(-4.0, 4.0, 33)])
    _n_zoom = 3
    _zoom_points = 17

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
        return self._objective(
            likelihood, y, relaxation, cavity.mean, cavity.var, site.precision, site.mean, site.marginal_var
        )

    def _objective(
        self,
        likelihood: Likelihood,
        y: Array,
        relaxation: Array,
        cavity_mean: Array,
        cavity_var: Array,
        tau: Array,
        site_mean: Array,
        marginal_var: Array,
    ) -> Array:
        objective = _VARIANTS[self.variant][0]
        return objective(self, likelihood, y, relaxation, cavity_mean, cavity_var, tau, site_mean, marginal_var)

    def optimal_relaxation(self, likelihood: Likelihood, y: Array, cavity: Cavity, site: Site) -> Array:
        r"""Line search :math:`b^* = \arg\min_{b\ge0} Q(b)`, vectorised over sites."""
        columns = (cavity.mean, cavity.var, site.precision, site.mean, site.marginal_var)
        cols = [np.asarray(a, dtype=float)[..., None] for a in columns]
        cavity_mean, cavity_var, tau, site_mean, marginal_var = np.broadcast_arrays(*cols)
        y = np.asarray(y, dtype=float)
        # one target per site, or a row of the likelihood's target_width (a count and its log exposure): the
        # grid's axis goes before the row
        width = likelihood.target_width
        rows = width > 1 and y.shape[-1:] == (width,) and y.ndim > np.ndim(cavity.mean)
        y = y[..., None, :] if rows else y[..., None]

        def q(b: Array) -> Array:
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                val = self._objective(likelihood, y, b, cavity_mean, cavity_var, tau, site_mean, marginal_var)
            return np.where(np.isfinite(val), val, np.inf)

        grid = self._grid / cavity_var
        values = q(grid)
        k = np.argmin(values, axis=-1)[..., None]
        if not np.any(k):
            return np.zeros(values.shape[:-1])
        last = grid.shape[-1] - 1
        lo = np.take_along_axis(grid, np.maximum(k - 1, 0), axis=-1)
        hi = np.take_along_axis(grid, np.minimum(k + 1, last), axis=-1)
        best_b = np.take_along_axis(grid, k, axis=-1)
        best_q = np.take_along_axis(values, k, axis=-1)
        frac = np.linspace(0.0, 1.0, self._zoom_points)
        for _ in range(self._n_zoom):
            pts = lo + (hi - lo) * frac
            vals = q(pts)
            j = np.argmin(vals, axis=-1)[..., None]
            cand_q = np.take_along_axis(vals, j, axis=-1)
            better = cand_q < best_q
            best_b = np.where(better, np.take_along_axis(pts, j, axis=-1), best_b)
            best_q = np.where(better, cand_q, best_q)
            width = (hi - lo) / (self._zoom_points - 1)
            lo, hi = np.maximum(best_b - width, 0.0), best_b + width
        # b = 0 whenever it is at least as good (Q rises on the only side of 0).
        zero_q = values[..., :1]
        return np.where(zero_q <= best_q, 0.0, best_b)[..., 0]

    def _propose(self, likelihood: Likelihood, y: Array, cavity: Cavity, site: Site) -> tuple[Array, Array, Array]:
        b = self.optimal_relaxation(likelihood, y, cavity, site)
        site_mean = site.mean
        mean, var = relaxed_cavity(cavity.mean, cavity.var, site_mean, b)
        lz = likelihood.log_z(y, mean, var)
        tau_b, nu_b = site_from_tilted(lz.dlog_z, lz.d2log_z, mean, var)
        tau, nu = _VARIANTS[self.variant][1](tau_b, nu_b, b, site_mean)
        return tau, nu, b


def _derived_site(tau_b: Array, nu_b: Array, relaxation: Array, site_mean: Array) -> tuple[Array, Array]:
    """Step (e) of the derived rule is the identity (:doc:`the decisions page </decisions>`)."""
    return tau_b, nu_b


#: each variant's objective Q(b) (arguments: the rule, likelihood, y, b, cavity mean and variance, the
#: site's precision and mean, the marginal variance) and its site step (e)
_VARIANTS = {
    "derived": (
        lambda rule, lik, y, b, h, lam, tau, m, a: relaxed_objective(lik, y, b, h, lam, m, float(rule.c), rule.penalty),
        _derived_site,
    ),
    "paper": (
        lambda rule, lik, y, b, h, lam, tau, m, a: paper_relaxed_objective(lik, y, b, h, lam, m, tau, a, float(rule.c)),
        paper_site,
    ),
}
