r"""Where the convergent methods start: a posterior whose marginal moments the tilted family reaches.

:class:`~relaxep.inference.ConvergentEP` and :class:`~relaxep.inference.DoubleLoopEP` descend the
expectation-consistent free energy (Opper & Winther 2005; Heskes & Zoeter 2002)

.. math::
    \Phi(m, v) = \mathrm{KL}(q \,\|\, p) + \sum_i F_{r,i}(m_i, v_i) - \sum_i H[N(m_i, v_i)],

whose term :math:`F_{r,i}` is the convex conjugate of the tilted log-partition
:math:`L_i(h, c) = \log\int p(y_i | f) e^{hf - cf^2/2} df`.  :math:`F_{r,i}(m, v)` is attained (and
:math:`\Phi` has a gradient) only where some :math:`(h, c)` in the domain of :math:`L_i` gives a
tilted with moments :math:`(m, v)`.  That domain is where the tilted is normalisable:

* a likelihood bounded away from zero, or with a tail that does not vanish (the classification
  likelihoods): :math:`c > 0`, and every :math:`(m, v)` is reached, the prior's moments included;
* a Gaussian likelihood of variance :math:`\sigma^2`: :math:`c > -1/\sigma^2`, so the prior's
  moments :math:`(0, k_{ii})` need :math:`c = 1/k_{ii} - 1/\sigma^2`, negative where
  :math:`\sigma^2 < k_{ii}` (an improper cavity with a proper tilted);
* heavier than Gaussian tails (Student-t, Laplace): :math:`c > 0` only (with :math:`c < 0` the
  tilted grows like :math:`e^{|c| f^2/2}`).  The prior's moments are still reached, but only by
  bimodal tilteds (a wide cavity far out in the likelihood's tail), and descending from there is
  hopelessly slow: on 100 points with 15% outliers (:math:`\nu = 4`, :math:`\sigma = 0.05`),
  convergent EP moved the marginal variances from 1 to 0.87 in three outer iterations (200 s),
  against 0.002 at the fixed point.

So allowing :math:`c < 0` would help the Gaussian likelihood alone (which EP solves in one sweep),
and the general remedy is to start where :math:`\Phi` is finite and low.  Every EP fixed point is
such a point (its own cavities are the r-cavities), and EP's iterates approach it: Jylanki,
Vanhatalo & Vehtari (2011, JMLR 12, Section 5) likewise start their double loop from EP.
:func:`reachable_start` takes the warm start where its moments are reached, and otherwise the
candidate of lowest :math:`\Phi` among the prior and the first ``START_SWEEPS`` iterates of
parallel EP from the prior (:class:`~relaxep.inference.schedules.Parallel`, whose step shrinks
until the posterior is proper), keeping only those whose moments are reached.
"""

from __future__ import annotations

import numpy as np

from relaxep._typing import Array
from relaxep.inference.free_energy import RCavities, moment_free_energy, r_cavities
from relaxep.inference.method import RunOptions
from relaxep.inference.schedules import Parallel
from relaxep.inference.site_updates import SiteUpdates
from relaxep.likelihoods import Likelihood
from relaxep.posterior import Posterior, Prior
from relaxep.sites import EP

__all__ = ["START_SWEEPS", "reachable_start"]

#: parallel EP sweeps from the prior whose iterates :func:`reachable_start` considers
START_SWEEPS = 8


def reachable_start(
    prior: Prior,
    y: Array,
    likelihood: Likelihood,
    start: Posterior | None,
    max_sweeps: int = START_SWEEPS,
) -> tuple[Posterior, RCavities]:
    r"""``start`` where the tilted family reaches its marginals, else the lowest-:math:`\Phi` reachable candidate.

    The candidates are the prior and parallel EP's iterates from it (at most ``max_sweeps``).
    Returns the posterior (marginals only) and its r-cavities
    (:func:`~relaxep.inference.free_energy.r_cavities`); where no candidate is reachable (EP
    diverged at once, say), the prior and its r-cavities, not ``ok``.
    """
    if start is not None:
        r = _r_cavities(likelihood, y, start)
        if r.ok:
            return start, r
    first = prior.posterior(marginals_only=True)
    r_first = _r_cavities(likelihood, y, first)
    phi_first = _free_energy(first, r_first)
    # each iterate scored where EP holds it (its posterior is current then): one factorisation, of the best
    best: dict = {"phi": phi_first}

    def score(_: int, post: Posterior) -> None:
        r = _r_cavities(likelihood, y, post)
        phi = _free_energy(post, r)
        if phi < best["phi"]:
            best.update(phi=phi, sites=(post.site_precision.copy(), post.site_mean_precision.copy()), r=r)

    ep = SiteUpdates(EP(), schedule=Parallel())
    ep.run(prior, y, likelihood, RunOptions(max_sweeps=max_sweeps, callback=score))
    if "sites" not in best:
        return first, r_first
    return prior.posterior(*best["sites"], marginals_only=True), best["r"]


def _free_energy(post: Posterior, r: RCavities) -> float:
    r""":math:`\Phi` at ``post``'s moments (``inf`` where they are out of reach)."""
    if not r.ok:
        return np.inf
    log_det = float(post.site_mean_precision @ post.mean) - 2.0 * post.log_partition()
    value = moment_free_energy(post.alpha, post.mean, post.site_precision, post.marginal_var, log_det, r.conjugate)
    return value if np.isfinite(value) else np.inf


def _r_cavities(likelihood: Likelihood, y: Array, post: Posterior) -> RCavities:
    """The r-cavities of ``post``'s marginals, Newton started from its own cavities where they are proper
    (at an EP fixed point they are the answer) and from the marginals elsewhere."""
    mean, var = post.mean, post.marginal_var
    cav_mean, cav_var = post.cavities()
    proper = np.isfinite(cav_var) & (cav_var > 0.0)
    c = np.where(proper, 1.0 / np.where(proper, cav_var, 1.0), 1.0 / var)
    h = np.where(proper, cav_mean * c, mean / var)
    guess = RCavities(h, c, np.zeros_like(c), ok=False)
    return r_cavities(likelihood, y, mean, var, guess)
