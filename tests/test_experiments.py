"""The reproduction machinery: exact toy posterior, cached cell grid, the studies' report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from oracles import exact_linear_step_posterior
from problems import wavy_problem
from relaxep import EP, Auto, DoubleLoopEP, FractionalEP, NoisyStep, PowerEP, RelaxedEP, infer
from relaxep.datasets import make_problem, make_toy, problem_grid, synthetic_data, synthetic_problems
from relaxep.experiments import PAPER_STUDIES, STUDIES
from relaxep.experiments.claims import CLAIMS, evaluate_claims
from relaxep.experiments.methods import build, error_rate, method
from relaxep.experiments.reproduce import reproduce
from relaxep.experiments.runner import Cell, run_cells
from relaxep.experiments.studies.robustness import ROBUST_METHODS, BestEvidence, run_robustness, summarize_robustness
from relaxep.experiments.studies.toy import exact_linear_posterior, weight_posterior
from relaxep.experiments.study import StudyContext
from relaxep.experiments.tables import paired_p_value, summarize
from test_claims import expected_verdicts


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
    # six pairs, all differing in the same direction: the exact two-sided signed-rank p is 2 / 2^6
    assert out["B"]["p_vs_A"] == pytest.approx(0.03125, rel=1e-12)
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


def test_run_cells_on_a_dask_cluster_matches_a_serial_run(dask_client):
    cells = [Cell(f"sq-{x}", _square, {"x": x}) for x in range(4)]
    rows = run_cells(cells, None, scheduler=dask_client.scheduler.address, progress=False)  # its own client
    assert [r["y"] for r in rows] == [0, 1, 4, 9]


def test_a_corrupted_cache_file_is_named_discarded_and_recomputed(tmp_path):
    cells = [Cell(f"sq-{x}", _square, {"x": x}) for x in range(3)]
    run_cells(cells, tmp_path, progress=False)
    files = {f.name.split("-")[1]: f for f in tmp_path.glob("*.json")}
    files["0"].write_text('{"x": 0, "y"')  # truncated
    files["1"].write_text("[1, 2]")  # not a row
    files["2"].write_text("{}")  # empty
    with pytest.warns(UserWarning, match="corrupted cache file") as record:
        rows = run_cells(cells, tmp_path, progress=False)
    assert [r["y"] for r in rows] == [0, 1, 4]
    assert len(record) == 3 and all(str(f) in " ".join(str(w.message) for w in record) for f in files.values())
    assert all(json.loads(f.read_text())["x"] == int(k) for k, f in files.items())


def test_method_specifications_rebuild_the_same_objects():
    objects = [
        EP(damping=0.5),
        PowerEP(0.7),
        FractionalEP(0.5, damping=0.5),
        RelaxedEP(0.1, penalty="scale_free"),
        DoubleLoopEP(accelerate=False),
        Auto(stall_window=5),
        BestEvidence((RelaxedEP(1.0), RelaxedEP(10.0))),
    ]
    for obj in objects:
        spec = method("label", obj)
        assert json.loads(json.dumps(spec)) == spec  # JSON all the way down: a cell key
        assert build(spec) == obj


def test_error_rate_counts_wrong_decisions_at_one_half():
    proba = np.array([0.9, 0.5, 0.49, 0.1])
    assert error_rate(proba, np.array([1.0, 1.0, -1.0, 1.0])) == 0.25
    assert error_rate(proba, np.array([-1.0, -1.0, 1.0, -1.0])) == 0.75


def test_the_registry_lists_every_study_and_all_means_the_papers():
    assert list(STUDIES) == [
        "toy",
        "synthetic",
        "uci",
        "robustness",
        "multiclass",
        "regression",
        "ordinal",
        "counts",
        "censored",
        "heteroscedastic",
        "modelcomparison",
        "survival",
        "constrained_bo",
        "likelihoods",
        "markov",
        "monotone",
    ]
    assert PAPER_STUDIES == ("toy", "synthetic", "uci")
    with pytest.raises(ValueError, match="unknown studies"):
        reproduce(("toys",), "unused")


def test_each_study_run_alone_names_its_report():
    """A study run alone titles its report with its own title (the paper's three share the paper's): no two other
    studies share one, and only the robustness study keeps the generic title of several studies run together."""
    titles = {name: study.title for name, study in STUDIES.items()}
    assert {titles[name] for name in PAPER_STUDIES} == {"reproduction of Qi & Guo, relaxed EP"}
    others = [title for name, title in titles.items() if name not in PAPER_STUDIES]
    assert len(set(others)) == len(others)
    assert [n for n, t in titles.items() if t == "robustness of EP and its remedies"] == ["robustness"]


def test_a_claim_with_missing_rows_fails_loudly_instead_of_passing():
    rows = [dict(method="EP", eps=0.2, mean_w=[1.0, 0.0], exact_mean_w=[1.0, 0.0])]  # REP rows missing
    with pytest.raises(KeyError):
        evaluate_claims(toy=rows)


def _cached_tables(out, studies):
    """The studies' tables read back from a quick run's cache (no cell is recomputed)."""
    tables = {}
    for name in studies:
        context = StudyContext(cache_dir=str(out / "cache" / f"{name}-quick"), quick=True, progress=False)
        tables.update(STUDIES[name].run(context))
        assert context.stats.get("computed", 0) == 0, context.stats
    return tables


@pytest.fixture(scope="module")
def toy_report(tmp_path_factory):
    """`relaxep reproduce toy --quick`, killed midway, then run to the end."""
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
    report = reproduce(("toy",), out, quick=True, progress=False)
    return out, report, before


def test_a_killed_run_resumes_without_recomputing_finished_cells(toy_report):
    out, _, before = toy_report
    assert 8 <= len(before)
    after = {f.name: f for f in (out / "cache" / "toy-quick").glob("*.json")}
    assert len(after) > len(before)  # the rerun finished the grid
    for name, (mtime, data) in before.items():
        assert after[name].stat().st_mtime_ns == mtime and after[name].read_bytes() == data
    assert not list((out / "cache" / "toy-quick").glob(".*"))
    computed = len(after) - len(before)
    assert f"({computed} cells computed, {len(before)} read from the cache" in (out / "report.md").read_text()


def test_toy_claims_have_verdicts_and_big_c_rep_is_ep(toy_report):
    import csv

    out, report, _ = toy_report
    claims = {c["id"]: c for c in json.loads((out / "claims.json").read_text())}
    # every verdict is the claim's rule (test_claims.py) applied to the run's own rows
    assert {k: c["verdict"] for k, c in claims.items()} == expected_verdicts(**_cached_tables(out, ("toy",)))
    for cid in ("T1", "T2", "T3", "T4", "T5"):
        assert f"| {cid} | {claims[cid]['claim']} | {claims[cid]['verdict']} |" in report.read_text()
    assert claims["T3"]["verdict"] == "holds"  # REP with c >= 100 equals EP exactly
    assert claims["S1"]["verdict"] == claims["U1"]["verdict"] == "not run"
    toy = list(csv.DictReader(open(out / "toy.csv")))
    ep = next(r for r in toy if r["method"] == "EP" and r["eps"] == "0.2")
    big_c = next(r for r in toy if r["method"] == "REP c=1e+03" and r["eps"] == "0.2")
    assert ep["status"] == "converged" and float(ep["mse_mean"]) < 1e-2
    assert big_c["mse_mean"] == ep["mse_mean"] and big_c["mse_cov"] == ep["mse_cov"]


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    """Every paper study, ``--quick`` (about 80 s on 2 cores)."""
    out = tmp_path_factory.mktemp("reproduce-all")
    report = reproduce(PAPER_STUDIES, out, quick=True, n_jobs=2, progress=False)  # the packaged UCI data
    return out, report


@pytest.mark.slow
def test_quick_report_states_every_claim_with_a_verdict(quick_report):
    out, report = quick_report
    text = report.read_text()
    claims = json.loads((out / "claims.json").read_text())
    assert [c["id"] for c in claims] == [c[0] for c in CLAIMS]
    for c in claims:
        assert f"| {c['id']} | {c['claim']} | {c['verdict']} |" in text
    assert {c["id"]: c["verdict"] for c in claims} == expected_verdicts(**_cached_tables(out, PAPER_STUDIES))
    for name in ("toy.csv", "synthetic.csv", "synthetic_summary.csv", "uci.csv", "uci_summary.csv", "claims.csv"):
        assert (out / name).stat().st_size > 0
    figures = {p.name for p in (out / "figures").glob("*.png")}
    assert {"toy_boundaries.png", "toy_errors.png", "synthetic_R.png", "uci_errors.png", "spam_errors.png"} <= figures
    assert sum(p.stat().st_size for p in (out / "figures").glob("*.png")) < 2_000_000


@pytest.mark.slow
def test_quick_tables_hold_what_the_protocol_says(quick_report):
    """Every method on every split; test errors recomputed from the CSV's own split sizes."""
    import csv

    out, _ = quick_report
    uci = list(csv.DictReader(open(out / "uci.csv")))
    cells = {(r["dataset"], r["rate"], r["split"], r["method"]) for r in uci}
    assert len(cells) == len(uci) == 5 * 2 * 6
    n_test = {"heart": 189, "pima": 213, "diabetes": 300, "haberman": 123, "spambase": 4325}
    for r in uci:
        wrong = float(r["test_error"]) * n_test[r["dataset"]]
        assert abs(wrong - round(wrong)) < 1e-6  # a count of wrong decisions over the test split
        assert r["status"] in ("converged", "max_sweeps", "diverged", "stuck")


@pytest.mark.slow  # a study with MCMC (12 s): with the slow studies
def test_hardness_suite_rows_and_auto_targets():
    """Two small problems of the quick suite (one with MCMC ground truth): every method gives
    a row, the converged ones agree with MCMC, auto converges, and the summary's targets are
    computed from those rows."""
    specs = problem_grid(8, max_n=200)
    # the small problem of smallest amplitude: its MCMC mixes in the quick setting (seeded)
    small = min((s for s in specs if s["n"] <= 100), key=lambda s: s["amplitude"])["problem"]
    rows = run_robustness(StudyContext(quick=True, progress=False), problems=[small])
    assert [r["method"] for r in rows] == [m["label"] for m in ROBUST_METHODS]
    assert all(not r["nan"] for r in rows)
    assert all("mean_rmse" in r and r["mcmc_rhat"] < 1.1 for r in rows)
    # every converged run's posterior mean within 0.1 MCMC sd of the sampler's (RMS over the training
    # latents; measured: EP and auto 0.037, PEP 0.052, FEP 0.061, the MCMC's own error included)
    assert all(r["mean_rmse"] < 0.1 * r["scale"] for r in rows if r["converged"])
    auto = rows[-1]
    assert auto["converged"]
    table, targets = summarize_robustness(rows)
    assert len(table) == len(ROBUST_METHODS) and {r["set"] for r in table} == {"suite"}
    assert targets["auto_converged"] == targets["auto_runs"] == 1
    assert targets["auto_runs_synthetic"] == 0


def test_synthetic_protocol_problems_are_the_papers_data():
    specs = synthetic_problems(2)
    assert len(specs) == 8 and len({s["problem"] for s in specs}) == 8
    spec = specs[-1]
    K, y, K_star, _, _, lik = make_problem(spec, n_test=100)
    _, y_ref, _, _ = synthetic_data(spec["repeat"], spec["flip"], 2)
    np.testing.assert_array_equal(y, y_ref)
    assert K.shape == (400, 400) and K_star.shape == (200, 400) and lik.eps == spec["flip"]
    np.testing.assert_allclose(np.diag(K), 1.0 + 1e-6)


def test_best_evidence_keeps_the_converged_run_of_highest_evidence():
    K, y = wavy_problem(40, 2)
    grid = (0.1, 1.0, 100.0)
    # (30 sweeps: c = 1 and 100 converge in 7, c = 0.1 in none of 100, which took 2/3 of the test's time)
    chosen = infer(K, y, NoisyStep(0.1), BestEvidence(tuple(RelaxedEP(c) for c in grid)), max_sweeps=30)
    runs = [infer(K, y, NoisyStep(0.1), RelaxedEP(c), max_sweeps=30) for c in grid]
    ok = [r for r in runs if r.converged]
    assert ok and chosen.converged and len(ok) < len(runs)  # (a run that did not converge is passed over)
    assert chosen.log_evidence == max(r.log_evidence for r in ok)
    assert [a.method.rule for a in chosen.attempts] == [RelaxedEP(c) for c in grid]


def test_a_rep_run_that_stopped_stuck_counts_against_never_diverges():
    from relaxep.experiments.claims import _claim_never_diverges

    verdict, measured = _claim_never_diverges(toy=[{"method": "REP c=0.1", "status": "stuck"}])
    assert verdict == "does not hold" and "1 stopped otherwise" in measured
    verdict, _ = _claim_never_diverges(toy=[{"method": "REP c=0.1", "status": "converged"}])
    assert verdict == "holds"


@pytest.mark.slow  # a study end to end (11 s): with the slow studies
def test_the_censored_study_reports_tobit_beside_the_naive_fits(tmp_path):
    """``relaxep reproduce censored`` (quick): the table, the Tobit fit's latent far closer to f than a GPR on the
    reported values, and EP within 0.2 posterior sd of the sampler."""
    from relaxep.experiments.studies import censored

    context = StudyContext(cache_dir=str(tmp_path / "cache"), quick=True, progress=False)
    tables = censored.STUDY.run(context)
    section = censored.STUDY.report(tables, tmp_path)
    assert "Tobit(lower=0), EP" in section and (tmp_path / "censored_draws.csv").exists()
    for draw in tables["draws"]:
        assert draw["Tobit(lower=0), EP"] < 0.5 * draw["scikit-learn GPR, reported values"]
    sampler = tables["sampler"][0]
    assert sampler["sampler_converged"] and sampler["mean_gap_sd"] <= 0.2
    lpd = tables["nh4"][0]["lpd"]  # (the real series: the censored model scores above substituting the limit)
    assert lpd["Tobit, per-row limits"] > lpd["GPR, limit substituted"] and "Ammonium" in section
