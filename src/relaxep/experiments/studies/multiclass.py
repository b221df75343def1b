"""Multi-class: relaxep's ``GPClassifier`` as constructed, against scikit-learn's one-vs-rest Laplace GPC, and
label noise.

Methods on every data set:

* **relaxep GPClassifier() defaults**: ``GPClassifier(random_state=0)``, nothing else set: whatever the
  estimator's defaults are when the study runs (the fitted kernel and the rows its hyperparameter search used are
  read off the fitted estimator and recorded);
* **relaxep joint (nested EP)**: ``GPClassifier(multi_class="joint", random_state=0)``, the joint multinomial
  probit with one kernel shared by the classes;
* **sklearn OvR Laplace**: ``GaussianProcessClassifier(ConstantKernel(1.0) * RBF(1.0), random_state=0)``, one
  binary Laplace GPC per class (Rasmussen & Williams 2006, Algorithms 3.1-3.2), as its users fit it; on the
  waveform also started at ``RBF(sqrt(21))`` (a second row, labelled as such: from ``RBF(1.0)`` its length
  scales run to the bound and it predicts at chance, ``benchmarks/results/multiclass_sets.md``).

Data sets (no download):

* **digits** (scikit-learn's ``load_digits``): 1797 8x8 images, pixels / 16, split 1297 train / 500 test
  (stratified, ``random_state=0``), 10 classes (quick: a stratified 400-row subset of the training split);
* **iris** (150 x 4, 3 classes), **glass** (214 x 9, 6 classes), **crabs** (200 x 5, 4 classes), **penguins**
  (342 x 4, 3 classes) (:mod:`relaxep.datasets.multiclass`): stratified 5-fold cross-validation (shuffled,
  ``random_state=0``; quick: the first fold);
* **waveform** (Breiman et al. 1984; :func:`~relaxep.datasets.make_waveform`, 21 features, 3 classes):
  ``make_waveform(3000, random_state=0)``, the first 2000 rows to train, the last 1000 to test (quick: 300 / 300);
* features standardised on each training part (``StandardScaler``) for all but digits;
* **digits with flipped labels**: a stratified subset of the digits training split (200 points; quick: 100), a
  fraction of its labels replaced by one of the other 9 classes uniformly at random, the clean 500-point test
  split.  Joint multinomial probit with kernel ``ConstantKernel(1.0) * RBF(1.0)`` (hyperparameters by its
  evidence) against the robust max at that kernel (dense EP, ``eps`` in {0.05, 0.2}), and scikit-learn.

Recorded: the test error, the test negative log predictive probability of the true class (NLL, nats per point),
fit and predict wall seconds on one BLAS thread (``threadpool_limits(1)``); for the defaults on digits also a
second fit as a user runs it (no thread limit; not in a quick run).  The summary, the targets (:data:`TARGETS`,
judged on the numbers) and the report's text: :mod:`relaxep.experiments.studies._multiclass_report`.
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from relaxep.experiments.runner import Cell
from relaxep.experiments.studies._multiclass_report import (
    DEFAULTS,
    JOINT,
    JOINT_EP,
    SKLEARN,
    SKLEARN_WIDE,
    TARGETS,
    report_text,
    summarize,
    target_lines,
)
from relaxep.experiments.study import Study, StudyContext, Tables
from relaxep.experiments.tables import write_csv

__all__ = [
    "DEFAULTS", "JOINT", "JOINT_EP", "SKLEARN", "SKLEARN_WIDE", "STUDY", "TARGETS", "report", "run", "target_lines",
]  # fmt: skip

SMALL_SETS = ("iris", "glass", "crabs", "penguins")


def _standardised(Xtr: np.ndarray, Xte: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte)


def _digits_split() -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    return tuple(train_test_split(X / 16.0, y, test_size=500, stratify=y, random_state=0))


def _small_set(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "iris":
        from sklearn.datasets import load_iris

        return load_iris(return_X_y=True)
    from relaxep import datasets

    return getattr(datasets, f"load_{name}")()


def _fold(name: str, fold: int) -> tuple[np.ndarray, ...]:
    """Fold ``fold`` of the stratified 5-fold split (shuffled, seed 0) of a small set, standardised on its train."""
    from sklearn.model_selection import StratifiedKFold

    X, y = _small_set(name)
    tr, te = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))[fold]
    return (*_standardised(X[tr], X[te]), y[tr], y[te])


def _waveform(n_train: int, n_test: int) -> tuple[np.ndarray, ...]:
    from relaxep.datasets import make_waveform

    X, y = make_waveform(n_train + n_test, random_state=0)
    return (*_standardised(X[:n_train], X[n_train:]), y[:n_train], y[n_train:])


def _flipped_digits(n: int, rate: float) -> tuple[np.ndarray, ...]:
    from sklearn.model_selection import train_test_split

    Xtr, Xte, ytr, yte = _digits_split()
    Xs, _, ys, _ = train_test_split(Xtr, ytr, train_size=n, stratify=ytr, random_state=0)
    rng = np.random.default_rng(round(1000 * rate) + n)
    noisy = ys.copy()
    flip = rng.random(n) < rate
    noisy[flip] = (ys[flip] + rng.integers(1, 10, int(flip.sum()))) % 10
    return Xs, Xte, noisy, yte, int(flip.sum())


def _data(spec: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """``(X_train, X_test, y_train, y_test, extra columns)`` of a spec: ``{"data": "digits"[, "n_train"]}``,
    ``{"data": <small set>, "fold"}``, ``{"data": "waveform", "n_train", "n_test"}`` or
    ``{"data": "digits-flipped", "n_train", "rate"}``."""
    if spec["data"] == "digits":
        Xtr, Xte, ytr, yte = _digits_split()
        n = spec.get("n_train")
        if n:
            from sklearn.model_selection import train_test_split

            Xtr, _, ytr, _ = train_test_split(Xtr, ytr, train_size=n, stratify=ytr, random_state=0)
        return Xtr, Xte, ytr, yte, {}
    if spec["data"] in SMALL_SETS:
        return (*_fold(spec["data"], spec["fold"]), {})
    if spec["data"] == "waveform":
        return (*_waveform(spec["n_train"], spec["n_test"]), {})
    if spec["data"] == "digits-flipped":
        Xtr, Xte, ytr, yte, flipped = _flipped_digits(spec["n_train"], spec["rate"])
        return Xtr, Xte, ytr, yte, {"flipped": flipped}
    raise ValueError(f"spec: unknown data set {spec['data']!r}")


def _scores(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Error rate of the most probable class and the NLL ``-mean(log p[i, y_i])`` (nats)."""
    p = np.clip(p, 1e-300, 1.0)
    return float(np.mean(p.argmax(1) != y)), float(-np.mean(np.log(p[np.arange(y.size), y])))


def _model(method: str, n_features: int, kernel_of: dict[str, Any] | None) -> Any:
    """The unfitted estimator of ``method``."""
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel

    if method in (SKLEARN, SKLEARN_WIDE):
        from sklearn.gaussian_process import GaussianProcessClassifier

        length_scale = math.sqrt(n_features) if method == SKLEARN_WIDE else 1.0
        return GaussianProcessClassifier(ConstantKernel(1.0) * RBF(length_scale), random_state=0)

    from relaxep import GPClassifier
    from relaxep.multiclass import MultinomialProbit, RobustMax

    if method == DEFAULTS:
        return GPClassifier(random_state=0)
    if method == JOINT_EP:
        return GPClassifier(multi_class="joint", random_state=0)
    # the flipped-label runs: their own likelihoods and kernel, tol 1e-3 as in the committed report
    kw: dict[str, Any] = {"random_state": 0, "tol": 1e-3, "kernel": ConstantKernel(1.0) * RBF(1.0)}
    if method.startswith("joint robust max"):
        kw["likelihood"] = RobustMax(float(method.split("eps=")[1]))
    elif method == JOINT:
        kw["likelihood"] = MultinomialProbit()
    else:
        raise ValueError(f"method: unknown {method!r}")
    if kernel_of is not None:
        kw["kernel"] = ConstantKernel(kernel_of["amplitude"]) * RBF(kernel_of["length_scale"])
        kw["optimizer"] = None
    return GPClassifier(**kw)


def _kernels_text(kernels: list[Any]) -> str:
    text = "; ".join(str(k) for k in kernels[:3])
    return text + (f"; ... ({len(kernels)} kernels)" if len(kernels) > 3 else "")


def _fitted(model: Any, method: str, n_train: int) -> dict[str, Any]:
    """What the fitted estimator says it learned: its kernel(s), the rows its search used, its EP run."""
    if method in (SKLEARN, SKLEARN_WIDE):
        estimators = getattr(model.base_estimator_, "estimators_", [model.base_estimator_])
        return {"kernel": _kernels_text([e.kernel_ for e in estimators])}
    from sklearn.gaussian_process.kernels import CompoundKernel

    estimators = getattr(model, "estimators_", None)
    if estimators is not None:  # one-vs-rest: a kernel per class
        kernels = [e.kernel_ for e in estimators]
    elif isinstance(model.kernel_, CompoundKernel):  # joint, a kernel per class
        kernels = list(model.kernel_.kernels)
    else:
        kernels = [model.kernel_]
    row: dict[str, Any] = {"kernel": _kernels_text(kernels)}
    subset = model.get_params().get("optimizer_subset")
    row["optimizer_subset"] = repr(subset)  # (the parameter as set: what it means is the estimator's to say)
    # the rows the hyperparameter search used, only where the fitted estimator records them
    for name in ("n_search_rows_", "search_rows_"):
        fitted_rows = getattr(model, name, getattr(getattr(model, "model_", None), name, None))
        if fitted_rows is not None:
            row["search_rows"] = int(np.size(fitted_rows)) if np.ndim(fitted_rows) else int(fitted_rows)
            break
    if estimators is not None:  # one-vs-rest: every binary model's status, and the link's noise
        statuses = sorted({getattr(getattr(e, "result_", None), "status", "?") for e in estimators})
        row.update(status="/".join(statuses), link_noise=float(model.model_.link_noise_))
    result = getattr(model, "result_", None)
    if result is not None:
        row.update(status=result.status, sweeps=int(result.n_sweeps), log_evidence=float(result.log_evidence))
    if method == JOINT:  # (the robust max runs at this kernel)
        row.update(amplitude=float(model.kernel_.k1.constant_value), length_scale=float(model.kernel_.k2.length_scale))
    return row


def _fit_predict(model: Any, Xtr: np.ndarray, ytr: np.ndarray, Xte: np.ndarray) -> tuple[np.ndarray, float, float, int]:
    """Fit and predict, timed; returns ``(probabilities, fit_s, predict_s, warnings issued)`` (convergence and
    other user warnings; deprecations not counted)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        model.fit(Xtr, ytr)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        proba = model.predict_proba(Xte)
        predict_s = time.perf_counter() - start
    quiet = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ImportWarning, ResourceWarning)
    return proba, fit_s, predict_s, sum(not issubclass(w.category, quiet) for w in caught)


def _fit_cell(
    spec: dict[str, Any], method: str, kernel_of: dict[str, Any] | None = None, unpinned: bool = False
) -> dict[str, Any]:
    """Fit one method on one data set on one BLAS thread; ``kernel_of``: a fixed kernel (amplitude, length-scale),
    no learning; ``unpinned``: also fit a fresh copy with no thread limit (``fit_s_unpinned``, ``predict_s_unpinned``
    and the BLAS threads it had)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    Xtr, Xte, ytr, yte, extra = _data(spec)
    row: dict[str, Any] = dict(spec, method=method, n_train=int(ytr.size), n_test=int(yte.size), **extra)
    with threadpool_limits(1):
        model = _model(method, Xtr.shape[1], kernel_of)
        proba, fit_s, predict_s, n_warnings = _fit_predict(model, Xtr, ytr, Xte)
    error, nll = _scores(proba, np.searchsorted(model.classes_, yte))
    row.update(error=error, nll=nll, fit_s=fit_s, predict_s=predict_s, warnings=n_warnings)
    row.update(_fitted(model, method, int(ytr.size)))
    if unpinned:
        again = _model(method, Xtr.shape[1], kernel_of)
        proba_free, fit_free, predict_free, _ = _fit_predict(again, Xtr, ytr, Xte)
        threads = max(
            (int(t.get("num_threads", 1)) for t in threadpool_info() if t.get("user_api") == "blas"), default=1
        )
        row.update(
            fit_s_unpinned=fit_free,
            predict_s_unpinned=predict_free,
            blas_threads_unpinned=threads,
            max_proba_change_unpinned=float(np.max(np.abs(proba_free - proba))),
        )
    return row


def _specs(quick: bool) -> list[dict[str, Any]]:
    digits = {"data": "digits", "n_train": 400} if quick else {"data": "digits"}
    folds = range(1) if quick else range(5)
    waveform = (
        {"data": "waveform", "n_train": 300, "n_test": 300}
        if quick
        else {"data": "waveform", "n_train": 2000, "n_test": 1000}
    )
    return [digits] + [{"data": name, "fold": f} for name in SMALL_SETS for f in folds] + [waveform]


def _cells(specs: list[dict[str, Any]], unpinned: bool = True) -> list[Cell]:
    """Every method on every spec; ``unpinned``: the defaults on digits also fitted with no thread limit."""
    cells = []
    for s in specs:
        methods = [DEFAULTS, JOINT_EP, SKLEARN] + ([SKLEARN_WIDE] if s["data"] == "waveform" else [])
        for m in methods:
            key = f"{s['data']}-{s.get('fold', '')}-{s.get('n_train', '')}-{m}"
            free = unpinned and m == DEFAULTS and s["data"] == "digits"
            cells.append(Cell(key, _fit_cell, {"spec": s, "method": m, "unpinned": free}))
    return cells


def run(context: StudyContext) -> Tables:
    """Digits, iris, glass, crabs, penguins, waveform: relaxep's defaults and one-vs-rest, scikit-learn's OvR;
    flipped-label digits: joint EP, robust max, scikit-learn's OvR."""
    quick = context.quick
    rows = context.run_cells(_cells(_specs(quick), unpinned=not quick), desc="multiclass: data sets")
    n_noisy = 100 if quick else 200
    rates = (0.0, 0.2) if quick else (0.0, 0.1, 0.2)
    noisy_specs = [{"data": "digits-flipped", "n_train": n_noisy, "rate": r} for r in rates]
    first = context.run_cells(
        [
            Cell(f"flip-{s['rate']}-{m}", _fit_cell, {"spec": s, "method": m})
            for s in noisy_specs
            for m in (JOINT, SKLEARN)
        ],
        desc="multiclass: flipped labels",
    )
    joint_rows = {r["rate"]: r for r in first if r["method"] == JOINT}
    robust = context.run_cells(
        [
            Cell(
                f"flip-{s['rate']}-rm{eps}",
                _fit_cell,
                {
                    "spec": s,
                    "method": f"joint robust max eps={eps}",
                    "kernel_of": {
                        "amplitude": joint_rows[s["rate"]]["amplitude"],
                        "length_scale": joint_rows[s["rate"]]["length_scale"],
                    },
                },
            )
            for s in noisy_specs
            for eps in (0.05, 0.2)
        ],
        desc="multiclass: robust max",
    )
    return {"multiclass": rows, "multiclass_noise": first + robust, "multiclass_summary": summarize(rows)}


def report(tables: Tables, out: Path) -> str:
    """``multiclass.csv``, ``multiclass_noise.csv``, ``multiclass_summary.csv`` and the section."""
    rows, noise, summary = tables["multiclass"], tables["multiclass_noise"], tables["multiclass_summary"]
    write_csv(rows, out / "multiclass.csv")
    write_csv(noise, out / "multiclass_noise.csv")
    write_csv(summary, out / "multiclass_summary.csv")
    return report_text(rows, noise, summary)


STUDY = Study(
    "multiclass", run, report, paper=False, title="multi-class GP classification by EP, one-vs-rest and joint"
)
