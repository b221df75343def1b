"""Mutation check: does the suite notice a wrong formula in the site rules, the likelihoods and the sampler?

Run before a release (it takes tens of minutes on 2 cores)::

    python benchmarks/mutation.py --out benchmarks/results/mutation.md
    python benchmarks/mutation.py --rev aae0dd3 --only sites   # the suite as it was at a commit

Each *mutant* is the code at ``--rev`` with one small change in one function of a target module:
an arithmetic operator swapped (``+``/``-``, ``*``/``/``, ``**`` to ``*``), a comparison moved
(``<``/``<=``, ``>``/``>=``, ``==``/``!=``), a sign dropped (``-x`` to ``x``), a number changed
(``0``/``1``, ``c`` to ``2c``), ``and``/``or`` swapped, ``True``/``False`` swapped.  The target
module's test files (``TARGETS``) run against it, stopping at the first failure; a mutant that
makes a test fail (or the import fail, or the run time out) is *killed*, one that passes them
all *survives*.  A survivor is a test gap, or an *equivalent* mutant (a change that cannot alter
any result, e.g. ``x >= 0`` against ``x > 0`` where ``x = 0`` gives the same value either way):
the report lists each survivor with its line so that a developer can decide which.

Docstrings, annotations, ``__all__``, messages of raised errors and the ``raise`` lines
themselves are not mutated (input checks are the fuzz script's, ``benchmarks/fuzz_inputs.py``).
The work is done in a scratch copy made by ``git archive``: the checkout is never touched.
Each mutant runs only the tests that execute its function (found once, by a line tracer over the
target modules during one run of the test files), tests that killed earlier mutants first; a
mutant in a function that no test executes survives without a run.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: target modules (relative to src/relaxep), the functions to mutate (``None``: all) and the test files that guard them
TARGETS: dict[str, tuple[str, tuple[str, ...] | None, tuple[str, ...]]] = {
    "sites": (
        "sites/base.py sites/power.py sites/relaxed.py sites/paper.py",
        None,
        (
            "tests/test_sites.py",
            "tests/test_rep_ground_truth.py",
            "tests/test_rep_line_search.py",
            "tests/test_inference.py",
        ),
    ),
    "binary": (
        "likelihoods/binary.py likelihoods/binary_base.py _numerics.py",
        (  # the log_z, log_lik and tilted code (constructors' checks are the fuzz script's)
            "_step_cumulants",
            "_folded_log_z",
            "_folded_cumulants",
            "_folded_log_lik",
            "_folded_dlog_lik",
            "_folded_expected_log_lik",
            "_transition_width",
            "_folded_log_z_in",
            "_folded_log_lik_in",
            "_folded_dlog_lik_in",
            "_folded_expected_log_lik_in",
            "_step",
            "predict",
            "predict_log_odds",
            "_log_z",
            "_log_lik",
            "_expected_log_lik",
            "_tilted_cumulants",
            "normal_cdf_ratio",
            "log1mexp",
        ),
        ("tests/test_likelihoods.py", "tests/test_log_lik.py", "tests/test_decision_function.py", "tests/test_mcmc.py"),
    ),
    "mcmc": (
        "mcmc.py",
        None,
        ("tests/test_mcmc.py", "tests/test_robust_ground_truth.py"),
    ),
}

_SWAP_BINOP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.Pow: ast.Mult}
_SWAP_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to src/relaxep
    line: int
    function: str
    what: str
    index: int  # which mutable site of the module (in walk order)
    span: tuple[int, int]  # the enclosing function's first and last lines


def _skipped(node: ast.AST) -> bool:
    return isinstance(node, ast.Raise | ast.Assert | ast.AnnAssign | ast.Import | ast.ImportFrom | ast.JoinedStr)


def _sites(tree: ast.Module, functions: tuple[str, ...] | None) -> Iterator[tuple[ast.AST, str, str, tuple]]:
    """``(node, function, description, function's line span)`` for every mutable node of the selected functions."""
    spans: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, func: str | None) -> Iterator[tuple[ast.AST, str, str, tuple]]:
        for item in _visit(node, func):
            yield (*item, spans[item[1]])

    def _visit(node: ast.AST, func: str | None) -> Iterator[tuple[ast.AST, str, str]]:
        if _skipped(node):
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            func = node.name
            spans[func] = (node.lineno, node.end_lineno or node.lineno)
            node.returns = None  # (annotations are not code)
            for arg in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                arg.annotation = None
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # the docstring
            for child in body:
                yield from _visit(child, func)
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None:
                    yield from _visit(default, func)
            return
        selected = func is not None and (functions is None or func in functions)
        if selected:
            if isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BINOP:
                yield node, func, f"{type(node.op).__name__} -> {_SWAP_BINOP[type(node.op)].__name__}"
            elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _SWAP_CMP:
                yield node, func, f"{type(node.ops[0]).__name__} -> {_SWAP_CMP[type(node.ops[0])].__name__}"
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
                yield node, func, "-x -> x"
            elif isinstance(node, ast.BoolOp):
                yield node, func, f"{type(node.op).__name__} -> {'Or' if isinstance(node.op, ast.And) else 'And'}"
            elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
                yield node, func, f"{node.value!r} -> {_new_number(node.value)!r}"
            elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
                yield node, func, f"{node.value} -> {not node.value}"
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "isinstance":
                continue
            yield from _visit(child, func)

    for statement in tree.body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in statement.targets
        ):
            continue
        if isinstance(statement, ast.ClassDef):
            for item in statement.body:
                yield from visit(item, None)
        else:
            yield from visit(statement, None)


def _new_number(value: float) -> float:
    if value == 0:
        return 1
    if value == 1:
        return 0
    return value * 2


def _mutate(node: ast.AST) -> None:
    if isinstance(node, ast.BinOp):
        node.op = _SWAP_BINOP[type(node.op)]()
    elif isinstance(node, ast.Compare):
        node.ops = [_SWAP_CMP[type(node.ops[0])]()]
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        node.value = not node.value
    elif isinstance(node, ast.Constant):
        node.value = _new_number(node.value)


def mutants(src: Path, name: str) -> list[tuple[Mutant, str]]:
    """Every mutant of target ``name``: its description and the mutated module's source."""
    paths, functions, _ = TARGETS[name]
    out = []
    for rel in paths.split():
        tree = ast.parse((src / rel).read_text())
        count = sum(1 for _ in _sites(copy.deepcopy(tree), functions))
        for index in range(count):
            mutated = copy.deepcopy(tree)
            node, func, what, span = list(_sites(mutated, functions))[index]
            if isinstance(node, ast.UnaryOp):  # -x -> x: replace the node in its parent
                _replace(mutated, node, node.operand)
            else:
                _mutate(node)
            mutant = Mutant(rel, getattr(node, "lineno", 0), func, what, index, span)
            out.append((mutant, ast.unparse(mutated)))
    return out


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return


def _scratch(rev: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix="relaxep-mutation-"))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root


def run_tests(root: Path, tests: list[str], timeout: float) -> tuple[str, str | None]:
    """``("killed" | "survived" | "timeout", the first failing test)`` for the tree at ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root / "src"), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env["MPLBACKEND"] = "Agg"
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-W", "ignore", "-rf", *tests]
    try:
        result = subprocess.run(command, cwd=root, env=env, capture_output=True, timeout=timeout, text=True)
    except subprocess.TimeoutExpired:
        return "timeout", None
    if result.returncode == 0:
        return "survived", None
    failed = [line.split()[1] for line in result.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return "killed", (failed[0] if failed else None)


_TRACER = """
import json, os, sys

TARGETS = tuple(os.environ["MUTATION_TRACE_FILES"].split(os.pathsep))
HITS = {}
CURRENT = [None]


def _local(frame, event, arg):
    if event == "line" and CURRENT[0] is not None:
        HITS.setdefault(frame.f_code.co_filename + ":" + str(frame.f_lineno), set()).add(CURRENT[0])
    return _local


def _global(frame, event, arg):
    return _local if frame.f_code.co_filename.endswith(TARGETS) else None


def pytest_runtest_protocol(item, nextitem):
    CURRENT[0] = item.nodeid
    sys.settrace(_global)


def pytest_runtest_logfinish(nodeid, location):
    sys.settrace(None)
    CURRENT[0] = None


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["MUTATION_TRACE_OUT"], "w") as out:
        json.dump({k: sorted(v) for k, v in HITS.items()}, out)
"""


def coverage_map(root: Path, files: list[str], paths: list[str]) -> dict[tuple[str, int], set[str]]:
    """``(path, line) -> tests executing it`` for the target modules ``paths``, from one traced run of ``files``."""
    (root / "_mutation_trace.py").write_text(_TRACER)
    out = root / "_mutation_trace.json"
    env = dict(os.environ, PYTHONPATH=f"{root / 'src'}{os.pathsep}{root}", MPLBACKEND="Agg")
    env.update(MUTATION_TRACE_FILES=os.pathsep.join(f"relaxep/{p}" for p in paths), MUTATION_TRACE_OUT=str(out))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_mutation_trace", "-W", "ignore"]
    subprocess.run([*command, *files], cwd=root, env=env, capture_output=True, check=False)
    hits: dict[tuple[str, int], set[str]] = {}
    for key, tests in json.loads(out.read_text()).items():
        filename, line = key.rsplit(":", 1)
        rel = filename.split("src/relaxep/", 1)[-1]
        hits[(rel, int(line))] = set(tests)
    return hits


def covering(mutant: Mutant, hits: dict[tuple[str, int], set[str]]) -> list[str]:
    """The tests that execute ``mutant``'s function (any line of it)."""
    tests: set[str] = set()
    for line in range(mutant.span[0], mutant.span[1] + 1):
        tests |= hits.get((mutant.path, line), set())
    return sorted(tests)


class _Killers:
    """The tests that killed earlier mutants, tried first (most mutants die on a test that killed another)."""

    def __init__(self) -> None:
        self.tests: list[str] = []

    def add(self, test: str | None) -> None:
        if test and "::" in test and test not in self.tests:
            self.tests.insert(0, test)


def _outcome(root: Path, tests: list[str], killers: _Killers, timeout: float) -> str:
    """Run ``tests`` (those that executed the function), the ones that killed earlier mutants first."""
    if not tests:
        return "survived"  # no test executes this function
    first = [t for t in killers.tests if t in tests][:40]
    if first:
        outcome, test = run_tests(root, first, timeout)
        if outcome != "survived":
            killers.add(test)
            return outcome
    outcome, test = (
        run_tests(root, [t for t in tests if t not in first], timeout)
        if len(first) < len(tests)
        else ("survived", None)
    )
    killers.add(test)
    return outcome


def check(rev: str, names: list[str], jobs: int, timeout: float) -> tuple[list[tuple[Mutant, str]], dict]:
    base = _scratch(rev)
    rows: list[tuple[Mutant, str]] = []
    started = time.time()
    for name in names:
        files = [t for t in TARGETS[name][2] if (base / t).exists()]
        if run_tests(base, files, 10 * timeout)[0] != "survived":
            raise SystemExit(f"the unmutated suite fails for {name} at {rev}: fix it first")
        todo = mutants(base / "src" / "relaxep", name)
        hits = coverage_map(base, files, TARGETS[name][0].split())
        killers = _Killers()
        print(f"[mutation] {name}: {len(todo)} mutants, tests {files}", flush=True)

        def one(item: tuple[Mutant, str], hits: dict = hits, killers: _Killers = killers) -> tuple[Mutant, str]:
            mutant, source = item
            root = _scratch(rev)
            (root / "src" / "relaxep" / mutant.path).write_text(source)
            outcome = _outcome(root, covering(mutant, hits), killers, timeout)
            subprocess.run(["rm", "-rf", str(root)], check=False)
            return mutant, outcome

        with ThreadPoolExecutor(jobs) as pool:
            for k, (mutant, outcome) in enumerate(pool.map(one, todo), 1):
                rows.append((mutant, outcome))
                if outcome == "survived":
                    print(
                        f"[mutation] survived: {mutant.path}:{mutant.line} {mutant.function}: {mutant.what}", flush=True
                    )
                if k % 20 == 0:
                    print(f"[mutation] {name}: {k}/{len(todo)} ({time.time() - started:.0f} s)", flush=True)
    subprocess.run(["rm", "-rf", str(base)], check=False)
    counts: dict[str, int] = {}
    for _, outcome in rows:
        counts[outcome] = counts.get(outcome, 0) + 1
    return rows, counts


def report(rev: str, rows: list[tuple[Mutant, str]], counts: dict, seconds: float) -> str:
    lines = [
        f"# Mutation check at `{rev}` (`python benchmarks/mutation.py`)",
        "",
        f"{len(rows)} mutants in {seconds:.0f} s: " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + ".",
        "",
        "| target | mutants | killed | survived | timeout |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, (paths, _, _) in TARGETS.items():
        mine = [o for m, o in rows if m.path in paths.split()]
        if mine:
            outcomes = " | ".join(str(mine.count(o)) for o in ("killed", "survived", "timeout"))
            lines.append(f"| {name} | {len(mine)} | {outcomes} |")
    lines += ["", "## Survivors", "", "| where | function | change |", "|---|---|---|"]
    lines += [f"| {m.path}:{m.line} | {m.function} | {m.what} |" for m, o in rows if o == "survived"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="HEAD", help="the commit whose code and tests are checked")
    parser.add_argument("--only", nargs="*", choices=sorted(TARGETS), default=sorted(TARGETS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a mutant's tests may take")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    started = time.time()
    rows, counts = check(args.rev, args.only, args.jobs, args.timeout)
    text = report(args.rev, rows, counts, time.time() - started)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
