"""Test problems shared by the test modules: plain data and kernel matrices, no relaxep numerics.

Builders take their size and seed; the fixtures in ``conftest.py`` wrap the fixed ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

# The paper's Section 7.1 setting (relaxep.datasets.make_toy is checked against these):
# five 2-D points, one mislabelled (the last), linear kernel k(x, x') = x.x'.
TOY_X = np.array([[1.0, 1.5], [1.5, 0.4], [-1.2, -0.8], [-0.4, -1.5], [2.2, -0.3]])
TOY_Y = np.array([1.0, 1.0, -1.0, -1.0, -1.0])


def rbf(X: np.ndarray, length_scale: float, amplitude: float = 1.0) -> np.ndarray:
    """``amplitude * exp(-|x - x'|^2 / (2 length_scale^2))``."""
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return amplitude * np.exp(-0.5 * d2 / length_scale**2)


def curved_problem(n: int, seed: int, length_scale: float = 0.5, flip: float = 0.2, amplitude: float = 1.0):
    """2-D Gaussian inputs, a curved boundary ``x0 + 0.3 x1^2 = 0``, ``flip`` of the labels flipped."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] + 0.3 * X[:, 1] ** 2 > 0, 1.0, -1.0)
    y[rng.random(n) < flip] *= -1
    return rbf(X, length_scale, amplitude) + 1e-6 * np.eye(n), y


def wavy_problem(n: int, seed: int, flip: float = 0.1, jitter: float = 1e-4):
    """2-D Gaussian inputs, boundary ``sin(2 x0) + x1 = 0``, RBF width 0.7."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] > 0, 1.0, -1.0)
    y[rng.random(n) < flip] *= -1
    return rbf(X, 0.7) + jitter * np.eye(n), y


def feasibility_problem(n: int = 50, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` inputs in the unit square labelled 1 above the curve sin(6 x0) + x1 = 0.7, three labels flipped
    (the BoTorch models' feasibility data)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, (n, 2))
    y = (np.sin(6.0 * X[:, 0]) + X[:, 1] > 0.7).astype(int)
    flip = rng.choice(n, 3, replace=False)
    y[flip] = 1 - y[flip]
    return X, y


def oscillating_inputs():
    """Dense 1-D inputs, noise-free step with small eps, 20% flipped labels (seed 54 of a search).

    Returns ``X, y, length_scale, amplitude, eps``; the kernel is ``amplitude * RBF`` plus
    ``1e-6 * amplitude`` jitter (:func:`oscillating_problem`).
    """
    rng = np.random.default_rng(54)
    n = int(rng.choice([40, 60, 80]))
    X = rng.uniform(-1, 1, size=(n, 1))
    y = np.sign(np.sin(3 * X[:, 0]) + 1e-9)
    y[rng.random(n) < 0.2] *= -1
    ls = float(rng.choice([0.1, 0.3, 1.0]))
    amp = float(rng.choice([1.0, 10.0, 100.0]))
    eps = float(rng.choice([0.05, 0.1, 0.2]))
    return X, y, ls, amp, eps


def oscillating_problem():
    """``K, y, eps`` of :func:`oscillating_inputs`: plain EP oscillates there, damped EP converges."""
    X, y, ls, amp, eps = oscillating_inputs()
    return rbf(X, ls, amp) + 1e-6 * amp * np.eye(len(y)), y, eps


@contextmanager
def local_dask_client(n_workers: int, processes: bool = False) -> Iterator:
    """A Dask ``LocalCluster`` of ``n_workers`` one-thread workers (processes, or threads of this process) and its
    client, both closed on exit (the caller has skipped without ``distributed``)."""
    import distributed

    with (
        distributed.LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=processes, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


#: the part of a device script (run in a subprocess, the library named in ``sys.argv[1]``) that picks the array
#: library: ``lib(a)`` puts a numpy array there (``torch`` on the CPU, or ``array_api_strict`` on a device whose arrays
#: refuse numpy's implicit conversion, as a GPU's do); the script imports ``sys`` first
DEVICE_ARRAYS = """
if sys.argv[1] == "torch":
    import torch
    lib = lambda a: torch.asarray(a, dtype=torch.float64) if a.dtype.kind == "f" else torch.asarray(a)
else:
    import array_api_strict as xs
    device = xs.Device("device1")  # its arrays refuse numpy's implicit conversion, as a GPU's do
    lib = lambda a: xs.asarray(a, device=device)
"""
