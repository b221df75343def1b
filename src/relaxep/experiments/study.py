"""What a study is to the reproduction machinery: a name, a run, a report section.

A study runs cached cells (:func:`~relaxep.experiments.runner.run_cells`) and returns named
tables (lists of rows); its report writes those tables as CSV and its figures into the output
folder and returns its Markdown section.  :data:`relaxep.experiments.STUDIES` lists them; a new
study is one module in :mod:`relaxep.experiments.studies` and one line there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relaxep.experiments.runner import Cell, run_cells

__all__ = ["Study", "StudyContext", "Tables", "run_cv_then_fit"]

Tables = dict[str, list[dict[str, Any]]]


@dataclass
class StudyContext:
    """Where and how a study runs its cells."""

    cache_dir: str | None = None
    quick: bool = False
    n_jobs: int = 1
    scheduler: str | None = None
    data_home: str | None = None
    stats: dict[str, int] = field(default_factory=dict)
    progress: bool = True

    def run_cells(self, cells: Iterable[Cell], desc: str) -> list[dict[str, Any]]:
        """:func:`~relaxep.experiments.runner.run_cells` with this context's cache, workers and counters."""
        return run_cells(
            cells,
            self.cache_dir,
            n_jobs=self.n_jobs,
            scheduler=self.scheduler,
            desc=desc,
            stats=self.stats,
            progress=self.progress,
        )


@dataclass(frozen=True)
class Study:
    """A study: ``run(context) -> tables`` and ``report(tables, out) -> Markdown section``.

    ``paper``: one of the paper's studies (run by ``relaxep reproduce all``; its tables feed
    the claims table).  ``title``: its report's title when it runs alone.
    """

    name: str
    run: Callable[[StudyContext], Tables]
    report: Callable[[Tables, Path], str]
    paper: bool = True
    title: str = "robustness of EP and its remedies"


def _slug(problem: dict[str, Any]) -> str:
    return "-".join(f"{key}{value}" for key, value in problem.items() if not isinstance(value, bool))


def run_cv_then_fit(
    context: StudyContext,
    label: str,
    problems: list[dict[str, Any]],
    cv_of: Callable[[dict[str, Any]], dict[str, Any]],
    cv_cell: Callable[..., dict[str, Any]],
    fit_cell: Callable[..., dict[str, Any]],
    methods: list[dict[str, Any]],
    max_sweeps: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Kernel width by cross-validation, then every method on every problem at that width.

    ``cv_of(problem)`` gives the keyword arguments of the CV cell whose width a problem uses
    (problems may share one); ``fit_cell(**problem, length_scale=..., spec=..., max_sweeps=...)``
    fits one method.  Returns ``(fit rows, CV rows)``, the CV rows in first-use order.
    """
    cv_problems = list({_slug(cv_of(p)): cv_of(p) for p in problems}.values())
    cv_rows = context.run_cells(
        [Cell(f"cv-{_slug(p)}", cv_cell, p) for p in cv_problems], desc=f"{label}: kernel width by CV"
    )
    width = {_slug(p): row["length_scale"] for p, row in zip(cv_problems, cv_rows, strict=True)}
    cells = [
        Cell(
            f"fit-{_slug(p)}-{spec['label']}",
            fit_cell,
            dict(p, length_scale=width[_slug(cv_of(p))], spec=spec, max_sweeps=max_sweeps),
        )
        for p in problems
        for spec in methods
    ]
    return context.run_cells(cells, desc=f"{label}: fits"), cv_rows
