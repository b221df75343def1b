"""The default classifier at the sizes where ``optimizer="auto"`` learns a sparse model, as a new user fits it.

``python benchmarks/defaults_at_scale.py [--out FILE] [--seeds 0 1 ... 7]``

Rows: ``GPClassifier(inducing_points=100, random_state=0)`` with only its defaults (the label-noise
likelihood, ``C(1.0) * RBF(1.0)`` learned, ``optimizer="auto"``) and the same with ``Probit()``, on

* ``make_classification(25000, 8, random_state=s)`` for each seed, all 25 000 rows (the case that raised
  ``LinAlgError`` for seeds 0 and 1 before the tied site's step was bounded), scored on its training rows;
  and its first 15 000 rows (below the old switch to the stochastic search), scored on the other 10 000;
* the d = 8 problem of ``benchmarks/sparse.py`` (a random-feature GP latent, probit labels) at 25 000 rows,
  scored on its 20 000 test rows.

Each cell prints the search ``"auto"`` chose, the fit's time, the learned amplitude (in standard deviations),
the EP status, the test error and the test negative log predictive probability.  Every fit runs in this
process with nothing pinned (the threads a user gets).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sparse import problem, scores

from relaxep import GPClassifier, Probit
from relaxep.estimators._plan import SparseFit


def cell(name: str, X, y, Xt, yt, likelihood) -> dict:
    """One default fit (``likelihood`` None: the default) and its scores; an exception is a row, not a crash."""
    clf = GPClassifier(likelihood=likelihood, inducing_points=100, random_state=0)
    search = SparseFit.plan(
        X, inducing_points=100, inducing_init="kmeans", learn_inducing_points=True, optimizer="auto",
        optimizer_subset=None, optimizer_maxiter=None, n_restarts=0, random_state=0, n_learned=2,
    ).method  # fmt: skip
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            clf.fit(X, y)
    except Exception as exc:  # the row records what a user met
        return {"name": name, "search": search, "time": time.perf_counter() - t0, "error": f"{type(exc).__name__}"}
    seconds = time.perf_counter() - t0
    p1 = clf.predict_proba(Xt)[:, 1]
    err, nll = scores(p1, np.where(yt > 0, 1.0, -1.0))
    return {
        "name": name, "search": search, "time": seconds, "amp": float(np.sqrt(clf.kernel_.k1.constant_value)),
        "status": f"{clf.result_.status} ({clf.result_.n_sweeps})", "err": err, "nll": nll,
        "warnings": len(caught),
    }  # fmt: skip


def row(r: dict) -> str:
    if "error" in r:
        return f"| {r['name']} | {r['search']} | {r['time']:.1f} | | **{r['error']}** | | | |"
    return (
        f"| {r['name']} | {r['search']} | {r['time']:.1f} | {r['amp']:.2f} | {r['status']} | {r['err']:.4f} | "
        f"{r['nll']:.4f} | {r['warnings']} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
    parser.add_argument("--short", type=int, nargs="+", default=[0, 1], help="seeds also fitted on 15 000 rows")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    lines = [
        "| problem | search (auto) | fit (s) | amplitude (sd) | status (sweeps) | test error | test NLL | warnings |",
        "|---|---|---:|---:|---|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    cases = []
    for s in args.seeds:
        X, y = make_classification(25000, 8, random_state=s)
        cases.append((f"seed {s}, 25 000 rows (scored on them)", X, y, X, y))
        if s in args.short:
            cases.append((f"seed {s}, 15 000 rows", X[:15000], y[:15000], X[15000:], y[15000:]))
    X, y, Xt, yt, _ = problem(25000)
    cases.append(("sparse.py d = 8, 25 000 rows", X, y, Xt, yt))
    for name, X, y, Xt, yt in cases:
        for label, likelihood in (("default", None), ("Probit()", Probit())):
            r = cell(f"{name}, {label}", X, y, Xt, yt, likelihood)
            lines.append(row(r))
            print(lines[-1], flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
