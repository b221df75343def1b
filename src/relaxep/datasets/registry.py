"""The paper's five benchmark datasets: files, sizes, split protocols, sources and checksums.

:data:`DATASETS` lists ``heart``, ``pima``, ``diabetes``, ``haberman`` and ``spambase`` with
their sizes and the paper's split protocol (Section 7.3).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

__all__ = ["DATASETS", "PACKAGED_DATA", "DatasetInfo", "dataset_info", "find_data_file", "get_data_home"]


@dataclass(frozen=True)
class DatasetInfo:
    """One benchmark dataset: its CSV file, its size and the paper's split protocol.

    Attributes
    ----------
    file : str
        File name in the data home.
    n_samples, n_features : int
        Rows and feature columns of the file (the ``label`` column not counted).
    n_train, n_test, n_splits : int
        The paper's protocol: ``n_splits`` random splits of ``n_train`` training and ``n_test``
        test points.
    columns : tuple of str
        Names of the feature columns, as in the CSV header.
    """

    file: str
    n_samples: int
    n_features: int
    n_train: int
    n_test: int
    n_splits: int
    columns: tuple[str, ...]


_SPAM_WORDS = (
    "make address all 3d our over remove internet order mail receive will people report addresses free business "
    "email you credit your font 000 money hp hpl george 650 lab labs telnet 857 data 415 85 technology 1999 parts "
    "pm direct cs meeting original project re edu table conference"
).split()

DATASETS: Mapping[str, DatasetInfo] = MappingProxyType(
    {
        "heart": DatasetInfo(
            "heart.csv",
            270,
            13,
            81,
            189,
            20,
            (
                "age",
                "sex",
                "chest_pain_type",
                "resting_blood_pressure",
                "serum_cholesterol",
                "fasting_blood_sugar_gt120",
                "resting_ecg",
                "max_heart_rate",
                "exercise_induced_angina",
                "oldpeak",
                "slope_peak_exercise_st",
                "num_major_vessels",
                "thal",
            ),
        ),
        "pima": DatasetInfo("pima.csv", 532, 7, 319, 213, 20, ("npreg", "glu", "bp", "skin", "bmi", "ped", "age")),
        "diabetes": DatasetInfo(
            "diabetes_uci768.csv",
            768,
            8,
            468,
            300,
            100,
            (
                "pregnancies",
                "plasma_glucose",
                "diastolic_bp",
                "triceps_skinfold",
                "serum_insulin",
                "bmi",
                "diabetes_pedigree",
                "age",
            ),
        ),
        "haberman": DatasetInfo(
            "haberman.csv",
            306,
            3,
            183,
            123,
            100,
            ("age_at_operation", "year_of_operation_1900", "positive_axillary_nodes"),
        ),
        "spambase": DatasetInfo(
            "spambase.csv",
            4601,
            57,
            276,
            4325,
            100,
            (
                *(f"word_freq_{word}" for word in _SPAM_WORDS),
                *(f"char_freq_{char}" for char in ";([!$#"),
                "capital_run_length_average",
                "capital_run_length_longest",
                "capital_run_length_total",
            ),
        ),
    }
)
"""The paper's benchmark datasets by name (read-only): file, size and split protocol."""

# sha256 of np.ascontiguousarray(np.column_stack([X, y]), dtype="<f8").tobytes() with X, y from
# load_dataset(name, "shared/data"), i.e. the project's checked copies (see shared/data/README.md).
# It checks the parsed content, not the downloaded bytes, whose checksums we do not know.
CONTENT_SHA256 = {
    "heart": "f93653e9830b333019080961188baa4682ef5e04688dc474e86e5bee52280e34",
    "pima": "770e81d5056530450453c38ffb4b891b1157d38668e5693717b4adf28cdc5061",
    "diabetes": "5f9d4abb4c2e31582f3f09f7a8eb83ef9c157c67da99cdc55c64ab8fcabcf47f",
    "haberman": "3e49e6153716cbdf3130b2a1673170b457abff0b3177ff2539b07a923f850d3b",
    "spambase": "57dc4670a703ed187ea9e46fadbb031d74649e2dc4ba1c24949cd1e53dc64f9f",
}

_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases/"
_RDATASETS = "https://vincentarelbundock.github.io/Rdatasets/csv/MASS/"
# The original files, in the order their rows are concatenated.
SOURCES: dict[str, tuple[str, ...]] = {
    "heart": (_UCI + "statlog/heart/heart.dat",),
    "pima": (_RDATASETS + "Pima.tr.csv", _RDATASETS + "Pima.te.csv"),
    "diabetes": ("https://raw.githubusercontent.com/jbrownlee/Datasets/master/pima-indians-diabetes.data.csv",),
    "haberman": (_UCI + "haberman/haberman.data",),
    "spambase": (_UCI + "spambase/spambase.data",),
}

# Fixed splits shipped beside the data: file, training and test set sizes.
FIXED_SPLITS = {
    "heart": ("heart_raetsch_splits.csv", 170, 100),
    "diabetes": ("diabetis_split_badsns.csv", 468, 300),
}


def dataset_info(name: str) -> DatasetInfo:
    """The :class:`DatasetInfo` of ``name``; a ``ValueError`` lists the known names."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {sorted(DATASETS)}")
    return DATASETS[name]


#: the copies that ship inside the package (``relaxep/datasets/data``, with README and licences)
PACKAGED_DATA = Path(__file__).parent / "data"


def get_data_home(path: str | os.PathLike | None = None) -> Path:
    """Where datasets are written and first looked for: ``path``, else ``$RELAXEP_DATA``, else ``~/.cache/relaxep``."""
    if path is not None:
        return Path(path)
    env = os.environ.get("RELAXEP_DATA")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "relaxep"


def find_data_file(file: str, data_home: str | os.PathLike | None = None) -> Path:
    """The file to read: in ``data_home`` when one is given (only there), else in the data home
    (``$RELAXEP_DATA`` or ``~/.cache/relaxep``) if a copy is there, else the packaged copy."""
    home = get_data_home(data_home)
    if data_home is not None or (home / file).is_file():
        return home / file
    return PACKAGED_DATA / file
