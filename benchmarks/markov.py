"""Markov (state-space) EP on a long binary series, beside inducing-point EP (M = 500) in the same run (issue 65).

The series (BayesNewton's classification set-up): ``x ~ U(0, 70)``,
``y = sign(12 sin(4 pi x) / (0.25 pi x + 1) + e)``, ``e ~ N(0, 1)``; 10 000 fresh test points, whose test NLPD of
the labels is reported beside the Bayes floor (the true latent's).  The kernel is ``C * Matern(nu=1.5)`` (or
``--nu``), probit likelihood; its hyperparameters are learned once by the Markov EP evidence on the first 10 000
rows (``learned at 10^4`` row) and then held fixed for every fixed-hyperparameter row, Markov and sparse alike.

Rows, each in its own process (``peak RSS`` is that row's own), BLAS pinned to ``--threads`` threads unless
the row says ``unpinned``:

``markov``
    ``GPClassifier(kernel, likelihood=Probit(), optimizer=None, representation="markov")``: the whole fit.
``sparse M=500``
    ``GPClassifier(kernel, likelihood=Probit(), optimizer=None, inducing_points=Z)``, ``Z`` 500 evenly spaced
    inputs on [0, 70] (the FITC prior, parallel EP).
``markov, learned``
    the kernel learned by L-BFGS-B on the Markov EP evidence (from ``C(1) * Matern(0.2)``: from a length scale of 1
    the search at 3000 rows ended at a flat function, NLPD log 2), then the fit.

Usage::

    python benchmarks/markov.py --sizes 10000 100000 1000000 --sparse-max 100000 > benchmarks/results/markov.md
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def series(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 70.0, n)
    f = 12.0 * np.sin(4.0 * np.pi * x) / (0.25 * np.pi * x + 1.0)
    return x[:, None], np.where(f + rng.standard_normal(n) > 0.0, 1, 0), f


def _nlpd(proba: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(np.where(y == 1, proba, 1.0 - proba), 1e-300, 1.0)
    return float(-np.mean(np.log(p)))


def one(spec: dict) -> dict:
    """One row, in this process."""
    import warnings

    from sklearn.gaussian_process.kernels import ConstantKernel as C
    from sklearn.gaussian_process.kernels import Matern

    from relaxep import GPClassifier, Probit

    warnings.simplefilter("ignore")
    X, y, _ = series(spec["n"], 0)
    X_test, y_test, f_test = series(10_000, 1)
    theta = spec.get("theta")
    kernel = C(1.0) * Matern(
        0.2, nu=spec["nu"]
    )  # (the learned rows start here: from 1.0 the 3000-row search found a flat f)
    if theta is not None:
        kernel.theta = np.asarray(theta)
    options = dict(likelihood=Probit(), optimizer=None if theta is not None else "fmin_l_bfgs_b")
    if spec["kind"] == "sparse":
        options["inducing_points"] = np.linspace(0.0, 70.0, spec["m"])[:, None]
        options["learn_inducing_points"] = False
    else:
        options["representation"] = "markov"
    start = time.perf_counter()
    clf = GPClassifier(kernel, **options).fit(X, y)
    fit = time.perf_counter() - start
    proba = clf.predict_proba(X_test)[:, 1]
    from scipy.special import ndtr

    return {
        **spec,
        "fit_s": fit,
        "sweeps": int(clf.result_.n_sweeps),
        "status": clf.result_.status,
        "nlpd": _nlpd(proba, y_test),
        "bayes_nlpd": _nlpd(ndtr(f_test), y_test),
        "error": float(np.mean((proba > 0.5) != (y_test == 1))),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "kernel": repr(clf.kernel_),
        "theta": clf.kernel_.theta.tolist(),
        "representation": clf.representation_,
    }


def run(spec: dict, threads: int | None) -> dict:
    env = dict(os.environ)
    if threads is not None:
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[name] = str(threads)
    out = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps(spec)], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        return {**spec, "status": f"failed: {out.stderr.strip().splitlines()[-1] if out.stderr else out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--sparse-max", type=int, default=100_000, help="largest n for the M = 500 sparse rows")
    parser.add_argument("--learned", type=int, nargs="*", default=[100_000], help="sizes of the learned rows")
    parser.add_argument("--nu", type=float, default=1.5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(json.loads(args.one))))
        return
    learned = run({"kind": "markov", "n": 10_000, "nu": args.nu, "theta": None}, args.threads)
    theta = learned["theta"]
    rows = [dict(learned, row="markov, learned at 10^4 (the fixed rows' kernel)")]
    for n in args.sizes:
        rows.append(dict(run({"kind": "markov", "n": n, "nu": args.nu, "theta": theta}, args.threads), row="markov"))
        rows.append(dict(run({"kind": "markov", "n": n, "nu": args.nu, "theta": theta}, None), row="markov, unpinned"))
        if n <= args.sparse_max:
            spec = {"kind": "sparse", "n": n, "nu": args.nu, "theta": theta, "m": 500}
            rows.append(dict(run(spec, args.threads), row="sparse M=500 (FITC)"))
    for n in args.learned:
        rows.append(
            dict(run({"kind": "markov", "n": n, "nu": args.nu, "theta": None}, args.threads), row="markov, learned")
        )
    print(f"# Markov EP on a long binary series (benchmarks/markov.py, {time.strftime('%Y-%m-%d')})\n")
    print(
        f"Kernel C * Matern(nu={args.nu}) at {learned.get('kernel')} (learned on 10^4 rows by the Markov EP evidence), "
        f"probit; BLAS threads {args.threads} unless unpinned; 10 000 test points.\n"
    )
    print("| n | row | fit [s] | sweeps | status | test NLPD | Bayes NLPD | test error | peak RSS [MB] |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "fit_s" not in r:
            print(f"| {r['n']} | {r['row']} | - | - | {r['status']} | - | - | - | - |")
            continue
        print(
            f"| {r['n']} | {r['row']} | {r['fit_s']:.2f} | {r['sweeps']} | {r['status']} | {r['nlpd']:.4f} | "
            f"{r['bayes_nlpd']:.4f} | {r['error']:.4f} | {r['peak_rss_mb']:.0f} |"
        )


if __name__ == "__main__":
    main()
