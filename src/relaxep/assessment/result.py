r"""The leave-one-out result of one fitted model: pointwise predictive densities, their sum and its standard error.

:math:`\mathrm{elpd}_{loo} = \sum_i \log p(y_i | y_{-i})`, its standard error
:math:`\mathrm{se} = \sqrt{n \operatorname{Var}_i \log p(y_i | y_{-i})}` (the sample variance, ``ddof=1``, as the
``loo`` package and ArviZ compute it) and the effective number of parameters
:math:`p_{loo} = \sum_i [\log p(y_i | y) - \log p(y_i | y_{-i})]` (Vehtari, Gelman & Gabry 2017, *Practical
Bayesian model evaluation using leave-one-out cross-validation and WAIC*, Statistics and Computing 27).  The
values come from EP's cavities (:func:`~relaxep.inference.loo.cavity_loo`) or, for exact Gaussian regression,
from the closed form (Rasmussen & Williams 2006, eq. 5.12); an estimator's ``loo()`` builds the result.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from relaxep._typing import Array
from relaxep.assessment.outliers import influence_outliers, tail_outliers, tail_probability
from relaxep.likelihoods import Likelihood

__all__ = ["LooPrediction", "LooResult", "fingerprint", "row_hashes", "rows_fingerprint"]


def row_hashes(X: Any) -> Array:
    """A 64-bit hash of each row of ``X`` (as float64; splitmix64 chained over the columns), shape ``(n,)``: the
    fingerprint's share of each row, computed where the row is (a Dask fit's shards send ``n`` numbers back, never
    the rows)."""
    bits = np.ascontiguousarray(X, dtype=np.float64).reshape(np.shape(X)[0], -1).view(np.uint64)
    h = np.full(bits.shape[0], 0x243F6A8885A308D3, dtype=np.uint64)
    for j in range(bits.shape[1]):
        h = _splitmix64(h ^ bits[:, j])
    return h


def _splitmix64(z: Array) -> Array:
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def fingerprint(X: Any, y: Any) -> str:
    """A short hash of the rows a model was fitted on: ``y`` (as float32, so that a value that went through
    ``normalize_y`` and back hashes the same) and ``X`` where it is a numpy array (its rows' :func:`row_hashes`)."""
    return rows_fingerprint((X.shape, row_hashes(X)) if isinstance(X, np.ndarray) else None, y)


def rows_fingerprint(rows: tuple[tuple, Array] | None, y: Any) -> str:
    """:func:`fingerprint` from ``X``'s shape and :func:`row_hashes` (``None``: no ``X``), gathered from where the
    rows are."""
    digest = hashlib.sha1()
    if rows is not None:
        digest.update(str(tuple(rows[0])).encode())
        digest.update(np.ascontiguousarray(rows[1], dtype=np.uint64).tobytes())
    y = np.ascontiguousarray(np.asarray(y, dtype=np.float64).astype(np.float32))
    digest.update(str(y.shape).encode())
    digest.update(y.tobytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class LooPrediction:
    r"""Leave-one-out predictions of the training rows, at no refit.

    Attributes
    ----------
    mean, var : ndarray of shape (n,)
        The leave-one-out posterior of the latent :math:`f_i` (the cavity :math:`(h_i, \lambda_i)`), in the
        units of ``y`` for a regressor (``normalize_y`` undone), else the latent's.
    proba : ndarray of shape (n, n_classes) or None
        Classifiers: :math:`P(y_i = k | y_{-i})`, columns in ``classes`` order.
    classes : ndarray or None
        The classifier's ``classes_``.
    """

    mean: Array
    var: Array
    proba: Array | None = None
    classes: Array | None = None

    def predict(self) -> Array:
        """Classifiers: the leave-one-out predicted class (the most probable), for a LOO error rate."""
        if self.proba is None or self.classes is None:
            raise AttributeError("predict: leave-one-out class predictions exist for classifiers only")
        return self.classes[np.argmax(self.proba, axis=1)]


@dataclass(frozen=True, eq=False)
class LooResult:
    r"""Leave-one-out cross-validation of one fitted model, from EP's cavities (module docstring).

    Attributes
    ----------
    pointwise : ndarray of shape (n,)
        :math:`\log p(y_i | y_{-i})` in the units of ``y`` as passed (NaN where a cavity is improper).
    in_sample : ndarray of shape (n,)
        :math:`\log p(y_i | y)`, same units.
    n_improper : int
        Rows whose cavity is improper (none at a converged EP fixed point).
    fingerprint : str
        A hash of the rows fitted (:func:`fingerprint`): :func:`~relaxep.compare` refuses results that differ.
    name : str
        The estimator's description.
    loo_mean, loo_var : ndarray of shape (n,)
        The leave-one-out predictive of the likelihood's latent (the cavity), in the model's units; with
        ``likelihood`` ``None`` (exact Gaussian regression), the leave-one-out predictive of ``y`` itself.
    likelihood : Likelihood or None
        The fitted likelihood, for :meth:`outliers`.
    y : ndarray
        The likelihood's targets (model units), for :meth:`outliers`.
    is_density : bool or None
        Whether every pointwise value is a log density of ``y`` (:attr:`Likelihood.is_density
        <relaxep.likelihoods.Likelihood.is_density>`; exact Gaussian regression: true), not a log probability for
        some rows: :func:`~relaxep.compare` refuses to rank the two kinds together.  ``None``: not known (not
        checked).
    """

    pointwise: Array
    in_sample: Array
    n_improper: int
    fingerprint: str
    name: str = "model"
    loo_mean: Array = field(default=None, repr=False)  # type: ignore[assignment]
    loo_var: Array = field(default=None, repr=False)  # type: ignore[assignment]
    likelihood: Likelihood | None = field(default=None, repr=False)
    y: Array = field(default=None, repr=False)  # type: ignore[assignment]
    is_density: bool | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        """The number of rows (data points)."""
        return int(self.pointwise.shape[0])

    @property
    def elpd_loo(self) -> float:
        r""":math:`\sum_i \log p(y_i | y_{-i})` (NaN where any cavity is improper: see ``n_improper``)."""
        return float(np.sum(self.pointwise))

    @property
    def se(self) -> float:
        r""":math:`\sqrt{n \operatorname{Var}(\text{pointwise})}`, ``ddof=1`` (the ``loo`` package's)."""
        return float(np.sqrt(self.n * np.var(self.pointwise, ddof=1))) if self.n > 1 else float("nan")

    @property
    def p_loo_pointwise(self) -> Array:
        r""":math:`\log p(y_i | y) - \log p(y_i | y_{-i})`: each row's influence on its own fit."""
        return self.in_sample - self.pointwise

    @property
    def p_loo(self) -> float:
        r"""The effective number of parameters :math:`\sum_i [\log p(y_i | y) - \log p(y_i | y_{-i})]`."""
        return float(np.sum(self.p_loo_pointwise))

    @property
    def lppd(self) -> float:
        r"""The in-sample log predictive density :math:`\sum_i \log p(y_i | y)`."""
        return float(np.sum(self.in_sample))

    def tail_probability(self) -> Array:
        """Each row's leave-one-out tail probability (:func:`~relaxep.assessment.outliers.tail_probability`)."""
        return tail_probability(self.likelihood, self.y, self.loo_mean, self.loo_var, self.pointwise)

    def outliers(self, criterion: str = "tail", threshold: float | None = None) -> Array:
        r"""The rows the model finds surprising, most surprising first.

        ``criterion="tail"`` (default): rows whose leave-one-out tail probability (:meth:`tail_probability`)
        is below ``threshold`` (default 0.01): observations the model, fitted without them, would not have
        predicted.  A robust fit names its outliers this way, having discounted them.
        ``criterion="influence"``: rows whose :attr:`p_loo_pointwise`, in-sample density minus leave-one-out
        density, is above ``threshold`` (default 0.05 nats): the rows that bend the fit towards themselves (a
        Gaussian fit's outliers are of this kind; a robust fit's are not, it discounts them).
        """
        if criterion == "tail":
            return tail_outliers(self.tail_probability(), 0.01 if threshold is None else float(threshold))
        if criterion == "influence":
            return influence_outliers(self.p_loo_pointwise, 0.05 if threshold is None else float(threshold))
        raise ValueError(f"criterion must be 'tail' or 'influence', got {criterion!r}")

    def summary(self) -> str:
        """A readable table: elpd_loo and its se, p_loo, n, improper cavities."""
        lines = [
            f"Leave-one-out (EP cavities) of {self.name}: n = {self.n}",
            f"  elpd_loo {self.elpd_loo:12.3f}   se {self.se:9.3f}",
            f"  p_loo    {self.p_loo:12.3f}",
            f"  lppd     {self.lppd:12.3f}   (in sample)",
        ]
        if self.n_improper:
            lines.append(f"  {self.n_improper} improper cavities (pointwise NaN): the fit did not converge there")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"LooResult(name={self.name!r}, n={self.n}, elpd_loo={self.elpd_loo:.3f}, se={self.se:.3f}, "
            f"p_loo={self.p_loo:.3f}, n_improper={self.n_improper})"
        )

    __str__ = summary

    def to_arviz(self) -> Any:
        """The result as ArviZ's ``ELPDData``, which ``arviz.compare`` reads (ArviZ imported here; never required).

        ``pareto_k`` is zero (no importance sampling: the values are EP's cavities), ``n_samples`` 0."""
        try:
            import xarray as xr
            from arviz.stats.stats_utils import ELPDData
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("to_arviz needs ArviZ (pip install arviz)") from exc
        loo_i = xr.DataArray(self.pointwise, dims=["obs"], name="loo_i")
        pareto_k = xr.DataArray(np.zeros(self.n), dims=["obs"], name="pareto_k")
        return ELPDData(
            data=[self.elpd_loo, self.se, self.p_loo, 0, self.n, False, loo_i, pareto_k, "log"],
            index=["elpd_loo", "se", "p_loo", "n_samples", "n_data_points", "warning", "loo_i", "pareto_k", "scale"],
        )
