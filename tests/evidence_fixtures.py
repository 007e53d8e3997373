"""Real test results for the evidence tests: the fixture project under
tests/evidence_project run through pytest (with --junitxml and
pytest-rerunfailures) 24 times at 8 commits, once per session, and a SQLite
store with every run ingested."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
MAKE_RUNS = HERE / "evidence_project" / "make_runs.py"
RECIPES = HERE.parent / "recipes"
JUNIT = HERE / "junit"
TARGET = "gitlab-mr-h100-dev"
# The runs finish between 2026-11-02 and 2026-11-21; judged from this day,
# `--since 30` holds them all, and every shipped quarantine entry is in force.
TODAY = "2026-12-01"


@dataclass(frozen=True)
class Run:
    run_id: str
    commit: str
    finished_at: str
    report: Path


@pytest.fixture(scope="session")
def evidence_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Run]:
    out = tmp_path_factory.mktemp("evidence-runs")
    done = subprocess.run(
        [sys.executable, str(MAKE_RUNS), str(out)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    runs = []
    for line in (out / "runs.tsv").read_text().splitlines():
        run_id, commit, finished_at, report = line.split("\t")
        runs.append(Run(run_id, commit, finished_at, Path(report)))
    return runs


def ingest_runs(db: str, runs: list[Run]) -> None:
    """Every run into the store, as `matrixgen results ingest` stores one."""
    import datetime as dt

    from matrixgen.evidence.junit import read_report
    from matrixgen.evidence.mapping import map_reports
    from matrixgen.evidence.store import RunInfo, ingest, open_store
    from matrixgen.pipeline import generate

    generation = generate(RECIPES)
    store = open_store(db, write=True)
    try:
        for run in runs:
            groups = map_reports(generation, [read_report(run.report)], target=TARGET, tag="latest")
            at = dt.datetime.fromisoformat(run.finished_at.replace("Z", "+00:00"))
            ingest(store, RunInfo(run_id=run.run_id, commit=run.commit, finished_at=at), groups)
    finally:
        store.close()


@pytest.fixture(scope="session")
def evidence_store(evidence_runs: list[Run], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store holding every run: copy it before writing to it."""
    path = tmp_path_factory.mktemp("evidence-store") / "results.db"
    ingest_runs(str(path), evidence_runs)
    return path


@pytest.fixture
def store_copy(evidence_store: Path, tmp_path: Path) -> Path:
    path = tmp_path / "results.db"
    shutil.copyfile(evidence_store, path)
    return path


@pytest.fixture
def shipped_recipes(tmp_path: Path) -> Path:
    """A copy of the shipped recipe tree, to write quarantine entries into."""
    path = tmp_path / "recipes"
    shutil.copytree(RECIPES, path)
    return path
