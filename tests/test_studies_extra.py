"""The library works without the studies' extra (matplotlib, tqdm); ``relaxep reproduce`` names the extra.

Both checks run in one fresh interpreter with ``sys.modules["matplotlib"] = sys.modules["tqdm"] = None``, so any
import of either (at module level, or on the way to a fit) raises ``ImportError`` there: first the library's
modules and fits, then ``relaxep reproduce`` (which imports the studies, and with them the extra).  Each check's
outcome comes back separately, so a failure of one does not hide the other's.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

BLOCK = 'import sys\nfor name in ("matplotlib", "tqdm"):\n    sys.modules[name] = None\n'

SCRIPT = (
    BLOCK
    + """
import contextlib, io, json, traceback


def library():
    import importlib, pkgutil
    import numpy as np
    import relaxep
    from relaxep import GPClassifier, GPRegressor

    # every module of the library (the studies, relaxep.experiments, may need the extra)
    blocked = []
    for info in pkgutil.walk_packages(relaxep.__path__, "relaxep."):
        if info.name.startswith("relaxep.experiments"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError as exc:  # an optional dependency (dask, ...) may be missing: only the two count
            if (exc.name or "").split(".")[0] in ("matplotlib", "tqdm"):
                blocked.append(f"{info.name}: {exc}")
    assert not blocked, blocked

    rng = np.random.default_rng(0)
    X = rng.uniform(-2.0, 2.0, size=(30, 1))
    clf = GPClassifier().fit(X, np.where(np.sin(2.0 * X[:, 0]) > 0.0, 1, 0))
    assert clf.predict_proba(X).shape == (30, 2)
    gpr = GPRegressor().fit(X, np.sin(2.0 * X[:, 0]) + 0.1 * rng.standard_normal(30))
    assert gpr.predict(X).shape == (30,)
    assert "matplotlib" not in {m.split(".")[0] for m, mod in sys.modules.items() if mod is not None}
    return "ok"


def reproduce():
    from relaxep.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(["reproduce", "toy", "--out", sys.argv[1]])
    return {"status": status, "stderr": err.getvalue()}


out = {}
for name, check in (("library", library), ("reproduce", reproduce)):
    try:
        out[name] = check()
    except BaseException:
        out[name] = {"error": traceback.format_exc()}
print(json.dumps(out))
"""
)


@pytest.fixture(scope="module")
def without_extra(tmp_path_factory):
    """The two checks' outcomes (one interpreter for both: a fresh one costs seconds) and the CLI's --out folder."""
    out = tmp_path_factory.mktemp("without-extra") / "out"
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1]), out


def test_the_library_imports_and_fits_without_matplotlib_and_tqdm(without_extra):
    outcome, _ = without_extra
    assert outcome["library"] == "ok", outcome["library"]


def test_reproduce_without_the_extra_names_it(without_extra):
    outcome, out = without_extra
    result = outcome["reproduce"]
    assert "error" not in result, result["error"]  # (an exception, traceback and all, instead of the message)
    assert result["status"] == 2, result["stderr"]
    assert 'pip install "relaxep[studies]"' in result["stderr"]
    assert "Traceback" not in result["stderr"]
    assert not out.exists()  # refused before anything was written
