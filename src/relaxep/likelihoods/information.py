r"""The expected information gain of a binary observation about the latent function (BALD).

For a label :math:`y \in \{-1, +1\}` with likelihood :math:`t(y f)` and a Gaussian latent predictive
:math:`f \sim N(\mu, s^2)` (an EP posterior's), the mutual information between ``y`` and ``f``
(Houlsby, Huszar, Ghahramani & Lengyel 2011, *Bayesian active learning for classification and preference
learning*, arXiv:1112.5745, eq. 1) is

.. math:: I = h\Big(\int t(f) N(f|\mu, s^2) df\Big) - \int h(t(f)) N(f | \mu, s^2) df,

:math:`h(p) = -p \log_2 p - (1-p)\log_2(1-p)` in bits.  The first term is the likelihood's predictive.  For
the probit :math:`t = \Phi` Houlsby et al. (their section 3) approximate :math:`h(\Phi(x))` by the Gaussian
:math:`\exp(-x^2/(\pi \ln 2))` and so obtain the second in closed form,

.. math:: \int h(\Phi(f)) N(f|\mu,s^2) df \approx \frac{C}{\sqrt{s^2 + C^2}}
          \exp\Big(-\frac{\mu^2}{2(s^2 + C^2)}\Big), \qquad C = \sqrt{\pi \ln 2 / 2};

:func:`information_gain` computes the second term by quadrature for any binary likelihood (within 1e-11 bits; the
default), exactly for the noisy step (:math:`h(t(f)) = h(\epsilon)` but at :math:`f = 0`, a null set, so the
second term is :math:`h(\epsilon)` for :math:`s > 0`), and :func:`probit_information_gain` is the closed form: an
approximation, below the exact value by at most 0.0027 bits (measured on a grid of :math:`\mu \in [-8, 8]`,
:math:`s^2 \in [10^{-4}, 10^4]`, ``tests/test_active_learning.py``).  :func:`expected_entropy` and
:func:`probit_expected_entropy` are the second terms alone (a mixture's BALD mixes them).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr

from relaxep._typing import Array
from relaxep.likelihoods.binary import NoisyStep
from relaxep.likelihoods.binary_base import BinaryLikelihood

__all__ = [
    "binary_entropy",
    "expected_entropy",
    "information_gain",
    "information_gain_slopes",
    "predictive_entropy",
    "probit_expected_entropy",
    "probit_information_gain",
]

_C = np.sqrt(np.pi * np.log(2.0) / 2.0)
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(64)  # probabilists': weight exp(-x^2/2)
_WEIGHTS = _WEIGHTS / np.sqrt(2.0 * np.pi)
#: above this predictive sd the expected entropy is integrated on a fixed grid in f (information_gain)
_WIDE = 0.5  # (in transition widths)
_GRID = np.linspace(-40.0, 40.0, 321)
_GRID_WEIGHTS = np.full(_GRID.size, _GRID[1] - _GRID[0])
_GRID_WEIGHTS[[0, -1]] *= 0.5
_CHUNK = 20_000


def binary_entropy(log_p: Array, log_q: Array) -> Array:
    r""":math:`h = -(p \log_2 p + q \log_2 q)` from :math:`\log p` and :math:`\log q = \log(1-p)`, each given to
    full relative precision (so ``h`` keeps its digits where ``p`` is within rounding of 0 or 1)."""
    return -(np.exp(log_p) * log_p + np.exp(log_q) * log_q) / np.log(2.0)


def predictive_entropy(likelihood: BinaryLikelihood, mean: ArrayLike, var: ArrayLike) -> Array:
    r""":math:`h(P(y = +1))`, the entropy in bits of the likelihood's predictive under ``N(mean, var)``."""
    d = likelihood.predict_log_odds(mean, var)  # log p - log q
    return binary_entropy(-np.logaddexp(0.0, -d), -np.logaddexp(0.0, d))


def information_gain(likelihood: BinaryLikelihood, mean: ArrayLike, var: ArrayLike) -> Array:
    r"""BALD, :math:`I(y; f)` in bits (module docstring), for the latent predictive ``N(mean, var)``: the
    predictive's entropy less :func:`expected_entropy`, clipped at 0 (rounding)."""
    mean, var = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(var, dtype=float))
    return np.maximum(predictive_entropy(likelihood, mean, var) - expected_entropy(likelihood, mean, var), 0.0)


def expected_entropy(likelihood: BinaryLikelihood, mean: ArrayLike, var: ArrayLike) -> Array:
    r""":math:`\int h(t(f)) N(f|\mu, s^2) df` in bits, the second term of BALD (module docstring).

    The noisy step's is :math:`h(\epsilon)` exactly where :math:`s > 0`.  Otherwise by 64-node Gauss-Hermite
    quadrature on :math:`\log t(\pm f)` where :math:`s \le w/2`, :math:`w` the likelihood's transition width (1 for
    the probit and the logistic, the scale for the noisy probit); wider, the Gaussian's nodes would step over the bump
    of :math:`h(t(f))` (about :math:`w` wide at :math:`f = 0`), so the trapezoid rule on
    :math:`[-40w, 40w]` with step :math:`w/4` is used instead, on :math:`h(t(f)) - h_\infty`, where
    :math:`h_\infty = h(t(\pm\infty))` (0, or :math:`h(\epsilon)` under a label-noise floor; the likelihoods'
    :math:`t(-g) = 1 - t(g)` makes it one number) is added back whole: the integrand then vanishes at the ends and
    is analytic in a strip of half-width :math:`\pi w` or more, so the rule's error is of order
    :math:`e^{-8\pi^2}`, and the Gaussian, at least :math:`w/2` wide, is sampled at :math:`w/4`.  Within 1e-11 bits
    of adaptive quadrature for :math:`s^2` from 0 to 1000 (``tests/test_preference.py``; with Gauss-Hermite up to
    :math:`s = 2`, the noisy probit's was 2e-7 off near :math:`s = 2`).
    """
    return _expected_entropy(likelihood, mean, var)[0]


def _expected_entropy(
    likelihood: BinaryLikelihood, mean: ArrayLike, var: ArrayLike, slopes: bool = False
) -> tuple[Array, Array | None, Array | None]:
    """:func:`expected_entropy` and, with ``slopes``, its derivatives in ``mean`` and ``var`` under the same rule
    (:func:`information_gain_slopes`; ``None`` without)."""
    mean, var = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(var, dtype=float))
    sd = np.sqrt(np.maximum(var, 0.0))
    d_mean = np.zeros(mean.shape) if slopes else None
    d_var = np.zeros(mean.shape) if slopes else None
    if isinstance(likelihood, NoisyStep):  # (the grid below would put weight on the jump's t(0) = 1/2)
        floor = _entropy_of(likelihood, np.ones(1))[0]
        return np.where(sd > 0.0, floor, _entropy_of(likelihood, mean)), d_mean, d_var
    expected = np.empty(mean.shape)
    width = float(getattr(likelihood, "_transition_width", 1.0))
    narrow = sd <= _WIDE * width
    if np.any(narrow):
        entropy = _entropy_of(likelihood, mean[narrow][:, None] + sd[narrow][:, None] * _NODES)
        expected[narrow] = entropy @ _WEIGHTS
        if slopes:  # (the Gaussian's own derivatives at the nodes f = mu + s x; 0 where s = 0)
            inner = narrow & (sd > 0.0)
            kept = inner[narrow]
            d_mean[inner] = (entropy[kept] * _NODES) @ _WEIGHTS / sd[inner]
            d_var[inner] = (entropy[kept] * (_NODES**2 - 1.0)) @ _WEIGHTS / (2.0 * var[inner])
    wide = np.flatnonzero(~narrow.ravel())
    flat_mean, flat_sd, flat_out = mean.ravel(), sd.ravel(), expected.reshape(-1)
    grid = width * _GRID
    entropy_on_grid = _entropy_of(likelihood, grid[None, :])[0]
    floor = entropy_on_grid[-1]  # h(t(+-inf)): 0, or the label-noise floor's h(eps)
    excess = (entropy_on_grid - floor) * (width * _GRID_WEIGHTS)
    for start in range(0, wide.size, _CHUNK):
        rows = wide[start : start + _CHUNK]
        z = (grid[None, :] - flat_mean[rows, None]) / flat_sd[rows, None]
        density = np.exp(-0.5 * z**2) / (np.sqrt(2.0 * np.pi) * flat_sd[rows, None])
        flat_out[rows] = floor + (density * (entropy_on_grid - floor)) @ (width * _GRID_WEIGHTS)
        if slopes:  # (the density's derivatives)
            d_mean.reshape(-1)[rows] = (density * z / flat_sd[rows, None]) @ excess
            d_var.reshape(-1)[rows] = (density * (z**2 - 1.0) / (2.0 * flat_sd[rows, None] ** 2)) @ excess
    return expected, d_mean, d_var


def information_gain_slopes(
    likelihood: BinaryLikelihood, mean: ArrayLike, var: ArrayLike
) -> tuple[Array, Array, Array]:
    r""":func:`information_gain` and its derivatives in the latent mean :math:`\mu` and variance :math:`s^2` (for
    gradient-based acquisition optimisation, :class:`relaxep.botorch.InformationGain`).

    The predictive's entropy :math:`h(p)`, :math:`p = \sigma(d)` with the log-odds :math:`d = \log Z_t(\mu) -
    \log Z_t(-\mu)`: :math:`\partial h/\partial d = -d\,p(1-p)/\ln 2`, :math:`\partial_\mu d` from the likelihood's
    ``dlog_z`` and :math:`\partial_{s^2} \log Z = \frac12(\partial^2_\mu \log Z + (\partial_\mu \log Z)^2)` (the
    heat equation of a Gaussian smoothing).  The expected entropy :math:`E = \int h(t(f)) N(f|\mu, s^2) df` by the
    Gaussian's own derivatives under the same rule as :func:`expected_entropy` (Gauss-Hermite nodes :math:`f = \mu
    + s x`: :math:`\partial_\mu E = E[h\,x]/s`, :math:`\partial_{s^2} E = E[h\,(x^2 - 1)]/(2 s^2)`; the trapezoid
    grid: the density's derivatives; the noisy step's :math:`h(\epsilon)`: 0).  Where the gain is clipped at 0,
    its slopes are 0.
    """
    d, dd_dmean, dd_dvar = likelihood.predict_log_odds_slopes(mean, var)
    log_p, log_q = -np.logaddexp(0.0, -d), -np.logaddexp(0.0, d)
    dh_dd = -d * np.exp(log_p + log_q) / np.log(2.0)
    expected, de_dmean, de_dvar = _expected_entropy(likelihood, mean, var, slopes=True)
    gain = binary_entropy(log_p, log_q) - expected
    kept = gain > 0.0
    return (np.where(kept, gain, 0.0), np.where(kept, dh_dd * dd_dmean - de_dmean, 0.0),
            np.where(kept, dh_dd * dd_dvar - de_dvar, 0.0))  # fmt: skip


def _entropy_of(likelihood: BinaryLikelihood, f: Array) -> Array:
    ones = np.ones_like(f)
    return binary_entropy(likelihood.log_lik(ones, f), likelihood.log_lik(-ones, f))


def probit_expected_entropy(mean: ArrayLike, var: ArrayLike) -> Array:
    r"""Houlsby et al.'s closed-form approximation of the probit's expected entropy (module docstring), in bits:
    :math:`C (s^2+C^2)^{-1/2} \exp(-\mu^2/(2(s^2+C^2)))`, :math:`C = \sqrt{\pi \ln 2 / 2}`."""
    mean, var = np.asarray(mean, dtype=float), np.asarray(var, dtype=float)
    return _C / np.sqrt(var + _C**2) * np.exp(-(mean**2) / (2.0 * (var + _C**2)))


def probit_information_gain(mean: ArrayLike, var: ArrayLike) -> Array:
    r"""Houlsby et al.'s closed form of BALD for the probit :math:`t = \Phi` (module docstring), in bits:
    :math:`h(\Phi(\mu/\sqrt{1+s^2})) - C (s^2+C^2)^{-1/2} \exp(-\mu^2/(2(s^2+C^2)))`.  An approximation: its
    :math:`h(\Phi(x)) \approx \exp(-x^2/(\pi \ln 2))` puts the result below :func:`information_gain`'s by at most
    0.0027 bits (measured in ``tests/test_active_learning.py``)."""
    mean, var = np.asarray(mean, dtype=float), np.asarray(var, dtype=float)
    z = mean / np.sqrt(1.0 + var)
    first = binary_entropy(log_ndtr(z), log_ndtr(-z))
    return np.maximum(first - probit_expected_entropy(mean, var), 0.0)
