r"""Survival likelihoods: event times, right-, left- and interval-censored, as rows on the log-time scale.

A target is a row :math:`[\ell, \upsilon]` of log-times: an event at :math:`t` is :math:`[\log t, \log t]`, a
right-censored time ("alive at :math:`t`") :math:`[\log t, \infty]`, a left-censored one :math:`[-\infty, \log t]`,
an interval :math:`[\log l, \log u]`.  Every model here is a standardised noise :math:`\epsilon`
(:mod:`relaxep.likelihoods.survival_noise`) in a variable that is increasing in the log-time :math:`b` and linear
in the latent,

.. math::
    z(b, f) = \alpha(b) + \beta f,

so that :math:`P(\ell < \log T < \upsilon \mid f) = F(z(\upsilon, f)) - F(z(\ell, f))` and an event has the density
of :math:`T` at :math:`t = e^b`, :math:`p(z)\,\alpha'(b)\,e^{-b}`.  An accelerated-failure-time model (Kalbfleisch &
Prentice 2002, section 2.3) has :math:`\alpha(b) = b/\sigma`, :math:`\beta = -1/\sigma` (:math:`\log T = f +
\sigma\epsilon`; :mod:`relaxep.likelihoods.aft`); a proportional-hazards model with baseline cumulative hazard
:math:`\Lambda_0` has :math:`\alpha(b) = \log\Lambda_0(e^b)`, :math:`\beta = 1` and the minimum-Gumbel noise
(:math:`S(t | f) = \exp(-\Lambda_0(t)e^f)`; :mod:`relaxep.likelihoods.coxph`).  Per row,

.. math::
    \log p(y | f) = \begin{cases}
        \log p(z_b) + \log\alpha'(b) - b & \text{event at } b,\\
        \log S(z_\ell) & \text{right-censored},\qquad \log F(z_\upsilon) \quad \text{left-censored},\\
        \log\big(F(z_\upsilon) - F(z_\ell)\big) & \text{interval},
    \end{cases}

the interval's mass taken in log space from whichever tail is small (:func:`interval_log_mass`), its derivatives in
:math:`f` from :math:`D' = \beta(p(z_\upsilon) - p(z_\ell))` and :math:`D'' = \beta^2(p'(z_\upsilon) -
p'(z_\ell))`.  Each is log-concave in :math:`f` (a log-concave density's interval masses are log-concave in its
location, Prekopa's theorem), so the tilted integral is unimodal and is taken by the mode-centred sinh rule
(:mod:`relaxep.likelihoods.sinh_rule`), to 1e-8 of adaptive quadrature; the tilted expectations (Relaxed EP's
:math:`E[\log p]`, the cumulants, the hyperparameters' gradients) on the same nodes.  The predictive at a latent
:math:`N(m, v)`: :math:`S_*(t) = E_f[S(t | f)]` by an 80-point Gauss-Hermite rule in :math:`f` where the latent is
narrower than the likelihood's step (:math:`|\beta|\sqrt v \le 1`), else as :math:`E_\epsilon[\Phi((\epsilon -
\alpha(b) - \beta m)/(|\beta|\sqrt v))]` by the trapezoid rule in the noise (the integrand smooth on the
scale of the wider of the two), its pointwise band from
:math:`S(t | m \pm q\sqrt v)` (:math:`S(t|f)` is monotone in :math:`f`), and the median time where
:math:`S_*(t) = 1/2` by bisection.  On the host only (a fit on another array library computes these sites there).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr, ndtri

from relaxep._typing import Array
from relaxep._validation import check_unit_interval
from relaxep.likelihoods.base import Likelihood, TiltedLogZ
from relaxep.likelihoods.sinh_rule import moments_from_nodes, sinh_nodes
from relaxep.likelihoods.survival_noise import NoiseFamily
from relaxep.likelihoods.survival_targets import SurvivalRows, survival_targets

__all__ = ["SurvivalLikelihood", "interval_dlog_mass", "interval_log_mass"]

_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(80)
_GH_WEIGHTS = _GH_WEIGHTS / np.sqrt(2.0 * np.pi)
#: the trapezoid rule in the noise (step 0.2 over [-40, 40], where each family's density is below e^-37)
_EPS_STEP = 0.2
_EPS_NODES = np.linspace(-40.0, 40.0, 401)
_BISECTIONS = 200


def interval_log_mass(noise: NoiseFamily, z_lo: Array, z_hi: Array) -> Array:
    r""":math:`\log(F(z_{hi}) - F(z_{lo}))` for :math:`z_{lo} < z_{hi}` (either may be infinite), from the upper
    tail :math:`S(z_{lo}) - S(z_{hi})` where :math:`z_{lo}` is above the median, else from the lower tail: the
    smaller tail's difference, :math:`\log A + \operatorname{log1p}(-e^{\log B - \log A})`, never cancels."""
    lo_f, hi_f = np.where(np.isfinite(z_lo), z_lo, 0.0), np.where(np.isfinite(z_hi), z_hi, 0.0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        sf_lo = np.where(np.isfinite(z_lo), noise.log_sf(lo_f), np.where(z_lo < 0, 0.0, -np.inf))
        sf_hi = np.where(np.isfinite(z_hi), noise.log_sf(hi_f), np.where(z_hi < 0, 0.0, -np.inf))
        cdf_lo = np.where(np.isfinite(z_lo), noise.log_cdf(lo_f), np.where(z_lo < 0, -np.inf, 0.0))
        cdf_hi = np.where(np.isfinite(z_hi), noise.log_cdf(hi_f), np.where(z_hi < 0, -np.inf, 0.0))
        # (a tail that underflows in log space, -inf - -inf, has R = 0: its log mass is -inf)
        upper = sf_lo + np.log(-np.expm1(np.fmin(sf_hi - sf_lo, 0.0)))
        lower = cdf_hi + np.log(-np.expm1(np.fmin(cdf_lo - cdf_hi, 0.0)))
    return np.where(z_lo > noise.median, upper, lower)


def interval_dlog_mass(noise: NoiseFamily, z_lo: Array, z_hi: Array) -> tuple[Array, Array, Array, Array]:
    r"""The first two derivatives of :math:`\log D`, :math:`D = F(z_{hi}) - F(z_{lo})`, under a common shift of
    both ends, and the end ratios :math:`q = p(z)/D` (0 at an infinite end), without forming :math:`p/D` from
    logarithms that cancel far in a tail.

    From the smaller tail (as :func:`interval_log_mass`): above the median :math:`\log D = \log S(z_{lo}) +
    \log(1 - R)`, :math:`R = S(z_{hi})/S(z_{lo})`; with :math:`w = R/(1 - R)` and :math:`\rho_k = (\log
    S)^{(k)}(z_{hi}) - (\log S)^{(k)}(z_{lo})`,

    .. math::
        (\log D)' = (\log S)'(z_{lo}) - w\rho_1,\qquad
        (\log D)'' = (\log S)''(z_{lo}) - w\rho_2 - w(1 + w)\rho_1^2,

    :math:`q_{lo} = h(z_{lo})/(1 - R)`, :math:`q_{hi} = h(z_{hi})\,w` (:math:`h = -(\log S)'`, the hazard); below
    the median the mirror image in :math:`\log F` and the reversed hazard :math:`(\log F)'`."""
    fin_lo, fin_hi = np.isfinite(z_lo), np.isfinite(z_hi)
    lo_f, hi_f = np.where(fin_lo, z_lo, 0.0), np.where(fin_hi, z_hi, 0.0)
    upper = z_lo > noise.median
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        s1_lo, s2_lo = noise.dlog_sf(lo_f)
        s1_hi, s2_hi = noise.dlog_sf(hi_f)
        c1_lo, c2_lo = noise.dlog_cdf(lo_f)
        c1_hi, c2_hi = (np.where(fin_hi, c, 0.0) for c in noise.dlog_cdf(hi_f))
        log_r_sf = np.where(fin_hi, noise.log_sf(hi_f), -np.inf) - noise.log_sf(lo_f)
        log_r_cdf = np.where(fin_lo, noise.log_cdf(lo_f), -np.inf) - np.where(fin_hi, noise.log_cdf(hi_f), 0.0)
        log_r = np.where(np.isnan(log_r_sf), -np.inf, log_r_sf)  # both S underflowed: R = 0
        log_r = np.minimum(np.where(upper, log_r, log_r_cdf), 0.0)
        w, one_minus = 1.0 / np.expm1(-log_r), -np.expm1(log_r)  # R / (1 - R) (0 where R = 0), 1 - R
        has_r = w > 0
        rho1 = np.where(upper, s1_hi - s1_lo, c1_lo - c1_hi)
        rho2 = np.where(upper, s2_hi - s2_lo, c2_lo - c2_hi)
        d1 = np.where(upper, s1_lo, c1_hi) - np.where(has_r, w * rho1, 0.0)
        d2 = np.where(upper, s2_lo, c2_hi) - np.where(has_r, w * rho2 + w * (1.0 + w) * rho1**2, 0.0)
        q_lo = np.where(upper, -s1_lo / one_minus, np.where(has_r, c1_lo * w, 0.0))
        q_hi = np.where(upper, np.where(has_r, -s1_hi * w, 0.0), c1_hi / one_minus)
    return d1, d2, np.where(fin_lo, q_lo, 0.0), np.where(fin_hi, q_hi, 0.0)


class SurvivalLikelihood(Likelihood):
    r"""A survival model :math:`z(b, f) = \alpha(b) + \beta f` with a standardised noise (module docstring).

    A subclass gives :attr:`noise`, :meth:`_alpha`, :meth:`_log_dalpha`, :meth:`_alpha_inverse` and
    :attr:`_beta`, and :meth:`_dlog_lik_dtheta` for its hyperparameters; targets are rows ``[log_lower,
    log_upper]`` (:meth:`check_targets`).

    Attributes
    ----------
    risk_sign : float
        ``-1`` where a larger latent means a later event (accelerated failure time: :math:`f` is the log-time's
        location), ``+1`` where an earlier one (proportional hazards: :math:`f` is the log relative hazard); a risk
        score is ``risk_sign`` times the latent.
    """

    kind: ClassVar[str] = "survival"
    #: an event's term is a density of the time, a censored row's a probability (the mass of its interval): the
    #: values are not all densities, and no ``normalize_y`` rescales them
    is_density: ClassVar[bool] = False
    target_width: ClassVar[int] = 2
    risk_sign: ClassVar[float] = -1.0
    noise: ClassVar[NoiseFamily]

    # ------------------------------------------------------------ the model's transform
    @abstractmethod
    def _alpha(self, b: Array) -> Array:
        r""":math:`\alpha(b)` at finite log-times ``b``, increasing."""

    @abstractmethod
    def _log_dalpha(self, b: Array) -> Array:
        r""":math:`\log\alpha'(b)` at finite ``b``."""

    @abstractmethod
    def _alpha_inverse(self, a: Array) -> Array:
        r"""The log-time ``b`` with :math:`\alpha(b) = a`."""

    @property
    @abstractmethod
    def _beta(self) -> float:
        r""":math:`\beta`, the latent's coefficient in :math:`z`."""

    # ------------------------------------------------------------ targets
    def check_targets(self, y: ArrayLike, n: int | None = None) -> Array:
        """Rows ``[log_lower, log_upper]`` (module docstring) as a float ``(n, 2)`` array, or a ``ValueError``
        naming ``y``; the estimators build them from scikit-survival's structured arrays."""
        try:
            arr = np.array(y, dtype=float)
        except (TypeError, ValueError):
            raise ValueError("y must be rows [log_lower, log_upper] of log-times, shape (n, 2)") from None
        if arr.ndim != 2 or arr.shape[1] != 2 or (n is not None and arr.shape[0] != n):
            want = "(n, 2)" if n is None else f"({n}, 2)"
            raise ValueError(f"y must be rows [log_lower, log_upper] of log-times, shape {want}, got {arr.shape}")
        lo, hi = arr[:, 0], arr[:, 1]
        if np.any(np.isnan(arr)):
            raise ValueError("y holds NaN log-times")
        if np.any(lo > hi):
            raise ValueError("y has a row whose lower log-time is above its upper one")
        if np.any(lo == np.inf) or np.any(hi == -np.inf):
            raise ValueError("y has a row censored beyond every time (lower +inf or upper -inf)")
        return arr

    def read_targets(self, y: ArrayLike, log_exposure: ArrayLike | None = None) -> Array:
        """The rows ``[log_lower, log_upper]`` of scikit-survival's structured arrays, ``(time, event)`` columns or
        interval bounds (:func:`~relaxep.likelihoods.survival_targets.survival_targets`); a ``ValueError`` naming
        ``y`` for others (``TypeError`` for a structured array whose event field is not boolean)."""
        self._no_exposure(log_exposure)
        return survival_targets(y)

    # ------------------------------------------------------------ the fit's start, scale and risk
    def start_from(self, rows: ArrayLike | SurvivalRows) -> SurvivalLikelihood:
        """The likelihood a fit's search starts from, given its rows ``[log_lower, log_upper]`` (in memory, or
        :class:`~relaxep.likelihoods.survival_targets.SurvivalRows` where they are elsewhere): this one here; an
        AFT model's at the intercept-only maximum likelihood, a PH model's with its baseline from the rows."""
        return self

    @property
    def latent_scale(self) -> float:
        r"""The latent's scale for the default priors: an AFT model's :math:`\sigma` (the log-time noise's), else 1
        (a log relative hazard)."""
        return 1.0

    def risk(self, mean: ArrayLike) -> Array:
        r"""A risk score from the latent's mean :math:`m`, higher for an earlier event (scikit-survival's convention):
        :math:`\text{risk\_sign}\,(m + c)`, :math:`c` an AFT model's ``location`` (0 here)."""
        return self.risk_sign * (np.asarray(mean, dtype=float) + self._shift)

    def loo_tail(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, pointwise: ArrayLike) -> Array:
        r"""Each row's leave-one-out tail probability.  An event at :math:`t_i`: both tails of the leave-one-out
        predictive of :math:`T`, :math:`2\min(S_i, 1 - S_i)`, :math:`S_i = \int S(t_i | f)\, N(f | h_i, \lambda_i)\,
        df`; a censored row: the leave-one-out probability of its interval, :math:`\exp \log p(y_i | y_{-i})`
        (``pointwise``), as a Tobit's censored rows."""
        y, mean, var = (np.asarray(a, dtype=float) for a in (y, mean, var))
        p = np.exp(np.asarray(pointwise, dtype=float))
        event = y[:, 0] == y[:, 1]
        a = self._alpha(y[event, 0])[:, None]
        s = self._predictive_sf(a, mean[event] + self._shift, np.sqrt(var[event]))[:, 0]
        p[event] = 2.0 * np.minimum(s, 1.0 - s)
        return np.minimum(p, 1.0)

    @staticmethod
    def _rows(y: Array, like: Array, nodes: bool = False) -> tuple[Array, Array]:
        """``(lower, upper)`` of the rows ``y`` broadcast against ``like`` (``nodes``: ``like`` has a last axis of
        quadrature nodes beyond the rows')."""
        y = np.asarray(y, dtype=float)
        lo, hi = (y[..., 0, None], y[..., 1, None]) if nodes else (y[..., 0], y[..., 1])
        lo, hi, _ = np.broadcast_arrays(lo, hi, like)
        return lo, hi

    @property
    def _shift(self) -> float:
        """A fixed offset :math:`c` of the latent, :math:`z = \alpha(b) + \beta(f + c)` (an AFT model's
        ``location``; 0 here)."""
        return 0.0

    def _z(self, b: Array, f: Array) -> Array:
        """:math:`z(b, f) = \alpha(b) + \beta(f + c)` at finite ``b`` (``b`` broadcast against ``f``)."""
        return self._alpha(b) + self._beta * (f + self._shift)

    # ------------------------------------------------------------ pointwise
    def _row_terms(self, lo: Array, hi: Array, f: Array, order: int) -> tuple[Array, ...]:
        r""":math:`\log p(y | f)` (``order`` 0) or its first two derivatives in ``f`` (``order`` 1), per row kind
        (module docstring, :meth:`_kind_terms`)."""
        return self._by_kind(lo, hi, f, lambda *rows: self._kind_terms(*rows, order), 1 if order == 0 else 2)

    @staticmethod
    def _by_kind(
        lo: Array, hi: Array, f: Array, terms: Callable[..., tuple[Array, ...]], n_out: int
    ) -> tuple[Array, ...]:
        """``terms(kind, lo, hi, f)`` (``n_out`` arrays) per row kind (event, right, left, interval), each kind's
        form computed on its own rows only (a right-censored set never pays for the interval's two tails)."""
        lo, hi, f = np.broadcast_arrays(lo, hi, f)
        event = lo == hi
        right, left = (hi == np.inf) & ~event, (lo == -np.inf) & ~event
        kinds = (("event", event), ("right", right), ("left", left), ("interval", ~(event | right | left)))
        outs = [np.zeros(f.shape) for _ in range(n_out)]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for kind, mask in kinds:
                if mask.all():
                    return terms(kind, lo, hi, f)
                if mask.any():
                    for out, value in zip(outs, terms(kind, lo[mask], hi[mask], f[mask]), strict=True):
                        out[mask] = value
        return tuple(outs)

    def _kind_terms(self, kind: str, lo: Array, hi: Array, f: Array, order: int) -> tuple[Array, ...]:
        """One row kind's log-likelihood (``order`` 0) or its two derivatives in ``f`` (module docstring)."""
        noise, beta = self.noise, self._beta
        if kind == "event":
            z = self._z(lo, f)
            if order == 0:
                return (noise.log_pdf(z) + self._log_dalpha(lo) - lo,)
            d1, d2 = noise.dlog_pdf(z)
        elif kind == "right":
            z = self._z(lo, f)
            if order == 0:
                return (noise.log_sf(z),)
            d1, d2 = noise.dlog_sf(z)
        elif kind == "left":
            z = self._z(hi, f)
            if order == 0:
                return (noise.log_cdf(z),)
            d1, d2 = noise.dlog_cdf(z)
        else:
            z_lo, z_hi = self._z(lo, f), self._z(hi, f)
            if order == 0:
                return (interval_log_mass(noise, z_lo, z_hi),)
            d1, d2, _, _ = interval_dlog_mass(noise, z_lo, z_hi)
        return beta * d1, beta**2 * d2

    def _log_lik(self, y: Array, f: Array) -> Array:
        f = np.asarray(f, dtype=float)
        lo, hi = self._rows(y, f)
        return self._row_terms(lo, hi, f, 0)[0]

    def _transition(self, lo: Array, hi: Array) -> tuple[Array, Array]:
        """Where each row's likelihood bends in ``f``: where :math:`z = 0` at its finite bounds (an interval's two
        ends, a one-sided row's one end twice)."""
        beta, shift = self._beta, self._shift
        at_lo = -self._alpha(np.where(np.isfinite(lo), lo, 0.0)) / beta - shift
        at_hi = -self._alpha(np.where(np.isfinite(hi), hi, 0.0)) / beta - shift
        return np.where(np.isfinite(lo), at_lo, at_hi), np.where(np.isfinite(hi), at_hi, at_lo)

    def _nodes(self, y: Array, mean: Array, var: Array, power: float) -> tuple[Array, Array, Array]:
        """The sinh rule's nodes, weights and ``log Z`` (:func:`~relaxep.likelihoods.sinh_rule.sinh_nodes`)."""
        mean, var = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(var, dtype=float))
        lo, hi = self._rows(y, mean)
        mean, var = np.broadcast_to(mean, lo.shape), np.broadcast_to(var, lo.shape)

        def expand(f: Array) -> tuple[Array, Array]:
            return (lo[..., None], hi[..., None]) if f.ndim > lo.ndim else (lo, hi)

        def log_lik(f: Array) -> Array:
            return self._row_terms(*np.broadcast_arrays(*expand(f), f)[:2], f, 0)[0]

        def dlog_lik(f: Array) -> tuple[Array, Array]:
            return self._row_terms(*np.broadcast_arrays(*expand(f), f)[:2], f, 1)  # type: ignore[return-value]

        width = 1.0 / abs(self._beta)
        return sinh_nodes(log_lik, dlog_lik, mean, var, power, width, self._transition(lo, hi))

    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        f, weights, log_z = self._nodes(y, mean, var, power)
        return moments_from_nodes(f, weights, log_z, np.broadcast_to(mean, log_z.shape), var)

    def _tilted_nodes(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array]:
        f, weights, _ = self._nodes(y, mean, var, 1.0)
        return f, weights

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        f, weights = self._tilted_nodes(y, mean, var)
        return np.sum(weights * self._row_terms(*self._rows(y, f, nodes=True), f, 0)[0], axis=-1)

    def dlog_z_dtheta(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
        r""":math:`\partial\log Z/\partial\theta = E_{\hat p}[\partial_\theta\log p(y|f)]` on the tilted integral's
        nodes, shape ``(..., n_dims)``; ``y`` rows ``[log_lower, log_upper]``."""
        mean, var = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(var, dtype=float))
        if self.n_dims == 0:
            return np.zeros((*mean.shape, 0))
        f, weights = self._tilted_nodes(np.asarray(y, dtype=float), mean, var)
        with np.errstate(invalid="ignore"):  # (a failed row's NaN is the search's to read, not a warning)
            return np.sum(weights[..., None] * self._dlog_lik_dtheta(np.asarray(y, dtype=float), f), axis=-2)

    # ------------------------------------------------------------ predictive
    def log_survival_given(self, log_t: ArrayLike, f: ArrayLike) -> Array:
        r""":math:`\log S(t | f) = \log S_\epsilon(z(\log t, f))`, broadcast."""
        return self.noise.log_sf(self._z(np.asarray(log_t, dtype=float), np.asarray(f, dtype=float)))

    def _predictive_sf(self, a: Array, mean: Array, sd: Array) -> Array:
        r""":math:`E_f[S_\epsilon(a + \beta f)]`, :math:`f \sim N(m, s^2)` (``mean`` with the shift :math:`c`), for
        ``a`` (rows, times) and ``mean``,
        ``sd`` (rows,): Gauss-Hermite in :math:`f` where :math:`|\beta| s \le 1`, else the trapezoid rule in
        :math:`\epsilon` of :math:`p(\epsilon)\Phi((\epsilon - a - \beta m)/(|\beta| s))` (module docstring)."""
        beta, noise = self._beta, self.noise
        out = np.empty(a.shape)
        narrow = np.abs(beta) * sd <= 1.0
        if np.any(narrow):
            f = mean[narrow, None, None] + sd[narrow, None, None] * _GH_NODES
            out[narrow] = np.exp(noise.log_sf(a[narrow][..., None] + beta * f)) @ _GH_WEIGHTS
        wide = np.flatnonzero(~narrow)
        weights = np.exp(noise.log_pdf(_EPS_NODES)) * _EPS_STEP
        for rows in np.array_split(wide, max(1, wide.size * a.shape[1] * _EPS_NODES.size // 2**22)):
            shift = (a[rows] + beta * mean[rows, None])[..., None]
            out[rows] = ndtr((_EPS_NODES - shift) / (np.abs(beta) * sd[rows, None, None])) @ weights
        return np.clip(out, 0.0, 1.0)

    def survival(self, log_t: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""The predictive survival :math:`S_*(t) = \int S(t | f)\,N(f | m, v)\,df` at each latent ``N(mean,
        var)`` (shape ``(n,)``) and log-time (shape ``(T,)``): shape ``(n, T)`` (module docstring's rules)."""
        log_t = np.asarray(log_t, dtype=float).ravel()
        mean = np.asarray(mean, dtype=float).ravel()
        sd = np.sqrt(np.asarray(var, dtype=float).ravel())
        a = np.broadcast_to(self._alpha(log_t)[None, :], (mean.size, log_t.size))
        return self._predictive_sf(a, mean + self._shift, sd)

    def survival_band(
        self, log_t: ArrayLike, mean: ArrayLike, var: ArrayLike, level: float = 0.95
    ) -> tuple[Array, Array]:
        r"""The pointwise central ``level`` band of :math:`S(t | f)` under the latent's posterior: :math:`S(t | m
        \pm q\sqrt v)`, :math:`q = \Phi^{-1}((1 + \ell)/2)` (monotone in :math:`f`, so these are its quantiles)."""
        level = check_unit_interval(level, "level")
        q = float(ndtri(0.5 * (1.0 + level)))
        log_t = np.asarray(log_t, dtype=float).ravel()[None, :]
        mean = np.asarray(mean, dtype=float).ravel()[:, None]
        sd = np.sqrt(np.asarray(var, dtype=float).ravel())[:, None]
        a, b = (np.exp(self.log_survival_given(log_t, mean + s * q * sd)) for s in (-1.0, 1.0))
        return np.minimum(a, b), np.maximum(a, b)

    def median_log_time(self, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""The predictive median log-time: :math:`S_*(t) = 1/2`, by bisection between the conditional medians
        :math:`\alpha^{-1}(F^{-1}(1/2) - \beta f)` at :math:`f = m \pm 10\sqrt v`."""
        mean = np.asarray(mean, dtype=float).ravel()
        sd = np.sqrt(np.asarray(var, dtype=float).ravel())
        ends = [
            self._alpha_inverse(self.noise.median - self._beta * (mean + self._shift + s * sd)) for s in (-10.0, 10.0)
        ]
        lo, hi = np.minimum(*ends) - 1e-9, np.maximum(*ends) + 1e-9
        for _ in range(_BISECTIONS):
            mid = 0.5 * (lo + hi)
            above = self._predictive_sf(self._alpha(mid)[:, None], mean + self._shift, sd)[:, 0] > 0.5
            lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
            if np.all(hi - lo <= 1e-12 * (1.0 + np.abs(mid))):
                break
        return 0.5 * (lo + hi)
