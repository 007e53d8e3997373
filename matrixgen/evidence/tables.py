"""The results store's schema: test results per run, job and test, in SQLite or
PostgreSQL.

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

sqlalchemy is imported only by the store's modules (this one, store, ingest,
queries), and those only by the commands that use the store.
"""

from __future__ import annotations

import sqlalchemy as sa

from matrixgen.evidence.junit import Outcome

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
FAILED_WHERE = _failed(results)


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
