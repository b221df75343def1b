"""CoxPH: the piecewise-exponential proportional-hazards likelihood against closed forms, quadrature of the hazard
and of the tilted integrals, the exponential (Weibull shape 1) model, hand-counted maximum likelihood, and EP fits
of simulated proportional-hazards data."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate
from scipy.optimize import minimize_scalar
from scipy.stats import spearmanr
from sklearn.base import clone
from sklearn.gaussian_process.kernels import RBF, ConstantKernel

from relaxep import DensePrior, GPRegressor, infer
from relaxep.estimators._latent_fit import fit_latent
from relaxep.estimators._models import _LatentModel
from relaxep.likelihoods import CoxPH, WeibullAFT
from relaxep.likelihoods.coxph import default_breaks, default_n_intervals, piecewise_exponential_mle

BREAKS = np.array([0.5, 1.0, 2.5])
HAZARDS = np.array([0.3, 1.2, 0.7, 2.0])


def _hazard(t: float, breaks: np.ndarray = BREAKS, hazards: np.ndarray = HAZARDS) -> float:
    return float(hazards[np.searchsorted(breaks, t, side="right")])


def _cum_hazard(t: float, breaks: np.ndarray = BREAKS, hazards: np.ndarray = HAZARDS, start: float = 0.0) -> float:
    r""":math:`\int_{start}^t h`, by adaptive quadrature of the hazard (the breaks as points)."""
    if not np.isfinite(t):
        return np.inf
    inner = [float(s) for s in breaks if start < s < t]
    return integrate.quad(
        lambda u: _hazard(u, breaks, hazards), start, t, points=inner or None, epsabs=0.0, epsrel=1e-13, limit=200
    )[0]


def _row_log_lik(row: tuple[float, float], breaks: np.ndarray = BREAKS, hazards: np.ndarray = HAZARDS):
    r"""The row's log-likelihood in f from :math:`S = \exp(-e^f\int_0^t h)` and the density :math:`h S e^f`
    (the integrals of the hazard taken once)."""
    lo, hi = row
    if lo == hi:
        t = np.exp(lo)
        log_h, cum = np.log(_hazard(t, breaks, hazards)), _cum_hazard(t, breaks, hazards)
        return lambda f: f + log_h - cum * np.exp(f)
    cum_lo = _cum_hazard(np.exp(lo), breaks, hazards) if np.isfinite(lo) else 0.0
    between = _cum_hazard(np.exp(hi), breaks, hazards, np.exp(lo) if np.isfinite(lo) else 0.0)

    def log_mass(f: float) -> float:  # log(S(l) - S(u)) = -H(l) e^f + log(1 - exp(-e^f int_l^u h))
        with np.errstate(divide="ignore"):  # (a left-censored row's mass underflows at f far below its time)
            return -cum_lo * np.exp(f) + np.log(-np.expm1(-between * np.exp(f)))

    return log_mass


def _log_p(row, f, breaks=BREAKS, hazards=HAZARDS) -> float:
    return _row_log_lik(row, breaks, hazards)(f)


def _quad_log_z(row, mu, v, u, breaks=BREAKS, hazards=HAZARDS):
    """log Z, E[f] and Var[f] of :math:`p(y|f)^u N(f|mu, v)` by adaptive quadrature about the mode."""
    log_lik = _row_log_lik(row, breaks, hazards)

    def log_t(f: float) -> float:
        return u * log_lik(f) - 0.5 * (f - mu) ** 2 / v

    mode = minimize_scalar(lambda f: -log_t(f), bracket=(mu - 1.0, mu + 1.0)).x
    top, sd = log_t(mode), np.sqrt(v)
    moments = [
        integrate.quad(
            lambda f, p=p: (f - mode) ** p * np.exp(log_t(f) - top),
            mode - 40 * sd,
            mode + 40 * sd,
            points=[mode],
            epsabs=1e-14,
            epsrel=1e-12,
            limit=500,
        )[0]
        for p in range(3)
    ]
    log_z = np.log(moments[0]) + top - 0.5 * np.log(2 * np.pi * v)
    shift = moments[1] / moments[0]
    return log_z, mode + shift, moments[2] / moments[0] - shift**2


ROWS = [
    (np.log(0.7), np.log(0.7)),  # event
    (np.log(0.2), np.log(0.2)),  # event, first interval
    (np.log(3.0), np.inf),  # right-censored
    (np.log(20.0), np.inf),  # heavily censored: far in the last interval
    (-np.inf, np.log(0.4)),  # left-censored
    (np.log(0.6), np.log(2.0)),  # interval across two breaks
    (np.log(0.01), np.log(0.011)),  # a narrow early interval
]


def test_log_lik_matches_the_closed_form_and_the_integrated_hazard():
    lik = CoxPH(BREAKS, HAZARDS)
    t = np.array([1e-300, 1e-6, 0.2, 0.5, 0.9, 1.0, 2.4, 2.5, 7.0, 1e4])
    f = np.linspace(-2.0, 2.0, t.size)
    closed = np.zeros(t.size)
    for i, ti in enumerate(t):  # f + log lambda(t) - Lambda_0(t) e^f, Lambda_0 summed by hand
        cum = sum(
            h * max(0.0, min(ti, hi) - lo) for h, lo, hi in zip(HAZARDS, [0, *BREAKS], [*BREAKS, np.inf], strict=True)
        )
        closed[i] = f[i] + np.log(_hazard(ti)) - cum * np.exp(f[i])
    events = np.column_stack([np.log(t), np.log(t)])
    np.testing.assert_allclose(lik.log_lik(events, f), closed, rtol=1e-12, atol=1e-12)
    for row in ROWS:
        for fi in (-1.5, 0.0, 0.8):
            assert lik.log_lik(np.array([row]), np.array([fi]))[0] == pytest.approx(_log_p(row, fi), rel=1e-11)


@pytest.mark.parametrize("u", [1.0, 0.5])
@pytest.mark.parametrize("row", ROWS)
def test_tilted_moments_match_quadrature(row, u):
    lik = CoxPH(BREAKS, HAZARDS)
    for mu, v in ((0.0, 1.0), (1.5, 0.3), (-2.0, 4.0), (3.0, 0.05)):
        log_z, mean, var = _quad_log_z(row, mu, v, u)
        got = lik.log_z(np.array(row), mu, v, power=u)
        assert float(got.log_z) == pytest.approx(log_z, abs=1e-8)
        assert mu + v * float(got.dlog_z) == pytest.approx(mean, abs=1e-8)
        assert v + v**2 * float(got.d2log_z) == pytest.approx(var, abs=1e-8)


@pytest.mark.parametrize("row", ROWS[:6])
def test_dlog_z_dtheta_is_the_derivative_of_quadratures_log_z(row):
    lik = CoxPH(BREAKS, HAZARDS)
    mu, v, h = 0.3, 0.8, 1e-5
    got = lik.dlog_z_dtheta(np.array([row]), np.array([mu]), np.array([v]))[0]
    want = np.zeros(HAZARDS.size)
    for k in range(HAZARDS.size):
        up, down = (HAZARDS * np.exp(np.eye(HAZARDS.size)[k] * s * h) for s in (1.0, -1.0))
        want[k] = (_quad_log_z(row, mu, v, 1.0, hazards=up)[0] - _quad_log_z(row, mu, v, 1.0, hazards=down)[0]) / (
            2 * h
        )
    np.testing.assert_allclose(got, want, atol=1e-7)


def test_constant_hazard_is_the_exponential_weibull_model():
    lam = 0.37
    cox, weib = CoxPH((), (lam,)), WeibullAFT(shape=1.0)
    rows = np.array(ROWS)
    f = np.linspace(-1.0, 1.5, rows.shape[0])
    # S(t) = exp(-lam t e^f) = exp(-(t e^{-g})) with g = -(f + log lam)
    g = -(f + np.log(lam))
    np.testing.assert_allclose(cox.log_lik(rows, f), weib.log_lik(rows, g), rtol=1e-12, atol=1e-13)
    a, b = cox.log_z(rows, f, 0.7), weib.log_z(rows, g, 0.7)
    np.testing.assert_allclose(a.log_z, b.log_z, atol=1e-10)
    np.testing.assert_allclose(a.dlog_z, -b.dlog_z, atol=1e-10)
    np.testing.assert_allclose(a.d2log_z, b.d2log_z, atol=1e-10)
    # an exponential sample's survival, against scipy's
    t = np.array([0.1, 1.0, 4.0])
    np.testing.assert_allclose(np.exp(cox.log_survival_given(np.log(t), 0.2)), np.exp(-lam * np.exp(0.2) * t))


def test_predictive_survival_and_median_against_quadrature_and_hand_inversion():
    lik = CoxPH(BREAKS, HAZARDS)
    times = np.array([1e-9, 0.3, 0.5, 1.7, 6.0])
    mean, var = np.array([-0.4, 1.1]), np.array([0.5, 2.0])
    got = lik.survival(np.log(times), mean, var)
    for i in range(2):
        for j, t in enumerate(times):
            cum = _cum_hazard(t)
            want = integrate.quad(
                lambda f, c=cum, i=i: np.exp(-c * np.exp(f)) * np.exp(-0.5 * (f - mean[i]) ** 2 / var[i]),
                mean[i] - 40.0, mean[i] + 40.0, epsabs=1e-13, limit=200,
            )[0] / np.sqrt(2 * np.pi * var[i])  # fmt: skip
            assert got[i, j] == pytest.approx(want, abs=1e-8)  # (the base's 80-point Gauss-Hermite: 1.4e-9)
    # a point latent's median: Lambda_0(t) = log(2) e^{-f}, inverted by hand on the piecewise-linear Lambda_0,
    # from the first interval (t ~ 1e-12) to far in the last
    f = np.array([27.0, 3.0, 0.0, -0.5, -1.0, -6.0])
    target = np.log(2.0) * np.exp(-f)
    starts = np.array([0.0, *BREAKS])
    cum = np.concatenate([[0.0], np.cumsum(HAZARDS[:-1] * np.diff(starts))])
    k = np.searchsorted(cum, target, side="right") - 1
    median = starts[k] + (target - cum[k]) / HAZARDS[k]
    np.testing.assert_allclose(lik.median_log_time(f, np.full(f.size, 1e-24)), np.log(median), rtol=1e-9)


def test_initial_hazards_are_the_hand_counted_piecewise_exponential_mle():
    # events at 0.5, 1.5, 2.5, 3.5; right-censored at 1.0 and 3.0; one break at 2.0
    time = np.array([0.5, 1.5, 2.5, 3.5, 1.0, 3.0])
    event = np.array([1, 1, 1, 1, 0, 0], dtype=bool)
    y = np.column_stack([np.log(time), np.where(event, np.log(time), np.inf)])
    # exposure in [0, 2): 0.5 + 1.5 + 2 + 2 + 1 + 2 = 9, two events; in [2, inf): 0.5 + 1.5 + 1 = 3, two events
    np.testing.assert_allclose(piecewise_exponential_mle(y, [2.0]), [2 / 9, 2 / 3], rtol=1e-14)
    lik = CoxPH(breaks=[2.0]).with_baseline(y)
    np.testing.assert_allclose(lik.hazards, [2 / 9, 2 / 3], rtol=1e-14)
    # the default breaks: quantiles of the event times (two intervals: the median, 2.0)
    np.testing.assert_allclose(default_breaks(y, 2), [2.0])
    both = CoxPH().with_baseline(y, n_intervals=2)
    np.testing.assert_allclose(both.breaks, [2.0])
    np.testing.assert_allclose(both.hazards, [2 / 9, 2 / 3], rtol=1e-14)
    assert default_n_intervals(4) == 1 and default_n_intervals(57) == 5 and default_n_intervals(10**4) == 10
    # an interval-censored row: the maximum of the summed log-likelihood, by a grid in the one hazard
    y2 = np.vstack([y, [np.log(0.2), np.log(0.9)]])
    lam = piecewise_exponential_mle(y2, [])[0]
    grid = np.linspace(0.5 * lam, 1.5 * lam, 2001)
    total = [sum(_log_p(tuple(r), 0.0, np.zeros(0), np.array([g])) for r in y2) for g in grid]
    assert lam == pytest.approx(grid[int(np.argmax(total))], abs=2 * (grid[1] - grid[0]))


def _simulate(n: int, seed: int):
    """Proportional-hazards times by inversion, :math:`\\Lambda_0(T) = E e^{-f}`, E standard exponential; uniform
    right-censoring (about a third censored)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, (n, 1))
    f = 1.2 * np.sin(1.5 * X[:, 0])
    target = rng.exponential(size=n) * np.exp(-f)
    starts = np.array([0.0, *BREAKS])
    cum = np.concatenate([[0.0], np.cumsum(HAZARDS[:-1] * np.diff(starts))])
    k = np.searchsorted(cum, target, side="right") - 1
    t = starts[k] + (target - cum[k]) / HAZARDS[k]
    c = rng.uniform(0.3, 4.0, n)
    y = np.column_stack([np.log(np.minimum(t, c)), np.where(t <= c, np.log(t), np.inf)])
    return X, y, f


def test_ep_fit_recovers_the_relative_hazards():
    X, y, f = _simulate(150, 0)
    kernel = ConstantKernel(1.5) * RBF(0.8)
    result = infer(DensePrior(kernel(X) + 1e-8 * np.eye(150)), y, CoxPH(BREAKS, HAZARDS), "auto")
    assert result.converged
    assert spearmanr(result.mean, f).statistic > 0.8


def test_evidence_learns_the_hazards_toward_the_truth():
    X, y, _ = _simulate(150, 2)
    start = CoxPH(BREAKS, 4.0 * HAZARDS)
    kernel = ConstantKernel(1.0) * RBF(1.0)
    plan = GPRegressor(kernel=kernel, prior=None, random_state=0)._plan(X, kernel.n_dims + start.n_dims)
    model, _ = fit_latent(plan, _LatentModel, clone(kernel), start, "auto", X, y, 1e-8)
    learned = np.asarray(model.likelihood.hazards)
    err_start = np.abs(np.log(4.0 * HAZARDS / HAZARDS))
    err = np.abs(np.log(learned / HAZARDS))
    assert np.mean(err) < 0.5 * np.mean(err_start), learned


def test_hyperparameter_layout_and_bad_input():
    lik = CoxPH(BREAKS, HAZARDS)
    np.testing.assert_allclose(lik.theta, np.log(HAZARDS))
    assert lik.n_dims == 4 and lik.bounds.shape == (4, 2)
    np.testing.assert_allclose(lik.clone_with_theta(np.log(2 * HAZARDS)).hazards, 2 * HAZARDS)
    assert CoxPH(BREAKS, HAZARDS, "fixed").n_dims == 0 and CoxPH(BREAKS, HAZARDS, "fixed").theta.size == 0
    assert clone(GPRegressor(likelihood=lik)).likelihood == lik
    for breaks in ([1.0, 0.5], [0.0, 1.0], [-1.0], [[1.0]], [np.nan], "x"):
        with pytest.raises(ValueError, match="breaks"):
            CoxPH(breaks, [1.0] * (np.size(breaks) + 1))
    for hazards in ([1.0, 1.0], [1.0, 0.0, 1.0, 1.0], [1.0, -1.0, 1.0, 1.0], [1.0, 1.0, np.inf, 1.0]):
        with pytest.raises(ValueError, match="hazards"):
            CoxPH(BREAKS, hazards)
    with pytest.raises(ValueError, match="hazards_bounds"):
        CoxPH(BREAKS, HAZARDS, (0.0, 1.0))
    with pytest.raises(ValueError, match="breaks and hazards are None"):
        CoxPH().log_lik(np.array(ROWS), np.zeros(len(ROWS)))
    with pytest.raises(ValueError, match="n_intervals"):
        CoxPH().with_baseline(np.array(ROWS), n_intervals=0)
