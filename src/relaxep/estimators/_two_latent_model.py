r"""The fitted model of two latent functions per target behind :class:`~relaxep.GPHeteroscedasticRegressor` (and any
estimator of a :class:`~relaxep.likelihoods.TwoLatentLikelihood`): two priors (dense or FITC with shared inducing
inputs), two-latent EP (:mod:`relaxep.inference.two_latent`), the evidence and its gradient in the optimiser's
vector, and the latents' predictions.

The optimiser's vector (:class:`~relaxep.estimators._hyper.HyperVector` of the two kernels and a
:class:`~relaxep.estimators._hyper.ConstantMean`) is

.. math:: x = (\theta_f,\ \theta_g,\ c),

the two kernels' log-hyperparameters (``kernel.theta``) and the prior mean :math:`c` of :math:`g` (for the
heteroscedastic likelihood a log noise variance, so the vector is all logs), each bounded.  The warm starts are
:class:`~relaxep.inference.warm.WarmStarts`' and the search's view of a run is
:func:`~relaxep.estimators._search.evidence_at`'s, as for the one-latent models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep.errors import DivergenceError, ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.estimators._hyper import ConstantMean, HyperVector
from relaxep.estimators._model import LooTerms
from relaxep.estimators._search import FitReport, _EvidenceSearch, at_bounds, evidence_at
from relaxep.inference.two_latent import TwoLatentResult, latent_gradient, two_latent_ep
from relaxep.inference.warm import WarmStarts
from relaxep.likelihoods import TwoLatentLikelihood
from relaxep.likelihoods.heteroscedastic import predictive_cdf, predictive_log_density
from relaxep.posterior import DensePrior, Prior, SparsePrior
from relaxep.posterior.base import cavity, is_proper
from relaxep.sites import SiteRule

__all__ = ["HeteroscedasticCavity", "_TwoLatentModel"]

#: latent jitter on both priors' diagonals (and their test variances)
JITTER = 1e-8
#: the parallel step of "auto"'s first run, and of its second where the first does not converge
AUTO_STEPS = (0.5, 0.1)
#: the search's runs give up after this many sweeps without a new smallest change (a region to leave)
SEARCH_STALL_WINDOW = 10
#: what a prior or a run may raise where the hyperparameters are out of reach: the search scores them -inf
REFUSED = (KernelNotPositiveDefiniteError, ImproperPosteriorError, np.linalg.LinAlgError)


@dataclass(frozen=True)
class _Refused:
    """A run that raised (:data:`REFUSED`): the search scores it as a diverged one."""

    status: str = "diverged"
    log_evidence: float = float("nan")


class _TwoLatentModel:
    """Two-latent EP of ``likelihood`` on ``(X, y)`` (module docstring), dense or, with inducing inputs ``Z``, FITC
    for both latents.

    Parameters
    ----------
    likelihood : TwoLatentLikelihood
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,)
        Targets (normalised where the estimator normalises).
    Z : ndarray of shape (M, d) or None
        Inducing inputs (fixed), or ``None`` for the dense priors.
    rule : SiteRule or "auto"
    max_sweeps, tol : int, float
    """

    def __init__(self, likelihood: TwoLatentLikelihood, X: Array, y: Array, Z: Array | None, rule: SiteRule | str,
                 max_sweeps: int, tol: float) -> None:  # fmt: skip
        self.likelihood, self.X, self.y, self.Z = likelihood, X, y, Z
        self.rule, self.max_sweeps, self.tol = rule, int(max_sweeps), float(tol)
        self.warm = WarmStarts()
        self.result_: TwoLatentResult | None = None

    # ------------------------------------------------------------------ EP
    def priors(self, kernels: tuple[Kernel, Kernel], gradient: bool = False) -> tuple[Prior, Prior]:
        """The priors of :math:`f` and :math:`g - c` (dense ones keep :math:`\\partial K/\\partial\\theta` if asked)."""
        if self.Z is None:
            return tuple(DensePrior.from_kernel(k, self.X, JITTER, eval_gradient=gradient, check_psd=not gradient)
                         for k in kernels)  # type: ignore[return-value]  # fmt: skip
        return tuple(SparsePrior.from_kernel(k, self.X, self.Z, JITTER) for k in kernels)  # type: ignore[return-value]

    def _infer(self, priors: tuple[Prior, Prior], offset: float, *, init: Any, search: bool) -> TwoLatentResult:
        """EP from ``init`` (``search``: the search's run, one step, given up when it stalls; else ``"auto"``'s
        cascade: where the first run does not converge, a second from flat sites with the step 0.1 and four times
        the sweeps).

        The search's runs (and ``log_marginal_likelihood(theta)``'s) are EP's whatever the rule: the evidence's
        gradient (:meth:`gradient`) is exact only at an EP fixed point (the evidence is stationary in the sites
        there, not at a Power EP one: measured, ``PowerEP(0.7)``'s gradient 20% off central differences in the
        noise mean).  The final fit is by the rule."""
        auto = isinstance(self.rule, str)
        rule = None if auto or search else self.rule
        steps = AUTO_STEPS if auto and not search else AUTO_STEPS[:1]
        result = None
        for k, step in enumerate(steps):
            result = two_latent_ep(
                priors[0], priors[1], self.y, self.likelihood, offset=offset, rule=rule, step=step,
                max_sweeps=self.max_sweeps * (1 if k == 0 else 4), tol=self.tol, init=init if k == 0 else None,
                stall_window=SEARCH_STALL_WINDOW if search else None,
            )  # fmt: skip
            if result.converged:
                break
        assert result is not None
        return result

    def evidence(self, x: Array, eval_gradient: bool, hyper: HyperVector) -> tuple[float, Any]:
        """The log evidence at ``x`` and, if asked, its gradient in ``x``, by the search's policy
        (:func:`~relaxep.estimators._search.evidence_at`); the sites of a converged run whose evidence is finite
        are the next warm start."""
        mean = hyper.mean_at(x)
        offset = mean.value if mean is not None else 0.0

        def build(kernels: tuple[Kernel, Kernel], Z: Any) -> tuple[Prior, Prior]:
            return self.priors(kernels, gradient=eval_gradient)

        def run(priors: tuple[Prior, Prior], likelihood: Any) -> Any:
            kept = self.warm.start
            try:
                result = self.warm.run(self._infer, priors, offset, search=True)
            except REFUSED:
                return _Refused()
            if not np.isfinite(result.log_evidence):  # (a fixed point with an improper cavity starts nothing)
                self.warm.reset(kept)
            return result

        def gradient(priors: tuple[Prior, Prior], result: TwoLatentResult, kernels: Any, likelihood: Any) -> Any:
            return self.gradient(result, priors, kernels, hyper.n_mean > 0), None

        return evidence_at(x, eval_gradient, hyper, build, run, gradient, REFUSED)

    def gradient(self, result: TwoLatentResult, priors: tuple[Prior, Prior], kernels: tuple[Kernel, Kernel],
                 with_offset: bool) -> Array:  # fmt: skip
        """The evidence's gradient in :math:`(\\theta_f, \\theta_g, c)` at ``result``'s fixed point
        (:mod:`relaxep.inference.two_latent`)."""
        posts = (result.posterior_f, result.posterior_g)
        parts = [latent_gradient(post, prior, k) if k.theta.size else np.zeros(0)
                 for post, prior, k in zip(posts, priors, kernels, strict=True)]  # fmt: skip
        if with_offset:  # (from the run's own evidence pass: no second round of tilted moments)
            parts.append(np.array([result.offset_gradient]))
        return np.concatenate(parts)

    # ----------------------------------------------------------------- fit
    def fit(self, kernels: tuple[Kernel, Kernel], mean: ConstantMean, search: _EvidenceSearch | None,
            rng: np.random.RandomState) -> FitReport:  # fmt: skip
        """Learn :math:`(\\theta_f, \\theta_g, c)` by ``search`` (``None``: keep them), then the final run at them
        (``"auto"``: its cascade), kept as :attr:`result_`."""
        hyper = HyperVector(kernels, self.likelihood, mean=mean)
        learned = search is not None and hyper.size > 0
        if learned:
            best = search.maximise(lambda x, eval_gradient: self.evidence(x, eval_gradient, hyper), hyper, rng)
            if best is not None:
                kernels, mean = hyper.split(best)[0], hyper.mean_at(best)  # type: ignore[assignment]
        self.kernels_, self.mean = kernels, mean
        self.priors_ = self.priors(kernels)
        self.result_ = result = self.warm.run(self._infer, self.priors_, mean.value, search=False)
        if result.status == "diverged":
            raise DivergenceError(
                "two-latent EP diverged at the learned hyperparameters (no step kept the posterior proper): "
                "try rule=EP(damping=0.5) or PowerEP(0.8), or fix the second latent's kernel (its bounds)"
            )
        bounds = at_bounds(kernels[0]) + at_bounds(kernels[1]) if search is not None else ()
        return FitReport(result.status, result.n_sweeps, result.trace, result.n_skipped, bounds)

    @property
    def kernel_(self) -> Kernel:
        """The kernel of :math:`f` (the estimator's ``kernel_``)."""
        return self.kernels_[0]

    @property
    def offset(self) -> float:
        """:math:`c`, the prior mean of :math:`g`."""
        return self.mean.value

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool = True) -> Any:
        """The evidence at ``theta`` (:math:`(\\theta_f, \\theta_g)` and :math:`c` where learned), from the fitted
        sites, the kept warm start left as it was; the fitted kernels are never changed."""
        hyper = HyperVector(self.kernels_, self.likelihood, mean=self.mean)
        with self.warm.held():
            value, grad = self.evidence(theta, eval_gradient, hyper)
        return (np.float64(value), grad) if eval_gradient else np.float64(value)

    # ----------------------------------------------------------- predict
    def latent(self, which: str, X: Array, full_cov: bool = False) -> tuple[Array, Array]:
        """Predictive mean and variances (or covariance) of ``"f"`` or ``"g"`` (with its prior mean) at ``X``."""
        assert self.result_ is not None
        k = 0 if which == "f" else 1
        prior, kernel = self.priors_[k], self.kernels_[k]
        post = self.result_.posterior_f if k == 0 else self.result_.posterior_g
        shift = 0.0 if k == 0 else self.offset
        if not full_cov:
            mean, var = prior.predict_at(post.predict_latent, X)
            return mean + shift, var
        cross = prior.cross_covariance(X)[0]
        mean, cov = post.predict_latent_cov(cross, kernel(X) + JITTER * np.eye(X.shape[0]))
        return mean + shift, cov

    def predict_latent(self, X: Array, full_cov: bool = False) -> tuple[Array, Array]:
        """The predictive of :math:`f` (the protocol's latent; :meth:`latent` gives :math:`g`'s too)."""
        return self.latent("f", X, full_cov)

    # ----------------------------------------------------------- leave-one-out
    def loo_terms(self) -> LooTerms:
        r"""Leave-one-out from the two cavities, at no refit.

        Two-latent EP's sites factorise, :math:`\tilde t_i(f_i)\,\tilde t_i(g_i)`, so removing site :math:`i` leaves
        the product of the two one-latent cavities :math:`N(f_i | h^f_i, \lambda^f_i)\,N(g_i | h^g_i + c,
        \lambda^g_i)` (:func:`~relaxep.posterior.base.cavity` of each posterior; :math:`c` the prior mean of
        :math:`g`), EP's approximation of :math:`p(f_i, g_i | y_{-i})`, and the leave-one-out density is the tilted
        normaliser there,

        .. math:: \log p(y_i | y_{-i}) \approx \log\iint N(y_i | f, e^g)\, N(f | h^f_i, \lambda^f_i)\,
                  N(g | h^g_i + c, \lambda^g_i)\, df\, dg

        (:func:`~relaxep.likelihoods.heteroscedastic.predictive_log_density`); the in-sample density is the same at
        the posterior marginals.  The tail (:class:`HeteroscedasticCavity`) is that of the predictive, symmetric
        about :math:`h^f_i`."""
        assert self.result_ is not None
        out = []
        for post, offset in ((self.result_.posterior_f, 0.0), (self.result_.posterior_g, self.offset)):
            mean, var = np.asarray(post.mean, dtype=float), np.asarray(post.marginal_var, dtype=float)
            h, lam = cavity(mean, var, np.asarray(post.site_precision), np.asarray(post.site_mean_precision), 1.0)
            out.append((mean + offset, var, h + offset, lam))
        (mf, af, hf, lf), (mg, ag, hg, lg) = out
        y = np.asarray(self.y, dtype=float)
        ok = is_proper(lf) & is_proper(lg)
        loo = np.full(y.shape, np.nan)
        loo[ok] = predictive_log_density(y[ok], hf[ok], lf[ok], hg[ok], lg[ok])
        in_sample = np.asarray(predictive_log_density(y, mf, af, mg, ag), dtype=float)
        tail = HeteroscedasticCavity(np.where(ok, hg, np.nan), np.where(ok, lg, np.nan))
        mean, var = np.where(ok, hf, np.nan), np.where(ok, lf, np.nan)
        return LooTerms(loo, in_sample, mean, var, int(np.sum(~ok)), y, tail, latent=(hf, lf))


class HeteroscedasticCavity:
    """The noise's leave-one-out posterior :math:`N(g_i | m_i, v_i)` per row, for the rows' tail probabilities
    (:meth:`LooResult.outliers <relaxep.assessment.LooResult.outliers>`)."""

    def __init__(self, mean_g: Array, var_g: Array) -> None:
        self.mean_g, self.var_g = mean_g, var_g

    def loo_tail(self, y: Array, mean_f: Array, var_f: Array, pointwise: Any) -> Array:
        r""":math:`2 P(Y \le h^f - |y - h^f|)` under the leave-one-out predictive (model units)."""
        q = mean_f - np.abs(y - mean_f)
        return np.minimum(1.0, 2.0 * predictive_cdf(q, mean_f, var_f, self.mean_g, self.var_g))
