r"""Model comparison by leave-one-out: a ranked table of :math:`\mathrm{elpd}_{loo}` differences.

For models :math:`a` (the best) and :math:`b` fitted on the same rows, the difference :math:`\Delta =
\mathrm{elpd}_a - \mathrm{elpd}_b = \sum_i d_i`, :math:`d_i = \log p_a(y_i | y_{-i}) - \log p_b(y_i | y_{-i})`, has
the standard error :math:`\sqrt{n \operatorname{Var}_i d_i}` (``ddof=1``), from the paired pointwise values as the
``loo`` package computes it (Vehtari, Gelman & Gabry 2017, sec. 5.2; ArviZ 0.23's ``compare`` takes the variance
with ``ddof=0``, a factor :math:`\sqrt{(n-1)/n}` smaller): much smaller than the two elpds' own standard errors
where the models agree on most rows. A difference of a few of its standard errors or more is a real one (Sivula,
Magnusson, Matamoros & Vehtari 2025 discuss when that normal approximation holds: :math:`n` not small and the models
not nearly equal).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import clone

from relaxep._typing import Array
from relaxep.assessment.result import LooResult

__all__ = ["Comparison", "compare"]

_COLUMNS = ("rank", "model", "elpd_loo", "se", "elpd_diff", "dse", "p_loo", "n_improper")


@dataclass(frozen=True)
class Comparison:
    """The ranked table of :func:`compare`: ``results`` best first, ``elpd_diff`` (the best's elpd minus each,
    0 for the best) and ``dse`` (its standard error from the paired pointwise values)."""

    results: tuple[LooResult, ...]
    names: tuple[str, ...]
    elpd_diff: Array
    dse: Array

    def rows(self) -> list[dict[str, Any]]:
        """The table as dicts, one per model, best first."""
        return [
            dict(
                rank=k,
                model=name,
                elpd_loo=r.elpd_loo,
                se=r.se,
                elpd_diff=float(self.elpd_diff[k]),
                dse=float(self.dse[k]),
                p_loo=r.p_loo,
                n_improper=r.n_improper,
            )
            for k, (name, r) in enumerate(zip(self.names, self.results, strict=True))
        ]

    def __getitem__(self, name: str) -> LooResult:
        return self.results[self.names.index(name)]

    def __str__(self) -> str:
        width = max(8, *(len(n) for n in self.names))
        head = f"{'rank':>4}  {'model':<{width}} {'elpd_loo':>11} {'se':>8} {'elpd_diff':>10} {'dse':>8} {'p_loo':>8}"
        lines = [head]
        for row in self.rows():
            lines.append(
                f"{row['rank']:>4}  {row['model']:<{width}} {row['elpd_loo']:>11.2f} {row['se']:>8.2f} "
                f"{row['elpd_diff']:>10.2f} {row['dse']:>8.2f} {row['p_loo']:>8.2f}"
                + (f"  ({row['n_improper']} improper)" if row["n_improper"] else "")
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def to_pandas(self) -> Any:
        """The table as a pandas ``DataFrame`` indexed by model (pandas imported here; never required)."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("to_pandas needs pandas (pip install pandas); str(comparison) prints the table") from exc
        return pd.DataFrame(self.rows(), columns=list(_COLUMNS)).set_index("model")


def _named(models: Mapping[str, Any] | Sequence[Any]) -> list[tuple[str, Any]]:
    if isinstance(models, Mapping):
        items = [(str(k), v) for k, v in models.items()]
    elif isinstance(models, Sequence) and not isinstance(models, str):
        items = [(getattr(m, "name", None) if isinstance(m, LooResult) else None, m) for m in models]
        items = [(name or f"model{k}", m) for k, (name, m) in enumerate(items)]
        if len({n for n, _ in items}) < len(items):
            items = [(f"model{k}", m) for k, (_, m) in enumerate(items)]
    else:
        raise TypeError(f"models must be a dict name -> estimator or LooResult, or a list of them, got {type(models)}")
    if len(items) < 2:
        raise ValueError(f"compare needs two models or more, got {len(items)}")
    return items


def _result(name: str, model: Any, X: Any, y: Any) -> LooResult:
    if isinstance(model, LooResult):
        return model
    if not hasattr(model, "loo"):
        raise TypeError(f"model {name!r}: {type(model).__name__} has no loo(); pass a relaxep estimator or a LooResult")
    if X is not None:
        model = clone(model).fit(X, y)
    return model.loo()


def compare(models: Mapping[str, Any] | Sequence[Any], X: Any = None, y: Any = None) -> Comparison:
    r"""Rank fitted models by their leave-one-out :math:`\mathrm{elpd}` (module docstring).

    Parameters
    ----------
    models : dict of name -> estimator or LooResult, or a list of them
        Fitted relaxep estimators (each one's ``loo()`` is taken) or their results; with ``X`` and ``y``
        the estimators are cloned and fitted on them first.
    X, y : array-like, optional
        The rows to fit clones of the estimators on.

    Returns
    -------
    Comparison
        Print it for the table; ``to_pandas()`` where pandas is installed.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        An estimator not fitted (and no ``X, y``).
    ValueError
        Models fitted on different rows (their results' ``fingerprint`` differ), or whose values are not on the same
        footing: log densities of ``y`` beside log probabilities (masses: classes, counts, censored rows), as their
        results' ``is_density`` says.
    """
    if (X is None) != (y is None):
        raise ValueError("compare: give both X and y (to fit the models on), or neither")
    items = _named(models)
    results = [_result(name, model, X, y) for name, model in items]
    first = results[0]
    for (name, _), r in zip(items[1:], results[1:], strict=True):
        if r.fingerprint != first.fingerprint or r.n != first.n:
            raise ValueError(
                f"models {items[0][0]!r} and {name!r} were fitted on different rows (n = {first.n} and {r.n}, "
                "or the same n and other values): leave-one-out values compare only on the same data"
            )
    _same_footing([name for name, _ in items], results)
    elpd = np.array([r.elpd_loo for r in results])
    order = np.argsort(-np.where(np.isnan(elpd), -np.inf, elpd), kind="stable")
    best = results[order[0]]
    diff, dse = np.zeros(len(results)), np.zeros(len(results))
    for k, j in enumerate(order):
        d = best.pointwise - results[j].pointwise
        diff[k] = float(np.sum(d))
        dse[k] = float(np.sqrt(d.size * np.var(d, ddof=1))) if d.size > 1 else float("nan")
    return Comparison(
        results=tuple(results[j] for j in order), names=tuple(items[j][0] for j in order), elpd_diff=diff, dse=dse
    )


def _same_footing(names: list[str], results: list[LooResult]) -> None:
    r"""A ``ValueError`` where one model's leave-one-out values are densities of ``y`` and another's probabilities
    (for some rows or all): :math:`\log p(y_i | y_{-i})` then has other units in each (a density moves with ``y``'s
    scale, a probability does not), and their difference means nothing.  Results whose ``is_density`` is ``None``
    are not checked."""
    known = [(name, r.is_density) for name, r in zip(names, results, strict=True) if r.is_density is not None]
    density = [name for name, d in known if d]
    mass = [name for name, d in known if not d]
    if density and mass:
        raise ValueError(
            f"models {density[0]!r} and {mass[0]!r} are not on the same footing: {density[0]!r}'s leave-one-out "
            f"values are log densities of y, {mass[0]!r}'s log probabilities (masses) for some or all rows (classes, "
            "counts, censored values); a probability mass does not compare with a density"
        )
