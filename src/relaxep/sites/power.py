r"""EP and its power family: moment matching of :math:`t^u` at a cavity.

:class:`EP` (Minka 2001), :class:`PowerEP` (the paper's Appendix C) and :class:`FractionalEP`
(Minka's standard power EP) share one proposal: moment-match :math:`p(y|f)^u N(f | h, \lambda)`
and divide the resulting site by :math:`u`.  They differ in :math:`u` and in how much of the
site the cavity removes (:attr:`~relaxep.sites.SiteRule.cavity_fraction`).
"""

from __future__ import annotations

import numpy as np

from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep.likelihoods import Likelihood
from relaxep.sites.base import Cavity, Site, SiteRule, check_damping, site_from_tilted

__all__ = ["EP", "FractionalEP", "PowerEP"]


class _MomentMatching(SiteRule):
    """Moment-match ``t^u`` at the cavity; the new site is the tilted site divided by ``u``."""

    @property
    def _power(self) -> float:
        return 1.0

    @property
    def tilted_power(self) -> float:
        r"""The power :math:`u` of :math:`p(y|f)^u` whose tilted moments the rule matches (1 for EP)."""
        return self._power

    def _propose(self, likelihood: Likelihood, y: Array, cavity: Cavity, site: Site) -> tuple[Array, Array, Array]:
        u = self._power
        lz = likelihood.log_z(y, cavity.mean, cavity.var, power=u)
        tau_u, nu_u = site_from_tilted(lz.dlog_z, lz.d2log_z, cavity.mean, cavity.var)
        return tau_u / u, nu_u / u, np.zeros_like(tau_u)


class EP(_MomentMatching):
    r"""Expectation propagation: moment-match :math:`p(y|f) N(f | h, \lambda)` (Minka 2001, 5.4)."""

    def __init__(self, damping: float = 1.0) -> None:
        self.damping = check_damping(damping)


class PowerEP(_MomentMatching):
    r"""Power EP as in the paper's Appendix C.

    Moment-match :math:`p(y|f)^u N(f | h, \lambda)` at the *full* cavity, giving a site
    :math:`(\tau_u, \nu_u)`; then scale the site variance by :math:`u`
    (:math:`v \leftarrow u v`): :math:`\tau = \tau_u / u`, :math:`\nu = \nu_u / u`, the site
    :math:`(\tilde t^{(u)})^{1/u}` with unchanged mean.  ``u = 1`` is EP exactly.
    """

    def __init__(self, u: float = 0.8, damping: float = 1.0) -> None:
        check_unit_interval(u, "power u")
        self.u = u
        self.damping = check_damping(damping)

    @property
    def _power(self) -> float:
        return float(self.u)


class FractionalEP(_MomentMatching):
    r"""Minka's standard power EP (fractional EP, :math:`\alpha`-divergence EP).

    The cavity removes only the fraction :math:`\eta` (``fraction``) of the site,
    :math:`q^{\setminus\eta} \propto q / \tilde t^{\eta}`; moment-match
    :math:`p(y|f)^{\eta} q^{\setminus\eta}` and set
    :math:`\tilde t_{new}^{\eta} = \mathrm{proj}[t^\eta q^{\setminus\eta}] / q^{\setminus\eta}`:
    :math:`\tau = \tau_\eta/\eta`, :math:`\nu = \nu_\eta/\eta`.  Its cavity stays proper where
    EP's does not (it removes less precision), at the price of a different fixed point
    (:math:`\eta \to 0` tends to variational Bayes).  ``fraction = 1`` is EP.  Unlike
    :class:`PowerEP`, whose moments are taken at the full cavity.
    """

    def __init__(self, fraction: float = 0.5, damping: float = 1.0) -> None:
        check_unit_interval(fraction, "fraction")
        self.fraction = fraction
        self.damping = check_damping(damping)

    @property
    def cavity_fraction(self) -> float:  # type: ignore[override]
        return float(self.fraction)

    @property
    def _power(self) -> float:
        return float(self.fraction)
