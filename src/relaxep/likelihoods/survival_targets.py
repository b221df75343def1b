r"""Survival targets at the door: scikit-survival's structured arrays, (time, event) columns and interval bounds,
read into the survival likelihoods' rows :math:`[\log l_i, \log u_i]` on the log-time scale.

A row says the event time :math:`T_i` lies in :math:`[l_i, u_i]`:

- an observed event at :math:`t`: :math:`[\log t, \log t]`;
- right-censored at :math:`t` (:math:`T_i \ge t`): :math:`[\log t, +\infty]`;
- left-censored at :math:`t` (:math:`T_i \le t`): :math:`[-\infty, \log t]`;
- interval-censored in :math:`(l, u)`: :math:`[\log l, \log u]`.

Three forms are read (Klein & Moeschberger, *Survival Analysis*, 2003, ch. 3, for the censoring schemes):

(a) a structured array of two fields, one boolean (the event indicator) and one numeric (the time), of any names
    in either order, as ``sksurv.util.Surv.from_arrays(event, time)`` builds (:func:`right_censored` builds it here;
    scikit-survival is never needed);
(b) a numeric ``(n, 2)`` array of columns (time, event), the event column boolean or only 0/1;
(c) a structured array with fields ``lower`` and ``upper`` (:func:`interval_censored`): ``lower == 0`` is
    left-censored, ``upper == inf`` right-censored, ``lower == upper`` an observed event.

Every check names ``y`` (or the argument) and the field; the caller's array is read, never written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SurvivalRows", "event_and_time", "interval_censored", "right_censored", "survival_targets"]

RIGHT_CENSORED_DTYPE = np.dtype([("event", "?"), ("time", "<f8")])
INTERVAL_DTYPE = np.dtype([("lower", "<f8"), ("upper", "<f8")])


def _as_float(values: np.ndarray, what: str) -> np.ndarray:
    if values.dtype == np.bool_ or not (np.issubdtype(values.dtype, np.number)):
        raise TypeError(f"{what} must be numeric (a time); got dtype {values.dtype}")
    if np.issubdtype(values.dtype, np.complexfloating):
        raise TypeError(f"{what} must be real; got dtype {values.dtype}")
    return np.array(values, dtype=float)  # a copy: never a view of the caller's array


def _check_times(time: np.ndarray, what: str) -> None:
    """Event or censoring times: finite and positive (the log-time scale needs :math:`t > 0`)."""
    if np.isnan(time).any():
        raise ValueError(f"{what} has NaN at rows {np.flatnonzero(np.isnan(time))[:5].tolist()}")
    bad = ~np.isfinite(time) | (time <= 0)
    if bad.any():
        rows = np.flatnonzero(bad)[:5].tolist()
        raise ValueError(f"{what} must be finite and positive (times > 0); rows {rows} are {time[rows].tolist()}")


def _check_bounds(lower: np.ndarray, upper: np.ndarray, lower_name: str, upper_name: str) -> None:
    """Interval bounds: ``0 <= lower <= upper``, ``lower`` finite, ``upper > 0`` (``inf`` allowed)."""
    for values, what in ((lower, lower_name), (upper, upper_name)):
        if np.isnan(values).any():
            raise ValueError(f"{what} has NaN at rows {np.flatnonzero(np.isnan(values))[:5].tolist()}")
    checks = (
        (~np.isfinite(lower) | (lower < 0), f"{lower_name} must be finite and >= 0 (0: left-censored)", lower),
        (upper <= 0, f"{upper_name} must be > 0 (inf: right-censored)", upper),
        (lower > upper, f"{lower_name} must not exceed {upper_name}", lower),
    )
    for bad, message, values in checks:
        if bad.any():
            rows = np.flatnonzero(bad)[:5].tolist()
            raise ValueError(f"{message}; rows {rows} are {values[rows].tolist()}")


def _event_field(y: np.ndarray, name: str) -> tuple[str, str]:
    """(event field, time field) of a two-field structured array: the boolean one is the event."""
    names = y.dtype.names
    if len(names) != 2:
        raise ValueError(
            f"{name} must be a structured array of exactly two fields (an event indicator and a time) or of fields "
            f"'lower' and 'upper'; got fields {list(names)}"
        )
    kinds = [y.dtype[field] for field in names]
    booleans = [field for field, kind in zip(names, kinds, strict=True) if kind == np.bool_]
    if len(booleans) == 2:
        raise TypeError(f"{name}: both fields {list(names)} are boolean; one must be the (numeric) time")
    if not booleans:
        binary = [field for field in names if np.isin(y[field], (0, 1)).all()]
        field = binary[0] if binary else names[0]
        raise TypeError(
            f"{name}: the event field must be boolean (field '{field}' has dtype {y.dtype[field]}); "
            f"use {name}['{field}'].astype(bool) (or relaxep's right_censored(event, time))"
        )
    event = booleans[0]
    return event, next(field for field in names if field != event)


def _read(y: Any, name: str) -> tuple[str, np.ndarray, np.ndarray]:
    """("right", event, time) or ("interval", lower, upper), checked, as fresh float/bool arrays."""
    if isinstance(y, np.ndarray) and y.dtype.names is not None:
        array = y
    else:
        try:
            array = np.asarray(y)
        except (TypeError, ValueError) as error:
            raise TypeError(f"{name} must be an array of survival targets; numpy could not read it: {error}") from None
    if array.size == 0:
        raise ValueError(f"{name} is empty")
    if array.dtype.names is not None:
        if array.ndim != 1:
            raise ValueError(f"{name}: a structured array must be 1-D (one record per row); got shape {array.shape}")
        if set(array.dtype.names) == {"lower", "upper"}:
            lower = _as_float(array["lower"], f"{name}['lower']")
            upper = _as_float(array["upper"], f"{name}['upper']")
            _check_bounds(lower, upper, f"{name}['lower']", f"{name}['upper']")
            return "interval", lower, upper
        event_name, time_name = _event_field(array, name)
        time = _as_float(array[time_name], f"{name}['{time_name}']")
        _check_times(time, f"{name}['{time_name}']")
        return "right", np.array(array[event_name], dtype=bool), time
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(
            f"{name} must be a structured array (event, time), a structured array (lower, upper) or a numeric "
            f"(n, 2) array of columns (time, event); got shape {array.shape} and dtype {array.dtype}"
        )
    if array.dtype == object:
        try:
            array = array.astype(float)
        except (TypeError, ValueError):
            raise TypeError(f"{name}: the (time, event) columns must be numeric; got objects") from None
    time = _as_float(array[:, 0], f"{name}[:, 0] (the time)")
    column = array[:, 1]
    if column.dtype != np.bool_:
        column = _as_float(column, f"{name}[:, 1] (the event)")
        if not np.isin(column, (0.0, 1.0)).all():
            bad = np.flatnonzero(~np.isin(column, (0.0, 1.0)))[:5].tolist()
            raise ValueError(
                f"{name}[:, 1] (the event) must be boolean or 0/1 (columns are (time, event)); rows {bad} are "
                f"{column[bad].tolist()}"
            )
    _check_times(time, f"{name}[:, 0] (the time)")
    return "right", column.astype(bool), time


def _require_information(kind: str, first: np.ndarray, second: np.ndarray, name: str) -> None:
    if kind == "right" and not first.any():
        raise ValueError(f"{name}: every row is censored (no event); the event times are not identified")
    if kind == "interval" and np.isinf(second).all():
        raise ValueError(f"{name}: every row is right-censored (every 'upper' is inf); no event time is bounded above")


def survival_targets(y: Any, name: str = "y") -> np.ndarray:
    r"""The survival likelihoods' targets: rows :math:`[\log l_i, \log u_i]` with :math:`T_i \in [l_i, u_i]`.

    Parameters
    ----------
    y : array-like
        (a) a structured array of one boolean field (the event) and one numeric field (the time), any names, either
        order (scikit-survival's ``Surv.from_arrays``); (b) a numeric ``(n, 2)`` array of columns (time, event),
        the event boolean or 0/1; (c) a structured array of fields ``lower`` and ``upper`` (interval censoring).
    name : str
        The argument's name in the messages.

    Returns
    -------
    ndarray of shape (n, 2)
        Event at :math:`t`: :math:`[\log t, \log t]`; right-censored: :math:`[\log t, \infty]`; left-censored
        (``lower == 0``): :math:`[-\infty, \log u]`; interval: :math:`[\log l, \log u]`.

    Raises
    ------
    ValueError
        Empty; wrong shape; times not finite and positive (an interval's ``lower`` may be 0, its ``upper`` inf);
        ``lower > upper``; an event column of values other than 0/1; every row censored.
    TypeError
        A structured array whose event field is not boolean.
    """
    kind, first, second = _read(y, name)
    _require_information(kind, first, second, name)
    if kind == "right":
        log_time = np.log(second)
        return np.column_stack((log_time, np.where(first, log_time, np.inf)))
    with np.errstate(divide="ignore"):  # log 0 = -inf: left-censored rows
        return np.column_stack((np.log(first), np.log(second)))


def event_and_time(y: Any, name: str = "y") -> tuple[np.ndarray, np.ndarray]:
    """The event indicators (bool) and times (float) of right-censored targets, forms (a) and (b) of
    :func:`survival_targets`, checked as there (fresh arrays).  Interval-censored targets raise ``ValueError``."""
    kind, first, second = _read(y, name)
    if kind == "interval":
        raise ValueError(
            f"{name} is interval-censored (fields 'lower', 'upper'); this needs right-censored targets "
            "(an event indicator and a time)"
        )
    _require_information(kind, first, second, name)
    return first, second


def _vector(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} is empty")
    return array


def right_censored(event: Any, time: Any) -> np.ndarray:
    """scikit-survival's structured array of right-censored targets, ``dtype [('event', '?'), ('time', '<f8')]``
    (what ``sksurv.util.Surv.from_arrays(event, time)`` makes), from event indicators (bool or 0/1) and positive
    finite times."""
    event, time = _vector(event, "event"), _vector(time, "time")
    if event.shape != time.shape:
        raise ValueError(f"event and time must have the same length; got {event.shape[0]} and {time.shape[0]}")
    if event.dtype != np.bool_:
        if not np.issubdtype(event.dtype, np.number) or not np.isin(event, (0, 1)).all():
            raise ValueError(f"event must be boolean or 0/1; got dtype {event.dtype} with other values")
    time = _as_float(time, "time")
    _check_times(time, "time")
    out = np.empty(time.shape[0], dtype=RIGHT_CENSORED_DTYPE)
    out["event"] = event.astype(bool)
    out["time"] = time
    return out


def interval_censored(lower: Any, upper: Any) -> np.ndarray:
    """A structured array of interval-censored targets, ``dtype [('lower', '<f8'), ('upper', '<f8')]``: the event
    time lies in ``[lower, upper]``; ``lower == 0`` is left-censored, ``upper == inf`` right-censored and
    ``lower == upper`` an observed event."""
    lower, upper = _vector(lower, "lower"), _vector(upper, "upper")
    if lower.shape != upper.shape:
        raise ValueError(f"lower and upper must have the same length; got {lower.shape[0]} and {upper.shape[0]}")
    lower, upper = _as_float(lower, "lower"), _as_float(upper, "upper")
    out = np.empty(lower.shape[0], dtype=INTERVAL_DTYPE)
    out["lower"], out["upper"] = lower, upper
    _check_bounds(lower, upper, "lower", "upper")
    return out


@dataclass(frozen=True)
class SurvivalRows:
    r"""A survival fit's training rows as a likelihood's start reads them
    (:meth:`~relaxep.likelihoods.SurvivalLikelihood.start_from`), wherever they are (in memory, or a Dask fit's
    chunks).

    Attributes
    ----------
    mean_log_time : float
        The mean over the rows of :math:`\log l_i` where finite, else :math:`\log u_i`.
    log_lik_at_zero : callable
        ``log_lik_at_zero(likelihood)``: :math:`\sum_i \log p(y_i | f_i = 0)` under a survival likelihood.
    gather : callable
        ``gather()``: the rows, shape ``(n, 2)`` (a Dask fit brings them to the client).
    """

    mean_log_time: float
    log_lik_at_zero: Callable[[Any], float]
    gather: Callable[[], np.ndarray]

    @classmethod
    def of(cls, rows: np.ndarray) -> SurvivalRows:
        """The rows ``[log_lower, log_upper]`` held in memory."""
        finite = np.where(np.isfinite(rows[:, 0]), rows[:, 0], rows[:, 1])
        zero = np.zeros(rows.shape[0])
        return cls(float(np.mean(finite)), lambda at: float(np.sum(at.log_lik(rows, zero))), lambda: rows)
