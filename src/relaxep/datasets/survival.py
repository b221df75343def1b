"""Four right-censored survival data sets, shipped as CSVs, encoded as scikit-survival's user guides encode them.

Each loader returns ``(X, y, feature_names)``: ``X`` a float array (n, d), ``y`` a structured array of dtype
``[('event', '?'), ('time', '<f8')]`` (``event`` True: the event was observed at ``time``; False: right-censored
at ``time``), the layout of ``sksurv.util.Surv.from_arrays`` that :class:`relaxep.GPSurvivalRegressor` reads, and
the column names.  A categorical column with levels :math:`(l_0, \\dots, l_{K-1})` becomes the :math:`K - 1`
indicators ``name=l_k``, :math:`k \\ge 1` (the first level dropped, as ``sksurv.preprocessing.OneHotEncoder``
does), in place of the column.  Nothing is scaled.  The files' provenance and licences are in the data folder's
README.
"""

from __future__ import annotations

import csv

import numpy as np
from numpy.typing import NDArray

from relaxep.datasets.registry import PACKAGED_DATA

__all__ = ["SURVIVAL_DTYPE", "load_flchain", "load_gbsg2", "load_rossi", "load_veterans"]

#: the targets' dtype (scikit-survival's structured array)
SURVIVAL_DTYPE = np.dtype([("event", "?"), ("time", "<f8")])

SurvivalData = tuple[NDArray[np.float64], np.ndarray, list[str]]


def _read(name: str) -> dict[str, list[str]]:
    """The packaged CSV ``name`` as ``{column: its cells as text}``, in file order."""
    with open(PACKAGED_DATA / name, newline="") as handle:
        rows = list(csv.reader(handle))
    return {column: [row[j] for row in rows[1:]] for j, column in enumerate(rows[0])}


def _encode(table: dict[str, list[str]], levels: dict[str, list[str]]) -> tuple[NDArray[np.float64], list[str]]:
    """``X`` and its names: numeric columns as floats, each column in ``levels`` as its indicators of every level
    but the first, in the table's column order."""
    columns, names = [], []
    for column, cells in table.items():
        if column in levels:
            found = set(cells) - set(levels[column])
            if found:  # a level the loader does not know: the file is not the one shipped
                raise ValueError(f"column {column!r} has unknown levels {sorted(found)}")
            for level in levels[column][1:]:
                columns.append([cell == level for cell in cells])
                names.append(f"{column}={level}")
        else:
            columns.append([float(cell) if cell else np.nan for cell in cells])
            names.append(column)
    return np.array(columns, dtype=np.float64).T.copy(), names


def _targets(event: list[str], time: list[str]) -> np.ndarray:
    y = np.empty(len(time), dtype=SURVIVAL_DTYPE)
    y["event"] = [cell == "1" for cell in event]
    y["time"] = [float(cell) for cell in time]
    return y


def load_gbsg2() -> SurvivalData:
    """German Breast Cancer Study Group 2: recurrence-free survival (days) of 686 node-positive women, 299 events.

    Schumacher, Bastert, Bojar et al., *Randomized 2 x 2 trial evaluating hormonal treatment and the duration of
    chemotherapy in node-positive breast cancer patients*, Journal of Clinical Oncology 12 (1994).  Encoded as
    scikit-survival's random-survival-forest guide does: ``horTh`` and ``menostat`` one-hot (``horTh=yes``,
    ``menostat=Post``), the tumour grade ``tgrade`` last, as its ordinal code 0, 1, 2 for I, II, III.  Eight columns:
    ``age, estrec, horTh=yes, menostat=Post, pnodes, progrec, tsize, tgrade``.
    """
    table = _read("gbsg2.csv")
    y = _targets(table.pop("cens"), table.pop("time"))
    grade = table.pop("tgrade")
    X, names = _encode(table, {"horTh": ["no", "yes"], "menostat": ["Pre", "Post"]})
    code = np.array([["I", "II", "III"].index(g) for g in grade], dtype=np.float64)
    return np.column_stack([X, code]), y, [*names, "tgrade"]


def load_veterans() -> SurvivalData:
    """Veterans' Administration lung cancer trial: survival (days) of 137 men, 128 deaths.

    Kalbfleisch & Prentice, *The Statistical Analysis of Failure Time Data* (Wiley, 1980), Appendix I.  Encoded as
    scikit-survival's survival-SVM guide does (``encode_categorical``): ``Celltype`` (adeno, large, smallcell,
    squamous), ``Prior_therapy`` and ``Treatment`` one-hot.  Eight columns: ``Age_in_years, Celltype=large,
    Celltype=smallcell, Celltype=squamous, Karnofsky_score, Months_from_Diagnosis, Prior_therapy=yes,
    Treatment=test``.
    """
    table = _read("veterans.csv")
    y = _targets(table.pop("Status"), table.pop("Survival_in_days"))
    levels = {"Celltype": ["adeno", "large", "smallcell", "squamous"], "Prior_therapy": ["no", "yes"],
              "Treatment": ["standard", "test"]}  # fmt: skip
    X, names = _encode(table, levels)
    return X, y, names


def load_rossi() -> SurvivalData:
    """Rossi's recidivism data: weeks to re-arrest of 432 released prisoners, followed for a year, 114 arrests.

    Rossi, Berk & Lenihan, *Money, Work and Crime: Some Experimental Results* (Academic Press, 1980), as lifelines
    ships it (``load_rossi``): ``week`` the time, ``arrest`` the event.  Seven numeric columns, as they are:
    ``fin, age, race, wexp, mar, paro, prio`` (financial aid, age at release, race, full-time work experience,
    married, released on parole, prior convictions).
    """
    table = _read("rossi.csv")
    y = _targets(table.pop("arrest"), table.pop("week"))
    X, names = _encode(table, {})
    return X, y, names


def load_flchain() -> SurvivalData:
    """Serum free light chains and mortality: days to death of 7874 residents of Olmsted County, 2169 deaths.

    Dispenzieri, Katzmann, Kyle et al., *Use of nonclonal serum immunoglobulin free light chains to predict overall
    survival in the general population*, Mayo Clinic Proceedings 87 (2012).  The cause of death (``chapter``) is not
    shipped: it is known only for the dead, so it gives the outcome away.  Creatinine's 1350 missing values are
    set to the median of the 6524 measured (1.0 mg/dL; the whole set's median, so the features of a test split
    inform it, never the outcomes).  ``flc.grp`` (the decile of kappa + lambda), ``mgus`` and ``sex`` one-hot,
    the sample's year ``sample.yr`` as a number.  Sixteen columns: ``age, creatinine, flc.grp=2, ..., flc.grp=10,
    kappa, lambda, mgus=yes, sample.yr, sex=M``.
    """
    table = _read("flchain.csv")
    y = _targets(table.pop("death"), table.pop("futime"))
    levels = {"flc.grp": [str(k) for k in range(1, 11)], "mgus": ["no", "yes"], "sex": ["F", "M"]}
    X, names = _encode(table, levels)
    creatinine = X[:, names.index("creatinine")]
    creatinine[np.isnan(creatinine)] = np.median(creatinine[~np.isnan(creatinine)])
    return X, y, names
