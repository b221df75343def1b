"""Preference learning: ``GPPreferenceLearner`` (EP) beside BoTorch's ``PairwiseGP`` (Laplace) in the same run.

``python benchmarks/preference.py [--sizes 100 300 1000] [--seeds 3] [--threads 2] [--out FILE]``

The problem (as the issue states it): items in ``[0, 1]^6`` with the Hartmann-6 utility ``u = -hartmann6(x)``,
``m`` comparisons among ``m/2`` random items (each pair of distinct random items; the answer is the sign of
``u_a - u_b + e``, ``e ~ N(0, (0.1 sd(u))^2)``), scored on 2000 held-out comparisons among 500 new items drawn
alike.  Printed per model: the fit's time, Kendall's tau between the posterior mean utility and ``u`` on the new
items, the held-out comparisons' mean negative log probability (NLL), and the Bayes floor (the NLL of the true
utility under the true noise).  Medians over the seeds; BLAS (and torch) threads pinned to ``--threads`` for
both, and relaxep's default fit also timed with nothing pinned.  BoTorch runs where it imports (a benchmark
environment: ``pip install botorch``), never a relaxep dependency; without it its rows say so.

Models: ``GPPreferenceLearner()`` (defaults: ``ConstantKernel * RBF``, isotropic, probit), the same with an ARD
``RBF`` (one length scale per input, started at 1), from ``m = 1000`` the sparse fit with 200 inducing items,
and ``PairwiseGP`` with its defaults (ARD RBF with BoTorch's priors), fitted by ``fit_gpytorch_mll`` on
``PairwiseLaplaceMarginalLogLikelihood``, as BoTorch's tutorial does.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy.special import log_ndtr
from scipy.stats import kendalltau
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from threadpoolctl import threadpool_limits

from relaxep.estimators.preference import GPPreferenceLearner

_A = np.array(
    [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
)
_P = 1e-4 * np.array(
    [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
     [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]
)  # fmt: skip
_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


#: above this many comparisons only the sparse fit runs (the dense one is O(m^3): minutes at 4000)
DENSE_UP_TO = 2000


def hartmann6(X: np.ndarray) -> np.ndarray:
    """The Hartmann-6 function (minimum -3.32237 at a known point in ``[0, 1]^6``)."""
    return -np.sum(_ALPHA * np.exp(-np.sum(_A * (X[:, None, :] - _P) ** 2, axis=2)), axis=1)


def comparisons(u: np.ndarray, m: int, sd: float, rng: np.random.Generator) -> np.ndarray:
    """``m`` noisy comparisons among the items of utility ``u``: rows ``(preferred, other)``."""
    n = u.size
    a = rng.integers(0, n, m)
    b = (a + rng.integers(1, n, m)) % n
    first = u[a] - u[b] + sd * rng.standard_normal(m) > 0
    return np.where(first[:, None], np.column_stack([a, b]), np.column_stack([b, a]))


def problem(m: int, seed: int) -> tuple[np.ndarray, ...]:
    """Training items and comparisons, new items with their utilities and held-out comparisons, the noise sd."""
    rng = np.random.default_rng(seed)
    X = rng.random((m // 2, 6))
    u = -hartmann6(X)
    sd = 0.1 * u.std()
    Xt = rng.random((500, 6))
    ut = -hartmann6(Xt)
    return X, comparisons(u, m, sd, rng), Xt, ut, comparisons(ut, 2000, sd, rng), sd


def bayes_floor(ut: np.ndarray, Ct: np.ndarray, sd: float) -> float:
    """The held-out NLL of the true utility under the true noise."""
    return float(-np.mean(log_ndtr((ut[Ct[:, 0]] - ut[Ct[:, 1]]) / sd)))


def score(mean: np.ndarray, Ct: np.ndarray, ut: np.ndarray, log_p: np.ndarray) -> tuple[float, float]:
    return float(kendalltau(mean, ut)[0]), float(-np.mean(log_p))


def fit_relaxep(est: GPPreferenceLearner, X, Cm, Xt, ut, Ct) -> tuple[float, float, float]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, Cm)
    seconds = time.perf_counter() - start
    return (seconds, *score(est.predict(Xt), Ct, ut, est.predict_log_proba(Xt, Ct)))


def fit_botorch(X, Cm, Xt, ut, Ct) -> tuple[float, float, float]:
    import torch
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.pairwise_gp import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = PairwiseGP(torch.as_tensor(X), torch.as_tensor(Cm))
        fit_gpytorch_mll(PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model))
    seconds = time.perf_counter() - start
    with torch.no_grad():
        post = model.posterior(torch.as_tensor(Xt))
        mean = post.mean.squeeze(-1).numpy()
        cov = post.distribution.covariance_matrix.numpy()
    a, b = Ct[:, 0], Ct[:, 1]
    var_d = cov[a, a] + cov[b, b] - 2.0 * cov[a, b]
    # its likelihood: Phi((f_a - f_b) / sqrt 2), so the predictive is Phi(mu_d / sqrt(2 + s_d^2))
    log_p = log_ndtr((mean[a] - mean[b]) / np.sqrt(2.0 + np.maximum(var_d, 0.0)))
    return (seconds, *score(mean, Ct, ut, log_p))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-botorch-above", type=int, default=None, help="skip PairwiseGP above this m")
    parser.add_argument("--out", default=None, help="also write the table (markdown) here")
    args = parser.parse_args()
    try:
        import torch

        torch.set_num_threads(args.threads)
        import botorch

        have_botorch = f"BoTorch {botorch.__version__}, torch {torch.__version__}"
    except ImportError:
        have_botorch = ""
    models = {
        "relaxep GPPreferenceLearner() (defaults)": lambda: GPPreferenceLearner(random_state=0),
        "relaxep GPPreferenceLearner(ARD RBF)": lambda: GPPreferenceLearner(C(1.0) * RBF(np.ones(6)), random_state=0),
    }
    lines = [
        f"Preference learning, Hartmann-6 utility; median over {args.seeds} seeds; BLAS threads {args.threads} "
        f"for every contender ({have_botorch or 'BoTorch not installed: no PairwiseGP rows'}).",
        "",
        "| m | model | fit (s), median (min-max) | Kendall tau | held-out NLL | Bayes floor |",
        "|---|---|---:|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    for m in args.sizes:
        runs: dict[str, list[tuple[float, float, float]]] = {}
        floors = []
        for seed in range(args.seeds):
            X, Cm, Xt, ut, Ct, sd = problem(m, seed)
            floors.append(bayes_floor(ut, Ct, sd))
            with threadpool_limits(args.threads):
                for name, make in models.items():
                    if m <= DENSE_UP_TO:
                        runs.setdefault(name, []).append(fit_relaxep(make(), X, Cm, Xt, ut, Ct))
                if m >= 1000:
                    sparse = GPPreferenceLearner(inducing_points=200, random_state=0)
                    runs.setdefault("relaxep GPPreferenceLearner(inducing_points=200)", []).append(
                        fit_relaxep(sparse, X, Cm, Xt, ut, Ct)
                    )
                if have_botorch and not (args.no_botorch_above and m > args.no_botorch_above):
                    runs.setdefault("BoTorch PairwiseGP (Laplace)", []).append(fit_botorch(X, Cm, Xt, ut, Ct))
            if m <= DENSE_UP_TO:
                runs.setdefault("relaxep defaults, threads not pinned", []).append(
                    fit_relaxep(GPPreferenceLearner(random_state=0), X, Cm, Xt, ut, Ct)
                )
        for name, values in runs.items():
            t, tau, nll = np.median(np.array(values), axis=0)
            times = [v[0] for v in values]
            spread = f" ({min(times):.2f}-{max(times):.2f})" if len(times) > 1 else ""
            row = f"| {m} | {name} | {t:.2f}{spread} | {tau:.3f} | {nll:.3f} | {np.median(floors):.3f} |"
            lines.append(row)
            print(row, flush=True)
    if args.out:
        command = f"python benchmarks/preference.py --sizes {' '.join(map(str, args.sizes))} --seeds {args.seeds}"
        with open(args.out, "w") as handle:
            handle.write("\n".join(lines) + f"\n\nCommand: `{command} --threads {args.threads}`\n")


if __name__ == "__main__":
    main()
