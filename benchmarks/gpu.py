"""relaxep's sparse and dense EP on a GPU (PyTorch through the array API) beside GPyTorch's SVGP on the same card.

``python benchmarks/gpu.py [--n 1000000] [--inducing 200] [--out benchmarks/results/gpu.md]``

The problem of ``benchmarks/sparse.py`` (d = 8 probit GP, ``--n`` training rows, 20 000 test rows,
the Bayes floor from the true latent).  Rows, all in this process, on the device it finds (CUDA if
torch sees one, else the CPU, and the table says which):

``relaxep FITC EP, fixed kernel, torch``
    ``GPClassifier(4 * RBF(2), Probit(), inducing_points=M, optimizer=None)`` fitted on torch tensors
    under scikit-learn's ``array_api_dispatch``: the FITC algebra on the device, the sites and the
    probit moments on the host (``relaxep._xp``).  Time: k-means placement, the prior, EP.
``one FITC refresh, torch``
    one refresh of that posterior from its sites (the O(nM^2) pass, the floor of a sweep).
``relaxep stochastic learning + EP, torch``
    the default learned fit from 20 000 rows: ``1 * RBF(1)`` and the inducing inputs learned by the
    stochastic search (1000 steps of 1000 rows; the minibatch algebra on the device, the M x M steps
    and the likelihood's moments on the host), then EP on all rows.
``relaxep FITC EP, fixed kernel, torch, n = --fitc-n`` (10^7 by the command below; 0: no row)
    the first row at a larger size, the fit and one refresh.
``relaxep FITC EP, fixed kernel, numpy``
    the same fit on numpy arrays, every core (``--cpu-max`` rows at most).
``GPyTorch SVGP``
    ``ScaleKernel(RBFKernel)``, Bernoulli (probit), whitened Cholesky variational distribution,
    learned inducing inputs from the same k-means start, 2000 Adam steps at learning rate 0.01, batches
    of 1000 and of 10 000 rows (``benchmarks/sparse.py``'s settings), float64, on the device.

``relaxep dense EP, fixed kernel, torch`` (``--dense-n`` rows, 40 000 by default)
    ``GPClassifier(4 * RBF(2), Probit(), optimizer=None)`` on torch tensors: the dense parallel EP, one
    Cholesky factor of :math:`B = I + S^{1/2}KS^{1/2}` and one triangular solve per sweep on the device.
``relaxep dense EP, learned by L-BFGS-B, torch`` (``--learned-n`` rows, 10 000 by default)
    ``GPClassifier(1 * RBF(1), Probit())``: the kernel learned on the EP evidence, its gradient in closed
    form on the device.
``relaxep dense EP, fixed kernel, numpy``
    the first row's fit on numpy arrays (LAPACK) at ``--dense-cpu-max`` rows at most, for the agreement row.
"""

from __future__ import annotations

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # scikit-learn's array API dispatch needs it before scipy loads

import argparse
import sys
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sparse import SVGP_STEPS, bayes, device_latent, problem, run_gpytorch, scores


def _sync(torch: object, device: object) -> None:
    if getattr(device, "type", "cpu") == "cuda":
        torch.cuda.synchronize()  # type: ignore[attr-defined]


def fixed_fitc(M: int) -> object:
    """The fixed-kernel sparse classifier every FITC row fits."""
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from relaxep import GPClassifier, Probit

    return GPClassifier(C(4.0) * RBF(2.0), Probit(), inducing_points=M, optimizer=None, random_state=0)


def fitc_on_device(torch: object, device: object, arrays: tuple, yt: np.ndarray, M: int, what: str) -> tuple:
    """:func:`fixed_fitc` fitted on the device's ``(X, y, X_test)``: its row, one refresh's row, and the test
    probabilities."""
    import sklearn

    sync = partial(_sync, torch, device)
    clf, fit, predict, p1 = timed(fixed_fitc(M), *arrays, sync)
    with sklearn.config_context(array_api_dispatch=True):
        start = time.perf_counter()
        clf.result_.posterior.refresh()
        sync()
        refresh = time.perf_counter() - start
    return [
        (f"relaxep FITC EP, fixed kernel, torch{what}", fit, predict, *scores(p1, yt), clf.result_.n_sweeps),
        (f"one FITC refresh, torch{what}", refresh, float("nan"), float("nan"), float("nan"), ""),
    ], p1


def fitc_rows(torch: object, device: object, n: int, M: int) -> list[tuple]:
    """The fixed-kernel FITC fit on the device at a larger ``n`` (its fit and one refresh)."""
    X, y, Xt, yt, _ = problem(n)
    arrays = tuple(torch.asarray(a, device=device) for a in (X, y, Xt))  # type: ignore[attr-defined]
    del X, y
    return fitc_on_device(torch, device, arrays, yt, M, f", n = {n}")[0]


def timed(estimator: object, X: object, y: object, Xt: object, sync: object = None) -> tuple:
    """``estimator`` fitted on ``(X, y)`` (under scikit-learn's ``array_api_dispatch`` where ``sync`` is given:
    another library's arrays, synchronised before the clock stops), its fit and predict seconds and the
    probabilities of class 1 at ``Xt`` on the host."""
    import contextlib

    import sklearn

    from relaxep._xp import to_numpy

    dispatch = sklearn.config_context(array_api_dispatch=True) if sync else contextlib.nullcontext()
    with dispatch:
        start = time.perf_counter()
        estimator.fit(X, y)  # type: ignore[attr-defined]
        if sync:
            sync()  # type: ignore[operator]
        fit = time.perf_counter() - start
        start = time.perf_counter()
        p1 = to_numpy(estimator.predict_proba(Xt)[:, 1])  # type: ignore[attr-defined]
    return estimator, fit, time.perf_counter() - start, p1


def relaxep_rows(torch: object, device: object, n: int, M: int, cpu_max: int) -> list[tuple]:
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from relaxep import GPClassifier, Probit

    X, y, Xt, yt, _ = problem(n)
    tX, ty, tXt = (torch.asarray(a, device=device) for a in (X, y, Xt))  # type: ignore[attr-defined]
    sync = partial(_sync, torch, device)
    rows, p1 = fitc_on_device(torch, device, (tX, ty, tXt), yt, M, "")
    # the default learned fit from 20 000 rows
    learned = GPClassifier(C(1.0) * RBF(1.0), Probit(), inducing_points=M, optimizer="stochastic", random_state=0)
    learned, fit, predict, p_learned = timed(learned, tX, ty, tXt, sync)
    name = f"relaxep stochastic learning (1000 steps) + EP, torch: {learned.kernel_}"
    rows.append((name, fit, predict, *scores(p_learned, yt), learned.result_.n_sweeps))
    if n <= cpu_max:
        ref, fit, predict, p_ref = timed(fixed_fitc(M), X, y, Xt)
        rows.append(("relaxep FITC EP, fixed kernel, numpy", fit, predict, *scores(p_ref, yt), ref.result_.n_sweeps))
        gap = float(np.max(np.abs(p1 - p_ref)))
        rows.append(("(torch against numpy: largest probability difference)", gap, *[float("nan")] * 3, ""))
    return rows


def dense_rows(torch: object, device: object, n_fixed: int, n_learned: int, cpu_max: int) -> list[tuple]:
    """The dense representation on the device: EP at a fixed kernel, and learned by L-BFGS-B."""
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from relaxep import GPClassifier, Probit

    rows = []
    for n, learn in ((n_fixed, False), (n_learned, True)):
        if n <= 0:
            continue
        X, y, Xt, yt, _ = problem(n)
        kernel = C(1.0) * RBF(1.0) if learn else C(4.0) * RBF(2.0)

        def make(kernel=kernel, learn=learn) -> GPClassifier:
            return GPClassifier(kernel, Probit(), optimizer="fmin_l_bfgs_b" if learn else None)

        tX, ty, tXt = (torch.asarray(a, device=device) for a in (X, y, Xt))  # type: ignore[attr-defined]
        clf, fit, predict, p1 = timed(make(), tX, ty, tXt, partial(_sync, torch, device))
        what = f"learned by L-BFGS-B ({clf.kernel_})" if learn else "fixed kernel"
        rows.append((f"relaxep dense EP, {what}, torch, n = {n}", fit, predict, *scores(p1, yt), clf.result_.n_sweeps))
        if not learn and n <= cpu_max:
            ref, fit, predict, p_ref = timed(make(), X, y, Xt)
            rows.append((f"relaxep dense EP, fixed kernel, numpy, n = {n}", fit, predict, *scores(p_ref, yt),
                         ref.result_.n_sweeps))  # fmt: skip
            gap = float(np.max(np.abs(p1 - p_ref)))
            rows.append(("(dense torch against numpy: largest probability difference)", gap, *[float("nan")] * 3, ""))
    return rows


def gpytorch_row(device: object, n: int, M: int, batch: int, steps: int) -> tuple:
    """GPyTorch's SVGP as ``benchmarks/sparse.py`` runs it, on ``device`` with torch's own threads."""
    fit, predict, p1, _ = run_gpytorch(n, M, device=str(device), batch=batch, steps=steps, threads=None)
    return (f"GPyTorch SVGP, {steps} Adam steps, batch {batch}", fit, predict, *scores(p1, problem(n)[3]), "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--inducing", type=int, default=200)
    parser.add_argument("--cpu-max", type=int, default=1_000_000, help="numpy row only up to this many rows")
    parser.add_argument("--batches", type=int, nargs="*", default=[1000, 10_000])
    parser.add_argument("--steps", type=int, default=SVGP_STEPS, help="SVGP's Adam steps (a smoke test takes fewer)")
    parser.add_argument("--dense-n", type=int, default=40_000, help="dense EP at a fixed kernel (0: no row)")
    parser.add_argument("--learned-n", type=int, default=10_000, help="dense EP learned by L-BFGS-B (0: no row)")
    parser.add_argument("--dense-cpu-max", type=int, default=5_000, help="numpy dense row only up to this many rows")
    parser.add_argument("--fitc-n", type=int, default=0, help="the fixed FITC fit again at this size (0: no row)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import torch

    warnings.simplefilter("ignore")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({os.cpu_count()} cores)"
    if device.type == "cuda":
        device_latent(torch, device)
    _, _, _, yt, ft = problem(args.n)
    err, nll = bayes(yt, ft)
    lines = [
        f"# relaxep on {card} beside GPyTorch (`python benchmarks/gpu.py --n {args.n}`)",
        "",
        f"n = {args.n}, M = {args.inducing}, d = 8 probit GP, 20 000 test rows; Bayes floor: error "
        f"{err:.4f}, NLL {nll:.4f}. float64 everywhere; torch {torch.__version__}.",
        "",
        "| fit | fit (s) | predict (s) | test error | test NLL | EP sweeps |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for line in lines:
        print(line, flush=True)

    def emit(rows: list[tuple]) -> None:
        """Print each row as it comes and rewrite ``--out``, so that a run stopped early keeps what it measured."""
        for name, fit, predict, error, nll_, sweeps in rows:
            cells = [f"{v:.3g}" for v in (fit, predict)] + [f"{v:.4f}" for v in (error, nll_)]
            cells = ["" if c == "nan" else c for c in cells]
            lines.append(f"| {name} | {' | '.join(cells)} | {sweeps} |")
            print(lines[-1], flush=True)
        if args.out:
            Path(args.out).write_text("\n".join(lines) + "\n")

    emit(relaxep_rows(torch, device, args.n, args.inducing, args.cpu_max))
    for batch in args.batches:
        emit([gpytorch_row(device, args.n, args.inducing, batch, args.steps)])
    if args.fitc_n:
        emit(fitc_rows(torch, device, args.fitc_n, args.inducing))
    emit(dense_rows(torch, device, args.dense_n, args.learned_n, args.dense_cpu_max))


if __name__ == "__main__":
    main()
