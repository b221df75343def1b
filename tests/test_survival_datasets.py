"""The shipped survival data: the published sizes and event counts, the checksums the README lists, the encodings
of scikit-survival's user guides, and (where scikit-survival and lifelines are installed) every raw value against
their loaders."""

import hashlib

import numpy as np
import pytest

from relaxep.datasets import load_flchain, load_gbsg2, load_rossi, load_veterans
from relaxep.datasets.registry import PACKAGED_DATA

#: sha256 of the shipped files (data/README.md lists the same)
FILE_SHA256 = {
    "gbsg2.csv": "3646e4961a007d0c7226feee172196454668dfd0cece24cc579a27418025af67",
    "veterans.csv": "80b5f1940c1a318580ba5c541b25d35ed40371812cfb4916dff947d13751647f",
    "rossi.csv": "5b6b4e9e910e3e48e77ab570a12c67b43d2469d71fdb69910d26f6755a2d4ada",
    "flchain.csv": "59862c7a52650110ddfeb771c591ecd59ca269cee8e4b43a550c8528bbb026d6",
}

#: rows, columns after encoding, events, (shortest, longest time): the published sizes (GBSG2: 686 women, 299
#: recurrences, Schumacher et al. 1994 via TH.data; veterans: 137 men, 128 deaths, Kalbfleisch & Prentice 1980;
#: Rossi: 432 men, 114 arrests within 52 weeks; flchain: 7874 subjects, 2169 deaths, Dispenzieri et al. 2012)
SIZES = {
    load_gbsg2: (686, 8, 299, (8.0, 2659.0)),
    load_veterans: (137, 8, 128, (1.0, 999.0)),
    load_rossi: (432, 7, 114, (1.0, 52.0)),
    load_flchain: (7874, 16, 2169, (0.0, 5215.0)),
}


@pytest.mark.parametrize("file", sorted(FILE_SHA256))
def test_the_files_are_the_ones_the_readme_lists(file):
    assert hashlib.sha256((PACKAGED_DATA / file).read_bytes()).hexdigest() == FILE_SHA256[file]
    assert (PACKAGED_DATA / "README.md").read_text(encoding="utf-8").count(FILE_SHA256[file]) == 1


@pytest.mark.parametrize("loader", list(SIZES), ids=lambda f: f.__name__)
def test_sizes_event_counts_and_the_targets_layout(loader):
    X, y, names = loader()
    n, d, events, (shortest, longest) = SIZES[loader]
    assert X.shape == (n, d) and X.dtype == np.float64 and len(names) == d == len(set(names))
    assert y.dtype == np.dtype([("event", "?"), ("time", "<f8")]) and y.shape == (n,)
    assert int(y["event"].sum()) == events
    assert (y["time"].min(), y["time"].max()) == (shortest, longest)
    assert np.isfinite(X).all()
    # a one-hot block is 0/1 with at most one 1 a row
    for stem in {name.split("=")[0] for name in names if "=" in name}:
        block = X[:, [i for i, name in enumerate(names) if name.startswith(stem + "=")]]
        assert set(np.unique(block)) <= {0.0, 1.0} and block.sum(axis=1).max() == 1.0


def test_published_rows_and_the_guides_encodings():
    # GBSG2's first row in TH.data: horTh no, age 70, Post, tsize 21, grade II, pnodes 3, progrec 48, estrec 66,
    # time 1814, cens 1; the guide's order puts tgrade (ordinal 0, 1, 2) last
    X, y, names = load_gbsg2()
    assert names == ["age", "estrec", "horTh=yes", "menostat=Post", "pnodes", "progrec", "tsize", "tgrade"]
    np.testing.assert_array_equal(X[0], [70, 66, 0, 1, 3, 48, 21, 1])
    assert tuple(y[0]) == (True, 1814.0)
    # veterans' first row: standard, squamous, 72 days, dead, Karnofsky 60, 7 months, age 69, no prior therapy
    X, y, names = load_veterans()
    assert names[:4] == ["Age_in_years", "Celltype=large", "Celltype=smallcell", "Celltype=squamous"]
    np.testing.assert_array_equal(X[0], [69, 0, 0, 1, 60, 7, 0, 0])
    assert tuple(y[0]) == (True, 72.0) and np.bincount(X[:, 1:4].sum(axis=1).astype(int)).tolist() == [27, 110]
    # Rossi's first row: week 20, arrest 1, fin 0, age 27, race 1, wexp 0, mar 0, paro 1, prio 3
    X, y, _ = load_rossi()
    np.testing.assert_array_equal(X[0], [0, 27, 1, 0, 0, 1, 3])
    assert tuple(y[0]) == (True, 20.0)
    # flchain: creatinine's 1350 gaps hold the median of the measured values (1.0), and nothing else does change
    X, y, names = load_flchain()
    assert "chapter" not in " ".join(names)
    raw = np.array(
        [float(row.split(",")[1] or "nan") for row in (PACKAGED_DATA / "flchain.csv").read_text().split()[1:]]
    )
    gaps = np.isnan(raw)
    assert gaps.sum() == 1350 and np.all(X[gaps, 1] == 1.0) and np.array_equal(X[~gaps, 1], raw[~gaps])
    assert np.median(raw[~gaps]) == 1.0


def test_every_value_equals_scikit_survivals_loaders():
    sksurv = pytest.importorskip("sksurv")
    from sksurv.column import encode_categorical
    from sksurv.datasets import load_flchain as sk_flchain
    from sksurv.datasets import load_gbsg2 as sk_gbsg2
    from sksurv.datasets import load_veterans_lung_cancer as sk_veterans
    from sksurv.preprocessing import OneHotEncoder

    assert sksurv.__version__
    # GBSG2, encoded step by step as the random-survival-forest guide does
    Xs, ys = sk_gbsg2()
    expected = OneHotEncoder().fit_transform(Xs.drop("tgrade", axis=1))
    expected["tgrade"] = Xs["tgrade"].astype(object).map({"I": 0.0, "II": 1.0, "III": 2.0})
    X, y, names = load_gbsg2()
    assert names == list(expected.columns)
    np.testing.assert_array_equal(X, expected.to_numpy(dtype=float))
    np.testing.assert_array_equal(y["event"], ys["cens"])
    np.testing.assert_array_equal(y["time"], ys["time"])
    # veterans, as the survival-SVM guide does
    Xs, ys = sk_veterans()
    expected = encode_categorical(Xs)
    X, y, names = load_veterans()
    assert names == list(expected.columns)
    np.testing.assert_array_equal(X, expected.to_numpy(dtype=float))
    np.testing.assert_array_equal(y["event"], ys["Status"])
    np.testing.assert_array_equal(y["time"], ys["Survival_in_days"])
    # flchain: chapter dropped, sample.yr as a number, creatinine's gaps at the median
    Xs, ys = sk_flchain()
    Xs = Xs.drop(columns="chapter")
    Xs["sample.yr"] = Xs["sample.yr"].astype(int).astype(float)
    Xs["creatinine"] = Xs["creatinine"].fillna(Xs["creatinine"].median())
    expected = OneHotEncoder().fit_transform(Xs)
    X, y, names = load_flchain()
    assert names == list(expected.columns)
    np.testing.assert_array_equal(X, expected.to_numpy(dtype=float))
    np.testing.assert_array_equal(y["event"], ys["death"])
    np.testing.assert_array_equal(y["time"], ys["futime"])


def test_rossi_equals_lifelines():
    datasets = pytest.importorskip("lifelines.datasets")
    frame = datasets.load_rossi()
    X, y, names = load_rossi()
    np.testing.assert_array_equal(X, frame[names].to_numpy(dtype=float))
    np.testing.assert_array_equal(y["event"], frame["arrest"] == 1)
    np.testing.assert_array_equal(y["time"], frame["week"])
