"""The results store on SQLite and on a real PostgreSQL server: one schema,
versioned migrations, idempotent ingest, one transaction per ingest."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from matrixgen.cli.main import main
from matrixgen.engine.errors import ExitCode, ResultsStoreError, UsageError
from matrixgen.evidence import store as store_module
from matrixgen.evidence.flaky import FlakyPolicy, flaky_rows
from matrixgen.evidence.store import counts, open_store, schema_version, store_url
from tests.evidence_fixtures import RECIPES, TARGET, TODAY, Run, ingest_runs

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


@pytest.fixture(autouse=True)
def _today(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", TODAY)


def _counts(db: str) -> dict[str, int]:
    store = open_store(db, write=False)
    try:
        return dict(counts(store))
    finally:
        store.close()


def test_ingest_stores_one_row_per_run_job_and_test(db: str, evidence_runs: list[Run]) -> None:
    ingest_runs(db, evidence_runs[:3])
    # 3 runs; 3 jobs (two unit-test buckets and one functional case); 8 tests,
    # each stored in each run.
    assert _counts(db) == {"runs": 3, "jobs": 3, "run_jobs": 9, "cases": 8, "results": 24}


def test_reingesting_a_run_changes_nothing(
    db: str,
    evidence_runs: list[Run],
    capsys: pytest.CaptureFixture[str],
) -> None:
    ingest_runs(db, evidence_runs[:2])
    before = _counts(db)
    run = evidence_runs[0]

    def ingest(commit: str) -> int:
        return main(
            ["results", "ingest", str(run.report), "--run-id", run.run_id, "--commit", commit,
             "--target", TARGET, "--tag", "latest", "--db", db, "--recipes", str(RECIPES)]
        )  # fmt: skip

    assert ingest(run.commit) == 0
    assert _counts(db) == before
    assert "3 job(s) of this run were stored before" in capsys.readouterr().err
    # The same run id naming another commit is a mistake, not a new run.
    assert ingest("f" * 40) == ExitCode.USAGE
    assert "one run id names one commit" in capsys.readouterr().err
    assert _counts(db) == before


def test_one_transaction_per_ingest(
    db: str,
    evidence_runs: list[Run],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ingest_runs(db, evidence_runs[:1])
    before = _counts(db)
    calls = []
    real = store_module._case_ids

    def fail_on_second_job(conn, job_id, node_ids):
        calls.append(job_id)
        if len(calls) == 2:
            raise RuntimeError("the runner died mid-ingest")
        return real(conn, job_id, node_ids)

    monkeypatch.setattr(store_module, "_case_ids", fail_on_second_job)
    with pytest.raises(RuntimeError):
        ingest_runs(db, evidence_runs[1:2])
    assert _counts(db) == before  # not the run, not the first job: nothing


def test_a_bad_file_stores_nothing(tmp_path: Path, evidence_runs: list[Run]) -> None:
    bad = tmp_path / "reports"
    bad.mkdir()
    (bad / "a.xml").write_bytes(evidence_runs[0].report.read_bytes())
    (bad / "b.xml").write_text("<testsuites><testsuite>\n<testcase name='x'>\n")
    db = str(tmp_path / "results.db")
    code = main(
        [
            "results",
            "ingest",
            str(bad),
            "--run-id",
            "1",
            "--target",
            TARGET,
            "--tag",
            "latest",
            "--db",
            db,
            "--recipes",
            str(RECIPES),
        ]
    )
    assert code == ExitCode.RESULTS_FILE
    assert not Path(db).exists()


def test_the_schema_is_versioned_and_a_newer_one_refused(db: str, evidence_runs: list[Run]) -> None:
    import sqlalchemy as sa

    ingest_runs(db, evidence_runs[:1])
    store = open_store(db, write=True)
    try:
        assert schema_version(store) == store_module.SCHEMA_VERSION == 2
        with store.engine.begin() as conn:
            conn.execute(store_module.schema_table.update().values(version=99))
    finally:
        store.close()
    store = open_store(db, write=False)
    try:
        with pytest.raises(ResultsStoreError, match="schema version 99, written by a newer"):
            schema_version(store)
    finally:
        store.close()
    del sa


def test_both_dialects_give_the_same_verdicts(
    evidence_runs: list[Run],
    evidence_store: Path,
    tmp_path: Path,
) -> None:
    """The PostgreSQL store and the SQLite one, fed the same runs, judge alike."""
    url = _postgres_url()
    import sqlalchemy as sa

    schema = f"t_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(store_url(url)[0])
    with engine.begin() as conn:
        conn.execute(sa.schema.CreateSchema(schema))
    try:
        pg = f"{url}?options=-csearch_path%3D{schema}"
        ingest_runs(pg, evidence_runs)
        verdicts = []
        for where in (pg, str(evidence_store)):
            store = open_store(where, write=False)
            try:
                verdicts.append([r.to_dict() for r in flaky_rows(store, FlakyPolicy()).rows])
            finally:
                store.close()
        assert verdicts[0] == verdicts[1]
        assert {r["verdict"] for r in verdicts[0]} == {"broken", "flaky", "ok"}
    finally:
        with engine.begin() as conn:
            conn.execute(sa.schema.DropSchema(schema, cascade=True))
        engine.dispose()


def test_reading_a_store_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(ResultsStoreError, match="no results store at"):
        open_store(str(tmp_path / "none.db"), write=False)


def test_the_store_is_never_written_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.db").write_bytes(b"")
    (tmp_path / "results.db").symlink_to(tmp_path / "elsewhere.db")
    with pytest.raises(ResultsStoreError, match="symbolic link"):
        open_store(str(tmp_path / "results.db"), write=True)


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("postgresql://ci:pw@db:5432/results", "postgresql+psycopg://ci:pw@db:5432/results"),
        ("postgres://db/results", "postgresql+psycopg://db/results"),
        ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
        ("results.db", "sqlite:///results.db"),
    ],
)
def test_store_urls(given: str, url: str) -> None:
    assert store_url(given) == (url, True)


def test_an_unknown_url_scheme_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="expected a file path, sqlite:///PATH or postgresql"):
        store_url("mysql://root:secret@db/x")


def test_the_default_store_is_at_the_top_of_the_checkout(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MATRIXGEN_RESULTS_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    assert store_url(None) == (f"sqlite:///{tmp_path / '.matrixgen' / 'results.db'}", False)
    top = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(top / "tests")
    assert store_url(None)[0] == f"sqlite:///{top / '.matrixgen' / 'results.db'}"


def test_sqlalchemy_is_not_imported_by_other_commands() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from matrixgen.cli.main import main; main(['list', '--recipes', "
        f"{str(RECIPES)!r}]); print('sqlalchemy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_measured_run_durations_agree_on_both_dialects(
    db: str, evidence_runs: list[Run], tmp_path: Path
) -> None:
    # `stats --cost --db` prices jobs from this one aggregate query: the server
    # must add up what SQLite adds up, run by run.
    from matrixgen.evidence.store import run_durations

    reference = str(tmp_path / "reference.db")
    for path in (db, reference):
        ingest_runs(path, evidence_runs[:3])

    def durations(url: str) -> dict:
        store = open_store(url, write=False)
        try:
            return {k: sorted(round(s, 6) for s in v) for k, v in run_durations(store).items()}
        finally:
            store.close()

    found = durations(db)
    assert found == durations(reference)
    assert found and all(len(v) == 3 and min(v) >= 0 for v in found.values()), found
