r"""Censored regression by EP (:class:`~relaxep.likelihoods.Tobit`) against the naive fits and the sampler.

``relaxep reproduce censored``. The simulated set: :math:`f(x) = \sin 2x + x/2` on :math:`[-3, 3]`, 300 uniform
inputs, noise sd 0.3, values below 0 reported as 0 (45-55% of them). Per draw, the RMSE of each fit's latent mean
to :math:`f` on 400 grid points: the Tobit model (kernel and noise at the MAP under the default hyperpriors, dense
and with 30 inducing inputs; dense at type-II maximum likelihood, ``prior=None``; dense averaged over the
hyperparameters by a central composite design, ``integrate="ccd"``, under either) and scikit-learn's
``GaussianProcessRegressor(C * RBF + WhiteKernel, normalize_y=True)`` on the reported values and on the uncensored
rows alone. Against an elliptical-slice run of the same model at the learned hyperparameters (40 rows): EP's
marginal means in posterior standard deviations, its variances as ratios. A real set,
:func:`~relaxep.datasets.load_nh4` (ammonium in precipitation, 102 samples, 46 below one of four detection limits):
10-fold cross-validation of the log concentration against time, scored by the held-out rows' censored log
likelihood (a non-detect's :math:`\log\Phi((\log l - \mu_*)/s_*)`, a measured value's :math:`\log N(y \mid \mu_*,
s_*^2)`, :math:`s_*^2` the predictive variance with the noise), for the Tobit model with per-row limits and for
scikit-learn's GPR with each non-detect replaced by its limit or by half of it, the usual substitutions.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from relaxep.experiments.runner import Cell
from relaxep.experiments.study import Study, StudyContext, Tables
from relaxep.experiments.tables import md_table, write_csv

__all__ = ["STUDY", "against_sampler", "censored_draw"]

N, NOISE_SD, GRID = 300, 0.3, 400


def censored_set(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, f, y)``: the simulated set (module docstring), ``y`` censored below at 0."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3.0, 3.0, size=(n, 1))
    f = np.sin(2.0 * X[:, 0]) + 0.5 * X[:, 0]
    return X, f, np.maximum(f + NOISE_SD * rng.normal(size=n), 0.0)


def censored_draw(seed: int, integrate: bool = True) -> dict[str, Any]:
    """One draw's RMSE to the latent and learned noise sd, per fit; ``integrate``: with the two CCD fits (each about
    20 times the MAP's time; left out of ``--quick``)."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from relaxep import GPRegressor, Tobit

    X, _, y = censored_set(N, seed)
    Xt = np.linspace(-3.0, 3.0, GRID)[:, None]
    ft = np.sin(2.0 * Xt[:, 0]) + 0.5 * Xt[:, 0]
    row: dict[str, Any] = {"seed": seed, "censored": float(np.mean(y == 0.0))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = {
            "Tobit(lower=0), EP": GPRegressor(likelihood=Tobit(lower=0.0), random_state=0).fit(X, y),
            "Tobit(lower=0), EP, ML-II": GPRegressor(likelihood=Tobit(lower=0.0), prior=None, random_state=0).fit(X, y),
        }
        if integrate:
            fits["Tobit(lower=0), EP, CCD"] = GPRegressor(
                likelihood=Tobit(lower=0.0), integrate="ccd", random_state=0
            ).fit(X, y)
            fits["Tobit(lower=0), EP, ML-II, CCD"] = GPRegressor(
                likelihood=Tobit(lower=0.0), prior=None, integrate="ccd", random_state=0
            ).fit(X, y)
        fits |= {
            "Tobit(lower=0), EP, 30 inducing inputs": GPRegressor(
                likelihood=Tobit(lower=0.0), inducing_points=30, random_state=0
            ).fit(X, y),
            "scikit-learn GPR, reported values": GaussianProcessRegressor(
                C(1.0) * RBF(1.0) + WhiteKernel(), normalize_y=True, random_state=0
            ).fit(X, y),
            "scikit-learn GPR, uncensored rows": GaussianProcessRegressor(
                C(1.0) * RBF(1.0) + WhiteKernel(), normalize_y=True, random_state=0
            ).fit(X[y > 0], y[y > 0]),
        }
    for name, est in fits.items():
        row[name] = float(np.sqrt(np.mean((est.predict(Xt) - ft) ** 2)))
        if isinstance(est, GPRegressor):
            row[name + " noise sd"] = float(np.sqrt(est.likelihood_.noise))
            row[name + " status"] = est.result_.status
    return row


def against_sampler(quick: bool) -> dict[str, Any]:
    """EP against elliptical slice sampling of the Tobit model at its learned hyperparameters (40 rows)."""
    from relaxep import EP, GPRegressor, Tobit, infer
    from relaxep.mcmc import elliptical_slice

    X, _, y = censored_set(40, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = GPRegressor(likelihood=Tobit(lower=0.0), random_state=0).fit(X, y)
    K = fit.kernel_(X) + 1e-8 * np.eye(40)
    res = infer(K, y, fit.likelihood_, EP(), tol=1e-8, max_sweeps=500)
    mc = elliptical_slice(K, y, fit.likelihood_, n_samples=2000 if quick else 8000, n_burn=500, n_chains=4,
                          random_state=0, approx=(res.mean, res.cov))  # fmt: skip
    ratio = res.marginal_var / mc.var
    return {
        "status": res.status,
        "sampler_converged": bool(mc.converged),
        "mean_gap_sd": float(np.max(np.abs(res.mean - mc.mean) / np.sqrt(mc.var))),
        "var_ratio_min": float(np.min(ratio)),
        "var_ratio_max": float(np.max(ratio)),
        "kernel": str(fit.kernel_),
    }


def nh4_cv(folds: int) -> dict[str, Any]:
    """The NH4 series' cross-validated censored log likelihood per held-out sample, per method (module docstring)."""
    from scipy.stats import norm
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C
    from sklearn.model_selection import KFold

    from relaxep import GPRegressor, Tobit
    from relaxep.datasets import load_nh4

    days, nh4, censored = load_nh4()
    X, y = (days / 365.25)[:, None], np.log(nh4)
    scores: dict[str, list[float]] = {"Tobit, per-row limits": [], "GPR, limit substituted": [],
                                      "GPR, half the limit substituted": []}  # fmt: skip
    for train, test in KFold(folds, shuffle=True, random_state=0).split(X):
        codes = np.where(censored[train], -1.0, 0.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tobit = GPRegressor(likelihood=Tobit(), random_state=0).fit(X[train], np.column_stack([y[train], codes]))
            mean, sd = tobit.predict(X[test], return_std=True)
            predictive = {"Tobit, per-row limits": (mean, np.sqrt(sd**2 + tobit.likelihood_.noise))}
            for name, shift in (("GPR, limit substituted", 0.0), ("GPR, half the limit substituted", np.log(2.0))):
                gpr = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(), normalize_y=True, random_state=0)
                gpr.fit(X[train], np.where(censored[train], y[train] - shift, y[train]))
                predictive[name] = gpr.predict(X[test], return_std=True)
        for name, (mu, s) in predictive.items():
            ll = np.where(censored[test], norm.logcdf((y[test] - mu) / s), norm.logpdf(y[test], mu, s))
            scores[name].extend(ll.tolist())
    return {"folds": folds, "n": int(y.size), "censored": int(censored.sum()),
            "lpd": {k: float(np.mean(v)) for k, v in scores.items()}}  # fmt: skip


def run(context: StudyContext) -> Tables:
    draws = 3 if context.quick else 6
    cells = [Cell(f"censored-draw-{s}", censored_draw, dict(seed=s, integrate=not context.quick)) for s in range(draws)]
    tables = {"draws": context.run_cells(cells, desc="censored")}
    tables["sampler"] = context.run_cells(
        [Cell("censored-sampler", against_sampler, dict(quick=context.quick))], desc="censored sampler"
    )
    tables["nh4"] = context.run_cells([Cell("censored-nh4", nh4_cv, dict(folds=5 if context.quick else 10))],
                                      desc="censored nh4")  # fmt: skip
    return tables


def report(tables: Tables, out: Path) -> str:
    """``censored_draws.csv`` and the section."""
    draws = tables["draws"]
    methods = [k for k in draws[0] if k not in ("seed", "censored") and not k.endswith((" status", " noise sd"))]
    rows = []
    for m in methods:
        rmse = [d[m] for d in draws]
        status = [d.get(m + " status") for d in draws]
        rows.append({
            "method": m, "rmse_mean": float(np.mean(rmse)), "rmse_max": float(np.max(rmse)),
            "at_most_0.20": f"{sum(r <= 0.20 for r in rmse)}/{len(rmse)}",
            "converged": f"{status.count('converged')}/{len(status)}" if status[0] else "",
        })  # fmt: skip
    write_csv([{k: v for k, v in d.items()} for d in draws], out / "censored_draws.csv")
    sampler = tables["sampler"][0]
    return (
        f"## Censored regression (Tobit by EP)\n\nSimulated set, {N} rows, noise sd {NOISE_SD}, values below 0 "
        f"reported as 0 ({min(d['censored'] for d in draws):.0%}-{max(d['censored'] for d in draws):.0%}), "
        f"{len(draws)} draws: RMSE of the latent mean to f on {GRID} grid points.\n\n"
        + md_table(rows, ["method", "rmse_mean", "rmse_max", "at_most_0.20", "converged"])
        + _per_seed_section(draws)
        + f"\n\nEP against elliptical slice sampling (40 rows, kernel {sampler['kernel']}):\n\n"
        + md_table([sampler], ["status", "sampler_converged", "mean_gap_sd", "var_ratio_min", "var_ratio_max"])
        + _nh4_section(tables["nh4"][0])
    )


#: the per-seed table's columns: the dense Tobit fits, short names
PER_SEED = {
    "ML-II": "Tobit(lower=0), EP, ML-II",
    "MAP": "Tobit(lower=0), EP",
    "CCD (MAP's prior)": "Tobit(lower=0), EP, CCD",
    "CCD (ML-II's flat prior)": "Tobit(lower=0), EP, ML-II, CCD",
    "MAP, 30 inducing": "Tobit(lower=0), EP, 30 inducing inputs",
}


def _per_seed_section(draws: list[dict[str, Any]]) -> str:
    """Each draw's RMSE per dense Tobit fit: the seed where a plug-in of the hyperparameters misses shows."""
    cols = [short for short, name in PER_SEED.items() if name in draws[0]]
    rows = [{"seed": d["seed"], "censored": f"{d['censored']:.0%}"} | {c: d[PER_SEED[c]] for c in cols} for d in draws]
    return (
        '\n\nPer draw, the Tobit fits\' RMSE (ML-II: `prior=None`; MAP: the default `prior="auto"`; CCD: '
        '`integrate="ccd"`, the predictive averaged over the hyperparameters):\n\n'
        + md_table(rows, ["seed", "censored", *cols])
    )


def _nh4_section(nh4: dict[str, Any]) -> str:
    rows = [{"method": k, "test_censored_lpd": v} for k, v in nh4["lpd"].items()]
    return (
        f"\n\nAmmonium in precipitation, Olympic National Park (`relaxep.datasets.load_nh4`: {nh4['n']} samples, "
        f"{nh4['censored']} below a detection limit), log concentration against time, {nh4['folds']}-fold CV, mean "
        "held-out censored log likelihood (higher is better):\n\n"
        + md_table(rows, ["method", "test_censored_lpd"])
        + "\n"
    )


STUDY = Study("censored", run, report, paper=False, title="censored GP regression by EP")
