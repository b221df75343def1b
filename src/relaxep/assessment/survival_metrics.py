r"""Survival metrics: Harrell's concordance index, the Kaplan–Meier estimator and the inverse-probability-of-
censoring-weighted Brier score, in scikit-survival's conventions (same argument order, same ties, same weights;
scikit-survival is never needed).

- :func:`concordance_index` (Harrell et al., *Stat. Med.* 15, 1996): the share of comparable pairs whose risk
  scores are ordered as their times; :math:`O(n \log^2 n)` by dominance counting over dyadic blocks.
- :func:`kaplan_meier` (Kaplan & Meier, *JASA* 53, 1958): the product-limit estimate; :func:`evaluate_step` reads
  it (or any right-continuous step function) at arbitrary times.
- :func:`brier_score`, :func:`integrated_brier_score` (Graf, Schmoor, Sauerbrei & Schumacher, Statistics in Medicine 18,
  1999): the squared error of predicted survival probabilities, each row weighted by the inverse of the censoring
  survival :math:`\hat G` estimated by Kaplan–Meier from the training rows.

Targets ``y`` are right-censored, in any form :func:`~relaxep.likelihoods.survival_targets.event_and_time` reads
(scikit-survival's structured array, or columns (time, event)).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from relaxep.likelihoods.survival_targets import event_and_time, right_censored

__all__ = [
    "ConcordanceCounts",
    "brier_score",
    "concordance_counts",
    "concordance_index",
    "evaluate_step",
    "integrated_brier_score",
    "kaplan_meier",
]


class ConcordanceCounts(NamedTuple):
    """Harrell's :math:`C` and its pair counts, as scikit-survival's ``concordance_index_censored`` returns them."""

    cindex: float
    concordant: int
    discordant: int
    tied_risk: int
    tied_time: int


def _prefix_counts(values: np.ndarray, prefix: np.ndarray, bound: np.ndarray) -> np.ndarray:
    r"""For each query :math:`k`: :math:`\#\{j < p_k : v_j < b_k\}`, integers :math:`0 \le v_j < n`.

    The prefix :math:`[0, p)` splits into one aligned block of length :math:`2^\ell` for each set bit :math:`\ell` of
    :math:`p`; at each level the blocks are sorted once (keys ``block * n + v``) and every query reads its block by
    one binary search: :math:`O(n \log^2 n)` work in :math:`\lceil \log_2 n \rceil` vectorised passes."""
    n = values.shape[0]
    counts = np.zeros(prefix.shape[0], dtype=np.int64)
    index = np.arange(n, dtype=np.int64)
    for level in range(max(n.bit_length(), 1)):
        has = ((prefix >> level) & 1).astype(bool)
        if not has.any():
            continue
        keys = np.sort((index >> level) * n + values)
        block = (prefix[has] >> (level + 1)) << 1  # the block's index at this level: its start is block * 2**level
        counts[has] += np.searchsorted(keys, block * n + bound[has], side="left") - (block << level)
    return counts


def _risk_scores(risk: Any, n: int) -> np.ndarray:
    risk = np.asarray(risk)
    if risk.ndim == 2 and risk.shape[1] == 1:
        risk = risk[:, 0]
    if risk.ndim != 1 or risk.shape[0] != n:
        raise ValueError(f"risk must be 1-D with one score per row of y ({n}); got shape {risk.shape}")
    if not np.issubdtype(risk.dtype, np.number) or np.issubdtype(risk.dtype, np.complexfloating):
        raise TypeError(f"risk must be real numbers; got dtype {risk.dtype}")
    risk = risk.astype(float)
    if not np.isfinite(risk).all():
        raise ValueError(f"risk must be finite; rows {np.flatnonzero(~np.isfinite(risk))[:5].tolist()} are not")
    return risk


def concordance_counts(y: Any, risk: Any, tied_tol: float = 1e-8) -> ConcordanceCounts:
    r"""Harrell's concordance index and its counts, scikit-survival's ``concordance_index_censored`` convention.

    A pair :math:`(i, j)` is comparable when :math:`i` has an event and :math:`t_i < t_j`, or :math:`t_i = t_j`
    and :math:`j` is censored (an event precedes a censoring at the same time; two events at one time are not
    comparable).  It is concordant when :math:`r_i > r_j + \tau`, tied in risk when :math:`|r_i - r_j| \le \tau`,
    discordant otherwise, and

    .. math:: C = \frac{\#\text{concordant} + \tfrac12 \#\text{tied in risk}}{\#\text{comparable}}

    (Harrell, Lee & Mark, *Stat. Med.* 15, 361–387, 1996).

    Parameters
    ----------
    y : array-like
        Right-censored targets (scikit-survival's structured array or columns (time, event)).
    risk : array-like of shape (n,)
        Risk scores: higher is an earlier event.
    tied_tol : float
        :math:`\tau`, the tolerance below which two scores tie (scikit-survival's default).

    Returns
    -------
    ConcordanceCounts
        ``(cindex, concordant, discordant, tied_risk, tied_time)``; ``tied_time`` counts the comparable pairs of
        equal times (an event and a censoring).
    """
    event, time = event_and_time(y)
    n = time.shape[0]
    risk = _risk_scores(risk, n)
    if not (np.isscalar(tied_tol) and np.isfinite(tied_tol) and tied_tol >= 0):
        raise ValueError(f"tied_tol must be a finite number >= 0; got {tied_tol!r}")
    # rows by time descending, censored before events at one time: an event's comparable rows are those before the
    # first event at its time
    order = np.lexsort((event, -time))
    sorted_time, sorted_event = time[order], event[order]
    positions = np.arange(n)
    run = np.r_[True, (sorted_time[1:] != sorted_time[:-1]) | (sorted_event[1:] != sorted_event[:-1])]
    comparable = np.maximum.accumulate(np.where(run, positions, 0))[sorted_event]
    new_time = np.r_[True, sorted_time[1:] != sorted_time[:-1]]
    later = np.maximum.accumulate(np.where(new_time, positions, 0))[sorted_event]
    # risks as ranks: r_j < x exactly when rank_j < searchsorted(sorted risks, x)
    by_risk = np.argsort(risk, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[by_risk] = positions
    sorted_risk = risk[by_risk]
    event_risk = risk[order][sorted_event]
    below = np.searchsorted(sorted_risk, event_risk - tied_tol, side="left")
    within = np.searchsorted(sorted_risk, event_risk + tied_tol, side="right")
    values = rank[order]
    n_below = _prefix_counts(values, comparable, below)
    n_within = _prefix_counts(values, comparable, within)
    total = int(comparable.sum())
    if total == 0:
        raise ValueError("y has no comparable pairs (an event before another row's time); C is undefined")
    concordant, tied_risk = int(n_below.sum()), int((n_within - n_below).sum())
    cindex = (concordant + 0.5 * tied_risk) / total
    return ConcordanceCounts(
        cindex, concordant, total - concordant - tied_risk, tied_risk, int((comparable - later).sum())
    )


def concordance_index(y: Any, risk: Any, tied_tol: float = 1e-8) -> float:
    """Harrell's concordance index :math:`C` of risk scores against right-censored targets (higher risk, earlier
    event): :func:`concordance_counts`'s ``cindex``, as scikit-survival's ``concordance_index_censored``."""
    return concordance_counts(y, risk, tied_tol).cindex


def _counts(event: np.ndarray, time: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct times :math:`s_k`, the numbers at risk :math:`r_k = \\#\\{t_i \\ge s_k\\}`, of events :math:`d_k`
    and of censorings :math:`c_k` at each."""
    unique, inverse = np.unique(time, return_inverse=True)
    total = np.bincount(inverse, minlength=unique.shape[0])
    deaths = np.bincount(inverse, weights=event.astype(float), minlength=unique.shape[0]).astype(np.int64)
    at_risk = time.shape[0] - np.cumsum(total) + total
    return unique, at_risk, deaths, total - deaths


def kaplan_meier(event: Any, time: Any) -> tuple[np.ndarray, np.ndarray]:
    r"""The Kaplan–Meier (product-limit) estimate of the survival function (Kaplan & Meier, 1958),

    .. math:: \hat S(t) = \prod_{s_k \le t} \left(1 - \frac{d_k}{r_k}\right),

    over the distinct event times :math:`s_k`, with :math:`d_k` events at :math:`s_k` and :math:`r_k` rows at risk
    (time :math:`\ge s_k`).

    Parameters
    ----------
    event : array-like of shape (n,)
        Event indicators, bool or 0/1 (0: right-censored).
    time : array-like of shape (n,)
        Times of event or censoring, finite and positive.

    Returns
    -------
    times, survival : ndarray of shape (m,)
        The distinct event times, ascending, and :math:`\hat S` at each (right-continuous: :math:`\hat S` is 1
        before ``times[0]`` and ``survival[k]`` on ``[times[k], times[k + 1])``; :func:`evaluate_step` reads it).
        Empty when no row has an event.
    """
    y = right_censored(event, time)
    unique, at_risk, deaths, _ = _counts(y["event"], y["time"])
    survival = np.cumprod(1.0 - deaths / at_risk)
    keep = deaths > 0
    return unique[keep], survival[keep]


def evaluate_step(times: Any, values: Any, at: Any, initial: float = 1.0) -> np.ndarray:
    """A right-continuous step function at ``at``: ``values[k]`` for ``times[k] <= at < times[k + 1]``, ``initial``
    before ``times[0]`` (``times`` ascending; e.g. :func:`kaplan_meier`'s output)."""
    times, values, at = np.asarray(times, dtype=float), np.asarray(values, dtype=float), np.asarray(at, dtype=float)
    if times.ndim != 1 or values.shape != times.shape:
        raise ValueError(f"times and values must be 1-D of one length; got shapes {times.shape} and {values.shape}")
    if np.any(np.diff(times) < 0) or np.isnan(times).any():
        raise ValueError("times must be ascending")
    if np.isnan(at).any():
        raise ValueError("at has NaN")
    index = np.searchsorted(times, at, side="right") - 1
    return np.where(index >= 0, values[np.maximum(index, 0)] if values.size else initial, initial)


def _censoring_survival(event: np.ndarray, time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Kaplan–Meier of the censoring times, :math:`\hat G(t) = \prod_{s_k \le t} (1 - c_k / (r_k - d_k))`: at a
    tie an event precedes a censoring (the censored rows are still at risk of censoring, the events not)."""
    unique, at_risk, deaths, censored = _counts(event, time)
    remaining = at_risk - deaths
    hazard = np.divide(censored, remaining, out=np.zeros(unique.shape[0]), where=censored > 0)
    return unique, np.cumprod(1.0 - hazard)


def _censoring_at(knots: np.ndarray, survival: np.ndarray, at: np.ndarray, what: str) -> np.ndarray:
    """:math:`\\hat G` at ``at``; beyond the last training time it is known only where it has reached 0."""
    beyond = at > knots[-1]
    if beyond.any() and survival[-1] > 0:
        raise ValueError(
            f"{what} reaches {at[beyond].max()}, beyond the training follow-up ({knots[-1]}), where the censoring "
            "distribution is unknown: choose times below the largest training time"
        )
    return evaluate_step(knots, survival, at)


def _check_grid(times: Any, test_time: np.ndarray) -> np.ndarray:
    times = np.atleast_1d(np.asarray(times))
    if times.ndim != 1 or times.size == 0:
        raise ValueError(f"times must be a non-empty 1-D array; got shape {times.shape}")
    if not np.issubdtype(times.dtype, np.number) or np.issubdtype(times.dtype, np.complexfloating):
        raise TypeError(f"times must be real numbers; got dtype {times.dtype}")
    times = times.astype(float)
    if not np.isfinite(times).all() or np.any(np.diff(times) <= 0):
        raise ValueError("times must be finite and strictly increasing")
    if times[0] < test_time.min() or times[-1] >= test_time.max():
        raise ValueError(
            f"all times must be within the follow-up of the test data: [{test_time.min()}, {test_time.max()}); got "
            f"[{times[0]}, {times[-1]}]"
        )
    return times


def _check_estimate(estimate: Any, n: int, n_times: int) -> np.ndarray:
    estimate = np.asarray(estimate)
    if not np.issubdtype(estimate.dtype, np.number) or np.issubdtype(estimate.dtype, np.complexfloating):
        raise TypeError(f"estimate must be real survival probabilities; got dtype {estimate.dtype}")
    estimate = estimate.astype(float)
    if estimate.ndim == 1 and n_times == 1:
        estimate = estimate[:, None]
    if estimate.shape != (n, n_times):
        raise ValueError(f"estimate must have shape (n_test, n_times) = ({n}, {n_times}); got {estimate.shape}")
    if not np.isfinite(estimate).all():
        raise ValueError("estimate must be finite")
    slack = 1e-9
    if estimate.min() < -slack or estimate.max() > 1 + slack:
        raise ValueError(
            f"estimate must be survival probabilities in [0, 1] (not risk scores); got [{estimate.min()}, "
            f"{estimate.max()}]"
        )
    return estimate


def brier_score(y_train: Any, y_test: Any, estimate: Any, times: Any) -> tuple[np.ndarray, np.ndarray]:
    r"""The time-dependent Brier score under right censoring (Graf et al., Statistics in Medicine 18, 2529–2545, 1999),

    .. math:: \mathrm{BS}(t) = \frac1n \sum_{i=1}^n \left[ \frac{\hat S_i(t)^2\, 1\{y_i \le t, \delta_i = 1\}}
              {\hat G(y_i)} + \frac{(1 - \hat S_i(t))^2\, 1\{y_i > t\}}{\hat G(t)} \right],

    :math:`\hat G` the Kaplan–Meier estimate of the censoring survival from the TRAINING rows (right-continuous,
    events before censorings at ties; :math:`1/\hat G = 0` where :math:`\hat G = 0`).  Censored rows with
    :math:`y_i \le t` weigh 0.  This is scikit-survival's ``brier_score`` (its :math:`\hat G(y_i)`, not Graf's
    :math:`\hat G(y_i-)`); it differs only in needing :math:`\hat G` at the test rows' EVENT times alone, where
    scikit-survival asks every test time to lie within the training follow-up.

    Parameters
    ----------
    y_train, y_test : array-like
        Right-censored targets (scikit-survival's structured array or columns (time, event)).
    estimate : array-like of shape (n_test, n_times)
        Predicted survival probabilities :math:`\hat S_i(t)` at ``times`` (shape (n_test,) for one time).
    times : array-like of shape (n_times,)
        Strictly increasing, within the test follow-up: ``min(y_test time) <= times < max(y_test time)``.

    Returns
    -------
    times, scores : ndarray of shape (n_times,)
    """
    train_event, train_time = event_and_time(y_train, "y_train")
    test_event, test_time = event_and_time(y_test, "y_test")
    times = _check_grid(times, test_time)
    estimate = _check_estimate(estimate, test_time.shape[0], times.shape[0])
    knots, survival = _censoring_survival(train_event, train_time)
    g_times = _censoring_at(knots, survival, times, "times")
    g_rows = np.ones(test_time.shape[0])
    g_rows[test_event] = _censoring_at(knots, survival, test_time[test_event], "y_test's event times")
    weight_rows = np.divide(1.0, g_rows, out=np.zeros_like(g_rows), where=g_rows > 0)
    weight_times = np.divide(1.0, g_times, out=np.zeros_like(g_times), where=g_times > 0)
    case = (test_time[:, None] <= times) & test_event[:, None]
    control = test_time[:, None] > times
    scores = np.where(case, estimate**2 * weight_rows[:, None], 0.0) + np.where(
        control, (1.0 - estimate) ** 2 * weight_times, 0.0
    )
    return times, scores.mean(axis=0)


def integrated_brier_score(y_train: Any, y_test: Any, estimate: Any, times: Any) -> float:
    r"""The integrated Brier score (Graf et al., 1999): :func:`brier_score` averaged over
    :math:`[t_1, t_m]` by the trapezoid rule,

    .. math:: \mathrm{IBS} = \frac{1}{t_m - t_1} \int_{t_1}^{t_m} \mathrm{BS}(t)\, dt,

    scikit-survival's ``integrated_brier_score`` (same arguments); at least two ``times``."""
    times, scores = brier_score(y_train, y_test, estimate, times)
    if times.shape[0] < 2:
        raise ValueError("times must hold at least two time points to integrate over")
    return float(np.trapezoid(scores, times) / (times[-1] - times[0]))
