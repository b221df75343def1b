"""Host reads a sweep of sparse EP on another array library's arrays (array-api-strict, on the CPU).

``python benchmarks/device_reads.py [--host]``

Counts every conversion of an ``array_api_strict`` array to the host (``__float__``, ``__bool__``, ``__int__``,
``__dlpack__``) during ``infer`` on a ``SparsePrior`` of strict arrays with the parallel schedule, the loop of
``relaxep.inference.device_ep``, for four fits: EP with the label-noise probit (closed form), EP with the logistic
and Power EP (u = 0.5) with the logistic (the fixed-size device quadrature, ``relaxep.likelihoods.quadrature_on``)
and Power EP (u = 0.5) with the probit (the same quadrature, of the probit's special functions); prints the total,
the sweeps and the count per call site.  ``--host`` forces the host loop (sites in numpy, what the last three took
before they ran on the device).  array-api-strict has no ``log_ndtr``/``erfcx``; ``relaxep._special_xp`` computes
them from the standard's elementwise functions on the arrays' own device, so they take no round trip (as with
PyTorch's and CuPy's own): a sweep reads back one array of scalars (``device_ep._read``), and a fit about 16
conversions more at its start and end (the FITC rows' checks, the host posterior).  Before, each evaluation of the
special functions was one more round trip: one a sweep for the closed forms, one per Newton step and one for the
nodes in the probit's quadrature (EP with the label-noise probit 47 reads in 15 sweeps, now 31; Power EP with the
probit 316 in 14, now 30).
"""

from __future__ import annotations

import collections
import sys
import traceback

import array_api_strict as xs
import numpy as np
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

import relaxep._xp as rxp
import relaxep.inference.site_updates as site_updates
from relaxep import EP, Logistic, NoisyProbit, PowerEP, Probit, infer
from relaxep.posterior import SparsePrior

FITS = [
    ("EP, NoisyProbit(0.01, 1)", NoisyProbit(0.01, 1.0), EP()),
    ("EP, Logistic()", Logistic(), EP()),
    ("PowerEP(0.5), Logistic()", Logistic(), PowerEP(0.5)),
    ("PowerEP(0.5), Probit()", Probit(), PowerEP(0.5)),
]


def main() -> None:
    rxp._dispatch = lambda: True  # (scikit-learn's array_api_dispatch, as far as relaxep reads it)
    if "--host" in sys.argv:
        site_updates.on_device = lambda *args: False
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
    for title, likelihood, rule in FITS:
        sites.clear()
        result = infer(prior, y, likelihood, rule, schedule="parallel", tol=1e-6)
        total = sum(sites.values())
        rate = total / result.n_sweeps
        print(f"{title}: {result.n_sweeps} sweeps ({result.status}), {total} reads: {rate:.1f} a sweep")
        for (name, where, line), count in sites.most_common(6):
            print(f"  {count:4d}  {name:10s} {where}:{line}")


if __name__ == "__main__":
    main()
