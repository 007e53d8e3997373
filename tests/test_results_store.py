"""The results store on SQLite and on a real PostgreSQL server: one schema,
versioned migrations, idempotent ingest, one transaction per ingest."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matrixgen.cli.main import main
from matrixgen.model.errors import ExitCode, ResultsStoreError, UsageError
from matrixgen.results import ingest as ingest_module
from matrixgen.results import store as store_module
from matrixgen.results import tables as tables_module
from matrixgen.results.flaky import FlakyPolicy, flaky_rows
from matrixgen.results.queries import counts
from matrixgen.results.store import open_store, schema_version, store_url
from matrixgen.util.values import json_value
from tests.results_fixtures import (
    RECIPES,
    TARGET,
    TODAY,
    Run,
    _postgres_url,
    ingest_runs,
)
from tests.results_fixtures import db as db


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
    written = []
    real_bulk = ingest_module._bulk_insert

    def staged(conn, table, keys, rows):
        written.append(table.name)
        return real_bulk(conn, table, keys, rows)

    def fail_after_the_results(conn, at):
        raise RuntimeError("the runner died mid-ingest")

    monkeypatch.setattr(ingest_module, "_bulk_insert", staged)
    monkeypatch.setattr(ingest_module, "roll_up", fail_after_the_results)
    with pytest.raises(RuntimeError):
        ingest_runs(db, evidence_runs[1:2])
    assert "matrixgen_staged" in written  # the run and its records were written...
    assert _counts(db) == before  # ...and rolled back with the rest: nothing


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
        assert schema_version(store) == tables_module.SCHEMA_VERSION == 6
        with store.engine.begin() as conn:
            conn.execute(tables_module.schema_table.update().values(version=99))
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
    engine = sa.create_engine(store_url(url))
    with engine.begin() as conn:
        conn.execute(sa.schema.CreateSchema(schema))
    try:
        pg = f"{url}?options=-csearch_path%3D{schema}"
        ingest_runs(pg, evidence_runs)
        verdicts = []
        for where in (pg, str(evidence_store)):
            store = open_store(where, write=False)
            try:
                verdicts.append(json_value(flaky_rows(store, FlakyPolicy()).rows))
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
    assert store_url(given) == url


def test_an_unknown_url_scheme_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="expected a file path, sqlite:///PATH or postgresql"):
        store_url("mysql://root:secret@db/x")


def test_the_default_store_is_at_the_top_of_the_checkout(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MATRIXGEN_RESULTS_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    assert store_url(None) == f"sqlite:///{tmp_path / '.matrixgen' / 'results.db'}"
    top = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(top / "tests")
    assert store_url(None) == f"sqlite:///{top / '.matrixgen' / 'results.db'}"


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
    from matrixgen.results.queries import run_durations

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


def _sqlite_file(path: Path, *statements: str) -> Path:
    import sqlite3

    conn = sqlite3.connect(path)
    with conn:
        for statement in statements:
            conn.execute(statement)
    conn.close()
    return path


def test_a_reader_never_writes_a_sqlite_file(tmp_path: Path) -> None:
    """A reader opens the file read-only: a SQLite file that is not a store is
    refused as it is, never made into one."""
    path = _sqlite_file(tmp_path / "other.db", "CREATE TABLE notes (text TEXT)")
    before = path.read_bytes()
    store = open_store(str(path), write=False)
    try:
        with pytest.raises(ResultsStoreError, match="is not a matrixgen results store"):
            flaky_rows(store, FlakyPolicy())
    finally:
        store.close()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]  # no journal either
    # The connection itself is read-only (sqlite mode=ro), whatever a query asks.
    store = open_store(str(path), write=False)
    try:
        with store.engine.connect() as conn, pytest.raises(Exception, match="readonly"):
            conn.exec_driver_sql("CREATE TABLE forged (x)")
    finally:
        store.close()
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("statement", "shown"),
    [
        ("CREATE VIEW extra AS SELECT 1", "a view extra"),
        (
            "CREATE TRIGGER t AFTER INSERT ON runs BEGIN DELETE FROM results; END",
            "a trigger t",
        ),
    ],
)
def test_views_and_triggers_are_refused(
    tmp_path: Path, evidence_runs: list[Run], statement: str, shown: str
) -> None:
    path = tmp_path / "results.db"
    ingest_runs(str(path), evidence_runs[:1])
    _sqlite_file(path, statement)
    for write in (False, True):
        store = open_store(str(path), write=write)
        try:
            with pytest.raises(ResultsStoreError, match=f"holds {shown}, which a matrixgen"):
                flaky_rows(store, FlakyPolicy())
        finally:
            store.close()


def test_a_query_past_the_time_bound_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound holds whatever the file holds: with the schema check out of the
    way, a recursive view in place of a table is stopped at the deadline."""
    import time

    path = _sqlite_file(
        tmp_path / "results.db",
        "CREATE TABLE matrixgen_schema (version INTEGER NOT NULL)",
        f"INSERT INTO matrixgen_schema VALUES ({tables_module.SCHEMA_VERSION})",
        "CREATE VIEW runs AS WITH RECURSIVE r(id) AS (SELECT 1 UNION ALL SELECT id + 1 "
        "FROM r) SELECT id, '' AS run_id, NULL AS commit_sha, 0 AS finished_at, "
        "NULL AS ref, NULL AS source FROM r",
    )
    monkeypatch.setattr(store_module, "_check_sqlite_schema", lambda conn, store: None)
    monkeypatch.setenv(store_module.TIMEOUT_VARIABLE, "0.5")
    store = open_store(str(path), write=False)
    start = time.monotonic()
    try:
        with pytest.raises(ResultsStoreError, match=r"a query ran past 0\.5 seconds"):
            flaky_rows(store, FlakyPolicy())
    finally:
        store.close()
    assert time.monotonic() - start < 10


def test_each_transaction_gets_the_whole_time_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, evidence_runs: list[Run]
) -> None:
    """The bound is per transaction, not per store: a transaction begun after
    the first one's bound has passed gets it anew (SQLite's progress handler)."""
    import time

    import sqlalchemy as sa

    monkeypatch.setenv(store_module.TIMEOUT_VARIABLE, "1")  # the query takes about 0.05 s
    path = tmp_path / "results.db"
    ingest_runs(str(path), evidence_runs[:1])
    # Past the progress handler's steps, so that the handler looks at the clock.
    steps = sa.text(
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 200000) "
        "SELECT count(*) FROM r"
    )
    store = open_store(str(path), write=False)
    try:
        for pause in (1.1, 0):
            with store.transaction() as conn:
                assert conn.execute(steps).scalar() == 200000
            time.sleep(pause)
    finally:
        store.close()


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_a_bad_time_bound_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(store_module.TIMEOUT_VARIABLE, value)
    with pytest.raises(UsageError, match="expected seconds"):
        open_store(str(tmp_path / "results.db"), write=True)


def test_a_default_store_git_tracks_is_refused_by_the_commands_that_need_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, evidence_runs: list[Run]
) -> None:
    from tests.gitrepo import GitRepo

    monkeypatch.delenv("MATRIXGEN_RESULTS_DB", raising=False)
    repo = GitRepo(tmp_path / "repo")
    default = repo.top / ".matrixgen" / "results.db"
    ingest_runs(str(default), evidence_runs[:1])
    monkeypatch.chdir(repo.top)
    assert store_url(None) == f"sqlite:///{default}"  # untracked: the default store
    repo.git("add", "-f", ".matrixgen/results.db")
    for write in (False, True):
        with pytest.raises(ResultsStoreError, match="is tracked by git, so it is not read"):
            open_store(None, write=write)
    code = main(["flaky"])
    assert code == ExitCode.RESULTS_STORE


def _report(path: Path, stamp: str, *, failed: bool = False) -> Path:
    failure = '<failure message="boom"/>' if failed else ""
    path.write_text(
        f'<testsuites><testsuite name="pytest" timestamp="{stamp}" time="1.0">'
        '<testcase classname="tests.unit_tests.data.test_blend" name="test_mix" time="0.5">'
        f"{failure}</testcase></testsuite></testsuites>",
        encoding="utf-8",
    )
    return path


def _ingest(capsys: pytest.CaptureFixture[str], report: Path, db: Path, *extra: str):
    code = main(
        ["results", "ingest", str(report), "--run-id", report.stem, "--target", TARGET,
         "--tag", "latest", "--recipes", str(RECIPES), "--db", str(db), "--format", "json",
         *extra]
    )  # fmt: skip
    out, err = capsys.readouterr()
    return code, out, err


def test_a_report_dated_2099_is_stored_as_finished_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Else it would stay the latest run of its tests for good: a broken test
    that passed once in 2099 would be read as flaky."""
    import datetime as dt
    import sqlite3

    import orjson

    db = tmp_path / "results.db"
    before = int(dt.datetime.now(dt.UTC).timestamp())
    code, out, err = _ingest(capsys, _report(tmp_path / "forged.xml", "2099-01-01T00:00:00"), db)
    after = int(dt.datetime.now(dt.UTC).timestamp())
    assert code == 0, err
    orjson.loads(out)
    assert "forged.xml: its suites end at 2099-01-01T00:00:01+00:00, later than now" in err
    assert "the run is stored as finished now (clamped)" in err
    with sqlite3.connect(db) as conn:
        (stored,) = conn.execute("SELECT finished_at FROM runs").fetchone()
    conn.close()
    assert before <= stored <= after
    # A report of the past keeps its own time, and no note is printed.
    code, _, err = _ingest(capsys, _report(tmp_path / "past.xml", "2026-11-20T10:00:00"), db)
    assert code == 0 and "clamped" not in err


def test_finished_at_in_the_future_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report(tmp_path / "r.xml", "2026-11-20T10:00:00")
    code, _, err = _ingest(capsys, report, tmp_path / "d.db", "--finished-at", "2099-01-01T00:00Z")
    assert code == ExitCode.USAGE
    assert '--finished-at "2099-01-01T00:00Z" is later than now' in err and "refused" in err
    assert not (tmp_path / "d.db").exists()


def test_every_json_output_of_the_evidence_commands_is_strict_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shipped_recipes: Path
) -> None:
    """orjson refuses NaN and Infinity: it reads every output."""
    import orjson

    db = tmp_path / "results.db"
    for n in range(4):
        stamp = f"2026-11-2{n}T10:00:00"
        code, out, err = _ingest(capsys, _report(tmp_path / f"r{n}.xml", stamp, failed=n % 2), db)
        assert code == 0, err
        orjson.loads(out)
    commands = [
        ["flaky", "--db", str(db), "--min-runs", "1", "--format", "json"],
        ["quarantine", "propose", "--recipes", str(shipped_recipes), "--db", str(db),
         "--format", "json"],
        ["quarantine", "audit", "--recipes", str(shipped_recipes), "--db", str(db),
         "--format", "json"],
        ["stats", "--recipes", str(shipped_recipes), "--cost", "--db", str(db), "--format",
         "json"],
    ]  # fmt: skip
    for args in commands:
        code = main(args)
        out, err = capsys.readouterr()
        assert code == 0, (args, err)
        assert orjson.loads(out) is not None, args


def test_a_postgresql_reader_cannot_write_and_is_bounded_in_time(
    db: str, evidence_runs: list[Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On either store a reader's transaction cannot write, and a statement past
    $MATRIXGEN_STORE_TIMEOUT is stopped with a clear error (PostgreSQL:
    READ ONLY and statement_timeout, as SQLite's read-only file and progress handler)."""
    import sqlalchemy as sa

    ingest_runs(db, evidence_runs[:1])
    store = open_store(db, write=False)
    try:
        refused = pytest.raises(ResultsStoreError, match="results store")
        with refused, store.transaction() as conn:
            conn.execute(sa.text("DELETE FROM results"))
        assert _counts(db)["results"] > 0
    finally:
        store.close()
    if not db.startswith("postgresql"):
        return
    monkeypatch.setenv(store_module.TIMEOUT_VARIABLE, "0.5")
    store = open_store(db, write=False)
    try:
        stopped = pytest.raises(ResultsStoreError, match=r"a query ran past 0\.5 seconds")
        with stopped, store.transaction() as conn:
            conn.execute(sa.text("SELECT pg_sleep(5)"))
    finally:
        store.close()


def _version_1_store(db: str) -> None:
    """A store as the first schema wrote it, with one run in it."""
    import sqlalchemy as sa

    url = store_url(db)
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            tables_module.schema_table.create(conn)
            conn.execute(tables_module.schema_table.insert().values(version=1))
            tables_module.MIGRATIONS[0](conn)
            conn.execute(
                sa.text(
                    "INSERT INTO runs (run_id, commit_sha, finished_at, ingested_at) "
                    "VALUES ('7001', 'abc', 1790000000, 1790000000)"
                )
            )
    finally:
        engine.dispose()


def test_a_version_1_store_migrates_and_its_runs_have_no_ref(db: str) -> None:
    import sqlalchemy as sa

    from matrixgen.results.ingest import ingest
    from matrixgen.results.queries import read_runs
    from matrixgen.results.store import RunInfo

    _version_1_store(db)
    store = open_store(db, write=True)
    try:
        ingest(store, RunInfo(run_id="7002", commit="def", finished_at=None, ref="main"), [])
        assert schema_version(store) == tables_module.SCHEMA_VERSION == 6
        with store.transaction() as conn:
            rows = {r.run_id: (r.git_ref, r.source, r.commit) for r in read_runs(conn).values()}
            indexes = {i["name"] for i in sa.inspect(conn).get_indexes("runs")}
        # The old run kept its row, and knows no ref; the new one does.
        assert rows == {"7001": (None, None, "abc"), "7002": ("main", None, "def")}
        assert "ix_runs_ref_finished" in indexes
        with store.transaction() as conn:
            keys = sa.inspect(conn).get_foreign_keys("results")
        # Version 4: on PostgreSQL `results` checks no foreign key per row (SQLite
        # never enforced them, and keeps the declaration the store was made with).
        assert sorted(k["referred_table"] for k in keys) == (
            [] if store.dialect == "postgresql" else ["cases", "runs"]
        )
        # A run stored without a ref learns it from a later ingest; a different one is refused.
        ingest(store, RunInfo(run_id="7001", commit=None, finished_at=None, ref="main"), [])
        with pytest.raises(UsageError, match="stored with ref main, not dev"):
            ingest(store, RunInfo(run_id="7001", commit=None, finished_at=None, ref="dev"), [])
        with store.transaction() as conn:
            assert {r.run_id: r.git_ref for r in read_runs(conn).values()} == {
                "7001": "main",
                "7002": "main",
            }
    finally:
        store.close()


def test_a_version_4_store_moves_its_results_into_day_partitions(
    db: str, evidence_runs: list[Run], tmp_path: Path
) -> None:
    """The same rows, through schema 4 and migrations 5 and 6, read as one
    ingest under schema 6 stored them: every row kept (each failure's reason
    computed from its message as the ingest computes it), the flaky verdicts
    the same."""
    import sqlalchemy as sa

    fresh = str(tmp_path / "fresh.db")
    ingest_runs(fresh, evidence_runs)
    url = store_url(db)
    source, engine = sa.create_engine(store_url(fresh)), sa.create_engine(url)
    ordered = [tables_module.runs, tables_module.jobs, tables_module.run_jobs]
    ordered += [tables_module.cases, tables_module.results]
    try:
        with source.connect() as read, engine.begin() as conn:
            tables_module.schema_table.create(conn)
            conn.execute(tables_module.schema_table.insert().values(version=4))
            for migration in tables_module.MIGRATIONS[:4]:
                migration(conn)
            for table in ordered:
                # The columns schema 4 has (a fresh store's results have the reasons too).
                old = tables_module._results_1 if table is tables_module.results else table
                columns = [table.c[c.name] for c in old.columns]
                rows = [dict(r._mapping) for r in read.execute(sa.select(*columns))]
                conn.execute(table.insert(), rows)
    finally:
        source.dispose()
        engine.dispose()

    def read(location: str) -> tuple[list, list]:
        store = open_store(location, write=True)
        try:
            with store.transaction() as conn:
                order = tables_module.results.c.case_id, tables_module.results.c.run_ref
                rows = conn.execute(sa.select(tables_module.results).order_by(*order)).all()
                days = tables_module.partitions(conn)
            verdicts = json_value(flaky_rows(store, FlakyPolicy(since_days=None)).rows)
            assert schema_version(store) == 6
        finally:
            store.close()
        return [tuple(r) for r in rows], [verdicts, days]

    migrated, (verdicts, weeks) = read(db)
    expected, (expected_verdicts, _) = read(fresh)
    assert len(migrated) == len(expected) == 24 * 8
    assert migrated == expected and verdicts == expected_verdicts
    if "postgresql" in url:
        # One partition per week a run finished in (runs every 20 hours: 20 days).
        assert [(name, end - start) for name, start, end in weeks] == [
            ("results_20261102", 7 * 86_400),
            ("results_20261109", 7 * 86_400),
            ("results_20261116", 7 * 86_400),
        ]


def _kinds_run(location: str) -> None:
    """One more run into a store: a failure, an error, a muted error (the
    element it was is not stored), a failure without a message, a pass."""
    import datetime as dt

    from matrixgen.results.ingest import ingest
    from matrixgen.results.junit import Outcome, Testcase
    from matrixgen.results.store import JobKey, JobResults, RunInfo

    bucket = JobKey("gitlab", "mr", "dgx_h100", "dev", "unit-tests", "tests/k/", "", unit=True)
    kinds = [
        ("failed", Outcome.FAILED, None, "assert 3 == 4\nmore"),
        ("errored", Outcome.ERROR, None, "fixture 'db' not found at 0x7f3a2b"),
        ("muted", Outcome.MUTED, Outcome.ERROR, "TimeoutError: 30 s"),
        ("silent", Outcome.FAILED, None, ""),
        ("passed", Outcome.PASSED, None, ""),
    ]
    tests = tuple(
        Testcase(node_id=f"tests/k/test_k.py::test_{name}", classname="c", name=name, suite="",
                 outcome=outcome, muted_from=was, duration=1.0, message=message)
        for name, outcome, was, message in kinds
    )  # fmt: skip
    store = open_store(location, write=True)
    try:
        at = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
        ingest(store, RunInfo(run_id="k1", commit=None, finished_at=at, ref="main"),
               [JobResults(job=bucket, job_name="k", target="", testcases=tests)])  # fmt: skip
    finally:
        store.close()


@pytest.mark.parametrize("writer", [True, False], ids=["writer", "reader"])
def test_a_version_5_store_gets_each_failures_reason(
    db: str, evidence_runs: list[Run], tmp_path: Path, writer: bool
) -> None:
    """Schema 6 on a store schema 5 made: every failed result gets the reason
    an ingest gives it now, computed from its stored message (a muted one is a
    `failure`: the element it was is not stored), no other row changes, and
    the failed-results index holds the reasons. The first command to open it
    migrates it: an ingest, or on PostgreSQL a reader (under the writers'
    lock, its reads then read-only); a SQLite reader cannot write its file and
    says so."""
    import sqlalchemy as sa

    fresh = str(tmp_path / "fresh.db")
    ingest_runs(fresh, evidence_runs[-6:])
    _kinds_run(fresh)
    url = store_url(db)
    source, engine = sa.create_engine(store_url(fresh)), sa.create_engine(url)
    ordered = [tables_module.runs, tables_module.jobs, tables_module.run_jobs]
    ordered += [tables_module.cases, tables_module.results]
    old_results = [c.name for c in tables_module._results_5.columns]
    try:
        with source.connect() as read, engine.begin() as conn:
            tables_module.schema_table.create(conn)
            conn.execute(tables_module.schema_table.insert().values(version=5))
            for migration in tables_module.MIGRATIONS[:5]:
                migration(conn)
            for table in ordered:
                names = old_results if table is tables_module.results else list(table.c.keys())
                rows = [
                    dict(r._mapping) for r in read.execute(sa.select(*(table.c[n] for n in names)))
                ]
                if table is tables_module.results:
                    tables_module.ensure_partition(conn, min(r["finished_at"] for r in rows))
                    for at in {r["finished_at"] for r in rows}:
                        tables_module.ensure_partition(conn, at)
                conn.execute(table.insert(), rows)
    finally:
        source.dispose()
        engine.dispose()
    if not writer and "postgresql" not in url:
        store = open_store(db, write=False)
        try:
            with pytest.raises(ResultsStoreError, match="schema version 5; `matrixgen results"):
                schema_version(store)
        finally:
            store.close()
        return

    def read(location: str, write: bool = True) -> list[tuple]:
        store = open_store(location, write=write)
        try:
            with store.transaction() as conn:
                r = tables_module.results.c
                query = sa.select(r.case_id, r.run_ref, r.outcome, r.message, r.reason)
                rows = conn.execute(query.order_by(r.case_id, r.run_ref)).all()
                indexes = {
                    i["name"]: i["column_names"] for i in sa.inspect(conn).get_indexes("results")
                }
            assert schema_version(store) == 6
        finally:
            store.close()
        assert indexes["ix_results_failed_run"] == ["run_ref", "case_id", "reason"]
        return [tuple(row) for row in rows]

    migrated, expected = read(db, write=writer), read(fresh)
    assert len(migrated) == len(expected) == 6 * 8 + 5
    stored = {message: why for _, _, _, message, why in migrated if why}
    assert stored["fixture 'db' not found at 0x7f3a2b"] == (
        "error: fixture '<q>' not found at <addr>"
    )
    assert stored["TimeoutError: 30 s"] == "failure: TimeoutError: <n> s"  # muted: a failure
    assert stored[None] == "failure (no message)"
    assert stored["assert 3 == 4\nmore"] == "failure: assert <n> == <n>"
    # Every row as a fresh ingest has it, but the muted error's kind.
    differs = [(a, b) for a, b in zip(migrated, expected, strict=True) if a != b]
    assert [(a[2], a[4], b[4]) for a, b in differs] == [
        (4, "failure: TimeoutError: <n> s", "error: TimeoutError: <n> s")
    ]
    assert all((row[4] is None) == (row[2] in (0, 3)) for row in migrated)


def test_a_reader_refuses_a_version_1_sqlite_store_and_names_the_fix(tmp_path: Path) -> None:
    db = str(tmp_path / "results.db")
    _version_1_store(db)
    before = Path(db).read_bytes()
    store = open_store(db, write=False)
    try:
        with pytest.raises(ResultsStoreError, match="schema version 1; `matrixgen results ingest`"):
            schema_version(store)
    finally:
        store.close()
    assert Path(db).read_bytes() == before


def test_ingest_takes_ref_and_source_from_the_ci_variables(
    tmp_path: Path,
    evidence_runs: list[Run],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from matrixgen.results.queries import read_runs

    db = str(tmp_path / "results.db")
    for name in (
        "CI_COMMIT_REF_NAME",
        "CI_PIPELINE_SOURCE",
        "GITHUB_REF_NAME",
        "GITHUB_EVENT_NAME",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_REF_NAME", "feature")
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    base = ["results", "ingest", "--db", db, "--recipes", str(RECIPES), "--target", TARGET]
    base += ["--tag", "latest"]
    run = evidence_runs[0]
    assert main([*base, "--run-id", "1", str(run.report)]) == 0
    monkeypatch.setenv("CI_COMMIT_REF_NAME", "main")  # GitLab's come first
    monkeypatch.setenv("CI_PIPELINE_SOURCE", "schedule")
    assert main([*base, "--run-id", "2", str(run.report)]) == 0
    assert main([*base, "--run-id", "3", "--ref", "r1", "--source", "web", str(run.report)]) == 0
    assert main([*base, "--run-id", "4", "--ref", " ", str(run.report)]) == ExitCode.USAGE
    assert "--ref ' ': expected a name" in capsys.readouterr().err
    store = open_store(db, write=False)
    try:
        with store.transaction() as conn:
            found = {r.run_id: (r.git_ref, r.source) for r in read_runs(conn).values()}
    finally:
        store.close()
    assert found == {
        "1": ("feature", "pull_request"),
        "2": ("main", "schedule"),
        "3": ("r1", "web"),
    }


def test_a_large_ingest_stores_every_row_as_given(db: str) -> None:
    """Past 1,000 rows PostgreSQL takes them through COPY: every row arrives,
    messages with tabs, line breaks, backslashes and quotes intact."""
    import sqlalchemy as sa

    from matrixgen.results.ingest import ingest
    from matrixgen.results.junit import Outcome, Testcase
    from matrixgen.results.store import JobKey, JobResults, RunInfo
    from matrixgen.results.tables import results

    bucket = JobKey("gitlab", "mr", "dgx_h100", "dev", "unit-tests", "tests/u/", "", unit=True)
    odd = 'tab\there\nline \\N \\. "quoted" \x7f end'
    tests = tuple(
        Testcase(
            node_id=f"tests/u/test_{i}.py::test_{i}",
            classname="c",
            name=f"test_{i}",
            suite="",
            outcome=Outcome.FAILED if i % 7 == 0 else Outcome.PASSED,
            duration=None if i % 5 == 0 else i / 8,
            message=odd if i % 7 == 0 else "",
        )
        for i in range(1500)
    )
    store = open_store(db, write=True)
    try:
        group = JobResults(job=bucket, job_name="u", target="", testcases=tests)
        ingest(store, RunInfo(run_id="1", commit=None, finished_at=None), [group])
        with store.transaction() as conn:
            rows = conn.execute(
                sa.select(results.c.outcome, results.c.duration, results.c.message)
            ).all()
    finally:
        store.close()
    assert len(rows) == 1500
    assert sorted(rows, key=lambda r: (r[0], r[1] or -1.0, r[2] or "")) == sorted(
        ((1 if t.outcome is Outcome.FAILED else 0, t.duration, t.message or None) for t in tests),
        key=lambda r: (r[0], r[1] or -1.0, r[2] or ""),
    )


def test_prune_deletes_the_old_runs_and_nothing_else(
    db: str, evidence_runs: list[Run], capsys: pytest.CaptureFixture[str]
) -> None:
    ingest_runs(db, evidence_runs)
    before = _counts(db)
    # The runs finish every 20 hours from 2026-11-02T06:00; judged from the end of
    # 2026-12-01, 20 days back is 2026-11-12T00:00: the first 12 runs are older.
    assert main(["results", "prune", "--older-than", "20", "--db", db]) == 0
    assert "deleted 12 run(s) finished before 2026-11-12T00:00:00Z" in capsys.readouterr().err
    after = _counts(db)
    assert after["runs"] == 12 and before["runs"] == 24
    assert after["results"] == before["results"] // 2
    assert after["run_jobs"] == before["run_jobs"] // 2
    assert after["cases"] == before["cases"] and after["jobs"] == before["jobs"]
    store = open_store(db, write=False)
    try:
        report = flaky_rows(store, FlakyPolicy())
    finally:
        store.close()
    assert report.runs == 12 and all(r.runs <= 12 for r in report.rows)
    # PostgreSQL: the weeks that ended by the cutoff went whole, the later ones stay.
    cutoff = 1_794_441_600  # 2026-11-12T00:00:00Z
    store = open_store(db, write=False)
    try:
        with store.transaction() as conn:
            weeks = tables_module.partitions(conn)
    finally:
        store.close()
    if store.dialect == "postgresql":
        assert weeks and all(end > cutoff for _, _, end in weeks)
        assert weeks[0][1] == cutoff - 3 * 86_400  # the week from Monday 2026-11-09
    assert main(["results", "prune", "--older-than", "20", "--db", db]) == 0
    assert "deleted 0 run(s)" in capsys.readouterr().err
    assert main(["results", "prune", "--older-than", "0", "--db", db]) == ExitCode.USAGE


# --------------------------------------------------------------- rolled weeks


def _random_ingests(seed: int) -> list[tuple[object, list]]:
    """Runs of two unit-test buckets, in no order of time: tests that come and
    go, are skipped, fail, error, are muted or rerun; some runs stored twice,
    some later with one more job."""
    import datetime as dt
    import random

    from matrixgen.results.junit import Outcome, Testcase
    from matrixgen.results.store import JobKey, JobResults, RunInfo

    rng = random.Random(seed)
    buckets = [
        JobKey("gitlab", "mr", "dgx_h100", "dev", "unit-tests", f"tests/unit/b{b}/", "", True)
        for b in range(2)
    ]
    outcomes = [Outcome.PASSED] * 6 + [Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED]
    outcomes.append(Outcome.MUTED)
    ingests = []
    for k in range(rng.randint(4, 14)):
        info = RunInfo(
            run_id=f"r{k}",
            commit=f"{rng.randint(0, 3):040x}",
            # On a day's first or last second too: where rolled weeks meet.
            finished_at=dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
            + dt.timedelta(days=rng.randint(0, 20), seconds=rng.choice([0, 1, 43_200, 86_399])),
        )
        groups = []
        for key in buckets[: rng.randint(1, 2)]:
            cases = tuple(
                Testcase(
                    node_id=f"{key.test_case}test_a.py::test_{i}",
                    classname="",
                    name=f"test_{i}",
                    suite="",
                    outcome=rng.choice(outcomes),
                    duration=1.0,
                    reruns=rng.choice([0, 0, 0, 1, 2]),
                )
                for i in rng.sample(range(8), rng.randint(0, 8))
            )
            groups.append(JobResults(job=key, job_name=key.test_case, target="", testcases=cases))
        ingests.append((info, groups))
        if rng.random() < 0.3:
            ingests.append((info, groups))  # stored again: nothing changes
    return ingests


def _counted_two_ways(store: object, since: int | None) -> tuple[list, list]:
    """Each test's (node id, runs, failures, rerun runs, first and last finish):
    as `histories` reads them (rolled weeks and results), and counted here from
    every stored result."""
    import sqlalchemy as sa

    from matrixgen.results.queries import histories
    from matrixgen.results.tables import FAILED_CODES, SKIPPED, cases, results

    read = [
        (h.node_id, h.runs, h.failures, h.rerun_runs, h.first_at, h.last_at)
        for h in histories(store, since=since)[1]
        if h.node_id is not None
    ]
    figures: dict[str, list[int]] = {}
    with store.transaction() as conn:
        query = sa.select(cases.c.node_id, results.c.finished_at, results.c.outcome)
        query = query.add_columns(results.c.reruns).join(cases, cases.c.id == results.c.case_id)
        for node, at, outcome, reruns in conn.execute(query):
            if outcome == SKIPPED or (since is not None and at < since):
                continue
            f = figures.setdefault(node, [0, 0, 0, at, at])
            f[0] += 1
            f[1] += outcome in FAILED_CODES
            f[2] += reruns > 0
            f[3], f[4] = min(f[3], at), max(f[4], at)
    return read, sorted((node, *f) for node, f in figures.items())


# Windows: all, from inside a day, from a day's start, from past the last run.
_SINCE = (None, 1_793_600_000, 1_794_182_400, 1_800_000_000)


def test_rolled_weeks_count_as_every_result(db: str) -> None:
    """What `flaky` and `triage` read of the tests (the weeks rolled up, and the
    results of the others) is what counting every stored result gives, over
    any window: after ingests in any order of time (late reports among them),
    a run stored again or with a job more, and a prune."""
    from matrixgen.results.ingest import ingest
    from matrixgen.results.queries import prune
    from matrixgen.results.tables import rolled_weeks

    for seed in range(3):
        store = open_store(db, write=True)
        try:
            with store.transaction() as conn:  # an empty store for each seed
                for table in reversed(tables_module.metadata.sorted_tables):
                    if table.name != "matrixgen_schema":
                        conn.execute(table.delete())
            for info, groups in _random_ingests(seed):
                ingest(store, info, groups)
            with store.transaction() as conn:
                assert conn.execute(rolled_weeks.select()).first() is not None  # weeks rolled
            for since in _SINCE:
                read, expected = _counted_two_ways(store, since)
                assert read == expected
            prune(store, 1_793_900_000 + seed * 86_400)  # some days after 2026-11-01
            for since in _SINCE:
                read, expected = _counted_two_ways(store, since)
                assert read == expected
        finally:
            store.close()


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=0, max_value=10_000), st.sampled_from(_SINCE))
def test_rolled_weeks_count_as_every_result_for_any_ingests(seed: int, since: int | None) -> None:
    import tempfile

    from matrixgen.results.ingest import ingest

    with tempfile.TemporaryDirectory() as folder:
        store = open_store(str(Path(folder) / "results.db"), write=True)
        try:
            for info, groups in _random_ingests(seed):
                ingest(store, info, groups)
                read, expected = _counted_two_ways(store, since)
                assert read == expected
        finally:
            store.close()


# --------------------------------------------------------------------------- node id bytes

# Characters of 1, 2, 3 and 4 bytes in UTF-8 (each kind a run of different
# ones: PostgreSQL compresses a repeated character below its limits).
_WIDE = st.sampled_from(["a", "é", "€", "😀"])
_RUNS = {
    "a": lambda i: chr(0x61 + i % 26),
    "é": lambda i: chr(0xC0 + i % 64),
    "€": lambda i: chr(0x4E00 + (i * 7919) % 20000),
    "😀": lambda i: chr(0x1F300 + (i * 31) % 700),
}


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(char=_WIDE, extra=st.integers(-3, 3) | st.just(1300))
# Under 2,000 characters, 5,800 bytes: past a btree entry of PostgreSQL.
@example(char="€", extra=1300)
@example(char="😀", extra=1)  # 501 characters of 4 bytes: 2,004 bytes, past the limit
@example(char="😀", extra=0)  # exactly the limit in bytes
@example(char="€", extra=1)  # 667 of 3 bytes: 2,001 bytes
@example(char="a", extra=1)  # ASCII: bytes are characters
def test_a_node_ids_limit_is_in_bytes_and_the_same_on_every_backend(
    db: str, char: str, extra: int
) -> None:
    """A node id of long non-ASCII text was stored on SQLite and broke the whole
    ingest on PostgreSQL (its btree entries are bytes): one limit, in bytes of
    UTF-8, refused before anything is written, alike on both."""
    import datetime as dt

    from matrixgen.model.errors import ResultsFileError
    from matrixgen.results.ingest import ingest
    from matrixgen.results.junit import Outcome, Testcase
    from matrixgen.results.store import JobKey, JobResults, RunInfo

    prefix = "tests/unit_tests/test_u.py::test_p["
    width = len(char.encode())
    count = (tables_module.NODE_ID_LIMIT - len(prefix) - 1) // width + extra
    node = prefix + "".join(_RUNS[char](i) for i in range(count)) + "]"
    size = len(node.encode())
    job = JobKey("gitlab", "mr", "dgx_h100", "dev", "unit-tests", "tests/unit_tests/", "", True)
    test = Testcase(node_id=node, classname="c", name="n", suite="", outcome=Outcome.PASSED,
                    duration=1.0)  # fmt: skip
    run = RunInfo(run_id=uuid.uuid4().hex, commit="c" * 40, finished_at=dt.datetime.now(dt.UTC))
    store = open_store(db, write=True)
    try:
        before = counts(store)
        if size <= tables_module.NODE_ID_LIMIT:
            stored = ingest(store, run, [JobResults(job=job, job_name="u", target="",
                                                    testcases=(test,))])  # fmt: skip
            assert stored.rows == 1
            return
        with pytest.raises(ResultsFileError, match=f"node id of {size:,} bytes"):
            ingest(store, run, [JobResults(job=job, job_name="u", target="", testcases=(test,))])
        assert counts(store) == before  # nothing of it stored
    finally:
        store.close()


@pytest.mark.parametrize(("after_end", "rolled"), [(2 * 86_400, True), (2 * 86_400 - 1, False)])
def test_a_week_is_rolled_once_a_run_two_days_past_its_end_is_stored(
    db: str, after_end: int, rolled: bool
) -> None:
    import datetime as dt

    from matrixgen.results.ingest import ingest
    from matrixgen.results.junit import Outcome, Testcase
    from matrixgen.results.store import JobKey, JobResults, RunInfo
    from matrixgen.results.tables import PARTITION_SECONDS, partition_start, rolled_weeks

    key = JobKey("gitlab", "mr", "dgx_h100", "dev", "unit-tests", "tests/unit/", "", True)
    case = Testcase(node_id="tests/unit/test_a.py::test_a", classname="", name="test_a",
                    suite="", outcome=Outcome.PASSED, duration=1.0)  # fmt: skip
    groups = [JobResults(job=key, job_name=key.test_case, target="", testcases=(case,))]
    week = partition_start(int(dt.datetime(2026, 11, 4, tzinfo=dt.UTC).timestamp()))
    store = open_store(db, write=True)
    try:
        for run_id, at in (("1", week + 3_600), ("2", week + PARTITION_SECONDS + after_end)):
            when = dt.datetime.fromtimestamp(at, dt.UTC)
            ingest(store, RunInfo(run_id=run_id, commit="a" * 40, finished_at=when), groups)
        with store.transaction() as conn:
            weeks = set(conn.execute(rolled_weeks.select()).scalars())
    finally:
        store.close()
    assert (week in weeks) is rolled


def _runs_at(db: str, runs: list[tuple[str, int, bool]], *, unit: bool) -> None:
    """One job (a unit-test bucket or a functional job) in each run (id, epoch
    seconds, whether its test failed), on main from a schedule."""
    import datetime as dt

    from matrixgen.results.ingest import ingest
    from matrixgen.results.junit import Outcome, Testcase
    from matrixgen.results.store import JobKey, JobResults, RunInfo

    case = "tests/unit/" if unit else "gpt3_tp1"
    key = JobKey("gitlab", "mr", "dgx_h100", "dev", "unit-tests" if unit else "gpt", case, "", unit)
    store = open_store(db, write=True)
    try:
        for run_id, at, failed in runs:
            test = Testcase(node_id="tests/unit/test_a.py::test_a", classname="", name="test_a",
                            suite="", outcome=Outcome.FAILED if failed else Outcome.PASSED,
                            duration=1.0)  # fmt: skip
            group = JobResults(job=key, job_name=case, target="", testcases=(test,))
            when = dt.datetime.fromtimestamp(at, dt.UTC)
            info = RunInfo(run_id=run_id, commit=f"{int(run_id):040x}", finished_at=when,
                           ref="main", source="schedule")  # fmt: skip
            ingest(store, info, [group])
    finally:
        store.close()


# 2026-12-01T00:00:00Z: with MATRIXGEN_TODAY=2026-12-01 (judged at the day's
# end), the first second of `--since 1`'s window.
_WINDOW_START = 1_796_083_200


@pytest.mark.parametrize("unit", [True, False])
def test_a_run_at_the_first_second_of_the_window_is_in_it(db: str, unit: bool) -> None:
    _runs_at(db, [("1", _WINDOW_START - 1, True), ("2", _WINDOW_START, True)], unit=unit)
    store = open_store(db, write=False)
    try:
        report = flaky_rows(store, FlakyPolicy(since_days=1, min_runs=1))
    finally:
        store.close()
    assert [row.runs for row in report.rows] == [1]


def test_prune_keeps_a_run_that_finished_at_the_cut(db: str) -> None:
    from matrixgen.results.queries import prune

    cut = _WINDOW_START
    _runs_at(db, [("1", cut - 1, False), ("2", cut, False)], unit=True)
    store = open_store(db, write=True)
    try:
        assert prune(store, cut)["runs"] == 1
        assert counts(store)["runs"] == 1
    finally:
        store.close()


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(0, 23), st.integers(0, 59), st.integers(1, 59))
@example(14, 0, 1)  # the largest offset of a real zone, a minute past midnight
@example(0, 0, 1)  # one minute ahead of UTC, at midnight
def test_finished_at_before_the_year_1_in_utc_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hours: int, minutes: int, early: int
) -> None:
    """A time of the first day of year 1 whose offset puts it in year 0 in UTC
    was stored, and every later reading of the run stopped with a traceback."""
    stamp = f"0001-01-01T00:{early - 1:02d}:00+{hours:02d}:{max(minutes, early):02d}"
    db = tmp_path / f"{uuid.uuid4().hex}.db"
    report = _report(tmp_path / "r.xml", "2026-11-20T10:00:00")
    code, _, err = _ingest(capsys, report, db, "--finished-at", stamp)
    assert code == ExitCode.USAGE, err
    assert f'--finished-at "{stamp}"' in err and "the years 1 to 9999" in err
    assert "Traceback" not in err and not db.exists()


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=12))
@example("1\n::error::x")  # a line of its own, read as a workflow command
@example("1\u202e2\x1b[31m")  # bidi and an escape sequence
def test_the_ingest_summary_shows_the_run_id_on_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], run_id: str
) -> None:
    from matrixgen.util.escape import terminal_text

    if not run_id.strip() or "\x00" in run_id:
        return  # refused as a usage error: said elsewhere
    db = tmp_path / f"{uuid.uuid4().hex}.db"
    report = _report(tmp_path / "r.xml", "2026-11-20T10:00:00")
    code = main(
        ["results", "ingest", str(report), "--run-id", run_id, "--target", TARGET,
         "--tag", "latest", "--recipes", str(RECIPES), "--db", str(db)]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    summary = f"run {terminal_text(run_id.strip())}: 1 file(s), 1 test(s); stored"
    assert summary in err.splitlines()[-1], err
