"""relaxep's schedules against GPy, pyGPs and scikit-learn on the same EP fits.

Set-up (a separate environment for the peers, documented in ``benchmarks/README.md``)::

    python3 -m venv .bench && .bench/bin/pip install -e . GPy==1.15.0 pyGPs==1.3.5
    .bench/bin/python benchmarks/speed.py --sizes 200 400 1000 2000 5000

Every contender fits the same 2-D label-noise problem (``make_synthetic``, 10% flips) with
the same fixed kernel, ``RBF(length_scale=0.7)`` of amplitude 1, and probit likelihood
(scikit-learn: Laplace with a logistic link, its only option).  BLAS is pinned to one
thread for everyone.  Reported: median wall time over ``--repeats`` runs, EP sweeps, peak
traced memory (``tracemalloc``, numpy allocations included), test error on 2000 clean
points, the ratio of each peer's time to relaxep's fastest paper-exact schedule, and the
largest absolute difference of latent training means from GPy's EP converged tightly
(epsilon 1e-10).  Peers are skipped above ``--peer-max-n`` (GPy took 22 s at n = 1000).
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from functools import partial
from pathlib import Path

import numpy as np
from sklearn.gaussian_process.kernels import RBF
from threadpoolctl import threadpool_limits

from relaxep import EP, Probit, infer
from relaxep.datasets import make_synthetic

LENGTH_SCALE = 0.7


def _measure(fn, repeats):
    """Median wall time of ``repeats`` plain runs, then one traced run for peak memory."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak, out


def relaxep_fit(X, y, X_test, schedule, tol=1e-6):
    kernel = RBF(LENGTH_SCALE)
    res = infer(kernel(X), y, Probit(), EP(), schedule=schedule, tol=tol, max_sweeps=100)
    p = np.clip(res.likelihood.predict(*res.predict_latent(kernel(X_test, X), np.ones(len(X_test)))), 0.0, 1.0)
    return res.mean, res.n_sweeps, p, res.status


def gpy_fit(X, y, X_test, epsilon=None):
    import GPy

    kwargs = {}
    if epsilon is not None:
        kwargs["inference_method"] = GPy.inference.latent_function_inference.EP(epsilon=epsilon)
    m = GPy.models.GPClassification(
        X, (y[:, None] > 0).astype(float), kernel=GPy.kern.RBF(2, variance=1.0, lengthscale=LENGTH_SCALE), **kwargs
    )
    mean, _ = m._raw_predict(X)
    p = m.predict(X_test)[0].ravel()
    return mean.ravel(), None, p, "?"


def pygps_fit(X, y, X_test):
    import pyGPs

    model = pyGPs.GPC()
    model.setData(X, y[:, None])
    model.setPrior(kernel=pyGPs.cov.RBF(log_ell=np.log(LENGTH_SCALE), log_sigma=0.0))
    model.getPosterior()
    out = model.predict(X_test)
    mean = model.predict(X)[2].ravel()
    return mean, None, (out[0].ravel() + 1) / 2, "?"


def sklearn_fit(X, y, X_test):
    from sklearn.gaussian_process import GaussianProcessClassifier

    clf = GaussianProcessClassifier(kernel=1.0 * RBF(LENGTH_SCALE), optimizer=None).fit(X, y)
    return None, None, clf.predict_proba(X_test)[:, 1], "laplace"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[200, 400, 1000, 2000, 5000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peer-max-n", type=int, default=1000)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "speed.md"))
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads, the same for every contender")
    args = parser.parse_args()

    lines = [
        "| n | contender | median time [s] | sweeps | peak memory [MB] | test error | time / relaxep blocked "
        "| max abs latent mean diff vs GPy EP (eps 1e-10) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    X_test, y_test, _ = make_synthetic(1000, 0.0, random_state=99)
    with threadpool_limits(limits=args.threads, user_api="blas"):
        for n in args.sizes:
            X, y, _ = make_synthetic(n // 2, 0.1, random_state=n)
            repeats = args.repeats if n <= 1000 else 1
            reference = None
            if n <= args.peer_max_n:
                try:
                    reference = gpy_fit(X, y, X_test, epsilon=1e-10)[0]
                except ImportError:
                    print("GPy not installed: skipping the GPy reference and contender")
            data = (X, y, X_test)
            contenders = {
                "relaxep sequential": partial(relaxep_fit, *data, "sequential"),
                "relaxep blocked": partial(relaxep_fit, *data, "blocked"),
                "relaxep parallel": partial(relaxep_fit, *data, "parallel"),
                "scikit-learn Laplace": partial(sklearn_fit, *data),
            }
            if n <= args.peer_max_n:
                contenders["GPy 1.15 EP"] = partial(gpy_fit, *data)
                contenders["pyGPs 1.3.5 EP"] = partial(pygps_fit, *data)
            if n > 2000:
                contenders.pop("relaxep sequential")
            rows = {}
            for name, fn in contenders.items():
                try:
                    t, peak, (mean, sweeps, p, _) = _measure(fn, repeats)
                except ImportError as exc:
                    print(f"{name}: not installed ({exc.name}); skipped")
                    continue
                err = float(np.mean(np.where(p >= 0.5, 1.0, -1.0) != y_test))
                diff = "" if reference is None or mean is None else f"{np.abs(mean - reference).max():.1e}"
                rows[name] = (t, sweeps, peak, err, diff)
                print(f"n={n} {name}: {t:.3f}s sweeps={sweeps} peak={peak / 2**20:.0f}MB err={err:.3f} diff={diff}")
            if reference is not None:
                tight = relaxep_fit(X, y, X_test, "blocked", tol=1e-10)[0]
                agreement = np.abs(tight - reference).max()
                print(f"n={n} relaxep (tol 1e-10) vs GPy EP (eps 1e-10): max abs latent mean diff {agreement:.1e}")
                rows["relaxep blocked, tol 1e-10 (agreement run)"] = (np.nan, None, 0, np.nan, f"{agreement:.1e}")
            base = rows.get("relaxep blocked", (np.nan,))[0]
            for name, (t, sweeps, peak, err, diff) in rows.items():
                if np.isnan(t):  # the agreement run: only its difference is meaningful
                    lines.append(f"| {n} | {name} | — |  | — | — | — | {diff} |")
                    continue
                lines.append(
                    f"| {n} | {name} | {t:.3f} | {sweeps if sweeps is not None else ''} | {peak / 2**20:.0f} "
                    f"| {err:.2%} | {t / base:.2f} | {diff} |"
                )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
