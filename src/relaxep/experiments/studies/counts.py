r"""Counts by EP (``relaxep reproduce counts``): Poisson and negative-binomial GP regression.

1. **A simulated log-Gaussian Cox process** on ``[0, 10]`` with log-rate :math:`g(x) = 2.5 + \sin x +
   \tfrac12\cos 2.3x`, counts in 100 bins of width :math:`w` drawn from :math:`\mathrm{Poisson}(w e^{g})`.
   The score is the RMSE of the predicted rate (per unit length) to the true :math:`e^{g}` at the bin
   centres.  relaxep: ``GPRegressor(C * RBF + C, likelihood=Poisson() | NegativeBinomial())`` with
   ``exposure = w`` (the constant kernel carries the log-rate's level).  The naive GP regressions a user
   would try first, in the same run: scikit-learn's ``GaussianProcessRegressor(C * RBF + WhiteKernel,
   normalize_y=True)`` on the rates and on :math:`\log(1 + y)` (back-transformed).
2. **Against the sampler**: on 40 bins of the same process (the kernel fixed at the Poisson fit's), EP's
   latent marginals against elliptical slice sampling (:func:`relaxep.mcmc.elliptical_slice`; 4 chains),
   for both likelihoods: the largest difference of the means in sampler standard deviations and the range
   of the variance ratios.
3. **The coal-mining disasters** (:func:`relaxep.datasets.load_coal_mining`, 1851-1962; Jarrett 1979):
   10-fold cross-validated mean test log predictive density of the yearly counts, relaxep's two likelihoods
   against scikit-learn's ``PoissonRegressor`` on a cubic spline basis of the year, with every fit's status.

``--quick``: three draws, a shorter chain, five folds.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from relaxep.experiments.runner import Cell
from relaxep.experiments.study import Study, StudyContext, Tables
from relaxep.experiments.tables import md_table, write_csv

__all__ = ["STUDY", "lgcp", "log_rate", "run"]

BINS = 100


def log_rate(x: np.ndarray) -> np.ndarray:
    """The simulated process's log-rate :math:`2.5 + \\sin x + 0.5\\cos 2.3x`."""
    return 2.5 + np.sin(x) + 0.5 * np.cos(2.3 * x)


def lgcp(bins: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Bin centres ``(bins, 1)``, counts and the bin width of one draw of the process on ``[0, 10]``."""
    width = 10.0 / bins
    x = (np.arange(bins) + 0.5) * width
    return x[:, None], np.random.default_rng(seed).poisson(width * np.exp(log_rate(x))).astype(float), width


def _likelihoods() -> dict[str, Any]:
    from relaxep import NegativeBinomial, Poisson

    return {"relaxep Poisson EP": Poisson(), "relaxep negative binomial EP": NegativeBinomial()}


def _kernel() -> Any:
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    return C(1.0) * RBF(1.0) + C(1.0)


def simulated_draw(seed: int) -> dict[str, Any]:
    """One draw: the rate RMSE of every method and relaxep's statuses."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from relaxep import GPRegressor

    warnings.simplefilter("ignore")
    X, y, width = lgcp(BINS, seed)
    truth = np.exp(log_rate(X[:, 0]))
    row: dict[str, Any] = {"seed": seed}
    for name, lik in _likelihoods().items():
        model = GPRegressor(_kernel(), likelihood=lik, random_state=0).fit(X, y, exposure=np.full(y.size, width))
        row[name] = float(np.sqrt(np.mean((model.predict(X) - truth) ** 2)))
        row[name + " status"] = model.result_.status
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    rate = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(X, y / width).predict(X)
    row["scikit-learn GPR on the rates"] = float(np.sqrt(np.mean((rate - truth) ** 2)))
    logged = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(X, np.log1p(y)).predict(X)
    row["scikit-learn GPR on log1p counts"] = float(np.sqrt(np.mean((np.expm1(logged) / width - truth) ** 2)))
    return row


def against_sampler(quick: bool) -> dict[str, Any]:
    """EP's latent marginals against elliptical slice sampling on 40 bins, for both likelihoods."""
    from threadpoolctl import threadpool_limits

    from relaxep import GPRegressor, infer
    from relaxep.mcmc import elliptical_slice
    from relaxep.posterior import DensePrior

    warnings.simplefilter("ignore")
    X, y, width = lgcp(40, 0)
    kernel = GPRegressor(_kernel(), likelihood=_likelihoods()["relaxep Poisson EP"], random_state=0)
    kernel = kernel.fit(X, y, exposure=np.full(y.size, width)).kernel_
    prior = DensePrior.from_kernel(kernel, X, 1e-6)
    targets = np.column_stack([y, np.full(y.size, np.log(width))])
    row: dict[str, Any] = {"kernel": str(kernel)}
    for name, lik in _likelihoods().items():
        result = infer(prior, targets, lik, "auto", tol=1e-8)
        with threadpool_limits(1):
            mc = elliptical_slice(prior.K, y, _OffsetLikelihood(lik, np.log(width)), n_samples=1000 if quick else 4000,
                                  n_chains=4, random_state=0)  # fmt: skip
        sd = np.sqrt(mc.var)
        row[name] = {
            "status": result.status,
            "mean_gap_sd": float(np.max(np.abs(result.mean - mc.mean) / sd)),
            "var_ratio_min": float(np.min(result.marginal_var / mc.var)),
            "var_ratio_max": float(np.max(result.marginal_var / mc.var)),
        }
    return row


class _OffsetLikelihood:
    """``likelihood`` at counts with one fixed log exposure, for the sampler (which takes one target per site)."""

    def __init__(self, likelihood: Any, offset: float) -> None:
        self.likelihood, self.offset = likelihood, offset

    def check_targets(self, y: Any, *args: Any, **kwargs: Any) -> Any:
        return np.asarray(y, dtype=float)

    def log_lik(self, y: Any, f: Any) -> Any:
        return self.likelihood.log_lik(y, np.asarray(f) + self.offset)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.likelihood, name)


def coal(folds: int) -> dict[str, Any]:
    """Cross-validated test log predictive densities on the coal-mining disasters."""
    from scipy.stats import poisson
    from sklearn.linear_model import PoissonRegressor
    from sklearn.model_selection import KFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import SplineTransformer

    from relaxep import GPRegressor
    from relaxep.datasets import load_coal_mining

    warnings.simplefilter("ignore")
    years, counts = load_coal_mining()
    X = ((years - years.mean()) / years.std())[:, None]
    lpd: dict[str, list[float]] = {}
    status: dict[str, list[str]] = {}
    for train, test in KFold(folds, shuffle=True, random_state=0).split(X):
        for name, lik in _likelihoods().items():
            model = GPRegressor(_kernel(), likelihood=lik, random_state=0).fit(X[train], counts[train])
            lpd.setdefault(name, []).extend(model.log_predictive_density(X[test], counts[test]).tolist())
            status.setdefault(name, []).append(model.result_.status)
        glm = make_pipeline(SplineTransformer(n_knots=10), PoissonRegressor(alpha=1e-3, max_iter=1000))
        mu = glm.fit(X[train], counts[train]).predict(X[test])
        lpd.setdefault("scikit-learn PoissonRegressor, splines", []).extend(poisson.logpmf(counts[test], mu).tolist())
    return {
        "folds": folds,
        "lpd": {k: float(np.mean(v)) for k, v in lpd.items()},
        "converged": {k: f"{v.count('converged')}/{len(v)}" for k, v in status.items()},
    }


def run(context: StudyContext) -> Tables:
    draws = 3 if context.quick else 10
    tables = {"simulated": context.run_cells([Cell(f"counts-draw-{s}", simulated_draw, dict(seed=s))
                                              for s in range(draws)], desc="counts")}  # fmt: skip
    tables["sampler"] = context.run_cells([Cell("counts-sampler", against_sampler, dict(quick=context.quick))],
                                          desc="counts sampler")  # fmt: skip
    tables["coal"] = context.run_cells([Cell("counts-coal", coal, dict(folds=5 if context.quick else 10))],
                                       desc="counts coal")  # fmt: skip
    return tables


def report(tables: Tables, out: Path) -> str:
    """``counts_simulated.csv``, ``counts_coal.csv`` and the section."""
    draws = tables["simulated"]
    methods = [k for k in draws[0] if k != "seed" and not k.endswith(" status")]
    sim = []
    naive = min(np.mean([d[m] for d in draws]) for m in methods if m.startswith("scikit-learn"))
    for m in methods:
        rmse = float(np.mean([d[m] for d in draws]))
        st = [d.get(m + " status") for d in draws]
        sim.append({"method": m, "rate_rmse": rmse, "over_better_naive": rmse / naive,
                    "converged": f"{st.count('converged')}/{len(st)}" if st[0] else ""})  # fmt: skip
    write_csv(sim, out / "counts_simulated.csv")
    sampler = tables["sampler"][0]
    mc = [{"likelihood": k, **v} for k, v in sampler.items() if isinstance(v, dict)]
    coal_row = tables["coal"][0]
    coal_rows = [{"method": k, "test_lpd": v, "converged": coal_row["converged"].get(k, "")}
                 for k, v in coal_row["lpd"].items()]  # fmt: skip
    write_csv(coal_rows, out / "counts_coal.csv")
    return (
        f"## Counts (Poisson and negative binomial by EP)\n\nSimulated log-Gaussian Cox process, {BINS} bins, "
        f"{len(draws)} draws: RMSE of the predicted rate to the true rate.\n\n"
        + md_table(sim, ["method", "rate_rmse", "over_better_naive", "converged"])
        + f"\n\nEP against elliptical slice sampling (40 bins, kernel {sampler['kernel']}):\n\n"
        + md_table(mc, ["likelihood", "status", "mean_gap_sd", "var_ratio_min", "var_ratio_max"])
        + f"\n\nCoal-mining disasters, {coal_row['folds']}-fold CV, mean test log predictive density:\n\n"
        + md_table(coal_rows, ["method", "test_lpd", "converged"])
        + "\n"
    )


STUDY = Study("counts", run, report, paper=False, title="count GP regression by EP (Poisson, negative binomial)")
