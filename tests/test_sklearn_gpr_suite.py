"""scikit-learn's own ``GaussianProcessRegressor`` tests, run against ``GPRegressor``.

The module reads ``sklearn/gaussian_process/tests/test_gpr.py`` from the installed
scikit-learn, changes its one import of the estimator to ``relaxep.GPRegressor`` and runs
every test in it, so a newer scikit-learn's tests are picked up as they are.  Nobody here
wrote them: they are a client's expectations (interpolation, the evidence and its gradient,
normalisation, multi-output shapes, sampling, bound warnings, error messages).  Their own
``xfail`` marks stay.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sklearn

_SOURCE = Path(sklearn.__file__).parent / "gaussian_process" / "tests" / "test_gpr.py"
_IMPORT = "from sklearn.gaussian_process import GaussianProcessRegressor"

if not _SOURCE.is_file():  # pragma: no cover - a scikit-learn installed without its tests
    pytest.skip(f"scikit-learn's tests are not installed ({_SOURCE})", allow_module_level=True)
_TEXT = _SOURCE.read_text(encoding="utf-8")
if _TEXT.count(_IMPORT) != 1:  # pragma: no cover - the file changed shape: look at it
    raise RuntimeError(f"{_SOURCE} no longer imports the estimator as {_IMPORT!r}; update this module")

_SWAPPED = _TEXT.replace(_IMPORT, "from relaxep import GPRegressor as GaussianProcessRegressor")
exec(compile(_SWAPPED, str(_SOURCE), "exec"), globals())  # the installed file, estimator swapped


@pytest.fixture(params=[int(os.environ.get("SKLEARN_TESTS_GLOBAL_RANDOM_SEED", "42"))])
def global_random_seed(request: pytest.FixtureRequest) -> int:
    """scikit-learn's fixture (its conftest gives 42 unless the environment says otherwise)."""
    return request.param
