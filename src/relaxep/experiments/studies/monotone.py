"""Monotone GPs by EP with virtual derivative observations, against the unconstrained fit.

* **Broffitt's mortality** (30 ages, deaths with their person-years as exposure): Poisson EP,
  ``deaths ~ Poisson(exposure * exp(f(age)))``, with and without ``monotone={0: +1}``; the kernel learned
  (``C * RBF``) and held at short length scales where the unconstrained posterior mean wiggles.  Reported: the
  steps of the posterior mean log-rate between consecutive ages that fall (of 29), its mean posterior sd, the virtual
  points placed, the fit time.
* **A psychometric function** (a yes/no task): intensity ``x ~ U(0, 1)``, ``P(yes) = lapse/2 + (1 - lapse)
  Phi((x - threshold)/slope)``, threshold 0.5, slope 0.1, lapse 0.05; 100 trials a run, 10 runs;
  ``GPClassifier()`` with its defaults, with and without ``monotone={0: +1}``.  Reported: the mean absolute error of
  the estimated ``P(yes)`` on 101 intensities, the steps of the posterior latent mean that fall there (and the
  largest fall of ``P(yes)`` itself), the fit time.
  ``benchmarks/monotone_psychometric.py`` puts aepsych's monotone model beside it, where aepsych installs.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from relaxep.experiments.runner import Cell
from relaxep.experiments.study import Study, StudyContext, Tables
from relaxep.experiments.tables import md_table, write_csv

__all__ = ["STUDY", "broffitt", "psychometric", "psychometric_data"]

THRESHOLD, SLOPE, LAPSE = 0.5, 0.1, 0.05


def broffitt(setting: str) -> dict[str, Any]:
    """Both fits of Broffitt's table at ``setting`` (``"learned"`` or a fixed length scale in years)."""
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from relaxep import GPRegressor, Poisson
    from relaxep.datasets import load_broffitt

    warnings.simplefilter("ignore")
    ages, exposure, deaths = load_broffitt()
    X = ages[:, None].astype(float)
    rows = []
    for monotone in (None, {0: 1}):
        if setting == "learned":
            kernel = C(1.0) * RBF(10.0)
        else:  # (the log rate's level by a fixed constant, as the learned amplitude carries it)
            kernel = C(1.0, "fixed") * RBF(float(setting), "fixed") + C(25.0, "fixed")
        model = GPRegressor(kernel, likelihood=Poisson(), monotone=monotone, random_state=0)
        start = time.perf_counter()
        model.fit(X, deaths, exposure=exposure)
        seconds = time.perf_counter() - start
        mean, var = model.latent_mean_and_variance(X)
        virtual = getattr(model.model_, "virtual_", None)
        rows.append({
            "length_scale": setting, "fit": "monotone" if monotone else "unconstrained", "kernel": repr(model.kernel_),
            "falling_steps": int(np.sum(np.diff(mean) < 0)), "mean_sd": float(np.mean(np.sqrt(var))),
            "virtual_points": 0 if virtual is None else len(virtual[0]), "fit_s": seconds,
            "status": model.result_.status,
        })  # fmt: skip
    return {"rows": rows}


def psychometric_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y, grid, truth)``: ``n`` trials at uniform intensities, and the true ``P(yes)`` on 101 intensities."""
    from scipy.special import ndtr

    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, n)
    p = 0.5 * LAPSE + (1.0 - LAPSE) * ndtr((x - THRESHOLD) / SLOPE)
    grid = np.linspace(0.0, 1.0, 101)
    truth = 0.5 * LAPSE + (1.0 - LAPSE) * ndtr((grid - THRESHOLD) / SLOPE)
    return x[:, None], (rng.uniform(size=n) < p).astype(int), grid[:, None], truth


def psychometric(seed: int, n: int = 100) -> dict[str, Any]:
    """Both fits of one psychometric run."""
    from relaxep import GPClassifier

    warnings.simplefilter("ignore")
    X, y, grid, truth = psychometric_data(n, seed)
    out: dict[str, Any] = {"seed": seed}
    for name, monotone in (("unconstrained", None), ("monotone", {0: 1})):
        start = time.perf_counter()
        model = GPClassifier(monotone=monotone, random_state=seed).fit(X, y)
        seconds = time.perf_counter() - start
        p = model.predict_proba(grid)[:, 1]
        latent = model.model_.predict_latent(grid)[0]
        out[name] = {
            "grid_error": float(np.mean(np.abs(p - truth))), "falling_steps": int(np.sum(np.diff(latent) < 0.0)),
            "proba_falls": float(max(0.0, -np.min(np.diff(p)))), "fit_s": seconds,
        }  # fmt: skip
    return out


def run(context: StudyContext) -> Tables:
    settings = ["learned", "3", "5", "8"]
    runs = 3 if context.quick else 10
    return {
        "broffitt": context.run_cells(
            [Cell(f"monotone-broffitt-{s}", broffitt, dict(setting=s)) for s in settings], desc="monotone broffitt"
        ),
        "psychometric": context.run_cells(
            [Cell(f"monotone-psychometric-{s}", psychometric, dict(seed=s)) for s in range(runs)],
            desc="monotone psychometric",
        ),
    }


def report(tables: Tables, out: Path) -> str:
    """``monotone_broffitt.csv``, ``monotone_psychometric.csv`` and the section."""
    rows = [row for cell in tables["broffitt"] for row in cell["rows"]]
    write_csv(rows, out / "monotone_broffitt.csv")
    runs = tables["psychometric"]
    psycho = []
    for name in ("unconstrained", "monotone"):
        values = [r[name] for r in runs]
        psycho.append({
            "fit": f"GPClassifier(monotone={'{0: 1}' if name == 'monotone' else 'None'})",
            "grid_error": float(np.mean([v["grid_error"] for v in values])),
            "grid_error_sd": float(np.std([v["grid_error"] for v in values])),
            "runs_with_falling_steps": sum(v["falling_steps"] > 0 for v in values),
            "largest_fall_of_p": float(max(v["proba_falls"] for v in values)),
            "fit_s_median": float(np.median([v["fit_s"] for v in values])),
        })  # fmt: skip
    write_csv(psycho, out / "monotone_psychometric.csv")
    return (
        "## Monotone GPs by EP\n\nBroffitt's mortality, Poisson EP with the person-years as exposure; `falling_steps`: "
        "steps of the posterior mean log-rate between consecutive ages that fall (of 29):\n\n"
        + md_table(
            rows, ["length_scale", "fit", "kernel", "falling_steps", "mean_sd", "virtual_points", "fit_s", "status"]
        )
        + f"\n\nPsychometric function (threshold {THRESHOLD}, slope {SLOPE}, lapse {LAPSE}), 100 trials a run, "
        f"{len(runs)} runs: mean absolute error of P(yes) on 101 intensities; runs whose posterior latent mean falls "
        "somewhere on them; the largest fall of the predictive P(yes) between neighbours (the predictive mixes the "
        "latent's mean and its variance, so a rising mean can give a P(yes) that dips where the variance grows):\n\n"
        + md_table(
            psycho,
            ["fit", "grid_error", "grid_error_sd", "runs_with_falling_steps", "largest_fall_of_p", "fit_s_median"],
        )
        + "\n"
    )


STUDY = Study("monotone", run, report, paper=False, title="monotone GPs by EP with derivative signs")
