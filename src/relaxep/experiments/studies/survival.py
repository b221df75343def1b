r"""Survival analysis by EP (:class:`~relaxep.estimators.survival.GPSurvivalRegressor`) beside scikit-survival's
Cox model and random survival forest and lifelines' Weibull AFT model.

``relaxep reproduce survival``.  Four right-censored sets (:mod:`relaxep.datasets.survival`, encoded as
scikit-survival's guides encode them):

* GBSG2 (686 rows): scikit-survival's documented split, ``train_test_split(X, y, test_size=0.25,
  random_state=20)`` (its random-survival-forest guide, whose forest has ``n_estimators=1000,
  min_samples_split=10, min_samples_leaf=15, max_features="sqrt", random_state=20``);
* veterans (137 rows): ``ShuffleSplit(n_splits=100, test_size=0.5, random_state=0)``, its survival-SVM guide's
  splits (the guide's best survival SVM: mean concordance 0.720);
* Rossi (432 rows): ``ShuffleSplit(n_splits=20, test_size=0.25, random_state=0)``;
* flchain (7874 rows): one ``train_test_split(test_size=0.25, random_state=0)``, the GP with 150 inducing inputs;
  its three deaths at day 0 are set to day 0.5 for every contender (a log-time model needs a positive time).

Per test split: Harrell's concordance of the risk scores (:math:`c = P(r_i > r_j \mid t_i < t_j, \delta_i = 1)`,
ties in risk counting one half; Harrell, Califf, Pryor, Lee & Rosati 1982), the integrated Brier score with
inverse-probability-of-censoring weights (Graf, Schmoor, Sauerbrei & Schumacher 1999),
:math:`\mathrm{IBS} = \frac{1}{t_K - t_1}\int_{t_1}^{t_K} \mathrm{BS}(t)\,dt` by the trapezoidal rule, and the fit's
wall time.  The IBS grid is scikit-survival's "evaluating survival models" guide's: steps of one day (one week
for Rossi) from the 10th to the 90th percentile of the data set's observed times (at most 400 points, evenly
spaced, beyond that), kept inside the test split's follow-up.  Test times beyond the training set's last time are
set to it for the IBS alone: every grid time lies below it, so no Brier term changes, and scikit-survival's
censoring distribution (the cross-check) stays defined.  Every contender is a function ``(X_train, y_train,
X_test, times) -> (risk, S, fit seconds)``, ``S`` the survival estimate (n_test, len(times)); one whose package
does not import gives a "not installed" row.
"""

from __future__ import annotations

import time as clock
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from relaxep.experiments.runner import Cell
from relaxep.experiments.study import Study, StudyContext, Tables
from relaxep.experiments.tables import md_table, write_csv

__all__ = ["CONTENDERS", "STUDY", "evaluate", "ibs_times"]

Prediction = tuple[np.ndarray, np.ndarray, float]

#: the GP's inducing inputs on flchain (the sparse fit)
FLCHAIN_INDUCING = 150
#: scikit-survival's random-survival-forest guide's settings
RSF_SETTINGS = dict(n_estimators=1000, min_samples_split=10, min_samples_leaf=15, max_features="sqrt")


def _load(name: str) -> tuple[np.ndarray, np.ndarray]:
    from relaxep.datasets import survival

    X, y, _ = getattr(survival, f"load_{name}")()
    if name == "flchain":
        y = y.copy()
        y["time"] = np.maximum(y["time"], 0.5)
    return X, y


def splits(name: str, quick: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (train, test) index pairs of data set ``name`` (module docstring); ``quick``: the first few."""
    from sklearn.model_selection import ShuffleSplit, train_test_split

    n = _load(name)[1].size
    if name in ("gbsg2", "flchain"):
        train, test = train_test_split(np.arange(n), test_size=0.25, random_state=20 if name == "gbsg2" else 0)
        return [(train, test)]
    many = ShuffleSplit(n_splits=100, test_size=0.5, random_state=0) if name == "veterans" else None
    many = many or ShuffleSplit(n_splits=20, test_size=0.25, random_state=0)
    pairs = list(many.split(np.zeros((n, 1))))
    return pairs[: 5 if name == "veterans" else 3] if quick else pairs


def ibs_times(all_times: np.ndarray, y_test: np.ndarray, limit: int = 400) -> np.ndarray:
    """The IBS grid: ``np.arange(lower, upper + 1)``, ``lower, upper`` the 10th and 90th percentiles of
    ``all_times`` (scikit-survival's guide), inside ``[min, max)`` of the test times, thinned to ``limit`` evenly
    spaced points."""
    lower, upper = np.percentile(all_times, [10, 90])
    grid = np.arange(lower, upper + 1)
    grid = grid[(grid >= y_test["time"].min()) & (grid < y_test["time"].max())]
    return np.linspace(grid[0], grid[-1], limit) if grid.size > limit else grid


def _gp_estimator(likelihood: str, inducing_points: int | None):
    """``make_pipeline(StandardScaler(), GPSurvivalRegressor(likelihood=..., ...))`` with its other defaults."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from relaxep.estimators.survival import GPSurvivalRegressor

    options = {} if inducing_points is None else {"inducing_points": inducing_points}
    return make_pipeline(StandardScaler(), GPSurvivalRegressor(likelihood=likelihood, random_state=0, **options))


def gp_contender(X_train, y_train, X_test, times, *, likelihood="weibull", inducing_points=None) -> Prediction:
    """relaxep's GP survival model by EP: the risk is ``predict``, the survival ``predict_survival_function``."""
    pipe = _gp_estimator(likelihood, inducing_points)
    start = clock.perf_counter()
    pipe.fit(X_train, y_train)
    fit_s = clock.perf_counter() - start
    Z = pipe[:-1].transform(X_test)
    return pipe[-1].predict(Z), np.asarray(pipe[-1].predict_survival_function(Z, times)), fit_s


def _steps(functions, times: np.ndarray) -> np.ndarray:
    return np.vstack([fn(times) for fn in functions])


def coxph_contender(X_train, y_train, X_test, times, **_: Any) -> Prediction:
    """scikit-survival's ``CoxPHSurvivalAnalysis`` (Breslow's ties and baseline) on standardised inputs."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sksurv.linear_model import CoxPHSurvivalAnalysis

    pipe = make_pipeline(StandardScaler(), CoxPHSurvivalAnalysis())
    start = clock.perf_counter()
    pipe.fit(X_train, y_train)
    fit_s = clock.perf_counter() - start
    Z = pipe[:-1].transform(X_test)
    return pipe[-1].predict(Z), _steps(pipe[-1].predict_survival_function(Z), times), fit_s


def rsf_contender(X_train, y_train, X_test, times, *, n_estimators=1000, **_: Any) -> Prediction:
    """scikit-survival's ``RandomSurvivalForest`` with its guide's settings (``random_state=20``), one job."""
    from sksurv.ensemble import RandomSurvivalForest

    forest = RandomSurvivalForest(**(RSF_SETTINGS | {"n_estimators": n_estimators}), n_jobs=1, random_state=20)
    start = clock.perf_counter()
    forest.fit(X_train, y_train)
    fit_s = clock.perf_counter() - start
    return forest.predict(X_test), _steps(forest.predict_survival_function(X_test), times), fit_s


def weibull_aft_contender(X_train, y_train, X_test, times, **_: Any) -> Prediction:
    """lifelines' ``WeibullAFTFitter`` on standardised inputs; the risk is minus the predicted median's log."""
    import pandas as pd
    from lifelines import WeibullAFTFitter
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(X_train)
    columns = [f"x{j}" for j in range(X_train.shape[1])]
    frame = pd.DataFrame(scaler.transform(X_train), columns=columns)
    frame["time"], frame["event"] = y_train["time"], y_train["event"].astype(float)
    test = pd.DataFrame(scaler.transform(X_test), columns=columns)
    fitter = WeibullAFTFitter()
    start = clock.perf_counter()
    fitter.fit(frame, duration_col="time", event_col="event")
    fit_s = clock.perf_counter() - start
    risk = -np.log(np.asarray(fitter.predict_median(test), dtype=float))
    return risk, np.asarray(fitter.predict_survival_function(test, times=times)).T, fit_s


#: name -> (function, its keyword arguments, the package it needs); the study's rows in this order
CONTENDERS: dict[str, tuple[Callable[..., Prediction], dict[str, Any], str]] = {
    "GPSurvivalRegressor, Weibull (EP)": (gp_contender, {"likelihood": "weibull"}, "relaxep"),
    "GPSurvivalRegressor, log-logistic (EP)": (gp_contender, {"likelihood": "loglogistic"}, "relaxep"),
    "GPSurvivalRegressor, log-normal (EP)": (gp_contender, {"likelihood": "lognormal"}, "relaxep"),
    "GPSurvivalRegressor, Cox PH (EP)": (gp_contender, {"likelihood": "coxph"}, "relaxep"),
    "scikit-survival CoxPHSurvivalAnalysis": (coxph_contender, {}, "scikit-survival"),
    "scikit-survival RandomSurvivalForest": (rsf_contender, {}, "scikit-survival"),
    "lifelines WeibullAFTFitter": (weibull_aft_contender, {}, "lifelines"),
}


def _scores(y_train: np.ndarray, y_test: np.ndarray, risk: np.ndarray, S: np.ndarray, times: np.ndarray) -> dict:
    """Harrell's c and the IBS by relaxep's metrics, and by scikit-survival's where it imports (a cross-check)."""
    from relaxep.assessment import concordance_index, integrated_brier_score

    capped = y_test.copy()
    capped["time"] = np.minimum(capped["time"], y_train["time"].max())  # no Brier term changes (docstring)
    out = {
        "c_index": float(concordance_index(y_test, risk)),
        "ibs": float(integrated_brier_score(y_train, capped, S, times)),
    }
    try:
        from sksurv.metrics import concordance_index_censored
        from sksurv.metrics import integrated_brier_score as sk_ibs
    except ImportError:
        return out
    out["c_index_sksurv"] = float(concordance_index_censored(y_test["event"], y_test["time"], risk)[0])
    out["ibs_sksurv"] = float(sk_ibs(y_train, capped, S, times))
    return out


def evaluate(dataset: str, split: int, contender: str, quick: bool = False) -> dict[str, Any]:
    """One contender on one split of one data set: concordance, IBS, fit time (or why there is none)."""
    X, y = _load(dataset)
    train, test = splits(dataset, quick)[split]
    func, options, package = CONTENDERS[contender]
    options = dict(options)
    if func is gp_contender and dataset == "flchain":
        options["inducing_points"] = FLCHAIN_INDUCING
    if func is rsf_contender and quick:
        options["n_estimators"] = 100
    times = ibs_times(y["time"], y[test])
    row: dict[str, Any] = {
        "dataset": dataset,
        "split": split,
        "contender": contender,
        "n_train": int(train.size),
        "n_test": int(test.size),
        "n_times": int(times.size),
    }
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            risk, S, fit_s = func(X[train], y[train], X[test], times, **options)
    except ImportError as exc:
        return row | {"status": f"not installed ({package}: {exc})"}
    except Exception as exc:  # a fit that fails on one split is a row of the report, not the study's end
        return row | {"status": f"failed ({type(exc).__name__}: {str(exc)[:120]})"}
    return row | {"status": "ok", "fit_s": float(fit_s)} | _scores(y[train], y[test], np.asarray(risk), S, times)


def curves(quick: bool = False) -> dict[str, Any]:
    """GBSG2, the documented split: the Weibull GP's survival curves and 95% bands for three test patients (the
    lowest, the median and the highest predicted risk)."""
    X, y = _load("gbsg2")
    train, test = splits("gbsg2", quick)[0]
    grid = np.linspace(1.0, float(y["time"].max()), 120)
    try:
        pipe = _gp_estimator("weibull", None)
    except ImportError as exc:
        return {"status": f"not installed (relaxep: {exc})"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(X[train], y[train])
        Z = pipe[:-1].transform(X[test])
        risk = pipe[-1].predict(Z)
        chosen = np.argsort(risk)[[0, risk.size // 2, risk.size - 1]]
        S, low, high = pipe[-1].predict_survival_function(Z[chosen], grid, return_band=True)
    return {
        "status": "ok",
        "grid": grid.tolist(),
        "rows": test[chosen].tolist(),
        "time": y["time"][test[chosen]].tolist(),
        "event": y["event"][test[chosen]].tolist(),
        "risk": risk[chosen].tolist(),
        "S": np.asarray(S).tolist(),
        "lower": np.asarray(low).tolist(),
        "upper": np.asarray(high).tolist(),
    }


DATASETS = ("gbsg2", "veterans", "rossi", "flchain")


def run(context: StudyContext) -> Tables:
    """Every contender on every split; ``quick``: 5 veterans splits, 3 Rossi splits, a forest of 100 trees."""
    cells = [
        Cell(f"survival-{d}-{k}-{c}", evaluate, dict(dataset=d, split=k, contender=c, quick=context.quick))
        for d in DATASETS
        for k in range(len(splits(d, context.quick)))
        for c in CONTENDERS
    ]
    return {
        "survival": context.run_cells(cells, desc="survival"),
        "survival_curves": context.run_cells(
            [Cell("survival-curves", curves, dict(quick=context.quick))], desc="survival figure"
        ),
    }


def _failures(rows: list[dict[str, Any]]) -> str:
    """``"k of n splits failed: <the first failure>"``."""
    failed = [r["status"] for r in rows if r["status"] != "ok"]
    return f"{len(failed)} of {len(rows)} splits failed: {failed[0]}"


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per data set and contender: mean and sd over the splits that did not fail of the concordance and the IBS, the
    mean fit time, and the failures."""
    out = []
    for dataset in DATASETS:
        for contender in CONTENDERS:
            mine = [r for r in rows if r["dataset"] == dataset and r["contender"] == contender]
            ok = [r for r in mine if r["status"] == "ok"]
            if not mine:
                continue
            if not ok:
                out.append({"dataset": dataset, "contender": contender, "status": mine[0]["status"]})
                continue
            c, ibs = np.array([r["c_index"] for r in ok]), np.array([r["ibs"] for r in ok])
            sd = (lambda v: float(np.std(v, ddof=1))) if len(ok) > 1 else (lambda v: float("nan"))
            out.append(
                {
                    "dataset": dataset,
                    "contender": contender,
                    "splits": len(ok),
                    "c_index": float(c.mean()),
                    "c_sd": sd(c),
                    "ibs": float(ibs.mean()),
                    "ibs_sd": sd(ibs),
                    "fit_s": float(np.mean([r["fit_s"] for r in ok])),
                    "status": "ok" if len(ok) == len(mine) else _failures(mine),
                }
            )
    return out


def figure(curves_row: dict[str, Any], path: Path) -> Path:
    """Three GBSG2 test patients' predicted survival with 95% bands."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.0))
    ax = fig.subplots()
    grid = np.asarray(curves_row["grid"])
    for k, label in enumerate(("lowest", "median", "highest")):
        color = f"C{k}"
        label = f"{label} predicted risk (row {curves_row['rows'][k]})"
        ax.plot(grid, curves_row["S"][k], color=color, lw=1.5, label=label)
        ax.fill_between(grid, curves_row["lower"][k], curves_row["upper"][k], color=color, alpha=0.2)
        t = curves_row["time"][k]  # the patient's outcome: x a recurrence, o censored
        ax.plot([t], [np.interp(t, grid, curves_row["S"][k])], "x" if curves_row["event"][k] else "o", color=color)
    ax.set(xlabel="days", ylabel="recurrence-free survival", ylim=(0.0, 1.02))
    ax.set_title("GBSG2 test patients, GPSurvivalRegressor (Weibull, EP): survival, 95% bands, outcome", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


#: the issue's targets: concordance on GBSG2 and veterans, the flchain sparse fit's seconds
TARGETS = {"gbsg2": 0.68, "veterans": 0.72, "flchain_fit_s": 60.0}
HEADLINE, COX = "GPSurvivalRegressor, Weibull (EP)", "scikit-survival CoxPHSurvivalAnalysis"


def _targets(table: list[dict[str, Any]]) -> str:
    """The targets, met or not, for the default (Weibull) GP and for the best GP row of each data set."""
    ok = {(r["dataset"], r["contender"]): r for r in table if r["status"] == "ok"}
    lines = []
    for dataset in DATASETS:
        gp = [r for (d, c), r in ok.items() if d == dataset and c.startswith("GPSurvival")]
        if not gp:
            continue
        best, head = max(gp, key=lambda r: r["c_index"]), ok.get((dataset, HEADLINE))
        if dataset in TARGETS:
            lines.append(
                f"{dataset} concordance >= {TARGETS[dataset]}: best GP {best['c_index']:.4f} "
                f"({best['contender']}): {'met' if best['c_index'] >= TARGETS[dataset] else 'NOT met'}"
            )
        if head is not None and (dataset, COX) in ok:
            cox = ok[(dataset, COX)]["ibs"]
            lines.append(
                f"{dataset} IBS no worse than the Cox model's ({cox:.4f}): Weibull GP {head['ibs']:.4f}: "
                f"{'met' if head['ibs'] <= cox else 'NOT met'}"
            )
        if dataset == "flchain" and head is not None:
            limit = TARGETS["flchain_fit_s"]
            lines.append(
                f"flchain sparse fit under {limit:.0f} s: Weibull GP {head['fit_s']:.1f} s: "
                f"{'met' if head['fit_s'] < limit else 'NOT met'}"
            )
    return "\n\nTargets:\n" + "".join(f"\n- {line}" for line in lines) if lines else ""


def report(tables: Tables, out: Path) -> str:
    """``survival.csv``, ``survival_summary.csv``, the figure and the section."""
    rows, curves_row = tables["survival"], tables["survival_curves"][0]
    table = summary(rows)
    write_csv(rows, out / "survival.csv")
    write_csv(table, out / "survival_summary.csv")
    sections = []
    titles = {
        "gbsg2": "GBSG2, scikit-survival's documented split (514 train / 172 test)",
        "veterans": "veterans, random half splits",
        "rossi": "Rossi, random 75/25 splits",
        "flchain": f"flchain, one 75/25 split (the GP sparse, {FLCHAIN_INDUCING} inducing inputs)",
    }
    for dataset in DATASETS:
        mine = [r for r in table if r["dataset"] == dataset]
        if mine:
            cols = ["contender", "splits", "c_index", "c_sd", "ibs", "ibs_sd", "fit_s", "status"]
            sections.append(f"### {titles[dataset]}\n\n" + md_table(mine, cols))
    gaps = [
        abs(r[k] - r[k + "_sksurv"])
        for r in rows
        if r["status"] == "ok"
        for k in ("c_index", "ibs")
        if k + "_sksurv" in r
    ]
    check = (
        f"relaxep's metrics against scikit-survival's on the same predictions: largest difference "
        f"{max(gaps):.2e} over {len(gaps)} values."
        if gaps
        else "scikit-survival is not installed: no cross-check of the metrics."
    )
    text = (
        "## Survival analysis (GP survival models by EP)\n\n"
        "Harrell's concordance (higher is better), the integrated Brier score (IPCW; lower is better) and the fit "
        "time in seconds, mean and sd over the splits; the GP runs in `make_pipeline(StandardScaler(), "
        "GPSurvivalRegressor(likelihood=...))` with its defaults. Targets: GBSG2 concordance >= 0.68 (scikit-"
        "survival's forest: 0.676 in its guide), veterans >= 0.72 (its guide's best survival SVM), an IBS no worse "
        "than the Cox model's, flchain's sparse fit under 60 s.\n\n" + "\n\n".join(sections) + "\n\n" + check
    )
    text += _targets(table)
    if curves_row["status"] == "ok":
        (out / "figures").mkdir(parents=True, exist_ok=True)
        figure(curves_row, out / "figures" / "survival_curves.png")
        text += "\n\n![GBSG2 survival curves](figures/survival_curves.png)"
    else:
        text += f"\n\nThe figure of survival curves: {curves_row['status']}."
    return text + "\n"


STUDY = Study("survival", run, report, paper=False, title="survival analysis by EP")
