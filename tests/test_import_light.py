"""``import relaxep`` never imports torch (nor BoTorch): the BoTorch models are an optional extra, imported only
from relaxep.botorch."""

import subprocess
import sys


def test_import_relaxep_does_not_import_torch():
    code = "import sys, relaxep; print(sorted(m for m in ('torch', 'botorch', 'gpytorch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
