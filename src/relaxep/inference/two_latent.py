r"""EP for a likelihood of two latent functions with factorised sites: :math:`q(f, g) = q(f)\,q(g)`.

The model: :math:`f \sim GP(0, K_f)`, :math:`g \sim GP(c, K_g)` (a constant prior mean :math:`c`, the
``offset``) and one factor :math:`t_i(f_i, g_i)` per row.  Each factor is approximated by
:math:`\tilde t_i^{f}(f_i)\,\tilde t_i^{g}(g_i)`, Gaussian in each latent, so the posterior is two independent
Gaussian posteriors, each a :class:`~relaxep.posterior.Posterior` of one prior (dense or sparse; the second
holds :math:`g - c`, a zero-mean process).  A site update moment-matches the tilted
:math:`t_i^{\alpha} q^{\setminus i}(f_i) q^{\setminus i}(g_i)` in each latent's marginal (Tolvanen, Jylänki &
Vehtari 2014, MLSP, for the heteroscedastic likelihood); the tilted moments come from the likelihood's
:meth:`~relaxep.likelihoods.TwoLatentLikelihood.tilted` of :math:`(y, h_f, \lambda_f, h_g, \lambda_g, \alpha)`
(:class:`~relaxep.likelihoods.Heteroscedastic`'s: :func:`relaxep.likelihoods.heteroscedastic.tilted_moments`).

Rules (:func:`rule_powers`): :class:`~relaxep.sites.EP`, :class:`~relaxep.sites.PowerEP` (:math:`\alpha = u` at
the full cavity) and :class:`~relaxep.sites.FractionalEP` (:math:`\alpha = \eta` at the cavity that removes
:math:`\eta` of the site), each site divided by :math:`\alpha` as the one-latent rules do.  Relaxed EP is
refused: its relaxation is chosen by the KL of a one-latent tilted to its projection, and relaxing each
latent's cavity alone is not that rule.

Schedule: parallel (every site from one set of cavities, then one refresh of each posterior), the step
:math:`s` (from ``step``, times the rule's ``damping``) halved while a step makes either posterior improper and by
:class:`~relaxep.inference.schedules.AdaptiveStep` on oscillation; negative site precisions are legal (the
heteroscedastic likelihood is not log-concave in :math:`g`).  Convergence: both posteriors' marginals move by
less than ``tol`` (:func:`~relaxep.inference.method.marginal_change`); a step below ``min_step`` that still
fails is ``"diverged"`` (the last proper posterior kept), never a NaN.

The evidence (:func:`two_latent_evidence`): with each site's constant chosen so that site times cavities
integrates to :math:`\hat Z_i` (at :math:`\alpha = 1`), for both latents at once,

.. math::
    \log Z_{EP} = \sum_i \Big[\log\hat Z_i + \sum_{x \in \{f, g\}}\Big(\tfrac12\log(1 + \lambda^x_i\tau^x_i)
      + \tfrac12\Big(\frac{(h^x_i)^2}{\lambda^x_i} - \frac{(\mu^x_i)^2}{A^x_i}\Big)\Big)\Big]
      + \log Z_q^f + \log Z_q^g,

one-latent EP's formula (:func:`~relaxep.inference.evidence.log_evidence`) once per latent with the shared
:math:`\hat Z_i`.  At an EP fixed point (:math:`\alpha = 1`; not at a Power EP one, which is why the
estimator's search runs EP) it is stationary in the sites, so its gradient in either kernel's
hyperparameters is that latent's :math:`\partial\log Z_q/\partial\theta` at fixed sites
(:func:`latent_gradient`), and in the offset :math:`\sum_i \partial\log\hat Z_i/\partial h^g_i =
\sum_i (E_{\hat p_i}[g_i] - h^g_i)/\lambda^g_i`, which at the fixed point is
:math:`\mathbf 1^\top(K_g + \tilde\Sigma_g)^{-1}(\tilde\mu_g - c\mathbf 1)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from relaxep._typing import Array
from relaxep.errors import ImproperPosteriorError
from relaxep.inference.ledger import RunOptions, SweepLedger, marginal_change
from relaxep.inference.schedules import AdaptiveStep
from relaxep.likelihoods.two_latent import TiltedPair, TwoLatentLikelihood
from relaxep.posterior import DensePosterior, Posterior, Prior
from relaxep.posterior.base import cavity, is_proper
from relaxep.posterior.sparse_gradient import sparse_evidence_gradient
from relaxep.sites import RelaxedEP, SiteRule, site_from_moments

__all__ = [
    "TiltedRule",
    "TwoLatentResult",
    "latent_gradient",
    "rule_powers",
    "tilted_rule",
    "two_latent_ep",
    "two_latent_evidence",
]

#: ``tilted(y, mean_f, var_f, mean_g, var_g, power)``: the tilted normaliser and moments, vectorised over rows
TiltedRule = Callable[[Array, Array, Array, Array, Array, float], TiltedPair]


def tilted_rule(likelihood: TwoLatentLikelihood | TiltedRule) -> TiltedRule:
    """The likelihood's :meth:`~relaxep.likelihoods.TwoLatentLikelihood.tilted`, or a bare rule as given."""
    return likelihood.tilted if isinstance(likelihood, TwoLatentLikelihood) else likelihood


@dataclass(frozen=True)
class TwoLatentResult:
    """A run of two-latent EP.

    Attributes
    ----------
    posterior_f, posterior_g : Posterior
        The posteriors of :math:`f` and of :math:`g - c` at the final sites.
    offset : float
        :math:`c`, the prior mean of :math:`g`.
    status : str
        ``"converged"``, ``"max_sweeps"``, ``"abandoned"`` (no progress in ``stall_window`` sweeps) or
        ``"diverged"`` (no step kept both posteriors proper; the last proper one is kept).
    n_sweeps : int
    trace : ndarray
        The convergence statistic after each sweep.
    log_evidence : float
        :math:`\\log Z_{EP}` at the final sites: ``nan`` unless the run converged (away from a fixed point the EP
        formula is not an evidence, as for :class:`~relaxep.inference.InferenceResult`), and where a cavity is
        improper.
    n_skipped : int
        Site visits skipped (an improper cavity or a non-finite tilted moment).
    offset_gradient : float
        :math:`\\partial\\log Z_{EP}/\\partial c` at the final sites, from the same tilted moments as the evidence
        (:func:`two_latent_evidence`).
    """

    posterior_f: Posterior
    posterior_g: Posterior
    offset: float
    status: str
    n_sweeps: int
    trace: Array
    log_evidence: float
    n_skipped: int = 0
    offset_gradient: float = float("nan")

    @property
    def converged(self) -> bool:
        return self.status == "converged"

    @property
    def sites(self) -> tuple[Array, Array, Array, Array]:
        r"""``(tau_f, nu_f, tau_g, nu_g)``, copies (a warm start for another run)."""
        pf, pg = self.posterior_f, self.posterior_g
        return tuple(np.array(a) for a in (pf.site_precision, pf.site_mean_precision,  # type: ignore[return-value]
                                           pg.site_precision, pg.site_mean_precision))  # fmt: skip


def rule_powers(rule: SiteRule | None) -> tuple[float, float, float]:
    r"""``(power, cavity fraction, damping)`` of a rule for two-latent sites (module docstring): the rule's
    :attr:`~relaxep.sites.SiteRule.moment_powers`, the one reading of a rule's powers that the sweep loops share.

    Raises
    ------
    TypeError
        For :class:`~relaxep.sites.RelaxedEP` and any rule that is not moment matching alone.
    """
    if rule is None:
        return 1.0, 1.0, 1.0
    if isinstance(rule, RelaxedEP):
        raise TypeError(
            "rule: RelaxedEP chooses its relaxation from a one-latent tilted distribution and does not apply to "
            "two-latent sites; use EP(), PowerEP(u) or FractionalEP(fraction)"
        )
    powers = rule.moment_powers if isinstance(rule, SiteRule) else None
    if powers is None:
        raise TypeError(f"rule must be EP(), PowerEP(u) or FractionalEP(fraction) for two-latent sites, got {rule!r}")
    return float(powers[0]), float(powers[1]), float(rule.damping)


def _posteriors(prior_f: Prior, prior_g: Prior, sites: Any) -> tuple[Posterior, Posterior]:
    """Both posteriors at ``sites`` (``None``: flat)."""
    tf, nf, tg, ng = (None,) * 4 if sites is None else sites
    return prior_f.posterior(tf, nf, marginals_only=True), prior_g.posterior(tg, ng, marginals_only=True)


def _proposals(
    posts: tuple[Posterior, Posterior], y: Array, tilted: TiltedRule, offset: float, power: float, fraction: float
) -> tuple[Array, list[tuple[Array, Array]], int]:
    r"""The sites that get a proposal (proper cavities in both latents, finite moments) and each latent's
    :math:`(\tau^*, \nu^*) = ((1/\hat v - 1/\lambda)/\alpha,\ (\hat m/\hat v - h/\lambda)/\alpha)`."""
    cavities = [cavity(p.mean, p.marginal_var, p.site_precision, p.site_mean_precision, fraction) for p in posts]
    ok = is_proper(cavities[0][1]) & is_proper(cavities[1][1])
    idx = np.flatnonzero(ok)
    (hf, lf), (hg, lg) = ((h[idx], lam[idx]) for h, lam in cavities)
    with np.errstate(all="ignore"):
        mom = tilted(y[idx], hf, lf, hg + offset, lg, power)
        props = [
            site_from_moments(mom.mean_f, mom.var_f, hf, lf, power),
            site_from_moments(mom.mean_g - offset, mom.var_g, hg, lg, power),
        ]
    finite = np.all([np.isfinite(a) for pair in props for a in pair], axis=0)
    n_skipped = int(y.size - np.count_nonzero(finite))
    return idx[finite], [(t[finite], v[finite]) for t, v in props], n_skipped


def two_latent_ep(
    prior_f: Prior,
    prior_g: Prior,
    y: Array,
    likelihood: TwoLatentLikelihood | TiltedRule,
    *,
    offset: float = 0.0,
    rule: SiteRule | None = None,
    step: float = 0.5,
    min_step: float = 1.0 / 1024,
    max_sweeps: int = 200,
    tol: float = 1e-4,
    init: tuple[Array, Array, Array, Array] | None = None,
    stall_window: int | None = None,
) -> TwoLatentResult:
    r"""Parallel damped EP on two latents with factorised sites (module docstring).

    Parameters
    ----------
    prior_f, prior_g : Prior
        The priors of :math:`f` and of :math:`g - c` (same rows).
    y : ndarray of shape (n,)
    likelihood : TwoLatentLikelihood or callable
        Its :meth:`~relaxep.likelihoods.TwoLatentLikelihood.tilted` (or a bare :data:`TiltedRule`).
    offset : float
        :math:`c`, the prior mean of :math:`g`.
    rule : EP, PowerEP, FractionalEP or None (EP)
    step, min_step : float
        The parallel step's start (and ceiling) and floor.
    max_sweeps : int
    tol : float
        On the largest change of either posterior's marginals.
    init : (tau_f, nu_f, tau_g, nu_g) or None
        A warm start (flat sites where it gives an improper posterior).
    stall_window : int or None
        Stop as ``"abandoned"`` after this many sweeps without a new smallest change.

    Returns
    -------
    TwoLatentResult
    """
    power, fraction, damping = rule_powers(rule)
    tilted = tilted_rule(likelihood)
    y = np.asarray(y, dtype=float)
    try:
        posts = _posteriors(prior_f, prior_g, init)
    except ImproperPosteriorError:
        posts = _posteriors(prior_f, prior_g, None)
    adaptive = AdaptiveStep(step * damping, min_step)
    # the one ledger of the sweep loops (its rules with no site counted as skipped: a sweep converges on the
    # sites it could update, as this loop always has)
    ledger = SweepLedger(RunOptions(max_sweeps=max_sweeps, tol=tol, stall_window=stall_window))
    last_direction, skipped, n_sweeps = None, 0, 0
    for n_sweeps in range(1, max_sweeps + 1):  # noqa: B007 (the count is the result's)
        old = [(p.mean.copy(), p.marginal_var.copy(), p.site_precision.copy(), p.site_mean_precision.copy())
               for p in posts]  # fmt: skip
        idx, props, n_skipped = _proposals(posts, y, tilted, offset, power, fraction)
        skipped += n_skipped
        direction = np.concatenate([
            np.concatenate([(t - o[2][idx]) * o[1][idx], (v - o[3][idx]) * np.sqrt(o[1][idx])])
            for (t, v), o in zip(props, old, strict=True)
        ])  # fmt: skip
        if last_direction is not None and last_direction.shape == direction.shape:
            adaptive.observe(float(direction @ last_direction), float(direction @ direction),
                             float(last_direction @ last_direction))  # fmt: skip
        last_direction = direction
        if not _step(posts, idx, props, old, adaptive):
            ledger.diverge(n_skipped)
            break
        with np.errstate(all="ignore"):
            change = max(marginal_change(o[0], o[1], p.mean, p.marginal_var) for p, o in zip(posts, old, strict=True))
        if ledger.sweep(change, 0, adaptive.size):
            break
    status, trace = ledger.status, ledger.trace
    log_z, d_offset = float("nan"), np.full(1, np.nan)  # (the EP formula away from a fixed point is no evidence)
    if status == "converged":
        log_z, d_offset = two_latent_evidence(posts[0], posts[1], y, tilted, offset)
    return TwoLatentResult(posts[0], posts[1], float(offset), status, n_sweeps, np.asarray(trace), log_z, skipped,
                           float(np.sum(d_offset)))  # fmt: skip


def _step(posts: tuple[Posterior, Posterior], idx: Array, props: list[tuple[Array, Array]], old: list[tuple],
          adaptive: AdaptiveStep) -> bool:  # fmt: skip
    """Move both posteriors' sites ``idx`` the step :math:`s` towards the proposals, halving :math:`s` while either
    posterior is improper; ``False`` (the old sites restored) where no step above the floor keeps both proper."""
    while True:
        s = adaptive.size
        try:
            for p, (t, v), o in zip(posts, props, old, strict=True):
                p.set_sites(idx, o[2][idx] + s * (t - o[2][idx]), o[3][idx] + s * (v - o[3][idx]))
                p.refresh(marginals_only=True)
            if all(np.all(np.isfinite(p.mean)) and np.all(p.marginal_var > 0) for p in posts):
                return True
        except ImproperPosteriorError:
            pass
        for p, o in zip(posts, old, strict=True):
            p.set_sites(slice(None), o[2], o[3])
        if not adaptive.halve():
            for p in posts:
                p.refresh(marginals_only=True)
            return False


def _latent_terms(post: Posterior) -> tuple[Array, Array, Array]:
    r"""A latent's full cavities :math:`(h, \lambda)` and its per-site evidence terms beside :math:`\log\hat Z_i`:
    :math:`\tfrac12\log(1 + \lambda\tau) + \tfrac12(h^2/\lambda - \mu^2/A)`."""
    h, lam = post.cavities()
    with np.errstate(all="ignore"):
        terms = 0.5 * np.log1p(lam * post.site_precision) + 0.5 * (h**2 / lam - post.mean**2 / post.marginal_var)
    return h, lam, terms


def two_latent_evidence(
    post_f: Posterior, post_g: Posterior, y: Array, likelihood: TwoLatentLikelihood | TiltedRule, offset: float
) -> tuple[float, Array]:
    r""":math:`\log Z_{EP}` (module docstring) and each site's :math:`\partial\log\hat Z_i/\partial h^g_i =
    (E[g_i] - h^g_i - c)/\lambda^g_i`, whose sum is the gradient in the offset :math:`c`; ``(nan, nan)`` where a
    full cavity is improper."""
    hf, lf, terms_f = _latent_terms(post_f)
    hg, lg, terms_g = _latent_terms(post_g)
    if not (np.all(is_proper(lf)) and np.all(is_proper(lg))):
        return float("nan"), np.full(np.shape(y), np.nan)
    mom = tilted_rule(likelihood)(np.asarray(y, dtype=float), hf, lf, hg + offset, lg, 1.0)
    total = np.sum(mom.log_z + terms_f + terms_g) + post_f.log_partition() + post_g.log_partition()
    return float(total), (mom.mean_g - offset - hg) / lg


def latent_gradient(post: Posterior, prior: Prior, kernel: Any) -> Array:
    r"""One latent's :math:`\partial\log Z_q/\partial\theta` at fixed sites, in ``kernel.theta``: the dense
    posterior's (:meth:`~relaxep.posterior.DensePosterior.evidence_gradient`, from the prior's kept
    :math:`\partial K/\partial\theta`) or the FITC posterior's
    (:func:`~relaxep.posterior.sparse_gradient.sparse_evidence_gradient`; ``RBF`` or ``ConstantKernel * RBF``)."""
    if isinstance(post, DensePosterior):
        return post.prior_evidence_gradient(prior, kernel)
    return sparse_evidence_gradient(post, kernel)[0]
