"""Datasets: the shipped benchmark data, the paper's splits, downloads from a local mirror, label noise."""

import functools
import hashlib
import http.server
import re
import socket
import threading
from pathlib import Path

import numpy as np
import pytest

from relaxep.datasets import (
    DATASETS,
    dataset_info,
    fetch,
    fixed_splits,
    flip_labels,
    get_data_home,
    load_dataset,
    make_toy,
    paper_splits,
    random_splits,
    uci,
)
from relaxep.datasets.registry import CONTENT_SHA256, PACKAGED_DATA

SHARED_DATA = PACKAGED_DATA  # the copies inside the package: every test runs on a fresh clone

#: sha256 of the project's checked copies (the provenance README beside them lists the same)
FILE_SHA256 = {
    "diabetes_uci768.csv": "d24219c25c3a47acbb3e5fdfd4aa0fefd22a0f91f0bc40f5d8a8b145c9e56b5f",
    "diabetis_split_badsns.csv": "a25e5a1c56ad9f911a7d7d6d1f53c496cd86c461a7f88a846ef6146d92a3c956",
    "haberman.csv": "b7cce041cff60f48ac3139c2e3aaa50e6435fe916cfef1a9c6ce29da50d7cbef",
    "heart.csv": "4c0865edffcfe56e30c36edf52a1d4e593144c6b581e07619aa3b6c056043bc1",
    "heart_raetsch_splits.csv": "2fd0219b6373e793f50739cf5f8591994ebe7fb4f0dc8cd2fc06f92546369520",
    "pima.csv": "e47fdcf210341a33228b6f5750446475d7e2b3865276430636ecd27a8b2671b8",
    "spambase.csv": "1de92974a25755fb7ebe0683e09ef9fe9fb0c2a0afa29f38b45b799bbce46583",
}

# label counts (+1, -1) from the provenance README (relaxep/datasets/data/README.md)
LABEL_COUNTS = {
    "heart": (120, 150),
    "pima": (177, 355),
    "diabetes": (268, 500),
    "haberman": (225, 81),
    "spambase": (1813, 2788),
}


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_shipped_datasets_have_the_documented_shapes_and_label_counts(name):
    info = DATASETS[name]
    X, y = load_dataset(name, SHARED_DATA, strict=True)
    assert X.dtype == y.dtype == np.float64
    assert X.shape == (info.n_samples, info.n_features) == (info.n_samples, len(info.columns))
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert (np.sum(y == 1), np.sum(y == -1)) == LABEL_COUNTS[name]
    assert info.n_train + info.n_test == info.n_samples


def test_dataset_table_is_the_papers_protocol_and_read_only():
    protocol = {name: (info.n_train, info.n_test, info.n_splits) for name, info in DATASETS.items()}
    assert protocol == {
        "heart": (81, 189, 20),
        "pima": (319, 213, 20),
        "diabetes": (468, 300, 100),
        "haberman": (183, 123, 100),
        "spambase": (276, 4325, 100),
    }
    with pytest.raises(TypeError):
        DATASETS["iris"] = DATASETS["heart"]
    info = DATASETS["diabetes"]
    assert info.n_splits == 100 and info.file == "diabetes_uci768.csv" and info.n_features == 8
    assert dataset_info("diabetes") is info
    with pytest.raises(ValueError, match="unknown dataset 'iris'"):
        dataset_info("iris")


# --------------------------------------------------------------------------- splits
@pytest.mark.parametrize("name", sorted(DATASETS))
def test_paper_splits_follow_the_protocol_and_partition_the_rows(name):
    info = DATASETS[name]
    splits = paper_splits(name, n_splits=3)
    assert len(splits) == 3
    for train, test in splits:
        assert train.dtype == test.dtype == np.intp
        assert (train.size, test.size) == (info.n_train, info.n_test)
        assert np.all(np.diff(train) > 0) and np.all(np.diff(test) > 0)
        np.testing.assert_array_equal(np.union1d(train, test), np.arange(info.n_samples))
    assert not np.array_equal(splits[0][0], splits[1][0])


def test_paper_splits_are_deterministic_prefix_stable_and_seeded():
    assert len(paper_splits("heart")) == 20
    assert len(paper_splits("haberman")) == 100
    short, long = paper_splits("pima", n_splits=2), paper_splits("pima", n_splits=7)
    again = paper_splits("pima", n_splits=7)
    for (a_train, a_test), (b_train, b_test) in zip(short, long[:2], strict=True):
        np.testing.assert_array_equal(a_train, b_train)
        np.testing.assert_array_equal(a_test, b_test)
    for (a_train, _), (b_train, _) in zip(long, again, strict=True):
        np.testing.assert_array_equal(a_train, b_train)
    assert not np.array_equal(paper_splits("pima", 1, random_state=1)[0][0], short[0][0])
    with pytest.raises(ValueError, match="n_splits"):
        paper_splits("pima", n_splits=0)
    with pytest.raises(ValueError, match="random_state"):
        paper_splits("pima", random_state=-1)
    with pytest.raises(ValueError, match="unknown dataset"):
        paper_splits("iris")


@pytest.mark.parametrize(("name", "count", "sizes"), [("heart", 10, (170, 100)), ("diabetes", 1, (468, 300))])
def test_fixed_splits_are_disjoint_with_the_documented_sizes(name, count, sizes):
    splits = fixed_splits(name, SHARED_DATA)
    assert len(splits) == count
    n = DATASETS[name].n_samples
    for train, test in splits:
        assert train.dtype == test.dtype == np.intp
        assert (train.size, test.size) == sizes
        assert np.intersect1d(train, test).size == 0
        assert np.unique(train).size == train.size and np.unique(test).size == test.size
        assert train.min() >= 0 and max(train.max(), test.max()) < n
    # file order, not sorted: the first heart training index of realisation 1 is 232
    if name == "heart":
        assert splits[0][0][0] == 232


def test_fixed_splits_exist_only_for_heart_and_diabetes(tmp_path):
    with pytest.raises(ValueError, match="no fixed splits"):
        fixed_splits("pima", tmp_path)
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path))):
        fixed_splits("heart", tmp_path)


# --------------------------------------------------------------------------- loading
def test_missing_file_names_the_data_home_and_fetch(tmp_path):
    with pytest.raises(FileNotFoundError, match="data_home") as info:
        load_dataset("heart", tmp_path)
    message = str(info.value)
    assert str(tmp_path) in message and "relaxep.datasets.fetch" in message and "RELAXEP_DATA" in message
    with pytest.raises(ValueError, match="unknown dataset 'iris'"):
        load_dataset("iris", tmp_path)


def test_shape_mismatch_raises_by_default_and_warns_when_not_strict(tmp_path):
    (tmp_path / "haberman.csv").write_text("a,b,label\n1,2,1\n3,4,-1\n")
    with pytest.raises(ValueError, match=r"306 rows x 3 features, the file has 2 x 2"):
        load_dataset("haberman", tmp_path)
    with pytest.warns(UserWarning, match="haberman"):
        X, _ = load_dataset("haberman", tmp_path, strict=False)
    assert X.shape == (2, 2)
    (tmp_path / "haberman.csv").write_text("a,b,label\n1,2,0\n")
    with pytest.raises(ValueError, match="-1/\\+1"):
        load_dataset("haberman", tmp_path)


def test_relaxep_data_environment_variable_is_honoured(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAXEP_DATA", str(SHARED_DATA))
    assert get_data_home() == SHARED_DATA
    assert get_data_home(tmp_path) == tmp_path
    assert load_dataset("haberman")[0].shape == (306, 3)
    monkeypatch.delenv("RELAXEP_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert get_data_home() == tmp_path / "relaxep"


# --------------------------------------------------------------------------- downloads
def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _write_originals(folder: Path) -> None:
    """The packaged CSVs written back in the original sources' formats."""
    folder.mkdir()
    X, y = load_dataset("heart", SHARED_DATA)
    classes = np.where(y > 0, 2, 1)  # Statlog: 1 absence, 2 presence
    lines = [" ".join(repr(float(v)) for v in row) + f" {c}" for row, c in zip(X, classes, strict=True)]
    (folder / "heart.dat").write_text("\n".join(lines) + "\n")

    X, y = load_dataset("haberman", SHARED_DATA)
    lines = [",".join(map(_number, row)) + f",{1 if label > 0 else 2}" for row, label in zip(X, y, strict=True)]
    (folder / "haberman.data").write_text("\n".join(lines) + "\n")

    for name, file, newline in [
        ("spambase", "spambase.data", "\r"),  # one GitHub copy has CR line endings
        ("diabetes", "pima-indians-diabetes.data.csv", "\r\n"),
    ]:
        X, y = load_dataset(name, SHARED_DATA)
        lines = [",".join(map(_number, row)) + f",{1 if label > 0 else 0}" for row, label in zip(X, y, strict=True)]
        (folder / file).write_bytes((newline.join(lines) + newline).encode())

    X, y = load_dataset("pima", SHARED_DATA)
    header = '"rownames","npreg","glu","bp","skin","bmi","ped","age","type"'
    for file, rows in [("Pima.tr.csv", slice(0, 200)), ("Pima.te.csv", slice(200, 532))]:
        lines = [header]
        for k, (row, label) in enumerate(zip(X[rows], y[rows], strict=True), start=1):
            kind = "Yes" if label > 0 else "No"
            lines.append(f'"{k}",' + ",".join(map(_number, row)) + f',"{kind}"')
        (folder / file).write_text("\n".join(lines) + "\n")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """A local HTTP server: ``<url>good/`` serves the originals, ``<url>bad/`` one corrupted value."""
    root = tmp_path_factory.mktemp("mirror")
    _write_originals(root / "good")
    (root / "bad").mkdir()
    text = (root / "good" / "haberman.data").read_text().splitlines()
    assert text[0] == "30,64,1,1"
    text[0] = "31,64,1,1"
    (root / "bad" / "haberman.data").write_text("\n".join(text) + "\n")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def fetched(mirror, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    return home, {name: fetch(name, home, mirror=mirror + "good/", timeout=5.0) for name in DATASETS}


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_fetch_from_the_original_formats_reproduces_the_shipped_data(fetched, name):
    home, paths = fetched
    assert paths[name] == home / DATASETS[name].file
    X, y = load_dataset(name, home, strict=True)
    X_ref, y_ref = load_dataset(name, SHARED_DATA)
    np.testing.assert_array_equal(X, X_ref)
    np.testing.assert_array_equal(y, y_ref)
    assert paths[name].read_text().splitlines()[0] == (SHARED_DATA / DATASETS[name].file).read_text().splitlines()[0]


def test_fetch_writes_the_shipped_bytes_and_leaves_no_temporary_files(fetched):
    home, paths = fetched
    assert sorted(p.name for p in home.iterdir()) == sorted(info.file for info in DATASETS.values())
    for name, path in paths.items():
        shared = SHARED_DATA / DATASETS[name].file
        assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(shared.read_bytes()).hexdigest()


def test_a_corrupted_download_fails_its_checksum_and_caches_nothing(mirror, tmp_path):
    home = tmp_path / "home"
    with pytest.raises(ValueError, match="checksum mismatch for dataset 'haberman'") as info:
        fetch("haberman", home, mirror=mirror + "bad", timeout=5.0)
    assert mirror + "bad/haberman.data" in str(info.value)
    assert CONTENT_SHA256["haberman"] in str(info.value)
    assert not home.exists() or not any(home.iterdir())


def test_an_unreachable_mirror_gives_a_connection_error_naming_the_data_home(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    home = tmp_path / "home"
    with pytest.raises(ConnectionError, match="failed") as info:
        fetch("heart", home, mirror=f"http://127.0.0.1:{port}/", timeout=5.0)
    message = str(info.value)
    assert f"http://127.0.0.1:{port}/heart.dat" in message
    assert str(home) in message and "RELAXEP_DATA" in message
    assert not home.exists()


def test_load_dataset_downloads_a_missing_file_on_request(mirror, tmp_path, monkeypatch):
    monkeypatch.setattr(uci, "fetch", functools.partial(fetch, mirror=mirror + "good/", timeout=5.0))
    X, y = load_dataset("haberman", tmp_path, download=True)
    assert (tmp_path / "haberman.csv").is_file()
    X_ref, y_ref = load_dataset("haberman", SHARED_DATA)
    np.testing.assert_array_equal(X, X_ref)
    np.testing.assert_array_equal(y, y_ref)
    # fetch honours RELAXEP_DATA too
    monkeypatch.setenv("RELAXEP_DATA", str(tmp_path / "env"))
    assert fetch("heart", mirror=mirror + "good/", timeout=5.0) == tmp_path / "env" / "heart.csv"


# --------------------------------------------------------------------------- toy data and label noise
def test_make_toy_has_five_points_and_one_mislabelled():
    X, y, bad = make_toy()
    assert X.shape == (5, 2) and y.shape == (5,)
    assert set(y) == {-1.0, 1.0}
    assert bad == 4 and y[bad] == -1 and X[bad, 0] == X[:, 0].max()
    X[0, 0] = 99.0
    assert make_toy()[0][0, 0] == 1.0


@pytest.mark.parametrize("rate", [0.0, 0.1, 0.25, 0.49])
def test_flip_labels_flips_exactly_round_rate_n_and_copies(rate):
    y = np.where(np.arange(37) % 3 == 0, 1.0, -1.0)
    before = y.copy()
    flipped_y, mask = flip_labels(y, rate, random_state=0)
    np.testing.assert_array_equal(y, before)
    assert mask.dtype == bool and mask.sum() == round(rate * y.size)
    np.testing.assert_array_equal(flipped_y[mask], -y[mask])
    np.testing.assert_array_equal(flipped_y[~mask], y[~mask])
    np.testing.assert_array_equal(flip_labels(y, rate, random_state=0)[1], mask)


def test_flip_labels_rejects_bad_rates_and_labels():
    for rate in (-0.1, 0.5, float("nan")):
        with pytest.raises(ValueError, match="rate"):
            flip_labels([1, -1], rate, 0)
    with pytest.raises(ValueError, match="-1/\\+1"):
        flip_labels([0, 1], 0.1, 0)


def test_dataset_loader_reads_a_users_copy_and_names_the_folder_when_missing(tmp_path, monkeypatch):
    (tmp_path / "pima.csv").write_text("a,b,label\n1,2,1\n3,4,-1\n5,6,1\n")
    with pytest.raises(ValueError, match="should have 532 rows"):
        load_dataset("pima", tmp_path)
    with pytest.warns(UserWarning, match="should have 532 rows"):
        X, y = load_dataset("pima", tmp_path, strict=False)
    np.testing.assert_array_equal(X, [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(y, [1, -1, 1])
    monkeypatch.setenv("RELAXEP_DATA", str(tmp_path))
    with pytest.warns(UserWarning):
        assert load_dataset("pima", strict=False)[0].shape == (3, 2)
    with pytest.raises(FileNotFoundError, match="data_home"):
        load_dataset("heart", tmp_path)
    with pytest.raises(ValueError, match="unknown dataset"):
        load_dataset("iris", tmp_path)


def test_random_splits_partition_the_rows_reproducibly():
    splits = random_splits(50, 30, 3, random_state=4)
    assert len(splits) == 3
    for train, test in splits:
        assert train.size == 30 and test.size == 20
        np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(50))
    again = random_splits(50, 30, 3, random_state=4)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(splits, again, strict=True))
    assert not np.array_equal(splits[0][0], splits[1][0])
    with pytest.raises(ValueError, match="n_train"):
        random_splits(50, 50, 1)


@pytest.mark.parametrize("file", sorted(FILE_SHA256))
def test_the_packaged_files_are_the_checked_copies(file):
    assert hashlib.sha256((PACKAGED_DATA / file).read_bytes()).hexdigest() == FILE_SHA256[file]
    assert (PACKAGED_DATA / "README.md").read_text().count(FILE_SHA256[file]) == 1


def test_without_a_data_folder_the_packaged_copy_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAXEP_DATA", str(tmp_path / "empty"))
    X, _y = load_dataset("heart")
    assert X.shape == (270, 13)
    assert len(fixed_splits("heart")) == 10


def test_a_users_folder_overrides_the_packaged_copy(tmp_path, monkeypatch):
    text = (PACKAGED_DATA / "haberman.csv").read_text().splitlines()
    text[1] = "31" + text[1][2:]
    (tmp_path / "haberman.csv").write_text("\n".join(text) + "\n")
    monkeypatch.setenv("RELAXEP_DATA", str(tmp_path))
    assert load_dataset("haberman")[0][0, 0] == 31.0  # the environment's folder
    assert load_dataset("haberman", tmp_path)[0][0, 0] == 31.0  # an explicit folder
    monkeypatch.delenv("RELAXEP_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert load_dataset("haberman")[0][0, 0] == 30.0  # the packaged copy


@pytest.mark.parametrize("cell", ["nan", "inf", "-inf"])
def test_a_damaged_file_with_a_non_finite_cell_is_refused_at_load_time(tmp_path, cell):
    text = (PACKAGED_DATA / "haberman.csv").read_text().splitlines()
    fields = text[5].split(",")
    fields[1] = cell
    text[5] = ",".join(fields)
    (tmp_path / "haberman.csv").write_text("\n".join(text) + "\n")
    with pytest.raises(ValueError, match=r"non-finite value .* data row 5, column 2"):
        load_dataset("haberman", tmp_path)
