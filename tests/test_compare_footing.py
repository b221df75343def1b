"""compare() ranks leave-one-out values only on the same footing: a log density of y beside a log probability (a
mass: classes, counts, censored rows) is refused, by a message that says so; results that do not say are not checked.
"""

from __future__ import annotations

import numpy as np
import pytest

from relaxep import compare
from relaxep.assessment import LooResult


def _result(name, is_density, shift=0.0):
    pointwise = np.log(np.linspace(0.1, 0.9, 20)) + shift
    return LooResult(pointwise, pointwise + 0.01, 0, "same rows", name, is_density=is_density)


def test_a_mass_beside_a_density_is_refused():
    with pytest.raises(ValueError, match=r"'density' and 'mass' are not on the same footing.*density") as info:
        compare({"density": _result("a", True), "mass": _result("b", False)})
    assert "probabilit" in str(info.value)


def test_the_same_footing_is_ranked():
    for footing in (True, False):
        table = compare({"a": _result("a", footing), "b": _result("b", footing, shift=-0.5)})
        assert table.names == ("a", "b") and table.elpd_diff[1] == pytest.approx(10.0)


def test_a_result_that_does_not_say_is_not_checked():
    table = compare({"a": _result("a", None), "b": _result("b", False, shift=-0.5), "c": _result("c", None)})
    assert table.names[0] in ("a", "c")
    with pytest.raises(ValueError, match="same footing"):
        compare({"a": _result("a", None), "b": _result("b", False), "c": _result("c", True)})
