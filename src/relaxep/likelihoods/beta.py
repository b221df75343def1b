r"""The beta likelihood for proportions in (0, 1): a logit link on the mean and a learned precision.

.. math::
    p(y | f) = \frac{\Gamma(\phi)}{\Gamma(\mu\phi)\Gamma((1 - \mu)\phi)}\, y^{\mu\phi - 1}(1 - y)^{(1 - \mu)\phi - 1},
    \qquad \mu = \sigma(f),

the mean-precision parametrisation of Ferrari & Cribari-Neto (2004) (R's ``betareg``, statsmodels' ``BetaModel``):
:math:`E[y | f] = \mu`, :math:`\operatorname{Var}[y | f] = \mu(1 - \mu)/(1 + \phi)`.  With :math:`a = \mu\phi`,
:math:`b = (1 - \mu)\phi` (each from ``expit`` of :math:`\pm f`, so neither is formed as :math:`1 - \mu`),
:math:`y^\star = \log y - \log(1 - y)` and :math:`\mu^\star = \psi(a) - \psi(b)`,

.. math::
    \ell' = \phi\mu(1 - \mu)(y^\star - \mu^\star),\qquad
    \ell'' = (1 - 2\mu)\,\ell' - \phi^2\mu^2(1 - \mu)^2\big(\psi'(a) + \psi'(b)\big).

Not log-concave everywhere, but its tails in :math:`f` are linear (slope :math:`\mp 1`: :math:`-\log\Gamma(b) \approx
\log b` as :math:`b \to 0`), so the tilted is unimodal in practice and its integrals are the sinh rule's
(:mod:`relaxep.likelihoods.smooth`).  The evidence gradient in :math:`\log\phi` uses

.. math::
    \partial_{\log\phi}\ell = \phi\big(\psi(\phi) - \mu\psi(a) - (1 - \mu)\psi(b) + \mu\log y
    + (1 - \mu)\log(1 - y)\big).

GP regression with a beta likelihood by EP: Rasmussen & Nickisch (2010), GPML's ``likBeta``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import betainc, digamma, expit, gammaln, polygamma

from relaxep._typing import Array
from relaxep._validation import check_target_vector
from relaxep.likelihoods.base import _as_floats, check_hyperparameter
from relaxep.likelihoods.binomial import Binomial
from relaxep.likelihoods.smooth import Columns, SmoothLikelihood, central_interval, two_sided_tail

__all__ = ["Beta"]

_F_MAX = 600.0  # |f| beyond which mu's complement would underflow: the log-likelihood is held there


class Beta(SmoothLikelihood):
    r"""Proportions :math:`y \in (0, 1)`: :math:`y \sim \operatorname{Beta}(\mu\phi, (1 - \mu)\phi)`,
    :math:`\mu = \sigma(f)`.

    Parameters
    ----------
    precision : float
        :math:`\phi > 0`: :math:`\operatorname{Var}[y | f] = \mu(1 - \mu)/(1 + \phi)`.
    precision_bounds : pair of float or "fixed"
        Bounds for learning ``precision`` (in log space, scikit-learn's kernel convention).

    Notes
    -----
    Targets strictly inside (0, 1): an exact 0 or 1 has zero density and is refused (transform them first, e.g.
    Smithson & Verkuilen's :math:`(y(n - 1) + 1/2)/n`).  ``GPRegressor(likelihood=Beta())``'s ``predict`` is the
    predictive mean :math:`E[\sigma(f_*)]`; the latent is the mean's logit.  See :mod:`relaxep.likelihoods.beta`.

    References
    ----------
    Ferrari, S. & Cribari-Neto, F. (2004). Beta regression for modelling rates and proportions. Journal of Applied
    Statistics 31(7), 799-815.
    Rasmussen, C. E. & Nickisch, H. (2010). Gaussian processes for machine learning (GPML) toolbox. JMLR 11.
    """

    hyperparameter_names = ("precision",)
    latent_is_link: ClassVar[bool] = True

    def __init__(self, precision: float = 10.0, precision_bounds: tuple[float, float] | str = (1e-2, 1e5)) -> None:
        self.precision, self.precision_bounds = check_hyperparameter(precision, precision_bounds, "precision")

    def check_targets(self, y: ArrayLike, n: int | None = None) -> Array:
        """Proportions strictly inside (0, 1); a ``ValueError`` naming ``y`` otherwise (an exact 0 or 1 included)."""
        values = check_target_vector(y, n, "targets", "proportions in (0, 1) for Beta")
        outside = (values <= 0.0) | (values >= 1.0)
        if np.any(outside):
            bad = np.unique(values[outside])[:5].tolist()
            raise ValueError(
                f"y must lie strictly inside (0, 1) for Beta (found {bad}; with normalize_y=True the targets are "
                "rescaled out of it: leave it off)"
            )
        return values

    def _parts(self, f: Array) -> tuple[Array, Array, float]:
        f = np.clip(f, -_F_MAX, _F_MAX)
        return expit(f), expit(-f), float(self.precision)

    def _log_lik_of(self, cols: Columns, f: Array) -> Array:
        (y,) = cols
        mu, nu, phi = self._parts(f)
        a, b = mu * phi, nu * phi
        return gammaln(phi) - gammaln(a) - gammaln(b) + (a - 1.0) * np.log(y) + (b - 1.0) * np.log1p(-y)

    def _dlog_lik_of(self, cols: Columns, f: Array) -> tuple[Array, Array]:
        (y,) = cols
        mu, nu, phi = self._parts(f)
        a, b = mu * phi, nu * phi
        slope = mu * nu * phi
        d1 = slope * (np.log(y) - np.log1p(-y) - digamma(a) + digamma(b))
        return d1, (nu - mu) * d1 - slope**2 * (polygamma(1, a) + polygamma(1, b))

    def _bend_of(self, cols: Columns, power: float) -> tuple[Array, Array, float]:
        r"""Within :math:`\log(1 + \phi) + 8` of :math:`\operatorname{logit} y` (beyond, :math:`\ell'` is within
        :math:`e^{-8}` of its tails' slopes :math:`\pm 1`), width 1."""
        at = self._peak_of(cols)
        phi = float(self.precision)
        reach = np.log1p(phi) + 8.0
        return at - reach, at + reach, min(1.0, 1.0 / np.sqrt(power * phi / 4.0))

    def _peak_of(self, cols: Columns) -> Array:
        r"""Near :math:`\operatorname{logit} y` (the peak solves :math:`\psi(a) - \psi(b) = \operatorname{logit} y`):
        the beta is not log-concave in its logit, and a cavity far from the target gives the tilted two modes."""
        (y,) = cols
        return np.log(y) - np.log1p(-y)

    def _dtheta_of(self, cols: Columns, f: Array) -> Array:
        (y,) = cols
        mu, nu, phi = self._parts(f)
        a, b = mu * phi, nu * phi
        grad = phi * (digamma(phi) - mu * digamma(a) - nu * digamma(b) + mu * np.log(y) + nu * np.log1p(-y))
        return grad[..., None]

    # ------------------------------------------------------------ predictive
    def _moments_of_mu(self, mean: Array, var: Array) -> tuple[Array, Array]:
        r""":math:`E[\sigma(f)]` and :math:`E[\sigma(f)^2]` under :math:`N(m, v)`: a logit binomial's :math:`Z` for one
        success in one trial and two in two."""
        shape = (*mean.shape, 1)
        link = Binomial("logit")
        first = np.exp(link.log_z(np.ones(shape) * [1.0, 0.0], mean, var).log_z)
        return first, np.exp(link.log_z(np.ones(shape) * [2.0, np.log(2.0)], mean, var).log_z)

    def predict(self, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""The predictive mean :math:`E[y_*] = E[\sigma(f_*)]`."""
        mean, var = np.broadcast_arrays(*_as_floats(mean, var))
        return self._moments_of_mu(mean, var)[0]

    def predict_y(self, mean: ArrayLike, var: ArrayLike) -> tuple[Array, Array]:
        r"""Mean and variance of the predictive: :math:`E[y_*] = E[\mu]`,
        :math:`\operatorname{Var}[y_*] = (E[\mu] - E[\mu^2])/(1 + \phi) + E[\mu^2] - E[\mu]^2`."""
        mean, var = np.broadcast_arrays(*_as_floats(mean, var))
        first, second = self._moments_of_mu(mean, var)
        return first, (first - second) / (1.0 + float(self.precision)) + np.maximum(second - first**2, 0.0)

    def _cdf(self, q: Array, f: Array) -> Array:
        mu, nu, phi = self._parts(f)
        return betainc(mu * phi, nu * phi, q)

    def predict_interval(self, mean: ArrayLike, var: ArrayLike, level: float = 0.95) -> tuple[Array, Array]:
        r"""Central interval of :math:`\int \operatorname{Beta}(y | \mu\phi, (1 - \mu)\phi) N(f | m, v) df`: its
        quantiles by bisection in the logit of :math:`y`."""
        return central_interval(self._cdf, mean, var, level, expit, (-40.0, 40.0))

    def loo_tail(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, pointwise: ArrayLike) -> Array:
        """Two-sided tail of each target under its leave-one-out predictive
        (:func:`~relaxep.likelihoods.smooth.two_sided_tail`)."""
        return two_sided_tail(self._cdf, y, mean, var)
