"""The ``relaxep`` command line."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np

__all__ = ["demo", "main"]


def demo(
    n_train: int = 400, n_test: int = 4000, flip_rate: float = 0.2, seed: int = 0, max_sweeps: int = 120
) -> list[dict]:
    """Fit EP, Power EP and REP on a generated label-noise problem; print and return a table."""
    from sklearn.gaussian_process.kernels import RBF

    from relaxep import EP, NoisyStep, PowerEP, RelaxedEP, infer
    from relaxep.datasets import make_synthetic
    from relaxep.experiments.methods import JITTER, error_rate

    X, y, _ = make_synthetic(n_train // 2, flip_rate, random_state=seed)
    X_test, y_test, _ = make_synthetic(n_test // 2, 0.0, random_state=seed + 1)
    kernel = RBF(length_scale=0.7)
    K = kernel(X) + JITTER * np.eye(len(X))
    K_star = kernel(X_test, X)
    k_diag = kernel.diag(X_test) + JITTER
    likelihood = NoisyStep(eps=flip_rate)
    rules = {
        "EP": EP(),
        "EP damped (0.5)": EP(damping=0.5),
        "Power EP (u=0.8)": PowerEP(u=0.8),
        "REP (c=10)": RelaxedEP(c=10.0),
        "REP (c=0.1)": RelaxedEP(c=0.1),
    }
    print(
        f"relaxep demo: {len(y)} training points, {flip_rate:.0%} labels flipped, eps={flip_rate}, "
        f"RBF(length_scale=0.7) amplitude 1 + 1e-6 jitter, {len(y_test)} clean test points"
    )
    header = f"{'method':<18} {'status':<11} {'sweeps':>6} {'skipped':>7} {'time [s]':>8} {'test error':>10}"
    print(header)
    print("-" * len(header))
    rows = []
    for name, rule in rules.items():
        start = time.perf_counter()
        res = infer(K, y, likelihood, rule, max_sweeps=max_sweeps, tol=1e-3)
        elapsed = time.perf_counter() - start
        err = error_rate(res.predict_proba(K_star, k_diag), y_test)
        rows.append(dict(method=name, status=res.status, sweeps=res.n_sweeps, time=elapsed, error=err))
        print(f"{name:<18} {res.status:<11} {res.n_sweeps:>6} {res.n_skipped:>7} {elapsed:>8.2f} {err:>10.3%}")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``relaxep`` console script."""
    parser = argparse.ArgumentParser(prog="relaxep", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="fit EP, Power EP and REP on a generated label-noise problem (offline)")
    p_demo.add_argument("--n-train", type=int, default=400)
    p_demo.add_argument("--n-test", type=int, default=4000)
    p_demo.add_argument("--flip-rate", type=float, default=0.2)
    p_demo.add_argument("--seed", type=int, default=0)
    p_rep = sub.add_parser(
        "reproduce",
        help="rerun the paper's studies; writes CSV tables, PNG figures and DIR/report.md (resumable)",
    )
    p_rep.add_argument("study", choices=["toy", "synthetic", "uci", "all", "robustness", "multiclass"])
    p_rep.add_argument("--out", default="results", help="output folder (default: results)")
    p_rep.add_argument("--quick", action="store_true", help="fewer repeats and splits: a few minutes on 2 cores")
    p_rep.add_argument("--jobs", type=int, default=1, help="parallel worker processes (joblib)")
    p_rep.add_argument("--data-home", default=None, help="folder with the UCI CSVs (else $RELAXEP_DATA, then cache)")
    p_rep.add_argument("--scheduler", default=None, help="address of a Dask scheduler to run the cells on")
    args = parser.parse_args(argv)
    if args.command == "demo":
        demo(args.n_train, args.n_test, args.flip_rate, args.seed)
    elif args.command == "reproduce":
        from relaxep.experiments import PAPER_STUDIES
        from relaxep.experiments.reproduce import reproduce

        studies = PAPER_STUDIES if args.study == "all" else (args.study,)
        report = reproduce(
            studies, args.out, quick=args.quick, n_jobs=args.jobs, data_home=args.data_home, scheduler=args.scheduler
        )
        print(f"report: {report}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
