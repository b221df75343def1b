r"""Regression data with outliers: Neal's function, Friedman #1, two real data sets, contamination.

* :func:`make_neal` regenerates R. M. Neal's regression problem with outliers from its published
  recipe (Neal 1997, *Monte Carlo implementation of Gaussian process models for Bayesian
  regression and classification*, tech. rep. 9702, Dept. of Statistics, University of Toronto;
  the same data in the "regression problem with outliers" example of his Software for Flexible
  Bayesian Modeling, and in Jylanki, Vanhatalo & Vehtari 2011, *Robust Gaussian process
  regression with a Student-t likelihood*, JMLR 12): :math:`x \sim N(0, 1)`,

  .. math:: f(x) = 0.3 + 0.4 x + 0.5 \sin(2.7 x) + \frac{1.1}{1 + x^2},

  :math:`y = f(x) + \epsilon`, :math:`\epsilon \sim N(0, 0.1^2)`, except that each case is an
  outlier with probability 0.05, whose noise is :math:`N(0, 1^2)`.  Neal's 100 training cases;
  our test set is a clean grid (no outliers; the inlier noise kept).
* :func:`make_friedman` is scikit-learn's :func:`~sklearn.datasets.make_friedman1` (10 inputs,
  5 relevant, noise sd 1) with a fraction of the training targets contaminated
  (:func:`contaminate`) and clean test targets.
* :func:`load_regression` reads the two real data sets shipped in ``data/`` (provenance, licence
  and checksums in ``data/README.md``): scikit-learn's diabetes data (442 x 10, Efron et al. 2004)
  and Engel's food expenditure data (235 x 1, Koenker & Bassett 1982, from statsmodels);
  :func:`regression_split` draws a seeded train/test split of them, standardises the inputs
  with the training statistics and contaminates the training targets.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from relaxep.datasets.registry import PACKAGED_DATA

__all__ = [
    "REGRESSION_DATASETS",
    "RegressionData",
    "contaminate",
    "load_nh4",
    "load_regression",
    "make_friedman",
    "make_neal",
    "make_outlier_sine",
    "neal_function",
    "regression_split",
]

Floats = NDArray[np.float64]


@dataclass(frozen=True)
class RegressionData:
    """One train/test problem; ``outlier`` marks the contaminated training targets.

    ``f_test``: the noise-free function at the test inputs where it is known (generated data),
    else ``None``.
    """

    X: Floats
    y: Floats
    X_test: Floats
    y_test: Floats
    outlier: NDArray[np.bool_]
    f_test: Floats | None = None


def _check_rate(rate: float, name: str) -> float:
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"{name} must lie in [0, 1), got {rate}")
    return rate


def neal_function(x: ArrayLike) -> Floats:
    r""":math:`f(x) = 0.3 + 0.4 x + 0.5 \sin(2.7 x) + 1.1 / (1 + x^2)` (Neal 1997)."""
    x = np.asarray(x, dtype=float)
    return 0.3 + 0.4 * x + 0.5 * np.sin(2.7 * x) + 1.1 / (1.0 + x**2)


def make_neal(
    n_train: int = 100,
    outlier_rate: float = 0.05,
    n_test: int = 200,
    random_state: int | np.random.Generator | None = None,
    *,
    noise: float = 0.1,
    outlier_noise: float = 1.0,
    grid: tuple[float, float] = (-2.5, 2.5),
) -> RegressionData:
    r"""Neal's regression problem with outliers.

    Training: :math:`x_i \sim N(0, 1)`, :math:`y_i = f(x_i) + \sigma_i \epsilon_i` with
    :math:`\epsilon_i \sim N(0, 1)`, :math:`\sigma_i = ` ``outlier_noise`` with probability
    ``outlier_rate`` (independently per case, as Neal draws them) and ``noise`` otherwise.
    Test: ``n_test`` equally spaced inputs on ``grid`` (where the training inputs lie), targets
    :math:`f(x) + ` ``noise`` :math:`\epsilon`, no outliers.

    Returns
    -------
    RegressionData
        ``X`` (n_train, 1), ``outlier`` the cases drawn with the large noise, ``f_test`` the
        noise-free :math:`f` on the grid.
    """
    if n_train < 1 or n_test < 1:
        raise ValueError(f"n_train and n_test must be >= 1, got {n_train} and {n_test}")
    outlier_rate = _check_rate(outlier_rate, "outlier_rate")
    rng = np.random.default_rng(random_state)
    x = rng.standard_normal(n_train)
    outlier = rng.random(n_train) < outlier_rate
    sd = np.where(outlier, outlier_noise, noise)
    y = neal_function(x) + sd * rng.standard_normal(n_train)
    x_test = np.linspace(grid[0], grid[1], n_test)
    f_test = neal_function(x_test)
    y_test = f_test + noise * rng.standard_normal(n_test)
    return RegressionData(x[:, None], y, x_test[:, None], y_test, outlier, f_test)


def contaminate(
    y: ArrayLike,
    rate: float,
    random_state: int | np.random.Generator | None = None,
    *,
    low: float = 3.0,
    high: float = 6.0,
) -> tuple[Floats, NDArray[np.bool_]]:
    r"""Shift a fraction of the targets by :math:`\pm U(\text{low}, \text{high})` times their sd.

    Exactly ``round(rate * n)`` targets, chosen uniformly without replacement, get
    :math:`y_i + s_i u_i \operatorname{sd}(y)` with :math:`s_i = \pm 1` equally likely and
    :math:`u_i \sim U(\text{low}, \text{high})` (``sd`` the population standard deviation of
    the clean ``y``).  ``y`` is not modified.

    Returns
    -------
    y_new : ndarray
    outlier : ndarray of bool
        Which targets were shifted.
    """
    y = np.array(y, dtype=float)  # a copy
    rate = _check_rate(rate, "rate")
    if not 0.0 <= low <= high:
        raise ValueError(f"need 0 <= low <= high, got low={low}, high={high}")
    rng = np.random.default_rng(random_state)
    n_bad = round(rate * y.size)
    idx = rng.choice(y.size, n_bad, replace=False)
    sign = rng.choice([-1.0, 1.0], n_bad)
    shift = rng.uniform(low, high, n_bad)
    outlier = np.zeros(y.size, dtype=bool)
    outlier[idx] = True
    y[idx] += sign * shift * np.std(y)
    return y, outlier


def make_outlier_sine(n: int = 200, n_outliers: int = 30, seed: int = 0) -> tuple[Floats, Floats, NDArray[np.bool_]]:
    r"""The README's robust-regression example: :math:`y = \sin(2x) + 0.1\,\epsilon` at ``n`` uniform inputs on
    :math:`[-3, 3]`, ``n_outliers`` of them moved 2-5 units up or down; returns ``(X, y, outlier)``, ``X`` of shape
    ``(n, 1)`` and ``outlier`` the planted rows (``numpy.random.default_rng(seed)``, the README's draws in order)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    bad = rng.choice(n, n_outliers, replace=False)
    y[bad] += rng.choice([-1, 1], n_outliers) * rng.uniform(2, 5, n_outliers)
    outlier = np.zeros(n, dtype=bool)
    outlier[bad] = True
    return X, y, outlier


def make_friedman(
    n_train: int = 200,
    rate: float = 0.0,
    n_test: int = 500,
    random_state: int | None = None,
    *,
    noise: float = 1.0,
) -> RegressionData:
    r"""Friedman #1 (:func:`sklearn.datasets.make_friedman1`, 10 inputs, noise sd ``noise``).

    :math:`y = 10 \sin(\pi x_1 x_2) + 20 (x_3 - 0.5)^2 + 10 x_4 + 5 x_5 + N(0, \text{noise}^2)`,
    :math:`x \sim U[0, 1]^{10}`; the training targets are then contaminated by
    :func:`contaminate` at ``rate``, the test targets are clean (``f_test`` is the noise-free
    function there).
    """
    from sklearn.datasets import make_friedman1

    seed = np.random.SeedSequence(0 if random_state is None else random_state)
    s_train, s_test, s_bad = (int(s.generate_state(1)[0]) for s in seed.spawn(3))
    X, y = make_friedman1(n_train, n_features=10, noise=noise, random_state=s_train)
    X_test, y_test = make_friedman1(n_test, n_features=10, noise=noise, random_state=s_test)
    f_test = (
        10 * np.sin(np.pi * X_test[:, 0] * X_test[:, 1])
        + 20 * (X_test[:, 2] - 0.5) ** 2
        + 10 * X_test[:, 3]
        + 5 * X_test[:, 4]
    )
    y, outlier = contaminate(y, rate, s_bad)
    return RegressionData(X, y, X_test, y_test, outlier, f_test)


#: the shipped real data sets: file, target column, source
REGRESSION_DATASETS: dict[str, dict[str, str]] = {
    "diabetes": {
        "file": "diabetes_lars442.csv",
        "target": "target",
        "source": "Efron, Hastie, Johnstone & Tibshirani (2004), Least angle regression; scikit-learn's load_diabetes",
    },
    "engel": {
        "file": "engel.csv",
        "target": "foodexp",
        "source": "Engel (1857) via Koenker & Bassett (1982); statsmodels.datasets.engel (public domain)",
    },
    "carseats": {
        "file": "carseats.csv",
        "target": "Sales",
        "source": "James, Witten, Hastie & Tibshirani (2013), An Introduction to Statistical Learning (ISLR's "
        "Carseats; the categorical columns as treatment-coded indicators)",
    },
    "wage": {
        "file": "wage_age.csv",
        "target": "wage",
        "source": "James, Witten, Hastie & Tibshirani (2013), An Introduction to Statistical Learning (ISLR's Wage: "
        "wage on age)",
    },
    "mcycle": {
        "file": "mcycle.csv",
        "target": "accel_g",
        "source": "Silverman (1985) via R's MASS (mcycle): head acceleration against time after an impact",
    },
}


def load_regression(name: str) -> tuple[Floats, Floats]:
    """``(X, y)`` of a shipped regression data set (``REGRESSION_DATASETS``), values as published."""
    if name not in REGRESSION_DATASETS:
        raise ValueError(f"name must be one of {sorted(REGRESSION_DATASETS)}, got {name!r}")
    info = REGRESSION_DATASETS[name]
    with open(PACKAGED_DATA / info["file"], newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], np.array(rows[1:], dtype=float)
    target = header.index(info["target"])
    return np.delete(body, target, axis=1), body[:, target]


def regression_split(
    name: str,
    n_train: int,
    rate: float = 0.0,
    random_state: int | None = None,
) -> RegressionData:
    """A seeded train/test split of a shipped data set, inputs standardised, training targets contaminated.

    ``n_train`` rows drawn uniformly without replacement are the training set, the rest the test
    set; every input column is centred and scaled by the training set's mean and standard
    deviation; the training targets are contaminated by :func:`contaminate` at ``rate`` (the
    test targets stay as published).
    """
    X, y = load_regression(name)
    if not 1 <= n_train < y.size:
        raise ValueError(f"n_train must lie in [1, {y.size}) for {name!r}, got {n_train}")
    seed = np.random.SeedSequence(0 if random_state is None else random_state)
    s_split, s_bad = (int(s.generate_state(1)[0]) for s in seed.spawn(2))
    perm = np.random.default_rng(s_split).permutation(y.size)
    train, test = perm[:n_train], perm[n_train:]
    centre, scale = X[train].mean(axis=0), X[train].std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    y_train, outlier = contaminate(y[train], rate, s_bad)
    return RegressionData((X[train] - centre) / scale, y_train, (X[test] - centre) / scale, y[test], outlier)


def load_nh4() -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """``(days, nh4, censored)``: ammonium in precipitation at Olympic National Park (Hoh Ranger Station, WA14),
    2009-2011, with non-detects: a censored regression data set.

    102 weekly or fortnightly samples of the National Atmospheric Deposition Program's National Trends Network
    (NADP/NTN); 46 are below a detection limit (0.006-0.018 mg/L, four limits), reported at the limit.  Used in
    Millard's ``EnvStats`` (``Olympic.NH4.df``); the packaged file's provenance is in the data folder's README.

    Returns
    -------
    days : ndarray of shape (102,)
        The sampling period's first day, in days since 2009-01-01.
    nh4 : ndarray of shape (102,)
        NH4 concentration (mg/L); for a censored sample, its detection limit.
    censored : ndarray of shape (102,), bool
        Whether the sample was below its detection limit (the value is "at most ``nh4``").
    """
    import datetime

    with open(PACKAGED_DATA / "nh4_olympic.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    start = datetime.date(2009, 1, 1)
    days = np.array([(datetime.date.fromisoformat(r["date_on"]) - start).days for r in rows], dtype=float)
    nh4 = np.array([float(r["nh4_mg_per_l"]) for r in rows])
    return days, nh4, np.array([r["censored"] == "1" for r in rows])


def load_mcycle() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(times, accel)``: the motorcycle crash data (Silverman 1985), the classic heteroscedastic regression set.

    133 readings of head acceleration (in g) against time after a simulated motorcycle impact (ms), as in the R
    package ``MASS`` (``mcycle``; Venables & Ripley).  The noise is near zero before the impact (times below
    about 14 ms) and large after it.  Silverman, B. W. (1985), *Some aspects of the spline smoothing approach to
    non-parametric curve fitting*, JRSS B 47, 1-52.  The packaged file's provenance is in the data folder's README.

    Returns
    -------
    times : ndarray of shape (133,)
        Milliseconds after the impact (non-decreasing; some times repeat).
    accel : ndarray of shape (133,)
        Head acceleration in g.
    """
    table = np.loadtxt(PACKAGED_DATA / "mcycle.csv", delimiter=",", skiprows=1)
    return table[:, 0].copy(), table[:, 1].copy()
