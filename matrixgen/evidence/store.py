"""The results store: test results per run, job and test, in SQLite or PostgreSQL.

One schema for both dialects, written with SQLAlchemy Core (no SQL strings).
Tables:

    runs      one row per run id (a CI pipeline or workflow run): commit, time;
              since schema 3 the ref (branch or tag) and source (schedule,
              merge_request_event, push...) it ran for: NULL for runs stored
              before, and for runs whose CI did not say
    jobs      one row per job identity and place: system, scope, platform,
              environment, model, test case, tag; `unit` for unit-test buckets
    run_jobs  one row per (run, job): the job's outcome in that run
    cases     one row per (job, pytest node id)
    results   one row per (run, job, test): outcome, reruns, duration, message

Indexes (what each read needs, nothing more):

    results   primary key (case_id, finished_at, run_ref): `flaky` reads each
              test's history in time order straight off it; on SQLite the table
              is stored in that order (WITHOUT ROWID), so the scan reads pages
              in sequence. It also makes (test, run) unique.
    run_jobs  primary key (job_id, finished_at, run_ref), the same for whole jobs;
              unique (run_ref, job_id): what a re-ingest of a run looks up.
    cases     unique (job_id, node_id); jobs: unique identity; runs: unique run_id.
    runs      (ref, finished_at): `triage` finds the latest runs of the baseline
              ref, and `flaky --ref` the runs of one ref, off it.
    results   (run_ref, case_id) of failed and errored results only (a partial
              index): `triage` reads one run's failed tests off it.

Migrations are versioned in `matrixgen_schema` (one row, the version) and
applied by the tool itself when it opens a store, in the transaction of the
command, under a lock (PostgreSQL: an advisory transaction lock; SQLite: BEGIN
IMMEDIATE), so two CI runners starting at once cannot both migrate. A store
written by a newer matrixgen is refused, never downgraded.

sqlalchemy is imported only here, and this module only by the commands that
use the store.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from msgspec import Struct, field

from matrixgen.engine.errors import ResultsStoreError, UsageError, did_you_mean
from matrixgen.evidence.junit import Outcome, Testcase
from matrixgen.util.checkout import choose_store, default_store_path
from matrixgen.util.nodeid import is_node_id
from matrixgen.util.values import ComparedValue

SCHEMA_VERSION = 4
OUTCOME_CODES = {
    Outcome.PASSED: 0,
    Outcome.FAILED: 1,
    Outcome.ERROR: 2,
    Outcome.SKIPPED: 3,
    Outcome.MUTED: 4,
}
OUTCOMES = {code: outcome for outcome, code in OUTCOME_CODES.items()}
SKIPPED = OUTCOME_CODES[Outcome.SKIPPED]
# A test's failed runs: a muted failure is one (the test failed). A job's stored
# outcome is never muted: a job whose only failures are muted passed.
FAILED_CODES = tuple(code for outcome, code in OUTCOME_CODES.items() if outcome.test_failed)
NODE_ID_LIMIT = 2000  # PostgreSQL's btree entries stop near 2,700 bytes
TEXT_LIMIT = 255
TEST_CASE_LIMIT = 1000
SOURCE_LIMIT = 64
_ADVISORY_LOCK = 0x6D677276  # "mgrv": the one lock every writer takes
_IN_CHUNK = 500
# Every transaction on a store is bounded in time ($MATRIXGEN_STORE_TIMEOUT).
TIMEOUT_VARIABLE = "MATRIXGEN_STORE_TIMEOUT"
DEFAULT_TIMEOUT = 300.0
_PROGRESS_STEPS = 10_000  # SQLite virtual-machine steps between two looks at the clock
# A job's run is a sum of its tests' durations, each at most a year when ingested.
_MAX_RUN_SECONDS = 1e15

metadata = sa.MetaData()

schema_table = sa.Table(
    "matrixgen_schema",
    metadata,
    sa.Column("version", sa.Integer, nullable=False),
)
runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(TEXT_LIMIT), nullable=False, unique=True),
    sa.Column("commit_sha", sa.String(64)),
    sa.Column("finished_at", sa.BigInteger, nullable=False),  # seconds since the epoch, UTC
    sa.Column("ingested_at", sa.BigInteger, nullable=False),
    sa.Column("ref", sa.String(TEXT_LIMIT)),  # schema 3: the branch or tag; NULL: not known
    sa.Column("source", sa.String(SOURCE_LIMIT)),  # schema 3: what started the run
    sa.Index("ix_runs_ref_finished", "ref", "finished_at"),
)
# The columns of `runs` each schema version added (`_migrate_1` writes the others).
_RUNS_ADDED = {3: ("ref", "source")}
jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("system", sa.String(16), nullable=False),
    sa.Column("scope", sa.String(TEXT_LIMIT), nullable=False),
    sa.Column("platform", sa.String(TEXT_LIMIT), nullable=False),
    sa.Column("environment", sa.String(TEXT_LIMIT), nullable=False),
    sa.Column("model", sa.String(TEXT_LIMIT), nullable=False),
    sa.Column("test_case", sa.String(TEST_CASE_LIMIT), nullable=False),
    sa.Column("tag", sa.String(TEXT_LIMIT), nullable=False),  # "" for none
    sa.Column("unit", sa.Boolean, nullable=False),
    sa.UniqueConstraint(
        "system",
        "scope",
        "platform",
        "environment",
        "model",
        "test_case",
        "tag",
        name="uq_jobs_identity",
    ),
)
run_jobs = sa.Table(
    "run_jobs",
    metadata,
    sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id"), primary_key=True),
    sa.Column("finished_at", sa.BigInteger, primary_key=True),
    sa.Column("run_ref", sa.Integer, sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("job_name", sa.String(TEST_CASE_LIMIT), nullable=False),
    sa.Column("target", sa.String(TEXT_LIMIT), nullable=False),  # "" when not given
    sa.Column("outcome", sa.SmallInteger, nullable=False),
    sa.Column("tests", sa.Integer, nullable=False),
    sa.Column("failures", sa.Integer, nullable=False),
    sa.Column("reruns", sa.Integer, nullable=False),
    sa.UniqueConstraint("run_ref", "job_id", name="uq_run_jobs_run_job"),
    sqlite_with_rowid=False,
)
cases = sa.Table(
    "cases",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id"), nullable=False),
    sa.Column("node_id", sa.String(NODE_ID_LIMIT), nullable=False),
    sa.UniqueConstraint("job_id", "node_id", name="uq_cases_job_node"),
)
results = sa.Table(
    "results",
    metadata,
    sa.Column("case_id", sa.Integer, sa.ForeignKey("cases.id"), primary_key=True),
    sa.Column("finished_at", sa.BigInteger, primary_key=True),
    sa.Column("run_ref", sa.Integer, sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("outcome", sa.SmallInteger, nullable=False),
    sa.Column("reruns", sa.SmallInteger, nullable=False),
    sa.Column("duration", sa.Float),
    sa.Column("message", sa.String(300)),
    sqlite_with_rowid=False,
)


def _failed(table: sa.Table) -> sa.ColumnElement[bool]:
    """Failed or errored, with the codes written out (not bound): the partial
    index's predicate, and the one a query must repeat for the index to serve it."""
    return table.c.outcome.in_([sa.literal_column(str(code)) for code in FAILED_CODES])


# Schema 2: a run's failed tests, for `triage` (failures are few: the index is
# small). On a copy of `results`: `_migrate_1` creates the table as it was.
_results_3 = results.to_metadata(sa.MetaData())
failed_results_index = sa.Index(
    "ix_results_failed_run",
    _results_3.c.run_ref,
    _results_3.c.case_id,
    sqlite_where=_failed(_results_3),
    postgresql_where=_failed(_results_3),
)
_FAILED_WHERE = _failed(results)


def _migrate_1(conn: sa.Connection) -> None:
    """The first schema: runs, jobs, run_jobs, cases, results (`runs` as it was
    then: the columns and indexes later versions add are theirs to add)."""
    first = sa.MetaData()
    sa.Table(
        "runs",
        first,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(TEXT_LIMIT), nullable=False, unique=True),
        sa.Column("commit_sha", sa.String(64)),
        sa.Column("finished_at", sa.BigInteger, nullable=False),
        sa.Column("ingested_at", sa.BigInteger, nullable=False),
    )
    first.create_all(conn)
    metadata.create_all(conn, tables=[jobs, run_jobs, cases, results])


def _migrate_2(conn: sa.Connection) -> None:
    """Outcome 4, muted, in `results`: no table changes, but a matrixgen that
    knows only version 1 would read a muted failure as a pass, so it must
    refuse a store that may hold one."""


def _migrate_3(conn: sa.Connection) -> None:
    """Runs know where they come from: `runs.ref` and `runs.source`, NULL for
    the runs stored before, and the index the baseline lookups read. Additive:
    no row is rewritten."""
    preparer = conn.dialect.identifier_preparer
    for name in _RUNS_ADDED[3]:
        column = sa.schema.CreateColumn(runs.c[name]).compile(dialect=conn.dialect)
        conn.exec_driver_sql(f"ALTER TABLE {preparer.format_table(runs)} ADD COLUMN {column}")
    for index in runs.indexes:
        if index.name == "ix_runs_ref_finished":
            index.create(conn)
    failed_results_index.create(conn)


def _migrate_4(conn: sa.Connection) -> None:
    """PostgreSQL: `results` loses its foreign keys (to `cases` and `runs`).
    Their checks, one trigger call per key per row, were two thirds of an
    ingest's time; ingest writes results only from a join with `cases`, in the
    transaction that writes the run, and prune deletes a run's results before
    the run. SQLite never enforced them (PRAGMA foreign_keys is off): nothing
    to do there."""
    if conn.dialect.name != "postgresql":
        return
    preparer = conn.dialect.identifier_preparer
    for key in sa.inspect(conn).get_foreign_keys(results.name):
        if key.get("name"):
            conn.exec_driver_sql(
                f"ALTER TABLE {preparer.format_table(results)} "
                f"DROP CONSTRAINT {preparer.quote(key['name'])}"
            )


# Version N is reached by running MIGRATIONS[N - 1] on a store at version N - 1.
# A later change appends a function; a released one is never edited.
MIGRATIONS = (_migrate_1, _migrate_2, _migrate_3, _migrate_4)
assert len(MIGRATIONS) == SCHEMA_VERSION


# --------------------------------------------------------------------------- values


class JobKey(Struct, frozen=True, order=True):
    """A job's identity and where it ran: one row of `jobs`."""

    system: str
    scope: str
    platform: str
    environment: str
    model: str
    test_case: str
    tag: str  # "" for none
    unit: bool = False

    @property
    def place(self) -> str:
        return f"{self.system}/{self.scope}"

    def to_dict(self, node_id: str | None) -> dict[str, Any]:
        """The job and test as the JSON outputs (flaky, triage) name them."""
        return {
            "model": self.model,
            "test_case": self.test_case,
            "tag": self.tag or None,
            "node_id": node_id,
            "system": self.system,
            "platform": self.platform,
            "environment": self.environment,
            "scope": self.scope,
        }

    def identity(self) -> tuple[str, ...]:
        return (
            self.system,
            self.scope,
            self.platform,
            self.environment,
            self.model,
            self.test_case,
            self.tag,
        )


class JobResults(Struct, frozen=True, kw_only=True):
    """What one ingest stores for one job."""

    job: JobKey
    job_name: str
    target: str
    testcases: tuple[Testcase, ...]

    @property
    def outcome(self) -> Outcome:
        """The job's outcome: failed when a test failed or errored; skipped when
        every test was skipped (or there were none); else passed."""
        if any(t.outcome.failed for t in self.testcases):
            return Outcome.FAILED
        if all(t.outcome is Outcome.SKIPPED for t in self.testcases):
            return Outcome.SKIPPED
        return Outcome.PASSED


class RunInfo(Struct, frozen=True, kw_only=True):
    run_id: str
    commit: str | None
    finished_at: dt.datetime | None  # None: keep the stored one, else now
    ref: str | None = None  # the branch or tag the run was for; None: not known
    source: str | None = None  # what started it (schedule, merge_request_event, push...)


class IngestReport(Struct, frozen=True, kw_only=True):
    run_id: str
    new_run: bool
    jobs: tuple[JobIngest, ...]  # in the order each job first came
    tests: int  # each report's tests, each once per report
    not_node_ids: tuple[str, ...] = ()  # unit-test records that name no test, sorted

    @property
    def stored(self) -> tuple[JobIngest, ...]:
        return tuple(j for j in self.jobs if j.stored)

    @property
    def already(self) -> tuple[JobIngest, ...]:
        """(run, job) pairs stored before: left as they were."""
        return tuple(j for j in self.jobs if not j.stored)

    @property
    def rows(self) -> int:
        return sum(j.tests for j in self.stored)


class RunRow(Struct, frozen=True):
    ref: int
    run_id: str
    commit: str | None
    finished_at: int
    git_ref: str | None = None  # the branch or tag; None: not known (stored before schema 3)
    source: str | None = None


class History(Struct, frozen=True):
    """One key's results in the window: a whole job (node_id None) or one test.

    `sequence` is (finished_at, run_ref, failed, reruns) in time order; it is
    read only for keys that failed or were rerun at least once (None otherwise:
    every run passed)."""

    job: JobKey
    node_id: str | None
    runs: int
    failures: int
    rerun_runs: int
    first_at: int
    last_at: int
    sequence: tuple[tuple[int, int, bool, int], ...] | None


# --------------------------------------------------------------------------- opening


def store_url(given: str | None) -> tuple[str, bool]:
    """(SQLAlchemy URL, explicitly configured?) from --db, $MATRIXGEN_RESULTS_DB,
    or the default file (`util.checkout.choose_store`: never one git tracks). A
    plain path is a SQLite file; postgresql:// URLs use psycopg (version 3)."""
    choice = choose_store(given)
    if choice.note is not None:
        raise ResultsStoreError(choice.note)
    text = choice.location or ""
    if not text:
        return "sqlite:///" + str(default_store_path()), False
    lowered = text.lower()
    for prefix in ("postgresql://", "postgres://"):
        if lowered.startswith(prefix):
            return "postgresql+psycopg://" + text[len(prefix) :], True
    if lowered.startswith(("postgresql+psycopg://", "sqlite://")):
        return text, True
    if "://" in text:
        raise UsageError(
            f"--db {_shown(text)}: expected a file path, sqlite:///PATH or postgresql://..."
        )
    return "sqlite:///" + text, choice.explicit


def _shown(url: str) -> str:
    """A URL for messages: without its password."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1] if "@" in url else url


def sqlite_path(url: str) -> Path | None:
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    return Path(parsed.database)


# PostgreSQL's SQLSTATE for a statement stopped by statement_timeout.
_QUERY_CANCELED = "57014"


class Store(ComparedValue, frozen=True):
    engine: sa.Engine
    url: str
    write: bool
    migrated: list[bool] = field(default_factory=list)  # [True] once checked; not compared
    # SQLite: the query time bound; not compared
    clock: list[_Deadline] = field(default_factory=list)

    def compared(self) -> tuple:
        return (self.engine, self.url, self.write)

    @property
    def shown(self) -> str:
        return _shown(self.url)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        """One transaction, migrated to the current schema first (under the
        writers' lock); a store is checked once, after its first commit."""
        checked = False
        try:
            with self.engine.begin() as conn:
                if self.dialect == "postgresql":
                    # As a SQLite reader's file: a reader's transaction cannot
                    # write, and every statement is bounded in time.
                    if not self.write:
                        conn.execute(sa.text("SET TRANSACTION READ ONLY"))
                    limit = int(store_timeout() * 1000)
                    conn.execute(sa.text(f"SET LOCAL statement_timeout = {limit}"))
                if self.dialect == "postgresql" and self.write:
                    conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_ADVISORY_LOCK)))
                if not self.migrated:
                    _migrate(conn, self)
                    checked = True
                yield conn
        except sa.exc.DatabaseError as exc:
            # OperationalError among them, and SQLite's "file is not a database"
            cancelled = getattr(exc.orig, "sqlstate", None) == _QUERY_CANCELED
            if (self.clock and self.clock[0].expired()) or cancelled:
                limit = self.clock[0].limit if self.clock else store_timeout()
                raise ResultsStoreError(
                    f"results store {self.shown}: a query ran past {limit:g} "
                    f"seconds (${TIMEOUT_VARIABLE}) and was stopped"
                ) from None
            raise ResultsStoreError(
                f"results store {self.shown}: {_first_line(exc.orig or exc)}"
            ) from None
        if checked:
            self.migrated.append(True)

    def close(self) -> None:
        self.engine.dispose()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def store_timeout() -> float:
    """Seconds a store's transaction may take ($MATRIXGEN_STORE_TIMEOUT)."""
    text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 10**7:
        raise UsageError(f"${TIMEOUT_VARIABLE}={text!r}: expected seconds, a number above 0")
    return value


class _Deadline:
    """When the running transaction must have finished (a SQLite progress
    handler checks it: a query past it is interrupted)."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.at = time.monotonic() + limit

    def restart(self) -> None:
        self.at = time.monotonic() + self.limit

    def expired(self) -> bool:
        return time.monotonic() > self.at


def open_store(given: str | None, *, write: bool) -> Store:
    """Open the store for a command. Reading a SQLite store that does not exist is
    an error; writing creates it (never through a symlink). A reader opens a
    SQLite file read-only, and each transaction on a SQLite file is bounded in
    time by a progress handler; on PostgreSQL a reader's transaction is READ
    ONLY and every transaction sets `statement_timeout` to the same bound."""
    url, _ = store_url(given)
    path = sqlite_path(url)
    clock: list[_Deadline] = []
    if path is not None:
        if not write and not path.exists():
            raise ResultsStoreError(
                f"no results store at {path}: ingest results first (matrixgen results ingest)"
            )
        if write:
            _prepare_sqlite_file(path)
    try:
        if path is not None:
            deadline = _Deadline(store_timeout())
            clock.append(deadline)
            engine = _sqlite_engine(url, path, write=write, deadline=deadline)
        else:
            engine = sa.create_engine(url, pool_pre_ping=False)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise UsageError(f"--db {_shown(url)}: {exc}") from None
    return Store(engine=engine, url=url, write=write, clock=clock)


def _sqlite_engine(url: str, path: Path, *, write: bool, deadline: _Deadline) -> sa.Engine:
    """A SQLite engine; a reader's connection is opened read-only (`mode=ro`:
    reading never changes the file, nor creates a journal beside it)."""
    if write:
        engine = sa.create_engine(url, connect_args={"timeout": 60})
    else:
        import sqlite3

        target = path.resolve().as_uri() + "?mode=ro"
        engine = sa.create_engine(
            "sqlite://",
            creator=lambda: sqlite3.connect(target, uri=True, timeout=60, check_same_thread=False),
        )
    _sqlite_transactions(engine, immediate=write, deadline=deadline)
    return engine


def _prepare_sqlite_file(path: Path) -> None:
    for part in (path.parent, path):
        if part.is_symlink():
            raise ResultsStoreError(f"{part} is a symbolic link; the results store is not written")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ResultsStoreError(f"cannot create {path.parent}: {exc.strerror}") from None


def _sqlite_transactions(engine: sa.Engine, *, immediate: bool, deadline: _Deadline) -> None:
    """pysqlite would open transactions itself, late and without DDL; let
    SQLAlchemy's BEGIN start them (BEGIN IMMEDIATE for writers: the lock). Every
    transaction gets `deadline` anew; a query still running past it stops."""

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        dbapi_connection.set_progress_handler(deadline.expired, _PROGRESS_STEPS)

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        deadline.restart()
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


# What a SQLite store may hold besides its tables: their indexes. A view or a
# trigger is refused: the schema has none, and one could make any read loop.
_SQLITE_KINDS = frozenset({"table", "index"})


def _check_sqlite_schema(conn: sa.Connection, store: Store) -> None:
    """Refuse a SQLite file that is not a store as matrixgen writes it: views,
    triggers and virtual tables, or one of the store's tables that is something
    else. The check reads `sqlite_master` only."""
    rows = conn.exec_driver_sql("SELECT type, name, sql FROM sqlite_master").all()
    for kind, name, sql in sorted(rows, key=lambda r: (str(r[0]), str(r[1]))):
        virtual = kind == "table" and str(sql or "").lstrip().upper().startswith("CREATE VIRTUAL")
        if kind not in _SQLITE_KINDS or virtual:
            shown = "virtual table" if virtual else str(kind)
            raise ResultsStoreError(
                f"results store {store.shown} is refused: it holds a {shown} "
                f"{name}, which a matrixgen store never has"
            )


def _version(conn: sa.Connection) -> int | None:
    if not sa.inspect(conn).has_table(schema_table.name):
        return None
    return conn.execute(sa.select(schema_table.c.version)).scalar_one_or_none() or 0


def _migrate(conn: sa.Connection, store: Store) -> None:
    if store.dialect == "sqlite":
        _check_sqlite_schema(conn, store)
    version = _version(conn)
    if version == SCHEMA_VERSION:
        return
    if store.dialect == "sqlite" and not store.write:
        # Opened read-only: a reader cannot migrate, nor make a store of a file.
        if version is None:
            raise ResultsStoreError(
                f"results store {store.shown} is not a matrixgen results store "
                f"(it has no {schema_table.name} table)"
            )
        if version < SCHEMA_VERSION:
            raise ResultsStoreError(
                f"results store {store.shown} has schema version {version}; "
                "`matrixgen results ingest` migrates it"
            )
    if store.dialect == "postgresql" and not store.write:
        # Writers hold the lock from the start; a reader takes it to migrate.
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_ADVISORY_LOCK)))
        version = _version(conn)
    if version is None:
        schema_table.create(conn)
        conn.execute(schema_table.insert().values(version=0))
        version = 0
    if version > SCHEMA_VERSION:
        raise ResultsStoreError(
            f"results store {store.shown} has schema version {version}, written by a newer "
            f"matrixgen (this one knows up to {SCHEMA_VERSION}); upgrade matrixgen"
        )
    for target in range(version + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[target - 1](conn)
        conn.execute(schema_table.update().values(version=target))


def schema_version(store: Store) -> int:
    with store.transaction() as conn:
        return conn.execute(sa.select(schema_table.c.version)).scalar_one()


# --------------------------------------------------------------------------- ingest


def _epoch(moment: dt.datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp())


def check_lengths(run: RunInfo) -> None:
    """Values too long for the store's columns are refused before writing (a
    test's node id: as it is staged)."""
    if len(run.run_id) > TEXT_LIMIT:
        raise UsageError(f"--run-id is {len(run.run_id)} characters (at most {TEXT_LIMIT})")
    if run.commit is not None and len(run.commit) > 64:
        raise UsageError(f"--commit is {len(run.commit)} characters (at most 64)")
    if run.ref is not None and not 0 < len(run.ref) <= TEXT_LIMIT:
        raise UsageError(f"--ref is {len(run.ref)} characters (1 to {TEXT_LIMIT})")
    if run.source is not None and not 0 < len(run.source) <= SOURCE_LIMIT:
        raise UsageError(f"--source is {len(run.source)} characters (1 to {SOURCE_LIMIT})")


def ingest(store: Store, run: RunInfo, groups: Sequence[JobResults]) -> IngestReport:
    """Store one run's results held in memory, in one transaction (each group
    as one report file: see IngestSink). A (run, job) pair stored before is
    left as it was: re-ingesting a run changes nothing."""
    with ingest_stream(store, run) as sink:
        for number, group in enumerate(groups):
            sink.job(group.job, group.job_name, group.target)
            for test in group.testcases:
                sink.add(group.job, group.job_name, group.target, number, test)
        return sink.finish(run.finished_at)


@contextmanager
def ingest_stream(store: Store, run: RunInfo) -> Iterator[IngestSink]:
    """One run's ingest, in one transaction: add each record as it is read,
    then `finish`. An error before `finish` returns (a bad report, a test no
    job holds, the store's) rolls the whole ingest back: no partial run."""
    check_lengths(run)
    with store.transaction() as conn:
        sink = IngestSink(conn, run)
        yield sink
        if not sink.finished:
            raise RuntimeError("ingest_stream: the ingest was not finished")


# An ingest's records as read, before they are folded into one result per test:
# a temporary table of the transaction (on the server for PostgreSQL, in
# SQLite's temporary file otherwise), written in batches of _STAGE_BATCH rows,
# so the memory an ingest needs does not grow with its reports.
_STAGE_BATCH = 5_000
_staging = sa.MetaData()
staged = sa.Table(
    "matrixgen_staged",
    _staging,
    sa.Column("seq", sa.Integer, nullable=False),  # the record's place in the ingest
    sa.Column("file_no", sa.Integer, nullable=False),
    sa.Column("job_id", sa.Integer, nullable=False),
    sa.Column("node_id", sa.String(NODE_ID_LIMIT), nullable=False),
    sa.Column("outcome", sa.SmallInteger, nullable=False),
    sa.Column("reruns", sa.Integer, nullable=False),
    sa.Column("duration", sa.Float),
    sa.Column("message", sa.String(300)),
    sa.Column("odd", sa.Boolean, nullable=False),  # a unit-test record that names no test
    prefixes=["TEMPORARY"],
)
folded = sa.Table(
    "matrixgen_folded",
    _staging,
    sa.Column("job_id", sa.Integer, nullable=False),
    sa.Column("node_id", sa.String(NODE_ID_LIMIT), nullable=False),
    sa.Column("outcome", sa.SmallInteger, nullable=False),
    sa.Column("reruns", sa.Integer, nullable=False),
    sa.Column("duration", sa.Float),
    sa.Column("message", sa.String(300)),
    prefixes=["TEMPORARY"],
)
_STAGED_KEYS = [c.name for c in staged.columns]
_JOB_FAILED = tuple(code for outcome, code in OUTCOME_CODES.items() if outcome.failed)


class JobIngest(Struct, frozen=True, kw_only=True):
    """One job of an ingest: its tests (each once, reruns folded in) and whether
    they were stored now (False: the run held the job already)."""

    job: JobKey
    job_name: str
    target: str
    tests: int
    failed: int  # failed or errored (muted failures are not the job's)
    skipped: int
    reruns: int
    stored: bool


class IngestSink:
    """Receives one run's test records as they are read, one report file after
    another (`number`: the file's place), in batches to the staging table.
    `finish` folds them: a test's records in one file are its attempts (every
    one but the last failed), and a test in several files of one job was run
    again; its outcome, duration and message are its last record's, its reruns
    the failed attempts before it: the reruns of each file's last record, plus
    one per record but the last. Then one INSERT ... SELECT per table."""

    def __init__(self, conn: sa.Connection, run: RunInfo) -> None:
        self.conn = conn
        self.run = run
        self.rows: list[tuple] = []
        self.seq = 0
        self.finished = False
        self.job_of: dict[JobKey, int] = {}
        self.jobs: dict[int, tuple[JobKey, str, str]] = {}  # first name and target per job
        self.stored_jobs = {
            tuple(row[1:]): row[0]
            for row in conn.execute(sa.select(jobs.c.id, *(jobs.c[name] for name in _IDENTITY)))
        }
        self.new_run, self.ref, self.at = _run_row(conn, run)
        for table in (staged, folded):
            table.drop(conn, checkfirst=True)
            table.create(conn)

    def job(self, job: JobKey, job_name: str, target: str) -> int:
        """The job's id; a job named here is stored even when no record is its."""
        job_id = self.job_of.get(job)
        if job_id is None:
            job_id = self.job_of[job] = _job_id(self.conn, job, self.stored_jobs)
            self.jobs.setdefault(job_id, (job, job_name, target))
        return job_id

    def add(self, job: JobKey, job_name: str, target: str, number: int, test: Testcase) -> None:
        job_id = self.job_of.get(job)
        if job_id is None:
            job_id = self.job(job, job_name, target)
        node = test.node_id
        if len(node) > NODE_ID_LIMIT:
            raise UsageError(
                f"test {node[:80]}... has a node id of {len(node)} characters "
                f"(at most {NODE_ID_LIMIT})"
            )
        self.rows.append(
            (
                self.seq,
                number,
                job_id,
                node,
                OUTCOME_CODES[test.outcome],
                test.reruns,
                test.duration,
                test.message[:300] or None,
                job.unit and not is_node_id(node),
            )
        )
        self.seq += 1
        if len(self.rows) >= _STAGE_BATCH:
            self.flush()

    def flush(self) -> None:
        _bulk_insert(self.conn, staged, _STAGED_KEYS, self.rows)
        self.rows = []

    def finish(self, finished_at: dt.datetime | None) -> IngestReport:
        """Fold the records and store them; what was stored, per job."""
        self.flush()
        conn = self.conn
        if self.new_run:
            self.at = _epoch(finished_at) if finished_at else self.at
            conn.execute(runs.update().where(runs.c.id == self.ref).values(finished_at=self.at))
        s = staged.c
        repeated = (
            sa.select(s.job_id).group_by(s.job_id, s.node_id).having(sa.func.count() > 1).limit(1)
        )
        source, tests = staged, self.seq
        if conn.execute(repeated).first() is not None:
            # Some test has several records (reruns): fold them, one row each.
            conn.execute(folded.insert().from_select([c.name for c in folded.columns], _folding()))
            source = folded
            each = sa.select(s.file_no, s.job_id, s.node_id).distinct().subquery()
            tests = conn.execute(sa.select(sa.func.count()).select_from(each)).scalar_one()
        present = {
            job_id
            for (job_id,) in conn.execute(
                sa.select(run_jobs.c.job_id).where(run_jobs.c.run_ref == self.ref)
            )
        }
        figures = {job_id: rest for job_id, *rest in conn.execute(_job_figures(source))}
        report = [
            self._job(job_id, figures.get(job_id, (0, 0, 0, 0)), job_id not in present)
            for job_id in self.jobs
        ]
        fresh = sorted(self.job_of[j.job] for j in report if j.stored)
        if fresh:
            _store_folded(conn, source, self.ref, self.at, fresh)
            job_rows = [self._run_job(j) for j in report if j.stored]
            _bulk_insert(conn, run_jobs, list(job_rows[0]), [tuple(r.values()) for r in job_rows])
        odd = sorted(conn.execute(sa.select(s.node_id).where(s.odd).distinct()).scalars())
        for table in (folded, staged):
            table.drop(conn)
        self.finished = True
        return IngestReport(
            run_id=self.run.run_id,
            new_run=self.new_run,
            jobs=tuple(report),
            tests=tests,
            not_node_ids=tuple(odd),
        )

    def _job(self, job_id: int, figures: Sequence[Any], stored: bool) -> JobIngest:
        key, name, target = self.jobs[job_id]
        tests, failed, skipped, reruns = (int(v or 0) for v in figures)
        return JobIngest(
            job=key,
            job_name=name,
            target=target,
            tests=tests,
            failed=failed,
            skipped=skipped,
            reruns=reruns,
            stored=stored,
        )

    def _run_job(self, j: JobIngest) -> dict[str, Any]:
        outcome = (
            Outcome.FAILED
            if j.failed
            else Outcome.SKIPPED
            if j.skipped == j.tests
            else Outcome.PASSED
        )
        return {
            "job_id": self.job_of[j.job],
            "finished_at": self.at,
            "run_ref": self.ref,
            "job_name": j.job_name[:TEST_CASE_LIMIT],
            "target": j.target[:TEXT_LIMIT],
            "outcome": OUTCOME_CODES[outcome],
            "tests": j.tests,
            "failures": j.failed,
            "reruns": j.reruns,
        }


_IDENTITY = ("system", "scope", "platform", "environment", "model", "test_case", "tag")


def _run_row(conn: sa.Connection, run: RunInfo) -> tuple[bool, int, int]:
    """(new?, id, finished_at) of the run, its row written when new (finished
    now, until the ingest knows better); a run stored before learns the commit,
    ref and source it did not know, and refuses others."""
    now = int(dt.datetime.now(dt.UTC).timestamp())
    row = conn.execute(
        sa.select(
            runs.c.id, runs.c.commit_sha, runs.c.finished_at, runs.c.ref, runs.c.source
        ).where(runs.c.run_id == run.run_id)
    ).first()
    if row is None:
        ref = conn.execute(
            runs.insert().values(
                run_id=run.run_id,
                commit_sha=run.commit,
                finished_at=now,
                ingested_at=now,
                ref=run.ref,
                source=run.source,
            )
        ).inserted_primary_key[0]
        return True, ref, now
    ref, commit, at, git_ref, source = row
    known = {}
    for option, given, stored, column in (
        ("commit", run.commit, commit, "commit_sha"),
        ("ref", run.ref, git_ref, "ref"),
        ("source", run.source, source, "source"),
    ):
        if given is not None and stored is not None and given != stored:
            raise UsageError(
                f"run {run.run_id} was stored with {option} {stored}, not {given}: "
                f"one run id names one {option}"
            )
        if given is not None and stored is None:
            known[column] = given  # told now, not before: the run learns it
    if known:
        conn.execute(runs.update().where(runs.c.id == ref).values(**known))
    return False, ref, at


def _folding() -> sa.Select:
    """The staged records, one row per (job, node id): see IngestSink."""
    s = staged.c
    test = [s.job_id, s.node_id]
    inner = sa.select(
        s.seq,
        s.job_id,
        s.node_id,
        s.outcome,
        s.reruns,
        s.duration,
        s.message,
        sa.func.row_number()
        .over(partition_by=[*test, s.file_no], order_by=s.seq.desc())
        .label("file_back"),
    ).subquery()
    i = inner.c
    test = [i.job_id, i.node_id]
    outer = sa.select(
        i.job_id,
        i.node_id,
        i.outcome,
        i.duration,
        i.message,
        sa.func.row_number().over(partition_by=test, order_by=i.seq.desc()).label("back"),
        sa.func.count().over(partition_by=test).label("records"),
        sa.func.sum(sa.case((i.file_back == 1, i.reruns), else_=0))
        .over(partition_by=test)
        .label("last_reruns"),
    ).subquery()
    o = outer.c
    return sa.select(
        o.job_id,
        o.node_id,
        o.outcome,
        (o.last_reruns + o.records - 1).label("reruns"),
        o.duration,
        o.message,
    ).where(o.back == 1)


def _job_figures(source: sa.Table) -> sa.Select:
    """Per job of the ingest: tests, failed (the job's failures), skipped, reruns
    (`source`: the folded records, or the staged ones when none repeats)."""
    f = source.c

    def count(codes: Sequence[int]) -> sa.ColumnElement:
        return sa.func.sum(sa.case((f.outcome.in_(codes), 1), else_=0))

    return sa.select(
        f.job_id, sa.func.count(), count(_JOB_FAILED), count([SKIPPED]), sa.func.sum(f.reruns)
    ).group_by(f.job_id)


def _store_folded(
    conn: sa.Connection, source: sa.Table, ref: int, at: int, job_ids: Sequence[int]
) -> None:
    """The folded tests of these jobs into `cases` (those not there yet) and
    `results`: set-based, on the server, through the unique (job_id, node_id)."""
    f, c = source.c, cases.c
    chosen = f.job_id.in_(job_ids)
    same = sa.and_(c.job_id == f.job_id, c.node_id == f.node_id)
    missing = (
        sa.select(f.job_id, f.node_id)
        .where(chosen, ~sa.exists().where(same))
        .order_by(f.job_id, f.node_id)
    )
    conn.execute(cases.insert().from_select(["job_id", "node_id"], missing))
    capped = sa.case((f.reruns > 32767, 32767), else_=f.reruns)
    rows = (
        sa.select(
            c.id,
            sa.literal(at, sa.BigInteger),
            sa.literal(ref, sa.Integer),
            f.outcome,
            capped,
            f.duration,
            f.message,
        )
        .select_from(source.join(cases, same))
        .where(chosen)
    )
    _insert_results(conn, rows)


def _insert_results(conn: sa.Connection, rows: sa.Select) -> None:
    keys = ["case_id", "finished_at", "run_ref", "outcome", "reruns", "duration", "message"]
    conn.execute(results.insert().from_select(keys, rows))


def _job_id(conn: sa.Connection, key: JobKey, stored: Mapping[tuple[str, ...], int]) -> int:
    """A job's id, its row created when missing (`stored`: the jobs table as
    the ingest found it)."""
    identity = key.identity()
    if identity in stored:
        return stored[identity]
    return conn.execute(
        jobs.insert().values(**dict(zip(_IDENTITY, identity, strict=True)), unit=key.unit)
    ).inserted_primary_key[0]


def _bulk_insert(
    conn: sa.Connection, table: sa.Table, keys: Sequence[str], rows: Sequence[tuple]
) -> None:
    """Many rows of one shape (values in the order of `keys`): on PostgreSQL
    through COPY; else the INSERT is compiled by SQLAlchemy once, for this
    dialect, and the driver runs it for every row (SQLAlchemy's own executemany
    builds parameters row by row in Python: most of an ingest's time)."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        _copy_rows(conn, table, keys, rows)
        return
    compiled = table.insert().compile(dialect=conn.dialect, column_keys=list(keys))
    cursor = conn.connection.cursor()
    try:
        if compiled.positional:
            where = {k: i for i, k in enumerate(keys)}
            order = [where[k] for k in compiled.positiontup or []]
            if order != list(range(len(keys))):
                rows = [tuple(r[i] for i in order) for r in rows]
            cursor.executemany(str(compiled), rows)
        else:
            cursor.executemany(str(compiled), [dict(zip(keys, r, strict=True)) for r in rows])
    finally:
        cursor.close()


def _copy_rows(
    conn: sa.Connection, table: sa.Table, keys: Sequence[str], rows: Sequence[tuple]
) -> None:
    """PostgreSQL's COPY FROM STDIN, in the command's transaction: the rows
    stream in the text format psycopg writes, several times faster than a
    batch of INSERTs."""
    preparer = conn.dialect.identifier_preparer
    columns = ", ".join(preparer.quote(k) for k in keys)
    statement = f"COPY {preparer.format_table(table)} ({columns}) FROM STDIN"
    cursor = conn.connection.driver_connection.cursor()
    try:
        with cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
    finally:
        cursor.close()


# --------------------------------------------------------------------------- reading


def read_runs(conn: sa.Connection) -> dict[int, RunRow]:
    c = runs.c
    query = sa.select(c.id, c.run_id, c.commit_sha, c.finished_at, c.ref, c.source)
    return {row[0]: RunRow(*row) for row in conn.execute(query)}


class RunFilter(Struct, frozen=True, kw_only=True):
    """Which runs a read keeps: those of one ref (and source, when given)."""

    ref: str
    source: str | None = None

    def refs(self) -> sa.Select:
        """The matching runs' ids, as a subquery (off the (ref, finished_at) index)."""
        where = [runs.c.ref == self.ref]
        if self.source is not None:
            where.append(runs.c.source == self.source)
        return sa.select(runs.c.id).where(*where)

    def __str__(self) -> str:
        return f"ref {self.ref}" + (f", source {self.source}" if self.source else "")


def read_jobs(conn: sa.Connection) -> dict[int, JobKey]:
    c = jobs.c
    query = sa.select(
        c.id, c.system, c.scope, c.platform, c.environment, c.model, c.test_case, c.tag, c.unit
    )
    return {row[0]: JobKey(*row[1:8], unit=bool(row[8])) for row in conn.execute(query)}


def _failed_sum(column: sa.ColumnElement) -> sa.ColumnElement:
    return sa.func.sum(sa.case((column.in_(FAILED_CODES), 1), else_=0))


def histories(
    store: Store,
    *,
    since: int | None,
    unit_tests: bool = True,
    whole_jobs: bool = True,
    unit_jobs_whole: bool = False,
    only: RunFilter | None = None,
    keys: Collection[tuple[JobKey, str | None]] | None = None,
) -> tuple[dict[int, RunRow], list[History]]:
    """Every key's history since `since` (epoch seconds; None: all): one test
    of each unit-test bucket (unit_tests), one whole job of every other job
    (whole_jobs; with unit_jobs_whole, of unit-test buckets too). Skipped
    results are not runs; with `only`, neither are the runs it leaves out; with
    `keys` ((job, node id or None) pairs), only those keys are read."""
    found: list[History] = []
    chosen = set(keys) if keys is not None else None
    with store.transaction() as conn:
        run_rows = read_runs(conn)
        job_keys = read_jobs(conn)
        unit_ids = {i for i, k in job_keys.items() if k.unit}
        bucket_ids = unit_ids
        if chosen is not None:
            chosen_jobs = {job for job, _ in chosen}
            bucket_ids = {i for i in unit_ids if job_keys[i] in chosen_jobs}
        if whole_jobs:
            wanted = set(job_keys) if unit_jobs_whole else set(job_keys) - unit_ids
            if chosen is not None:
                wanted = {i for i in wanted if (job_keys[i], None) in chosen}
            for key_id, history in _grouped(conn, run_jobs, run_jobs.c.job_id, since, wanted, only):
                found.append(_history(job_keys[key_id], None, history))
        if unit_tests and bucket_ids:
            case_rows = conn.execute(
                sa.select(cases.c.id, cases.c.job_id, cases.c.node_id).where(
                    cases.c.job_id.in_(sorted(bucket_ids))
                )
            ).all()
            case_of = {
                cid: (job_id, node)
                for cid, job_id, node in case_rows
                if chosen is None or (job_keys[job_id], node) in chosen
            }
            grouped = _grouped(conn, results, results.c.case_id, since, set(case_of), only)
            for key_id, history in grouped:
                job_id, node = case_of[key_id]
                found.append(_history(job_keys[job_id], node, history))
    found.sort(key=lambda h: (h.job, h.node_id or ""))
    return run_rows, found


def _history(job: JobKey, node: str | None, parts: tuple) -> History:
    runs_, failures, reruns, first_at, last_at, sequence = parts
    return History(
        job=job,
        node_id=node,
        runs=runs_,
        failures=failures,
        rerun_runs=reruns,
        first_at=first_at,
        last_at=last_at,
        sequence=sequence,
    )


def _grouped(
    conn: sa.Connection,
    table: sa.Table,
    key: sa.Column,
    since: int | None,
    wanted: set[int],
    only: RunFilter | None = None,
) -> Iterator[tuple[int, tuple]]:
    """Phase 1, one aggregate query: runs, failures, reruns per key. Phase 2,
    only for keys that failed or were rerun: their results in time order."""
    if not wanted:
        return
    cond = [table.c.outcome != SKIPPED]
    if since is not None:
        cond.append(table.c.finished_at >= since)
    if only is not None:
        cond.append(table.c.run_ref.in_(only.refs()))
    # A few keys (what triage asks for) are read off the primary key, not the whole table.
    few = [key.in_(sorted(wanted))] if len(wanted) <= _IN_CHUNK else []
    reruns = sa.func.sum(sa.case((table.c.reruns > 0, 1), else_=0))
    summary = conn.execute(
        sa.select(
            key,
            sa.func.count(),
            _failed_sum(table.c.outcome),
            reruns,
            sa.func.min(table.c.finished_at),
            sa.func.max(table.c.finished_at),
        )
        .where(*cond, *few)
        .group_by(key)
    ).all()
    rows = {
        k: (n, int(f or 0), int(r or 0), first, last)
        for k, n, f, r, first, last in summary
        if k in wanted
    }
    eventful = sorted(k for k, (_, f, r, _, _) in rows.items() if f or r)
    sequences: dict[int, list[tuple[int, int, bool, int]]] = {}
    for start in range(0, len(eventful), _IN_CHUNK):
        chunk = eventful[start : start + _IN_CHUNK]
        query = (
            sa.select(key, table.c.finished_at, table.c.run_ref, table.c.outcome, table.c.reruns)
            .where(key.in_(chunk), *cond)
            .order_by(key, table.c.finished_at, table.c.run_ref)
        )
        for k, at, ref, outcome, rr in conn.execute(query):
            sequences.setdefault(k, []).append((at, ref, outcome in FAILED_CODES, rr))
    for k in sorted(rows):
        n, f, r, first, last = rows[k]
        seq = sequences.get(k)
        yield k, (n, f, r, first, last, tuple(seq) if seq is not None else None)


class RunOutcomes(Struct, frozen=True, kw_only=True):
    """What `triage` reads of one run and its baseline runs."""

    run: RunRow
    baseline: tuple[RunRow, ...]  # latest first
    jobs: Mapping[int, Mapping[JobKey, Outcome]]  # per run (its ref): each job's outcome
    failed_tests: Mapping[int, frozenset[tuple[JobKey, str]]]  # per run: unit-test failures


def find_run(conn: sa.Connection, run_id: str) -> RunRow | None:
    c = runs.c
    row = conn.execute(
        sa.select(c.id, c.run_id, c.commit_sha, c.finished_at, c.ref, c.source).where(
            c.run_id == run_id
        )
    ).first()
    return RunRow(*row) if row is not None else None


# An unknown --run is matched against this many of the latest run ids.
SUGGEST_RUNS = 1000


def run_outcomes(store: Store, run_id: str, baseline: RunFilter, count: int) -> RunOutcomes:
    """One run's job outcomes and failed unit tests, and the same of the latest
    `count` runs of `baseline` that finished no later than it (the run itself
    left out). Each read goes through an index: runs (ref, finished_at),
    run_jobs unique (run_ref, job_id), results' partial index of failures."""
    with store.transaction() as conn:
        run = find_run(conn, run_id)
        if run is None:
            # "Did you mean" over the latest runs only: one bounded read.
            recent = list(
                conn.execute(
                    sa.select(runs.c.run_id)
                    .order_by(runs.c.finished_at.desc(), runs.c.id.desc())
                    .limit(SUGGEST_RUNS)
                ).scalars()
            )
            latest = ", ".join(recent[:5])
            raise UsageError(
                f"--run {run_id}: no such run in {store.shown}"
                + did_you_mean(run_id, recent)
                + (f" (the latest: {latest})" if latest else " (it holds no runs)")
            )
        c = runs.c
        where = [c.ref == baseline.ref, c.finished_at <= run.finished_at, c.id != run.ref]
        if baseline.source is not None:
            where.append(c.source == baseline.source)
        rows = conn.execute(
            sa.select(c.id, c.run_id, c.commit_sha, c.finished_at, c.ref, c.source)
            .where(*where)
            .order_by(c.finished_at.desc(), c.id.desc())
            .limit(count)
        ).all()
        base = tuple(RunRow(*r) for r in rows)
        wanted = [run.ref, *(b.ref for b in base)]
        job_keys = read_jobs(conn)
        outcomes: dict[int, dict[JobKey, Outcome]] = {ref: {} for ref in wanted}
        for ref, job_id, outcome in conn.execute(
            sa.select(run_jobs.c.run_ref, run_jobs.c.job_id, run_jobs.c.outcome).where(
                run_jobs.c.run_ref.in_(wanted)
            )
        ):
            outcomes[ref][job_keys[job_id]] = OUTCOMES.get(outcome, Outcome.FAILED)
        failed: dict[int, set[tuple[JobKey, str]]] = {ref: set() for ref in wanted}
        query = (
            sa.select(results.c.run_ref, cases.c.job_id, cases.c.node_id)
            .select_from(results.join(cases, cases.c.id == results.c.case_id))
            .where(results.c.run_ref.in_(wanted), _FAILED_WHERE)
        )
        for ref, job_id, node in conn.execute(query):
            key = job_keys[job_id]
            if key.unit:
                failed[ref].add((key, node))
    return RunOutcomes(
        run=run,
        baseline=base,
        jobs=outcomes,
        failed_tests={ref: frozenset(v) for ref, v in failed.items()},
    )


def run_durations(store: Store) -> dict[JobKey, list[float]]:
    """Per job, the measured seconds of each stored run of it: the sum of its
    tests' durations in the run (skipped tests and tests without a duration
    left out; a run with none of them has no figure). One aggregate query over
    `results` joined to `cases`."""
    seconds = sa.func.sum(results.c.duration)
    query = (
        sa.select(cases.c.job_id, results.c.run_ref, seconds)
        .select_from(results.join(cases, cases.c.id == results.c.case_id))
        .where(results.c.duration.is_not(None), results.c.outcome != SKIPPED)
        .group_by(cases.c.job_id, results.c.run_ref)
        .order_by(cases.c.job_id, results.c.run_ref)
    )
    found: dict[JobKey, list[float]] = {}
    with store.transaction() as conn:
        job_keys = read_jobs(conn)
        for job_id, run_ref, total in conn.execute(query):
            seconds = float(total)
            if not 0 <= seconds < _MAX_RUN_SECONDS:
                # Ingest bounds each duration; a store written otherwise is refused.
                raise ResultsStoreError(
                    f"results store {store.shown}: run {run_ref} of job {job_id} sums to "
                    f"{seconds:g} seconds of tests, not a duration"
                )
            found.setdefault(job_keys[job_id], []).append(seconds)
    return found


_PRUNE_CASES = 20_000  # cases per DELETE of results: a range of the primary key


def prune(store: Store, before: int) -> dict[str, int]:
    """Delete the runs that finished before `before` (epoch seconds), with their
    jobs' outcomes and results, in one transaction. Results go in batches of a
    range of case ids each: every batch is a range scan of the primary key
    (case_id, finished_at, run_ref), so the whole prune reads the table once.
    Rows deleted, per table."""
    deleted = {"runs": 0, "run_jobs": 0, "results": 0}
    with store.transaction() as conn:
        top = conn.execute(sa.select(sa.func.max(cases.c.id))).scalar_one_or_none() or 0
        for start in range(0, top + 1, _PRUNE_CASES):
            done = conn.execute(
                results.delete().where(
                    results.c.case_id >= start,
                    results.c.case_id < start + _PRUNE_CASES,
                    results.c.finished_at < before,
                )
            )
            deleted["results"] += max(done.rowcount, 0)
        done = conn.execute(run_jobs.delete().where(run_jobs.c.finished_at < before))
        deleted["run_jobs"] = max(done.rowcount, 0)
        done = conn.execute(runs.delete().where(runs.c.finished_at < before))
        deleted["runs"] = max(done.rowcount, 0)
    return deleted


def counts(store: Store) -> Mapping[str, int]:
    """Rows per table (for messages and tests)."""
    with store.transaction() as conn:
        return {
            t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
            for t in (runs, jobs, run_jobs, cases, results)
        }


def _raw_rows(conn: sa.Connection, query: sa.Select) -> list[tuple]:
    """A query's rows as the driver returns them: compiled by SQLAlchemy for the
    dialect, run on the driver's cursor (SQLAlchemy's own rows cost as much
    again as reading them, for the 100,000s of rows of a results table)."""
    compiled = query.compile(dialect=conn.dialect)
    params = compiled.params
    cursor = conn.connection.cursor()
    try:
        if compiled.positional:
            cursor.execute(str(compiled), tuple(params[k] for k in compiled.positiontup or []))
        else:
            cursor.execute(str(compiled), params)
        return list(cursor.fetchall())
    finally:
        cursor.close()


# Per key (a whole job, or a unit-test bucket's test), per run ref: the stored
# outcome code and reruns.
Cells = dict[tuple[JobKey, str | None], dict[int, tuple[int, int]]]


def outcome_cells(store: Store, *, since: int | None) -> tuple[dict[int, RunRow], Cells]:
    """Every stored outcome since `since` (epoch seconds; None: all), skipped
    ones included, for the keys `histories` reads by default: one test of each
    unit-test bucket, one whole job of every other job. What a test-by-run
    grid shows; verdicts come from `flaky`, not from here."""
    found: Cells = {}
    with store.transaction() as conn:
        run_rows = read_runs(conn)
        job_keys = read_jobs(conn)
        whole = run_jobs.c
        query = sa.select(whole.job_id, whole.run_ref, whole.outcome, whole.reruns)
        if since is not None:
            query = query.where(whole.finished_at >= since)
        for job_id, ref, outcome, reruns in conn.execute(query).all():
            key = job_keys[job_id]
            if not key.unit:
                found.setdefault((key, None), {})[ref] = (outcome, reruns)
        unit_ids = sorted(i for i, k in job_keys.items() if k.unit)
        if unit_ids:
            case_of = {
                cid: (job_keys[job_id], node)
                for cid, job_id, node in conn.execute(
                    sa.select(cases.c.id, cases.c.job_id, cases.c.node_id).where(
                        cases.c.job_id.in_(unit_ids)
                    )
                )
            }
            tests = results.c
            query = sa.select(tests.case_id, tests.run_ref, tests.outcome, tests.reruns)
            if since is not None:
                query = query.where(tests.finished_at >= since)
            # In primary-key order: each test's results come together.
            rows = _raw_rows(conn, query.order_by(tests.case_id))
            for case_id, group in groupby(rows, itemgetter(0)):
                key = case_of.get(case_id)
                if key is not None:
                    found[key] = {ref: (outcome, reruns) for _, ref, outcome, reruns in group}
    return run_rows, found
