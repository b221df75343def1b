"""Sparse multi-class GP classification at scale: the joint model (nested EP under a low-rank prior) against
one-vs-rest sparse fits with the same number of inducing inputs (issue 56).

``python benchmarks/sparse_multiclass.py --n 100000 --m 100 [--skip-ovr | --skip-joint]`` fits, on ``n`` training
rows and 10^4 test rows,

* ``GPClassifier(inducing_points=M, multi_class="joint")`` (the kernel learned by the dense joint model on
  500 stratified rows, ``M`` k-means inducing inputs, nested EP on all rows), and
* ``GPClassifier(inducing_points=M)``, the default one-vs-rest (ten sparse binary fits, each learning its
  kernel and inducing inputs as the binary sparse path does; the probabilities the multinomial probit of their
  latents at the link noise chosen by leave-one-out),

and prints a markdown table: method, M, fit and predict seconds, test error and the mean negative log predictive
probability (NLL), beside the Bayes classifier's (the generator's own class probabilities).  ``--n 10000``
runs in a couple of minutes.

The problem: 10 classes in 6 dimensions, each class a mixture of two unit-variance Gaussian blobs with equal
weights; the 20 centres are drawn once, uniform on ``[-4.5, 4.5]^6`` (seed 12345), the labels uniform.  The Bayes
error is about 3-4 %.  Timings on a shared machine are noisy (other processes use its cores).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy.special import logsumexp

from relaxep import GPClassifier

N_CLASSES, DIM, PER_CLASS, SPREAD, STD, CENTRE_SEED = 10, 6, 2, 4.5, 1.0, 12345


def blobs(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` rows of the problem (module docstring): inputs, labels and the Bayes log class probabilities."""
    centres = np.random.default_rng(CENTRE_SEED).uniform(-SPREAD, SPREAD, (N_CLASSES * PER_CLASS, DIM))
    y = rng.integers(0, N_CLASSES, n)
    X = centres[y * PER_CLASS + rng.integers(0, PER_CLASS, n)] + STD * rng.standard_normal((n, DIM))
    log_lik = np.concatenate(
        [-0.5 * ((X[s : s + 5000, None, :] - centres[None]) ** 2).sum(-1) / STD**2 for s in range(0, n, 5000)]
    )
    log_class = logsumexp(log_lik.reshape(n, N_CLASSES, PER_CLASS), axis=2)
    return X, y, log_class - logsumexp(log_class, axis=1, keepdims=True)


def scores(log_p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Test error (%) and mean negative log probability of the true class."""
    return 100.0 * float(np.mean(np.argmax(log_p, 1) != y)), float(-np.mean(log_p[np.arange(y.size), y]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="training rows")
    parser.add_argument("--n-test", type=int, default=10_000, help="test rows")
    parser.add_argument("--m", type=int, default=100, help="inducing inputs")
    parser.add_argument("--skip-ovr", action="store_true", help="fit the joint model only")
    parser.add_argument("--skip-joint", action="store_true", help="fit the one-vs-rest model only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X, y, _ = blobs(args.n, rng)
    Xt, yt, bayes = blobs(args.n_test, rng)
    rows = [("Bayes classifier", "-", "-", "-", *scores(bayes, yt))]
    fits = [] if args.skip_joint else [("joint (nested EP, low-rank prior)", {"multi_class": "joint"})]
    if not args.skip_ovr:  # (the default: multi_class="auto")
        fits.append(("one-vs-rest, the default (sparse FITC per class)", {}))
    for name, extra in fits:
        model = GPClassifier(inducing_points=args.m, random_state=0, **extra)
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(X, y)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        log_p = model.predict_log_proba(Xt)
        predict_s = time.perf_counter() - t0
        note = f" ({len(caught)} warnings)" if caught else ""
        joint = extra.get("multi_class") == "joint"
        sweeps = f", {model.result_.n_sweeps} sweeps, {model.result_.status}" if joint else ""
        if not joint:
            sweeps = f", link noise {model.model_.link_noise_:.3f}"
        rows.append((name, str(args.m), f"{fit_s:.1f}", f"{predict_s:.1f}", *scores(log_p, yt)))
        print(f"{name}: kernel {model.kernel_}{sweeps}{note}; fit {fit_s:.1f} s, error and NLL {rows[-1][-2:]}")
    print(f"\nn = {args.n} training rows, {args.n_test} test rows, {N_CLASSES} classes, {DIM} dimensions\n")
    print("| method | M | fit_s | predict_s | error_% | NLL |")
    print("|---|---|---|---|---|---|")
    for name, m, fit_s, predict_s, err, nll in rows:
        print(f"| {name} | {m} | {fit_s} | {predict_s} | {err:.2f} | {nll:.4f} |")


if __name__ == "__main__":
    main()
