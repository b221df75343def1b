"""Survival metrics against ground truth: Harrell's C against a double loop over the definition and hand counts;
Kaplan-Meier against a hand-computed curve and the empirical survival; the IPCW Brier score against the plain
mean squared error without censoring, a hand-computed weighted example and, by Monte Carlo, against the uncensored
score of the same rows; and, where scikit-survival imports, against scikit-survival to 1e-12."""

import time as clock

import numpy as np
import pytest

from relaxep.assessment import (
    brier_score,
    concordance_counts,
    concordance_index,
    evaluate_step,
    integrated_brier_score,
    kaplan_meier,
)
from relaxep.likelihoods.survival_targets import right_censored


def brute_force_concordance(event, time, risk, tol=1e-8):
    """Harrell's C by its definition, one pair at a time."""
    concordant = discordant = tied_risk = tied_time = 0
    for i in range(len(time)):
        for j in range(len(time)):
            if not event[i] or not (time[i] < time[j] or (time[i] == time[j] and not event[j])):
                continue
            tied_time += time[i] == time[j]
            if abs(risk[i] - risk[j]) <= tol:
                tied_risk += 1
            elif risk[i] > risk[j]:
                concordant += 1
            else:
                discordant += 1
    total = concordant + discordant + tied_risk
    return (concordant + 0.5 * tied_risk) / total, concordant, discordant, tied_risk, tied_time


def random_survival(rng, n, ties):
    time = rng.integers(1, 6, n).astype(float) if ties else rng.exponential(size=n)
    event = rng.random(n) < 0.6
    event[0] = True
    time[0] = min(time.min(), time[0])  # a comparable pair at least: the earliest time is an event ...
    time[1] = time.max() + 1.0  # ... before a later row
    risk = rng.integers(0, 4, n).astype(float) if ties else rng.normal(size=n)
    return event, time, risk


@pytest.mark.parametrize("seed", range(8))
def test_concordance_matches_the_double_loop(seed):
    rng = np.random.default_rng(seed)
    event, time, risk = random_survival(rng, int(rng.integers(2, 90)), ties=seed % 2 == 0)
    expected = brute_force_concordance(event, time, risk)
    got = concordance_counts(right_censored(event, time), risk)
    assert got.cindex == pytest.approx(expected[0], abs=1e-14)
    assert tuple(got)[1:] == expected[1:]
    assert concordance_index(np.column_stack((time, event)), risk) == got.cindex
    # a tolerance that the integer risks reach exactly: |r_i - r_j| <= 1 ties
    assert tuple(concordance_counts(right_censored(event, time), risk, tied_tol=1.0)) == pytest.approx(
        brute_force_concordance(event, time, risk, tol=1.0), abs=1e-14
    )


def test_concordance_hand_counts():
    # comparable: (0, j) for j = 1..4: concordant; (1, 2) tied time, discordant (3 < 4); (1, 3) tied risk;
    # (1, 4) and (3, 4) concordant: 8 pairs, 6 concordant, 1 discordant, 1 tied in risk, 1 tied in time
    y = right_censored([1, 1, 0, 1, 0], [1.0, 2.0, 2.0, 3.0, 4.0])
    got = concordance_counts(y, [5.0, 3.0, 4.0, 3.0, 1.0])
    assert tuple(got) == (6.5 / 8, 6, 1, 1, 1)
    assert concordance_index(y, [1.0, 3.0, 2.0, 3.0, 5.0]) == 1.5 / 8  # reversed risks: the mirror image


def test_concordance_is_fast_at_8000_rows():
    rng = np.random.default_rng(0)
    n = 8000
    y = right_censored(rng.random(n) < 0.5, rng.integers(1, 400, n).astype(float))
    start = clock.perf_counter()
    concordance_index(y, rng.integers(0, 50, n).astype(float))
    assert clock.perf_counter() - start < 1.0


def test_concordance_bad_input():
    y = right_censored([1, 0, 1], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="risk must be 1-D"):
        concordance_index(y, [1.0, 2.0])
    with pytest.raises(ValueError, match="risk must be finite"):
        concordance_index(y, [1.0, np.nan, 2.0])
    with pytest.raises(ValueError, match="no comparable pairs"):
        concordance_index(right_censored([1, 1], [2.0, 2.0]), [1.0, 2.0])
    with pytest.raises(ValueError, match="tied_tol"):
        concordance_index(y, [1.0, 2.0, 3.0], tied_tol=-1.0)
    with pytest.raises(ValueError, match="interval-censored"):
        concordance_index(np.array([(1.0, 2.0), (0.0, 3.0)], dtype=[("lower", "f8"), ("upper", "f8")]), [1, 2])


def test_kaplan_meier_hand_computed():
    # at risk 6, 5, 3, 1 at the event times 1, 2, 3, 5 (censored at 2 and 4)
    times, survival = kaplan_meier([1, 1, 0, 1, 0, 1], [1.0, 2.0, 2.0, 3.0, 4.0, 5.0])
    np.testing.assert_array_equal(times, [1.0, 2.0, 3.0, 5.0])
    np.testing.assert_allclose(survival, [5 / 6, 2 / 3, 4 / 9, 0.0], rtol=0, atol=1e-15)
    at = [0.5, 1.0, 1.5, 2.0, 4.9, 5.0, 9.0]
    np.testing.assert_allclose(evaluate_step(times, survival, at), [1, 5 / 6, 5 / 6, 2 / 3, 4 / 9, 0, 0], atol=1e-15)


def test_kaplan_meier_without_censoring_is_the_empirical_survival():
    time = np.random.default_rng(1).integers(1, 30, 200).astype(float)
    times, survival = kaplan_meier(np.ones(200, bool), time)
    np.testing.assert_array_equal(times, np.unique(time))
    np.testing.assert_allclose(survival, (time[None, :] > times[:, None]).mean(axis=1), rtol=0, atol=1e-13)
    assert kaplan_meier([0, 0], [1.0, 2.0])[0].size == 0  # no event: no step


def test_brier_without_censoring_is_the_mean_squared_error():
    rng = np.random.default_rng(2)
    train = right_censored(np.ones(50, bool), rng.exponential(size=50) + 5.0)  # G = 1 below 5
    time = rng.exponential(size=40)
    times = np.linspace(0.1, 0.9, 5) * time.max()
    estimate = rng.random((40, 5))
    _, scores = brier_score(train, right_censored(np.ones(40, bool), time), estimate, times)
    np.testing.assert_allclose(scores, (((time[:, None] > times) - estimate) ** 2).mean(axis=0), rtol=1e-14)


def test_brier_hand_computed_weights():
    # training censoring KM, an event before a censoring at a tie: G = 1 on [1, 2), 1 - 1/3 on [2, 3), 1/3 after
    train = right_censored([1, 0, 1, 0, 1], [1.0, 2.0, 2.0, 3.0, 4.0])
    test = right_censored([1, 1, 0, 1, 0], [1.5, 2.0, 2.2, 3.5, 4.0])
    estimate = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    # cases 1.5 (weight 1/G(1.5) = 1) and 2.0 (1/G(2) = 3/2); controls 3.5 and 4.0 (1/G(2.5) = 3/2); 2.2 weighs 0
    expected = (0.9**2 + 0.8**2 * 1.5 + 0.4**2 * 1.5 + 0.5**2 * 1.5) / 5
    times, scores = brier_score(train, test, estimate, 2.5)
    assert times.tolist() == [2.5] and scores[0] == pytest.approx(expected, rel=1e-14)
    # a censored test row beyond the training follow-up (5 > 4) needs G only at t: a control of weight 3/2
    test = right_censored([1, 1, 0, 1, 0, 0], [1.5, 2.0, 2.2, 3.5, 4.0, 5.0])
    _, scores = brier_score(train, test, np.r_[estimate, 0.4], [2.5])
    assert scores[0] == pytest.approx((expected * 5 + 0.6**2 * 1.5) / 6, rel=1e-14)


def test_ipcw_brier_of_the_true_survival_matches_the_uncensored_brier():
    rng = np.random.default_rng(3)
    n, censoring_rate = 40_000, 0.5

    def draw():
        rate = np.exp(rng.normal(size=n))
        event_time, censoring = rng.exponential(1 / rate), rng.exponential(1 / censoring_rate, n)
        return rate, event_time, right_censored(event_time <= censoring, np.minimum(event_time, censoring))

    _, _, train = draw()
    rate, event_time, test = draw()
    times = np.array([0.25, 0.5, 1.0, 2.0])
    truth = np.exp(-rate[:, None] * times)
    _, ipcw = brier_score(train, test, truth, times)
    uncensored = ((event_time[:, None] > times) - truth) ** 2
    # the IPCW terms row by row, for the Monte Carlo error of the difference (G's own error is smaller: n training rows)
    g = np.exp(-censoring_rate * np.minimum(test["time"][:, None], times))
    case = (test["time"][:, None] <= times) & test["event"][:, None]
    terms = np.where(case, truth**2, 0.0) / g + np.where(test["time"][:, None] > times, (1 - truth) ** 2, 0.0) / g
    error = (terms - uncensored).std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(ipcw - uncensored.mean(axis=0)) < 4 * error + 1e-4)
    assert np.all(error < 0.01)  # the check has teeth: the scores are ~0.1-0.2


def test_integrated_brier_is_the_trapezoid_of_the_scores():
    rng = np.random.default_rng(4)
    train = right_censored(rng.random(80) < 0.7, rng.exponential(size=80) * 3)
    test = right_censored(rng.random(60) < 0.7, rng.exponential(size=60))
    times = np.sort(rng.uniform(test["time"].min(), 0.9 * test["time"].max(), 7))
    estimate = rng.random((60, 7))
    _, scores = brier_score(train, test, estimate, times)
    expected = sum((scores[k] + scores[k + 1]) / 2 * (times[k + 1] - times[k]) for k in range(6))
    assert integrated_brier_score(train, test, estimate, times) == pytest.approx(
        expected / (times[-1] - times[0]), rel=1e-13
    )


def test_brier_bad_input():
    train = right_censored([1, 0, 1, 1], [1.0, 2.0, 3.0, 4.0])
    test = right_censored([1, 0, 1], [1.0, 2.0, 3.0])
    estimate = np.full((3, 2), 0.5)
    with pytest.raises(ValueError, match="within the follow-up of the test data"):
        brier_score(train, test, estimate, [1.0, 3.0])
    with pytest.raises(ValueError, match="within the follow-up of the test data"):
        brier_score(train, test, estimate, [0.5, 2.0])
    with pytest.raises(ValueError, match="strictly increasing"):
        brier_score(train, test, estimate, [2.0, 1.5])
    with pytest.raises(ValueError, match="shape"):
        brier_score(train, test, np.full((3, 3), 0.5), [1.0, 2.0])
    with pytest.raises(ValueError, match="not risk scores"):
        brier_score(train, test, np.full((3, 2), 2.0), [1.0, 2.0])
    with pytest.raises(ValueError, match="at least two"):
        integrated_brier_score(train, test, estimate[:, :1], [1.5])
    short = right_censored([1, 0, 1], [1.0, 2.0, 2.5])  # G(2.5) = 1/2 > 0: unknown beyond 2.5
    with pytest.raises(ValueError, match="beyond the training follow-up"):
        brier_score(short, test, estimate, [1.0, 2.8])
    with pytest.raises(ValueError, match="y_test is interval-censored"):
        brier_score(train, np.array([(1.0, 2.0)], dtype=[("lower", "f8"), ("upper", "f8")]), estimate, [1.0])


def test_the_callers_arrays_are_untouched():
    rng = np.random.default_rng(5)
    y = right_censored(rng.random(30) < 0.6, rng.exponential(size=30))
    y[0] = (True, 0.01)
    risk, estimate = rng.normal(size=30), rng.random((30, 3))
    copies = [a.copy() for a in (y, risk, estimate)]
    concordance_counts(y, risk)
    times = np.quantile(y["time"], [0.2, 0.4, 0.6])
    integrated_brier_score(y, y, estimate, times)
    for array, copy in zip((y, risk, estimate), copies, strict=True):
        np.testing.assert_array_equal(array, copy)


@pytest.mark.parametrize("seed", range(6))
def test_against_scikit_survival(seed):
    sksurv = pytest.importorskip("sksurv.metrics")
    from sksurv.nonparametric import kaplan_meier_estimator

    rng = np.random.default_rng(seed)
    n = 300
    event, time, risk = random_survival(rng, n, ties=seed % 2 == 0)
    y = right_censored(event, time)
    reference = sksurv.concordance_index_censored(event, time, risk)
    got = concordance_counts(y, risk)
    assert got.cindex == pytest.approx(reference[0], abs=1e-12) and tuple(got)[1:] == tuple(reference[1:])
    ref_times, ref_survival = kaplan_meier_estimator(event, time)
    np.testing.assert_allclose(evaluate_step(*kaplan_meier(event, time), ref_times), ref_survival, atol=1e-12)
    train = right_censored(rng.random(n) < 0.6, np.ceil(rng.exponential(size=n) * 3) if seed % 2 == 0 else time * 1.5)
    times = np.unique(time)[1:-1] if seed % 2 == 0 else np.quantile(time, np.linspace(0.05, 0.8, 12))
    estimate = rng.random((n, times.size))
    np.testing.assert_allclose(
        brier_score(train, y, estimate, times)[1], sksurv.brier_score(train, y, estimate, times)[1], rtol=0, atol=1e-12
    )
    assert integrated_brier_score(train, y, estimate, times) == pytest.approx(
        sksurv.integrated_brier_score(train, y, estimate, times), abs=1e-12
    )
