"""Multi-class classification data: three shipped sets of different shapes and one generator.

Few rows and many classes: :func:`load_glass` (214 rows, 9 features, 6 classes) and :func:`load_crabs` (200 rows,
5 features, 4 classes); a few hundred rows and three well-separated classes: :func:`load_penguins` (342 rows,
4 features); as many rows as asked and three overlapping classes: :func:`make_waveform` (Breiman et al. 1984,
21 features, Bayes error about 14 %).  Every loader returns ``(X, y)`` with ``X`` float64 and ``y`` int64 labels
``0..C-1`` (``return_names=True`` adds the class names, in label order).  The shipped files' provenance and
licences are in the data folder's README.
"""

from __future__ import annotations

import csv
from numbers import Integral, Real

import numpy as np
from numpy.typing import NDArray

from relaxep.datasets.registry import PACKAGED_DATA

__all__ = [
    "CRABS_CLASSES",
    "GLASS_CLASSES",
    "PENGUINS_CLASSES",
    "load_crabs",
    "load_glass",
    "load_penguins",
    "make_waveform",
    "waveform_bases",
]

GLASS_CLASSES = ("WinF", "WinNF", "Veh", "Con", "Tabl", "Head")
PENGUINS_CLASSES = ("Adelie", "Chinstrap", "Gentoo")
CRABS_CLASSES = ("B.F", "B.M", "O.F", "O.M")

_Loaded = tuple[NDArray[np.float64], NDArray[np.int64]] | tuple[NDArray[np.float64], NDArray[np.int64], list[str]]


def _read(file: str, n_features: int) -> tuple[NDArray[np.float64], list[list[str]]]:
    """The packaged CSV ``file``: its first ``n_features`` columns as floats, the rest of each row as text."""
    with open(PACKAGED_DATA / file, newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    X = np.array([[float(v) for v in row[:n_features]] for row in rows], dtype=np.float64)
    return X, [row[n_features:] for row in rows]


def _labels(names: list[str], classes: tuple[str, ...]) -> NDArray[np.int64]:
    index = {name: k for k, name in enumerate(classes)}
    return np.array([index[name] for name in names], dtype=np.int64)


def _result(X: NDArray[np.float64], y: NDArray[np.int64], classes: tuple[str, ...], return_names: bool) -> _Loaded:
    return (X, y, list(classes)) if return_names else (X, y)


def load_glass(return_names: bool = False) -> _Loaded:
    """``(X, y)``: the forensic glass fragments (B. German; R's ``MASS::fgl``), 214 rows, 9 features, 6 classes.

    Features, in column order: ``RI``, the refractive index as :math:`1000\\,(n - 1.518)` (so 3.01 is
    :math:`n = 1.52101`), then the weight percentages of the oxides of ``Na``, ``Mg``, ``Al``, ``Si``, ``K``,
    ``Ca``, ``Ba`` and ``Fe``.  Classes (label: name, count): 0 ``WinF`` window float glass 70, 1 ``WinNF`` window
    non-float glass 76, 2 ``Veh`` vehicle window glass 17, 3 ``Con`` containers 13, 4 ``Tabl`` tableware 9,
    5 ``Head`` vehicle headlamps 29 (the seventh type of the original study, vehicle non-float glass, has no
    rows).  W. N. Venables & B. D. Ripley (2002), *Modern Applied Statistics with S*, 4th ed., Springer; the same
    data as UCI's Glass Identification set.  The rows are in MASS's order; nothing is scaled.

    Parameters
    ----------
    return_names : bool
        Also return the class names, in label order (:data:`GLASS_CLASSES`).

    Returns
    -------
    X : ndarray of float64, shape (214, 9)
    y : ndarray of int64, shape (214,)
        Labels 0..5.
    classes : list of str
        Only with ``return_names=True``.
    """
    X, rest = _read("glass.csv", 9)
    return _result(X, _labels([r[0] for r in rest], GLASS_CLASSES), GLASS_CLASSES, return_names)


def load_penguins(return_names: bool = False) -> _Loaded:
    """``(X, y)``: the Palmer penguins with all four body measurements, 342 rows, 4 features, 3 species.

    Features, in column order: bill length (mm), bill depth (mm), flipper length (mm), body mass (g).  Classes
    (label: species, count): 0 Adelie 151, 1 Chinstrap 68, 2 Gentoo 123.  The published table has 344 birds; the
    two with no measurement at all (one Adelie, one Gentoo) are left out.  Nine other birds lack only the sex,
    which is not a feature here, so they stay (dropping them too gives the 333 rows, 146 / 68 / 119, that a
    complete-case filter on the whole table gives).  K. B. Gorman, T. D. Williams & W. R. Fraser (2014),
    *Ecological sexual dimorphism and environmental variability within a community of Antarctic penguins (genus
    Pygoscelis)*, PLoS ONE 9(3): e90081; data of the Palmer Station LTER, CC0, as packaged by A. M. Horst,
    A. P. Hill & K. B. Gorman (the R package ``palmerpenguins``).  The rows are in the package's order.

    Parameters
    ----------
    return_names : bool
        Also return the species names, in label order (:data:`PENGUINS_CLASSES`).

    Returns
    -------
    X : ndarray of float64, shape (342, 4)
    y : ndarray of int64, shape (342,)
        Labels 0..2.
    classes : list of str
        Only with ``return_names=True``.
    """
    X, rest = _read("penguins.csv", 4)
    return _result(X, _labels([r[0] for r in rest], PENGUINS_CLASSES), PENGUINS_CLASSES, return_names)


def load_crabs(return_names: bool = False) -> _Loaded:
    """``(X, y)``: the Leptograpsus crabs (R's ``MASS::crabs``), 200 rows, 5 features, 4 classes of 50.

    Features (mm), in column order: frontal lobe size ``FL``, rear width ``RW``, carapace length ``CL``, carapace
    width ``CW``, body depth ``BD``.  Classes are colour form x sex, label :math:`2\\,[\\text{orange}] +
    [\\text{male}]`: 0 ``B.F`` blue female, 1 ``B.M`` blue male, 2 ``O.F`` orange female, 3 ``O.M`` orange male,
    50 crabs each.  N. A. Campbell & R. J. Mahon (1974), *A multivariate study of variation in two species of rock
    crab of genus Leptograpsus*, Australian Journal of Zoology 22, 417-425; Venables & Ripley (2002).  The rows
    are in MASS's order (sorted by class); nothing is scaled.

    Parameters
    ----------
    return_names : bool
        Also return the class names, in label order (:data:`CRABS_CLASSES`).

    Returns
    -------
    X : ndarray of float64, shape (200, 5)
    y : ndarray of int64, shape (200,)
        Labels 0..3.
    classes : list of str
        Only with ``return_names=True``.
    """
    X, rest = _read("crabs.csv", 5)
    return _result(X, _labels([f"{sp}.{sex}" for sp, sex in rest], CRABS_CLASSES), CRABS_CLASSES, return_names)


_WAVEFORM_PAIRS = np.array([[0, 1], [0, 2], [1, 2]])


def waveform_bases() -> NDArray[np.float64]:
    """The three triangular base waves of Breiman et al.'s waveform problem, shape (3, 21).

    :math:`h_1(i) = \\max(6 - |i - 11|, 0)`, :math:`h_2(i) = h_1(i - 4)`, :math:`h_3(i) = h_1(i + 4)` for
    :math:`i = 1, \\dots, 21` (L. Breiman, J. H. Friedman, R. A. Olshen & C. J. Stone 1984, *Classification and
    Regression Trees*, Wadsworth, Section 2.6.2): peaks of height 6 at :math:`i` = 11, 15 and 7.
    """
    i = np.arange(1, 22, dtype=np.float64)
    h1 = np.maximum(6.0 - np.abs(i - 11.0), 0.0)
    h2 = np.maximum(6.0 - np.abs(i - 4.0 - 11.0), 0.0)
    h3 = np.maximum(6.0 - np.abs(i + 4.0 - 11.0), 0.0)
    return np.stack([h1, h2, h3])


def make_waveform(
    n_samples: int,
    noise: float = 1.0,
    random_state: int | np.random.Generator | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Draw Breiman et al.'s (1984, Section 2.6.2) waveform data: 21 features, 3 classes.

    Each row's class :math:`c` is drawn uniformly from {0, 1, 2}; with the base waves :math:`h_1, h_2, h_3`
    (:func:`waveform_bases`) and the class's pair :math:`(a, b)` = :math:`(h_1, h_2)`, :math:`(h_1, h_3)`,
    :math:`(h_2, h_3)` for :math:`c` = 0, 1, 2,

    .. math:: x_i = u\\, h_a(i) + (1 - u)\\, h_b(i) + \\epsilon_i, \\qquad u \\sim U(0, 1),\\;
              \\epsilon_i \\sim N(0, \\sigma^2),\\; i = 1, \\dots, 21,

    one :math:`u` per row and the :math:`\\epsilon_i` independent, :math:`\\sigma` = ``noise`` (the book's 1).
    So :math:`E[x \\mid c] = (h_a + h_b) / 2` and
    :math:`\\operatorname{var}(x_i \\mid c) = (h_a(i) - h_b(i))^2 / 12 + \\sigma^2`.  With :math:`\\sigma = 1` the
    Bayes error is about 14 % (Breiman et al.); many rows and few classes, the set's role beside the small
    shipped ones.

    Parameters
    ----------
    n_samples : int
        Rows to draw, at least 1.
    noise : float
        Standard deviation :math:`\\sigma` of the Gaussian noise, finite and >= 0.
    random_state : int, Generator or None
        Seed of a fresh ``numpy.random.default_rng`` (or a Generator, used and advanced); numpy's global random
        state is never read or changed.

    Returns
    -------
    X : ndarray of float64, shape (n_samples, 21)
    y : ndarray of int64, shape (n_samples,)
        Labels 0..2.
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, Integral):
        raise TypeError(f"n_samples must be an integer, got {type(n_samples).__name__}")
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    if isinstance(noise, bool) or not isinstance(noise, Real):
        raise TypeError(f"noise must be a real number, got {type(noise).__name__}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be finite and >= 0, got {noise}")
    rng = np.random.default_rng(random_state)
    h = waveform_bases()
    y = rng.integers(0, 3, size=int(n_samples))
    u = rng.uniform(0.0, 1.0, size=(int(n_samples), 1))
    pairs = _WAVEFORM_PAIRS[y]
    X = u * h[pairs[:, 0]] + (1.0 - u) * h[pairs[:, 1]] + float(noise) * rng.standard_normal((int(n_samples), 21))
    return X, y.astype(np.int64)
