"""A seeded suite of label-noise problems on which plain EP fails, and the paper's synthetic protocol.

Each suite problem is drawn from a seed over a grid (input dimension, n, flip rate, eps,
length-scale, kernel amplitude, latent noise, duplicated inputs, far outliers); the synthetic
problems are the Section 7.2 data (200 points per class, ``eps`` = flip rate, unit-amplitude
RBF of fixed width).  :func:`make_problem` turns a specification into kernel matrices, labels
and a likelihood, deterministically.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import RBF

from relaxep.datasets.synthetic import synthetic_data
from relaxep.likelihoods import NoisyStep

__all__ = ["make_problem", "problem_grid", "synthetic_problems"]


def problem_grid(n_problems: int, seed: int = 6, max_n: int = 400) -> list[dict[str, Any]]:
    """``n_problems`` problem specifications drawn from the grid with a fixed seed."""
    rng = np.random.default_rng(seed)
    sizes = [n for n in (50, 100, 200, 400, 800) if n <= max_n]
    specs = []
    for k in range(n_problems):
        specs.append(
            dict(
                problem=k,
                set="suite",
                dim=int(rng.choice([1, 2])),
                n=int(rng.choice(sizes)),
                flip=float(rng.choice([0.05, 0.1, 0.2, 0.3])),
                eps=float(rng.choice([0.01, 0.05, 0.1, 0.2])),
                length_scale=float(rng.choice([0.1, 0.3, 1.0])),
                amplitude=float(rng.choice([0.1, 1.0, 10.0, 100.0])),
                latent_noise=float(rng.choice([0.0, 0.01])),
                duplicates=bool(rng.random() < 0.25),
                outliers=bool(rng.random() < 0.25),
            )
        )
    return specs


def synthetic_problems(n_repeats: int, rates=(0.1, 0.2), length_scales=(0.5, 1.0)) -> list[dict[str, Any]]:
    """Problems of the paper's synthetic protocol, numbered from 1000 (``set="synthetic"``)."""
    specs = []
    for r in range(n_repeats):
        for rate in rates:
            for ls in length_scales:
                specs.append(
                    dict(
                        problem=1000 + len(specs),
                        set="synthetic",
                        repeat=r,
                        dim=2,
                        n=400,
                        flip=rate,
                        eps=rate,
                        length_scale=ls,
                        amplitude=1.0,
                        latent_noise=0.0,
                        duplicates=False,
                        outliers=False,
                    )
                )
    return specs


def make_problem(spec: dict[str, Any], n_test: int = 1000):
    """Inputs, labels, kernel matrices and likelihood of one problem (deterministic in ``spec``)."""
    if spec.get("set") == "synthetic":
        X, y, X_test, y_test = synthetic_data(spec["repeat"], spec["flip"], 2 * n_test)
        kernel = RBF(spec["length_scale"])
        jitter = 1e-6
        K = kernel(X) + jitter * np.eye(len(y))
        k_diag = np.full(len(y_test), 1.0 + jitter)
        return K, y, kernel(X_test, X), k_diag, y_test, NoisyStep(spec["eps"])
    rng = np.random.default_rng([spec["problem"], 11])
    n, d = spec["n"], spec["dim"]

    def draw(m):
        X = rng.uniform(-1.0, 1.0, size=(m, d))
        f = np.sin(3.0 * X[:, 0]) + (X[:, 1] if d > 1 else 0.0)
        return X, np.where(f >= 0, 1.0, -1.0)

    X, y = draw(n)
    y[rng.random(n) < spec["flip"]] *= -1.0
    if spec["duplicates"]:  # a fifth of the inputs repeated, half of the copies with the other label
        k = n // 5
        src = rng.choice(n, k, replace=False)
        X[-k:] = X[src]
        y[-k:] = np.where(rng.random(k) < 0.5, -y[src], y[src])
    if spec["outliers"]:  # a few far points with the wrong label for their side
        k = max(2, n // 50)
        X[:k] = 5.0 * np.sign(rng.standard_normal((k, d)))
        y[:k] = -np.where(np.sin(3.0 * X[:k, 0]) + (X[:k, 1] if d > 1 else 0.0) >= 0, 1.0, -1.0)
    if not (np.any(y > 0) and np.any(y < 0)):
        y[0] = -y[0]
    X_test, y_test = draw(n_test)
    amp = spec["amplitude"]
    kernel = RBF(spec["length_scale"])
    noise = amp * (spec["latent_noise"] + 1e-6)
    K = amp * kernel(X) + noise * np.eye(n)
    return K, y, amp * kernel(X_test, X), np.full(n_test, amp + noise), y_test, NoisyStep(spec["eps"])
