"""Real test results for the evidence tests: the fixture project under
tests/evidence_project run through pytest (with --junitxml and
pytest-rerunfailures) 24 times at 8 commits, once per session, and a SQLite
store with every run ingested."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from matrixgen.evidence.store import open_store, store_url

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
    from matrixgen.evidence.store import RunInfo, ingest
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


POSTGRES_ENV = "MATRIXGEN_TEST_POSTGRES_URL"


def _postgres_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        reason = f"no PostgreSQL server (.ci/run starts one and sets {POSTGRES_ENV})"
        if os.environ.get("MATRIXGEN_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"MATRIXGEN_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty store: a SQLite file, or a schema of its own on the server."""
    if request.param == "sqlite":
        yield str(tmp_path / "results.db")
        return
    import sqlalchemy as sa

    base = _postgres_url()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(store_url(base)[0])
    with engine.begin() as conn:
        conn.execute(sa.schema.CreateSchema(schema))
    try:
        sep = "&" if "?" in base else "?"
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as conn:
            conn.execute(sa.schema.DropSchema(schema, cascade=True))
        engine.dispose()
