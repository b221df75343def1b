"""The shipped ordinal benchmarks (ORCA's pasture, tae, toy with 30 hold-out partitions) and coal-mining counts."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

import numpy as np
import pytest

from relaxep.datasets import ORDINAL_DATASETS, load_coal_mining, load_mcycle, load_nh4, load_ordinal
from relaxep.datasets.registry import PACKAGED_DATA

#: sha256 of the shipped files (data/README.md lists the same)
FILE_SHA256 = {
    "coal_mining.csv": "c08b09f56b0f3771cf3793bf141b4594ccca49b783b6fdb95b318f5023eb837d",
    "mcycle.csv": "7226138be37160c8ffbf520b5eb71b3b6dcf3da8e4cd99e2c6ab41ae731cc96c",
    "nh4_olympic.csv": "6c5e281a715815c636d7ea92b10516072e23fd45f6b4a4b57c83cdf3d8a27672",
    "ordinal_pasture.npz": "76b3ca103f8aed7986b47baf2aab3250edb80ecd39c273d3f7b0d6ba715de1b4",
    "ordinal_tae.npz": "c1712204516596fce4fffaa75d4c2e6ee6279980b5bbe7718441583e28553d61",
    "ordinal_toy.npz": "7af88682fda63aa570f3e68ada97d2240a9d5359be32e6d4251c696be48d4cdf",
}

# (n_samples, n_features, K, class counts, n_train, n_test); sizes and class distributions as
# ORCA's README lists them (pasture 36/25/3 (12,12,12), tae 151/54/3 (49,50,52), toy 300/2/5 (35,87,79,68,31))
EXPECTED = {
    "pasture": (36, 25, 3, (12, 12, 12), 27, 9),
    "tae": (151, 54, 3, (49, 50, 52), 113, 38),
    "toy": (300, 2, 5, (35, 87, 79, 68, 31), 225, 75),
}

#: ORCA's 60 files of each data set (ayrna/orca eaa629e687d04d73628782e16e92d330acb43faf,
#: exampledata/30-holdout/<name>/matlab/{train,test}_<name>.<i>), each parsed with Python's float into its rows
#: (features, then the label 1..K), through _digest in the order train_<name>.0, test_<name>.0, train_<name>.1,
#: ...: computed from ORCA's files on 2026-11-27 (data/README.md lists the same, and the sha256 of the files'
#: text); the shipped partitions must give the same digest, bit for bit
ORCA_DIGEST = {
    "pasture": "22690e856c4222f84ae0564e7c7946b1cc4856ea7c1b315f5f5140f6e64a3760",
    "tae": "a0ddbe6efe0ba866ab460ab4127f156b614dea6c3e76d0e8aff5a0d86471e233",
    "toy": "8420786c5af0fc563c6966a3c12aeb0ba37989babaea135374cf34d35675b1d3",
}


@pytest.mark.parametrize("file", sorted(FILE_SHA256))
def test_file_checksums_match_readme(file):
    assert hashlib.sha256((PACKAGED_DATA / file).read_bytes()).hexdigest() == FILE_SHA256[file]
    assert (PACKAGED_DATA / "README.md").read_text(encoding="utf-8").count(FILE_SHA256[file]) == 1


def test_registry_lists_the_three_sets():
    assert set(ORDINAL_DATASETS) == set(EXPECTED)
    for name, (n, d, k, _, n_train, n_test) in EXPECTED.items():
        assert ORDINAL_DATASETS[name] == (n, d, k, n_train, n_test)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shapes_labels_and_class_counts(name):
    n, d, k, counts, _, _ = EXPECTED[name]
    X, y, partitions = load_ordinal(name)
    assert X.shape == (n, d) and X.dtype == np.float64 and np.all(np.isfinite(X))
    assert y.shape == (n,) and np.issubdtype(y.dtype, np.integer)
    assert set(np.unique(y).tolist()) == set(range(k))  # labels 0..K-1, every class present
    assert tuple(np.bincount(y, minlength=k).tolist()) == counts
    assert len(partitions) == 30


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_partitions_are_disjoint_and_cover_the_data(name):
    n, _, _, _, n_train, n_test = EXPECTED[name]
    _, _, partitions = load_ordinal(name)
    seen = set()
    for train, test in partitions:
        assert np.issubdtype(train.dtype, np.integer) and np.issubdtype(test.dtype, np.integer)
        assert train.shape == (n_train,) and test.shape == (n_test,)
        assert len(np.unique(train)) == n_train and len(np.unique(test)) == n_test
        assert np.intersect1d(train, test).size == 0
        assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(n))
        seen.add((tuple(train.tolist()), tuple(test.tolist())))
    assert len(seen) == 30  # 30 different partitions


def test_tae_repeated_rows_are_kept():
    X, y, _ = load_ordinal("tae")
    rows = np.column_stack([X, y])
    assert len(np.unique(rows, axis=0)) == 151 - 41


def test_load_returns_fresh_arrays():
    X, _, partitions = load_ordinal("toy")
    X[:] = 0.0
    partitions[0][0][:] = 0
    X2, _, partitions2 = load_ordinal("toy")
    assert np.any(X2 != 0.0) and len(np.unique(partitions2[0][0])) == 225


@pytest.mark.parametrize("name", ["", "Pasture", "toy5", "heart", "melanoma"])
def test_unknown_name_refused(name):
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        load_ordinal(name)


def _digest(tables: Iterable[tuple[str, np.ndarray]]) -> str:
    """sha256 of named row tables: each name and shape, then the values as little-endian float64 bytes."""
    digest = hashlib.sha256()
    for name, rows in tables:
        digest.update(f"{name} {rows.shape[0]}x{rows.shape[1]}\n".encode())
        digest.update(np.ascontiguousarray(rows, dtype="<f8").tobytes())
    return digest.hexdigest()


def orca_rows(text: str) -> np.ndarray:
    """The rows of one of ORCA's ``matlab`` files (whitespace-separated numbers), as the digest was computed."""
    return np.array([[float(t) for t in line.split()] for line in text.splitlines() if line.strip()])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_partitions_reproduce_the_orca_files_exactly(name):
    """Every partition's ``column_stack([X[idx], y[idx] + 1])`` is ORCA's file's rows, in order and bit for bit:
    the shipped data's digest is the one of ORCA's files (the check once made against an ORCA checkout)."""
    X, y, partitions = load_ordinal(name)
    tables = (
        (f"{kind}_{name}.{i}", np.column_stack([X[idx], y[idx] + 1.0]))
        for i, (train, test) in enumerate(partitions)
        for kind, idx in (("train", train), ("test", test))
    )
    assert _digest(tables) == ORCA_DIGEST[name]
    assert (PACKAGED_DATA / "README.md").read_text(encoding="utf-8").count(ORCA_DIGEST[name]) == 1


def test_the_digest_sees_a_changed_value_order_or_shape():
    """The digest is of the values in order with the shapes: one changed bit, two swapped rows or a dropped
    column give another (so the test above checks what the ORCA comparison did); ORCA's text parses to it."""
    rows = orca_rows("1.0 0.5 2\n0.25 3.0 1\n")
    np.testing.assert_array_equal(rows, [[1.0, 0.5, 2.0], [0.25, 3.0, 1.0]])
    base = _digest([("train_x.0", rows)])
    assert base == _digest([("train_x.0", rows.copy())])
    assert base != _digest([("train_x.0", rows[::-1])])
    assert base != _digest([("train_x.0", rows[:, :2])])
    assert base != _digest([("train_x.0", rows + np.array([[np.spacing(1.0), 0, 0], [0, 0, 0]]))])
    assert base != _digest([("test_x.0", rows)])


def test_coal_mining_counts():
    years, counts = load_coal_mining()
    assert np.array_equal(years, np.arange(1851, 1963))
    assert counts.shape == (112,) and np.issubdtype(counts.dtype, np.integer) and counts.min() >= 0
    # boot::coal: "the dates of 191 explosions ... from March 15, 1851 until March 22 1962"
    assert counts.sum() == 191
    assert counts[0] > 0 and counts[-1] > 0
    # spot values of the binned boot::coal dates (see data/README.md)
    assert counts[:4].tolist() == [4, 5, 4, 1]
    assert counts[years == 1941].item() == 3 and counts[years == 1942].item() == 3
    assert counts[years < 1900].sum() == 135 and counts[years >= 1900].sum() == 56


def test_the_nh4_series_and_its_non_detects():
    """EnvStats' Olympic.NH4.df as lifelines ships it: 102 samples from 2009-01-06, 46 below one of four detection
    limits, each non-detect reported at its limit."""
    days, nh4, censored = load_nh4()
    assert days.shape == nh4.shape == censored.shape == (102,) and days[0] == 5.0 and np.all(np.diff(days) > 0)
    assert censored.sum() == 46 and np.all(nh4 > 0)
    assert sorted(set(nh4[censored].tolist())) == [0.006, 0.008, 0.01, 0.018]
    assert nh4[:4].tolist() == [0.006, 0.006, 0.006, 0.016] and censored[:4].tolist() == [True, True, False, False]


def test_the_mcycle_readings_as_mass_ships_them():
    """MASS's mcycle: 133 readings from 2.4 ms to 57.6 ms; the accelerations' range and mean as R prints them."""
    times, accel = load_mcycle()
    assert times.shape == accel.shape == (133,) and np.all(np.diff(times) >= 0)
    assert (times[0], times[-1]) == (2.4, 57.6) and (accel.min(), accel.max()) == (-134.0, 75.0)
    assert accel[:5].tolist() == [0.0, -1.3, -2.7, 0.0, -2.7]
    assert abs(accel.mean() - (-25.545865)) < 1e-6
