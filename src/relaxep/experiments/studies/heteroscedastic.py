r"""Input-dependent noise by EP (:class:`~relaxep.GPHeteroscedasticRegressor`) against a constant-noise GP and the
two-stage "most likely heteroscedastic GP".

``relaxep reproduce heteroscedastic``.  The motorcycle crash readings (:func:`~relaxep.datasets.load_mcycle`, 133
rows): 10-fold cross-validation (``KFold(10, shuffle=True, random_state=0)``), time and acceleration standardised on
each training fold (the held-out rows by the training fold's mean and sd); per fold, the held-out rows' mean
negative log predictive density (NLPD, in those standardised units of ``y``) and the RMSE of the predictive mean,
then each averaged over the folds.  The methods:

* ``GPHeteroscedasticRegressor()`` with its defaults (both kernels ``ConstantKernel(1.0) * RBF(1.0)``, EP);
* scikit-learn's ``GaussianProcessRegressor(ConstantKernel(1.0) * RBF(1.0) + WhiteKernel(), normalize_y=True)``,
  its predictive variance the latent's plus the white noise;
* the two-stage "most likely heteroscedastic GP" (after Kersting, Plagemann, Pfaff & Burgard 2007, one round):
  the GPR above, then a second GPR of the same form on :math:`z_i = \log r_i^2 + 1.2704` (:math:`r_i` the first
  fit's residual; 1.2704 is :math:`-E[\log\chi^2_1]`, the bias of a log squared residual), then a GPR with kernel
  ``ConstantKernel(1.0) * RBF(1.0)`` and per-row noise variance :math:`e^{\hat z_i}` (``alpha``); its predictive
  variance at a new input is the latent's plus :math:`e^{\hat z_*}`.

A simulated set with known noise: :math:`f(x) = \sin x` on :math:`[-3, 3]`, noise sd
:math:`0.05 \cdot 10^{(1 - \cos x)/2}` (0.05 at 0, 0.5 at the ends), 200 uniform inputs, 3 seeds: the RMSE of
each method's mean to :math:`f` and of its noise sd (the heteroscedastic fit's posterior mean of
:math:`e^{g/2}`) to the true sd, on 400 grid points.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from relaxep.experiments.runner import Cell
from relaxep.experiments.study import Study, StudyContext, Tables
from relaxep.experiments.tables import md_table, write_csv

__all__ = ["STUDY", "heteroscedastic_set", "mcycle_fold", "most_likely_gp"]

FOLDS, N_SIM, GRID = 10, 200, 400
#: :math:`E[\log\chi^2_1] = \psi(1/2) + \log 2`
LOG_CHI2_MEAN = -1.2703628454614782
METHODS = ("GPHeteroscedasticRegressor (EP)", "scikit-learn GPR + WhiteKernel", "two-stage most likely GP")


def heteroscedastic_set(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)``: the simulated set (module docstring)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3.0, 3.0, size=(n, 1))
    return X, np.sin(X[:, 0]) + _true_sd(X[:, 0]) * rng.standard_normal(n)


def _true_sd(x: np.ndarray) -> np.ndarray:
    return 0.05 * 10.0 ** ((1.0 - np.cos(x)) / 2.0)


def _gpr(X: np.ndarray, y: np.ndarray, white: bool = True, alpha: Any = 1e-10) -> Any:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    kernel = C(1.0) * RBF(1.0) + WhiteKernel() if white else C(1.0) * RBF(1.0)
    return GaussianProcessRegressor(kernel, alpha=alpha, normalize_y=True, random_state=0).fit(X, y)


@dataclass(frozen=True)
class _Fit:
    """A fitted method: its predictive mean, log predictive density and noise sd at new inputs, its fit time."""

    mean: Callable[[np.ndarray], np.ndarray]
    log_density: Callable[[np.ndarray, np.ndarray], np.ndarray]
    noise_sd: Callable[[np.ndarray], np.ndarray]
    fit_s: float
    status: str = ""


def _gaussian_fit(mean_var: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], noise_sd: Callable,
                  fit_s: float) -> _Fit:  # fmt: skip
    """A fit whose predictive is Gaussian, ``mean_var(X) -> (mean, predictive variance)``."""

    def log_density(Xt: np.ndarray, yt: np.ndarray) -> np.ndarray:
        mean, var = mean_var(Xt)
        return -0.5 * np.log(2.0 * np.pi * var) - 0.5 * (yt - mean) ** 2 / var

    return _Fit(lambda Xt: mean_var(Xt)[0], log_density, noise_sd, fit_s)


def most_likely_gp(X: np.ndarray, y: np.ndarray) -> _Fit:
    """The two-stage fit (module docstring)."""
    start = time.perf_counter()
    first = _gpr(X, y)
    squared = (y - first.predict(X)) ** 2
    noise_fit = _gpr(X, np.log(np.maximum(squared, 1e-12 * np.var(y))) - LOG_CHI2_MEAN)
    # (alpha is added to the kernel matrix in normalize_y's units)
    final = _gpr(X, y, white=False, alpha=np.exp(noise_fit.predict(X)) / np.var(y))
    elapsed = time.perf_counter() - start

    def mean_var(Xt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m, s = final.predict(Xt, return_std=True)
        return m, s**2 + np.exp(noise_fit.predict(Xt))

    return _gaussian_fit(mean_var, lambda Xt: np.exp(0.5 * noise_fit.predict(Xt)), elapsed)


def _fits(X: np.ndarray, y: np.ndarray) -> dict[str, _Fit]:
    """Each method (:data:`METHODS`) fitted on ``(X, y)``."""
    from relaxep import GPHeteroscedasticRegressor
    from relaxep._threads import small_matrix_threads

    with warnings.catch_warnings(), small_matrix_threads():  # (every method with one BLAS thread: fair times)
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        het = GPHeteroscedasticRegressor(random_state=0).fit(X, y)
        het_fit = _Fit(het.predict, het.log_predictive_density, het.predict_noise, time.perf_counter() - start,
                       het.result_.status)  # fmt: skip
        start = time.perf_counter()
        gpr = _gpr(X, y)
        elapsed = time.perf_counter() - start
        noise_sd = float(np.sqrt(gpr.kernel_.k2.noise_level)) * float(np.std(y))

        def gpr_mean_var(Xt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            mean, sd = gpr.predict(Xt, return_std=True)  # (the WhiteKernel's noise is in sd)
            return mean, sd**2

        gpr_fit = _gaussian_fit(gpr_mean_var, lambda Xt: np.full(Xt.shape[0], noise_sd), elapsed)
        return dict(zip(METHODS, (het_fit, gpr_fit, most_likely_gp(X, y)), strict=True))


def mcycle_fold(fold: int, folds: int = FOLDS) -> dict[str, Any]:
    """One fold of the mcycle cross-validation: NLPD, RMSE and fit time per method (module docstring)."""
    from sklearn.model_selection import KFold

    from relaxep.datasets import load_mcycle

    times, accel = load_mcycle()
    train, test = list(KFold(folds, shuffle=True, random_state=0).split(times))[fold]
    (mx, sx), (my, sy) = (times[train].mean(), times[train].std()), (accel[train].mean(), accel[train].std())
    X, Xt = ((times[train] - mx) / sx)[:, None], ((times[test] - mx) / sx)[:, None]
    y, yt = (accel[train] - my) / sy, (accel[test] - my) / sy
    fits = _fits(X, y)
    row: dict[str, Any] = {"fold": fold, "n_test": int(test.size), "status": fits[METHODS[0]].status}
    for name, fit in fits.items():
        row[name + " nlpd"] = -float(np.mean(fit.log_density(Xt, yt)))
        row[name + " rmse"] = float(np.sqrt(np.mean((fit.mean(Xt) - yt) ** 2)))
        row[name + " sse"] = float(np.sum((fit.mean(Xt) - yt) ** 2))
        row[name + " fit_s"] = fit.fit_s
    return row


def mcycle_curves() -> dict[str, Any]:
    """The heteroscedastic fit and the GPR on all of mcycle (standardised), on a grid in the data's units: the
    figure's curves, and the fits' times."""
    from relaxep import GPHeteroscedasticRegressor
    from relaxep.datasets import load_mcycle

    times, accel = load_mcycle()
    (mx, sx), (my, sy) = (times.mean(), times.std()), (accel.mean(), accel.std())
    X, y = ((times - mx) / sx)[:, None], (accel - my) / sy
    grid = np.linspace(times.min(), times.max(), 300)
    Xg = ((grid - mx) / sx)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        het = GPHeteroscedasticRegressor(random_state=0).fit(X, y)
        elapsed = time.perf_counter() - start
        gpr = _gpr(X, y)
    low, high = het.predict_interval(Xg, level=0.9)
    g_mean, g_sd = gpr.predict(Xg, return_std=True)
    return {
        "fit_s": elapsed, "status": het.result_.status, "n_sweeps": het.n_iter_,
        "kernel": str(het.kernel_), "noise_kernel": str(het.noise_kernel_), "noise_mean": het.noise_mean_,
        "times": times.tolist(), "accel": accel.tolist(), "grid": grid.tolist(),
        "mean": (my + sy * het.predict(Xg)).tolist(), "low": (my + sy * low).tolist(),
        "high": (my + sy * high).tolist(), "noise_sd": (sy * het.predict_noise(Xg)).tolist(),
        "gpr_low": (my + sy * (g_mean - 1.645 * g_sd)).tolist(),
        "gpr_high": (my + sy * (g_mean + 1.645 * g_sd)).tolist(),
    }  # fmt: skip


def simulated_draw(seed: int, n: int = N_SIM) -> dict[str, Any]:
    """One draw of the simulated set: each method's RMSE to f and to the noise sd on the grid."""
    X, y = heteroscedastic_set(n, seed)
    Xg = np.linspace(-3.0, 3.0, GRID)[:, None]
    fits = _fits(X, y)
    row: dict[str, Any] = {"seed": seed, "n": n, "status": fits[METHODS[0]].status}
    for name, fit in fits.items():
        row[name + " rmse_f"] = float(np.sqrt(np.mean((fit.mean(Xg) - np.sin(Xg[:, 0])) ** 2)))
        row[name + " rmse_sd"] = float(np.sqrt(np.mean((fit.noise_sd(Xg) - _true_sd(Xg[:, 0])) ** 2)))
        row[name + " fit_s"] = fit.fit_s
    return row


def run(context: StudyContext) -> Tables:
    """The cells; ``quick``: the first 2 of the 10 folds and one simulated draw of 100 rows."""
    folds = range(2) if context.quick else range(FOLDS)
    seeds, n = (range(1), 100) if context.quick else (range(3), N_SIM)
    return {
        "mcycle": context.run_cells(
            [Cell(f"mcycle-fold-{k}", mcycle_fold, dict(fold=k)) for k in folds], desc="heteroscedastic mcycle"
        ),
        "curves": context.run_cells([Cell("mcycle-curves", mcycle_curves, {})], desc="heteroscedastic figure"),
        "simulated": context.run_cells(
            [Cell(f"hetero-sim-{s}-{n}", simulated_draw, dict(seed=s, n=n)) for s in seeds],
            desc="heteroscedastic simulated",
        ),
    }


def summary(rows: list[dict[str, Any]], metrics: tuple[str, ...]) -> list[dict[str, Any]]:
    """Per method, each metric's mean over ``rows`` (folds or draws)."""
    return [{"method": m, **{k: float(np.mean([r[f"{m} {k}"] for r in rows])) for k in metrics}} for m in METHODS]


def figure(curves: dict[str, Any], path: Path) -> Path:
    """mcycle: the readings, the heteroscedastic fit's mean and 90% predictive band, and the GPR's band."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 3.8))
    ax = fig.subplots()
    grid = np.asarray(curves["grid"])
    ax.scatter(curves["times"], curves["accel"], s=8, color="0.35", label="mcycle readings", zorder=3)
    ax.plot(grid, curves["mean"], color="tab:blue", lw=1.5, label="GPHeteroscedasticRegressor mean")
    ax.fill_between(grid, curves["low"], curves["high"], color="tab:blue", alpha=0.22, label="its 90% predictive band")
    ax.plot(grid, curves["gpr_low"], color="tab:orange", lw=1.0, ls="--", label="constant-noise GPR, 90% band")
    ax.plot(grid, curves["gpr_high"], color="tab:orange", lw=1.0, ls="--")
    ax.set(xlabel="time after impact (ms)", ylabel="head acceleration (g)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def report(tables: Tables, out: Path) -> str:
    """``heteroscedastic_mcycle.csv``, ``heteroscedastic_simulated.csv``, the figure and the section."""
    mcycle, simulated, curves = tables["mcycle"], tables["simulated"], tables["curves"][0]
    write_csv(mcycle, out / "heteroscedastic_mcycle.csv")
    write_csv(simulated, out / "heteroscedastic_simulated.csv")
    (out / "figures").mkdir(parents=True, exist_ok=True)
    figure(curves, out / "figures" / "heteroscedastic.png")
    cv = summary(mcycle, ("nlpd", "rmse", "fit_s"))
    sim = summary(simulated, ("rmse_f", "rmse_sd", "fit_s"))
    statuses = [r["status"] for r in mcycle]
    rows = sum(r["n_test"] for r in mcycle)
    pooled = ", ".join(
        f"{name} {np.sqrt(sum(r.get(name + ' sse', np.nan) for r in mcycle) / rows):.4f}" for name in METHODS
    )
    return (
        "## Heteroscedastic regression (input-dependent noise by EP)\n\n"
        f"mcycle (`relaxep.datasets.load_mcycle`, 133 rows), {len(mcycle)} of {FOLDS} folds of "
        "`KFold(10, shuffle=True, random_state=0)`, time and acceleration standardised on each training fold: the "
        "held-out rows' mean NLPD (standardised units of y) and RMSE, each averaged over the folds, and the mean "
        f"fit time (s). The EP fits: {statuses.count('converged')}/{len(statuses)} converged.\n\n"
        + md_table(cv, ["method", "nlpd", "rmse", "fit_s"])
        + f"\n\nThe RMSE pooled over all held-out rows instead (one square root of the {rows} squared errors' "
        f"mean): {pooled}."
        + f"\n\nAll 133 rows: the EP fit took {curves['fit_s']:.2f} s ({curves['status']}, {curves['n_sweeps']} "
        f"sweeps), kernel {curves['kernel']}, noise kernel {curves['noise_kernel']}, noise mean "
        f"{curves['noise_mean']:.3f}.\n\n![mcycle](figures/heteroscedastic.png)\n\n"
        f"Simulated: f = sin x, noise sd 0.05 at 0 rising to 0.5 at ±3, {simulated[0]['n']} rows, "
        f"{len(simulated)} seed(s): RMSE of the mean to f and of the noise sd to the truth on {GRID} grid points, "
        "averaged over the seeds.\n\n" + md_table(sim, ["method", "rmse_f", "rmse_sd", "fit_s"]) + "\n"
    )


STUDY = Study("heteroscedastic", run, report, paper=False, title="heteroscedastic GP regression by EP")
