r"""The binomial likelihood: successes out of a known number of trials, with a logit or a probit link.

.. math::
    p(k | f, n) = \binom{n}{k} \pi^k (1 - \pi)^{n - k},\qquad \pi = \sigma(f)\ \text{(logit)}
    \ \text{or}\ \Phi(f)\ \text{(probit)},

in log space as :math:`\log\binom{n}{k} + k\log\pi + (n - k)\log(1 - \pi)`, with :math:`\log\sigma(f) =
-\operatorname{sp}(-f)` and :math:`\log\Phi(f)` from ``log_ndtr``: no :math:`\pi^k` and no :math:`1 - \pi` is
formed, so thousands of trials and latents far in either tail stay finite (the NaN failures reported for large
trial counts in other EP codes come from forming them).  Both links are log-concave in :math:`f`:

.. math::
    \ell' = k - n\sigma(f),\quad \ell'' = -n\sigma(f)\sigma(-f)\ \text{(logit)};\qquad
    \ell' = k\,r(f) - (n - k)\,r(-f),\quad \ell'' = -k\,r(f)(f + r(f)) - (n - k)\,r(-f)(r(-f) - f)\ \text{(probit)},

:math:`r(f) = N(f)/\Phi(f) = \sqrt{2/\pi}/\operatorname{erfcx}(-f/\sqrt2)`, so EP's site precisions stay positive.
The tilted integrals are the sinh rule's (:mod:`relaxep.likelihoods.smooth`).  One trial is the Bernoulli:
:class:`~relaxep.likelihoods.Logistic` and :class:`~relaxep.likelihoods.Probit` with labels :math:`2k - 1`.
Binomial GP models by EP: Vanhatalo et al. (2013), "GPstuff: Bayesian modeling with Gaussian processes", JMLR 14.

**Targets** are rows ``[successes, log trials]``, as a count's are ``[count, log exposure]`` (an estimator builds
them from ``fit(X, successes, trials=n)``); a vector of successes alone means one trial each.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import erfcx, expit, gammaln, log_ndtr

from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep.likelihoods.base import _as_floats
from relaxep.likelihoods.counts import CountLikelihood, read_rows, split_targets
from relaxep.likelihoods.smooth import BEND, Columns, SmoothLikelihood

__all__ = ["Binomial"]

_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
_LINKS = ("logit", "probit")
_CHUNK = 1 << 20  # (row, count) pairs of the predictive pmf evaluated at once


def trials_of(log_trials: Array) -> Array:
    """The trials :math:`n` from the rows' second column :math:`\\log n` (rounded to the integer it encodes)."""
    with np.errstate(over="ignore"):
        return np.round(np.exp(log_trials))


class Binomial(SmoothLikelihood):
    r"""Binomial successes out of known trials: :math:`k \sim \operatorname{Binomial}(n, \pi(f))`.

    Parameters
    ----------
    link : {"logit", "probit"}
        :math:`\pi(f) = \sigma(f)` (the log odds; the default) or :math:`\Phi(f)`.

    Notes
    -----
    Targets: rows ``[successes, log trials]`` (``(n, 2)``), or successes alone (one trial each).
    ``GPRegressor(likelihood=Binomial()).fit(X, successes, trials=n)`` builds the rows; its ``predict`` is the
    predictive success probability :math:`E[\pi(f_*)]`, and ``predict_y``, ``predict_interval`` and
    ``log_predictive_density`` take ``trials=``.  No hyperparameters.  See :mod:`relaxep.likelihoods.binomial`.

    References
    ----------
    Vanhatalo, J., Riihimaki, J., Hartikainen, J., Jylanki, P., Tolvanen, V. & Vehtari, A. (2013). GPstuff:
    Bayesian modeling with Gaussian processes. JMLR 14, 1175-1179.
    """

    kind: ClassVar[str] = "count"  # (successes: fitted by GPRegressor as counts are, their trials as an exposure)
    is_density: ClassVar[bool] = False
    target_width: ClassVar[int] = 2
    exposure_name: ClassVar[str] = "trials"
    latent_is_link: ClassVar[bool] = True  # (the success probability's logit or probit)

    def __init__(self, link: str = "logit") -> None:
        self.link = link

    def _checked_link(self) -> str:
        if self.link not in _LINKS:
            raise ValueError(f"link must be one of {_LINKS}, got {self.link!r}")
        return self.link

    # ------------------------------------------------------------ targets
    def check_targets(self, y: ArrayLike, n: int | None = None) -> Array:
        """Successes ``(n,)`` (one trial each) or rows ``[successes, log trials]`` ``(n, 2)``; a ``ValueError``
        naming ``y`` for negative or fractional successes, or more successes than trials."""
        self._checked_link()
        values = CountLikelihood.check_targets(self, y, n)  # type: ignore[arg-type]
        k = values if values.ndim == 1 else values[:, 0]
        trials = np.ones_like(k) if values.ndim == 1 else trials_of(values[:, 1])
        if values.ndim == 2 and not np.allclose(np.exp(values[:, 1]), trials, rtol=1e-9, atol=0.0):
            raise ValueError("y's trials (exp of column 1) must be whole numbers of trials")
        if np.any(trials < 1.0):
            raise ValueError("trials must be at least 1 in every row")
        over = k > trials
        if np.any(over):
            i = int(np.flatnonzero(over)[0])
            raise ValueError(f"y: {k[i]:g} successes out of {trials[i]:g} trials in row {i} (successes above trials)")
        return values

    def read_targets(self, y: ArrayLike, log_exposure: ArrayLike | None = None) -> Array:
        """Successes, with each row's log trials as rows ``[successes, log trials]`` where given
        (:func:`~relaxep.likelihoods.counts.read_rows`)."""
        return read_rows(self, y, log_exposure, "trials")

    # ------------------------------------------------------------ the model
    def _log_lik_of(self, cols: Columns, f: Array) -> Array:
        k, log_n = cols
        n = trials_of(log_n)
        norm = gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)
        up, down = self._log_pi(f), self._log_pi(-f)
        # (0 * -inf is 0 here: no successes make log pi irrelevant)
        return norm + np.where(k > 0.0, k * up, 0.0) + np.where(n > k, (n - k) * down, 0.0)

    def _log_pi(self, f: Array) -> Array:
        if self._checked_link() == "logit":
            return -np.logaddexp(0.0, -f)
        return log_ndtr(f)

    def _dlog_lik_of(self, cols: Columns, f: Array) -> tuple[Array, Array]:
        k, log_n = cols
        n = trials_of(log_n)
        if self._checked_link() == "logit":
            s, t = expit(f), expit(-f)
            return k * t - (n - k) * s, -n * s * t
        r_up, r_down = _mills(f), _mills(-f)
        d1 = k * r_up - (n - k) * r_down
        d2 = -k * r_up * (f + r_up) - (n - k) * r_down * (r_down - f)
        return d1, d2

    def _bend_of(self, cols: Columns, power: float) -> tuple[Array, Array, Array | float]:
        r"""Logit: where :math:`un\sigma(f)\sigma(-f) \ge` ``BEND`` (the roots of :math:`\sigma(1 - \sigma) = q`,
        symmetric in :math:`f`), width 1.  Probit: unbounded on the side of each outcome observed (there
        :math:`-\ell''` tends to its count), from :math:`\mp\sqrt{2\log(un/\epsilon)} \mp 1` otherwise, width
        :math:`1/\sqrt{1 + u\max(k, n - k)}` (the Gaussian wall of :math:`\Phi^k`)."""
        k, log_n = cols
        n = trials_of(log_n)
        if self._checked_link() == "logit":
            q = BEND / (power * n)
            low = 2.0 * q / (1.0 + np.sqrt(1.0 - 4.0 * np.minimum(q, 0.25)))
            reach = np.where(q > 0.25, -np.inf, np.log1p(-low) - np.log(low))
            return -reach, reach, 1.0
        reach = np.sqrt(2.0 * np.log(np.maximum(power * n / BEND, 1.0))) + 1.0
        lo = np.where(k > 0.0, -np.inf, -reach)
        hi = np.where(n > k, np.inf, reach)
        return lo, hi, 1.0 / np.sqrt(1.0 + power * np.maximum(k, n - k))

    # ------------------------------------------------------------ predictive
    def predict(self, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""The predictive success probability :math:`E[\pi(f_*)] = \int \pi(f) N(f | m, v) df`, one trial's
        :math:`\log Z` (exact to the rule's accuracy; :math:`\Phi(m/\sqrt{1 + v})` for the probit)."""
        mean, var = np.broadcast_arrays(*_as_floats(mean, var))
        return np.exp(self.log_z(np.ones((*mean.shape, 1)) * [1.0, 0.0], mean, var).log_z)

    def predict_y(self, mean: ArrayLike, var: ArrayLike, log_exposure: ArrayLike = 0.0) -> tuple[Array, Array]:
        r"""Mean and variance of the successes out of :math:`n = e^{o}` trials (``log_exposure`` :math:`o`) under
        :math:`f_* \sim N(m, v)`:

        .. math::
            E[k] = nE[\pi],\qquad \operatorname{Var}[k] = nE[\pi] - nE[\pi^2] + n^2(E[\pi^2] - E[\pi]^2),

        :math:`E[\pi]` and :math:`E[\pi^2]` the tilted :math:`Z` of one success in one trial and of two in two.
        """
        mean, var, log_n = np.broadcast_arrays(*_as_floats(mean, var, log_exposure))
        n = trials_of(log_n)
        shape = (*mean.shape, 1)
        first = np.exp(self.log_z(np.ones(shape) * [1.0, 0.0], mean, var).log_z)
        second = np.exp(self.log_z(np.ones(shape) * [2.0, np.log(2.0)], mean, var).log_z)
        return n * first, np.maximum(n * (first - second) + n**2 * (second - first**2), 0.0)

    def predictive_pmf(self, mean: ArrayLike, var: ArrayLike, log_exposure: ArrayLike = 0.0) -> Array:
        r""":math:`P(k_* = k) = \int p(k | f, n) N(f | m, v) df` for :math:`k = 0 \ldots \max n`, shape ``(rows,
        max n + 1)`` (zero above a row's trials): each the tilted :math:`Z` at power 1."""
        mean, var, log_n = (np.ravel(a) for a in np.broadcast_arrays(*_as_floats(mean, var, log_exposure)))
        n = trials_of(log_n)
        top = int(n.max(initial=0.0))
        out = np.zeros((mean.size, top + 1))
        k = np.arange(top + 1, dtype=float)
        rows = max(1, _CHUNK // (top + 1))
        for start in range(0, mean.size, rows):
            sl = slice(start, start + rows)
            grid = np.stack(np.broadcast_arrays(np.minimum(k[None, :], n[sl, None]), log_n[sl, None]), axis=-1)
            log_p = self.log_z(grid, mean[sl, None], var[sl, None], 1.0).log_z
            out[sl] = np.where(k[None, :] <= n[sl, None], np.exp(log_p), 0.0)
        return out

    def predict_interval(
        self, mean: ArrayLike, var: ArrayLike, level: float = 0.95, log_exposure: ArrayLike = 0.0
    ) -> tuple[Array, Array]:
        """Central interval of the successes' predictive (:meth:`predictive_pmf`): each end the smallest count
        whose predictive CDF reaches :math:`(1 \\mp \\ell)/2`, so the interval holds at least ``level``."""
        level = check_unit_interval(level, "level")
        if level >= 1.0:
            raise ValueError(f"level must lie in (0, 1), got {level!r}")
        mean, var, log_n = np.broadcast_arrays(*_as_floats(mean, var, log_exposure))
        cdf = np.cumsum(self.predictive_pmf(mean, var, log_n), axis=-1)
        cdf /= cdf[:, -1:]
        tail = 0.5 * (1.0 - level)
        low = np.argmax(cdf >= tail - 1e-12, axis=-1).astype(float)
        high = np.argmax(cdf >= 1.0 - tail - 1e-12, axis=-1).astype(float)
        return low.reshape(mean.shape), high.reshape(mean.shape)

    def loo_tail(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, pointwise: ArrayLike) -> Array:
        r"""Each row's leave-one-out tail: the predictive probability, at the cavity, of the successes no more
        probable than the observed (:meth:`predictive_pmf`), at most 1."""
        y, mean, var = _as_floats(y, mean, var)
        k, log_n, mean, var = split_targets(y, mean, var)
        pmf = self.predictive_pmf(mean, var, log_n)
        observed = pmf[np.arange(k.size), k.astype(int)]
        return np.minimum(np.sum(np.where(pmf <= observed[:, None] * (1.0 + 1e-12), pmf, 0.0), axis=-1), 1.0)


def _mills(f: Array) -> Array:
    r""":math:`N(f)/\Phi(f) = \sqrt{2/\pi}/\operatorname{erfcx}(-f/\sqrt{2})` (0 far right, :math:`\approx -f` far
    left), without forming :math:`\Phi`."""
    return _SQRT_2_OVER_PI / erfcx(-f / np.sqrt(2.0))
