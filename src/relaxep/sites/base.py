r"""The site-rule interface and the one primitive every rule reduces to.

Naming (as GPML states its own): a *site* is the Gaussian factor
:math:`\tilde t_i(f_i) \propto \exp(-\tau_i f_i^2/2 + \nu_i f_i)` that stands in for the
likelihood :math:`t_i`; its natural parameters are the *precision* :math:`\tau_i` and the
*mean-precision* :math:`\nu_i = \tau_i m_i` (so a flat site is :math:`\tau_i = 0` and a
negative site variance is :math:`\tau_i < 0`).  The *cavity* :math:`N(h_i, \lambda_i)` is the
posterior marginal with (a fraction of) the site divided out, and the *tilted*
distribution is :math:`p(y_i | f_i) \times` cavity.  Rules work on the latent :math:`f` and pass
the targets :math:`y` to the likelihood, which answers for them (a binary likelihood folds
:math:`g = y f` inside, once).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np

from relaxep._params import ParamsMixin
from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep.likelihoods import Likelihood

__all__ = [
    "Cavity",
    "Site",
    "SiteProposal",
    "SiteRule",
    "damped",
    "propose_sites",
    "relaxed_cavity",
    "site_from_tilted",
    "site_mean_in",
]


@dataclass(frozen=True)
class Cavity:
    """Cavity :math:`N(h, \\lambda)` of the latent (floats or arrays over sites)."""

    mean: Array
    var: Array


def site_mean_in(xp: ModuleType, tau: Array, nu: Array) -> Array:
    r"""Site means :math:`m_i = \nu_i/\tau_i`, 0 where :math:`\tau_i = 0` (a flat site), in the namespace ``xp``
    of ``tau`` and ``nu`` (numpy's for :attr:`Site.mean`, a device's for :mod:`relaxep.sites.relaxed_on`)."""
    nonzero = tau != 0.0
    return xp.where(nonzero, nu / xp.where(nonzero, tau, xp.ones_like(tau)), xp.zeros_like(tau))


@dataclass(frozen=True)
class Site:
    r"""A site's current natural parameters and the posterior marginal variance :math:`A_{ii}`."""

    precision: Array
    mean_precision: Array
    marginal_var: Array

    @property
    def mean(self) -> Array:
        r"""Site mean :math:`m_i = \nu_i / \tau_i`, and 0 for a flat site (:math:`\tau_i = 0`)."""
        return site_mean_in(np, np.asarray(self.precision, dtype=float), self.mean_precision)


@dataclass(frozen=True)
class SiteProposal:
    """New site natural parameters ``(tau, nu)`` and the relaxation ``b`` used (0 for EP, Power EP)."""

    precision: Array
    mean_precision: Array
    relaxation: Array


def relaxed_cavity(cavity_mean: Array, cavity_var: Array, site_mean: Array, relaxation: Array) -> tuple[Array, Array]:
    r"""Cavity multiplied by the relaxation :math:`r(f) = \exp(-b (f - m_i)^2 / 2)` (Relaxed EP).

    .. math::
        \tilde\lambda = \frac{1}{1/\lambda + b},\qquad
        \tilde h = \tilde\lambda \Big(\frac{h}{\lambda} + b\, m_i\Big).
    """
    var = 1.0 / (1.0 / cavity_var + relaxation)
    return var * (cavity_mean / cavity_var + relaxation * site_mean), var


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
    with np.errstate(divide="ignore", invalid="ignore"):  # a degenerate tilted: non-finite, counted by the schedules
        return -d2log_z / denom, (dlog_z - cavity_mean * d2log_z) / denom


class SiteRule(ParamsMixin):
    r"""Base class: propose a site for a cavity, then damp in natural parameters.

    With step size :math:`s` (``damping``; 1 is undamped),
    :math:`\tau \leftarrow (1-s)\tau_{old} + s\,\tau_{new}`, likewise :math:`\nu`.
    Subclasses implement :meth:`_propose`.
    """

    damping: float = 1.0
    #: fraction of the site the cavity removes (1: the whole site, as EP, the paper's PEP and REP)
    cavity_fraction: float = 1.0

    @property
    def moment_powers(self) -> tuple[float, float] | None:
        r"""``(u, eta)`` where the rule's proposal is moment matching alone
        (:func:`~relaxep.sites.power.moment_match` of :math:`t^u` at the cavity that removes the fraction
        :math:`\eta` of the site: EP, Power EP, fractional EP); ``None`` for a rule with its own search."""
        return None

    def update(self, likelihood: Likelihood, y: Array, cavity: Cavity, site: Site) -> SiteProposal:
        """New (damped) site parameters for targets ``y`` at ``cavity``, given the ``site``'s current ones."""
        tau, nu, relaxation = self._propose(likelihood, np.asarray(y, dtype=float), cavity, site)
        tau, nu = damped(float(self.damping), site.precision, site.mean_precision, tau, nu)
        return SiteProposal(tau, nu, relaxation)

    def _propose(self, likelihood: Likelihood, y: Array, cavity: Cavity, site: Site) -> tuple[Array, Array, Array]:
        """Undamped ``(tau, nu, b)``."""
        raise NotImplementedError


def damped(damping: float, tau: Array, nu: Array, new_tau: Array, new_nu: Array) -> tuple[Array, Array]:
    r"""A damped site update in natural parameters, any array library:
    :math:`\tau \leftarrow (1-s)\tau + s\,\tau^*`, likewise :math:`\nu` (the proposal itself where
    :math:`s = 1`)."""
    if damping == 1.0:
        return new_tau, new_nu
    return (1.0 - damping) * tau + damping * new_tau, (1.0 - damping) * nu + damping * new_nu


def check_damping(damping: float) -> float:
    """Validate ``damping`` and return it unchanged (parameters are stored as given, for ``clone``)."""
    check_unit_interval(damping, "damping (the step size of a site update)")
    return damping


def propose_sites(
    rule: SiteRule,
    likelihood: Likelihood,
    y: Array,
    cavity_mean: Array,
    cavity_var: Array,
    site_precision: Array,
    site_mean_precision: Array,
    marginal_var: Array,
) -> SiteProposal:
    r"""``rule``'s new sites (floats or arrays over sites) for targets ``y`` at these cavities."""
    site = Site(site_precision, site_mean_precision, marginal_var)
    return rule.update(likelihood, y, Cavity(cavity_mean, cavity_var), site)
