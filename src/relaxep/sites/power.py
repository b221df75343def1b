r"""EP and its power family: moment matching of :math:`t^u` at a cavity.

:class:`EP` (Minka 2001), :class:`PowerEP` (the paper's Appendix C) and :class:`FractionalEP`
(Minka's standard power EP) share one proposal: moment-match :math:`p(y|f)^u N(f | h, \lambda)`
and divide the resulting site by :math:`u`.  They differ in :math:`u` and in how much of the
site the cavity removes (:attr:`~relaxep.sites.SiteRule.cavity_fraction`).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep._xp import is_numpy
from relaxep.likelihoods import Likelihood
from relaxep.sites.base import Cavity, Site, SiteRule, check_damping, site_from_tilted

__all__ = ["EP", "FractionalEP", "PowerEP", "moment_match", "site_from_moments"]


def moment_match(
    xp: ModuleType, likelihood: Likelihood, y: Array, cavity_mean: Array, cavity_var: Array, power: float = 1.0
) -> tuple[Array, Array, Array]:
    r"""The site that moment-matches :math:`p(y|f)^u N(f | h, \lambda)`, divided by :math:`u`, and
    :math:`\log\hat Z`: from the derivatives :math:`d_1, d_2` of :math:`\log\hat Z` in the cavity mean
    (:func:`~relaxep.sites.site_from_tilted`, Rasmussen & Williams eq. 3.59),

    .. math::
        \tau = \frac{1}{u}\,\frac{-d_2}{1 + \lambda d_2},\qquad
        \nu = \frac{1}{u}\,\frac{d_1 - h d_2}{1 + \lambda d_2}.

    ``xp`` the arrays' namespace: numpy's takes :meth:`Likelihood.log_z
    <relaxep.likelihoods.Likelihood.log_z>` (its adaptive rules), another library's :meth:`Likelihood.log_z_on
    <relaxep.likelihoods.Likelihood.log_z_on>` on the arrays' device (its fixed-size rules); one formula after.
    """
    if is_numpy(xp):
        lz = likelihood.log_z(y, cavity_mean, cavity_var, power=power)
    else:
        lz = likelihood.log_z_on(xp, y, cavity_mean, cavity_var, power)
    tau_u, nu_u = site_from_tilted(lz.dlog_z, lz.d2log_z, cavity_mean, cavity_var)
    return tau_u / power, nu_u / power, lz.log_z


def site_from_moments(
    tilted_mean: Array, tilted_var: Array, cavity_mean: Array, cavity_var: Array, power: float = 1.0
) -> tuple[Array, Array]:
    r""":func:`moment_match`'s site from the tilted moments themselves (a tilted distribution known by its mean
    :math:`\hat m` and variance :math:`\hat v`, as a two-latent site's is), any array library:

    .. math::
        \tau = \frac{1}{u}\Big(\frac{1}{\hat v} - \frac{1}{\lambda}\Big),\qquad
        \nu = \frac{1}{u}\Big(\frac{\hat m}{\hat v} - \frac{h}{\lambda}\Big).
    """
    return (1.0 / tilted_var - 1.0 / cavity_var) / power, (tilted_mean / tilted_var - cavity_mean / cavity_var) / power


class _MomentMatching(SiteRule):
    """Moment-match ``t^u`` at the cavity; the new site is the tilted site divided by ``u``."""

    @property
    def _power(self) -> float:
        return 1.0

    @property
    def tilted_power(self) -> float:
        r"""The power :math:`u` of :math:`p(y|f)^u` whose tilted moments the rule matches (1 for EP)."""
        return self._power

    @property
    def moment_powers(self) -> tuple[float, float] | None:
        r"""``(u, eta)``: the power of the tilted moments matched (:func:`moment_match`) and the fraction of the
        site the cavity removes; ``None`` for a subclass with a proposal of its own."""
        if type(self)._propose is not _MomentMatching._propose:
            return None
        return self._power, float(self.cavity_fraction)

    def _propose(self, likelihood: Likelihood, y: Array, cavity: Cavity, site: Site) -> tuple[Array, Array, Array]:
        tau, nu, _ = moment_match(np, likelihood, y, cavity.mean, cavity.var, self._power)
        return tau, nu, np.zeros_like(tau)


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
