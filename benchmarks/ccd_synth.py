"""Integration over the hyperparameters on Ripley's synth (issue 54): the MAP, the central composite design (CCD) and
the grid of ``GPClassifier(ConstantKernel(1.0) * RBF([1.0, 1.0]), Probit(), integrate=...)``, beside GPstuff's
published EP figures and a brute-force grid over the three log-hyperparameters.

``python benchmarks/ccd_synth.py --out benchmarks/results/ccd_synth.md``

Data: ``relaxep.datasets.load_synth("train")`` (250 rows) to fit, ``load_synth("test")`` (1000 rows) to test, the
inputs raw (as GPstuff's ``demo_classific`` uses them).  Two priors on the log-hyperparameters
:math:`\\theta = (\\log \\sigma_f^2, \\log \\ell_1, \\log \\ell_2)`:

* ``auto``: relaxep's default (half-Student-t, 4 degrees of freedom, on each length-scale in units of the feature's
  sd times :math:`\\sqrt 2`, and on :math:`\\sigma_f` in units of 1);
* ``GPstuff``: the priors of GPstuff's ``demo_classific``, set explicitly: ``prior_t()`` (Student-t, 4 degrees of
  freedom, scale 1, on each length-scale: ``HalfStudentT(4, 1.0)``) and ``prior_sqrtunif()`` (uniform on
  :math:`\\sigma_f`: ``Uniform(sqrt=True)``).

Per fit: wall time (median of ``--repeats`` fits with BLAS pinned to one thread by threadpoolctl, and of as many
unpinned; the grid's from ``--grid-repeats``), the number of points of the mixture, the test log predictive density
per row (:math:`\\frac1m\\sum \\log p(y_* | x_*, y)`, ``predict_log_proba``), the test error, EP's leave-one-out
:math:`\\mathrm{elpd}_{loo}/n` (``loo()``) and its difference to GPstuff's EP figures on the same data (Vanhatalo et
al. 2013, JMLR 14, Table: LOO -0.2774 per row with EP over a grid of the hyperparameters, -0.2737 at the MAP).

The reference: :func:`relaxep.hyper.reference.grid_reference` of :math:`\\log p(y|\\theta) + \\log p(\\theta)` (the
estimator's ``log_marginal_likelihood(theta)``, EP from the MAP's sites to ``tol=1e-4``, plus the prior the search
climbed) on ``--ref-points`` cells per axis over the MAP :math:`\\pm 4` sd of the CCD's mixture, whose posterior
mean and sd of each log-hyperparameter are compared with the CCD's (``weighted_moments`` of ``hyper_samples_``).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import warnings
from typing import Any

import numpy as np
import scipy
import sklearn
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from threadpoolctl import threadpool_limits

from relaxep import GPClassifier, Probit
from relaxep.datasets import load_synth
from relaxep.hyper import HalfStudentT, Uniform, weighted_moments
from relaxep.hyper.reference import grid_reference

#: GPstuff's EP figures on synth (Vanhatalo et al. 2013): LOO per row, EP + grid over theta and at the MAP
GPSTUFF_LOO = {"grid": -0.2774, "map": -0.2737}
PRIORS: dict[str, Any] = {
    "auto": "auto",
    "GPstuff": {"length_scale": HalfStudentT(4.0, 1.0), "constant_value": Uniform(sqrt=True)},
}
NAMES = ("log sigma_f^2", "log l_1", "log l_2")


def make(prior: Any, integrate: str) -> GPClassifier:
    return GPClassifier(ConstantKernel(1.0) * RBF([1.0, 1.0]), Probit(), integrate=integrate, prior=prior)


def timed_fit(prior: Any, integrate: str, X: np.ndarray, y: np.ndarray) -> tuple[GPClassifier, float]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = make(prior, integrate).fit(X, y)
    return est, time.perf_counter() - start


def median_time(prior: Any, integrate: str, X: np.ndarray, y: np.ndarray, repeats: int, pinned: bool) -> float:
    times = []
    for _ in range(repeats):
        if pinned:
            with threadpool_limits(1):
                times.append(timed_fit(prior, integrate, X, y)[1])
        else:
            times.append(timed_fit(prior, integrate, X, y)[1])
    return float(np.median(times))


def scores(est: GPClassifier, Xt: np.ndarray, yt: np.ndarray, n: int) -> dict[str, float]:
    log_proba = est.predict_log_proba(Xt)
    return {
        "lpd": float(np.mean(log_proba[np.arange(yt.size), yt])),
        "error": float(np.mean(est.predict(Xt) != yt)),
        "loo": float(est.loo().elpd_loo / n),
    }


def reference(est_map: GPClassifier, mean: np.ndarray, sd: np.ndarray, points: int) -> tuple[Any, float, float]:
    """The brute-force grid (module docstring) over ``mean`` +- 4 ``sd``; its time, and its log density at the MAP."""
    theta_map = np.array(est_map.kernel_.theta)
    centre = theta_map

    def log_density(theta: np.ndarray) -> float:
        try:
            value = float(est_map.log_marginal_likelihood(theta))
        except Exception:  # (a diverged EP run: no mass there)
            return -np.inf
        return value + est_map.log_prior(theta) if np.isfinite(value) else -np.inf

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = grid_reference(log_density, centre - 4 * sd, centre + 4 * sd, points)
        at_map = log_density(theta_map)
    return ref, time.perf_counter() - start, at_map


def fmt(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--grid-repeats", type=int, default=1)
    parser.add_argument("--ref-points", type=int, default=11)
    parser.add_argument("--no-reference", action="store_true", help="the timings and scores alone")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    X, y = load_synth("train")
    Xt, yt = load_synth("test")
    n = y.size
    lines = [
        "# Integration over the hyperparameters on Ripley's synth (issue 54)",
        "",
        "`python benchmarks/ccd_synth.py " + " ".join(sys.argv[1:] if argv is None else argv) + "`",
        "",
        f"Machine: {platform.platform()}, {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, scikit-learn "
        f"{sklearn.__version__}; 2 cores shared with other jobs (timings noisy: read the ratios).",
        "",
        "`GPClassifier(ConstantKernel(1.0) * RBF([1.0, 1.0]), Probit(), integrate=..., prior=...)` on synth.tr "
        "(250 rows, raw inputs), tested on synth.te (1000 rows). Times: median of "
        f"{args.repeats} fits with BLAS pinned to one thread (threadpoolctl) and of {args.repeats} unpinned "
        f"(`grid`: {args.grid_repeats} each); ratio: pinned time / the MAP's pinned time. `test lpd`: mean test "
        "log predictive density per row; `LOO/n`: `loo().elpd_loo / 250`; `- GPstuff`: minus GPstuff's EP "
        f"figure (grid over theta {GPSTUFF_LOO['grid']}, MAP {GPSTUFF_LOO['map']}; Vanhatalo et al. 2013).",
        "",
        "| prior | integrate | points | fit s (1 thread) | fit s (unpinned) | / MAP | test lpd | test error "
        "| LOO/n | - GPstuff |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    moments: list[str] = []
    for label, prior in PRIORS.items():
        fitted: dict[str, GPClassifier] = {}
        times: dict[str, float] = {}
        for integrate in ("map", "ccd", "grid"):
            reps = args.grid_repeats if integrate == "grid" else args.repeats
            with threadpool_limits(1):
                est, first = timed_fit(prior, integrate, X, y)
            fitted[integrate] = est
            pinned = float(np.median([first] + [median_time(prior, integrate, X, y, 1, True) for _ in range(reps - 1)]))
            unpinned = median_time(prior, integrate, X, y, reps, False)
            times[integrate] = pinned
            s = scores(est, Xt, yt, n)
            k = len(est.hyper_samples_.weights) if integrate != "map" else 1
            gap = s["loo"] - GPSTUFF_LOO["map" if integrate == "map" else "grid"]
            lines.append(
                f"| {label} | {integrate} | {k} | {pinned:.2f} | {unpinned:.2f} | {pinned / times['map']:.1f} | "
                f"{fmt(s['lpd'])} | {fmt(s['error'], 3)} | {fmt(s['loo'])} | {gap:+.4f} |"
            )
            print(lines[-1], flush=True)
        samples = fitted["ccd"].hyper_samples_
        mean, sd = weighted_moments(samples.points, samples.weights)
        grid_mean, grid_sd = weighted_moments(
            fitted["grid"].hyper_samples_.points, fitted["grid"].hyper_samples_.weights
        )
        if args.no_reference:
            continue
        ref, seconds, at_map = reference(fitted["map"], mean, sd, args.ref_points)
        moments.append(
            f"\n**Prior {label}**: MAP theta {np.round(fitted['map'].kernel_.theta, 3).tolist()}; reference grid "
            f"{args.ref_points}^3 = {args.ref_points**3} points over the MAP +- 4 CCD sd, {seconds:.0f} s; its log "
            f"density at the MAP {at_map:.3f}, the CCD's {samples.log_posterior[0]:.3f}.\n\n"
            "| log-hyperparameter | CCD mean | CCD sd | integrate='grid' mean | its sd | reference mean "
            "| reference sd |\n|---|---|---|---|---|---|---|"
        )
        for j, name in enumerate(NAMES):
            moments.append(
                f"| {name} | {fmt(mean[j], 3)} | {fmt(sd[j], 3)} | {fmt(grid_mean[j], 3)} | {fmt(grid_sd[j], 3)} "
                f"| {fmt(ref.mean[j], 3)} | {fmt(ref.sd[j], 3)} |"
            )
        print("\n".join(moments[-4:]), flush=True)
    text = "\n".join(lines + moments) + "\n"
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
