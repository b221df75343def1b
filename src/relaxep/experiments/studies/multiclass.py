"""Multi-class: joint nested EP against scikit-learn's one-vs-rest Laplace GPC, and label noise.

Data sets (all bundled with scikit-learn, no download):

* **digits** (``load_digits``): 1797 8x8 images, pixels / 16, split 1297 train / 500 test
  (stratified, ``random_state=0``), 10 classes.  Joint nested EP learns its shared kernel on a
  stratified subset of 300 training points (``optimizer_subset``), then runs on all 1297.
* **iris** (``load_iris``): 150 points, 5-fold stratified cross-validation (shuffled, seed 0),
  features standardised on each training fold.
* **digits with flipped labels**: a stratified subset of the digits training split (200 points;
  quick: 100), a fraction of its labels replaced by one of the other 9 classes uniformly at
  random, the clean 500-point test split.  Joint multinomial probit (hyperparameters by its
  evidence) against the robust max at that kernel (dense EP, ``eps`` in {0.05, 0.2}), and
  scikit-learn's one-vs-rest.

Every model uses the kernel ``ConstantKernel(1.0) * RBF(1.0)`` with hyperparameters learned by
maximising its (EP or Laplace) evidence; error, the test negative log predictive probability
(NLL, nats per point), fit and predict wall times on one BLAS thread are recorded.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from relaxep.experiments.runner import Cell
from relaxep.experiments.study import Study, StudyContext, Tables
from relaxep.experiments.tables import md_table, write_csv

__all__ = ["STUDY", "report", "run"]

#: the issue's targets
TARGETS = {"digits_error": 0.015, "digits_nll": 0.06, "digits_fit_s": 60.0, "error_slack": 0.005, "time_ratio": 2.0}


def _digits_split() -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    return tuple(train_test_split(X / 16.0, y, test_size=500, stratify=y, random_state=0))


def _iris_fold(fold: int) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_iris
    from sklearn.model_selection import StratifiedKFold
    from sklearn.preprocessing import StandardScaler

    X, y = load_iris(return_X_y=True)
    tr, te = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))[fold]
    scaler = StandardScaler().fit(X[tr])
    return scaler.transform(X[tr]), scaler.transform(X[te]), y[tr], y[te]


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
    if spec["data"] == "digits":
        Xtr, Xte, ytr, yte = _digits_split()
        n = spec.get("n_train")
        if n:
            from sklearn.model_selection import train_test_split

            Xtr, _, ytr, _ = train_test_split(Xtr, ytr, train_size=n, stratify=ytr, random_state=0)
        return Xtr, Xte, ytr, yte, {}
    if spec["data"] == "iris":
        return (*_iris_fold(spec["fold"]), {})
    Xtr, Xte, ytr, yte, flipped = _flipped_digits(spec["n_train"], spec["rate"])
    return Xtr, Xte, ytr, yte, {"flipped": flipped}


def _scores(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    p = np.clip(p, 1e-300, 1.0)
    return float(np.mean(p.argmax(1) != y)), float(-np.mean(np.log(p[np.arange(y.size), y])))


def _fit_cell(spec: dict[str, Any], method: str, kernel_of: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fit one method on one data set; ``kernel_of``: a fixed kernel (amplitude, length-scale), no learning."""
    from threadpoolctl import threadpool_limits

    Xtr, Xte, ytr, yte, extra = _data(spec)
    row: dict[str, Any] = dict(spec, method=method, n_train=int(ytr.size), n_test=int(yte.size), **extra)
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        if method == "sklearn OvR Laplace":
            from sklearn.gaussian_process import GaussianProcessClassifier
            from sklearn.gaussian_process.kernels import RBF, ConstantKernel

            model = GaussianProcessClassifier(kernel=ConstantKernel(1.0) * RBF(1.0), random_state=0).fit(Xtr, ytr)
            fit_s = time.perf_counter() - start
            kernels = [model.kernel_] if ytr.max() < 2 else list(model.base_estimator_.estimators_)
            kernels = [getattr(k, "kernel_", k) for k in kernels]
            row.update(kernel="; ".join(str(k) for k in kernels[:2]) + ("; ..." if len(kernels) > 2 else ""))
        else:
            from sklearn.gaussian_process.kernels import RBF, ConstantKernel

            from relaxep import GPClassifier
            from relaxep.multiclass import MultinomialProbit, RobustMax

            # tol 1e-3: the tolerance the committed report was measured with (the estimator's
            # default is 1e-4 since; the joint model's evidence search runs to 1e-2 either way)
            kw: dict[str, Any] = {"random_state": 0, "tol": 1e-3}
            if method.startswith("joint robust max"):
                kw["likelihood"] = RobustMax(float(method.split("eps=")[1]))
            else:
                kw["likelihood"] = MultinomialProbit()
            if kernel_of is not None:
                kw["kernel"] = ConstantKernel(kernel_of["amplitude"]) * RBF(kernel_of["length_scale"])
                kw["optimizer"] = None
            elif spec["data"] == "digits" and ytr.size > 400:
                kw["optimizer_subset"] = 300
            model = GPClassifier(**kw).fit(Xtr, ytr)
            fit_s = time.perf_counter() - start
            res = model.result_
            row.update(
                kernel=str(model.kernel_),
                amplitude=float(model.kernel_.k1.constant_value),
                length_scale=float(model.kernel_.k2.length_scale),
                status=res.status,
                sweeps=int(res.n_sweeps),
                log_evidence=float(res.log_evidence),
            )
        start = time.perf_counter()
        proba = model.predict_proba(Xte)
        predict_s = time.perf_counter() - start
    error, nll = _scores(proba, np.searchsorted(model.classes_, yte))
    row.update(error=error, nll=nll, fit_s=fit_s, predict_s=predict_s)
    return row


JOINT = "joint MNP (nested EP)"
SKLEARN = "sklearn OvR Laplace"


def run(context: StudyContext) -> Tables:
    """Digits, iris (5 folds), flipped-label digits: joint EP, robust max, scikit-learn's OvR."""
    quick = context.quick
    digits = {"data": "digits", "n_train": 400} if quick else {"data": "digits"}
    specs = [digits] + [{"data": "iris", "fold": f} for f in range(5)]
    cells = [
        Cell(f"{s['data']}-{s.get('fold', '')}-{m}", _fit_cell, {"spec": s, "method": m})
        for s in specs
        for m in (JOINT, SKLEARN)
    ]
    rows = context.run_cells(cells, desc="multiclass: digits and iris")
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
    return {"multiclass": rows, "multiclass_noise": first + robust, "multiclass_summary": _summary(rows)}


def _summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for data in dict.fromkeys(r["data"] for r in rows):
        for method in (JOINT, SKLEARN):
            sel = [r for r in rows if r["data"] == data and r["method"] == method]
            out.append(
                {
                    "data": data,
                    "method": method,
                    "runs": len(sel),
                    "n_train": sel[0]["n_train"],
                    "error_%": 100 * float(np.mean([r["error"] for r in sel])),
                    "nll": float(np.mean([r["nll"] for r in sel])),
                    "fit_s": float(np.mean([r["fit_s"] for r in sel])),
                    "predict_s": float(np.mean([r["predict_s"] for r in sel])),
                }
            )
    return out


def _target_lines(summary: list[dict[str, Any]]) -> list[str]:
    by = {(r["data"], r["method"]): r for r in summary}
    lines = []
    d = by.get(("digits", JOINT))
    if d is not None:
        ok = lambda b: "met" if b else "MISSED"  # noqa: E731
        lines.append(
            f"- digits ({d['n_train']} train / 500 test): error {d['error_%']:.2f}% (target <= 1.5%: "
            f"{ok(d['error_%'] <= 100 * TARGETS['digits_error'])}), NLL {d['nll']:.4f} (target <= 0.06: "
            f"{ok(d['nll'] <= TARGETS['digits_nll'])}), fit with learned hyperparameters {d['fit_s']:.1f} s "
            f"(target <= 60 s: {ok(d['fit_s'] <= TARGETS['digits_fit_s'])})"
        )
    for data in dict.fromkeys(r["data"] for r in summary):
        j, s = by[(data, JOINT)], by[(data, SKLEARN)]
        lines.append(
            f"- {data}: NLL {j['nll']:.4f} vs scikit-learn's {s['nll']:.4f} "
            f"({'below' if j['nll'] < s['nll'] else 'NOT below'}); error {j['error_%']:.2f}% vs {s['error_%']:.2f}% "
            f"({'within 0.5 pt or better' if j['error_%'] <= s['error_%'] + 0.5 else 'NOT within 0.5 pt'}); "
            f"fit time {j['fit_s']:.2f} s vs {s['fit_s']:.2f} s = {j['fit_s'] / s['fit_s']:.2f}x "
            f"({'within' if j['fit_s'] <= TARGETS['time_ratio'] * s['fit_s'] else 'NOT within'} 2x)"
        )
    return lines


def report(tables: Tables, out: Path) -> str:
    """``multiclass.csv``, ``multiclass_noise.csv``, ``multiclass_summary.csv`` and the section."""
    rows, noise, summary = tables["multiclass"], tables["multiclass_noise"], tables["multiclass_summary"]
    write_csv(rows, out / "multiclass.csv")
    write_csv(noise, out / "multiclass_noise.csv")
    write_csv(summary, out / "multiclass_summary.csv")
    noise_table = [
        {
            "flip rate": r["rate"],
            "flipped": r["flipped"],
            "method": r["method"],
            "error_%": 100 * r["error"],
            "nll": r["nll"],
            "fit_s": r["fit_s"],
            "status": r.get("status", ""),
            "log_evidence": r.get("log_evidence", float("nan")),
        }
        for r in sorted(noise, key=lambda r: (r["rate"], r["method"]))
    ]
    per_run = [
        {k: r.get(k, "") for k in ("data", "fold", "method", "error", "nll", "fit_s", "predict_s", "kernel", "sweeps")}
        for r in rows
    ]
    return (
        "## Multi-class: joint nested EP against scikit-learn's one-vs-rest\n\n"
        "Kernel `ConstantKernel(1.0) * RBF(1.0)` for every model, hyperparameters by each model's evidence "
        "(joint EP: one kernel shared by the classes, EP evidence and its gradient, L-BFGS; on digits learned on "
        "a stratified subset of 300 training points, then inference on all). Joint EP predicts by the inner EP's "
        "normaliser of the multinomial probit under the C-dimensional predictive Gaussian. NLL: mean negative log "
        "predictive probability of the test label (nats). Times: wall seconds, one BLAS thread, on a shared "
        "2-core machine (other jobs beside it): compare within a row set.\n\n"
        "### Summary\n\n"
        + md_table(summary, list(summary[0]))
        + "\n\n### Targets\n\n"
        + "\n".join(_target_lines(summary))
        + "\n\n### Flipped labels (digits subset, clean test set)\n\n"
        "The robust max runs at the multinomial probit's learned kernel (its dense EP on the n(C-1) label "
        "differences is O(n^3 C^3) a sweep, too slow to learn hyperparameters here).\n\n"
        + md_table(noise_table, list(noise_table[0]))
        + "\n\n### Every run\n\n"
        + md_table(per_run, list(per_run[0]))
        + "\n"
    )


STUDY = Study("multiclass", run, report, paper=False)
