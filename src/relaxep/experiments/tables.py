"""Summary tables: grouping, paired tests, CSV and Markdown."""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import wilcoxon

__all__ = ["error_cell", "md_table", "paired_p_value", "summarize", "write_csv"]

Rows = Sequence[dict[str, Any]]

#: list-valued columns (traces, boundaries, CV scores) that stay in the cache, not in CSVs
EXTRA_COLUMNS = ("trace", "mean_w", "exact_mean_w", "boundary_latent", "cv_scores", "grid")


def paired_p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Wilcoxon signed-rank p-value of paired samples (1.0 when all pairs tie)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    if d.size == 0 or np.all(d == 0):
        return 1.0
    return float(wilcoxon(a, b, zero_method="zsplit").pvalue)


def summarize(rows: Rows, keys: Sequence[str], pair_key: str, reference: str | None = None) -> list[dict[str, Any]]:
    """One row per group of ``keys`` (e.g. dataset, rate, method).

    Gives run counts by status, mean / median sweeps (a run that did not converge counts
    its last sweep), median wall time, test error mean and standard deviation over the
    runs, and, when ``reference`` names a method, the paired Wilcoxon p-value of that
    method's test errors against this one's (pairs matched on ``pair_key``).
    """
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[tuple(r[k] for k in keys)].append(r)
    out = []
    for gkey, grp in groups.items():
        err = np.array([r.get("test_error", np.nan) for r in grp])
        sweeps = np.array([r["sweeps"] for r in grp])
        conv = np.array([r["converged"] for r in grp])
        row = dict(zip(keys, gkey, strict=True))
        row.update(
            n_runs=len(grp),
            n_converged=int(conv.sum()),
            n_max_sweeps=sum(r["status"] == "max_sweeps" for r in grp),
            n_diverged=sum(r["status"] == "diverged" for r in grp),
            n_stuck=sum(r["status"] == "stuck" for r in grp),
            mean_sweeps=float(sweeps.mean()),
            median_sweeps=float(np.median(sweeps)),
            mean_sweeps_converged=float(sweeps[conv].mean()) if conv.any() else math.nan,
            median_time_s=float(np.median([r["time_s"] for r in grp])),
            error_mean=float(np.mean(err)),
            error_std=float(np.std(err)),
        )
        if reference is not None and "method" in keys:
            ref_key = tuple(reference if k == "method" else v for k, v in zip(keys, gkey, strict=True))
            ref = {r[pair_key]: r.get("test_error", np.nan) for r in groups.get(ref_key, [])}
            mine = {r[pair_key]: r.get("test_error", np.nan) for r in grp}
            common = sorted(set(ref) & set(mine))
            row["p_vs_" + reference.replace(" ", "_")] = (
                paired_p_value([ref[k] for k in common], [mine[k] for k in common]) if common else math.nan
            )
        out.append(row)
    return out


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Rows as CSV (list-valued columns such as traces are left out)."""
    cols = list(dict.fromkeys(k for r in rows for k in r if k not in EXTRA_COLUMNS))
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def format_cell(v: Any) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def md_table(rows: Sequence[dict[str, Any]], cols: Sequence[str]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(format_cell(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def error_cell(r: dict) -> str:
    return f"{100 * r['error_mean']:.2f} ± {100 * r['error_std']:.2f}"
