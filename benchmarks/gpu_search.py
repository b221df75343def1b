"""The stochastic search alone on a GPU: its M x M steps on the device, and (``--stochastic-host``) on the host.

``python benchmarks/gpu_search.py [--n 1000000] [--inducing 200] [--stochastic-host]`` (also the ``search`` group
of ``benchmarks/gpu.py``)

``learn_stochastic`` as ``GPClassifier(1 * RBF(1), Probit(), inducing_points=M, optimizer="stochastic")`` runs it
(1000 steps of 1000 rows, the kernel and ``Z`` learned from k-means centres) on torch tensors of
``benchmarks/sparse.py``'s problem, timed to the device's last operation:

``M x M steps on the device``
    the default: the tied site, the cavity, ``K_uu`` and its factor, the gradient's Cholesky adjoint and the Adam
    steps on the rows' device (``relaxep.estimators._stochastic``), one short read a step;
``M x M steps on the host (--stochastic-host)``
    the same search with ``space=HOST``: the minibatch's rows on the device, its ``M x M`` sums brought to the host
    each step and the steps taken there with numpy (the path before), in the same process; then the largest
    difference between the two answers' ``theta`` and ``Z``.

With the environment variable ``GPU_PROFILE_SEARCH`` set to a path, the device search runs once more under
cProfile and its 30 costliest calls are written there.
"""

from __future__ import annotations

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # scikit-learn's array API dispatch needs it before scipy loads

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sparse import problem

NAN = float("nan")


def search_rows(torch: object, device: object, n: int, M: int, host: bool) -> list[tuple]:
    """The search on the device's rows, its steps there (and, ``host``, on the host): rows of ``benchmarks/gpu.py``'s
    table (name, seconds, then blanks)."""
    import sklearn
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from relaxep import GPClassifier, Probit
    from relaxep._xp import HOST, namespace
    from relaxep.estimators._inducing import initial_inducing_points
    from relaxep.estimators._stochastic import StochasticOptions, learn_stochastic, local_batches

    X, y, _, _, _ = problem(n)
    tX = torch.asarray(X, device=device)  # type: ignore[attr-defined]
    Z = initial_inducing_points(X, M, "kmeans", np.random.RandomState(0))
    scale, jitter = X.std(0), GPClassifier().jitter

    def search(space: object) -> object:
        batches = local_batches(tX, y, 1000, np.random.RandomState(0))
        args = (C(1.0) * RBF(1.0), Probit(), Z, n, scale, jitter, True, True, batches, StochasticOptions())
        return learn_stochastic(*args, space=space)

    rows, answers = [], []
    with sklearn.config_context(array_api_dispatch=True):
        for label, space in [("device", namespace(tX)), ("host (--stochastic-host)", HOST)][: 2 if host else 1]:
            start = time.perf_counter()
            learned = search(space)
            if getattr(device, "type", "cpu") == "cuda":
                torch.cuda.synchronize()  # type: ignore[attr-defined]
            seconds = time.perf_counter() - start
            answers.append(np.concatenate([learned.kernel.theta, learned.Z.ravel()]))
            name = f"relaxep stochastic search alone (1000 steps), torch, M x M steps on the {label}: {learned.kernel}"
            rows.append((name, seconds, NAN, NAN, NAN, ""))
        if os.environ.get("GPU_PROFILE_SEARCH"):
            import cProfile
            import io
            import pstats

            profile = cProfile.Profile()
            profile.enable()
            search(namespace(tX))
            profile.disable()
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(30)
            Path(os.environ["GPU_PROFILE_SEARCH"]).write_text(text.getvalue())
    if len(answers) == 2:
        gap = float(np.max(np.abs(answers[0] - answers[1])))
        rows.append(("(search: device against host M x M steps, largest difference of theta and Z)", gap, NAN, NAN,
                     NAN, ""))  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--inducing", type=int, default=200)
    parser.add_argument("--stochastic-host", action="store_true", help="the host's M x M steps too, to compare")
    args = parser.parse_args()
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    for name, seconds, *_ in search_rows(torch, device, args.n, args.inducing, args.stochastic_host):
        print(f"| {name} | {seconds:.3g} |", flush=True)


if __name__ == "__main__":
    main()
