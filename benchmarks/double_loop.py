"""What double-loop EP costs where EP fails, and what its SQUAREM acceleration buys.

Problems: the paper's synthetic data with 20% of the labels flipped, noise-free-step
likelihood with ``eps = 0.2``, unit RBF of width 1 plus 1e-6 jitter: ``make_synthetic`` with
``n/2`` points per class for each of ``--sizes`` (EP converges on seed 0: the overhead), and
the synthetic study's own training sets (``synthetic_data``, n = 400) for each of
``--protocol-repeats`` (EP oscillates on most: the fallback's cost).  Contenders: EP, damped EP (0.5, tolerance 5e-4),
double-loop EP with and without acceleration, and ``rule="auto"``, each with at most 200
sweeps (outer iterations for double-loop EP).  BLAS pinned to one thread.  Printed: status,
sweeps, Newton steps, median wall time of ``--repeats`` runs::

    python benchmarks/double_loop.py --sizes 100 200 400 --protocol-repeats 0 1 --repeats 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from sklearn.gaussian_process.kernels import RBF
from threadpoolctl import threadpool_limits

from relaxep import EP, DoubleLoopEP, NoisyStep, infer
from relaxep.datasets import make_synthetic, synthetic_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 400])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--protocol-repeats", type=int, nargs="*", default=[0, 1])
    args = parser.parse_args()
    contenders = [
        ("EP", EP(), 1e-3),
        ("EP damped 0.5", EP(damping=0.5), 5e-4),
        ("double-loop EP", DoubleLoopEP(), 1e-3),
        ("double-loop EP, plain", DoubleLoopEP(accelerate=False), 1e-3),
        ("auto", "auto", 1e-3),
    ]
    problems = [(f"seed {args.seed}", n, make_synthetic(n // 2, 0.2, random_state=args.seed)[:2]) for n in args.sizes]
    problems += [(f"protocol repeat {r}", 400, synthetic_data(r, 0.2, 2)[:2]) for r in args.protocol_repeats]
    print("| data | n | method | status | sweeps | Newton steps | median time [s] |")
    print("|---|---|---|---|---|---|---|")
    with threadpool_limits(limits=1, user_api="blas"):
        for name, n, (X, y) in problems:
            K = RBF(1.0)(X) + 1e-6 * np.eye(len(y))
            for label, rule, tol in contenders:
                times = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    res = infer(K, y, NoisyStep(0.2), rule, max_sweeps=200, tol=tol)
                    times.append(time.perf_counter() - start)
                sweeps = sum(a[2] for a in res.attempts) if res.attempts else res.n_sweeps
                print(
                    f"| {name} | {n} | {label} | {res.status} | {sweeps} | {res.n_inner} "
                    f"| {statistics.median(times):.3g} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
