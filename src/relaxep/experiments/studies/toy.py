r"""Paper Section 7.1: posterior accuracy on a five-point linear problem (Figure 1).

With the linear kernel :math:`k(x, x') = x^\top x'` the latent function is
:math:`f(x) = w^\top x` with :math:`w \sim N(0, I_2)`, and the exact posterior of
:math:`w` is available: the likelihood :math:`\prod_i t(y_i x_i^\top w)` of the noisy
step depends on the direction :math:`\theta` of :math:`w` only, and is constant on the
arcs between the angles where some :math:`x_i^\top w` changes sign.  In polar
coordinates the radial integrals are closed forms (:math:`\int_0^\infty r^{k+1}
e^{-r^2/2} dr = 1, \sqrt{\pi/2}, 2` for :math:`k = 0, 1, 2`), and the angular ones are
integrals of :math:`1, u(\theta), u u^\top` over arcs, also closed forms, so the
quadrature is exact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from relaxep.datasets import make_toy
from relaxep.experiments import plotting
from relaxep.experiments.claims import PEP
from relaxep.experiments.methods import fit_and_score, method
from relaxep.experiments.runner import Cell
from relaxep.experiments.study import Study, StudyContext, Tables
from relaxep.experiments.tables import md_table, write_csv
from relaxep.inference import InferenceResult
from relaxep.likelihoods import NoisyStep
from relaxep.sites import EP, PowerEP, RelaxedEP

__all__ = ["STUDY", "exact_linear_posterior", "toy_cells", "weight_posterior"]

Array = NDArray[np.float64]


def exact_linear_posterior(X: Array, y: Array, eps: float) -> tuple[Array, Array, float]:
    r"""Exact posterior of :math:`w` for :math:`p(w) = N(0, I_2)` and the noisy step.

    .. math::

        Z = \frac{1}{2\pi}\sum_k L_k (b_k - a_k), \quad
        E[w] = \frac{\sqrt{\pi/2}}{2\pi Z}\sum_k L_k \int_{a_k}^{b_k} u\,d\theta, \quad
        E[w w^\top] = \frac{2}{2\pi Z}\sum_k L_k \int_{a_k}^{b_k} u u^\top d\theta,

    over the arcs :math:`(a_k, b_k)` on which
    :math:`L(\theta) = \prod_i [\epsilon + (1 - 2\epsilon)\Theta(y_i x_i^\top u(\theta))]`
    is constant, :math:`u(\theta) = (\cos\theta, \sin\theta)`.

    Returns
    -------
    mean : ndarray (2,)
    cov : ndarray (2, 2)
    log_z : float
        :math:`\log p(y \mid X)`.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    if X.ndim != 2 or X.shape[1] != 2 or X.shape[0] != y.shape[0]:
        raise ValueError(f"need X of shape (n, 2) and y of shape (n,), got {X.shape} and {y.shape}")
    phi = np.arctan2(X[:, 1], X[:, 0])
    breaks = np.sort(np.mod(np.concatenate([phi + np.pi / 2, phi - np.pi / 2]), 2 * np.pi))
    a = np.concatenate([[0.0], breaks])
    b = np.concatenate([breaks, [2 * np.pi]])
    mid = 0.5 * (a + b)
    g = y[None, :] * (np.stack([np.cos(mid), np.sin(mid)], 1) @ X.T)
    lik = np.prod(np.where(g > 0, 1.0 - eps, eps), axis=1)
    z = np.sum(lik * (b - a)) / (2 * np.pi)
    int_u = np.stack([np.sin(b) - np.sin(a), np.cos(a) - np.cos(b)], 1)
    s2 = (np.sin(2 * b) - np.sin(2 * a)) / 4
    int_cc = (b - a) / 2 + s2
    int_ss = (b - a) / 2 - s2
    int_cs = (np.sin(b) ** 2 - np.sin(a) ** 2) / 2
    mean = np.sqrt(np.pi / 2) * (lik @ int_u) / (2 * np.pi * z)
    second = 2.0 * np.array([[lik @ int_cc, lik @ int_cs], [lik @ int_cs, lik @ int_ss]]) / (2 * np.pi * z)
    cov = second - np.outer(mean, mean)
    return mean, cov, float(np.log(z))


def weight_posterior(result: InferenceResult, X: Array) -> tuple[Array, Array]:
    r"""Gaussian posterior of :math:`w` implied by the sites of a linear-kernel fit.

    :math:`\Sigma_w = (I + X^\top T X)^{-1}`, :math:`\mu_w = \Sigma_w X^\top \nu`.
    """
    prec = np.eye(X.shape[1]) + X.T @ (result.site_precision[:, None] * X)
    cov = np.linalg.solve(prec, np.eye(X.shape[1]))
    cov = 0.5 * (cov + cov.T)
    return cov @ (X.T @ result.site_mean_precision), cov


def _toy_cell(eps: float, spec: dict[str, Any], max_sweeps: int, tol: float) -> dict[str, Any]:
    X, y, _ = make_toy()
    exact_mean, exact_cov, _ = exact_linear_posterior(X, y, eps)
    row, res = fit_and_score(X @ X.T, y, None, None, None, NoisyStep(eps), spec, max_sweeps=max_sweeps, tol=tol)
    mean_w, cov_w = weight_posterior(res, X)
    row.update(
        eps=eps,
        rule=spec["class"],
        u=spec["params"].get("u", 1.0) if spec["class"] == "PowerEP" else np.nan,
        c=spec["params"].get("c", np.nan),
        variant=spec["params"].get("variant", "derived") if spec["class"] == "RelaxedEP" else "",
        damping=spec["params"].get("damping", 1.0),
        mse_mean=float(np.mean((mean_w - exact_mean) ** 2)),
        mse_cov=float(np.mean((cov_w - exact_cov) ** 2)),
        mean_w=mean_w.tolist(),
        exact_mean_w=exact_mean.tolist(),
    )
    return row


def toy_cells(quick: bool = False, max_sweeps: int = 200, tol: float = 1e-4) -> list[Cell]:
    """Cells of the toy study: ``eps`` in {0.1, 0.2, 0.25} x EP, damped EP, Power EP over a
    grid of ``u``, REP (derived and printed) over a log grid of ``c``; converged when
    ``R < tol`` (stricter than the paper's 1e-3, since the study measures the fixed point)."""
    u_grid = (0.2, 0.5, 0.8, 1.0) if quick else np.round(np.linspace(0.1, 1.0, 10), 3)
    c_grid = np.logspace(-3, 3, 7 if quick else 25)
    specs = [method("EP", EP()), method("EP damped 0.5", EP(damping=0.5))]
    specs += [method(f"PEP u={u:g}", PowerEP(u=float(u))) for u in u_grid]
    for variant, prefix in (("derived", "REP"), ("paper", "REP-paper")):
        specs += [method(f"{prefix} c={c:.3g}", RelaxedEP(c=float(c), variant=variant)) for c in c_grid]
        specs += [method(f"{prefix} c=20", RelaxedEP(c=20.0, variant=variant))]  # the paper's Figure 1(a)
    return [
        Cell(f"toy-eps{eps}-{s['label']}", _toy_cell, dict(eps=eps, spec=s, max_sweeps=max_sweeps, tol=tol))
        for eps in (0.1, 0.2, 0.25)
        for s in specs
    ]


def run(context: StudyContext) -> Tables:
    """Run (or read from the cache) the toy study; one row per ``eps`` x method."""
    return {"toy": context.run_cells(toy_cells(context.quick), desc="toy")}


def report(tables: Tables, out: Path) -> str:
    """``toy.csv``, Figure 1 and the section."""
    toy = tables["toy"]
    write_csv(toy, out / "toy.csv")
    X, y, _ = make_toy()
    plotting.plot_toy_boundaries(toy, X, y, out / "figures" / "toy_boundaries.png")
    plotting.plot_toy_errors(toy, out / "figures" / "toy_errors.png")
    shown = ("EP", "EP damped 0.5", PEP, "REP c=20", "REP-paper c=20", "REP c=0.1", "REP c=1")
    at = [r for r in toy if r["eps"] == 0.2 and r["method"] in shown]
    return (
        "## Toy (Section 7.1, Figure 1)\n\nFive 2-D points, the right-most mislabelled, linear kernel, "
        "noisy step with eps = 0.2 (and 0.1, 0.25); exact posterior of w by exact angular quadrature. "
        "MSE over the 2 entries of the mean and the 4 of the covariance of w.\n\n"
        + md_table(at, ["method", "status", "sweeps", "mse_mean", "mse_cov", "frac_relaxed"])
        + "\n\n![boundaries](figures/toy_boundaries.png) ![errors](figures/toy_errors.png)\n"
    )


STUDY = Study("toy", run, report, title="reproduction of Qi & Guo, relaxed EP")
