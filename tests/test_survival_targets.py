"""Survival targets at the door: every accepted form read into the contract's log-time rows (checked against
hand-written rows), every malformed one refused with a message naming the argument, the caller's array untouched."""

import numpy as np
import pytest

from relaxep.likelihoods.survival_targets import event_and_time, interval_censored, right_censored, survival_targets

INF = np.inf
EXPECTED = np.log([[2.0, 2.0], [3.0, INF], [4.0, 4.0]])  # events at 2 and 4, censored at 3


def test_right_censored_builds_scikit_survivals_structured_array():
    y = right_censored([True, False, True], [2, 3, 4])
    assert y.dtype == np.dtype([("event", "?"), ("time", "<f8")])
    assert y["event"].tolist() == [True, False, True] and y["time"].tolist() == [2.0, 3.0, 4.0]
    assert right_censored([1, 0, 1], [2.0, 3.0, 4.0]).tolist() == y.tolist()


@pytest.mark.parametrize(
    "dtype",
    [
        [("event", "?"), ("time", "<f8")],
        [("time", "<f8"), ("event", "?")],
        [("Status", "?"), ("Survival_in_days", "<f8")],
        [("cens", "?"), ("t", "<i8")],
    ],
)
def test_structured_arrays_of_any_names_and_order(dtype):
    y = np.empty(3, dtype=dtype)
    event_name = next(name for name in y.dtype.names if y.dtype[name] == np.bool_)
    time_name = next(name for name in y.dtype.names if name != event_name)
    y[event_name] = [True, False, True]
    y[time_name] = [2, 3, 4]
    np.testing.assert_array_equal(survival_targets(y), EXPECTED)
    event, time = event_and_time(y)
    assert event.dtype == np.bool_ and event.tolist() == [True, False, True]
    assert time.dtype == np.float64 and time.tolist() == [2.0, 3.0, 4.0]


@pytest.mark.parametrize(
    "y",
    [
        np.array([[2.0, 1.0], [3.0, 0.0], [4.0, 1.0]]),
        np.array([[2, 1], [3, 0], [4, 1]]),
        [(2.0, 1), (3.0, 0), (4.0, 1)],
        np.array([[2.0, True], [3.0, False], [4.0, True]], dtype=object),
    ],
    ids=["float", "int", "tuples", "object-bool"],
)
def test_time_event_columns(y):
    np.testing.assert_array_equal(survival_targets(y), EXPECTED)


def test_interval_censoring_each_kind():
    y = interval_censored([0.0, 1.0, 2.0, 3.0, 0.0], [1.0, 2.0, INF, 3.0, INF])
    assert y.dtype == np.dtype([("lower", "<f8"), ("upper", "<f8")])
    expected = np.array(
        [[-INF, 0.0], [0.0, np.log(2.0)], [np.log(2.0), INF], [np.log(3.0), np.log(3.0)], [-INF, INF]]
    )  # left, interval, right, event, no information
    np.testing.assert_array_equal(survival_targets(y), expected)
    with pytest.raises(ValueError, match="interval-censored"):
        event_and_time(y)


def test_sksurv_surv_from_arrays_is_read():
    util = pytest.importorskip("sksurv.util")
    y = util.Surv.from_arrays(event=[True, False, True], time=[2, 3, 4])
    assert y.dtype == right_censored([True], [1.0]).dtype
    np.testing.assert_array_equal(survival_targets(y), EXPECTED)
    y = util.Surv.from_arrays([1, 0, 1], [2.0, 3.0, 4.0], name_event="dead", name_time="days")
    np.testing.assert_array_equal(survival_targets(y), EXPECTED)


def _structured(event, time, event_dtype="?"):
    y = np.empty(len(time), dtype=[("event", event_dtype), ("time", "<f8")])
    y["event"], y["time"] = event, time
    return y


@pytest.mark.parametrize("bad", [-1.0, 0.0, np.nan, INF])
def test_times_must_be_finite_and_positive(bad):
    with pytest.raises(ValueError, match=r"y\['time'\]"):
        survival_targets(_structured([True, True], [1.0, bad]))
    with pytest.raises(ValueError, match=r"y\[:, 0\] \(the time\)"):
        survival_targets(np.array([[1.0, 1.0], [bad, 1.0]]))
    with pytest.raises(ValueError, match="time"):
        right_censored([True, True], [1.0, bad])


def test_event_field_must_be_boolean():
    with pytest.raises(TypeError, match=r"y\['event'\]\.astype\(bool\)"):
        survival_targets(_structured([1, 0], [1.0, 2.0], event_dtype="<i8"))
    with pytest.raises(TypeError, match=r"y_train\['event'\]\.astype\(bool\)"):
        event_and_time(_structured([1, 0], [1.0, 2.0], event_dtype="<f8"), "y_train")
    y = np.empty(2, dtype=[("a", "?"), ("b", "?")])
    with pytest.raises(TypeError, match="both fields"):
        survival_targets(y)


def test_event_column_must_be_zero_or_one():
    with pytest.raises(ValueError, match=r"y\[:, 1\] \(the event\) must be boolean or 0/1"):
        survival_targets(np.array([[2.0, 1.0], [3.0, 2.0]]))
    with pytest.raises(ValueError, match="event must be boolean or 0/1"):
        right_censored([1, 2], [1.0, 2.0])


@pytest.mark.parametrize(
    ("lower", "upper", "match"),
    [
        ([2.0, 1.0], [1.0, 2.0], r"lower'\] must not exceed"),
        ([-1.0, 1.0], [1.0, 2.0], r"lower'\] must be finite and >= 0"),
        ([INF, 1.0], [INF, 2.0], r"lower'\] must be finite and >= 0"),
        ([0.0, 1.0], [0.0, 2.0], r"upper'\] must be > 0"),
        ([np.nan, 1.0], [1.0, 2.0], r"lower'\] has NaN"),
        ([0.5, 1.0], [np.nan, 2.0], r"upper'\] has NaN"),
    ],
)
def test_interval_bounds_are_checked(lower, upper, match):
    y = np.empty(2, dtype=[("lower", "<f8"), ("upper", "<f8")])
    y["lower"], y["upper"] = lower, upper
    with pytest.raises(ValueError, match=match):
        survival_targets(y)
    with pytest.raises(ValueError, match=match.replace(r"'\]", "")):
        interval_censored(lower, upper)


def test_every_row_censored_is_refused():
    with pytest.raises(ValueError, match="every row is censored"):
        survival_targets(right_censored([False, False], [1.0, 2.0]))
    with pytest.raises(ValueError, match="every row is censored"):
        event_and_time(np.array([[1.0, 0.0], [2.0, 0.0]]))
    with pytest.raises(ValueError, match="every 'upper' is inf"):
        survival_targets(interval_censored([0.0, 1.0], [INF, INF]))


@pytest.mark.parametrize(
    "y",
    [
        np.array([1.0, 2.0]),
        np.ones((3, 3)),
        np.ones((2, 2, 2)),
        right_censored([True, True], [1.0, 2.0]).reshape(2, 1),
        np.zeros(2, dtype=[("event", "?"), ("time", "<f8"), ("x", "<f8")]),
    ],
    ids=["1-D", "three-columns", "3-D", "2-D-structured", "three-fields"],
)
def test_wrong_shapes(y):
    with pytest.raises(ValueError, match=r"^y"):
        survival_targets(y)


def test_empty_and_unreadable():
    with pytest.raises(ValueError, match="y is empty"):
        survival_targets(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="y is empty"):
        survival_targets(right_censored([True], [1.0])[:0])
    with pytest.raises(TypeError, match="numeric"):
        survival_targets(np.array([["a", "1"], ["b", "0"]]))
    with pytest.raises(ValueError, match="same length"):
        right_censored([True], [1.0, 2.0])
    with pytest.raises(ValueError, match="same length"):
        interval_censored([1.0], [1.0, 2.0])


def test_the_callers_array_is_untouched():
    structured = _structured([True, False, True], [2.0, 3.0, 4.0])
    columns = np.array([[2.0, 1.0], [3.0, 0.0], [4.0, 1.0]])
    bounds = interval_censored([0.0, 1.0, 2.0], [1.0, 2.0, INF])
    for y in (structured, columns, bounds):
        before = y.copy()
        rows = survival_targets(y)
        rows[:] = -7.0
        np.testing.assert_array_equal(y, before)
    event, time = event_and_time(structured)
    assert not np.shares_memory(time, structured) and not np.shares_memory(event, structured)
    time[:] = 99.0
    event[:] = False
    np.testing.assert_array_equal(structured, _structured([True, False, True], [2.0, 3.0, 4.0]))
    event, time = event_and_time(columns)
    time[:] = 99.0
    assert columns[:, 0].tolist() == [2.0, 3.0, 4.0]
