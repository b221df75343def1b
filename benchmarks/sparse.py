"""Sparse (FITC) EP at 10^4 - 10^6 points: time, peak memory, test error and NLL beside the Bayes floor.

The problem (issue 13): d = 8, X ~ N(0, I), f drawn from a GP with RBF(length scale 2,
variance 4) through 4096 random Fourier features, y = +1 with probability Phi(f); 20 000
fresh test points.  The Bayes floor is the error and NLL of the true f on those test labels.

Each row runs in its own process (so ``peak RSS`` is that row's own), BLAS pinned to
``--threads`` threads:

``fixed``
    kernel at the truth ``4 * RBF(2)``, inducing inputs by k-means or a random subset, probit
    likelihood, parallel EP (``GPClassifier(optimizer=None, inducing_points=M)``); ``time``
    is the whole posterior (placing Z, building the prior, EP), ``predict`` the 20 000 test
    probabilities.
``learned``
    kernel ``1 * RBF(1)`` and the inducing inputs learned by L-BFGS-B on the sparse EP
    evidence (``optimizer_subset`` points, ``optimizer_maxiter`` iterations), then the
    posterior on all points.
``stochastic``
    kernel ``1 * RBF(1)`` and the inducing inputs learned by the stochastic search
    (``optimizer="stochastic"``, the default from 20 000 rows: minibatch EP with tied sites and
    Adam, 1000 steps of 1000 rows), then EP on all points.
``svgp`` (a peer, ``--peers svgp:N:M``)
    GPflow's SVGP from the same start and the same k-means inducing inputs (probit Bernoulli,
    whitened, 2000 Adam steps of 1000 rows at learning rate 0.01), in the ``--peer-python``
    environment.
``dense``
    the dense fit (``GPClassifier(optimizer=None)``) at the true kernel, where it fits.

Usage::

    python benchmarks/sparse.py --sizes 10000 100000 --inducing 100 200 500 > benchmarks/results/sparse.md
    python benchmarks/sparse.py --rows learned --sizes 100000 --inducing 200

Writes Markdown to stdout; data are cached in ``benchmarks/.cache``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import log_ndtr, ndtr

LABELS = {"pygps": "pyGPs FITC_EP", "gpy": "GPy EPDTC", "svgp": "GPflow SVGP", "gpytorch": "GPyTorch SVGP"}
SVGP_STEPS, SVGP_BATCH, SVGP_LR = 2000, 1000, 0.01
CACHE = Path(__file__).resolve().parent / ".cache"
DIM, ELL, VAR, N_FEATURES, N_TEST, SEED = 8, 2.0, 4.0, 4096, 20_000, 13


def _latent(X: np.ndarray, omega: np.ndarray, phase: np.ndarray, weights: np.ndarray) -> np.ndarray:
    out = np.empty(X.shape[0])
    for s in range(0, X.shape[0], 20_000):
        out[s : s + 20_000] = np.cos(X[s : s + 20_000] @ omega + phase) @ weights
    return out * np.sqrt(2.0 * VAR / omega.shape[1])


def device_latent(torch: object, device: object) -> None:
    """Draw the latent function on ``device`` from now on (:func:`_latent`'s formula in float64, through torch:
    the 4096 cosines per row are the data generation's cost, minutes at 10^7 rows on one CPU core)."""

    def latent(X: np.ndarray, omega: np.ndarray, phase: np.ndarray, weights: np.ndarray) -> np.ndarray:
        om, ph, w = (torch.asarray(a, device=device) for a in (omega, phase, weights))  # type: ignore[attr-defined]
        out = np.empty(X.shape[0])
        for s in range(0, X.shape[0], 200_000):
            x = torch.asarray(X[s : s + 200_000], device=device)  # type: ignore[attr-defined]
            out[s : s + 200_000] = (torch.cos(x @ om + ph) @ w).cpu().numpy()  # type: ignore[attr-defined]
        return out * np.sqrt(2.0 * VAR / omega.shape[1])

    global _latent
    _latent = latent


def problem(n: int) -> tuple[np.ndarray, ...]:
    """Training rows are a prefix of one stream: the n = 10^4 set is the first rows of the 10^5 one."""
    path = CACHE / f"sparse_{n}.npz"
    larger = sorted(CACHE.glob("sparse_*.npz"), key=lambda q: int(q.stem.split("_")[1])) if CACHE.exists() else []
    larger = [q for q in larger if int(q.stem.split("_")[1]) >= n]
    if larger:  # training rows are a prefix of one stream
        z = np.load(larger[0])
        return z["X"][:n], z["y"][:n], z["Xt"], z["yt"], z["ft"]
    rng = np.random.default_rng(SEED)
    omega = rng.normal(size=(DIM, N_FEATURES)) / ELL
    phase = rng.uniform(0.0, 2.0 * np.pi, N_FEATURES)
    weights = rng.normal(size=N_FEATURES)
    test = np.random.default_rng(SEED + 1)
    Xt = test.normal(size=(N_TEST, DIM))
    ft = _latent(Xt, omega, phase, weights)
    yt = np.where(test.uniform(size=N_TEST) < ndtr(ft), 1.0, -1.0)
    X = np.random.default_rng(SEED + 2).normal(size=(n, DIM))
    y = np.where(np.random.default_rng(SEED + 3).uniform(size=n) < ndtr(_latent(X, omega, phase, weights)), 1.0, -1.0)
    CACHE.mkdir(exist_ok=True)
    np.savez(path, X=X, y=y, Xt=Xt, yt=yt, ft=ft)
    return X, y, Xt, yt, ft


def scores(p1: np.ndarray, yt: np.ndarray) -> tuple[float, float]:
    p1 = np.clip(p1, 1e-300, 1.0 - 1e-16)
    err = float(np.mean(np.where(p1 >= 0.5, 1.0, -1.0) != yt))
    nll = float(-np.mean(np.where(yt > 0, np.log(p1), np.log1p(-p1))))
    return err, nll


def bayes(yt: np.ndarray, ft: np.ndarray) -> tuple[float, float]:
    return float(np.mean(np.sign(ft) != yt)), float(-np.mean(log_ndtr(yt * ft)))


def fit_and_predict(clf: Any, X: Any, y: Any, Xt: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Seconds to fit, seconds to predict ``Xt``, and its probabilities of class +1."""
    start = time.perf_counter()
    clf.fit(X, y)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    p1 = clf.predict_proba(Xt)[:, 1]
    return fit_time, time.perf_counter() - start, p1


def run_dask(n, M, init, X, y, Xt, yt, ft, truth, stochastic: bool = False) -> dict:
    """DaskGPClassifier on a LocalCluster of 2 one-thread workers, shards of 10^4 rows (cluster start untimed);
    ``stochastic``: kernel ``1 * RBF(1)`` and Z learned by the stochastic search over the shards."""
    import dask.array as da
    from distributed import Client, LocalCluster

    from relaxep import EP, DaskGPClassifier, Probit

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        Xd, yd = da.from_array(X, chunks=(10_000, -1)), da.from_array(y, chunks=10_000)
        if stochastic:
            from sklearn.gaussian_process.kernels import RBF
            from sklearn.gaussian_process.kernels import ConstantKernel as C

            clf = DaskGPClassifier(
                client, C(1.0) * RBF(1.0), Probit(), EP(), inducing_points=M, inducing_init=init,
                optimizer="stochastic", random_state=0,
            )  # fmt: skip
        else:
            clf = DaskGPClassifier(client, truth, Probit(), EP(), inducing_points=M, inducing_init=init, optimizer=None)
        fit_time, predict_time, p1 = fit_and_predict(clf, Xd, yd, Xt)
        worker_rss = max(w["metrics"]["memory"] for w in client.scheduler_info()["workers"].values()) / 2**20
    err, nll = scores(p1, yt)
    b_err, b_nll = bayes(yt, ft)
    return {
        "kind": "dask-stochastic" if stochastic else "dask",
        "n": n,
        "M": M,
        "init": init,
        "time": fit_time,
        "predict": predict_time,
        "rss_MiB": max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, worker_rss),
        "traced_MiB": float("nan"),
        "sweeps": clf.result_.n_sweeps,
        "status": clf.result_.status,
        "err": err,
        "nll": nll,
        "bayes_err": b_err,
        "bayes_nll": b_nll,
        "kernel": str(clf.kernel_),
        "probs": p1[:5].tolist(),
    }


def run_svgp(n: int, M: int) -> tuple[float, float, np.ndarray, str]:
    """GPflow's SVGP as its users fit it: probit Bernoulli likelihood, kernel ``1 * RBF(1)``, ``M`` inducing
    inputs at the same k-means centres as relaxep's (learned), whitened full-covariance ``q(u)``,
    ``SVGP_STEPS`` Adam steps (learning rate ``SVGP_LR``) on minibatches of ``SVGP_BATCH`` rows."""
    import gpflow
    import tensorflow as tf

    from relaxep.estimators._inducing import initial_inducing_points

    X, y, Xt, _, _ = problem(n)
    start = time.perf_counter()
    Z = initial_inducing_points(X, M, "kmeans", np.random.RandomState(0))
    model = gpflow.models.SVGP(
        gpflow.kernels.SquaredExponential(variance=1.0, lengthscales=1.0),
        gpflow.likelihoods.Bernoulli(),  # its default inverse link is the probit
        Z.copy(),
        num_data=n,
        whiten=True,
    )
    data = tf.data.Dataset.from_tensor_slices((X, (y.reshape(-1, 1) > 0).astype(float)))
    batches = iter(data.repeat().shuffle(n, seed=0).batch(SVGP_BATCH))
    loss = model.training_loss_closure(batches, compile=True)
    opt = tf.optimizers.Adam(SVGP_LR)
    params = model.trainable_variables

    @tf.function
    def step() -> None:
        with tf.GradientTape() as tape:
            value = loss()
        opt.apply_gradients(zip(tape.gradient(value, params), params, strict=True))

    for _ in range(SVGP_STEPS):
        step()
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    p1 = model.predict_y(Xt)[0].numpy().ravel()
    kern = f"{float(model.kernel.variance.numpy()):.3g} * RBF({float(model.kernel.lengthscales.numpy()):.3g})"
    return fit_time, time.perf_counter() - start, p1, kern


def run_gpytorch(
    n: int, M: int, device: str = "cpu", batch: int = SVGP_BATCH, steps: int = SVGP_STEPS, threads: int | None = 1
) -> tuple[float, float, np.ndarray, str]:
    """GPyTorch's SVGP with the settings of :func:`run_svgp` (``ScaleKernel(RBFKernel)``, Bernoulli
    likelihood with its probit link, whitened Cholesky variational distribution, learned inducing
    inputs, ``VariationalELBO``), float64 on ``device``, ``threads`` torch threads (``None``: torch's)."""
    import gpytorch
    import torch

    from relaxep.estimators._inducing import initial_inducing_points

    if threads is not None:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    X, y, Xt, _, _ = problem(n)
    start = time.perf_counter()
    Z = initial_inducing_points(X, M, "kmeans", np.random.RandomState(0))

    class Model(gpytorch.models.ApproximateGP):
        def __init__(self, inducing: torch.Tensor) -> None:
            q = gpytorch.variational.CholeskyVariationalDistribution(inducing.size(0))
            strategy = gpytorch.variational.VariationalStrategy(self, inducing, q, learn_inducing_locations=True)
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    def as_t(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, dtype=torch.float64, device=device)

    Xtr, ytr = as_t(X), as_t((y > 0).astype(float))
    model = Model(as_t(Z)).double().to(device)
    model.covar_module.outputscale = 1.0
    model.covar_module.base_kernel.lengthscale = 1.0
    likelihood = gpytorch.likelihoods.BernoulliLikelihood().double().to(device)
    elbo = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=n)
    opt = torch.optim.Adam([*model.parameters(), *likelihood.parameters()], lr=SVGP_LR)
    model.train()
    likelihood.train()
    gen = np.random.default_rng(0)
    order, cursor = gen.permutation(n), 0
    for _ in range(steps):
        if cursor + batch > n:
            order, cursor = gen.permutation(n), 0
        idx = torch.as_tensor(order[cursor : cursor + batch], device=device)
        cursor += batch
        opt.zero_grad()
        loss = -elbo(model(Xtr[idx]), ytr[idx])
        loss.backward()
        opt.step()
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    fit_time = time.perf_counter() - start
    model.eval()
    likelihood.eval()
    start = time.perf_counter()
    with torch.no_grad(), gpytorch.settings.fast_pred_var():
        p1 = likelihood(model(as_t(Xt))).mean.cpu().numpy().ravel()
    kern = f"{float(model.covar_module.outputscale):.3g} * RBF({float(model.covar_module.base_kernel.lengthscale):.3g})"
    return fit_time, time.perf_counter() - start, p1, kern


def run_peer(kind: str, n: int, M: int) -> dict:
    """pyGPs' FITC_EP or GPy's EPDTC at the true kernel, M random inducing inputs (their own environment);
    GPflow's SVGP learning its kernel and inducing inputs (:func:`run_svgp`)."""
    X, y, Xt, yt, ft = problem(n)
    if kind in ("svgp", "gpytorch"):
        fit_time, predict_time, p1, kern = (run_svgp if kind == "svgp" else run_gpytorch)(n, M)
        err, nll = scores(p1, yt)
        b_err, b_nll = bayes(yt, ft)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return {
            "kind": kind,
            "n": n,
            "M": M,
            "init": "kmeans",
            "time": fit_time,
            "predict": predict_time,
            "rss_MiB": rss,
            "traced_MiB": float("nan"),
            "sweeps": SVGP_STEPS,
            "status": "-",
            "err": err,
            "nll": nll,
            "bayes_err": b_err,
            "bayes_nll": b_nll,
            "kernel": kern,
            "probs": p1[:5].tolist(),
        }
    Z = X[np.random.default_rng(0).choice(n, M, replace=False)]
    start = time.perf_counter()
    if kind == "pygps":
        import pyGPs

        model = pyGPs.GPC_FITC()
        model.setPrior(kernel=pyGPs.cov.RBF(log_ell=np.log(ELL), log_sigma=0.5 * np.log(VAR)), inducing_points=Z)
        model.setData(X, y.reshape(-1, 1))
        model.getPosterior()
        fit_time = time.perf_counter() - start
        start = time.perf_counter()
        ymu = model.predict(Xt, ys=yt.reshape(-1, 1))[0]
        p1 = (1.0 + ymu.ravel()) / 2.0
    else:
        import GPy

        kern = GPy.kern.RBF(DIM, variance=VAR, lengthscale=ELL)
        model = GPy.core.SparseGP(
            X,
            (y.reshape(-1, 1) > 0).astype(float),
            Z,
            kern,
            GPy.likelihoods.Bernoulli(),
            inference_method=GPy.inference.latent_function_inference.EPDTC(),
        )
        fit_time = time.perf_counter() - start
        start = time.perf_counter()
        p1 = model.predict(Xt)[0].ravel()
    predict_time = time.perf_counter() - start
    err, nll = scores(p1, yt)
    b_err, b_nll = bayes(yt, ft)
    return {
        "kind": kind,
        "n": n,
        "M": M,
        "init": "random",
        "time": fit_time,
        "predict": predict_time,
        "rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "traced_MiB": float("nan"),
        "sweeps": -1,
        "status": "-",
        "err": err,
        "nll": nll,
        "bayes_err": b_err,
        "bayes_nll": b_nll,
        "kernel": "truth",
        "probs": p1[:5].tolist(),
    }


def run_row(kind: str, n: int, M: int, init: str, subset: int | None, maxiter: int, trace_memory: bool) -> dict:
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from relaxep import GPClassifier, Probit

    X, y, Xt, yt, ft = problem(n)
    truth = C(VAR, "fixed") * RBF(ELL, "fixed")
    if kind == "fixed":
        clf = GPClassifier(truth, Probit(), rule="auto", optimizer=None, inducing_points=M, inducing_init=init)
    elif kind == "learned":
        clf = GPClassifier(
            C(1.0) * RBF(1.0),
            Probit(),
            optimizer="fmin_l_bfgs_b",
            inducing_points=M,
            inducing_init=init,
            optimizer_subset=subset,
            optimizer_maxiter=maxiter,
            random_state=0,
        )
    elif kind == "stochastic":  # the default learned sparse fit: optimizer="auto" is "stochastic" here
        clf = GPClassifier(
            C(1.0) * RBF(1.0), Probit(), optimizer="stochastic", inducing_points=M, inducing_init=init, random_state=0
        )
    elif kind == "dense":
        clf = GPClassifier(truth, Probit(), optimizer=None)
    elif kind in ("dask", "dask-stochastic"):
        return run_dask(n, M, init, X, y, Xt, yt, ft, truth, stochastic=kind == "dask-stochastic")
    else:
        raise ValueError(kind)
    if trace_memory:
        tracemalloc.start()
    fit_time, predict_time, p1 = fit_and_predict(clf, X, y, Xt)
    traced = tracemalloc.get_traced_memory()[1] / 2**20 if trace_memory else float("nan")
    err, nll = scores(p1, yt)
    b_err, b_nll = bayes(yt, ft)
    return {
        "kind": kind,
        "n": n,
        "M": M if kind != "dense" else None,
        "init": init if kind != "dense" else "",
        "time": fit_time,
        "predict": predict_time,
        "rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "traced_MiB": traced,
        "sweeps": int(clf.result_.n_sweeps),
        "status": clf.result_.status,
        "err": err,
        "nll": nll,
        "bayes_err": b_err,
        "bayes_nll": b_nll,
        "kernel": str(clf.kernel_),
        "probs": p1[:5].tolist(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rows",
        nargs="*",
        default=["fixed", "learned", "dense"],
        choices=["fixed", "learned", "stochastic", "dense", "dask", "dask-stochastic"],
    )
    ap.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000])
    ap.add_argument("--inducing", nargs="+", type=int, default=[100, 200, 500])
    ap.add_argument("--inits", nargs="+", default=["kmeans", "random"])
    ap.add_argument("--learned-inducing", nargs="+", type=int, default=[200])
    ap.add_argument("--subset", type=int, default=20_000, help="optimizer_subset of the learned rows (0: all)")
    ap.add_argument("--maxiter", type=int, default=100)
    ap.add_argument("--dense-max-n", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--trace-memory", action="store_true", help="also report tracemalloc's peak (slower)")
    ap.add_argument(
        "--peers", nargs="*", default=[], metavar="KIND:N:M", help="peer rows, e.g. pygps:10000:100 gpy:2000:100"
    )
    ap.add_argument("--peer-python", default=".bench/bin/python", help="interpreter with GPy / pyGPs installed")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:  # a child process: one row, JSON out
        kind, n, M, init, subset, maxiter, tm = json.loads(args.one)
        row = run_peer(kind, n, M) if kind in LABELS else run_row(kind, n, M, init, subset, maxiter, tm)
        print(json.dumps(row))
        return
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    env["MKL_NUM_THREADS"] = str(args.threads)
    jobs = []
    for n in args.sizes:
        problem(n)  # generate (and cache) once, outside the timed children
        if "fixed" in args.rows:
            jobs += [("fixed", n, M, init) for M in args.inducing for init in args.inits]
        if "learned" in args.rows:
            jobs += [("learned", n, M, "kmeans") for M in args.learned_inducing]
        if "stochastic" in args.rows:
            jobs += [("stochastic", n, M, "kmeans") for M in args.learned_inducing]
        for kind in ("dask", "dask-stochastic"):
            if kind in args.rows:
                jobs += [(kind, n, M, "kmeans") for M in args.learned_inducing]
        if "dense" in args.rows and n <= args.dense_max_n:
            jobs.append(("dense", n, 0, ""))
    for peer in args.peers:
        kind, n, M = peer.split(":")
        problem(int(n))
        jobs.append((kind, int(n), int(M), "random"))
    print(
        f"BLAS threads: {args.threads}; learned rows: optimizer_subset={args.subset or 'all'}, "
        f"optimizer_maxiter={args.maxiter}\n"
    )
    print(
        "| fit | n | M | Z init | time (s) | predict 2e4 (s) | peak RSS (MiB) | sweeps | status | "
        "test error | test NLL | Bayes error | Bayes NLL | kernel |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kind, n, M, init in jobs:
        spec = json.dumps([kind, n, M, init, args.subset or None, args.maxiter, args.trace_memory])
        python = args.peer_python if kind in LABELS else sys.executable
        if kind in LABELS and not Path(python).exists():
            print(f"| {kind} | {n} | {M} | - | skipped: {python} not found (see benchmarks/README.md) |||||||||")
            continue
        out = subprocess.run([python, __file__, "--one", spec], env=env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            reason = out.stderr.strip().splitlines()[-1]
            print(f"| {kind} | {n} | {M} | {init} | failed: {reason} |||||||||", flush=True)
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        label = LABELS.get(kind, kind)
        print(
            f"| {label} | {n} | {r['M'] or '-'} | {r['init'] or '-'} | {r['time']:.2f} | {r['predict']:.2f} | "
            f"{r['rss_MiB']:.0f} | {r['sweeps']} | {r['status']} | {r['err']:.4f} | {r['nll']:.4f} | "
            f"{r['bayes_err']:.4f} | {r['bayes_nll']:.4f} | {r['kernel']} |",
            flush=True,
        )


if __name__ == "__main__":
    # this file is named like pydata's `sparse`, which dask imports if it can: keep its folder off the path
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != here]
    main()
