"""The library works without the studies' extra (matplotlib, tqdm); ``relaxep reproduce`` names the extra.

Each check runs in a fresh interpreter with ``sys.modules["matplotlib"] = sys.modules["tqdm"] = None``, so any
import of either (at module level, or on the way to a fit) raises ``ImportError`` there.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK = 'import sys\nfor name in ("matplotlib", "tqdm"):\n    sys.modules[name] = None\n'


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCK + textwrap.dedent(code)], capture_output=True, text=True, timeout=300
    )


def test_the_library_imports_and_fits_without_matplotlib_and_tqdm():
    result = _run(
        """
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
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")


def test_reproduce_without_the_extra_names_it(tmp_path):
    result = _run(
        f"""
        from relaxep.cli import main
        sys.exit(main(["reproduce", "toy", "--out", {str(tmp_path / "out")!r}]))
        """
    )
    assert result.returncode == 2, result.stderr
    assert 'pip install "relaxep[studies]"' in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was written
