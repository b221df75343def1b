r"""The paper's printed Appendix-B objective, kept only to reproduce ``RelaxedEP(variant="paper")``.

:doc:`the decisions page </decisions>` shows one of its terms is wrong (the KL part can go negative); the
derived objective is :func:`relaxep.sites.relaxed_objective`.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from relaxep._typing import Array
from relaxep.likelihoods import Likelihood, NoisyStep, TiltedLogZ
from relaxep.sites.base import relaxed_cavity, site_from_tilted

__all__ = ["paper_relaxed_objective", "paper_site", "paper_terms"]


def paper_relaxed_objective(
    likelihood: Likelihood,
    y: Array,
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
    :math:`(m_b, v_b)` the site at the relaxed cavity.  :doc:`the decisions page </decisions>` shows the term
    :math:`(F - \tilde h m_b)/(2 v_b)` is wrong (the KL part can go negative); it is
    implemented literally, for the ``variant="paper"`` study only.
    """
    if not isinstance(likelihood, NoisyStep):
        raise ValueError("the paper's printed Q(b) is defined for the NoisyStep likelihood only")
    mean, var = relaxed_cavity(cavity_mean, cavity_var, site_mean, relaxation)
    lz, expected = likelihood.log_z(y, mean, var), likelihood.expected_log_lik(y, mean, var)
    return paper_terms(np, lz, expected, relaxation, (mean, var), cavity_mean, cavity_var, site_mean, site_precision,
                       marginal_var, relax_weight)  # fmt: skip


def paper_terms(
    xp: ModuleType,
    lz: TiltedLogZ,
    expected: Array,
    relaxation: Array,
    relaxed: tuple[Array, Array],
    cavity_mean: Array,
    cavity_var: Array,
    site_mean: Array,
    site_precision: Array,
    marginal_var: Array,
    relax_weight: float,
) -> Array:
    r""":func:`paper_relaxed_objective` from its pieces, in the namespace ``xp``: ``lz`` and ``expected``
    (:math:`\log\hat Z, d_1, d_2` and :math:`E[\log t]`) at the relaxed cavity ``relaxed`` (one formula: numpy's
    digits on the device, :mod:`relaxep.sites.relaxed_on`)."""
    mean, var = relaxed
    tilted_mean = mean + var * lz.dlog_z
    tau_b, nu_b = site_from_tilted(lz.dlog_z, lz.d2log_z, mean, var)
    a_new = 1.0 / (1.0 / marginal_var + tau_b - site_precision)
    a_tilde = a_new / (1.0 + a_new * relaxation)
    big_f = a_tilde + tilted_mean**2
    lam = cavity_var
    return (
        expected
        + 0.5 * (tau_b * big_f - tilted_mean * nu_b)
        - 0.5 * xp.log1p((relaxation + tau_b) * lam)
        + 0.5 * xp.log1p(relaxation * lam)
        - 0.5 * relaxation * (site_mean**2 - 2.0 * site_mean * tilted_mean + big_f)
        + 0.5 * (site_mean - cavity_mean) ** 2 * relaxation / (relaxation * lam + 1.0)
        - lz.log_z
        + relax_weight * relaxation
    )


def paper_site(tau_b: Array, nu_b: Array, relaxation: Array, site_mean: Array) -> tuple[Array, Array]:
    r"""The printed step (e): :math:`\tau = \tau_b + b`, :math:`\nu = \nu_b + b\, m_i`."""
    return tau_b + relaxation, nu_b + relaxation * site_mean
