"""``import relaxep`` never imports torch (nor BoTorch): the BoTorch models are an optional extra, imported only
from relaxep.botorch.  Nor do the studies' registry and the constrained_bo study module (issue 63), whose BoTorch
loops (_bo_loops) are imported inside its cells."""

import json
import subprocess
import sys


def test_import_relaxep_and_the_studies_do_not_import_torch():
    """Both in one fresh interpreter: after ``import relaxep`` alone, then after the registry and the study module."""
    code = (
        "import json, sys\n"
        "heavy = ('torch', 'botorch', 'gpytorch')\n"
        "import relaxep\n"
        "out = [sorted(m for m in heavy if m in sys.modules)]\n"
        "import relaxep.experiments, relaxep.experiments.studies.constrained_bo\n"
        "out.append(sorted(m for m in heavy if m in sys.modules))\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    alone, studies = json.loads(result.stdout.strip().splitlines()[-1])
    assert alone == [], result.stdout + result.stderr
    assert studies == [], result.stdout + result.stderr
