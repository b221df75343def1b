"""Hyperpriors against runaway hyperparameters (issue 54): the default ``GPClassifier`` (``prior="auto"``: MAP under
data-scaled half-Student-t priors) beside type-II maximum likelihood (``prior=None``) in the same run.

``python benchmarks/hyperpriors.py --out benchmarks/results/hyperpriors.md``

Every model is fitted as a user would, ``make_pipeline(StandardScaler(), model)`` (Pima also on its raw features,
the rows marked ``raw``), BLAS pinned to one thread for every contender (``threadpool_limits(1)``):

* ``MAP``: ``GPClassifier(random_state=0)`` (the defaults: ``ConstantKernel(1.0) * RBF(1.0)``, ``prior="auto"``);
* ``ML-II``: ``GPClassifier(random_state=0, prior=None)`` (log-uniform priors: the evidence alone);
* ``sk-Laplace``: scikit-learn's ``GaussianProcessClassifier(ConstantKernel(1.0) * RBF(1.0), random_state=0)``
  (Laplace, ML-II), the peer.

Sets:

1. Pima (``relaxep.datasets.registry.find_data_file("pima.csv")``, the 532 complete rows, last column the label):
   ``--pima-subsets`` seeded random 30-row training subsets, tested on the other 502 rows;
2. scikit-learn's breast cancer (569 rows, 30 features): ``--bc-splits`` seeded stratified 50/50 splits, and the
   whole set (fit only: the learned hyperparameters);
3. ``make_classification`` (4 features: 2 informative, 2 noise; one cluster a class; no flipped labels), n in
   ``--sizes``, ``class_sep`` in ``--seps``, ``--seeds`` seeds each, tested on 2000 more rows of the same draw.

Whether a training set is linearly separable is decided exactly, by the feasibility of the linear programme
:math:`y_i (w^\\top x_i + b) \\ge 1` (scipy's HiGHS).

A fit *runs away* where its amplitude :math:`\\sigma_f = \\sqrt{c}` (``kernel_.k1.constant_value = c``) exceeds 10
or its length-scale exceeds 1e3 times the range of the inputs it sees (the largest feature's max - min over the
training rows, after the scaler where there is one).  Test NLL: the mean over test rows of
:math:`-\\log p(y_* | x_*)`, relaxep's from ``predict_log_proba`` (log space, unclipped), scikit-learn's the log of
``predict_proba`` clipped at 1e-300.  ``d NLL``: the median over a cell's sets of the paired difference
NLL(ML-II) - NLL(MAP) (positive: the MAP predicts better).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy
import sklearn
from scipy.optimize import linprog
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from relaxep import GPClassifier
from relaxep.datasets.registry import find_data_file

MODELS = ("MAP", "ML-II", "sk-Laplace")
AMPLITUDE_LIMIT, SCALE_LIMIT = 10.0, 1e3


@dataclass
class Fit:
    """One fitted model on one training set: what the tables read."""

    amplitude: float
    scale_ratio: float  # length-scale / the inputs' range
    seconds: float
    nll: float = np.nan
    error: float = np.nan
    warned: bool = False

    @property
    def runaway(self) -> bool:
        return self.amplitude > AMPLITUDE_LIMIT or self.scale_ratio > SCALE_LIMIT


def make_model(name: str, scaled: bool, prior: object = "auto", ml_bound: float | None = None) -> object:
    """The estimator ``name`` (module docstring), behind a ``StandardScaler`` where ``scaled``; ``ml_bound``: the
    ML-II fit's amplitude bounded by it (``ConstantKernel(1.0, (1e-5, ml_bound**2))``)."""
    if name == "MAP":
        model = GPClassifier(random_state=0, prior=prior)
    elif name == "ML-II":
        kernel = None if ml_bound is None else ConstantKernel(1.0, (1e-5, ml_bound**2)) * RBF(1.0)
        model = GPClassifier(kernel=kernel, random_state=0, prior=None)
    else:
        model = GaussianProcessClassifier(ConstantKernel(1.0) * RBF(1.0), random_state=0)
    return make_pipeline(StandardScaler(), model) if scaled else make_pipeline(model)


def test_nll(pipe: object, X: np.ndarray, y: np.ndarray) -> float:
    """The mean test negative log predictive probability (module docstring)."""
    classes = pipe[-1].classes_
    column = np.searchsorted(classes, y)
    if isinstance(pipe[-1], GPClassifier):
        log_p = pipe.predict_log_proba(X)
    else:
        log_p = np.log(np.clip(pipe.predict_proba(X), 1e-300, None))
    return float(-np.mean(log_p[np.arange(y.size), column]))


def fit_one(pipe: object, X: np.ndarray, y: np.ndarray, Xt: np.ndarray | None, yt: np.ndarray | None) -> Fit:
    """Fit ``pipe`` on ``(X, y)`` (timed), read its hyperparameters, score it on ``(Xt, yt)`` if given."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        pipe.fit(X, y)
        seconds = time.perf_counter() - start
    seen = pipe[:-1].transform(X) if len(pipe) > 1 else X
    kernel = pipe[-1].kernel_
    ratio = float(np.max(kernel.k2.length_scale) / np.max(np.ptp(seen, axis=0)))
    fit = Fit(float(np.sqrt(kernel.k1.constant_value)), ratio, seconds, warned=bool(caught))
    if Xt is not None:
        fit.nll = test_nll(pipe, Xt, yt)
        fit.error = float(np.mean(pipe.predict(Xt) != yt))
    return fit


def separable(X: np.ndarray, y: np.ndarray) -> bool:
    """Whether some hyperplane separates the classes: :math:`y_i (w^T x_i + b) \\ge 1` feasible."""
    s = np.where(y == np.unique(y)[1], 1.0, -1.0)
    A = -s[:, None] * np.hstack([X, np.ones((X.shape[0], 1))])
    res = linprog(np.zeros(A.shape[1]), A_ub=A, b_ub=-np.ones(X.shape[0]), bounds=(None, None), method="highs")
    return res.status == 0


Split = tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]


def pima_splits(n_subsets: int) -> list[Split]:
    data = np.genfromtxt(find_data_file("pima.csv"), delimiter=",", skip_header=1)
    X, y = data[:, :-1], data[:, -1]
    splits = []
    for seed in range(n_subsets):
        order = np.random.default_rng(seed).permutation(y.size)
        while np.unique(y[order[:30]]).size < 2:  # (two classes in the 30 rows; never needed at seeds 0-49)
            order = np.roll(order, 1)
        splits.append((X[order[:30]], y[order[:30]], X[order[30:]], y[order[30:]]))
    return splits


def cancer_splits(n_splits: int) -> list[Split]:
    X, y = load_breast_cancer(return_X_y=True)
    out = []
    for seed in range(n_splits):
        Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.5, random_state=seed, stratify=y)
        out.append((Xa, ya, Xb, yb))
    return out


def synthetic_splits(n: int, sep: float, seeds: int) -> list[Split]:
    out = []
    for seed in range(seeds):
        X, y = make_classification(
            n_samples=n + 2000, n_features=4, n_informative=2, n_redundant=0, n_repeated=0,
            n_clusters_per_class=1, class_sep=sep, flip_y=0.0, random_state=seed,
        )  # fmt: skip
        out.append((X[:n], y[:n], X[n:], y[n:]))
    return out


def run_cell(
    splits: list[Split], scaled: bool, models: tuple[str, ...], prior: object, ml_bound: float | None
) -> dict[str, list[Fit]]:
    fits: dict[str, list[Fit]] = {m: [] for m in models}
    for X, y, Xt, yt in splits:
        for m in models:
            given = prior(X.shape[1]) if callable(prior) else prior
            fits[m].append(fit_one(make_model(m, scaled, given, ml_bound), X, y, Xt, yt))
    return fits


def row(cell: str, model: str, fits: list[Fit]) -> str:
    amp = np.array([f.amplitude for f in fits])
    ratio = np.array([f.scale_ratio for f in fits])
    nll = np.array([f.nll for f in fits])
    err = np.array([f.error for f in fits])
    sec = np.array([f.seconds for f in fits])
    runaway = sum(f.runaway for f in fits)
    scored = np.isfinite(nll).any()
    cells = [
        cell, model, f"{runaway}/{len(fits)}", f"{amp.max():.3g}", f"{np.median(amp):.3g}", f"{ratio.max():.3g}",
        f"{np.median(nll):.4f}" if scored else "-", f"{np.mean(nll):.4f}" if scored else "-",
        f"{np.mean(err):.4f}" if scored else "-", f"{np.median(sec):.3f}", f"{sec.sum():.1f}",
        str(sum(f.warned for f in fits)),
    ]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| set | model | runaways | max amp | median amp | max ls/range | median NLL | mean NLL | mean error "
    "| median fit s | total s | warned |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def paired(fits: dict[str, list[Fit]]) -> tuple[float, float, float, int]:
    """ML-II - MAP test NLL, paired by set: median, min, max, and how many sets the MAP predicts worse on by
    more than 0.01."""
    d = np.array([b.nll - a.nll for a, b in zip(fits["MAP"], fits["ML-II"], strict=True)])
    return float(np.median(d)), float(d.min()), float(d.max()), int(np.sum(d < -0.01))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pima-subsets", type=int, default=50)
    parser.add_argument("--bc-splits", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 60, 200])
    parser.add_argument("--seps", type=float, nargs="+", default=[2.0, 3.0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--amplitude-scale", type=float, default=None, help="MAP rows: HalfStudentT(4, s, sqrt=True) "
                        "on the amplitude instead of the default's s = 1, to study the default's scale")  # fmt: skip
    parser.add_argument("--length-scale-scale", type=float, default=None, help="MAP rows: HalfStudentT(4, s) on "
                        "the length-scale (absolute; the default s: the features' rms sd, 1 scaled)")  # fmt: skip
    parser.add_argument("--per-sqrt-d", action="store_true", help="--length-scale-scale times sqrt(n_features)")
    parser.add_argument("--ml-bound", type=float, default=None, help="ML-II rows: the amplitude bounded by this")
    parser.add_argument("--out", default=None, help="also write the report (markdown) here")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    prior: object = "auto"
    if args.amplitude_scale is not None or args.length_scale_scale is not None:
        from relaxep.hyper import HalfStudentT

        prior = {}
        if args.amplitude_scale is not None:
            prior["constant_value"] = HalfStudentT(4.0, args.amplitude_scale, sqrt=True)
        if args.length_scale_scale is not None:
            prior["length_scale"] = HalfStudentT(4.0, args.length_scale_scale)
        if args.per_sqrt_d and args.length_scale_scale is not None:
            fixed, ls = {k: v for k, v in prior.items() if k != "length_scale"}, args.length_scale_scale

            def prior(d: int) -> dict:
                return {**fixed, "length_scale": HalfStudentT(4.0, ls * d**0.5)}

            prior.__qualname__ = f"{fixed!r} and length_scale HalfStudentT(4, {ls:g} sqrt(n_features))"

    lines = [
        "# Hyperpriors against runaway hyperparameters (issue 54)",
        "",
        f"`{' '.join(['python benchmarks/hyperpriors.py', *argv])}`",
        "",
        f"Machine: {platform.platform()}, {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, scikit-learn "
        f"{sklearn.__version__}; BLAS pinned to one thread for every model (threadpoolctl `threadpool_limits(1)`).",
        f"MAP prior: {prior.__qualname__ if callable(prior) else repr(prior)}."
        + ("" if args.ml_bound is None else f"  ML-II amplitude bounded by {args.ml_bound:g}."),
        "",
        "Columns: `runaways`, fits with amplitude sqrt(k1.constant_value) > 10 or length-scale > 1e3 x the inputs' "
        "range (the widest feature's max - min over the training rows the GP sees: after the scaler, or raw); "
        "`ls/range`, length-scale / that range; test NLL per row (relaxep: `predict_log_proba`, unclipped; "
        "scikit-learn: log of `predict_proba` clipped at 1e-300), median and mean over the cell's sets; `warned`, "
        "fits that raised any warning (a hyperparameter at its bound).  ML-II's amplitude 316 is "
        "`ConstantKernel`'s upper bound (1e5 on the variance).",
        "",
        HEADER,
    ]
    pairs, notes = [], []
    begin = time.perf_counter()
    with threadpool_limits(1):
        cells: list[tuple[str, list[Split], bool]] = []
        pima = pima_splits(args.pima_subsets)
        cells += [("Pima 30 rows, scaled", pima, True), ("Pima 30 rows, raw", pima, False)]
        cells.append(("breast cancer 50/50, scaled", cancer_splits(args.bc_splits), True))
        for n in args.sizes:
            for sep in args.seps:
                cells.append((f"synthetic n={n} sep={sep:g}, scaled", synthetic_splits(n, sep, args.seeds), True))
        for name, splits, scaled in cells:
            flags = [separable(StandardScaler().fit_transform(X), y) for X, y, _, _ in splits]
            fits = run_cell(splits, scaled, MODELS, prior, args.ml_bound)
            for m in MODELS:
                lines.append(row(name, m, fits[m]))
            sep_runaway = {m: sum(f.runaway for f, s in zip(fits[m], flags, strict=True) if s) for m in MODELS}
            notes.append(
                f"- {name}: {sum(flags)}/{len(splits)} training sets linearly separable; runaways on them: "
                + ", ".join(f"{m} {sep_runaway[m]}" for m in MODELS)
            )
            med, lo, hi, worse = paired(fits)
            pairs.append(f"| {name} | {med:+.4f} | {lo:+.4f} | {hi:+.4f} | {worse}/{len(splits)} |")
            print(lines[-3], lines[-2], lines[-1], sep="\n", flush=True)
        X, y = load_breast_cancer(return_X_y=True)
        given = prior(X.shape[1]) if callable(prior) else prior
        whole = {m: [fit_one(make_model(m, True, given, args.ml_bound), X, y, None, None)] for m in MODELS}
        for m in MODELS:
            lines.append(row("breast cancer, all 569 rows (fit only), scaled", m, whole[m]))
        amps = ", ".join(f"{m} amp {whole[m][0].amplitude:.3g}, ls/range {whole[m][0].scale_ratio:.3g}" for m in MODELS)
        notes.append(f"- breast cancer, all rows: {amps}")
    total = time.perf_counter() - begin
    lines += [
        "",
        "Paired test NLL, ML-II - MAP, by set (positive: the MAP better):",
        "",
        "| set | median | min | max | sets with MAP worse by > 0.01 |",
        "|---|---|---|---|---|",
        *pairs,
        "",
        *notes,
        "",
        f"Whole run: {total:.0f} s.",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(report)


if __name__ == "__main__":
    main()
