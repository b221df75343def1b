"""The reproduction machinery: exact toy posterior, cached cell grid, the studies' report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from oracles import exact_linear_step_posterior
from relaxep import EP, NoisyStep, infer
from relaxep.datasets import make_toy
from relaxep.experiments._runner import Cell, run_cells
from relaxep.experiments.report import CLAIMS, paired_p_value, summarize
from relaxep.experiments.reproduce import reproduce
from relaxep.experiments.toy import exact_linear_posterior, weight_posterior

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.mark.parametrize("eps", [0.1, 0.2])
def test_exact_toy_posterior_agrees_with_importance_sampling(eps):
    """1e6 prior draws weighted by the likelihood: mean and covariance of w to 1e-2."""
    X, y, _ = make_toy()
    mean, cov, log_z = exact_linear_posterior(X, y, eps)
    rng = np.random.default_rng(1)
    w = rng.standard_normal((1_000_000, 2))
    weight = np.prod(np.where((w @ X.T) * y > 0, 1 - eps, eps), axis=1)
    np.testing.assert_allclose(np.log(weight.mean()), log_z, atol=1e-2)
    weight /= weight.sum()
    is_mean = weight @ w
    is_cov = (weight[:, None] * (w - is_mean)).T @ (w - is_mean)
    np.testing.assert_allclose(mean, is_mean, atol=1e-2)
    np.testing.assert_allclose(cov, is_cov, atol=1e-2)


def test_exact_toy_posterior_equals_the_independent_polar_oracle():
    X, y, _ = make_toy()
    for eps in (0.05, 0.25):
        for got, want in zip(exact_linear_posterior(X, y, eps), exact_linear_step_posterior(X, y, eps), strict=True):
            np.testing.assert_allclose(got, want, atol=1e-12)


def test_weight_posterior_maps_back_to_the_latent_posterior():
    """f = X w: the w-posterior implied by the sites gives the latent mean and covariance."""
    X, y, _ = make_toy()
    res = infer(X @ X.T, y, NoisyStep(0.2), EP(), tol=1e-9, max_sweeps=200)
    mean_w, cov_w = weight_posterior(res, X)
    np.testing.assert_allclose(X @ mean_w, res.mean, atol=1e-10)
    np.testing.assert_allclose(X @ cov_w @ X.T, res.cov, atol=1e-10)


def test_paired_p_value():
    a = np.linspace(0.1, 0.2, 20)
    assert paired_p_value(a, a) == 1.0
    assert paired_p_value(a, a + 0.01) < 1e-4  # every pair differs in the same direction
    rows = [dict(method=m, split=s, test_error=e, sweeps=3, converged=True, status="converged", time_s=0.1)
            for s in range(6) for m, e in (("A", 0.1 + 0.01 * s), ("B", 0.2 + 0.01 * s))]  # fmt: skip
    out = {r["method"]: r for r in summarize(rows, ("method",), "split", reference="A")}
    assert out["B"]["error_mean"] == pytest.approx(0.225)
    assert out["B"]["p_vs_A"] == pytest.approx(paired_p_value([r for r in range(6)], [r + 10 for r in range(6)]))
    assert out["A"]["p_vs_A"] == 1.0


def _square(x: float) -> dict:
    return {"x": x, "y": x * x, "pid": os.getpid()}


def test_run_cells_caches_each_cell_and_skips_it_on_rerun(tmp_path):
    cells = [Cell(f"sq-{x}", _square, {"x": x}) for x in range(5)]
    rows = run_cells(cells, tmp_path, progress=False)
    assert [r["y"] for r in rows] == [0, 1, 4, 9, 16]
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 5
    stamp = {f: f.stat().st_mtime_ns for f in files}
    more = [*cells, Cell("sq-7", _square, {"x": 7})]
    again = run_cells(more, tmp_path, n_jobs=2, progress=False)
    assert [r["y"] for r in again] == [0, 1, 4, 9, 16, 49]
    assert all(f.stat().st_mtime_ns == t for f, t in stamp.items())
    assert again[-1]["pid"] != os.getpid()  # the new cell ran in a worker process
    with pytest.raises(ValueError, match="same key"):
        run_cells([cells[0], cells[0]], None, progress=False)


def test_run_cells_on_a_dask_cluster_matches_a_serial_run():
    distributed = pytest.importorskip("distributed")
    cells = [Cell(f"sq-{x}", _square, {"x": x}) for x in range(4)]
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cl:
        rows = run_cells(cells, None, scheduler=cl.scheduler_address, progress=False)
    assert [r["y"] for r in rows] == [0, 1, 4, 9]


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    """`relaxep reproduce toy --quick`, killed midway, then every study run to the end."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"the UCI study needs {SHARED_DATA}")
    out = tmp_path_factory.mktemp("reproduce")
    cache = out / "cache" / "toy-quick"
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "relaxep.cli", "reproduce", "toy", "--quick", "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(cache.glob("*.json"))) < 8:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {f.name: (f.stat().st_mtime_ns, f.read_bytes()) for f in cache.glob("*.json") if f.name[0] != "."}
    report = reproduce(("toy", "synthetic", "uci"), out, quick=True, n_jobs=2, data_home=str(SHARED_DATA))
    return out, report, before


def test_a_killed_run_resumes_without_recomputing_finished_cells(quick_report):
    out, _, before = quick_report
    assert 8 <= len(before)
    after = {f.name: f for f in (out / "cache" / "toy-quick").glob("*.json")}
    assert len(after) > len(before)  # the rerun finished the grid
    for name, (mtime, data) in before.items():
        assert after[name].stat().st_mtime_ns == mtime and after[name].read_bytes() == data
    assert not list((out / "cache" / "toy-quick").glob(".tmp-*"))
    computed = len(after) - len(before)
    assert f"({computed} cells computed, {len(before)} read from the cache" in (out / "report.md").read_text()


def test_quick_report_states_every_claim_with_a_verdict(quick_report):
    out, report, _ = quick_report
    text = report.read_text()
    claims = json.loads((out / "claims.json").read_text())
    assert [c["id"] for c in claims] == [c[0] for c in CLAIMS]
    for c in claims:
        assert f"| {c['id']} | {c['claim']} | {c['verdict']} |" in text
        assert c["verdict"] in ("holds", "partly", "does not hold"), c
    for name in ("toy.csv", "synthetic.csv", "synthetic_summary.csv", "uci.csv", "uci_summary.csv", "claims.csv"):
        assert (out / name).stat().st_size > 0
    figures = {p.name for p in (out / "figures").glob("*.png")}
    assert {"toy_boundaries.png", "toy_errors.png", "synthetic_R.png", "uci_errors.png", "spam_errors.png"} <= figures
    assert sum(p.stat().st_size for p in (out / "figures").glob("*.png")) < 2_000_000


def test_quick_tables_hold_what_the_protocol_says(quick_report):
    """Each study's rows: every method on every split; toy errors are against the exact posterior."""
    import csv

    out, _, _ = quick_report
    toy = list(csv.DictReader(open(out / "toy.csv")))
    ep = next(r for r in toy if r["method"] == "EP" and r["eps"] == "0.2")
    big_c = next(r for r in toy if r["method"] == "REP c=1e+03" and r["eps"] == "0.2")
    assert ep["status"] == "converged" and float(ep["mse_mean"]) < 1e-2
    assert big_c["mse_mean"] == ep["mse_mean"] and big_c["mse_cov"] == ep["mse_cov"]  # REP -> EP for big c
    uci = list(csv.DictReader(open(out / "uci.csv")))
    cells = {(r["dataset"], r["rate"], r["split"], r["method"]) for r in uci}
    assert len(cells) == len(uci) == 5 * 2 * 6
    for r in uci:
        assert 0.0 <= float(r["test_error"]) <= 1.0
        assert r["status"] in ("converged", "max_sweeps", "diverged")
