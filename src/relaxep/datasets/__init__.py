"""Datasets: generated problems, the paper's five benchmarks (registry, loading, download), splits, regression,
ordinal, count, survival, multi-class and GLM (binomial, beta, count) data."""

from relaxep.datasets._download import fetch
from relaxep.datasets.glm import GLM_DATASETS, load_glm
from relaxep.datasets.multiclass import load_crabs, load_glass, load_penguins, make_waveform
from relaxep.datasets.ordinal import ORDINAL_DATASETS, load_broffitt, load_coal_mining, load_lynx, load_ordinal
from relaxep.datasets.registry import DATASETS, DatasetInfo, dataset_info, get_data_home
from relaxep.datasets.regression import (
    REGRESSION_DATASETS,
    RegressionData,
    contaminate,
    load_mcycle,
    load_nh4,
    load_regression,
    make_friedman,
    make_neal,
    neal_function,
    regression_split,
)
from relaxep.datasets.ripley import load_synth
from relaxep.datasets.splits import fixed_splits, paper_splits, random_splits
from relaxep.datasets.suite import make_problem, problem_grid, synthetic_problems
from relaxep.datasets.survival import load_flchain, load_gbsg2, load_rossi, load_veterans
from relaxep.datasets.synthetic import flip_labels, make_synthetic, make_toy, synthetic_data
from relaxep.datasets.uci import load_dataset

__all__ = [
    "DATASETS",
    "GLM_DATASETS",
    "ORDINAL_DATASETS",
    "REGRESSION_DATASETS",
    "DatasetInfo",
    "RegressionData",
    "contaminate",
    "dataset_info",
    "fetch",
    "fixed_splits",
    "flip_labels",
    "get_data_home",
    "load_broffitt",
    "load_coal_mining",
    "load_crabs",
    "load_dataset",
    "load_flchain",
    "load_gbsg2",
    "load_glass",
    "load_glm",
    "load_lynx",
    "load_mcycle",
    "load_nh4",
    "load_ordinal",
    "load_penguins",
    "load_regression",
    "load_rossi",
    "load_synth",
    "load_veterans",
    "make_friedman",
    "make_neal",
    "make_problem",
    "make_synthetic",
    "make_toy",
    "make_waveform",
    "neal_function",
    "paper_splits",
    "problem_grid",
    "random_splits",
    "regression_split",
    "synthetic_data",
    "synthetic_problems",
]
