"""The inference methods the studies compare, as JSON-serialisable specifications.

A method is ``{"label": str, "rule": "EP" | "PowerEP" | "RelaxedEP" | ..., "params": {...}}``
so that it can be part of a cached cell's key and be rebuilt in a worker process.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from relaxep.inference import InferenceResult, infer
from relaxep.likelihoods import Likelihood
from relaxep.rules import EP, DoubleLoopEP, FractionalEP, PowerEP, RelaxedEP, SiteRule

__all__ = ["build_rule", "fit_and_score", "method", "paper_methods", "select_length_scale"]

_RULES: dict[str, type[SiteRule]] = {
    "EP": EP,
    "PowerEP": PowerEP,
    "RelaxedEP": RelaxedEP,
    "FractionalEP": FractionalEP,
    "DoubleLoopEP": DoubleLoopEP,
}


def method(label: str, rule: str, **params: Any) -> dict[str, Any]:
    """A method specification (``rule`` names a class in :mod:`relaxep.rules`)."""
    if rule not in _RULES:
        raise ValueError(f"unknown rule {rule!r}; choose one of {sorted(_RULES)}")
    return {"label": label, "rule": rule, "params": dict(params)}


def build_rule(spec: dict[str, Any]) -> SiteRule:
    """The :class:`~relaxep.rules.SiteRule` a specification describes."""
    return _RULES[spec["rule"]](**spec["params"])


def _fmt(x: float) -> str:
    return f"{x:g}"


def paper_methods(
    c_values: tuple[float, ...] = (1.0, 10.0),
    paper_c_values: tuple[float, ...] = (10.0,),
    u: float = 0.8,
    damping: float = 0.5,
) -> list[dict[str, Any]]:
    """EP, damped EP, Power EP (Appendix C) and REP (derived and as printed)."""
    methods = [
        method("EP", "EP"),
        method(f"EP damped {_fmt(damping)}", "EP", damping=damping),
        method(f"PEP u={_fmt(u)}", "PowerEP", u=u),
    ]
    methods += [method(f"REP c={_fmt(c)}", "RelaxedEP", c=c) for c in c_values]
    methods += [method(f"REP-paper c={_fmt(c)}", "RelaxedEP", c=c, variant="paper") for c in paper_c_values]
    return methods


def fit_and_score(
    K: NDArray[np.float64],
    y: NDArray[np.float64],
    K_star: NDArray[np.float64] | None,
    k_star_diag: NDArray[np.float64] | None,
    y_test: NDArray[np.float64] | None,
    likelihood: Likelihood,
    spec: dict[str, Any],
    *,
    max_sweeps: int,
    tol: float = 1e-3,
) -> tuple[dict[str, Any], InferenceResult]:
    """Run one method; return its table row and the result.

    The row holds ``method``, ``status``, ``converged`` (R < tol with no skipped site),
    ``diverged`` (NaN or an improper posterior), ``sweeps``, ``skipped`` (site visits
    skipped for improper cavities), ``time_s`` (wall time of the inference),
    ``frac_relaxed`` (fraction of sites with b > 0 at the end), ``trace`` (R per sweep)
    and, with test data, ``test_error`` (0/1 loss of ``p(y*=1) >= 1/2``, computed from the
    last proper posterior even when the run did not converge).
    """
    rule = build_rule(spec)
    start = time.perf_counter()
    res = infer(K, y, likelihood, rule, max_sweeps=max_sweeps, tol=tol)
    elapsed = time.perf_counter() - start
    row: dict[str, Any] = {
        "method": spec["label"],
        "status": res.status,
        "converged": res.status == "converged",
        "diverged": res.status == "diverged",
        "sweeps": int(res.n_sweeps),
        "skipped": int(res.n_skipped),
        "time_s": elapsed,
        "frac_relaxed": float(np.mean(res.relaxation > 0)),
        "trace": [float(r) for r in res.trace],
    }
    if K_star is not None:
        proba = res.predict_proba(K_star, k_star_diag)
        row["test_error"] = float(np.mean(np.where(proba >= 0.5, 1.0, -1.0) != y_test))
    return row, res


def select_length_scale(
    X: NDArray[np.float64],
    y: NDArray[np.float64],
    likelihood: Likelihood,
    grid: tuple[float, ...] | list[float],
    *,
    n_folds: int = 3,
    random_state: int = 0,
    max_sweeps: int = 50,
    jitter: float = 1e-6,
) -> tuple[float, list[float]]:
    r"""RBF length-scale by ``n_folds``-fold cross-validation on ``(X, y)``.

    Each candidate is scored by the held-out negative log predictive probability
    :math:`-\frac{1}{n}\sum_j \log p(y_j \mid x_j, \mathcal{D}_{-j})` of damped EP (step
    0.5, which converges where plain EP oscillates), unit amplitude plus ``jitter``.
    Returns the best length-scale and the score of every candidate.
    """
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.model_selection import StratifiedKFold

    folds = list(StratifiedKFold(n_folds, shuffle=True, random_state=random_state).split(X, y))
    scores = []
    for ell in grid:
        kernel = RBF(float(ell))
        total = 0.0
        for train, test in folds:
            K = kernel(X[train]) + jitter * np.eye(len(train))
            res = infer(K, y[train], likelihood, EP(damping=0.5), max_sweeps=max_sweeps, tol=1e-3)
            p = res.predict_proba(kernel(X[test], X[train]), np.full(len(test), 1.0 + jitter))
            p_obs = np.where(y[test] > 0, p, 1.0 - p)
            total += -np.sum(np.log(np.clip(p_obs, 1e-300, None)))
        scores.append(total / len(y))
    return float(grid[int(np.argmin(scores))]), scores
