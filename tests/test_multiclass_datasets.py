"""The multi-class data sets: the shipped files against their published counts and an independent read of the
files, and Breiman's waveform generator against its closed-form class means and variances."""

import csv
import hashlib
from collections import Counter

import numpy as np
import pytest

from relaxep.datasets import load_crabs, load_glass, load_penguins, make_waveform
from relaxep.datasets.multiclass import CRABS_CLASSES, GLASS_CLASSES, PENGUINS_CLASSES, waveform_bases
from relaxep.datasets.registry import PACKAGED_DATA

# The documented class counts: MASS's fgl help page; Gorman et al. (2014) (152 Adelie, 68 Chinstrap, 124 Gentoo
# birds, less the one Adelie and one Gentoo without measurements); MASS's crabs help page (50 per group).
PUBLISHED = {
    "glass": (load_glass, (214, 9), {"WinF": 70, "WinNF": 76, "Veh": 17, "Con": 13, "Tabl": 9, "Head": 29}),
    "penguins": (load_penguins, (342, 4), {"Adelie": 151, "Chinstrap": 68, "Gentoo": 123}),
    "crabs": (load_crabs, (200, 5), {"B.F": 50, "B.M": 50, "O.F": 50, "O.M": 50}),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_shapes_and_published_class_counts(name):
    loader, shape, counts = PUBLISHED[name]
    X, y, classes = loader(return_names=True)
    assert X.shape == shape and X.dtype == np.float64
    assert y.shape == (shape[0],) and y.dtype == np.int64
    assert np.all(np.isfinite(X))
    assert sorted(set(y.tolist())) == list(range(len(classes)))
    assert {classes[k]: int(np.sum(y == k)) for k in range(len(classes))} == counts
    X2, y2 = loader()
    np.testing.assert_array_equal(X2, X)
    np.testing.assert_array_equal(y2, y)


def _csv_rows(file):
    with open(PACKAGED_DATA / file, newline="") as handle:
        return list(csv.DictReader(handle))


def test_glass_against_an_independent_read():
    rows = _csv_rows("glass.csv")
    X, y = load_glass()
    assert [GLASS_CLASSES[k] for k in y] == [r["type"] for r in rows]
    # MASS's first row (UCI's: RI 1.52101, Na 13.64, ..., type 1 = building window float glass)
    np.testing.assert_array_equal(X[0], [3.01, 13.64, 4.49, 1.10, 71.78, 0.06, 8.75, 0.0, 0.0])
    assert y[0] == 0
    # the oxides are percentages by weight: each row sums to 100 within the published rounding
    assert np.all(np.abs(X[:, 1:].sum(axis=1) - 100.0) < 1.0)


def test_penguins_rows_are_the_complete_measurements_of_the_published_table():
    # the published table, read independently: 344 birds, 2 with no measurement, 9 more without sex
    rows = _csv_rows("penguins.csv")
    assert len(rows) == 342 and all("NA" not in r.values() and "" not in r.values() for r in rows)
    assert Counter(r["species"] for r in rows) == Counter(Adelie=151, Chinstrap=68, Gentoo=123)
    X, y = load_penguins()
    assert [PENGUINS_CLASSES[k] for k in y] == [r["species"] for r in rows]
    # palmerpenguins' first row: Adelie, Torgersen, 39.1 mm, 18.7 mm, 181 mm, 3750 g
    np.testing.assert_array_equal(X[0], [39.1, 18.7, 181.0, 3750.0])
    # species means of the published table (Gorman et al.; palmerpenguins' summaries), flipper length in mm
    flipper = [X[y == k, 2].mean() for k in range(3)]
    np.testing.assert_allclose(flipper, [189.95, 195.82, 217.19], atol=0.01)


def test_crabs_against_an_independent_read():
    rows = _csv_rows("crabs.csv")
    X, y = load_crabs()
    assert [CRABS_CLASSES[k] for k in y] == [f"{r['sp']}.{r['sex']}" for r in rows]
    np.testing.assert_array_equal(X[0], [8.1, 6.7, 16.1, 19.0, 7.0])  # MASS's first row, a blue male
    assert y[0] == 1


def test_waveform_bases_peak_where_the_book_says():
    h = waveform_bases()
    assert h.shape == (3, 21)
    np.testing.assert_array_equal(np.argmax(h, axis=1) + 1, [11, 15, 7])
    np.testing.assert_array_equal(h.max(axis=1), [6.0, 6.0, 6.0])
    np.testing.assert_array_equal(h.sum(axis=1), [36.0, 36.0, 36.0])  # 6 + 2 (5 + 4 + 3 + 2 + 1), none cut off
    assert h[0, 0] == 0.0 and h[0, 4] == 0.0 and h[0, 5] == 1.0  # h1(6) = 1, h1(5) = 0


@pytest.mark.parametrize("noise", [1.0, 0.5])
def test_waveform_class_moments_match_the_closed_form(noise):
    n = 20000
    X, y = make_waveform(n, noise=noise, random_state=1)
    assert X.shape == (n, 21) and y.shape == (n,) and y.dtype == np.int64
    h = waveform_bases()
    for c, (a, b) in enumerate([(0, 1), (0, 2), (1, 2)]):
        rows = X[y == c]
        m = rows.shape[0]
        assert abs(m - n / 3) < 5 * np.sqrt(n * (1 / 3) * (2 / 3))  # classes uniform
        mean = (h[a] + h[b]) / 2.0
        var = (h[a] - h[b]) ** 2 / 12.0 + noise**2
        # sample mean: 5 standard errors; sample variance: var(s^2) ~ (mu4 - var^2) / m, and mu4 <= 3 var^2 since
        # the uniform part has kurtosis 9/5 < 3, so 5 sqrt(2 var^2 / m) bounds 5 of its standard errors
        np.testing.assert_array_less(np.abs(rows.mean(axis=0) - mean), 5 * np.sqrt(var / m))
        np.testing.assert_array_less(np.abs(rows.var(axis=0, ddof=1) - var), 5 * np.sqrt(2 * var**2 / m))


def test_waveform_noiseless_rows_lie_on_their_class_segment():
    X, y = make_waveform(500, noise=0.0, random_state=3)
    h = waveform_bases()
    for c, (a, b) in enumerate([(0, 1), (0, 2), (1, 2)]):
        d = h[a] - h[b]
        u = (X[y == c] - h[b]) @ d / (d @ d)
        assert np.all((u >= 0) & (u <= 1))
        np.testing.assert_allclose(X[y == c], h[b] + np.outer(u, d), atol=1e-12)


def test_waveform_is_reproducible_and_leaves_numpy_global_state_alone():
    before = np.random.get_state()  # noqa: NPY002 (the legacy global state is what must not change)
    X1, y1 = make_waveform(50, random_state=7)
    X2, y2 = make_waveform(50, random_state=7)
    X3, _ = make_waveform(50, random_state=np.random.default_rng(7))
    make_waveform(50)  # random_state=None: fresh OS entropy, not the global state either
    after = np.random.get_state()  # noqa: NPY002
    np.testing.assert_array_equal(after[1], before[1])
    assert after[2:] == before[2:]
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(X1, X3)
    X4, _ = make_waveform(50, random_state=8)
    assert not np.array_equal(X1, X4)


@pytest.mark.parametrize(
    ("kwargs", "error", "argument"),
    [
        ({"n_samples": 0}, ValueError, "n_samples"),
        ({"n_samples": -3}, ValueError, "n_samples"),
        ({"n_samples": 2.5}, TypeError, "n_samples"),
        ({"n_samples": 10, "noise": -0.1}, ValueError, "noise"),
        ({"n_samples": 10, "noise": float("nan")}, ValueError, "noise"),
        ({"n_samples": 10, "noise": "1"}, TypeError, "noise"),
    ],
)
def test_waveform_bad_arguments_are_named(kwargs, error, argument):
    with pytest.raises(error, match=argument):
        make_waveform(**kwargs)


@pytest.mark.parametrize("file", ["glass.csv", "penguins.csv", "crabs.csv"])
def test_shipped_file_is_the_one_the_provenance_readme_records(file):
    digest = hashlib.sha256((PACKAGED_DATA / file).read_bytes()).hexdigest()
    assert (PACKAGED_DATA / "README.md").read_text().count(f"{digest}  {file}") == 1
