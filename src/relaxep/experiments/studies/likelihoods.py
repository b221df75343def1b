r"""The GLM likelihoods on real data (``relaxep reproduce likelihoods``): GP regression by EP against the
statsmodels counterpart and, for quantiles, gradient boosting, by 10-fold cross-validation.

For each shipped set of :func:`relaxep.datasets.load_glm` (cbpp, esoph, snails: binomial successes out of trials;
GasolineYield, FoodExpenditure, ReadingSkills: proportions; bioChemists, NMES1988: counts with excess zeros) the
folds of ``KFold(10, shuffle=True, random_state=0)`` (5 with ``--quick``) are scored by the mean test log predictive
density per row:

* relaxep: ``GPRegressor(C * RBF(ARD) + C, likelihood=...)``, the inputs standardised on the training rows, the
  kernel and the likelihood's hyperparameters learned under the default priors (``Binomial()`` with
  ``trials=``; ``Beta()``; ``ZeroInflatedNegativeBinomial()`` and ``HurdleNegativeBinomial()``; on NMES1988's
  4 406 rows the sparse model with 100 inducing inputs at k-means centres, held there, and ``C * RBF(ARD)``: with
  the inducing inputs learned too, a fold's two fits took over 20 minutes on the shared 2-core machine, held they
  take 2-3);
* statsmodels, in the same run (:func:`~relaxep.experiments.studies.glm_baselines.baseline_lpd`): ``GLM``
  binomial, ``BetaModel``, ``ZeroInflatedNegativeBinomialP``, the hurdle NB and, for context, the negative
  binomial, zero-inflated Poisson and Poisson GLMs.

The motorcycle data (mcycle: head acceleration against time) give the quantiles: the pinball (check) loss at
:math:`\tau \in \{0.05, 0.5, 0.95\}` of ``GPRegressor(likelihood=AsymmetricLaplace(quantile=tau))`` (the targets
standardised) beside scikit-learn's ``GradientBoostingRegressor(loss="quantile", alpha=tau)`` and statsmodels'
``QuantReg`` on a cubic spline basis of the time, the same folds.  statsmodels is not a dependency of relaxep: where
it is missing, its columns are absent and the report says so.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from relaxep.experiments.runner import Cell
from relaxep.experiments.study import Study, StudyContext, Tables
from relaxep.experiments.tables import md_table, write_csv

__all__ = ["STUDY", "cross_validate", "quantiles", "run"]

SETS = ("cbpp", "esoph", "snails", "GasolineYield", "FoodExpenditure", "ReadingSkills", "bioChemists", "NMES1988")
TAUS = (0.05, 0.5, 0.95)
_SPARSE_ABOVE = 2000  # rows above which the GP is the sparse model
_INDUCING = 100


def _likelihoods(family: str) -> dict[str, Any]:
    from relaxep import Beta, Binomial, HurdleNegativeBinomial, ZeroInflatedNegativeBinomial

    if family == "binomial":
        return {"relaxep Binomial EP": Binomial()}
    if family == "beta":
        return {"relaxep Beta EP": Beta()}
    return {"relaxep zero-inflated NB EP": ZeroInflatedNegativeBinomial(),
            "relaxep hurdle NB EP": HurdleNegativeBinomial()}  # fmt: skip


def _kernel(d: int, sparse: bool = False) -> Any:
    """``C * RBF(ARD) + C`` (a level learned beside the function), ``C * RBF(ARD)`` for the sparse model (its
    search's closed-form gradients in the inducing inputs are written for that kernel)."""
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    return C(1.0) * RBF(np.ones(d)) if sparse else C(1.0) * RBF(np.ones(d)) + C(1.0)


def cross_validate(name: str, folds: int) -> dict[str, Any]:
    """Mean test log predictive density per row of relaxep's GP models and statsmodels' GLMs on ``name``."""
    import time

    from sklearn.model_selection import KFold

    from relaxep import GPRegressor
    from relaxep.datasets import load_glm

    warnings.simplefilter("ignore")
    data = load_glm(name)
    X, y = data.X, data.y
    lpd: dict[str, list[float]] = {}
    status: dict[str, list[str]] = {}
    seconds: dict[str, float] = {}
    for train, test in KFold(folds, shuffle=True, random_state=0).split(X):
        mean, sd = X[train].mean(axis=0), X[train].std(axis=0)
        sd[sd == 0.0] = 1.0
        Xtr, Xte = (X[train] - mean) / sd, (X[test] - mean) / sd
        fit_rows = {} if data.trials is None else {"trials": data.trials[train]}
        test_rows = {} if data.trials is None else {"trials": data.trials[test]}
        sparse = {"inducing_points": _INDUCING, "learn_inducing_points": False} if y.size > _SPARSE_ABOVE else {}
        for label, lik in _likelihoods(data.family).items():
            start = time.perf_counter()
            model = GPRegressor(_kernel(X.shape[1], bool(sparse)), likelihood=lik, random_state=0, **sparse)
            model.fit(Xtr, y[train], **fit_rows)
            seconds[label] = seconds.get(label, 0.0) + time.perf_counter() - start
            lpd.setdefault(label, []).extend(model.log_predictive_density(Xte, y[test], **test_rows).tolist())
            status.setdefault(label, []).append(model.result_.status)
        try:
            from relaxep.experiments.studies.glm_baselines import baseline_lpd

            for label, values in baseline_lpd(name, train, test).items():
                lpd.setdefault(label, []).extend(np.asarray(values, dtype=float).tolist())
        except ImportError:  # (statsmodels absent: its columns are left out)
            pass
    return {
        "set": name,
        "family": data.family,
        "rows": int(y.size),
        "folds": folds,
        "lpd": {k: float(np.mean(v)) for k, v in lpd.items()},
        "converged": {k: f"{v.count('converged')}/{len(v)}" for k, v in status.items()},
        "seconds": seconds,
    }


def _pinball(y: np.ndarray, q: np.ndarray, tau: float) -> float:
    r = y - q
    return float(np.mean(np.maximum(tau * r, (tau - 1.0) * r)))


def quantiles(folds: int) -> dict[str, Any]:
    """Pinball losses on mcycle at each tau: relaxep's asymmetric-Laplace GP, gradient boosting, QuantReg."""
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.model_selection import KFold
    from sklearn.preprocessing import SplineTransformer

    from relaxep import AsymmetricLaplace, GPRegressor
    from relaxep.datasets import load_regression

    warnings.simplefilter("ignore")
    X, y = load_regression("mcycle")
    losses: dict[str, dict[str, list[float]]] = {}
    for train, test in KFold(folds, shuffle=True, random_state=0).split(X):
        centre, spread = y[train].mean(), y[train].std()
        xm, xs = X[train].mean(axis=0), X[train].std(axis=0)
        Xtr, Xte = (X[train] - xm) / xs, (X[test] - xm) / xs
        for tau in TAUS:
            row = losses.setdefault(str(tau), {})
            gp = GPRegressor(likelihood=AsymmetricLaplace(quantile=tau), random_state=0)
            q = centre + spread * gp.fit(Xtr, (y[train] - centre) / spread).predict(Xte)
            row.setdefault("relaxep AsymmetricLaplace EP", []).append(_pinball(y[test], q, tau))
            gbr = GradientBoostingRegressor(loss="quantile", alpha=tau, random_state=0).fit(Xtr, y[train])
            row.setdefault("scikit-learn GradientBoostingRegressor", []).append(
                _pinball(y[test], gbr.predict(Xte), tau)
            )
            try:
                import statsmodels.api as sm

                basis = SplineTransformer(n_knots=8).fit(Xtr)
                fit = sm.QuantReg(y[train], basis.transform(Xtr)).fit(q=tau, max_iter=5000)
                row.setdefault("statsmodels QuantReg, splines", []).append(
                    _pinball(y[test], fit.predict(basis.transform(Xte)), tau)
                )
            except ImportError:
                pass
    return {"folds": folds, "pinball": {t: {k: float(np.mean(v)) for k, v in row.items()} for t, row in losses.items()}}


def run(context: StudyContext) -> Tables:
    folds = 5 if context.quick else 10
    cells = [Cell(f"likelihoods-{name}-{folds}", cross_validate, dict(name=name, folds=folds)) for name in SETS]
    tables = {"sets": context.run_cells(cells, desc="likelihoods")}
    tables["quantiles"] = context.run_cells([Cell(f"likelihoods-mcycle-{folds}", quantiles, dict(folds=folds))],
                                            desc="likelihoods quantiles")  # fmt: skip
    return tables


def report(tables: Tables, out: Path) -> str:
    """``likelihoods_lpd.csv``, ``likelihoods_quantiles.csv`` and the section."""
    rows = []
    for cell in tables["sets"]:
        gp = {k: v for k, v in cell["lpd"].items() if k.startswith("relaxep")}
        linear = {k: v for k, v in cell["lpd"].items() if k.startswith("statsmodels")}
        best_gp = max(gp.values()) if gp else float("nan")
        for method, value in cell["lpd"].items():
            rows.append({"set": cell["set"], "rows": cell["rows"], "method": method, "test_lpd": value,
                         "converged": cell["converged"].get(method, ""),
                         "fit_s": cell["seconds"].get(method, float("nan")) / cell["folds"],
                         "gp_minus_this": best_gp - value if method in linear else float("nan")})  # fmt: skip
    write_csv(rows, out / "likelihoods_lpd.csv")
    quant = tables["quantiles"][0]
    qrows = [{"tau": tau, "method": m, "pinball": v} for tau, row in quant["pinball"].items() for m, v in row.items()]
    write_csv(qrows, out / "likelihoods_quantiles.csv")
    folds = tables["sets"][0]["folds"]
    return (
        f"## The GLM likelihoods on real data\n\n{folds}-fold CV, mean test log predictive density per row (higher is "
        "better); `gp_minus_this`: the best relaxep model's minus this statsmodels model's (negative where the GP "
        "loses); `fit_s`: seconds per fold.\n\n"
        + md_table(rows, ["set", "rows", "method", "test_lpd", "gp_minus_this", "converged", "fit_s"])
        + f"\n\nmcycle quantiles, {quant['folds']}-fold CV, mean pinball loss (lower is better):\n\n"
        + md_table(qrows, ["tau", "method", "pinball"])
        + "\n"
    )


STUDY = Study(
    "likelihoods",
    run,
    report,
    paper=False,
    title="the GLM likelihoods (binomial, beta, zero-inflated and hurdle counts, quantiles) by EP",
)
