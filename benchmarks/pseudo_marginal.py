"""Cost of the pseudo-marginal reference (relaxep.hyper.reference) on a 50-point probit problem.

theta = (log amplitude, log length-scale) of ConstantKernel * RBF, Gamma(2, 1) priors on both positive
hyperparameters, labels sign(sin 2x + N(0, 0.25)) at 50 uniform points of [-3, 3].  For each N: the spread of
log p_hat at the posterior mean (200 repeats), then 2000 pseudo-marginal steps from (0.5, -0.3) with the proposal
diag(0.5, 0.1) * 2.38^2 / 2: wall time, acceptance, means, sds and Geyer's ESS.

    PYTHONPATH=src python3 benchmarks/pseudo_marginal.py --n-importance 16 64
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats
from sklearn.gaussian_process.kernels import RBF, ConstantKernel

from relaxep import Probit
from relaxep.hyper.reference import (
    ep_importance_proposal,
    log_evidence_estimate,
    log_space_density,
    pseudo_marginal_mcmc,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-importance", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = 50
    X = rng.uniform(-3.0, 3.0, (n, 1))
    y = np.where(np.sin(2.0 * X[:, 0]) + 0.5 * rng.standard_normal(n) > 0.0, 1.0, -1.0)
    kernel = ConstantKernel(1.0) * RBF(1.0)
    prior = log_space_density(stats.gamma(2.0, scale=1.0).logpdf)
    K = kernel.clone_with_theta(np.array([1.03, -0.46]))(X) + 1e-8 * np.eye(n)
    mean, cov = ep_importance_proposal(K, y, Probit())
    print("| N | sd of log p_hat | time / steps | ms/step | acceptance | mean theta | sd theta | ESS | ESS/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for N in args.n_importance:
        logs = [log_evidence_estimate(K, y, Probit(), mean, cov, N, rng) for _ in range(200)]
        t = time.perf_counter()
        res = pseudo_marginal_mcmc(
            X,
            y,
            kernel,
            Probit(),
            prior,
            [0.5, -0.3],
            np.diag([0.5, 0.1]),
            n_steps=args.steps,
            n_importance=N,
            random_state=0,
        )
        dt = time.perf_counter() - t
        print(
            f"| {N} | {np.std(logs):.3f} | {dt:.1f} s / {args.steps} | {1e3 * dt / args.steps:.1f} | "
            f"{res.acceptance_rate:.3f} | {np.round(res.mean, 3)} | {np.round(res.sd, 3)} | {np.round(res.ess, 0)} | "
            f"{np.round(res.ess / dt, 1)} |"
        )


if __name__ == "__main__":
    main()
