r"""Counts with excess zeros: zero-inflated and hurdle Poisson and negative-binomial likelihoods.

With a count model :math:`p_c(y | \eta)`, :math:`\eta = f + o` (:class:`~relaxep.likelihoods.Poisson` or
:class:`~relaxep.likelihoods.NegativeBinomial`; :math:`o` the log exposure) and :math:`p_0(\eta) = p_c(0 | \eta)`,

.. math::
    \text{zero-inflated:}\quad p(0 | f) = \pi + (1 - \pi)\,p_0(\eta),\qquad p(y | f) = (1 - \pi)\,p_c(y | \eta)
    \quad (y > 0);

    \text{hurdle:}\quad p(0 | f) = \pi,\qquad p(y | f) = (1 - \pi)\,\frac{p_c(y | \eta)}{1 - p_0(\eta)} \quad (y > 0),

:math:`\pi` a learned constant (Lambert 1992; Mullahy 1986).  A zero-inflated zero is a zero of either process; a
hurdle's zeros come from :math:`\pi` alone, so its zero rows say nothing about :math:`f` (their sites are flat)
and its positive rows are the zero-truncated count.  With :math:`L_0 = \log p_0` and, for a zero-inflated zero,
:math:`w = (1 - \pi)p_0/p(0 | f)`,

.. math::
    \ell' = wL_0',\quad \ell'' = w L_0'' + w(1 - w)L_0'^2;\qquad
    -\log(1 - p_0)' = \frac{L_0'}{e^{-L_0} - 1},\quad
    -\log(1 - p_0)'' = \frac{L_0''}{e^{-L_0} - 1} + \frac{L_0'^2}{4\sinh^2(L_0/2)},

each in ratios that tend to 1 as :math:`p_0 \to 1` (:meth:`_ZeroModified._truncation`: nothing formed by
subtraction, nothing underflowing to 0/0 far left).  A zero-inflated zero is
not log-concave (:math:`\ell` falls from 0 to :math:`\log\pi` across :math:`p_0`'s drop); the zero-truncated Poisson
is (its log partition function :math:`\log(e^{e^\eta} - 1)` is convex).  The tilted integrals are the sinh rule's
(:mod:`relaxep.likelihoods.smooth`), their modes searched from the cavity to where the likelihood bends.  The
evidence gradient in :math:`\log\pi` uses :math:`\partial_{\log\pi}\ell = \pi(1 - p_0)/p(0 | f) = (1 - w)(1 - p_0)` (a
zero-inflated zero), 1 (a hurdle zero) and :math:`-\pi/(1 - \pi)` (a positive count); in the dispersion, the count
model's plus
:math:`(1 - w)`-weighted or truncation terms in :math:`\partial L_0`.  Zero-inflated and hurdle GP models: GPstuff's
``lik_zinegbin`` and ``lik_hurdle`` (Vanhatalo et al. 2013); the GLMs in statsmodels and R's ``pscl``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit

from relaxep._typing import Array
from relaxep.likelihoods.base import _as_floats, check_hyperparameter
from relaxep.likelihoods.count_predictive import CountPredictive
from relaxep.likelihoods.counts import CountLikelihood, read_rows
from relaxep.likelihoods.negative_binomial import NegativeBinomial
from relaxep.likelihoods.poisson import Poisson
from relaxep.likelihoods.smooth import BEND, Columns, SmoothLikelihood

__all__ = ["HurdleNegativeBinomial", "HurdlePoisson", "ZeroInflatedNegativeBinomial", "ZeroInflatedPoisson"]

_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(96)
_GH_W = _GH_W / np.sqrt(2.0 * np.pi)


class _ZeroModified(CountPredictive, SmoothLikelihood):
    """Shared by the four: the count model, the zero probability, targets, tilted integrals and predictive."""

    kind: ClassVar[str] = "count"
    is_density: ClassVar[bool] = False
    target_width: ClassVar[int] = 2
    latent_is_link: ClassVar[bool] = True
    #: whether the zeros are the hurdle's (``pi`` alone) or the zero-inflated mixture's
    hurdle: ClassVar[bool] = False
    #: the zero probability's constructor parameter
    zero_name: ClassVar[str] = "zero_inflation"

    def _count(self) -> CountLikelihood:
        """The count model :math:`p_c` (its dispersion fixed at this likelihood's)."""
        raise NotImplementedError

    @property
    def _pi(self) -> float:
        return float(getattr(self, self.zero_name))

    # ------------------------------------------------------------ targets
    def check_targets(self, y: ArrayLike, n: int | None = None) -> Array:
        """Counts ``(n,)`` or ``[count, log exposure]`` rows ``(n, 2)``, as the count models take them."""
        return CountLikelihood.check_targets(self, y, n)  # type: ignore[arg-type]

    def read_targets(self, y: ArrayLike, log_exposure: ArrayLike | None = None) -> Array:
        """Counts with each row's log exposure where given, as the count models read them
        (:func:`~relaxep.likelihoods.counts.read_rows`)."""
        return read_rows(self, y, log_exposure)

    # ------------------------------------------------------------ the model, in f
    def _zero_terms(self, eta: Array) -> tuple[Array, Array, Array]:
        r""":math:`L_0, L_0', L_0''` of the count model at :math:`\eta`."""
        count = self._count()
        zero = np.zeros_like(eta)
        return (count._log_pmf(zero, eta), *count._dlog_pmf(zero, eta))

    def _zero_logs(self, eta: Array) -> tuple[Array, Array, Array]:
        r""":math:`\log(-L_0)`, :math:`\log(-L_0')`, :math:`\log(-L_0'')`, each without underflow far left (Poisson: all
        :math:`\eta`; NB, :math:`x = \eta - \log r`: :math:`\log r` plus :math:`\log\operatorname{sp}(x)`,
        :math:`\log\sigma(x)`, :math:`\log\sigma(x) + \log\sigma(-x)`)."""
        count = self._count()
        if not isinstance(count, NegativeBinomial):
            return eta, eta, eta
        log_r = float(np.log(float(count.dispersion)))
        x = eta - log_r
        log_sp = np.where(
            x < -30.0, x - 0.5 * np.exp(np.minimum(x, 0.0)), np.log(np.logaddexp(0.0, np.maximum(x, -30.0)))
        )
        up, down = -np.logaddexp(0.0, -x), -np.logaddexp(0.0, x)
        return log_r + log_sp, log_r + up, log_r + up + down

    def _truncation(self, eta: Array) -> tuple[Array, Array, Array]:
        r""":math:`-\log(1 - p_0)` and its two derivatives in :math:`\eta`, with :math:`z = -L_0`:
        :math:`-\log z - \log((1 - e^{-z})/z)`, :math:`L_0'/L_0 \cdot z/(e^z - 1)`, and
        :math:`L_0''/L_0 \cdot z/(e^z - 1) - (L_0'/z)^2 (z/2/\sinh(z/2))^2`, each ratio taken to its limit 1 as
        :math:`z \to 0` (the far left, where :math:`p_0 \to 1`)."""
        log_z, log_d, log_dd = self._zero_logs(eta)
        z = np.exp(log_z)
        small = z < 1e-8
        zs = np.where(small, 1.0, z)
        with np.errstate(over="ignore", invalid="ignore"):
            kept = -np.log(-np.expm1(-zs))  # -log(1 - e^{-z}), 0 for an infinite z
            over = np.where(small, 1.0 - 0.5 * z, np.where(zs < 700.0, zs / np.expm1(np.minimum(zs, 700.0)), 0.0))
            half = 0.5 * zs
            pair = np.where(small, 1.0, np.where(half < 350.0, (half / np.sinh(np.minimum(half, 350.0))) ** 2, 0.0))
        value = np.where(
            small, -log_z - np.log1p(-0.5 * np.minimum(z, 1e-8)), kept
        )  # (-log z - log((1 - e^{-z}) / z) near 0)
        d1 = -np.exp(log_d - log_z) * over
        d2 = -np.exp(log_dd - log_z) * over + np.exp(2.0 * (log_d - log_z)) * pair
        return value, d1, d2

    def _log_lik_of(self, cols: Columns, f: Array) -> Array:
        y, offset = cols
        eta = f + offset
        pi = self._pi
        l0 = self._zero_terms(eta)[0]
        if self.hurdle:
            positive = np.log1p(-pi) + self._count()._log_pmf(y, eta) + self._truncation(eta)[0]
            return np.where(y > 0.0, positive, np.log(pi))
        zero = np.logaddexp(np.log(pi), np.log1p(-pi) + l0)
        return np.where(y > 0.0, np.log1p(-pi) + self._count()._log_pmf(y, eta), zero)

    def _dlog_lik_of(self, cols: Columns, f: Array) -> tuple[Array, Array]:
        y, offset = cols
        eta = f + offset
        pi = self._pi
        l0, d0, dd0 = self._zero_terms(eta)
        d1, d2 = self._count()._dlog_pmf(y, eta)
        if self.hurdle:
            _, t1, t2 = self._truncation(eta)
            return np.where(y > 0.0, d1 + t1, 0.0), np.where(y > 0.0, d2 + t2, 0.0)
        w = self._share(l0, pi)
        return np.where(y > 0.0, d1, w * d0), np.where(y > 0.0, d2, w * dd0 + w * (1.0 - w) * d0 * d0)

    @staticmethod
    def _share(l0: Array, pi: float) -> Array:
        r""":math:`w = (1 - \pi)p_0 / (\pi + (1 - \pi)p_0)`, as ``expit`` of the log odds."""
        return expit(np.log1p(-pi) + l0 - np.log(pi))

    def _bend_of(self, cols: Columns, power: float) -> tuple[Array, Array, float]:
        r"""The count model's bend (:meth:`~relaxep.likelihoods.counts.CountLikelihood._bend`, in :math:`\eta`), widened
        to :math:`[\log\epsilon, \log(45 + |\operatorname{logit}\pi|)]` where :math:`p_0` drops (a zero-inflated zero's
        share :math:`w` falls from 1 to :math:`e^{-40}` there; the truncation's curvature lives there too), width 1."""
        y, offset = cols
        lo, hi = self._count()._bend(y, power)
        top = float(np.log(45.0 + abs(np.log(self._pi) - np.log1p(-self._pi))))
        lo, hi = np.minimum(lo, np.log(BEND)), np.maximum(hi, top)
        if not self.hurdle:
            hi = np.where(y > 0.0, hi, top)
        return lo - offset, hi - offset, 1.0

    def _drop(self) -> float:
        r"""The :math:`\eta` where :math:`L_0 = \min(\log(\pi/(1 - \pi)), -1/2)`: where a zero's likelihood turns
        from 0 towards :math:`\log\pi` (Poisson: :math:`L_0 = -e^\eta`; NB:
        :math:`-r\operatorname{sp}(\eta - \log r)`)."""
        target = min(np.log(self._pi) - np.log1p(-self._pi), -0.5)
        count = self._count()
        if isinstance(count, NegativeBinomial):
            r = float(count.dispersion)
            return float(np.log(r) + np.log(np.expm1(-target / r)))
        return float(np.log(-target))

    def _peak_of(self, cols: Columns) -> Array:
        r"""A positive count's peak :math:`\log y - o`, a zero's drop (:meth:`_drop`): a zero-inflated zero is not
        log-concave."""
        y, offset = cols
        with np.errstate(divide="ignore"):
            return np.where(y > 0.0, np.log(np.maximum(y, 0.5)), self._drop()) - offset

    def _dtheta_of(self, cols: Columns, f: Array) -> Array:
        y, offset = cols
        eta = f + offset
        pi = self._pi
        l0 = self._zero_terms(eta)[0]
        positive = y > 0.0
        grads = {}
        if self.hurdle:
            grads[self.zero_name] = np.where(positive, -pi / (1.0 - pi), 1.0)
        else:
            w = self._share(l0, pi)
            grads[self.zero_name] = np.where(positive, -pi / (1.0 - pi), (1.0 - w) * -np.expm1(l0))
        count = self._count()
        if isinstance(count, NegativeBinomial) and "dispersion" in self.hyperparameter_names:
            learned = NegativeBinomial(float(count.dispersion))  # (its gradient, whether or not it is fixed here)
            g_y = learned._dlog_pmf_dtheta(y, eta)[..., 0]
            g_0 = learned._dlog_pmf_dtheta(np.zeros_like(eta), eta)[..., 0]
            if self.hurdle:
                grads["dispersion"] = np.where(positive, g_y + g_0 / np.expm1(-l0), 0.0)
            else:
                grads["dispersion"] = np.where(positive, g_y, self._share(l0, pi) * g_0)
        names = [h.name for h in self.hyperparameters if not h.fixed]
        return np.stack([np.broadcast_to(grads[name], eta.shape) for name in names], axis=-1)

    # ------------------------------------------------------------ predictive
    def _count_cdf(self, k: Array, eta: Array) -> Array:
        r""":math:`P(Y \le k | \eta)`: :math:`\pi + (1 - \pi)F_c(k)`, or for the hurdle
        :math:`\pi + (1 - \pi)(F_c(k) - p_0)/(1 - p_0)`."""
        pi = self._pi
        count = self._count()
        cdf = count._count_cdf(k, eta)
        if not self.hurdle:
            return pi + (1.0 - pi) * cdf
        l0 = self._zero_terms(eta)[0]
        return pi + (1.0 - pi) * np.clip((cdf - np.exp(l0)) / -np.expm1(l0), 0.0, 1.0)

    def _count_ppf(self, p: float, eta: Array) -> Array:
        """An upper bound for the interval's search: the count model's quantile far out (at least 20)."""
        return np.maximum(self._count()._count_ppf(1.0 - 1e-9, eta), 20.0)

    def predict_y(self, mean: ArrayLike, var: ArrayLike, log_exposure: ArrayLike = 0.0) -> tuple[Array, Array]:
        r"""Mean and variance of the count under :math:`f_* \sim N(m, v)`: :math:`E[y] = E_f[E[y | f]]`,
        :math:`\operatorname{Var}[y] = E_f[\operatorname{Var}(y | f)] + \operatorname{Var}_f(E[y | f])`, by 96-node
        Gauss-Hermite in :math:`f` of the conditional moments (for the zero-inflated count
        :math:`E[y | f] = (1 - \pi)\mu` and :math:`E[y^2 | f] = (1 - \pi)(\mu + \mu^2(1 + 1/r))`; for the hurdle
        both divided by :math:`1 - p_0`)."""
        mean, var, offset = np.broadcast_arrays(*_as_floats(mean, var, log_exposure))
        eta = (mean + offset)[..., None] + np.sqrt(var)[..., None] * _GH_X
        pi = self._pi
        count = self._count()
        inv_r = 1.0 / float(count.dispersion) if isinstance(count, NegativeBinomial) else 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            mu = np.exp(eta)
            first, second = (1.0 - pi) * mu, (1.0 - pi) * (mu + mu * mu * (1.0 + inv_r))
            if self.hurdle:
                rest = -np.expm1(self._zero_terms(eta)[0])
                first, second = first / rest, second / rest
            m1 = np.sum(_GH_W * first, axis=-1)
            return m1, np.maximum(np.sum(_GH_W * second, axis=-1) - m1**2, 0.0)


class ZeroInflatedPoisson(_ZeroModified):
    r"""Zero-inflated Poisson counts: :math:`y = 0` with probability :math:`\pi`, else
    :math:`\operatorname{Poisson}(e^{f + o})`.

    Parameters
    ----------
    zero_inflation : float
        :math:`\pi \in (0, 1)`, the probability of a structural zero.
    zero_inflation_bounds : pair of float or "fixed"
        Bounds for learning it (in log space; the upper below 1).

    Notes
    -----
    Targets as :class:`~relaxep.likelihoods.Poisson`'s (counts, or rows ``[count, log exposure]``).  See
    :mod:`relaxep.likelihoods.zero_modified`.

    References
    ----------
    Lambert, D. (1992). Zero-inflated Poisson regression, with an application to defects in manufacturing.
    Technometrics 34(1), 1-14.
    """

    hyperparameter_names = ("zero_inflation",)

    def __init__(
        self, zero_inflation: float = 0.1, zero_inflation_bounds: tuple[float, float] | str = (1e-6, 0.999)
    ) -> None:
        self.zero_inflation, self.zero_inflation_bounds = _check_probability(
            zero_inflation, zero_inflation_bounds, "zero_inflation"
        )

    def _count(self) -> CountLikelihood:
        return Poisson()


class ZeroInflatedNegativeBinomial(_ZeroModified):
    r"""Zero-inflated negative binomial (NB2) counts: :math:`y = 0` with probability :math:`\pi`, else
    :class:`~relaxep.likelihoods.NegativeBinomial`'s.

    Parameters
    ----------
    zero_inflation : float
        :math:`\pi \in (0, 1)`, the probability of a structural zero.
    dispersion : float
        The count model's dispersion :math:`r > 0`.
    zero_inflation_bounds, dispersion_bounds : pair of float or "fixed"
        Bounds for learning them (in log space).

    References
    ----------
    Greene, W. H. (1994). Accounting for excess zeros and sample selection in Poisson and negative binomial
    regression models. NYU Stern Working Paper EC-94-10.
    """

    hyperparameter_names = ("zero_inflation", "dispersion")

    def __init__(
        self,
        zero_inflation: float = 0.1,
        dispersion: float = 1.0,
        zero_inflation_bounds: tuple[float, float] | str = (1e-6, 0.999),
        dispersion_bounds: tuple[float, float] | str = (1e-3, 1e3),
    ) -> None:
        self.zero_inflation, self.zero_inflation_bounds = _check_probability(
            zero_inflation, zero_inflation_bounds, "zero_inflation"
        )
        self.dispersion, self.dispersion_bounds = check_hyperparameter(dispersion, dispersion_bounds, "dispersion")

    def _count(self) -> CountLikelihood:
        return NegativeBinomial(float(self.dispersion), "fixed")


class HurdlePoisson(_ZeroModified):
    r"""Hurdle Poisson counts: :math:`y = 0` with probability :math:`\pi`, else a zero-truncated
    :math:`\operatorname{Poisson}(e^{f + o})`.

    Parameters
    ----------
    zero_probability : float
        :math:`\pi \in (0, 1)`, the probability of a zero (a constant: the zero rows do not inform :math:`f`).
    zero_probability_bounds : pair of float or "fixed"
        Bounds for learning it (in log space; the upper below 1).

    References
    ----------
    Mullahy, J. (1986). Specification and testing of some modified count data models. Journal of Econometrics
    33(3), 341-365.
    """

    hurdle = True
    zero_name = "zero_probability"
    hyperparameter_names = ("zero_probability",)

    def __init__(
        self, zero_probability: float = 0.3, zero_probability_bounds: tuple[float, float] | str = (1e-6, 0.999)
    ) -> None:
        self.zero_probability, self.zero_probability_bounds = _check_probability(
            zero_probability, zero_probability_bounds, "zero_probability"
        )

    def _count(self) -> CountLikelihood:
        return Poisson()


class HurdleNegativeBinomial(_ZeroModified):
    r"""Hurdle negative binomial counts: :math:`y = 0` with probability :math:`\pi`, else a zero-truncated
    :class:`~relaxep.likelihoods.NegativeBinomial`.

    Parameters
    ----------
    zero_probability : float
        :math:`\pi \in (0, 1)`, the probability of a zero.
    dispersion : float
        The count model's dispersion :math:`r > 0`.
    zero_probability_bounds, dispersion_bounds : pair of float or "fixed"
        Bounds for learning them (in log space).

    References
    ----------
    Mullahy, J. (1986). Specification and testing of some modified count data models. Journal of Econometrics
    33(3), 341-365.
    """

    hurdle = True
    zero_name = "zero_probability"
    hyperparameter_names = ("zero_probability", "dispersion")

    def __init__(
        self,
        zero_probability: float = 0.3,
        dispersion: float = 1.0,
        zero_probability_bounds: tuple[float, float] | str = (1e-6, 0.999),
        dispersion_bounds: tuple[float, float] | str = (1e-3, 1e3),
    ) -> None:
        self.zero_probability, self.zero_probability_bounds = _check_probability(
            zero_probability, zero_probability_bounds, "zero_probability"
        )
        self.dispersion, self.dispersion_bounds = check_hyperparameter(dispersion, dispersion_bounds, "dispersion")

    def _count(self) -> CountLikelihood:
        return NegativeBinomial(float(self.dispersion), "fixed")


def _check_probability(value: float, bounds: tuple[float, float] | str, name: str) -> tuple[float, object]:
    """A probability in (0, 1) and its bounds (below 1), else a ``ValueError`` naming ``name``."""
    value, bounds = check_hyperparameter(value, bounds, name)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {value!r}")
    if not isinstance(bounds, str) and not bounds[1] < 1.0:
        raise ValueError(f"{name}_bounds must lie below 1 (a probability), got {bounds!r}")
    return value, bounds
