r"""Site-update rules: EP, Power EP and Relaxed EP.

A rule takes the cavity of one or many sites (in the label-folded latent
:math:`g = y f`) and the sites' current natural parameters, and proposes new
natural parameters :math:`(\tau_i, \nu_i)` of the Gaussian site
:math:`\tilde t_i(g) \propto \exp(-\tau_i g^2 / 2 + \nu_i g)`.  Rules are vectorised:
every argument may be an array over sites, so the sequential schedule (one site
at a time) and a parallel schedule (all sites at once) share them.

All three rules reduce to one primitive, :func:`site_from_tilted`: the site that
turns a cavity into the moment-matched tilted distribution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from relaxep._params import ParamsMixin
from relaxep.likelihoods import Likelihood, NoisyStep

__all__ = [
    "EP",
    "DoubleLoopEP",
    "FractionalEP",
    "PowerEP",
    "RelaxedEP",
    "SiteProposal",
    "SiteRule",
    "paper_relaxed_objective",
    "relaxed_cavity",
    "relaxed_kl",
    "relaxed_objective",
    "site_from_tilted",
]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class SiteProposal:
    """New site natural parameters ``(tau, nu)`` and the relaxation ``b`` used (0 for EP, Power EP)."""

    precision: Array
    mean_precision: Array
    relaxation: Array


def site_from_tilted(dlog_z: Array, d2log_z: Array, cavity_mean: Array, cavity_var: Array) -> tuple[Array, Array]:
    r"""Site natural parameters that moment-match the tilted distribution.

    With :math:`d_1, d_2` the derivatives of :math:`\log Z` in the cavity mean
    :math:`\mu` (variance :math:`s^2`), the tilted moments are
    :math:`\hat m = \mu + s^2 d_1`, :math:`\hat v = s^2 (1 + s^2 d_2)` and the site
    (tilted / cavity) is (GPML, Rasmussen & Williams eq. 3.59):

    .. math::
        \tau = \frac{1}{\hat v} - \frac{1}{s^2} = \frac{-d_2}{1 + s^2 d_2},\qquad
        \nu = \frac{\hat m}{\hat v} - \frac{\mu}{s^2} = \frac{d_1 - \mu d_2}{1 + s^2 d_2}.
    """
    denom = 1.0 + cavity_var * d2log_z
    return -d2log_z / denom, (dlog_z - cavity_mean * d2log_z) / denom


def relaxed_cavity(cavity_mean: Array, cavity_var: Array, site_mean: Array, relaxation: Array) -> tuple[Array, Array]:
    r"""Cavity multiplied by the relaxation :math:`r(g) = \exp(-b (g - m_i)^2 / 2)`.

    .. math::
        \tilde\lambda = \frac{1}{1/\lambda + b},\qquad
        \tilde h = \tilde\lambda \Big(\frac{h}{\lambda} + b\, m_i\Big).
    """
    var = 1.0 / (1.0 / cavity_var + relaxation)
    return var * (cavity_mean / cavity_var + relaxation * site_mean), var


def relaxed_kl(likelihood: Likelihood, mean: Array, var: Array) -> Array:
    r"""KL between a tilted distribution and its Gaussian projection.

    For :math:`p \propto t(g) N(g | \tilde h, \tilde\lambda)` with normaliser
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
    lz = likelihood.log_z(mean, var)
    return (
        likelihood.expected_log_lik(mean, var)
        - lz.log_z
        + 0.5 * np.log1p(var * lz.d2log_z)
        - 0.5 * var * (lz.d2log_z + lz.dlog_z**2)
    )


def relaxed_objective(
    likelihood: Likelihood,
    relaxation: Array,
    cavity_mean: Array,
    cavity_var: Array,
    site_mean: Array,
    relax_weight: float,
    scale_free: bool = False,
) -> Array:
    r"""The derived REP objective :math:`Q(b) = \mathrm{KL}(p_b \| \mathrm{proj}\, p_b) + c\, b`.

    :math:`p_b \propto t\, r_b\, q^{\setminus i}`, :math:`r_b(g) = \exp(-b (g - m_i)^2/2)`,
    :math:`b \ge 0` a precision (DESIGN.md).  With ``scale_free=True`` the penalty is
    :math:`c\, b \lambda` (a dimensionless precision ratio), which makes ``c``
    independent of the kernel amplitude.
    """
    mean, var = relaxed_cavity(cavity_mean, cavity_var, site_mean, relaxation)
    penalty = relaxation * cavity_var if scale_free else relaxation
    return relaxed_kl(likelihood, mean, var) + relax_weight * penalty


def paper_relaxed_objective(
    likelihood: Likelihood,
    relaxation: Array,
    cavity_mean: Array,
    cavity_var: Array,
    site_mean: Array,
    site_precision: Array,
    marginal_var: Array,
    relax_weight: float,
) -> Array:
    r"""Appendix B's printed :math:`Q(b_i)`, term by term, kept for comparison.

    .. math::
        Q = E[\log t] + \frac{F - \tilde h m_b}{2 v_b}
            - \tfrac12\log\big(1 + (b + 1/v_b)\lambda\big) + \tfrac12\log(b\lambda + 1)
            - \tfrac12 b (m_i^2 - 2 m_i \tilde h + F)
            + \tfrac12\frac{(m_i - h)^2}{\lambda + 1/b} - \log\hat Z + c b,

    :math:`F = \tilde a + \tilde h^2`, :math:`\tilde a = a/(1 + a b)`,
    :math:`a = (1/A_{ii} + 1/v_b - 1/v_i)^{-1}`, :math:`\tilde h` the tilted mean and
    :math:`(m_b, v_b)` the site at the relaxed cavity.  DESIGN.md shows the term
    :math:`(F - \tilde h m_b)/(2 v_b)` is wrong (the KL part can go negative); it is
    implemented literally, for the ``variant="paper"`` study only.
    """
    if not isinstance(likelihood, NoisyStep):
        raise ValueError("the paper's printed Q(b) is defined for the NoisyStep likelihood only")
    mean, var = relaxed_cavity(cavity_mean, cavity_var, site_mean, relaxation)
    lz = likelihood.log_z(mean, var)
    tilted_mean = mean + var * lz.dlog_z
    tau_b, nu_b = site_from_tilted(lz.dlog_z, lz.d2log_z, mean, var)
    a_new = 1.0 / (1.0 / marginal_var + tau_b - site_precision)
    a_tilde = a_new / (1.0 + a_new * relaxation)
    big_f = a_tilde + tilted_mean**2
    lam = cavity_var
    return (
        likelihood.expected_log_lik(mean, var)
        + 0.5 * (tau_b * big_f - tilted_mean * nu_b)
        - 0.5 * np.log1p((relaxation + tau_b) * lam)
        + 0.5 * np.log1p(relaxation * lam)
        - 0.5 * relaxation * (site_mean**2 - 2.0 * site_mean * tilted_mean + big_f)
        + 0.5 * (site_mean - cavity_mean) ** 2 * relaxation / (relaxation * lam + 1.0)
        - lz.log_z
        + relax_weight * relaxation
    )


def _check_damping(damping: float) -> float:
    """Validate and return ``damping`` unchanged (parameters are stored as given, for ``clone``)."""
    if not (0.0 < float(damping) <= 1.0):
        raise ValueError(f"damping (the step size of a site update) must lie in (0, 1], got {damping!r}")
    return damping


class SiteRule(ParamsMixin):
    r"""Base class: propose a site, then damp in natural parameters.

    With step size :math:`s` (``damping``; 1 is undamped),
    :math:`\tau \leftarrow (1-s)\tau_{old} + s\,\tau_{new}`, likewise :math:`\nu`.
    """

    damping: float = 1.0
    #: fraction of the site the cavity removes (1: the whole site, as EP, the paper's PEP and REP)
    cavity_fraction: float = 1.0

    def update(
        self,
        likelihood: Likelihood,
        cavity_mean: Array,
        cavity_var: Array,
        site_precision: Array,
        site_mean_precision: Array,
        site_mean: Array,
        marginal_var: Array,
    ) -> SiteProposal:
        """New (damped) site parameters for cavities ``N(cavity_mean, cavity_var)``.

        ``site_mean`` (:math:`m_i = \\nu_i/\\tau_i`, 0 for a flat site) and
        ``marginal_var`` (:math:`A_{ii}`) are used by Relaxed EP only.
        """
        tau, nu, relaxation = self._propose(
            likelihood, cavity_mean, cavity_var, site_precision, site_mean_precision, site_mean, marginal_var
        )
        if self.damping != 1.0:
            s = float(self.damping)
            tau = (1.0 - s) * site_precision + s * tau
            nu = (1.0 - s) * site_mean_precision + s * nu
        return SiteProposal(tau, nu, relaxation)

    def _propose(self, likelihood, cavity_mean, cavity_var, tau, nu, site_mean, marginal_var):
        raise NotImplementedError


class EP(SiteRule):
    r"""Expectation propagation: moment-match :math:`t(g) N(g | h, \lambda)` (Minka 2001, 5.4)."""

    def __init__(self, damping: float = 1.0) -> None:
        self.damping = _check_damping(damping)

    def _propose(self, likelihood, cavity_mean, cavity_var, tau, nu, site_mean, marginal_var):
        lz = likelihood.log_z(cavity_mean, cavity_var)
        new_tau, new_nu = site_from_tilted(lz.dlog_z, lz.d2log_z, cavity_mean, cavity_var)
        return new_tau, new_nu, np.zeros_like(new_tau)


class PowerEP(SiteRule):
    r"""Power EP as in the paper's Appendix C.

    Moment-match :math:`t(g)^u N(g | h, \lambda)` at the *full* cavity, giving a site
    :math:`(\tau_u, \nu_u)`; then scale the site variance by :math:`u`
    (:math:`v \leftarrow u v`): :math:`\tau = \tau_u / u`, :math:`\nu = \nu_u / u`, the site
    :math:`(\tilde t^{(u)})^{1/u}` with unchanged mean.  ``u = 1`` is EP exactly.  This
    is not Minka's standard power EP (whose cavity removes only ``u`` of the site).
    """

    def __init__(self, u: float = 0.8, damping: float = 1.0) -> None:
        if not (0.0 < float(u) <= 1.0):
            raise ValueError(f"power u must lie in (0, 1], got {u!r}")
        self.u = u
        self.damping = _check_damping(damping)

    def _propose(self, likelihood, cavity_mean, cavity_var, tau, nu, site_mean, marginal_var):
        lz = likelihood.log_z(cavity_mean, cavity_var, power=self.u)
        tau_u, nu_u = site_from_tilted(lz.dlog_z, lz.d2log_z, cavity_mean, cavity_var)
        u = float(self.u)
        return tau_u / u, nu_u / u, np.zeros_like(tau_u)


class FractionalEP(SiteRule):
    r"""Minka's standard power EP (fractional EP, :math:`\alpha`-divergence EP).

    The cavity removes only the fraction :math:`\alpha` of the site,
    :math:`q^{\setminus\alpha} \propto q / \tilde t^{\alpha}` (the schedule forms it from
    ``cavity_fraction``); moment-match :math:`t(g)^{\alpha} q^{\setminus\alpha}` and set
    :math:`\tilde t_{new}^{\alpha} = \mathrm{proj}[t^\alpha q^{\setminus\alpha}] / q^{\setminus\alpha}`:
    :math:`\tau = \tau_\alpha/\alpha`, :math:`\nu = \nu_\alpha/\alpha`, with
    :math:`(\tau_\alpha, \nu_\alpha)` the site the tilted moments give.  Its cavity stays
    proper where EP's does not (it removes less precision), at the price of a different
    fixed point (:math:`\alpha \to 0` tends to variational Bayes).  ``alpha = 1`` is EP.
    Differs from :class:`PowerEP` (the paper's Appendix C), whose moments are taken at the
    full cavity.
    """

    def __init__(self, alpha: float = 0.5, damping: float = 1.0) -> None:
        if not (0.0 < float(alpha) <= 1.0):
            raise ValueError(f"fraction alpha must lie in (0, 1], got {alpha!r}")
        self.alpha = alpha
        self.damping = _check_damping(damping)

    @property
    def cavity_fraction(self) -> float:  # type: ignore[override]
        return float(self.alpha)

    def _propose(self, likelihood, cavity_mean, cavity_var, tau, nu, site_mean, marginal_var):
        a = float(self.alpha)
        lz = likelihood.log_z(cavity_mean, cavity_var, power=a)
        tau_a, nu_a = site_from_tilted(lz.dlog_z, lz.d2log_z, cavity_mean, cavity_var)
        return tau_a / a, nu_a / a, np.zeros_like(tau_a)


class RelaxedEP(SiteRule):
    r"""Relaxed EP (paper Section 5) with relaxation :math:`r_i(g) = \exp(-b (g - m_i)^2/2)`.

    1. :math:`b^* = \arg\min_{b \ge 0} Q(b)`, :math:`Q(b) = \mathrm{KL}(p_b \| \mathrm{proj}\,p_b) + c b`
       (:func:`relaxed_objective`), found on ``b = 0`` plus a log grid scaled by
       :math:`1/\lambda`, then refined by three zooms.
    2. Relaxed cavity :math:`(\tilde h, \tilde\lambda)` (:func:`relaxed_cavity`).
    3. EP moment matching there gives :math:`(\tau_b, \nu_b)`.
    4. ``variant="derived"`` (default): the new site is :math:`(\tau_b, \nu_b)` (step (e) is
       the identity, DESIGN.md).  ``variant="paper"``: the printed step (e),
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
        self.damping = _check_damping(damping)

    def objective(
        self,
        likelihood: Likelihood,
        relaxation: Array,
        cavity_mean: Array,
        cavity_var: Array,
        tau: Array,
        site_mean: Array,
        marginal_var: Array,
    ) -> Array:
        """``Q(b)`` of this rule's variant (arrays broadcast)."""
        if self.variant == "paper":
            return paper_relaxed_objective(
                likelihood, relaxation, cavity_mean, cavity_var, site_mean, tau, marginal_var, float(self.c)
            )
        return relaxed_objective(
            likelihood, relaxation, cavity_mean, cavity_var, site_mean, float(self.c), self.penalty == "scale_free"
        )

    def relaxation(
        self,
        likelihood: Likelihood,
        cavity_mean: Array | float,
        cavity_var: Array | float,
        tau: Array | float,
        site_mean: Array | float,
        marginal_var: Array | float,
    ) -> Array:
        """Line search :math:`b^* = \\arg\\min_{b\\ge0} Q(b)`, vectorised over sites."""
        cols = [np.asarray(a, dtype=float)[..., None] for a in (cavity_mean, cavity_var, tau, site_mean, marginal_var)]
        cavity_mean, cavity_var, tau, site_mean, marginal_var = np.broadcast_arrays(*cols)

        def q(b: Array) -> Array:
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                val = self.objective(likelihood, b, cavity_mean, cavity_var, tau, site_mean, marginal_var)
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
            step = (hi - lo) / (self._zoom_points - 1)
            lo, hi = np.maximum(best_b - step, 0.0), best_b + step
        # b = 0 whenever it is at least as good (Q rises on the only side of 0).
        zero_q = values[..., :1]
        return np.where(zero_q <= best_q, 0.0, best_b)[..., 0]

    def _propose(self, likelihood, cavity_mean, cavity_var, tau, nu, site_mean, marginal_var):
        b = self.relaxation(likelihood, cavity_mean, cavity_var, tau, site_mean, marginal_var)
        mean, var = relaxed_cavity(cavity_mean, cavity_var, site_mean, b)
        lz = likelihood.log_z(mean, var)
        tau_b, nu_b = site_from_tilted(lz.dlog_z, lz.d2log_z, mean, var)
        if self.variant == "paper":
            return tau_b + b, nu_b + b * site_mean, b
        return tau_b, nu_b, b


class DoubleLoopEP(SiteRule):
    r"""Double-loop EP (Heskes & Zoeter 2002; Opper & Winther 2005): EP's fixed points, convergently.

    Not a per-site rule: :func:`~relaxep.inference.infer` hands it to
    :func:`relaxep.double_loop.double_loop`, which minimises the expectation-consistent free
    energy by an outer loop over anchored cavities and a convex inner problem solved by
    Newton's method (``schedule`` and ``order`` do not apply; a "sweep" is one outer
    iteration).  Its answer, where it converges, is an EP fixed point with proper cavities;
    each outer iteration lowers the free energy, so it does not oscillate.

    Parameters
    ----------
    accelerate : bool
        SQUAREM extrapolation of the outer loop, kept only where it lowers the free energy
        more than the plain steps (default ``True``; ``False`` is the textbook double loop,
        often hundreds of outer iterations where EP is unstable).
    """

    def __init__(self, accelerate: bool = True) -> None:
        if not isinstance(accelerate, bool | np.bool_):
            raise TypeError(f"accelerate must be a bool, got {accelerate!r}")
        self.accelerate = accelerate
        self.damping = 1.0

    def _propose(self, likelihood, cavity_mean, cavity_var, tau, nu, site_mean, marginal_var):
        raise TypeError("DoubleLoopEP is not a per-site rule for a schedule; pass it to relaxep.infer")
