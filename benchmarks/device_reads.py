"""Host reads a sweep of sparse EP on another array library's arrays (array-api-strict, on the CPU).

``python benchmarks/device_reads.py``

Counts every conversion of an ``array_api_strict`` array to the host (``__float__``, ``__bool__``, ``__int__``,
``__dlpack__``) during ``infer`` on a ``SparsePrior`` of strict arrays with ``EP()`` and the parallel schedule, the
loop of ``relaxep.inference.device_ep``; prints the total, the sweeps and the count per call site.  array-api-strict
has no ``log_ndtr``/``erfcx``, so its special functions take one round trip a sweep that PyTorch and CuPy do not.
"""

from __future__ import annotations

import collections
import traceback

import array_api_strict as xs
import numpy as np
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

import relaxep._xp as rxp
from relaxep import EP, NoisyProbit, infer
from relaxep.posterior import SparsePrior


def main() -> None:
    rxp._dispatch = lambda: True  # (scikit-learn's array_api_dispatch, as far as relaxep reads it)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 3))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=1500) > 0, 1.0, -1.0)
    prior = SparsePrior(xs.asarray(X), X[:30], C(2.0) * RBF(1.0))
    array_type = type(xs.asarray([1.0]))
    sites: collections.Counter = collections.Counter()
    for name in ("__float__", "__bool__", "__int__", "__dlpack__"):
        original = getattr(array_type, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            frame = traceback.extract_stack(limit=3)[-2]
            sites[(_name, frame.filename.split("/")[-1], frame.lineno)] += 1
            return _original(self, *args, **kwargs)

        setattr(array_type, name, counted)
    result = infer(prior, y, NoisyProbit(0.01, 1.0), EP(), schedule="parallel", tol=1e-6)
    total = sum(sites.values())
    print(f"{result.n_sweeps} sweeps ({result.status}), {total} reads: {total / result.n_sweeps:.1f} a sweep")
    for (name, where, line), count in sites.most_common():
        print(f"{count:4d}  {name:10s} {where}:{line}")


if __name__ == "__main__":
    main()
