"""Site-update rules: EP, Power EP, fractional EP and Relaxed EP, representation-free and vectorised."""

from relaxep.sites.base import (
    Cavity,
    Site,
    SiteProposal,
    SiteRule,
    damped,
    propose_sites,
    relaxed_cavity,
    site_from_tilted,
)
from relaxep.sites.paper import paper_relaxed_objective
from relaxep.sites.power import EP, FractionalEP, PowerEP, moment_match, site_from_moments
from relaxep.sites.relaxed import RelaxedEP, relaxed_kl, relaxed_objective

__all__ = [
    "EP",
    "Cavity",
    "FractionalEP",
    "PowerEP",
    "RelaxedEP",
    "Site",
    "SiteProposal",
    "SiteRule",
    "damped",
    "moment_match",
    "paper_relaxed_objective",
    "propose_sites",
    "relaxed_cavity",
    "relaxed_kl",
    "relaxed_objective",
    "site_from_moments",
    "site_from_tilted",
]
