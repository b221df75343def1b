"""Bad input and faults at every public entry point: what does each one get back?

Each case calls one public function with one bad argument (or a fault such as a damaged file)
and is classed as: ``clear error`` (a ValueError/TypeError/FileNotFoundError whose message names
the argument, as expected, and for a likelihood given to the wrong estimator ``use <the estimator
that fits it>`` too), ``result`` (returned; then it must be a correct answer: the case says
what is correct), ``unclear error`` (another exception, or a message that does not name the
argument), ``hang`` (over 60 s) or ``mutated`` (an input changed).  Prints a table and counts;
``python benchmarks/fuzz_inputs.py [--out benchmarks/results/fuzz_inputs.md]``.
"""

from __future__ import annotations

import argparse
import copy
import signal
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import sparse
from sklearn.gaussian_process.kernels import RBF

from relaxep import (
    EP,
    Gaussian,
    GPClassifier,
    GPHeteroscedasticRegressor,
    GPOrdinalClassifier,
    GPPreferenceLearner,
    GPRegressor,
    Laplace,
    MultinomialProbit,
    NegativeBinomial,
    NoisyProbit,
    NoisyStep,
    OrdinalProbit,
    Poisson,
    PowerEP,
    Probit,
    RelaxedEP,
    RobustMax,
    StudentT,
    infer,
)
from relaxep.datasets import fetch, flip_labels, load_dataset, make_synthetic, paper_splits

rng = np.random.default_rng(0)
X = rng.normal(size=(30, 2))
Y = np.where(X[:, 0] > 0, 1.0, -1.0)
K = RBF(1.0)(X) + 1e-6 * np.eye(30)
FIT = infer(K, Y, Probit(), EP())


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang


def case(
    name: str,
    call: Callable[[], object],
    names: tuple[str, ...],
    correct: Callable[[object], bool] | None = None,
    required: tuple[str, ...] = (),
):
    """``names``: words one of which a clear error must contain; ``correct``: how a returned value is judged;
    ``required``: words every one of which it must contain as well (the estimator to use instead)."""
    return name, call, names, correct, required


def _ok_result(result) -> bool:
    return getattr(result, "status", "converged") in ("converged",) and np.all(np.isfinite(result.mean))


def _cases(tmp: Path) -> list:
    cases = []
    bad_k = {
        "K with NaN": np.where(np.eye(30) > 0, np.nan, K),
        "K with inf": np.where(np.eye(30) > 0, np.inf, K),
        "K not square": K[:, :29],
        "K not symmetric": K + np.triu(np.ones((30, 30)), 1) * 0.1,
        "K negative diagonal": K - 2 * np.eye(30),
        "K indefinite": K - 0.9 * np.ones((30, 30)),
        "K scipy.sparse": sparse.csr_matrix(K),
        "K a string": "K",
        "K None": None,
        "K empty": np.zeros((0, 0)),
        "K 3-D": K[None],
        "K of strings": np.full((30, 30), "a"),
    }
    for name, k in bad_k.items():
        cases.append(case(f"infer: {name}", lambda k=k: infer(k, Y, Probit(), EP()), ("K", "kernel")))
    cases.append(
        case(
            "infer: K scaled 1e10 (step)",
            lambda: infer(1e10 * K, Y, NoisyStep(0.1), EP(damping=0.5)),
            (),
            lambda r: (
                _ok_result(r)
                and np.allclose(
                    NoisyStep(0.1).predict(*r.predict_latent(1e10 * K[:3], 1e10 * np.diag(K)[:3])),
                    NoisyStep(0.1).predict(
                        *infer(K, Y, NoisyStep(0.1), EP(damping=0.5)).predict_latent(K[:3], np.diag(K)[:3])
                    ),
                    atol=1e-6,
                )
            ),
        )
    )
    cases.append(case("infer: K list of lists", lambda: infer(K.tolist(), Y, Probit(), EP()), (), _ok_result))
    cases.append(
        case(
            "infer: y as the strings '1.0'/'-1.0'",
            lambda: infer(K, Y.astype(str), Probit(), EP()),
            (),
            lambda r: np.array_equal(r.mean, FIT.mean),
        )
    )
    bad_y = {
        "y wrong length": Y[:-1],
        "y 0/1": (Y > 0).astype(float),
        "y words": np.where(Y > 0, "yes", "no"),
        "y NaN": np.r_[np.nan, Y[1:]],
        "y one class": np.ones(30),
        "y 2-D": Y[:, None],
        "y None": None,
    }
    for name, y in bad_y.items():
        cases.append(case(f"infer: {name}", lambda y=y: infer(K, y, Probit(), EP()), ("y", "labels", "length")))
    bad_kw = {
        "likelihood='probit'": dict(likelihood="probit"),
        "likelihood=Probit": dict(likelihood=Probit),
        "rule='EP'": dict(rule="EP"),
        "rule=EP": dict(rule=EP),
        "max_sweeps=0": dict(max_sweeps=0),
        "max_sweeps=-1": dict(max_sweeps=-1),
        "max_sweeps=2.5": dict(max_sweeps=2.5),
        "max_sweeps=inf": dict(max_sweeps=np.inf),
        "max_sweeps=nan": dict(max_sweeps=np.nan),
        "max_sweeps='10'": dict(max_sweeps="10"),
        "max_sweeps=True": dict(max_sweeps=True),
        "tol=0": dict(tol=0.0),
        "tol=-1": dict(tol=-1.0),
        "tol=inf": dict(tol=np.inf),
        "tol=nan": dict(tol=np.nan),
        "tol='1e-3'": dict(tol="1e-3"),
        "schedule='zigzag'": dict(schedule="zigzag"),
        "schedule=3": dict(schedule=3),
        "order='backwards'": dict(order="backwards"),
        "criterion='scaled'": dict(criterion="scaled"),
        "on_improper='maybe'": dict(on_improper="maybe"),
        "blas_threads=0": dict(blas_threads=0),
        "blas_threads='2'": dict(blas_threads="2"),
        "init=<a result with 10 sites>": dict(init=infer(K[:10, :10], Y[:10], Probit(), EP())),
        "init=(tau, nu)": dict(init=(np.ones(30), np.zeros(30))),
        "parallel_step=0": dict(parallel_step=0.0),
        "block_size=0": dict(block_size=0),
    }
    for name, kw in bad_kw.items():
        word = name.split("=")[0]
        args = dict(likelihood=Probit(), rule=EP())
        args.update(kw)
        cases.append(case(f"infer: {name}", lambda args=args: infer(K, Y, **args), (word,)))
    predict_cases = {
        "negative prior variances": ((K[:3], -np.ones(3)), "k_star_diag"),
        "K_star of the wrong width": ((K[:3, :10], np.ones(3)), "K_star"),
        "NaN in K_star": ((np.full((3, 30), np.nan), np.ones(3)), "K_star"),
    }
    for name, (args, word) in predict_cases.items():
        cases.append(case(f"predict_latent: {name}", lambda args=args: FIT.predict_latent(*args), (word,)))
    ctor = {
        "NoisyStep(-0.1)": lambda: NoisyStep(-0.1),
        "NoisyStep(0.5)": lambda: NoisyStep(0.5),
        "NoisyStep('a')": lambda: NoisyStep("a"),
        "NoisyProbit(0.1, 0)": lambda: NoisyProbit(0.1, 0.0),
        "Probit().log_z(power=2)": lambda: Probit().log_z(1.0, 0.0, 1.0, power=2.0),
        "EP(damping=0)": lambda: EP(damping=0.0),
        "EP(damping='x')": lambda: EP(damping="x"),
        "PowerEP(u=1.5)": lambda: PowerEP(1.5),
        "RelaxedEP(c=-1)": lambda: RelaxedEP(-1.0),
        "RelaxedEP(variant='x')": lambda: RelaxedEP(variant="x"),
    }
    for name, make in ctor.items():
        word = {
            "NoisyStep": "eps",
            "NoisyProbit": "scale",
            "Probit()": "power",
            "EP(": "damping",
            "PowerEP": "power",
            "RelaxedEP(c": "c",
            "RelaxedEP(v": "variant",
        }
        key = next(v for k, v in word.items() if name.startswith(k))
        cases.append(case(name, make, (key,)))
    est = {
        "kernel='rbf'": dict(kernel="rbf"),
        "likelihood='x'": dict(likelihood="x"),
        "rule='x'": dict(rule="x"),
        "optimizer='bfgs'": dict(optimizer="bfgs"),
        "n_restarts_optimizer=-1": dict(n_restarts_optimizer=-1),
        "n_restarts_optimizer=1.5": dict(n_restarts_optimizer=1.5),
        "max_sweeps=0": dict(max_sweeps=0),
        "tol=-1": dict(tol=-1.0),
        "jitter=-1": dict(jitter=-1.0),
        "jitter=nan": dict(jitter=np.nan),
        "schedule='x'": dict(schedule="x"),
        "random_state='x'": dict(random_state="x", n_restarts_optimizer=1),
    }
    est["likelihood='probit'"] = dict(likelihood="probit")
    est["rule=EP"] = dict(rule=EP)
    for name, params in est.items():
        word = name.split("=")[0]
        cases.append(case(f"GPClassifier({name}).fit", lambda p=params: GPClassifier(**p).fit(X, Y), (word,)))
    targets = X[:, 0] + 0.1 * rng.normal(size=30)
    reg = {
        "kernel='rbf'": dict(kernel="rbf"),
        "likelihood='student_t'": dict(likelihood="student_t"),
        "rule='ep'": dict(likelihood=StudentT(), rule="ep"),
        "optimizer='stochastic'": dict(likelihood=StudentT(), optimizer="stochastic"),
        "n_restarts_optimizer=1.5": dict(n_restarts_optimizer=1.5),
        "inducing_points=0": dict(likelihood=StudentT(), inducing_points=0),
        "optimizer_maxiter=0": dict(likelihood=StudentT(), inducing_points=5, optimizer_maxiter=0),
    }
    for name, params in reg.items():
        word = name.split("=")[0]
        cases.append(case(f"GPRegressor({name}).fit", lambda p=params: GPRegressor(**p).fit(X, targets), (word,)))
    from relaxep.estimators.dask import DaskGPClassifier, DaskGPRegressor  # (Dask itself is imported by fit)

    dask_est = {
        "likelihood='probit'": dict(likelihood="probit"),
        "rule='auto'": dict(rule="auto"),
        "kernel='rbf'": dict(kernel="rbf"),
        "optimizer='bfgs'": dict(optimizer="bfgs"),
        "timeout=0": dict(timeout=0),
    }
    for name, params in dask_est.items():
        word = name.split("=")[0]
        call = lambda p=params: DaskGPClassifier(client=object(), **p).fit(X, Y)  # noqa: E731 (fails before the client)
        cases.append(case(f"DaskGPClassifier({name}).fit", call, (word,)))
    dask_reg = {
        "likelihood='student-t'": dict(likelihood="student-t"),
        "rule='auto'": dict(rule="auto"),
        "alpha=-1": dict(alpha=-1.0),
        "timeout=-5": dict(timeout=-5),
        "normalize_y=True with Poisson()": dict(likelihood=Poisson(), normalize_y=True),
    }
    for name, params in dask_reg.items():
        word = name.split("=")[0]
        call = lambda p=params: DaskGPRegressor(client=object(), **p).fit(X, targets)  # noqa: E731
        cases.append(case(f"DaskGPRegressor({name}).fit", call, (word,)))
    cases += _wrong_estimator_cases(targets, DaskGPClassifier, DaskGPRegressor)
    fits = {
        "X with NaN": (np.r_[[[np.nan, 0.0]], X[1:]], Y, ("NaN", "X")),
        "X with inf": (X + np.inf, Y, ("inf", "X")),
        "X * 1e300": (X * 1e300, Y, ("X",)),
        "X 1-D": (X[:, 0], Y, ("2D", "X", "array")),
        "X empty": (X[:0], Y[:0], ("sample", "X")),
        "y one class": (X, np.ones(30), ("class",)),
        "y NaN": (X, np.r_[np.nan, Y[1:]], ("NaN", "y", "Input")),
        "lengths differ": (X, Y[:-1], ("samples", "inconsistent")),
        "y continuous": (X, rng.normal(size=30), ("continuous", "Unknown label")),
    }
    for name, (xx, yy, words) in fits.items():
        cases.append(case(f"GPClassifier().fit: {name}", lambda xx=xx, yy=yy: GPClassifier().fit(xx, yy), words))
    fitted = GPClassifier(optimizer=None).fit(X, Y)
    cases.append(case("predict before fit", lambda: GPClassifier().predict(X), ("fitted",)))
    cases.append(case("predict: wrong number of features", lambda: fitted.predict(X[:, :1]), ("features",)))
    cases.append(case("predict: NaN", lambda: fitted.predict(np.r_[[[np.nan, 0.0]], X[1:]]), ("NaN", "X")))
    damaged = tmp / "damaged"
    damaged.mkdir()
    (damaged / "haberman.csv").write_text("age,year,nodes,label\n30,64,nan,1\n")
    (damaged / "heart.csv").write_text("")
    cases += [
        case("load_dataset: unknown name", lambda: load_dataset("iris"), ("unknown dataset",)),
        case("load_dataset: NaN cell", lambda: load_dataset("haberman", damaged), ("non-finite",)),
        case("load_dataset: empty file", lambda: load_dataset("heart", damaged), ("heart.csv",)),
        case("load_dataset: missing folder", lambda: load_dataset("pima", tmp / "none"), ("not found", "data_home")),
        case("fetch: timeout=0", lambda: fetch("heart", tmp, timeout=0), ("timeout",)),
        case("paper_splits: n_splits=0", lambda: paper_splits("heart", 0), ("n_splits",)),
        case("flip_labels: rate=0.7", lambda: flip_labels(Y, 0.7), ("rate",)),
        case("make_synthetic: n_per_class=0", lambda: make_synthetic(0), ("n_per_class",)),
    ]
    return cases + _hostile_cases()


def _finite_fit(est) -> bool:
    """A fitted estimator whose predictions on its own inputs are finite (probabilities where it has them)."""
    probabilities = hasattr(est, "predict_proba") and not hasattr(est, "comparisons_")  # (a preference learner's
    out = est.predict_proba(est.X_train_) if probabilities else est.predict(est.X_train_)  # needs comparisons)
    return bool(np.all(np.isfinite(out)))


def _chain(signal: np.ndarray) -> np.ndarray:
    """Comparisons of each row with the next, the larger signal preferred."""
    pairs = np.column_stack([np.arange(signal.size - 1), np.arange(1, signal.size)])
    return np.where((signal[:-1] >= signal[1:])[:, None], pairs, pairs[:, ::-1])


def _hostile_cases() -> list:
    """Legal data that is hard on the linear algebra (duplicated rows, a constant column, extreme scales, separable
    classes, four rows), fitted by each estimator with its defaults, dense and sparse: a fit, or a clear error; a
    LinAlgError (or any other exception) from inside is an unclear error."""
    base = rng.normal(size=(40, 2))
    data = {
        "rows duplicated 5x": np.repeat(base, 5, axis=0),
        "a constant column": np.column_stack([base[:, 0], np.ones(40)]),
        "X * 1e6": base * 1e6,
        "X * 1e-6": base * 1e-6,
        "four rows": base[:4],
        "separable by a gap": base + np.where(base[:, :1] > 0, 5.0, -5.0),
    }
    makers = {
        "GPClassifier()": lambda: GPClassifier(random_state=0),
        "GPClassifier(inducing_points=8)": lambda: GPClassifier(inducing_points=8, random_state=0),
        "GPRegressor()": lambda: GPRegressor(random_state=0),
        "GPRegressor(inducing_points=8)": lambda: GPRegressor(inducing_points=8, random_state=0),
        "GPRegressor(likelihood=StudentT())": lambda: GPRegressor(likelihood=StudentT(), random_state=0),
        "GPOrdinalClassifier()": lambda: GPOrdinalClassifier(random_state=0),
        "GPHeteroscedasticRegressor()": lambda: GPHeteroscedasticRegressor(random_state=0),
        "GPPreferenceLearner()": lambda: GPPreferenceLearner(random_state=0),
        "GPPreferenceLearner(inducing_points=8)": lambda: GPPreferenceLearner(inducing_points=8, random_state=0),
    }
    cases = []
    for dname, xx in data.items():
        signal = xx[:, 0] / (np.std(xx[:, 0]) or 1.0)
        targets = {
            "GPClassifier": np.where(signal > 0, 1, -1) if dname != "four rows" else np.array([1, -1, 1, -1]),
            "GPRegressor": np.sin(signal),
            "GPOrdinalClassifier": np.digitize(signal, [-0.5, 0.5]) if dname != "four rows" else np.array([0, 1, 2, 1]),
            "GPHeteroscedasticRegressor": np.sin(signal) * (1.0 + 0.3 * np.abs(signal)),
            # each row against the next, the larger signal preferred
            "GPPreferenceLearner": _chain(signal),
        }
        for ename, make in makers.items():
            yy = targets[ename.split("(")[0]]

            def call(make=make, xx=xx, yy=yy):
                return make().fit(xx, yy)

            cases.append(case(f"{ename}.fit: {dname}", call, ("X", "inducing_points", "n_samples"), _finite_fit))
    return cases


def _wrong_estimator_cases(targets, dask_classifier: type, dask_regressor: type) -> list:
    """Every likelihood given to an estimator that does not fit it: the error must name ``likelihood`` and the
    estimator to use (``use GPOrdinalClassifier``, ...); the classifiers see three classes."""
    three = np.arange(30) % 3
    binary, multi, ordinal = (Probit(), NoisyProbit(0.01, 1.0)), (MultinomialProbit(), RobustMax()), (OrdinalProbit(),)
    counts, real = (Poisson(), NegativeBinomial()), (Gaussian(), StudentT(), Laplace())
    wrong = [  # (estimator, data, [(likelihoods, the estimator to use)])
        (GPClassifier, three, [(ordinal, "GPOrdinalClassifier"), (counts + real, "GPRegressor")]),
        (GPOrdinalClassifier, three, [(binary + multi, "GPClassifier"), (counts + real, "GPRegressor")]),
        (GPRegressor, targets, [(binary + multi, "GPClassifier"), (ordinal, "GPOrdinalClassifier")]),
        (dask_classifier, Y, [(multi, "GPClassifier"), (ordinal, "GPOrdinalClassifier"),
                              (counts + real, "DaskGPRegressor")]),
        (dask_regressor, targets, [(binary, "DaskGPClassifier"), (multi, "GPClassifier"),
                                   (ordinal, "GPOrdinalClassifier")]),
    ]  # fmt: skip
    cases = []
    for estimator, y, groups in wrong:
        extra = {"client": object()} if estimator.__name__.startswith("Dask") else {}
        for likelihoods, use in groups:
            for lik in likelihoods:
                call = lambda e=estimator, k=lik, y=y, x=extra: e(likelihood=k, **x).fit(X, y)  # noqa: E731
                name = f"{estimator.__name__}(likelihood={type(lik).__name__}()).fit"
                cases.append(case(name, call, ("likelihood",), required=(f"use {use}",)))
    return cases


def run(timeout: int = 60) -> tuple[list[tuple[str, str, str]], dict[str, int]]:
    rows = []
    signal.signal(signal.SIGALRM, _alarm)
    with tempfile.TemporaryDirectory() as tmp:
        for name, call, words, correct, required in _cases(Path(tmp)):
            before = copy.deepcopy((X, Y, K))
            signal.alarm(timeout)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = call()
                outcome = "result" if correct is None else ("correct result" if correct(result) else "wrong result")
                if correct is None and words:
                    outcome = "accepted"  # an error was expected
                detail = type(result).__name__
            except Hang:
                outcome, detail = "hang", f"over {timeout} s"
            except (ValueError, TypeError, FileNotFoundError, ConnectionError) as exc:
                message = str(exc)
                named = any(w.lower() in message.lower() for w in words) and all(w in message for w in required)
                outcome = "clear error" if named else "unclear error"
                detail = f"{type(exc).__name__}: {message[:110]}"
                cut = message.find(" is for ")
                if required and cut > 0:  # (the estimator it names, past the likelihood's parameters)
                    detail = f"{type(exc).__name__}: {message.split('(')[0]}(...){message[cut:][:100]}"
            except Exception as exc:
                outcome, detail = "unclear error", f"{type(exc).__name__}: {str(exc)[:110]}"
            finally:
                signal.alarm(0)
            if not all(np.array_equal(a, b, equal_nan=True) for a, b in zip(before, (X, Y, K), strict=True)):
                outcome = "mutated"
            rows.append((name, outcome, detail.replace("|", "/").replace("\n", " ")))
    counts: dict[str, int] = {}
    for _, outcome, _ in rows:
        counts[outcome] = counts.get(outcome, 0) + 1
    return rows, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rows, counts = run()
    lines = ["| case | outcome | what came back |", "|---|---|---|"] + [f"| {a} | {b} | {c} |" for a, b, c in rows]
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    print("\n".join(lines) + f"\n\n{len(rows)} cases: {summary}")
    if args.out:
        Path(args.out).write_text(
            "# Bad input at every public entry point (`python benchmarks/fuzz_inputs.py`)\n\n"
            f"{len(rows)} cases: {summary}.\n\n" + "\n".join(lines) + "\n"
        )


if __name__ == "__main__":
    main()
