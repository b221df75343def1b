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
    the default learned fit: ``1 * RBF(1)`` and the inducing inputs learned by the stochastic search
    (1000 steps of 1000 rows; the minibatch algebra, the likelihood's moments and the M x M steps on
    the device, one short read a step: ``relaxep.estimators._stochastic``), then EP on all rows.
``relaxep stochastic search alone ..., M x M steps on the device`` (and ``on the host``: ``--stochastic-host``)
    the search of that fit alone, and the same with its M x M steps on the host in the same process
    (``benchmarks/gpu_search.py``; ``GPU_PROFILE_SEARCH=path`` profiles the device's).
``relaxep FITC EP, fixed kernel, torch, n = --fitc-n`` (10^7 by the command below; 0: no row)
    the first row at a larger size, the fit and one refresh.
``relaxep FITC EP, fixed kernel, numpy``
    the same fit on numpy arrays, every core (``--cpu-max`` rows at most).
``... length-n transfers`` (in the FITC rows' names)
    arrays of at least 17 entries moved between host and device during the fit (``Tensor.cpu`` one way,
    ``torch.asarray``/``as_tensor`` of numpy the other), and per EP sweep: since the sites, moments and
    schedule run on the device (``relaxep.inference.device_ep``) a sweep should move none.
``relaxep FITC EP, fixed kernel, torch, rows recomputed, n = --streamed-n`` (10^8 by the command below)
    the fixed-kernel fit where ``V^T`` (n x M) does not fit on the card: ``SparsePrior``'s ``rows="auto"``
    recomputes the rows in blocks each refresh; the data drawn on the device from the same latent, the
    inducing inputs k-means centres of its first 10^5 rows.
``relaxep default GPClassifier(inducing_points=M), torch``
    the label-noise default likelihood, everything learned (``optimizer="auto"``: the stochastic search).
``relaxep stochastic learning + EP, numpy``
    the learned probit fit of the torch row on numpy arrays, 16 cores, default threads (``--learned-cpu``).
``relaxep sparse L-BFGS-B (auto), torch, n = --lbfgs-n``
    ``GPClassifier(inducing_points=50)`` with its defaults below ``STOCHASTIC_FROM`` rows: L-BFGS-B on the FITC
    evidence, its gradient on the device; beside the same fit on numpy.
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
from gpu_search import search_rows
from sparse import SVGP_STEPS, bayes, device_latent, problem, run_gpytorch, scores


class Transfers:
    """Count arrays of more than 16 entries moved host <-> device while it is entered (torch's conversions)."""

    def __init__(self, torch: object) -> None:
        self.torch, self.to_host, self.to_device = torch, 0, 0

    def __enter__(self) -> Transfers:
        torch = self.torch
        self._saved = (torch.Tensor.cpu, torch.asarray, torch.as_tensor)  # type: ignore[attr-defined]
        cpu, asarray, as_tensor = self._saved

        def counted_cpu(t, *args, **kwargs):
            self.to_host += int(t.numel() > 16 and t.device.type != "cpu")
            return cpu(t, *args, **kwargs)

        def counting(convert):
            def wrapped(obj, *args, **kwargs):
                self.to_device += int(isinstance(obj, np.ndarray) and obj.size > 16)
                return convert(obj, *args, **kwargs)

            return wrapped

        torch.Tensor.cpu = counted_cpu  # type: ignore[attr-defined]
        torch.asarray, torch.as_tensor = counting(asarray), counting(as_tensor)  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: object) -> None:
        self.torch.Tensor.cpu, self.torch.asarray, self.torch.as_tensor = self._saved  # type: ignore[attr-defined]

    def per_sweep(self, sweeps: int) -> str:
        return f"{self.to_host} to the host, {self.to_device} to the device in {sweeps} sweeps"


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
    with Transfers(torch) as moved:
        clf, fit, predict, p1 = timed(fixed_fitc(M), *arrays, sync)
    what = f"{what} (length-n transfers: {moved.per_sweep(clf.result_.n_sweeps)}, fit and predict)"
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
    """The fixed-kernel FITC fit on the device at a larger ``n`` (its fit and one refresh); with the environment
    variable ``GPU_PROFILE`` set to a path, a second fit under cProfile writes its 30 costliest calls there."""
    X, y, Xt, yt, _ = problem(n)
    arrays = tuple(torch.asarray(a, device=device) for a in (X, y, Xt))  # type: ignore[attr-defined]
    del X, y
    rows = fitc_on_device(torch, device, arrays, yt, M, f", n = {n}")[0]
    if os.environ.get("GPU_PROFILE"):
        import cProfile
        import io
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        timed(fixed_fitc(M), *arrays, partial(_sync, torch, device))
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(30)
        Path(os.environ["GPU_PROFILE"]).write_text(text.getvalue())
    return rows


def streamed_rows(torch: object, device: object, n: int, M: int) -> list[tuple]:
    """The fixed-kernel FITC fit at ``n`` rows drawn on the device (the latent of :func:`sparse.problem`), where the
    rows of ``V^T`` cannot be held: ``rows="auto"`` recomputes them in blocks."""
    import sparse as sp

    from relaxep.estimators._inducing import initial_inducing_points

    rng = np.random.default_rng(sp.SEED)
    omega = rng.normal(size=(sp.DIM, sp.N_FEATURES)) / sp.ELL
    phase = rng.uniform(0.0, 2.0 * np.pi, sp.N_FEATURES)
    weights = rng.normal(size=sp.N_FEATURES)
    _, _, Xt, yt, _ = problem(20_000)
    gen = torch.Generator(device=device).manual_seed(sp.SEED + 5)  # type: ignore[attr-defined]
    X = torch.randn(n, sp.DIM, dtype=torch.float64, device=device, generator=gen)  # type: ignore[attr-defined]
    om, ph, w = (torch.asarray(a, device=device) for a in (omega, phase, weights))  # type: ignore[attr-defined]
    y = torch.empty(n, dtype=torch.float64, device=device)  # type: ignore[attr-defined]
    scale = float(np.sqrt(2.0 * sp.VAR / sp.N_FEATURES))
    for s in range(0, n, 1 << 18):  # (a block's cosines: 2^18 x 4096 doubles, 8.6 GB)
        f = (torch.cos(X[s : s + (1 << 18)] @ om + ph) @ w) * scale  # type: ignore[attr-defined]
        u = torch.rand(f.shape[0], dtype=torch.float64, device=device, generator=gen)  # type: ignore[attr-defined]
        y[s : s + (1 << 18)] = torch.where(u < torch.special.ndtr(f), 1.0, -1.0)  # type: ignore[attr-defined]
    _sync(torch, device)
    Z = initial_inducing_points(X[:100_000].cpu().numpy(), M, "kmeans", np.random.default_rng(0))
    clf = fixed_fitc(M).set_params(inducing_points=Z)  # type: ignore[attr-defined]
    with Transfers(torch) as moved:
        clf, fit, predict, p1 = timed(clf, X, y, torch.asarray(Xt, device=device), partial(_sync, torch, device))
    rows_mode = getattr(clf.result_.posterior.prior, "rows", "stored")
    name = (
        f"relaxep FITC EP, fixed kernel, torch, rows {rows_mode}, n = {n} (length-n transfers: "
        f"{moved.per_sweep(clf.result_.n_sweeps)}); peak GPU memory "
        f"{torch.cuda.max_memory_allocated(device) / 2**30 if device.type == 'cuda' else float('nan'):.1f} GiB"
    )  # type: ignore[attr-defined]
    return [(name, fit, predict, *scores(p1, yt), clf.result_.n_sweeps)]


def learned_rows(torch: object, device: object, n: int, M: int, cpu: bool) -> list[tuple]:
    """The label-noise default on the device, and the learned probit fit on numpy (16 cores, default threads)."""
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from relaxep import GPClassifier, Probit

    X, y, Xt, yt, _ = problem(n)
    tX, ty, tXt = (torch.asarray(a, device=device) for a in (X, y, Xt))  # type: ignore[attr-defined]
    default = GPClassifier(inducing_points=M, random_state=0)
    default, fit, predict, p1 = timed(default, tX, ty, tXt, partial(_sync, torch, device))
    rows = [(f"relaxep default GPClassifier(inducing_points={M}), torch: {default.kernel_}", fit, predict,
             *scores(p1, yt), default.result_.n_sweeps)]  # fmt: skip
    if cpu:
        learned = GPClassifier(C(1.0) * RBF(1.0), Probit(), inducing_points=M, optimizer="stochastic", random_state=0)
        learned, fit, predict, p1 = timed(learned, X, y, Xt)
        rows.append((f"relaxep stochastic learning + EP, numpy ({os.cpu_count()} cores, default threads): "
                     f"{learned.kernel_}", fit, predict, *scores(p1, yt), learned.result_.n_sweeps))  # fmt: skip
    return rows


def lbfgs_rows(torch: object, device: object, n: int) -> list[tuple]:
    """``GPClassifier(inducing_points=50)``'s defaults at ``n`` rows (L-BFGS-B on the FITC evidence), torch and
    numpy."""
    from relaxep import GPClassifier

    X, y, Xt, yt, _ = problem(n)
    tX, ty, tXt = (torch.asarray(a, device=device) for a in (X, y, Xt))  # type: ignore[attr-defined]
    rows = []
    for label, arrays, sync in (("torch", (tX, ty, tXt), partial(_sync, torch, device)), ("numpy", (X, y, Xt), None)):
        try:
            clf, fit, predict, p1 = timed(GPClassifier(inducing_points=50, random_state=0), *arrays, sync)
        except Exception as exc:  # (a path that does not reach the device: its message is the row)
            rows.append((f"relaxep sparse L-BFGS-B (auto), {label}, n = {n}: {type(exc).__name__}: {exc}"[:300],
                         *[float("nan")] * 4, ""))  # fmt: skip
            continue
        rows.append((f"relaxep sparse L-BFGS-B (auto), {label}, n = {n}: {clf.kernel_}", fit, predict,
                     *scores(p1, yt), clf.result_.n_sweeps))  # fmt: skip
    return rows


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
    parser.add_argument("--streamed-n", type=int, default=0, help="the FITC fit with rows recomputed (0: no row)")
    parser.add_argument("--lbfgs-n", type=int, default=3000, help="sparse L-BFGS-B defaults at this size (0: no row)")
    parser.add_argument("--learned-cpu", action="store_true", help="the learned fit on numpy too")
    parser.add_argument("--no-dense", action="store_true", help="leave out the dense rows")
    parser.add_argument("--stochastic-host", action="store_true", help="the search's host M x M steps too")
    parser.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="run only these groups, in this order: fitc, streamed, relaxep, search, learned, svgp, lbfgs, dense",
    )
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

    groups = {
        "relaxep": lambda: emit(relaxep_rows(torch, device, args.n, args.inducing, args.cpu_max)),
        "search": lambda: emit(search_rows(torch, device, args.n, args.inducing, args.stochastic_host)),
        "svgp": lambda: [emit([gpytorch_row(device, args.n, args.inducing, b, args.steps)]) for b in args.batches],
        "fitc": lambda: args.fitc_n and emit(fitc_rows(torch, device, args.fitc_n, args.inducing)),
        "streamed": lambda: args.streamed_n and emit(streamed_rows(torch, device, args.streamed_n, args.inducing)),
        "learned": lambda: emit(learned_rows(torch, device, args.n, args.inducing, args.learned_cpu)),
        "lbfgs": lambda: args.lbfgs_n and emit(lbfgs_rows(torch, device, args.lbfgs_n)),
        "dense": lambda: emit(dense_rows(torch, device, args.dense_n, args.learned_n, args.dense_cpu_max)),
    }
    order = ["relaxep", "search", "svgp", "fitc", "streamed", "learned", "lbfgs", "dense"]
    order = args.only if args.only is not None else order
    for group in order:
        if group == "dense" and args.no_dense:
            continue
        started = time.perf_counter()
        try:
            groups[group]()
        except Exception as exc:  # (one group's failure is a row; the others still run)
            emit([(f"{group}: {type(exc).__name__}: {exc}"[:300], *[float("nan")] * 4, "")])
        print(f"[{group}: {time.perf_counter() - started:.1f} s]", flush=True)


if __name__ == "__main__":
    main()
