"""The likelihood contract: every likelihood exported from ``relaxep.likelihoods`` answers for its kind.

Parametrised over every concrete :class:`~relaxep.likelihoods.Likelihood` subclass in ``relaxep.likelihoods.__all__``
(abstract bases skipped by ``inspect.isabstract``, not by a hand list), each built with its defaults or the minimal
arguments of :data:`ARGUMENTS`: its ``kind`` and ``is_density``, ``loo_tail`` on valid targets, ``read_targets`` on
the family's targets and on wrong ones, and the survival hooks.  A new family that forgets a hook fails here, by its
name.  Two families' tails are checked against ground truth: Monte Carlo for the Student-t's symmetric rule and the
Weibull's event and censored rows, a Gauss-Hermite sum of the Poisson mass for the counts' tail.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

import relaxep.likelihoods as likelihoods
from relaxep.likelihoods import Likelihood, Poisson, StudentT, SurvivalLikelihood, WeibullAFT, right_censored

KINDS = {"real", "binary", "multiclass", "ordinal", "count", "survival", "two_latent"}
#: the kinds whose every row's value is a probability (a mass), never a density of y
MASSES = {"binary", "multiclass", "ordinal", "count", "survival"}
#: the minimal arguments of the families that have no usable defaults (every other family: its defaults)
ARGUMENTS = {
    "OrdinalProbit": {"cut_points": [-1.0, 0.0, 1.0]},
    "CoxPH": {"breaks": (1.0,), "hazards": (0.5, 0.8)},
    "Tobit": {"lower": -0.5},
}
N = 12


def _families():
    for name in likelihoods.__all__:
        cls = getattr(likelihoods, name)
        if isinstance(cls, type) and issubclass(cls, Likelihood) and not inspect.isabstract(cls):
            yield pytest.param(name, id=name)


FAMILIES = list(_families())


def _make(name):
    return getattr(likelihoods, name)(**ARGUMENTS.get(name, {}))


def _case(likelihood, rng):
    """``(y as the user gives it, mean, var)`` for the likelihood's kind: valid targets and cavities."""
    kind = likelihood.kind
    mean, var = rng.normal(size=N), rng.uniform(0.1, 2.0, size=N)
    if kind == "binary":
        return np.where(rng.uniform(size=N) < 0.5, -1.0, 1.0), mean, var
    if kind == "multiclass":
        return rng.integers(0, 3, size=N), rng.normal(size=(N, 3)), var[:, None, None] * np.eye(3)
    if kind == "ordinal":
        return rng.integers(0, likelihood.n_classes, size=N).astype(float), mean, var
    if kind == "count":
        top = 1 if likelihood.exposure_name == "trials" else None  # (a binomial's successes alone: one trial each)
        counts = rng.poisson(2.0, size=N) if top is None else rng.integers(0, 2, size=N)
        return counts.astype(float), mean, var
    if kind == "survival":
        time = np.exp(rng.normal(size=N))
        return right_censored(rng.uniform(size=N) < 0.6, time), mean, var
    if kind == "two_latent":
        return rng.normal(size=N), np.column_stack([mean, rng.normal(size=N)]), np.column_stack([var, var])
    y = mean + rng.normal(size=N)
    if isinstance(likelihood, likelihoods.Beta):  # (proportions)
        return rng.uniform(0.05, 0.95, size=N), mean, var
    if isinstance(likelihood, likelihoods.Gamma):  # (positive values)
        return np.exp(y), mean, var
    return (np.maximum(y, likelihood.lower) if getattr(likelihood, "lower", None) is not None else y), mean, var


def _pointwise(likelihood, y, mean, var):
    r""":math:`\log p(y_i | \text{cavity}_i)`, the leave-one-out value ``loo_tail`` reads."""
    if likelihood.kind == "multiclass":
        return likelihood.tilted_moments(mean, var, y.astype(int))[0]
    if likelihood.kind == "two_latent":
        return likelihood.predictive_log_density(y, mean[:, 0], var[:, 0], mean[:, 1], var[:, 1])
    return likelihood.log_predictive(y, mean, var)


@pytest.mark.parametrize("name", FAMILIES)
def test_the_kind_is_known_and_says_whether_values_are_densities(name):
    likelihood = _make(name)
    assert likelihood.kind in KINDS, f"{name}.kind = {likelihood.kind!r} is none of {sorted(KINDS)}"
    assert isinstance(likelihood.is_density, bool), f"{name}.is_density is not a bool"
    if likelihood.kind in MASSES:
        assert not likelihood.is_density, f"{name} is of kind {likelihood.kind!r}: its values are probabilities"
    if likelihood.kind == "two_latent":
        assert likelihood.is_density


@pytest.mark.parametrize("name", FAMILIES)
def test_read_targets_takes_the_familys_targets(name):
    likelihood = _make(name)
    y, _, _ = _case(likelihood, np.random.default_rng(0))
    rows = likelihood.read_targets(y)
    assert rows.shape == ((N, 2) if likelihood.kind == "survival" else (N,))
    assert np.all(np.isfinite(rows[:, 0] if rows.ndim == 2 else rows))


@pytest.mark.parametrize("name", FAMILIES)
def test_read_targets_refuses_wrong_ones_naming_y(name):
    likelihood = _make(name)
    wrong = [np.ones((N, 3)), np.full(N, np.nan)]
    if likelihood.kind == "count":
        wrong.append(np.full(N, 1.5))
    for y in wrong:
        with pytest.raises(ValueError, match=r"\by\b"):
            likelihood.read_targets(y)
    if likelihood.kind not in ("count",):
        with pytest.raises(ValueError, match=r"\bexposure\b"):
            likelihood.read_targets(_case(likelihood, np.random.default_rng(0))[0], np.zeros(N))


@pytest.mark.parametrize("name", FAMILIES)
def test_loo_tail_is_a_probability_per_row(name):
    likelihood = _make(name)
    y, mean, var = _case(likelihood, np.random.default_rng(1))
    y = likelihood.read_targets(y)
    tail = likelihood.loo_tail(y, mean, var, _pointwise(likelihood, y, mean, var))
    assert tail.shape == (N,), f"{name}.loo_tail has shape {tail.shape}"
    assert np.all((tail >= 0.0) & (tail <= 1.0)), f"{name}.loo_tail left [0, 1]: {tail}"


@pytest.mark.parametrize("name", FAMILIES)
def test_survival_likelihoods_answer_for_their_start_scale_and_risk(name):
    likelihood = _make(name)
    assert (likelihood.kind == "survival") == isinstance(likelihood, SurvivalLikelihood)
    if likelihood.kind != "survival":
        return
    y, mean, _ = _case(likelihood, np.random.default_rng(2))
    rows = likelihood.read_targets(y)
    start = likelihood.start_from(rows)
    assert type(start) is type(likelihood)
    assert np.isfinite(start.log_lik(rows, np.zeros(N))).all()
    assert np.isfinite(start.latent_scale) and start.latent_scale > 0.0
    risk = start.risk(mean)
    assert risk.shape == (N,)
    # the risk orders the rows as their latents do, in the likelihood's direction
    assert np.all(np.sign(np.diff(risk[np.argsort(mean)])) == np.sign(start.risk_sign))


def test_the_student_t_tail_is_the_monte_carlo_probability_of_a_farther_target():
    """2 P(Y <= m - |y - m|), Y = f + noise, f ~ N(m, v): from a million draws a row (to 4 of their sds)."""
    likelihood, rng = StudentT(df=3.0, scale=0.7), np.random.default_rng(3)
    mean, var = np.array([0.3, -1.0, 2.0, 0.0]), np.array([0.2, 1.5, 0.05, 4.0])
    y = mean + np.array([0.4, -2.5, 1.2, -0.1])
    tail = likelihood.loo_tail(y, mean, var, np.zeros(4))
    draws = 1_000_000
    for i in range(4):
        Y = mean[i] + np.sqrt(var[i]) * rng.normal(size=draws) + 0.7 * rng.standard_t(3.0, size=draws)
        want = 2.0 * np.mean(Y <= mean[i] - abs(y[i] - mean[i]))
        assert tail[i] == pytest.approx(want, abs=4.0 * np.sqrt(want * (1.0 - want / 2.0) / draws) + 1e-4)


def test_the_count_tail_is_the_mass_of_the_counts_no_more_probable():
    r"""The Poisson predictive :math:`p(k) = \int \text{Poisson}(k | e^f) N(f | m, v) df` by 200-node Gauss-Hermite,
    summed over the counts :math:`k \le \max(3y, y + 50)` no more probable than the observed one (to 1e-6)."""
    likelihood = Poisson()
    y, mean, var = np.array([0.0, 3.0, 9.0, 1.0]), np.array([0.5, 0.2, 0.8, 1.5]), np.array([0.3, 0.05, 0.5, 0.2])
    tail = likelihood.loo_tail(y, mean, var, np.zeros(4))
    nodes, weights = np.polynomial.hermite_e.hermegauss(200)
    weights = weights / np.sqrt(2.0 * np.pi)
    k = np.arange(200.0)
    for i in range(4):
        rate = np.exp(mean[i] + np.sqrt(var[i]) * nodes)
        pmf = np.exp(k[:, None] * np.log(rate) - rate - gammaln(k[:, None] + 1.0)) @ weights
        pmf = pmf[: int(max(3.0 * y[i], y[i] + 50.0)) + 1]
        want = np.sum(pmf[pmf <= pmf[int(y[i])] * (1.0 + 1e-9)])
        assert tail[i] == pytest.approx(want, abs=1e-6)


def test_the_weibull_tail_is_the_monte_carlo_probability_of_each_row():
    r"""An event at t: 2 min(S, 1 - S), S = P(T > t); a row censored at c: P(T > c); T = e^f E^{1/k}, E ~ Exp(1),
    f ~ N(m, v) (:math:`S(t | f) = \exp(-(t e^{-f})^k)`), from a million draws a row."""
    likelihood, rng = WeibullAFT(shape=1.6), np.random.default_rng(4)
    rows = likelihood.read_targets(right_censored(np.array([True, True, False, False]), np.array([0.4, 3.0, 1.0, 5.0])))
    mean, var = np.array([0.1, -0.3, 0.5, 1.0]), np.array([0.2, 0.6, 0.1, 1.0])
    tail = likelihood.loo_tail(rows, mean, var, likelihood.log_predictive(rows, mean, var))
    draws = 1_000_000
    for i, event in enumerate([True, True, False, False]):
        T = np.exp(mean[i] + np.sqrt(var[i]) * rng.normal(size=draws)) * rng.exponential(size=draws) ** (1 / 1.6)
        survive = np.mean(T > np.exp(rows[i, 0]))
        want = 2.0 * min(survive, 1.0 - survive) if event else survive
        assert tail[i] == pytest.approx(want, abs=4.0 * np.sqrt(0.25 / draws) * (2.0 if event else 1.0))


def test_a_family_that_forgets_its_tail_fails_by_name():
    """A count family that answers log Z but neither a predictive of y nor a tail of its own: loo_tail names it."""

    class Forgetful(Likelihood):
        kind = "count"
        is_density = False

        def _log_z(self, y, mean, var, power):
            return Poisson()._log_z(y, mean, var, power)

        def _log_lik(self, y, f):
            return stats.poisson.logpmf(y, np.exp(f))

    with pytest.raises(NotImplementedError, match="Forgetful"):
        Forgetful().loo_tail(np.ones(3), np.zeros(3), np.ones(3), np.zeros(3))
