r"""Leave-one-out predictive densities from EP's cavities, at no refit.

At a fixed point of EP the posterior is :math:`q(f) \propto p(f)\prod_j \tilde t_j(f_j)`, and the cavity of site
:math:`i`, :math:`q_{-i}(f_i) = N(f_i | h_i, \lambda_i) \propto q(f_i)/\tilde t_i(f_i)`, is EP's approximation of the
leave-one-out posterior :math:`p(f_i | y_{-i})`: every other site is as it was, site :math:`i` is gone.  The
leave-one-out predictive density of :math:`y_i` is then the tilted normaliser at that cavity,

.. math::
    \log p(y_i | y_{-i}) \approx \log \hat Z_i = \log \int p(y_i | f)\, N(f | h_i, \lambda_i)\, df,
    \qquad \lambda_i = (1/A_{ii} - \tau_i)^{-1},\quad h_i = \lambda_i(\mu_i/A_{ii} - \nu_i),

which EP computes anyway (Opper & Winther 2000, *Gaussian processes for classification: mean-field algorithms*;
Vehtari, Mononen, Tolvanen, Sivula & Winther 2016, *Bayesian leave-one-out cross-validation approximations for
Gaussian latent variable models*, JMLR 17(103), eq. 21, who find it the most accurate of the fast approximations).
The in-sample density :math:`\log p(y_i | y) \approx \log\int p(y_i | f)\, q(f_i)\, df` is the same integral at the
posterior marginal, and their difference summed, :math:`p_{loo} = \sum_i [\log p(y_i | y) - \log p(y_i | y_{-i})]`,
is the effective number of parameters (Vehtari, Gelman & Gabry 2017).

**Power EP, fractional EP, Relaxed EP.**  Their cavities are not leave-one-out posteriors: Power EP's and
fractional EP's moments are matched at the cavity :math:`q/\tilde t_i^{\,\eta}` that keeps a part of the site, and
Relaxed EP's at a relaxed cavity.  What is still true at any of their fixed points is that :math:`q/\tilde t_i`
(the *full* cavity) is the approximation built from every site but :math:`i`: the best leave-one-out posterior that
costs no refit, the sites of the others being those a fit on :math:`n - 1` rows would (nearly) find.  So every rule
uses the full cavity and the likelihood at power 1 (as the EP evidence does, :mod:`relaxep.inference.evidence`);
for EP it is exact to EP's fixed point, for the others an approximation whose error is measured against refits
by the same rule (brute force at the fitted hyperparameters, warm-started: :mod:`relaxep.assessment.brute_force`).
Measured (2026-11-28, ``tests/test_loo.py``; mean and largest :math:`|\text{cavity} - \text{brute force}|`, nats a
point; the largest error was an optimistic one in every case):

==========================================  ==================  =========  =========
model (rows)                                rule                mean       max
==========================================  ==================  =========  =========
probit, Ripley's synth.tr (250)             EP                  0.00137    0.047
probit, 100 rows of synth.tr                EP                  0.0036     0.073
probit, 100 rows of synth.tr                PowerEP(0.8)        0.0041     0.084
probit, 100 rows of synth.tr                FractionalEP(0.5)   0.0038     0.082
probit, 100 rows of synth.tr                RelaxedEP(10)       0.0036     0.073
Student-t, 100 rows, 10% outliers           EP                  0.0024     0.037
Student-t, 100 rows, 10% outliers           PowerEP(0.8)        0.0042     0.037
Student-t, 100 rows, 10% outliers           FractionalEP(0.5)   0.0021     0.037
probit FITC, 20 inducing inputs (250)       EP                  0.00134    0.047
==========================================  ==================  =========  =========

Relaxed EP converges to EP's fixed point (its relaxation vanishes there), so its leave-one-out is EP's.  Power EP
and fractional EP are within a few thousandths of a nat a point of their own refits, about as close as EP is to
its: the full cavity of an :math:`\eta`-rule's fixed point is as good a leave-one-out posterior as EP's.

For a Gaussian likelihood the sites are exact and the formula equals the closed-form GP leave-one-out (Rasmussen &
Williams 2006, eq. 5.12).

**FITC.**  On a sparse prior the cavity is the FITC posterior's with site :math:`i` removed: the leave-one-out of
the FITC model (whose prior has :math:`Q_{ff} + \operatorname{diag}(K_{ff} - Q_{ff})` as covariance), with the
inducing inputs and hyperparameters as fitted on all rows (measured in the table above against FITC refits with the
same inducing inputs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from relaxep._threads import each_block
from relaxep._typing import Array
from relaxep._xp import to_numpy
from relaxep.likelihoods import Likelihood
from relaxep.posterior.base import cavity, is_proper

__all__ = ["CavityLOO", "cavity_loo"]


@dataclass(frozen=True)
class CavityLOO:
    r"""Leave-one-out terms of one fit, on the likelihood's own targets (module docstring).

    Attributes
    ----------
    loo : ndarray of shape (n,)
        :math:`\log p(y_i | y_{-i})` at the full cavities (NaN where a cavity is improper, counted in
        ``n_improper``).
    in_sample : ndarray of shape (n,)
        :math:`\log p(y_i | y)` at the posterior marginals.
    cavity_mean, cavity_var : ndarray of shape (n,)
        The leave-one-out posterior of :math:`f_i`: :math:`(h_i, \lambda_i)`.
    n_improper : int
        Sites whose full cavity is improper (none at a converged EP fixed point).
    """

    loo: Array
    in_sample: Array
    cavity_mean: Array
    cavity_var: Array
    n_improper: int


def cavity_loo(
    mean: Array, marginal_var: Array, site_precision: Array, site_mean_precision: Array, y: Array,
    likelihood: Likelihood,
) -> CavityLOO:  # fmt: skip
    r"""The leave-one-out densities :math:`\log\int p(y_i|f) N(f|h_i,\lambda_i) df` at the full cavities
    :math:`\lambda_i = (1/A_{ii} - \tau_i)^{-1}`, :math:`h_i = \lambda_i(\mu_i/A_{ii} - \nu_i)`, and the in-sample
    ones at the marginals :math:`N(\mu_i, A_{ii})` (module docstring); the likelihood at power 1 whatever the rule.

    ``y`` are the likelihood's targets (the folded labels of a binary fit are not needed: the likelihood folds).
    An improper cavity (possible only away from a converged fit) gives NaN there, counted in ``n_improper``.
    Arrays of another library (a device fit's) are read to the host, the answer numpy's; the two densities are
    :meth:`~relaxep.likelihoods.Likelihood.log_predictive` (no derivatives), computed on two threads."""
    mean, var = np.asarray(to_numpy(mean), dtype=float), np.asarray(to_numpy(marginal_var), dtype=float)
    tau, nu = np.asarray(to_numpy(site_precision), dtype=float), np.asarray(to_numpy(site_mean_precision), float)
    y = np.asarray(to_numpy(y))
    h, lam = cavity(mean, var, tau, nu, 1.0)
    ok = is_proper(lam)
    loo = np.full(mean.shape, np.nan)
    dens: list[Array] = [loo, loo]

    def density(at: int) -> None:  # the two integrals on two threads (numpy releases the GIL in its loops)
        if at == 0 and np.any(ok):
            loo[ok] = likelihood.log_predictive(y[ok], h[ok], lam[ok])
        elif at == 1:
            dens[1] = likelihood.log_predictive(y, mean, np.maximum(var, 1e-300))

    each_block(density, (0, 1), None)
    in_sample = dens[1]
    return CavityLOO(
        loo=loo,
        in_sample=np.asarray(in_sample, dtype=float),
        cavity_mean=np.where(ok, h, np.nan),
        cavity_var=np.where(ok, lam, np.nan),
        n_improper=int(np.sum(~ok)),
    )
