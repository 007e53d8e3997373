"""The results store: where it is, opening it in SQLite or PostgreSQL, each
transaction bounded in time and migrated first (tables.py: the schema and its
migrations), and the values its reads and writes exchange.

sqlalchemy is imported only by the store's modules, and those only by the
commands that use the store.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import sqlalchemy as sa
from msgspec import Struct, field
from msgspec.structs import astuple

from matrixgen.model.errors import ResultsStoreError, UsageError
from matrixgen.results.junit import Testcase
from matrixgen.results.tables import MIGRATIONS, SCHEMA_VERSION, schema_table
from matrixgen.util.checkout import choose_store, default_store_path
from matrixgen.util.values import ComparedValue, JsonLayout

# What installs the PostgreSQL driver: the base install leaves it out.
POSTGRES_EXTRA = "matrixgen-ci[postgres]"
_ADVISORY_LOCK = 0x6D677276  # "mgrv": the one lock every writer takes
# Every transaction on a store is bounded in time ($MATRIXGEN_STORE_TIMEOUT).
TIMEOUT_VARIABLE = "MATRIXGEN_STORE_TIMEOUT"
DEFAULT_TIMEOUT = 300.0
_PROGRESS_STEPS = 10_000  # SQLite virtual-machine steps between two looks at the clock


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

    @property
    def where(self) -> str:
        return f"{self.platform}/{self.environment}"

    @property
    def case(self) -> str:
        """Its test case, with its tag: `gpt3_tp2[lts]`."""
        return self.test_case + (f"[{self.tag}]" if self.tag else "")

    @property
    def shown_tag(self) -> str | None:
        return self.tag or None

    def identity(self) -> tuple[str, ...]:
        """Every field but `unit`: the jobs table's unique key."""
        return astuple(self)[:-1]


# The JSON keys (flaky, triage) of a value's `job` (a JobKey) and `node_id`.
JOB_JSON_KEYS = (
    ("model", "job.model"),
    ("test_case", "job.test_case"),
    ("tag", "job.shown_tag"),
    ("node_id", "node_id"),
    ("system", "job.system"),
    ("platform", "job.platform"),
    ("environment", "job.environment"),
    ("scope", "job.scope"),
)


class JobResults(Struct, frozen=True, kw_only=True):
    """What one ingest stores for one job."""

    job: JobKey
    job_name: str
    target: str
    testcases: tuple[Testcase, ...]


class RunInfo(Struct, frozen=True, kw_only=True):
    run_id: str
    commit: str | None
    finished_at: dt.datetime | None  # None: keep the stored one, else now
    ref: str | None = None  # the branch or tag the run was for; None: not known
    source: str | None = None  # what started it (schedule, merge_request_event, push...)


class RunRow(Struct, frozen=True):
    ref: int
    run_id: str
    commit: str | None
    finished_at: int
    git_ref: str | None = None  # the branch or tag; None: not known (stored before schema 3)
    source: str | None = None

    # Its JSON (triage's runs): the run, its branch as `ref`, its end as UTC text.
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            ("run_id", "run_id"),
            ("commit", "commit"),
            ("ref", "git_ref"),
            ("source", "source"),
            ("at", "finished_text"),
        )
    )

    @property
    def finished_text(self) -> str:
        return utc_text(self.finished_at)


def utc_text(at: int) -> str:
    """Seconds since the epoch as the JSON outputs write a time (UTC, to the second)."""
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class History(Struct, frozen=True):
    """One key's results in the window: a whole job (node_id None) or one test.
    `sequence`: (finished_at, run_ref, failed, reruns) in time order, read only
    for keys that failed or were rerun (None: every run passed)."""

    job: JobKey
    node_id: str | None
    runs: int
    failures: int
    rerun_runs: int
    first_at: int
    last_at: int
    sequence: tuple[tuple[int, int, bool, int], ...] | None
    # Read with the sequence: each reason's failures (most first), the latest's.
    reasons: tuple[tuple[str, int], ...] = ()
    reason: str | None = None


# --------------------------------------------------------------------------- opening


def store_url(given: str | None) -> str:
    """The SQLAlchemy URL of --db, $MATRIXGEN_RESULTS_DB, or the default file
    (`util.checkout.choose_store`). A plain path is a SQLite file; postgresql://
    URLs use psycopg 3."""
    choice = choose_store(given)
    if choice.note is not None:
        raise ResultsStoreError(choice.note)
    text = choice.location or ""
    if not text:
        return "sqlite:///" + str(default_store_path())
    lowered = text.lower()
    for prefix in ("postgresql://", "postgres://"):
        if lowered.startswith(prefix):
            return "postgresql+psycopg://" + text[len(prefix) :]
    if lowered.startswith(("postgresql+psycopg://", "sqlite://")):
        return text
    if "://" in text:
        raise UsageError(
            f"--db {_shown(text)}: expected a file path, sqlite:///PATH or postgresql://..."
        )
    return "sqlite:///" + text


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
    NOT_COMPARED: ClassVar[frozenset[str]] = frozenset({"migrated", "clock"})

    engine: sa.Engine
    url: str
    write: bool
    migrated: list[bool] = field(default_factory=list)  # [True] once checked
    clock: list[_Deadline] = field(default_factory=list)  # SQLite: the query time bound

    @property
    def shown(self) -> str:
        return _shown(self.url)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        """One transaction, migrated first (under the writers' lock); a store is
        checked once, after its first commit."""
        checked = False
        try:
            with self.engine.begin() as conn:
                postgresql = self.dialect == "postgresql"
                if postgresql:
                    # Every statement is bounded in time.
                    limit = int(store_timeout() * 1000)
                    conn.execute(sa.text(f"SET LOCAL statement_timeout = {limit}"))
                    # JIT compiles each partition's scan anew (100 days of results:
                    # 2 s of compiling for a 5 s aggregate); these queries gain nothing.
                    conn.execute(sa.text("SET LOCAL jit = off"))
                    if self.write:
                        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_ADVISORY_LOCK)))
                if not self.migrated:
                    _migrate(conn, self)  # a reader migrates an older store under the lock
                    checked = True
                if postgresql and not self.write:
                    # As a SQLite reader's file: past the migration, no writes.
                    conn.execute(sa.text("SET TRANSACTION READ ONLY"))
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
    """When the running transaction must end (a SQLite progress handler
    interrupts a query past it)."""

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
    SQLite file read-only (on PostgreSQL: READ ONLY transactions); every
    transaction is bounded in time (SQLite: a progress handler; PostgreSQL:
    `statement_timeout`)."""
    url = store_url(given)
    path = sqlite_path(url)
    clock: list[_Deadline] = []
    if path is not None:
        if not write and not path.exists():
            raise ResultsStoreError(
                f"no results store at {path}: ingest results first (matrixgen results ingest)"
            )
        if write:
            _prepare_sqlite_file(path)
        clock.append(_Deadline(store_timeout()))
    try:
        if path is not None:
            engine = _sqlite_engine(url, path, write=write, deadline=clock[0])
        else:
            engine = sa.create_engine(url, pool_pre_ping=False)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise UsageError(f"--db {_shown(url)}: {exc}") from None
    except ImportError as exc:
        # SQLAlchemy imports the driver when it makes the engine: without the
        # `postgres` extra there is none.
        if path is not None or not (exc.name or "").startswith("psycopg"):
            raise
        raise ResultsStoreError(
            f"results store {_shown(url)}: the PostgreSQL driver (psycopg) is not "
            f"installed: install {POSTGRES_EXTRA} (docs/setup.md), or give a SQLite file"
        ) from None
    return Store(engine=engine, url=url, write=write, clock=clock)


def _sqlite_engine(url: str, path: Path, *, write: bool, deadline: _Deadline) -> sa.Engine:
    """A SQLite engine; a reader's is read-only (`mode=ro`: reading never
    changes the file, nor creates a journal beside it)."""
    if write:
        engine = sa.create_engine(url, connect_args={"timeout": 60})
    else:
        import sqlite3

        target = path.resolve().as_uri() + "?mode=ro"
        engine = sa.create_engine(
            "sqlite://",
            creator=lambda: sqlite3.connect(target, uri=True, timeout=60, check_same_thread=False),
        )
    # pysqlite would open transactions itself, late and without DDL; SQLAlchemy's
    # BEGIN starts them (BEGIN IMMEDIATE for writers: the lock). Every transaction
    # gets `deadline` anew; a query still running past it stops.

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        dbapi_connection.set_progress_handler(deadline.expired, _PROGRESS_STEPS)

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        deadline.restart()
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _prepare_sqlite_file(path: Path) -> None:
    for part in (path.parent, path):
        if part.is_symlink():
            raise ResultsStoreError(f"{part} is a symbolic link; the results store is not written")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ResultsStoreError(f"cannot create {path.parent}: {exc.strerror}") from None


# What a SQLite store may hold besides its tables: their indexes. A view or a
# trigger is refused: the schema has none, and one could make any read loop.
_SQLITE_KINDS = frozenset({"table", "index"})


def _check_sqlite_schema(conn: sa.Connection, store: Store) -> None:
    """Refuse a SQLite file with what a store never has (views, triggers,
    virtual tables), reading `sqlite_master` only."""
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
