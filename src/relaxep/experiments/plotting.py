"""Figures of the studies, drawn from their table rows (matplotlib's object API; pyplot is never imported)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "plot_regression_mcmc",
    "plot_regression_rmse",
    "plot_robustness",
    "plot_spam",
    "plot_synthetic_boundaries",
    "plot_synthetic_summary",
    "plot_synthetic_traces",
    "plot_toy_boundaries",
    "plot_toy_errors",
    "plot_uci",
]

Rows = Sequence[dict[str, Any]]
_DPI = 72


def _figure(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] = (6.4, 4.8)):
    """A figure and its axes, without pyplot: no global backend or figure registry is touched."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI, bbox_inches="tight")
    return path


def plot_toy_boundaries(rows: Rows, X: np.ndarray, y: np.ndarray, path: Path, eps: float = 0.2) -> Path:
    """Figure 1(a): decision boundaries ``w^T x = 0`` of the posterior means."""
    fig, ax = _figure(figsize=(4.2, 4.0))
    ax.scatter(*X[y > 0].T, marker="o", facecolors="none", edgecolors="tab:blue", label="y = +1")
    ax.scatter(*X[y < 0].T, marker="x", color="tab:red", label="y = -1")
    pick = {"EP": "tab:orange", "PEP u=0.8": "tab:green", "REP c=20": "tab:purple", "REP-paper c=20": "tab:brown"}
    t = np.linspace(-3, 3, 2)
    exact = None
    for row in rows:
        if row["eps"] != eps:
            continue
        exact = row["exact_mean_w"]
        if row["method"] in pick:
            w = row["mean_w"]
            ax.plot(-w[1] * t, w[0] * t, color=pick[row["method"]], label=row["method"])
    if exact is not None:
        ax.plot(-exact[1] * t, exact[0] * t, "k--", label="exact")
    ax.set(xlim=(-2.5, 2.5), ylim=(-2.5, 2.5), aspect="equal", title=f"toy, eps = {eps}")
    ax.legend(fontsize=7, loc="lower left")
    return _save(fig, path)


def plot_toy_errors(rows: Rows, path: Path, eps: float = 0.2) -> Path:
    """Figure 1(b)-(e): mean-square error of mean and covariance against ``u`` and ``c``."""
    fig, axes = _figure(2, 2, figsize=(7.5, 5.5))
    sel = [r for r in rows if r["eps"] == eps]
    ep = next(r for r in sel if r["method"] == "EP")
    pep = sorted((r for r in sel if r["rule"] == "PowerEP"), key=lambda r: r["u"])
    for col, metric in enumerate(("mse_mean", "mse_cov")):
        ax = axes[0, col]
        ax.plot([r["u"] for r in pep], [r[metric] for r in pep], "o-", color="tab:green", label="Power EP")
        ax.axhline(ep[metric], color="tab:orange", label="EP")
        ax.set(xlabel="power u", ylabel=metric.replace("_", " "), yscale="log")
        ax.legend(fontsize=7)
        ax = axes[1, col]
        for variant, color in (("derived", "tab:purple"), ("paper", "tab:brown")):
            rep = sorted(
                (
                    r
                    for r in sel
                    if r["rule"] == "RelaxedEP" and r["variant"] == variant and not r["method"].endswith(" c=20")
                ),
                key=lambda r: r["c"],
            )
            ok = [r for r in rep if r["converged"]]
            ax.plot([r["c"] for r in rep], [r[metric] for r in rep], "-", color=color, label=f"REP ({variant})")
            ax.plot([r["c"] for r in ok], [r[metric] for r in ok], "o", color=color, ms=3)
        ax.axhline(ep[metric], color="tab:orange", label="EP")
        ax.set(xlabel="c (dots: converged)", ylabel=metric.replace("_", " "), xscale="log", yscale="log")
        ax.legend(fontsize=7)
    fig.suptitle(f"toy, eps = {eps}: error against the exact posterior of w", fontsize=9)
    return _save(fig, path)


def plot_synthetic_boundaries(
    rows: Rows, X: np.ndarray, y: np.ndarray, grid: np.ndarray, methods: Sequence[str], path: Path
) -> Path:
    """Figure 2: decision boundaries (latent mean = 0) on one 20%-noise training set."""
    fig, axes = _figure(1, len(methods), figsize=(3.3 * len(methods), 3.4))
    gx, gy = np.meshgrid(grid, grid)
    for ax, name in zip(np.atleast_1d(axes), methods, strict=False):
        row = next((r for r in rows if r["method"] == name and "boundary_latent" in r), None)
        ax.scatter(*X[y > 0].T, s=6, marker="o", facecolors="none", edgecolors="tab:blue", linewidths=0.5)
        ax.scatter(*X[y < 0].T, s=6, marker="x", color="tab:red", linewidths=0.5)
        if row is not None:
            z = np.asarray(row["boundary_latent"]).reshape(gx.shape)
            ax.contour(gx, gy, z, levels=[0.0], colors="k")
            ax.set_title(f"{name}: {row['status']}, {row['sweeps']} sweeps", fontsize=8)
        ax.set(xticks=[], yticks=[], aspect="equal")
    return _save(fig, path)


def plot_synthetic_traces(rows: Rows, methods: Sequence[str], path: Path) -> Path:
    """Figure 3: ``R(iter)`` of the first repeat at each flip rate."""
    rates = sorted({r["rate"] for r in rows})
    fig, axes = _figure(1, len(rates), figsize=(4.2 * len(rates), 3.3))
    for ax, rate in zip(np.atleast_1d(axes), rates, strict=False):
        for name in methods:
            row = next((r for r in rows if r["method"] == name and r["rate"] == rate and r["repeat"] == 0), None)
            if row is not None and row["trace"]:
                ax.semilogy(np.arange(1, len(row["trace"]) + 1), row["trace"], label=name, lw=1)
        ax.axhline(1e-3, color="grey", ls=":", lw=1)
        ax.set(xlabel="sweep", ylabel="R = ||alpha_t - alpha_{t-1}||", title=f"{rate:.0%} labels flipped")
        ax.legend(fontsize=7)
    return _save(fig, path)


def plot_synthetic_summary(summary: Rows, path: Path) -> Path:
    """Figure 4: mean sweeps, failures to converge and test error per method and flip rate."""
    rates = sorted({r["rate"] for r in summary})
    methods = list(dict.fromkeys(r["method"] for r in summary))
    fig, axes = _figure(1, 3, figsize=(11, 3.6))
    width = 0.8 / len(rates)
    x = np.arange(len(methods))
    for k, rate in enumerate(rates):
        by = {r["method"]: r for r in summary if r["rate"] == rate}
        vals = [
            [by[m]["mean_sweeps"] for m in methods],
            [by[m]["n_runs"] - by[m]["n_converged"] for m in methods],
            [100 * by[m]["error_mean"] for m in methods],
        ]
        errs = [None, None, [100 * by[m]["error_std"] for m in methods]]
        for ax, v, e in zip(axes, vals, errs, strict=True):
            ax.bar(x + k * width, v, width, yerr=e, label=f"{rate:.0%} flipped")
    for ax, title in zip(axes, ("sweeps (cap if not converged)", "runs not converged", "test error [%]"), strict=True):
        ax.set_xticks(x + width * (len(rates) - 1) / 2, methods, rotation=60, ha="right", fontsize=7)
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    return _save(fig, path)


def plot_uci(summary: Rows, path: Path, rate: float = 0.0) -> Path:
    """Figure 5: test error (mean +- std over splits) per dataset and method."""
    sel = [r for r in summary if r["rate"] == rate]
    datasets = list(dict.fromkeys(r["dataset"] for r in sel))
    methods = list(dict.fromkeys(r["method"] for r in sel))
    fig, ax = _figure(figsize=(8, 3.6))
    width = 0.8 / len(methods)
    x = np.arange(len(datasets))
    for k, m in enumerate(methods):
        by = {r["dataset"]: r for r in sel if r["method"] == m}
        ax.bar(
            x + k * width,
            [100 * by[d]["error_mean"] for d in datasets],
            width,
            yerr=[100 * by[d]["error_std"] for d in datasets],
            label=m,
        )
    ax.set_xticks(x + width * (len(methods) - 1) / 2, datasets)
    ax.set_ylabel("test error [%]")
    ax.legend(fontsize=7, ncol=3)
    return _save(fig, path)


def plot_spam(summary: Rows, path: Path) -> Path:
    """Figure 6: Spam test error against the fraction of flipped labels."""
    sel = [r for r in summary if r["dataset"] == "spambase"]
    methods = list(dict.fromkeys(r["method"] for r in sel))
    fig, ax = _figure(figsize=(5, 3.6))
    for m in methods:
        pts = sorted((r["rate"], r["error_mean"], r["error_std"]) for r in sel if r["method"] == m)
        ax.errorbar([100 * p[0] for p in pts], [100 * p[1] for p in pts], [100 * p[2] for p in pts], label=m, capsize=2)
    ax.set(xlabel="labels flipped in train and test [%]", ylabel="test error [%]", title="spambase")
    ax.legend(fontsize=7)
    return _save(fig, path)


def plot_robustness(table: Rows, path: Path) -> Path:
    """Convergence rate and median sweeps of each method, one bar per problem set."""
    fig, axes = _figure(1, 2, figsize=(11, 3.8))
    methods = list(dict.fromkeys(r["method"] for r in table))
    sets = list(dict.fromkeys(r.get("set", "suite") for r in table))
    by = {(r["method"], r.get("set", "suite")): r for r in table}
    x = np.arange(len(methods))
    width = 0.8 / len(sets)
    for k, group in enumerate(sets):
        offset = (k - (len(sets) - 1) / 2) * width
        for ax, key in zip(axes, ("converged_pct", "median_sweeps"), strict=True):
            values = [by[(m, group)][key] if (m, group) in by else np.nan for m in methods]
            ax.bar(x + offset, values, width, label=group, color=("tab:blue", "tab:orange", "tab:green")[k % 3])
    axes[0].set_title("converged [%]", fontsize=9)
    axes[1].set_title("median sweeps (auto, REP by evidence: all stages / runs)", fontsize=9)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=7)
    for ax in axes:
        ax.set_xticks(x, methods, rotation=60, ha="right", fontsize=7)
    return _save(fig, path)


def plot_regression_rmse(summary: Rows, path: Path) -> Path:
    """Test RMSE of the learned models against the contamination rate, one panel per data set."""
    learned = [r for r in summary if r["stage"] == "learned"]
    datasets = list(dict.fromkeys(r["data"] for r in learned))
    fig, axes = _figure(1, len(datasets), figsize=(3.2 * len(datasets), 3.2))
    for ax, data in zip(np.atleast_1d(axes), datasets, strict=True):
        for m in dict.fromkeys(r["method"] for r in learned):
            pts = sorted((r["rate"], r["rmse"]) for r in learned if r["data"] == data and r["method"] == m)
            ax.plot([100 * p[0] for p in pts], [p[1] for p in pts], marker="o", label=m)
        ax.set(xlabel="contaminated [%]", title=data)
    np.atleast_1d(axes)[0].set_ylabel("test RMSE (clean targets)")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    return _save(fig, path)


def plot_regression_mcmc(rows: Rows, path: Path) -> Path:
    """Posterior mean and sd errors against MCMC (MCMC sds): learned hyperparameters, and the stress stage."""
    fig, axes = _figure(1, 2, figsize=(10, 4.0))
    for ax, stage in zip(axes, ("fixed", "stress"), strict=True):
        sel_stage = [r for r in rows if r["stage"] == stage and r.get("mcmc_rhat", np.inf) < 1.05]
        for m in dict.fromkeys(r["method"] for r in sel_stage):
            for converged, marker in ((True, "o"), (False, "x")):
                sel = [r for r in sel_stage if r["method"] == m and (r["status"] == "converged") == converged]
                if sel:
                    ax.scatter(
                        [max(r["mean_err"], 1e-4) for r in sel],
                        [max(r["sd_err"], 1e-4) for r in sel],
                        marker=marker,
                        label=f"{m}{'' if converged else ' (not converged)'}",
                        alpha=0.7,
                    )
        ax.set(xscale="log", yscale="log", xlabel="RMS mean error [MCMC sd]", ylabel="RMS relative sd error")
        ax.set_title("learned hyperparameters" if stage == "fixed" else "Student-t scale / 10", fontsize=9)
        ax.legend(fontsize=6)
    return _save(fig, path)
