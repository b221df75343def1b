"""Markov (state-space) EP on real series against the dense fit it must equal.

* **Coal-mining disasters** (112 yearly counts, 1851-1962): Poisson EP with a Matérn-1/2 kernel, its hyperparameters
  learned by the EP evidence, dense and Markov: the learned kernels, the evidences, the largest differences of the
  posterior log-rate's mean and sd at the years and of a forecast to 1975, and the fit times.
* **Canadian lynx trappings** (114 yearly counts, 1821-1934, a cycle of about ten years): negative-binomial EP with
  a quasi-periodic kernel (a constant plus ``ExpSineSquared * Matern(3/2)``), Markov to the harmonics the state-space
  form chooses, against the dense exact kernel and a dense Matérn-3/2 without the cycle; fitted on 1821-1920, the
  test log predictive density of the counts 1921-1934 (forecasting 14 years), and the fit times; and the dense
  exact kernel's evidence at the Markov fit's hyperparameters (what the truncation costs).

The long binary series at 10^4 - 10^6 points is ``benchmarks/markov.py``'s (a speed benchmark).
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

__all__ = ["STUDY", "coal", "lynx"]


def _timed_fit(estimator: Any, X: np.ndarray, y: np.ndarray) -> tuple[Any, float]:
    start = time.perf_counter()
    estimator.fit(X, y)
    return estimator, time.perf_counter() - start


def coal() -> dict[str, Any]:
    """Dense against Markov Poisson EP on the coal-mining disasters."""
    from sklearn.gaussian_process.kernels import ConstantKernel as C
    from sklearn.gaussian_process.kernels import Matern

    from relaxep import GPRegressor, Poisson
    from relaxep.datasets import load_coal_mining

    warnings.simplefilter("ignore")
    years, counts = load_coal_mining()
    X = years[:, None].astype(float)
    grid = np.arange(1851.0, 1976.0)[:, None]
    fits = {}
    for rep in ("dense", "markov"):
        model = GPRegressor(C(1.0) * Matern(10.0, nu=0.5), likelihood=Poisson(), representation=rep, random_state=0)
        model, seconds = _timed_fit(model, X, counts)
        mean, var = model.latent_mean_and_variance(grid)
        fits[rep] = dict(
            kernel=repr(model.kernel_), lml=float(model.log_marginal_likelihood_value_), fit_s=seconds,
            mean=mean, sd=np.sqrt(var), status=model.result_.status,
        )  # fmt: skip
    d, m = fits["dense"], fits["markov"]
    return {
        "rows": [
            {"fit": rep, "kernel": f["kernel"], "log_evidence": f["lml"], "status": f["status"], "fit_s": f["fit_s"]}
            for rep, f in fits.items()
        ],
        "max_mean_gap": float(np.max(np.abs(d["mean"] - m["mean"]))),
        "max_sd_gap": float(np.max(np.abs(d["sd"] - m["sd"]))),
    }


def _quasi_periodic() -> Any:
    from sklearn.gaussian_process.kernels import ConstantKernel as C
    from sklearn.gaussian_process.kernels import ExpSineSquared, Matern

    return C(30.0, (1e-2, 1e4)) + C(1.0) * ExpSineSquared(1.0, 10.0, periodicity_bounds=(5.0, 20.0)) * Matern(
        50.0, nu=1.5, length_scale_bounds=(1.0, 1e4)
    )


def lynx(last_train: int = 1920) -> dict[str, Any]:
    """Quasi-periodic negative-binomial EP on the lynx trappings, Markov and dense, forecasting the last years."""
    from sklearn.base import clone
    from sklearn.gaussian_process.kernels import ConstantKernel as C
    from sklearn.gaussian_process.kernels import Matern

    from relaxep import GPRegressor, NegativeBinomial
    from relaxep.datasets import load_lynx
    from relaxep.posterior.state_space import periodic_truncation, state_space

    warnings.simplefilter("ignore")
    years, counts = load_lynx()
    X = years[:, None].astype(float)
    train, test = years <= last_train, years > last_train
    candidates = {
        "Markov, quasi-periodic": dict(kernel=_quasi_periodic(), representation="markov"),
        "dense, quasi-periodic (exact kernel)": dict(kernel=_quasi_periodic(), representation="dense"),
        "dense, Matern 3/2 (no cycle)": dict(
            kernel=C(30.0, (1e-2, 1e4)) + C(1.0) * Matern(5.0, nu=1.5), representation="dense"
        ),
    }
    rows = []
    for name, options in candidates.items():
        model = GPRegressor(likelihood=NegativeBinomial(), random_state=0, **options)
        model, seconds = _timed_fit(model, X[train], counts[train])
        lpd = model.log_predictive_density(X[test], counts[test])
        row = {
            "fit": name, "kernel": repr(model.kernel_), "log_evidence": float(model.log_marginal_likelihood_value_),
            "test_lpd": float(np.mean(lpd)), "fit_s": seconds, "status": model.result_.status,
        }  # fmt: skip
        if options["representation"] == "markov":
            form = state_space(model.kernel_)
            ell = float(np.exp(model.kernel_.k2.k1.k2.theta[0]))  # the periodic factor's length scale
            row["harmonics"] = form.harmonics
            row["left_out_variance"] = periodic_truncation(ell, form.harmonics)
            at = GPRegressor(clone(model.kernel_), likelihood=clone(model.likelihood_), optimizer=None,
                             representation="dense").fit(X[train], counts[train])  # fmt: skip
            rows.append(row)
            row = {
                "fit": "dense, exact kernel, at the Markov fit's hyperparameters", "kernel": repr(at.kernel_),
                "log_evidence": float(at.log_marginal_likelihood_value_),
                "test_lpd": float(np.mean(at.log_predictive_density(X[test], counts[test]))), "fit_s": float("nan"),
                "status": at.result_.status,
            }  # fmt: skip
        rows.append(row)
    return {"rows": rows, "train": f"1821-{last_train}", "test": f"{last_train + 1}-1934"}


def run(context: StudyContext) -> Tables:
    return {
        "coal": context.run_cells([Cell("markov-coal", coal, {})], desc="markov coal"),
        "lynx": context.run_cells([Cell("markov-lynx", lynx, {})], desc="markov lynx"),
    }


def report(tables: Tables, out: Path) -> str:
    """``markov_coal.csv``, ``markov_lynx.csv`` and the section."""
    coal_row, lynx_row = tables["coal"][0], tables["lynx"][0]
    write_csv(coal_row["rows"], out / "markov_coal.csv")
    write_csv(lynx_row["rows"], out / "markov_lynx.csv")
    qp = next(r for r in lynx_row["rows"] if "harmonics" in r)
    return (
        "## Markov (state-space) EP\n\nCoal-mining disasters, Poisson EP, `C * Matern(nu=0.5)` learned by the EP "
        "evidence, dense and Markov:\n\n"
        + md_table(coal_row["rows"], ["fit", "kernel", "log_evidence", "status", "fit_s"])
        + f"\n\nLargest gap of the posterior log-rate at 1851-1975 (a forecast from 1963): mean "
        f"{coal_row['max_mean_gap']:.2e}, sd {coal_row['max_sd_gap']:.2e}.\n\n"
        f"Lynx trappings, negative-binomial EP, fitted on {lynx_row['train']}, test log predictive density per year "
        f"of {lynx_row['test']} (forecast); the Markov quasi-periodic form at {qp['harmonics']} harmonics leaves out "
        f"{qp['left_out_variance']:.1e} of the periodic factor's variance:\n\n"
        + md_table(lynx_row["rows"], ["fit", "kernel", "log_evidence", "test_lpd", "status", "fit_s"])
        + "\n"
    )


STUDY = Study("markov", run, report, paper=False, title="state-space (Markov) EP for long series")
