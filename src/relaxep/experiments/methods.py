"""The methods the studies compare, as JSON specifications, and the one fitting cell they share.

A specification is ``{"label": str, "class": name, "params": {...}}`` built from a rule's or
method's own ``get_params()`` (:func:`method`), so that it can be part of a cached cell's key
and be rebuilt in a worker process (:func:`build`).  A class exported by :mod:`relaxep` is
named by its public name (``"EP"``, ``"Auto"``); any other as ``"module:qualname"``.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.gaussian_process.kernels import RBF
from sklearn.model_selection import StratifiedKFold

import relaxep
from relaxep._params import ParamsMixin
from relaxep.inference import InferenceMethod, InferenceResult, infer
from relaxep.likelihoods import Likelihood
from relaxep.sites import EP, SiteRule

__all__ = [
    "JITTER",
    "binary_proba",
    "build",
    "error_rate",
    "fit_and_score",
    "format_number",
    "method",
    "paper_methods",
    "select_length_scale",
]

#: latent noise added to every study's unit-amplitude RBF kernel (the noise-free step needs some)
JITTER = 1e-6

Array = NDArray[np.float64]


def _encode(value: Any) -> Any:
    if isinstance(value, ParamsMixin):
        cls = type(value)
        name = cls.__name__ if getattr(relaxep, cls.__name__, None) is cls else f"{cls.__module__}:{cls.__qualname__}"
        return {"class": name, "params": {k: _encode(v) for k, v in value.get_params().items()}}
    if isinstance(value, tuple | list):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and "class" in value:
        name = value["class"]
        if ":" in name:
            module, qualname = name.split(":")
            cls = getattr(importlib.import_module(module), qualname)
        else:
            cls = getattr(relaxep, name)
        return cls(**{k: _decode(v) for k, v in value["params"].items()})
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


def method(label: str, obj: SiteRule | InferenceMethod) -> dict[str, Any]:
    """The specification of ``obj`` (a site rule or an inference method), labelled ``label``."""
    return {"label": label, **_encode(obj)}


def build(spec: dict[str, Any]) -> SiteRule | InferenceMethod:
    """The rule or method a specification describes."""
    return _decode({"class": spec["class"], "params": spec["params"]})


def format_number(x: float) -> str:
    """``x`` in the shortest general format (labels such as ``REP c=0.1``)."""
    return f"{x:g}"


def paper_methods(
    c_values: tuple[float, ...] = (1.0, 10.0),
    paper_c_values: tuple[float, ...] = (10.0,),
    u: float = 0.8,
    damping: float = 0.5,
) -> list[dict[str, Any]]:
    """EP, damped EP, Power EP (Appendix C) and REP (derived and as printed)."""
    methods = [
        method("EP", EP()),
        method(f"EP damped {format_number(damping)}", EP(damping=damping)),
        method(f"PEP u={format_number(u)}", relaxep.PowerEP(u=u)),
    ]
    methods += [method(f"REP c={format_number(c)}", relaxep.RelaxedEP(c=c)) for c in c_values]
    methods += [
        method(f"REP-paper c={format_number(c)}", relaxep.RelaxedEP(c=c, variant="paper")) for c in paper_c_values
    ]
    return methods


def binary_proba(res: InferenceResult, K_star: Array, k_star_diag: Array) -> Array:
    """:math:`P(y_* = +1)` at test points: a binary run's likelihood predictive at its latent predictive."""
    mean, var = res.predict_latent(K_star, k_star_diag)
    return np.clip(res.likelihood.predict(mean, np.maximum(var, 1e-300)), 0.0, 1.0)


def error_rate(proba: Array, y_test: Array) -> float:
    """0/1 loss of the decision ``p(y* = +1) >= 1/2`` against labels in {-1, +1}."""
    return float(np.mean(np.where(proba >= 0.5, 1.0, -1.0) != y_test))


def fit_and_score(
    K: Array,
    y: Array,
    K_star: Array | None,
    k_star_diag: Array | None,
    y_test: Array | None,
    likelihood: Likelihood,
    spec: dict[str, Any],
    *,
    max_sweeps: int,
    tol: float = 1e-3,
) -> tuple[dict[str, Any], InferenceResult]:
    """Run one method; return its table row and the result.

    Converged means the paper's criterion, :math:`R = \\|\\alpha_t - \\alpha_{t-1}\\| <` ``tol`` with no
    skipped site.  The row holds ``method``, ``status``, ``converged``,
    ``diverged`` (NaN or an improper posterior), ``sweeps``, ``skipped`` (site visits
    skipped for improper cavities), ``time_s`` (wall time of the inference),
    ``frac_relaxed`` (fraction of sites with b > 0 at the end), ``trace`` (R per sweep)
    and, with test data, ``test_error`` (:func:`error_rate`, computed from the last proper
    posterior even when the run did not converge).
    """
    start = time.perf_counter()
    res = infer(K, y, likelihood, build(spec), max_sweeps=max_sweeps, tol=tol, criterion="alpha")
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
        row["test_error"] = error_rate(binary_proba(res, K_star, k_star_diag), y_test)
    return row, res


def fit_rbf_cell(
    data: tuple[Array, Array, Array, Array],
    length_scale: float,
    likelihood: Likelihood,
    spec: dict[str, Any],
    max_sweeps: int,
    boundary_grid: Array | None = None,
) -> tuple[dict[str, Any], InferenceResult]:
    """:func:`fit_and_score` on ``(X, y, X_test, y_test)`` with a unit-amplitude RBF kernel plus
    :data:`JITTER`; with ``boundary_grid`` the row also holds the latent mean on that square grid."""
    X, y, X_test, y_test = data
    kernel = RBF(length_scale)
    K = kernel(X) + JITTER * np.eye(len(y))
    k_diag = np.full(len(y_test), 1.0 + JITTER)
    row, res = fit_and_score(K, y, kernel(X_test, X), k_diag, y_test, likelihood, spec, max_sweeps=max_sweeps)
    if boundary_grid is not None:
        gx, gy = np.meshgrid(boundary_grid, boundary_grid)
        G = np.column_stack([gx.ravel(), gy.ravel()])
        mean, _ = res.predict_latent(kernel(G, X), np.full(len(G), 1.0 + JITTER))
        row["boundary_latent"] = mean.tolist()
    return row, res


def select_length_scale(
    X: Array,
    y: Array,
    likelihood: Likelihood,
    grid: tuple[float, ...] | list[float],
    *,
    n_folds: int = 3,
    random_state: int = 0,
    max_sweeps: int = 50,
    jitter: float = JITTER,
) -> tuple[float, list[float]]:
    r"""RBF length-scale by ``n_folds``-fold cross-validation on ``(X, y)``.

    Each candidate is scored by the held-out negative log predictive probability
    :math:`-\frac{1}{n}\sum_j \log p(y_j \mid x_j, \mathcal{D}_{-j})` of damped EP (step
    0.5, which converges where plain EP oscillates), unit amplitude plus ``jitter``.
    Returns the best length-scale and the score of every candidate.
    """
    folds = list(StratifiedKFold(n_folds, shuffle=True, random_state=random_state).split(X, y))
    scores = []
    for ell in grid:
        kernel = RBF(float(ell))
        total = 0.0
        for train, test in folds:
            K = kernel(X[train]) + jitter * np.eye(len(train))
            res = infer(K, y[train], likelihood, EP(damping=0.5), max_sweeps=max_sweeps, tol=1e-3, criterion="alpha")
            p = binary_proba(res, kernel(X[test], X[train]), np.full(len(test), 1.0 + jitter))
            p_obs = np.where(y[test] > 0, p, 1.0 - p)
            total += -np.sum(np.log(np.clip(p_obs, 1e-300, None)))
        scores.append(total / len(y))
    return float(grid[int(np.argmin(scores))]), scores
