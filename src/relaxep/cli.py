"""The ``relaxep`` command line: ``relaxep demo`` and ``relaxep reproduce``.

Errors are one line on stderr (``relaxep: error: ...``) with exit status 2; ``--debug`` shows
the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["demo", "main"]


def demo(
    n_train: int = 400, n_test: int = 4000, flip_rate: float = 0.2, seed: int = 0, max_sweeps: int = 120
) -> list[dict]:
    """Fit EP, Power EP and REP on a generated label-noise problem; print and return a table."""
    from sklearn.gaussian_process.kernels import RBF

    from relaxep import EP, NoisyStep, PowerEP, RelaxedEP, infer
    from relaxep.datasets import make_synthetic
    from relaxep.experiments.methods import JITTER, binary_proba, error_rate

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
        err = error_rate(binary_proba(res, K_star, k_diag), y_test)
        rows.append(dict(method=name, status=res.status, sweeps=res.n_sweeps, time=elapsed, error=err))
        print(f"{name:<18} {res.status:<11} {res.n_sweeps:>6} {res.n_skipped:>7} {elapsed:>8.2f} {err:>10.3%}")
    return rows


def _number(text: str, convert: type, kind: str, valid: Callable[[float], bool], bound: str) -> Any:
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
    if not valid(value):
        raise argparse.ArgumentTypeError(f"{bound}, got {value}")
    return value


def _positive_int(text: str) -> int:
    return _number(text, int, "a whole number", lambda v: v >= 1, "must be at least 1")


def _n_jobs(text: str) -> int:
    """joblib's and scikit-learn's convention: ``k >= 1`` processes, ``-1`` all CPUs, ``-k`` all but ``k - 1``."""
    value = _number(text, int, "a whole number", lambda v: v != 0, "must be at least 1, or -1 for all CPUs")
    if value < 0:
        import joblib

        value = max(1, joblib.cpu_count() + 1 + value)
    return value


def _flip_rate(text: str) -> float:
    return _number(text, float, "a number", lambda v: 0.0 <= v < 0.5, "must lie in [0, 0.5)")


_DEMO_EXAMPLES = """examples:
  relaxep demo                                  400 training points, 20% flipped labels
  relaxep demo --n-train 1000 --flip-rate 0.1   a larger, cleaner problem
"""

_REPRODUCE_EXAMPLES = """examples:
  relaxep reproduce toy --out results                   the toy study (about a minute)
  relaxep reproduce all --quick --jobs 2 --out quick    every paper study, quick (a few minutes)
  relaxep reproduce uci --data-home ~/data/uci          the UCI study on your own copies of the data
  relaxep reproduce regression --quick --out reg       robust GP regression, quick (a few minutes)
  relaxep reproduce ordinal --out ord                   ordinal EP on ORCA's 30 partitions
  relaxep reproduce counts --quick --out counts         Poisson and negative-binomial EP
  relaxep reproduce constrained_bo --quick --out bo     BO with hidden failures and preferences (pip install botorch)
  relaxep reproduce likelihoods --out docs/likelihoods binomial, beta, zero-inflated/hurdle, quantile GPs vs statsmodels
  relaxep reproduce markov --out docs/markov           state-space EP on coal mining and lynx vs the dense fit
  relaxep reproduce monotone --out docs/monotone       monotone GPs: Broffitt's mortality, a psychometric function
  relaxep reproduce robustness --scheduler tcp://host:8786 --out rob
                                                        on an existing Dask cluster (pip install "relaxep[dask]")

A killed run resumes where it stopped: finished cells are cached in OUT/cache/.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relaxep",
        description="EP, Power EP and Relaxed EP for Gaussian process classification: demos and the paper's studies.",
        epilog="Run 'relaxep COMMAND --help' for each command's options and examples.",
    )
    parser.add_argument("--debug", action="store_true", help="show the full traceback when a command fails")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p_demo = sub.add_parser(
        "demo",
        help="fit EP, Power EP and REP on a generated label-noise problem (offline)",
        description="Fit EP, damped EP, Power EP and REP on one generated label-noise problem and print a table.",
        epilog=_DEMO_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_demo.add_argument("--n-train", type=_positive_int, default=400, help="training points (default: 400)")
    p_demo.add_argument("--n-test", type=_positive_int, default=4000, help="clean test points (default: 4000)")
    p_demo.add_argument("--flip-rate", type=_flip_rate, default=0.2, help="fraction of flipped labels (default: 0.2)")
    p_demo.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p_rep = sub.add_parser(
        "reproduce",
        help="rerun the paper's studies; writes CSV tables, PNG figures and OUT/report.md (resumable)",
        description="Rerun the paper's studies (toy, synthetic, uci; 'all' is the three) or the robustness, "
        "multi-class, regression, ordinal and count studies, and write CSV tables, PNG figures and OUT/report.md "
        "with the paper's claims beside what was measured.",
        epilog=_REPRODUCE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from relaxep.experiments import STUDIES  # (the registry: no study's dependencies are imported with it)

    p_rep.add_argument("study", choices=[*STUDIES, "all"])
    p_rep.add_argument("--out", default="results", help="output folder (default: results)")
    p_rep.add_argument("--quick", action="store_true", help="fewer repeats and splits: a few minutes on 2 cores")
    p_rep.add_argument(
        "--jobs", type=_n_jobs, default=1, help="parallel worker processes (joblib; -1: all CPUs; default 1)"
    )
    p_rep.add_argument(
        "--data-home", default=None, help="folder with your own UCI CSVs (default: the copies shipped with relaxep)"
    )
    p_rep.add_argument("--scheduler", default=None, help="address of a Dask scheduler to run the cells on")
    return parser


STUDIES_EXTRA = 'pip install "relaxep[studies]"'


def _require_studies_extra() -> None:
    """``ImportError`` naming the extra when the studies' dependencies (matplotlib, tqdm) are missing."""
    for name in ("matplotlib", "tqdm"):
        try:
            __import__(name)
        except ImportError as exc:
            raise ImportError(
                f"relaxep reproduce needs {name}, which the library alone does not: {STUDIES_EXTRA}"
            ) from exc


def _reproduce(args: argparse.Namespace) -> None:
    _require_studies_extra()
    from relaxep.experiments import PAPER_STUDIES
    from relaxep.experiments.reproduce import reproduce

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} is a file, not a folder")
    studies = PAPER_STUDIES if args.study == "all" else (args.study,)
    # only the UCI study reads --data-home; the others use data generated or shipped inside the package
    if args.data_home is not None and "uci" in studies and not Path(args.data_home).is_dir():
        raise FileNotFoundError(f"--data-home {args.data_home} is not a folder")
    try:
        (out / "figures").mkdir(parents=True, exist_ok=True)
        probe = out / ".relaxep-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise PermissionError(f"cannot write to --out {out}: {exc.strerror or exc}") from exc
    report = reproduce(
        studies, out, quick=args.quick, n_jobs=args.jobs, data_home=args.data_home, scheduler=args.scheduler
    )
    print(f"report: {report}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``relaxep`` console script: 0 on success, 2 on an error (one line on stderr)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "demo":
            demo(args.n_train, args.n_test, args.flip_rate, args.seed)
        else:
            _reproduce(args)
    except KeyboardInterrupt:
        print("relaxep: interrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError, TypeError, ImportError) as exc:
        if args.debug:
            raise
        print(f"relaxep: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
