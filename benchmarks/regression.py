"""Robust GP regression (issue 21) beside its peers: outliers, test error, NLPD and fit time.

The problems: ``1-D``, ``f(x) = sin(3x) + x/2``, ``x ~ U(-3, 3)``, Gaussian noise of sd 0.2;
``Friedman #1`` (5-D, ``sklearn.datasets.make_friedman1``, ``x ~ U(0, 1)^5``, noise sd 1.0).
``n`` training points (``--sizes``), of which exactly ``round(rate * n)`` (``--rates``: 0, 10,
20 %), drawn without replacement, are contaminated: their target gets ``s * u * sd(y)`` added,
with ``s = +-1`` (a fair coin), ``u ~ U(2, 5)`` and ``sd(y)`` the standard deviation of the clean
training targets.  2000 fresh test points with clean (noisy, uncontaminated) targets; the noise
sd is the floor of the test RMSE.  One data set per (problem, n, rate), seeded.

Contenders (every kernel starts at ``1 * RBF(1)``, isotropic; hyperparameters learned by one
L-BFGS-B run from that start, no restarts; targets standardised, as ``normalize_y=True``: the
harness does it for GPy and GPflow, which have no such switch that their predictive densities
honour):

* ``sklearn GPR``: ``GaussianProcessRegressor(ConstantKernel(1.0) * RBF(1.0) + WhiteKernel(0.1),
  normalize_y=True)``;
* ``GPy GPRegression``: Gaussian likelihood, noise variance starting at 0.1;
* ``GPy GP StudentT Laplace``: ``GPy.core.GP`` with ``GPy.likelihoods.StudentT(deg_free=4,
  sigma2=1)`` (``deg_free`` fixed, the scale learned) and Laplace inference, only up to
  ``--laplace-max-n`` (1000: 96 s at n = 1000 here, about 8x that expected at 2000);
* ``GPflow VGP StudentT``: ``gpflow.models.VGP`` with ``StudentT(df=4, scale=1)``, optimised by
  ``gpflow.optimizers.Scipy`` (L-BFGS-B over the kernel, the scale and the ``n + n(n+1)/2``
  variational parameters; ``--vgp-maxiter``), only up to ``--vgp-max-n`` (500: its fit took over
  9 minutes at n = 1000 here);
* ``relaxep GPRegressor Gaussian``: ``GPRegressor(ConstantKernel(1.0) * RBF(1.0) + WhiteKernel(0.1),
  normalize_y=True)``, scikit-learn's model;
* ``relaxep GPRegressor StudentT``: ``GPRegressor(ConstantKernel(1.0) * RBF(1.0),
  likelihood=StudentT(), normalize_y=True)`` (``df = 4`` fixed, the scale learned; EP, ``rule="auto"``).

Reported: test RMSE and MAE of the predictive mean against the clean test targets, test NLPD
(minus the mean log predictive density of a test target, from each library's own predictive:
scikit-learn's Gaussian ``predict(return_std=True)``, GPy's ``log_predictive_density``, GPflow's
``predict_log_density``, relaxep's ``log_predictive_density``), the median fit time over
``--repeats`` runs (one run at n >= 2000), and the learned length scale and noise sd / Student-t
scale (standardised units).  Every contender runs with one BLAS thread (threadpoolctl) and
TensorFlow with one intra-op and one inter-op thread, set before any TensorFlow op.

``--sparse``: relaxep's sparse (FITC, ``inducing_points=M``) Student-t regressor against its sparse
probit classifier on the same inputs (Friedman #1 at ``--sparse-n`` points, 10 % contaminated
targets; the classifier's labels are the signs of the clean targets minus their median), both
``ConstantKernel(1.0) * RBF(1.0)`` with the kernel and the M inducing inputs learned on
``optimizer_subset=--subset`` points for ``optimizer_maxiter=--maxiter`` iterations (as
``benchmarks/sparse.py``'s learned rows); the target is the regressor within 2x the classifier's time.

The peers are never dependencies of relaxep: they are imported if they are there, and their rows
say "not installed" otherwise.  Their environment (numpy 2 rules out GPflow >= 2.10, which pins
``numpy < 2``; pip then takes GPflow 2.9.2)::

    python -m venv /work/benchenv --system-site-packages
    /work/benchenv/bin/pip install GPy gpflow tensorflow tensorflow-probability tf-keras
    PYTHONPATH=$PWD/src /work/benchenv/bin/python benchmarks/regression.py --sizes 500 1000 2000 --repeats 1 \\
        --sparse --out benchmarks/results/regression.md

(``--repeats 1``: the whole run, peers included, takes of the order of an hour on 2 shared cores;
``--repeats 3`` triples the part below n = 2000)

(measured with GPy 1.15.0, GPflow 2.9.2, TensorFlow 2.21.0, TensorFlow Probability 0.25.0, tf-keras
2.21.0, numpy 2.4.6, scipy 1.17.1, scikit-learn 1.9.1).  The relaxep rows need ``from relaxep import
GPRegressor, StudentT`` to work (a tree with issue 21's regressor on ``PYTHONPATH``); otherwise they
say "not available".
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import sklearn
from scipy.stats import norm
from sklearn.datasets import make_friedman1
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from threadpoolctl import threadpool_limits

N_TEST = 2000
NOISE = {"1-D": 0.2, "Friedman #1": 1.0}
DF = 4.0
PEERS: dict[str, object] = {}  # module name -> module, or the reason it is missing


# ------------------------------------------------------------------ data
def f_1d(x: np.ndarray) -> np.ndarray:
    return np.sin(3.0 * x[:, 0]) + 0.5 * x[:, 0]


def draw(problem: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs, noise-free f and noisy clean targets."""
    if problem == "1-D":
        X = rng.uniform(-3.0, 3.0, (n, 1))
        f = f_1d(X)
        return X, f, f + NOISE[problem] * rng.normal(size=n)
    X, f = make_friedman1(n, n_features=5, noise=0.0, random_state=int(rng.integers(2**31)))
    return X, f, f + NOISE[problem] * rng.normal(size=n)


def contaminate(y: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Exactly round(rate n) targets, drawn without replacement, moved by +-U(2, 5) sd(y)."""
    y = y.copy()
    k = round(rate * len(y))
    idx = rng.choice(len(y), size=k, replace=False)
    y[idx] += rng.choice([-1.0, 1.0], size=k) * rng.uniform(2.0, 5.0, size=k) * np.std(y)
    return y


def problem_data(problem: str, n: int, rate: float):
    seed = [n, round(100 * rate), 1 if problem == "1-D" else 5]
    rng = np.random.default_rng(seed)
    X, _, y = draw(problem, n, rng)
    y = contaminate(y, rate, rng)
    Xt, _, yt = draw(problem, N_TEST, np.random.default_rng([*seed, 12345]))
    return X, y, Xt, yt


# ------------------------------------------------------------------ peers
def load_peers() -> None:
    """Import the optional peers; TensorFlow gets one intra-op and one inter-op thread first."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        import gpflow

        PEERS["gpflow"], PEERS["tensorflow"] = gpflow, tf
    except ImportError as exc:
        PEERS["gpflow"] = f"not installed ({exc.name})"
    try:
        import GPy

        PEERS["GPy"] = GPy
    except ImportError as exc:
        PEERS["GPy"] = f"not installed ({exc.name})"
    try:
        from relaxep import GPRegressor

        PEERS["GPRegressor"] = GPRegressor
    except ImportError:
        PEERS["GPRegressor"] = "not available (no relaxep.GPRegressor on this PYTHONPATH)"
    try:
        from relaxep import StudentT

        PEERS["StudentT"] = StudentT
    except ImportError:
        PEERS["StudentT"] = "not available (no relaxep.StudentT on this PYTHONPATH)"


def need(*names: str):
    missing = [PEERS[k] for k in names if isinstance(PEERS[k], str)]
    if missing:
        raise LookupError(missing[0])
    return [PEERS[k] for k in names]


class Standardised:
    """Fit on (y - mean) / sd; predictions and log densities back in the data's units."""

    def fit(self, X, y):
        self.mu, self.sd = float(np.mean(y)), float(np.std(y))
        self._fit(X, ((y - self.mu) / self.sd)[:, None])
        return self

    def predict(self, Xt, yt):
        mean, lpd = self._predict(Xt, ((yt - self.mu) / self.sd)[:, None])
        return self.mu + self.sd * np.ravel(mean), np.ravel(lpd) - math.log(self.sd)


class SklearnGPR:
    def fit(self, X, y):
        kernel = ConstantKernel(1.0) * RBF(1.0) + WhiteKernel(0.1)
        self.m = GaussianProcessRegressor(kernel, normalize_y=True).fit(X, y)
        return self

    def predict(self, Xt, yt):
        mean, std = self.m.predict(Xt, return_std=True)
        return mean, norm.logpdf(yt, mean, std)

    def learned(self):
        k = self.m.kernel_
        return k.k1.k2.length_scale, math.sqrt(k.k2.noise_level), "noise sd"


class GPyGaussian(Standardised):
    def _fit(self, X, Y):
        (GPy,) = need("GPy")
        kern = GPy.kern.RBF(X.shape[1], variance=1.0, lengthscale=1.0)
        self.m = GPy.models.GPRegression(X, Y, kernel=kern, noise_var=0.1)
        self.m.optimize()

    def _predict(self, Xt, Yt):
        return self.m.predict(Xt)[0], self.m.log_predictive_density(Xt, Yt)

    def learned(self):
        return float(self.m.kern.lengthscale[0]), math.sqrt(float(self.m.likelihood.variance[0])), "noise sd"


class GPyStudentT(Standardised):
    def _fit(self, X, Y):
        (GPy,) = need("GPy")
        lik = GPy.likelihoods.StudentT(deg_free=DF, sigma2=1.0)
        lik.deg_free.fix()
        kern = GPy.kern.RBF(X.shape[1], variance=1.0, lengthscale=1.0)
        laplace = GPy.inference.latent_function_inference.Laplace()
        self.m = GPy.core.GP(X, Y, kernel=kern, likelihood=lik, inference_method=laplace)
        self.m.optimize()

    def _predict(self, Xt, Yt):
        return self.m._raw_predict(Xt)[0], self.m.log_predictive_density(Xt, Yt)

    def learned(self):
        return float(self.m.kern.lengthscale[0]), math.sqrt(float(self.m.likelihood.t_scale2[0])), "t scale"


class GPflowVGP(Standardised):
    maxiter = 2000

    def _fit(self, X, Y):
        (gpflow,) = need("gpflow")
        lik = gpflow.likelihoods.StudentT(scale=1.0, df=DF)
        kern = gpflow.kernels.SquaredExponential(variance=1.0, lengthscales=1.0)
        self.m = gpflow.models.VGP((X, Y), kernel=kern, likelihood=lik)
        res = gpflow.optimizers.Scipy().minimize(
            self.m.training_loss, self.m.trainable_variables, options=dict(maxiter=self.maxiter)
        )
        self.note = f"scipy {'converged' if res.success else 'stopped'}, {res.nit} it"

    def _predict(self, Xt, Yt):
        return self.m.predict_f(Xt)[0].numpy(), self.m.predict_log_density((Xt, Yt)).numpy()

    def learned(self):
        return float(self.m.kernel.lengthscales.numpy()), float(self.m.likelihood.scale.numpy()), "t scale"


class RelaxepGaussian:
    def fit(self, X, y):
        (GPRegressor,) = need("GPRegressor")
        kernel = ConstantKernel(1.0) * RBF(1.0) + WhiteKernel(0.1)
        self.m = GPRegressor(kernel, normalize_y=True).fit(X, y)
        return self

    def predict(self, Xt, yt):
        mean = self.m.predict(Xt)
        if hasattr(self.m, "log_predictive_density"):
            return mean, self.m.log_predictive_density(Xt, yt)
        _, std = self.m.predict(Xt, return_std=True)  # the WhiteKernel's noise is in it, as scikit-learn's
        return mean, norm.logpdf(yt, mean, std)

    def learned(self):
        k = self.m.kernel_
        return k.k1.k2.length_scale, math.sqrt(k.k2.noise_level), "noise sd"


class RelaxepStudentT:
    def fit(self, X, y):
        GPRegressor, StudentT = need("GPRegressor", "StudentT")
        kernel = ConstantKernel(1.0) * RBF(1.0)
        self.m = GPRegressor(kernel, likelihood=StudentT(), normalize_y=True).fit(X, y)
        res = self.m.result_
        self.note = f"{res.status}, {res.n_sweeps} sweeps"
        return self

    def predict(self, Xt, yt):
        lpd = self.m.log_predictive_density(Xt, yt) if hasattr(self.m, "log_predictive_density") else None
        return self.m.predict(Xt), lpd

    def learned(self):
        return self.m.kernel_.k2.length_scale, float(self.m.likelihood_.scale), "t scale"


CONTENDERS = {
    "sklearn GPR": SklearnGPR,
    "GPy GPRegression": GPyGaussian,
    "GPy GP StudentT Laplace": GPyStudentT,
    "GPflow VGP StudentT": GPflowVGP,
    "relaxep GPRegressor Gaussian": RelaxepGaussian,
    "relaxep GPRegressor StudentT": RelaxepStudentT,
}


# ------------------------------------------------------------------ runs
def timed(make, X, y, repeats: int):
    times = []
    for _ in range(repeats):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            model = make().fit(X, y)
            times.append(time.perf_counter() - start)
    return statistics.median(times), model, caught


def warned(caught) -> str:
    kinds = sorted({w.category.__name__ for w in caught})
    return f"{len(caught)} warnings ({', '.join(kinds)})" if caught else ""


def run(problem: str, n: int, rate: float, repeats: int, max_n: dict, names: list[str]) -> list[str]:
    X, y, Xt, yt = problem_data(problem, n, rate)
    lines = []
    for name in names:
        cls = CONTENDERS[name]
        head = f"| {problem} | {n} | {rate:.0%} | {name} |"
        if cls in max_n and n > max_n[cls][1]:
            lines.append(f"{head} - | - | - | - | - | skipped (n > {max_n[cls][0]} {max_n[cls][1]}) |")
            continue
        try:
            seconds, model, caught = timed(cls, X, y, repeats)
            mean, lpd = model.predict(Xt, yt)
            ell, noise, what = model.learned()
        except LookupError as exc:
            lines.append(f"{head} - | - | - | - | - | {exc.args[0]} |")
            continue
        except Exception as exc:  # a peer's failure is a row, not the end of the run
            lines.append(f"{head} - | - | - | - | - | failed: {type(exc).__name__}: {str(exc)[:80]} |")
            continue
        err = mean - yt
        rmse, mae = math.sqrt(float(np.mean(err**2))), float(np.mean(np.abs(err)))
        nlpd = "-" if lpd is None else f"{-float(np.mean(lpd)):.3f}"
        note = "; ".join(s for s in (getattr(model, "note", ""), warned(caught)) if s)
        lines.append(
            f"{head} {rmse:.4f} | {mae:.4f} | {nlpd} | {seconds:.2f} | "
            f"{float(np.ravel(ell)[0]):.3g}, {what} {noise:.3g} | {note} |"
        )
    return lines


def sparse_run(n: int, M: int, subset: int, maxiter: int) -> list[str]:
    from relaxep import GPClassifier, Probit

    rng = np.random.default_rng([n, 21])
    X, _, y = draw("Friedman #1", n, rng)
    y_reg = contaminate(y, 0.1, rng)
    y_clf = np.where(y > np.median(y), 1, -1)
    Xt, _, yt = draw("Friedman #1", 20_000, np.random.default_rng([n, 21, 12345]))
    yt_clf = np.where(yt > np.median(y), 1, -1)
    # --subset 0: no subset, so optimizer="auto" learns stochastically (its own default steps)
    learn = dict(optimizer_subset=subset, optimizer_maxiter=maxiter) if subset else {}
    options = dict(inducing_points=M, random_state=0, **learn)
    lines, times = [], {}
    try:
        GPRegressor, StudentT = need("GPRegressor", "StudentT")
        start = time.perf_counter()
        reg = GPRegressor(ConstantKernel(1.0) * RBF(1.0), likelihood=StudentT(), normalize_y=True, **options)
        reg.fit(X, y_reg)
        times["reg"] = time.perf_counter() - start
        err = reg.predict(Xt) - yt
        lpd = reg.log_predictive_density(Xt, yt)
        lines.append(
            f"| StudentT regressor | {n} | {M} | {times['reg']:.2f} | {{ratio}} | {reg.result_.status} | "
            f"RMSE {math.sqrt(np.mean(err**2)):.4f}, MAE {np.mean(np.abs(err)):.4f}, NLPD {-np.mean(lpd):.3f} | "
            f"{reg.kernel_}, t scale {float(reg.likelihood_.scale):.3g} |"
        )
    except LookupError as exc:
        lines.append(f"| StudentT regressor | {n} | {M} | - | - | {exc.args[0]} | - | - |")
    except Exception as exc:  # the classifier's row still comes
        reason = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
        lines.append(f"| StudentT regressor | {n} | {M} | - | - | {reason} | - | - |")
    start = time.perf_counter()
    clf = GPClassifier(ConstantKernel(1.0) * RBF(1.0), Probit(), **options).fit(X, y_clf)
    times["clf"] = time.perf_counter() - start
    error = float(np.mean(clf.predict(Xt) != yt_clf))
    lines.append(
        f"| probit classifier | {n} | {M} | {times['clf']:.2f} | 1.00 | {clf.result_.status} | "
        f"error {error:.4f} | {clf.kernel_} |"
    )
    ratio = f"{times['reg'] / times['clf']:.2f}" if "reg" in times else "-"
    return [line.replace("{ratio}", ratio) for line in lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[500, 1000, 2000])
    parser.add_argument("--rates", type=float, nargs="+", default=[0.0, 0.1, 0.2])
    parser.add_argument("--problems", nargs="+", default=["1-D", "Friedman #1"], choices=list(NOISE))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--contenders", nargs="+", default=list(CONTENDERS), choices=list(CONTENDERS), help="a subset of the rows"
    )
    parser.add_argument("--vgp-max-n", type=int, default=500, help="GPflow's VGP only up to this n")
    parser.add_argument("--laplace-max-n", type=int, default=1000, help="GPy's Student-t Laplace only up to this n")
    parser.add_argument("--vgp-maxiter", type=int, default=2000)
    parser.add_argument("--sparse", action="store_true", help="also the sparse Student-t / probit comparison")
    parser.add_argument("--sparse-n", type=int, default=100_000)
    parser.add_argument("--inducing", type=int, default=200)
    parser.add_argument("--subset", type=int, default=20_000, help="0: all rows, the stochastic search")
    parser.add_argument("--maxiter", type=int, default=50)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    GPflowVGP.maxiter = args.vgp_maxiter
    load_peers()
    arguments = " ".join(a if " " not in a else repr(a) for a in sys.argv[1:])
    command = f"PYTHONPATH=src {sys.executable} benchmarks/regression.py {arguments}"
    versions = ", ".join(
        f"{k} {getattr(v, '__version__', '')}" if not isinstance(v, str) else f"{k}: {v}"
        for k, v in PEERS.items()
        if k in ("GPy", "gpflow", "tensorflow")
    )
    versions += f", scikit-learn {sklearn.__version__}"
    out = [
        f"# Robust GP regression beside its peers (`{command}`)",
        "",
        f"One BLAS thread for every contender (TensorFlow: one intra-op, one inter-op thread); {versions}; "
        f"numpy {np.__version__}.  Fit time: "
        + ("one run each" if args.repeats == 1 else f"median of {args.repeats} runs below n = 2000, one run above")
        + " (2-core machine shared with other sessions' work: compare within a row group).  RMSE, "
        "MAE and NLPD on 2000 clean test targets (the noise sd, 0.2 for 1-D and 1.0 for "
        "Friedman #1, is the RMSE floor).  `learned`: length scale, noise sd or Student-t scale (standardised "
        "units).",
        "",
    ]
    table = [
        "| problem | n | outliers | contender | test RMSE | test MAE | test NLPD | fit [s] | learned | notes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    print(*out, *table, sep="\n", flush=True)
    with threadpool_limits(limits=1, user_api="blas"):
        for problem in args.problems:
            for n in args.sizes:
                for rate in args.rates:
                    max_n = {
                        GPflowVGP: ("--vgp-max-n", args.vgp_max_n),
                        GPyStudentT: ("--laplace-max-n", args.laplace_max_n),
                    }
                    rows = run(problem, n, rate, args.repeats if n < 2000 else 1, max_n, args.contenders)
                    print(*rows, sep="\n", flush=True)
                    table += rows
        sparse = []
        if args.sparse:
            sparse = [
                "",
                f"## Sparse: Student-t regression against the probit classifier (n = {args.sparse_n}, "
                f"M = {args.inducing}, optimizer_subset = {args.subset}, optimizer_maxiter = {args.maxiter})",
                "",
                "| model | n | M | fit [s] | x classifier | status | test | kernel |",
                "|---|---|---|---|---|---|---|---|",
            ]
            print(*sparse, sep="\n", flush=True)
            rows = sparse_run(args.sparse_n, args.inducing, args.subset, args.maxiter)
            print(*rows, sep="\n", flush=True)
            sparse += rows
    if args.out:
        Path(args.out).write_text("\n".join(out + table + sparse) + "\n")


if __name__ == "__main__":
    # benchmarks/sparse.py is named like pydata's `sparse`, which TensorFlow's stack may import: keep
    # this folder off the path
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != here]
    main()
