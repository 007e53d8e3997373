"""The results store's schema, one for SQLite and PostgreSQL (SQLAlchemy Core).

Columns a schema version added are NULL in rows stored before it. Which read
each index serves, the weekly partitions and totals: docs/results-store.md.
The tool migrates a store when it opens it, in the command's transaction,
under the writers' lock, so two CI runners cannot both migrate; a store of a
newer matrixgen is refused, never downgraded.
"""

from __future__ import annotations

import datetime as dt
import re

import sqlalchemy as sa

from matrixgen.results.junit import MESSAGE_LIMIT, Outcome
from matrixgen.results.reasons import REASON_LIMIT, kind_of, reason

SCHEMA_VERSION = 6
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
# A node id's length in bytes of UTF-8, the same on every backend: PostgreSQL's
# btree entries (the unique (job_id, node_id) of cases) stop near 2,700 bytes,
# whatever the characters; a column of NODE_ID_LIMIT characters holds it.
NODE_ID_LIMIT = 2000
TEXT_LIMIT = 255
TEST_CASE_LIMIT = 1000
SOURCE_LIMIT = 64

metadata = sa.MetaData()
# The columns of a job's identity, in JobKey's order: the jobs table's unique key.
JOB_IDENTITY = ("system", "scope", "platform", "environment", "model", "test_case", "tag")

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
    sa.UniqueConstraint(*JOB_IDENTITY, name="uq_jobs_identity"),
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


def _result_columns(foreign_keys: bool, *, reasons: bool = True) -> list[sa.Column]:
    """`results` with the foreign keys of schemas 1 to 3, the reasons of 6."""

    def to(target: str) -> list[sa.ForeignKey]:
        return [sa.ForeignKey(target)] if foreign_keys else []

    return [
        sa.Column("case_id", sa.Integer, *to("cases.id"), primary_key=True),
        sa.Column("finished_at", sa.BigInteger, primary_key=True),
        sa.Column("run_ref", sa.Integer, *to("runs.id"), primary_key=True),
        sa.Column("outcome", sa.SmallInteger, nullable=False),
        sa.Column("reruns", sa.SmallInteger, nullable=False),
        sa.Column("duration", sa.Float),
        sa.Column("message", sa.String(MESSAGE_LIMIT)),
        *(_reason_columns() if reasons else []),
    ]


def _reason_columns() -> list[sa.Column]:
    """Schema 6: a failed result's reason (results/reasons.py), and the output
    line a known-failure pattern matched at ingest (results/known.py)."""
    return [
        sa.Column("reason", sa.String(REASON_LIMIT)),
        sa.Column("output_line", sa.String(MESSAGE_LIMIT)),
    ]


# Schema 5, PostgreSQL: one partition per week (Monday to Monday, UTC) of
# finished_at (see ensure_partition).
PARTITION_SECONDS = 7 * 86_400
_MONDAY = 4 * 86_400  # 1970-01-05, the first Monday after the epoch
results = sa.Table(
    "results",
    metadata,
    *_result_columns(foreign_keys=False),
    sqlite_with_rowid=False,
    postgresql_partition_by="RANGE (finished_at)",
)
# `results` as schema 5 made it (what `_migrate_5` creates).
_results_5 = sa.Table(
    "results",
    sa.MetaData(),
    *_result_columns(foreign_keys=False, reasons=False),
    sqlite_with_rowid=False,
    postgresql_partition_by="RANGE (finished_at)",
)
# Schema 5 (results/rollup.py): `flaky` reads one row per test and week over.
case_weeks = sa.Table(
    "case_weeks",
    metadata,
    sa.Column("week", sa.BigInteger, primary_key=True),  # its Monday 00:00 UTC, epoch seconds
    sa.Column("case_id", sa.Integer, primary_key=True),
    sa.Column("runs", sa.Integer, nullable=False),
    sa.Column("failures", sa.Integer, nullable=False),  # failed, errored or muted
    sa.Column("rerun_runs", sa.Integer, nullable=False),  # runs with reruns
    sa.Column("first_at", sa.BigInteger, nullable=False),
    sa.Column("last_at", sa.BigInteger, nullable=False),
)
rolled_weeks = sa.Table(
    "rolled_weeks", metadata, sa.Column("week", sa.BigInteger, primary_key=True)
)


def _failed(table: sa.Table) -> sa.ColumnElement[bool]:
    """Failed or errored, the codes written out (not bound): the partial index's
    predicate, which a query must repeat for the index to serve it."""
    return table.c.outcome.in_([sa.literal_column(str(code)) for code in FAILED_CODES])


# `results` as schemas 1 to 4 have it (PostgreSQL drops its foreign keys in 4);
# `_migrate_1` creates it, and SQLite keeps it.
_results_1 = sa.Table(
    "results",
    sa.MetaData(),
    *_result_columns(foreign_keys=True, reasons=False),
    sqlite_with_rowid=False,
)


def _failed_index(table: sa.Table, *, with_reason: bool) -> sa.Index:
    """Schema 3: a run's failed tests, for `triage` (few: a small index); since
    schema 6 with their reasons."""
    columns = [table.c.run_ref, table.c.case_id, *([table.c.reason] if with_reason else [])]
    return sa.Index(
        "ix_results_failed_run",
        *columns,
        sqlite_where=_failed(table),
        postgresql_where=_failed(table),
    )


_FAILED_INDEX_3 = _failed_index(_results_1.to_metadata(sa.MetaData()), with_reason=False)
_failed_index(_results_5, with_reason=False)  # created with the table (schema 5)
FAILED_INDEX_6 = _failed_index(results, with_reason=True)  # created with the table (schema 6)
FAILED_WHERE = _failed(results)


def _migrate_1(conn: sa.Connection) -> None:
    """The first schema (`runs` as it was then: later versions add theirs)."""
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
    metadata.create_all(conn, tables=[jobs, run_jobs, cases])
    cases.to_metadata(first)  # what the first results' foreign keys name
    _results_1.to_metadata(first).create(conn)


def _migrate_2(conn: sa.Connection) -> None:
    """Outcome 4, muted, in `results`: no table changes, but a matrixgen that
    knows only version 1 would read a muted failure as a pass, so it must
    refuse a store that may hold one."""


def _migrate_3(conn: sa.Connection) -> None:
    """`runs.ref` and `runs.source`, and the baseline lookups' index; additive."""
    preparer = conn.dialect.identifier_preparer
    for name in ("ref", "source"):
        column = sa.schema.CreateColumn(runs.c[name]).compile(dialect=conn.dialect)
        conn.exec_driver_sql(f"ALTER TABLE {preparer.format_table(runs)} ADD COLUMN {column}")
    for index in runs.indexes:
        if index.name == "ix_runs_ref_finished":
            index.create(conn)
    _FAILED_INDEX_3.create(conn)


def _migrate_4(conn: sa.Connection) -> None:
    """PostgreSQL: `results` loses its foreign keys, whose checks were two thirds
    of an ingest's time (docs/results-store.md); SQLite never enforced them."""
    if conn.dialect.name != "postgresql":
        return
    preparer = conn.dialect.identifier_preparer
    for key in sa.inspect(conn).get_foreign_keys(results.name):
        if key.get("name"):
            conn.exec_driver_sql(
                f"ALTER TABLE {preparer.format_table(results)} "
                f"DROP CONSTRAINT {preparer.quote(key['name'])}"
            )


def _migrate_5(conn: sa.Connection) -> None:
    """`case_weeks` and `rolled_weeks`, empty (the next ingest rolls the past
    weeks up); PostgreSQL also: `results` partitioned by week, for the reasons
    docs/results-store.md ("Schema 5") gives."""
    if conn.dialect.name == "postgresql":
        old = "matrixgen_results_4"
        conn.exec_driver_sql("DROP INDEX ix_results_failed_run")
        conn.exec_driver_sql(f"ALTER TABLE results RENAME TO {old}")
        conn.exec_driver_sql(f"ALTER TABLE {old} RENAME CONSTRAINT results_pkey TO {old}_pkey")
        _results_5.create(conn)  # with its failed-results index
        finished = conn.exec_driver_sql(f"SELECT DISTINCT finished_at FROM {old}").scalars()
        for start in sorted({partition_start(at) for at in finished}):
            ensure_partition(conn, start)
        columns = ", ".join(c.name for c in _results_5.columns)
        conn.exec_driver_sql(f"INSERT INTO results ({columns}) SELECT {columns} FROM {old}")
        conn.exec_driver_sql(f"DROP TABLE {old}")
    case_weeks.create(conn)
    rolled_weeks.create(conn)


_REASONS = "matrixgen_reasons"  # migration 6's map from (outcome, message) to reason


def _migrate_6(conn: sa.Connection) -> None:
    """The columns `reason` and `output_line` (no stored result has a line: the
    ingest reads outputs), each failed result's reason computed from its
    message (a muted one's as a failure: which element it was is not stored),
    and the failed-results index made again with the reason. Reasons are
    computed once per distinct (outcome, message) into a temporary table and
    set in one UPDATE; the index is made after."""
    preparer = conn.dialect.identifier_preparer
    for column in _reason_columns():
        added = sa.schema.CreateColumn(column).compile(dialect=conn.dialect)
        conn.exec_driver_sql(f"ALTER TABLE {preparer.format_table(results)} ADD COLUMN {added}")
    conn.exec_driver_sql("DROP INDEX ix_results_failed_run")
    r = results.c
    seen = conn.execute(
        sa.select(r.outcome, sa.func.coalesce(r.message, "")).where(FAILED_WHERE).distinct()
    ).all()
    if seen:
        mapping = sa.Table(
            _REASONS,
            sa.MetaData(),
            sa.Column("outcome", sa.SmallInteger, primary_key=True),
            sa.Column("message", sa.String(MESSAGE_LIMIT), primary_key=True),
            sa.Column("reason", sa.String(REASON_LIMIT), nullable=False),
            prefixes=["TEMPORARY"],
        )
        mapping.create(conn)
        rows = [
            {"outcome": o, "message": m, "reason": reason(kind_of(OUTCOMES[o]), m)} for o, m in seen
        ]
        for start in range(0, len(rows), 5_000):
            conn.execute(mapping.insert(), rows[start : start + 5_000])
        m = mapping.c
        found = (
            sa.select(m.reason)
            .where(m.outcome == r.outcome, m.message == sa.func.coalesce(r.message, ""))
            .scalar_subquery()
        )
        conn.execute(results.update().where(FAILED_WHERE).values(reason=found))
        mapping.drop(conn)
    FAILED_INDEX_6.create(conn)


def failed_count(outcome: sa.ColumnElement) -> sa.ColumnElement[int]:
    """1 for a failed result (failed, errored or muted), else 0."""
    return sa.case((outcome.in_(FAILED_CODES), 1), else_=0)


def partition_start(at: int) -> int:
    """The start of the week (Monday 00:00 UTC) that holds `at` (epoch seconds)."""
    return at - (at - _MONDAY) % PARTITION_SECONDS


def ensure_partition(conn: sa.Connection, at: int) -> None:
    """PostgreSQL: the partition of `results` that holds `at` (epoch seconds),
    made when missing (writers hold the store's lock: no two make it at once)."""
    if conn.dialect.name != "postgresql":
        return
    start = partition_start(at)
    day = dt.datetime.fromtimestamp(start, dt.UTC)
    conn.exec_driver_sql(
        f"CREATE TABLE IF NOT EXISTS results_{day:%Y%m%d} PARTITION OF results "
        f"FOR VALUES FROM ({start}) TO ({start + PARTITION_SECONDS})"
    )


def partitions(conn: sa.Connection) -> list[tuple[str, int, int]]:
    """PostgreSQL: the partitions of `results`, (name, start, end) by start."""
    if conn.dialect.name != "postgresql":
        return []
    rows = conn.exec_driver_sql(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'results'::regclass"
    )
    found = []
    for name, bound in rows:
        start, end = (int(v) for v in re.findall(r"-?\d+", bound))
        found.append((name, start, end))
    return sorted(found, key=lambda p: p[1])


# Version N is reached by running MIGRATIONS[N - 1] on a store at version N - 1.
# A later change appends a function; a released one is never edited.
MIGRATIONS = (_migrate_1, _migrate_2, _migrate_3, _migrate_4, _migrate_5, _migrate_6)
assert len(MIGRATIONS) == SCHEMA_VERSION
