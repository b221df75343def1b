"""Datasets: generated problems, the paper's five benchmarks (registry, loading, download) and splits."""

from relaxep.datasets._download import fetch
from relaxep.datasets.registry import DATASETS, DatasetInfo, dataset_info, get_data_home
from relaxep.datasets.splits import fixed_splits, paper_splits, random_splits
from relaxep.datasets.suite import make_problem, problem_grid, synthetic_problems
from relaxep.datasets.synthetic import flip_labels, make_synthetic, make_toy, synthetic_data
from relaxep.datasets.uci import load_dataset

__all__ = [
    "DATASETS",
    "DatasetInfo",
    "dataset_info",
    "fetch",
    "fixed_splits",
    "flip_labels",
    "get_data_home",
    "load_dataset",
    "make_problem",
    "make_synthetic",
    "make_toy",
    "paper_splits",
    "problem_grid",
    "random_splits",
    "synthetic_data",
    "synthetic_problems",
]
