"""Issue #6: a suite of label-noise problems that make plain EP fail, and the remedies.

Each problem is drawn from a seed over a grid (input dimension, n, flip rate, eps,
length-scale, kernel amplitude, latent noise, duplicated inputs, far outliers), plus
problems of the paper's synthetic protocol (Section 7.2 data, 200 points per class,
``eps`` = flip rate, unit-amplitude RBF; fixed widths instead of the study's
cross-validated one).  Small problems get a ground truth by elliptical slice sampling
(:mod:`relaxep.mcmc`, 4 chains on the ellipses of ``rule="auto"``'s Gaussian
approximation, which leaves the target exact; split-R-hat recorded).  Every method runs on
every problem; a row records status, sweeps, wall time, test error and, where MCMC exists,
the error of the posterior mean and marginal standard deviations against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import RBF

from relaxep.experiments._runner import Cell, run_cells
from relaxep.experiments.methods import build_rule, method
from relaxep.experiments.synthetic import synthetic_data
from relaxep.inference import InferenceResult, infer
from relaxep.likelihoods import Likelihood, NoisyStep
from relaxep.mcmc import elliptical_slice
from relaxep.rules import RelaxedEP

__all__ = ["ROBUST_METHODS", "make_problem", "problem_grid", "rep_by_evidence", "run_robustness", "synthetic_problems"]

#: the remedies compared (the tolerance of a damped method is multiplied by its step)
ROBUST_METHODS: list[dict[str, Any]] = [
    method("EP", "EP"),
    method("EP damped 0.5", "EP", damping=0.5),
    method("PEP u=0.8", "PowerEP", u=0.8),
    method("FEP a=0.5 damped 0.5", "FractionalEP", alpha=0.5, damping=0.5),
    method("REP c=10", "RelaxedEP", c=10.0),
    method("REP c=0.1", "RelaxedEP", c=0.1),
    method("REP scale-free c=0.1", "RelaxedEP", c=0.1, penalty="scale_free"),
    method("REP c=0.1 damped 0.5", "RelaxedEP", c=0.1, damping=0.5),
    method("double-loop EP", "DoubleLoopEP"),
    {"label": "REP c by evidence", "rule": "rep-evidence", "params": {"c_grid": [0.1, 1.0, 10.0, 100.0]}},
    {"label": "auto", "rule": "auto", "params": {}},
]


def problem_grid(n_problems: int, seed: int = 6, max_n: int = 400) -> list[dict[str, Any]]:
    """``n_problems`` problem specifications drawn from the grid with a fixed seed."""
    rng = np.random.default_rng(seed)
    sizes = [n for n in (50, 100, 200, 400, 800) if n <= max_n]
    specs = []
    for k in range(n_problems):
        specs.append(
            dict(
                problem=k,
                set="suite",
                dim=int(rng.choice([1, 2])),
                n=int(rng.choice(sizes)),
                flip=float(rng.choice([0.05, 0.1, 0.2, 0.3])),
                eps=float(rng.choice([0.01, 0.05, 0.1, 0.2])),
                length_scale=float(rng.choice([0.1, 0.3, 1.0])),
                amplitude=float(rng.choice([0.1, 1.0, 10.0, 100.0])),
                latent_noise=float(rng.choice([0.0, 0.01])),
                duplicates=bool(rng.random() < 0.25),
                outliers=bool(rng.random() < 0.25),
            )
        )
    return specs


def synthetic_problems(n_repeats: int, rates=(0.1, 0.2), length_scales=(0.5, 1.0)) -> list[dict[str, Any]]:
    """Problems of the paper's synthetic protocol, numbered from 1000 (``set="synthetic"``)."""
    specs = []
    for r in range(n_repeats):
        for rate in rates:
            for ls in length_scales:
                specs.append(
                    dict(
                        problem=1000 + len(specs),
                        set="synthetic",
                        repeat=r,
                        dim=2,
                        n=400,
                        flip=rate,
                        eps=rate,
                        length_scale=ls,
                        amplitude=1.0,
                        latent_noise=0.0,
                        duplicates=False,
                        outliers=False,
                    )
                )
    return specs


def make_problem(spec: dict[str, Any], n_test: int = 1000):
    """Inputs, labels, kernel matrices and likelihood of one problem (deterministic in ``spec``)."""
    if spec.get("set") == "synthetic":
        X, y, X_test, y_test = synthetic_data(spec["repeat"], spec["flip"], 2 * n_test)
        kernel = RBF(spec["length_scale"])
        jitter = 1e-6
        K = kernel(X) + jitter * np.eye(len(y))
        k_diag = np.full(len(y_test), 1.0 + jitter)
        return K, y, kernel(X_test, X), k_diag, y_test, NoisyStep(spec["eps"])
    rng = np.random.default_rng([spec["problem"], 11])
    n, d = spec["n"], spec["dim"]

    def draw(m):
        X = rng.uniform(-1.0, 1.0, size=(m, d))
        f = np.sin(3.0 * X[:, 0]) + (X[:, 1] if d > 1 else 0.0)
        return X, np.where(f >= 0, 1.0, -1.0)

    X, y = draw(n)
    y[rng.random(n) < spec["flip"]] *= -1.0
    if spec["duplicates"]:  # a fifth of the inputs repeated, half of the copies with the other label
        k = n // 5
        src = rng.choice(n, k, replace=False)
        X[-k:] = X[src]
        y[-k:] = np.where(rng.random(k) < 0.5, -y[src], y[src])
    if spec["outliers"]:  # a few far points with the wrong label for their side
        k = max(2, n // 50)
        X[:k] = 5.0 * np.sign(rng.standard_normal((k, d)))
        y[:k] = -np.where(np.sin(3.0 * X[:k, 0]) + (X[:k, 1] if d > 1 else 0.0) >= 0, 1.0, -1.0)
    if not (np.any(y > 0) and np.any(y < 0)):
        y[0] = -y[0]
    X_test, y_test = draw(n_test)
    amp = spec["amplitude"]
    kernel = RBF(spec["length_scale"])
    noise = amp * (spec["latent_noise"] + 1e-6)
    K = amp * kernel(X) + noise * np.eye(n)
    return K, y, amp * kernel(X_test, X), np.full(n_test, amp + noise), y_test, NoisyStep(spec["eps"])


def _mcmc_cell(spec: dict[str, Any], n_samples: int) -> dict[str, Any]:
    K, y, _, _, _, lik = make_problem(spec)
    guide = infer(K, y, lik, "auto")  # only shapes the proposals; the target is exact
    res = elliptical_slice(
        K,
        y,
        lik,
        n_samples=n_samples,
        n_burn=n_samples // 4,
        n_chains=4,
        random_state=0,
        approx=(guide.mean, guide.cov),
    )
    return {"problem": spec["problem"], "rhat": res.rhat, "mean": res.mean.tolist(), "var": res.var.tolist()}


def rep_by_evidence(
    K: np.ndarray,
    y: np.ndarray,
    likelihood: Likelihood,
    c_grid: Sequence[float],
    max_sweeps: int,
    tol: float = 1e-3,
) -> InferenceResult:
    r"""Relaxed EP with ``c`` chosen per problem: the converged run of highest EP evidence.

    Every ``c`` in ``c_grid`` is run; among the converged runs the one with the largest
    :math:`\log Z_{EP}` is returned (if none converged, the one with the smallest final
    ``R``), with every run listed in ``attempts``.
    """
    runs = [infer(K, y, likelihood, RelaxedEP(c=float(c)), max_sweeps=max_sweeps, tol=tol) for c in c_grid]
    converged = [r for r in runs if r.converged and np.isfinite(r.log_evidence)]
    best = max(converged, key=lambda r: r.log_evidence) if converged else min(runs, key=lambda r: r.trace[-1])
    return replace(best, attempts=tuple((repr(r.rule), r.status, r.n_sweeps) for r in runs))


def _fit_cell(spec: dict[str, Any], m: dict[str, Any], max_sweeps: int, truth: dict | None) -> dict[str, Any]:
    import time

    K, y, K_star, k_diag, y_test, lik = make_problem(spec)
    start = time.perf_counter()
    if m["rule"] == "rep-evidence":
        res = rep_by_evidence(K, y, lik, m["params"]["c_grid"], max_sweeps)
    else:
        rule = "auto" if m["rule"] == "auto" else build_rule(m)
        tol = 1e-3 if m["rule"] == "auto" else 1e-3 * rule.damping
        res = infer(K, y, lik, rule, max_sweeps=max_sweeps, tol=tol)
    elapsed = time.perf_counter() - start
    proba = res.predict_proba(K_star, k_diag)
    row = dict(spec)
    row.update(
        method=m["label"],
        status=res.status,
        converged=res.converged,
        nan=bool(not np.all(np.isfinite(res.mean))),
        sweeps=sum(a[2] for a in res.attempts)
        if m["rule"] == "rep-evidence"
        else int(res.n_sweeps) + sum(a[2] for a in res.attempts[:-1]),
        time_s=elapsed,
        test_error=float(np.mean(np.where(proba >= 0.5, 1.0, -1.0) != y_test)),
        stage=repr(res.rule) if res.attempts else m["label"],
        inner_newton=int(res.n_inner),
    )
    if truth is not None:
        sd = np.sqrt(np.diag(res.cov))
        true_sd = np.sqrt(truth["var"])
        row.update(
            mcmc_rhat=truth["rhat"],
            mean_rmse=float(np.sqrt(np.mean((res.mean - truth["mean"]) ** 2))),
            sd_rmse=float(np.sqrt(np.mean((sd - true_sd) ** 2))),
            scale=float(np.sqrt(np.mean(truth["var"]))),
        )
    return row


def run_robustness(
    cache_dir: str | None = None,
    *,
    quick: bool = False,
    n_jobs: int = 1,
    scheduler: str | None = None,
    problems: list[int] | None = None,
    stats: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Run the suite and the synthetic problems (``problems``: a subset of their numbers); MCMC for ``n <= 100``."""
    specs = problem_grid(8 if quick else 30, max_n=200 if quick else 400)
    specs += synthetic_problems(1, length_scales=(1.0,)) if quick else synthetic_problems(3)
    if problems is not None:
        specs = [s for s in specs if s["problem"] in problems]
    n_samples = 2000 if quick else 8000
    max_sweeps = 100 if quick else 200
    sub = dict(cache_dir=cache_dir, n_jobs=n_jobs, scheduler=scheduler, stats=stats)
    small = [s for s in specs if s["n"] <= 100]
    truths = run_cells(
        [Cell(f"mcmc-{s['problem']}", _mcmc_cell, dict(spec=s, n_samples=n_samples)) for s in small],
        desc="robustness: MCMC ground truth",
        **sub,
    )
    by_problem = {t["problem"]: t for t in truths}
    cells = [
        Cell(
            f"fit-{s['problem']}-{m['label']}",
            _fit_cell,
            dict(spec=s, m=m, max_sweeps=max_sweeps, truth=by_problem.get(s["problem"])),
        )
        for s in specs
        for m in ROBUST_METHODS
    ]
    return run_cells(cells, desc="robustness: fits", **sub)


#: posterior errors closer than this (in units of the RMS posterior standard deviation) are
#: not told apart: the MCMC means' own Monte Carlo errors are 0.05-0.1 of a posterior standard
#: deviation at the worst coordinate (4 chains x 8000 guided samples, problems 3, 7, 11)
_RESOLUTION = 0.01


def summarize_robustness(rows: list[dict[str, Any]], rhat_max: float = 1.05) -> tuple[list[dict], dict[str, Any]]:
    """Per-set, per-method table and the issue's targets for ``auto``.

    Rows are grouped by ``set`` ("suite", "synthetic").  Posterior errors are divided by the
    problem's posterior scale (RMS MCMC standard deviation) and counted only where the MCMC
    run mixed (split-R-hat below ``rhat_max``).  ``auto`` is "as close to MCMC as the best
    converged EP variant" when its mean and standard-deviation errors are each within
    ``0.01`` (scaled) of the smallest among EP, damped EP, PEP, FEP and double-loop EP.
    """
    table = []
    for group in dict.fromkeys(r.get("set", "suite") for r in rows):
        in_set = [r for r in rows if r.get("set", "suite") == group]
        for m in dict.fromkeys(r["method"] for r in in_set):
            rs = [r for r in in_set if r["method"] == m]
            gt = [r for r in rs if r.get("mcmc_rhat", np.inf) < rhat_max]
            table.append(
                dict(
                    set=group,
                    method=m,
                    n_problems=len(rs),
                    converged_pct=100.0 * np.mean([r["converged"] for r in rs]),
                    n_nan=sum(r["nan"] for r in rs),
                    median_sweeps=float(np.median([r["sweeps"] for r in rs])),
                    median_time_s=float(np.median([r["time_s"] for r in rs])),
                    test_error_pct=100.0 * float(np.mean([r["test_error"] for r in rs])),
                    n_mcmc=len(gt),
                    median_mean_err=float(np.median([r["mean_rmse"] / r["scale"] for r in gt])) if gt else np.nan,
                    median_sd_err=float(np.median([r["sd_rmse"] / r["scale"] for r in gt])) if gt else np.nan,
                )
            )
    by = {(r["problem"], r["method"]): r for r in rows}
    problems = sorted({r["problem"] for r in rows})
    ep_family = ("EP", "EP damped 0.5", "PEP u=0.8", "FEP a=0.5 damped 0.5", "double-loop EP")
    closer = comparable = 0
    ratios = []
    for p in problems:
        auto = by.get((p, "auto"))
        ep = by.get((p, "EP"))
        if auto is None:
            continue
        if ep is not None and ep["converged"]:
            ratios.append(auto["time_s"] / ep["time_s"])
        if auto.get("mcmc_rhat", np.inf) < rhat_max:
            conv = [by[(p, m)] for m in ep_family if (p, m) in by and by[(p, m)]["converged"]]
            if conv and auto["converged"]:
                comparable += 1
                tol = _RESOLUTION * auto["scale"]
                best_mean = min(r["mean_rmse"] for r in conv)
                best_sd = min(r["sd_rmse"] for r in conv)
                closer += auto["mean_rmse"] <= best_mean + tol and auto["sd_rmse"] <= best_sd + tol
    auto_rows = [r for r in rows if r["method"] == "auto"]
    synthetic = [r for r in auto_rows if r.get("set") == "synthetic"]
    targets = dict(
        auto_converged=sum(r["converged"] for r in auto_rows),
        auto_runs=len(auto_rows),
        auto_converged_synthetic=sum(r["converged"] for r in synthetic),
        auto_runs_synthetic=len(synthetic),
        auto_nan=sum(r["nan"] for r in auto_rows),
        auto_as_close_as_best_ep=closer,
        auto_comparable=comparable,
        auto_time_ratio_median=float(np.median(ratios)) if ratios else np.nan,
        auto_time_ratio_max=float(np.max(ratios)) if ratios else np.nan,
    )
    return table, targets
