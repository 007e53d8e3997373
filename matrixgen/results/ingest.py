"""Ingest into the results store: one run's test records, staged as they are
read, folded into one result per test and stored, in one transaction (see
IngestSink).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from typing import Any

import sqlalchemy as sa
from msgspec import Struct
from msgspec.structs import asdict

from matrixgen.model.errors import ResultsFileError, UsageError
from matrixgen.results.junit import FUTURE_SKEW, MESSAGE_LIMIT, Outcome, Testcase
from matrixgen.results.queries import read_jobs
from matrixgen.results.reasons import REASON_LIMIT, kind_of, reason
from matrixgen.results.rollup import roll_up
from matrixgen.results.store import JobKey, JobResults, RunInfo, Store
from matrixgen.results.tables import (
    FAILED_CODES,
    NODE_ID_LIMIT,
    OUTCOME_CODES,
    SKIPPED,
    SOURCE_LIMIT,
    TEST_CASE_LIMIT,
    TEXT_LIMIT,
    cases,
    ensure_partition,
    jobs,
    results,
    run_jobs,
    runs,
)
from matrixgen.util.nodeid import is_node_id
from matrixgen.views.table import Column, Report


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

    def table(self) -> Report:
        """Its jobs, the ones stored now first, each with its counts and status."""
        columns = [Column(h) for h in ("job", "target", "platform", "environment", "scope")]
        columns += [Column(h) for h in ("tests", "failed", "skipped", "reruns", "status")]
        rows = []
        for j in (*self.stored, *self.already):
            names = (j.job_name, j.target, j.job.platform, j.job.environment, j.job.place)
            status = "stored" if j.stored else "already stored"
            rows.append((*names, j.tests, j.failed, j.skipped, j.reruns, status))
        return Report(columns, rows)


def _epoch(moment: dt.datetime) -> int:
    return int(moment.replace(tzinfo=moment.tzinfo or dt.UTC).timestamp())  # naive: UTC


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
_SKEW = int(FUTURE_SKEW.total_seconds())
_WORK_MEM = "64MB"
_staging = sa.MetaData()


def _record_columns(*middle: sa.Column) -> list[sa.Column]:
    """A test record's columns, both staging tables'; `middle` goes before the
    failed-record columns, which a row of a record that did not fail leaves out."""
    return [
        sa.Column("job_id", sa.Integer, nullable=False),
        sa.Column("node_id", sa.String(NODE_ID_LIMIT), nullable=False),
        sa.Column("outcome", sa.SmallInteger, nullable=False),
        sa.Column("reruns", sa.Integer, nullable=False),
        sa.Column("duration", sa.Float),
        sa.Column("message", sa.String(MESSAGE_LIMIT)),
        *middle,
        sa.Column("reason", sa.String(REASON_LIMIT)),  # a failed record's (results/reasons.py)
        sa.Column("output_line", sa.String(MESSAGE_LIMIT)),  # what a known-failure pattern matched
    ]


staged = sa.Table(
    "matrixgen_staged",
    _staging,
    sa.Column("seq", sa.Integer, nullable=False),  # the record's place in the ingest
    sa.Column("file_no", sa.Integer, nullable=False),
    *_record_columns(sa.Column("odd", sa.Boolean, nullable=False)),  # names no test
    prefixes=["TEMPORARY"],
)
folded = sa.Table("matrixgen_folded", _staging, *_record_columns(), prefixes=["TEMPORARY"])
_FOLDED_KEYS = [c.name for c in folded.columns]
_STAGED_FAILED_KEYS = [c.name for c in staged.columns]
_STAGED_KEYS = _STAGED_FAILED_KEYS[:-2]  # a record that did not fail: no reason, no line
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
    another (`number`: the file's place), in batches to the staging table;
    `finish` folds them as docs/results-store.md says, then writes each table
    with one INSERT ... SELECT."""

    def __init__(self, conn: sa.Connection, run: RunInfo) -> None:
        self.conn = conn
        self.run = run
        self.rows: list[tuple] = []
        self.failed_rows: list[tuple] = []
        self.seq = 0
        self.finished = False
        self.job_of: dict[JobKey, int] = {}
        self.jobs: dict[int, tuple[JobKey, str, str]] = {}  # first name and target per job
        self.stored_jobs = {key.identity(): job_id for job_id, key in read_jobs(conn).items()}
        self.now = int(dt.datetime.now(dt.UTC).timestamp())
        self.new_run, self.ref, self.at = _run_row(conn, run)
        if conn.dialect.name == "postgresql":
            # The folding's sorts and hashes of a run's records in memory, not on disk.
            conn.exec_driver_sql(f"SET LOCAL work_mem = '{_WORK_MEM}'")
        for table in (staged, folded):
            table.drop(conn, checkfirst=True)
            table.create(conn)

    def job(self, job: JobKey, job_name: str, target: str) -> int:
        """The job's id; a job named here is stored even when no record is its."""
        job_id = self.job_of.get(job)
        if job_id is None:
            job_id = self.stored_jobs.get(job.identity())
            if job_id is None:
                job_id = self.conn.execute(
                    jobs.insert().values(**asdict(job))
                ).inserted_primary_key[0]
            self.job_of[job] = job_id
            self.jobs.setdefault(job_id, (job, job_name, target))
        return job_id

    def add(
        self,
        job: JobKey,
        job_name: str,
        target: str,
        number: int,
        test: Testcase,
        where: str = "",
    ) -> None:
        """Stage one record (`where`: its report file, for a message)."""
        job_id = self.job(job, job_name, target)
        node = test.node_id
        size = len(node) if node.isascii() else len(node.encode("utf-8", "surrogatepass"))
        if size > NODE_ID_LIMIT:
            at = f"{where}:{test.line}: " if where else ""
            raise ResultsFileError(
                f"{at}test {node[:80]}... has a node id of {size:,} bytes (UTF-8), more than "
                f"the {NODE_ID_LIMIT:,} a results store holds: nothing of this ingest is stored"
            )
        code = OUTCOME_CODES[test.outcome]
        row = (
            self.seq,
            number,
            job_id,
            node,
            code,
            test.reruns,
            test.duration,
            test.message[:MESSAGE_LIMIT] or None,
            job.unit and not is_node_id(node),
        )
        if code in FAILED_CODES:
            # A failed record's reason, computed once, here, and the output line
            # a known failure matched: staged with their own columns (the others
            # have none: their rows are written without those columns).
            why = reason(kind_of(test.outcome, test.muted_from), test.message)
            self.failed_rows.append((*row, why, test.output_line[:MESSAGE_LIMIT] or None))
        else:
            self.rows.append(row)
        self.seq += 1
        if len(self.rows) + len(self.failed_rows) >= _STAGE_BATCH:
            self.flush()

    def flush(self) -> None:
        _bulk_insert(self.conn, staged, _STAGED_KEYS, self.rows)
        _bulk_insert(self.conn, staged, _STAGED_FAILED_KEYS, self.failed_rows)
        self.rows, self.failed_rows = [], []

    def finish(self, finished_at: dt.datetime | None) -> IngestReport:
        """Fold the records and store them; what was stored, per job."""
        self.flush()
        conn = self.conn
        if self.new_run:
            # Never later than now (plus a clock's skew), whoever calls: a run
            # dated 2099 would be the latest of every test for good.
            at = _epoch(finished_at) if finished_at else self.at
            self.at = at if at <= self.now + _SKEW else self.now
            conn.execute(runs.update().where(runs.c.id == self.ref).values(finished_at=self.at))
        s = staged.c
        repeated = (
            sa.select(s.job_id).group_by(s.job_id, s.node_id).having(sa.func.count() > 1).limit(1)
        )
        source, tests = staged, self.seq
        if conn.execute(repeated).first() is not None:
            # Some test has several records (reruns): fold them, one row each.
            conn.execute(folded.insert().from_select(_FOLDED_KEYS, _folding()))
            source = folded
            each = sa.select(s.file_no, s.job_id, s.node_id).distinct().subquery()
            tests = conn.execute(sa.select(sa.func.count()).select_from(each)).scalar_one()
        mine = sa.select(run_jobs.c.job_id).where(run_jobs.c.run_ref == self.ref)
        present = set(conn.execute(mine).scalars())
        figures = {job_id: rest for job_id, *rest in conn.execute(_job_figures(source))}
        report = [
            self._job(job_id, figures.get(job_id, (0, 0, 0, 0)), job_id not in present)
            for job_id in self.jobs
        ]
        fresh = sorted(self.job_of[j.job] for j in report if j.stored)
        if fresh:
            ensure_partition(conn, self.at)
            _store_folded(conn, source, self.ref, self.at, fresh)
            roll_up(conn, self.at)
            job_rows = [self._run_job(j) for j in report if j.stored]
            _bulk_insert(conn, run_jobs, [c.name for c in run_jobs.columns], job_rows)
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

    def _run_job(self, j: JobIngest) -> tuple:
        """Its row of `run_jobs`, in the order of the table's columns."""
        outcome = (
            Outcome.FAILED
            if j.failed
            else Outcome.SKIPPED
            if j.skipped == j.tests
            else Outcome.PASSED
        )
        name, target = j.job_name[:TEST_CASE_LIMIT], j.target[:TEXT_LIMIT]
        job_id, code = self.job_of[j.job], OUTCOME_CODES[outcome]
        return (job_id, self.at, self.ref, name, target, code, j.tests, j.failed, j.reruns)


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
    inner = sa.select(
        s.seq,
        *(s[k] for k in _FOLDED_KEYS),
        sa.func.row_number()
        .over(partition_by=[s.job_id, s.node_id, s.file_no], order_by=s.seq.desc())
        .label("file_back"),
    ).subquery()
    i = inner.c
    test = [i.job_id, i.node_id]
    outer = sa.select(
        *(i[k] for k in _FOLDED_KEYS if k != "reruns"),
        sa.func.row_number().over(partition_by=test, order_by=i.seq.desc()).label("back"),
        sa.func.count().over(partition_by=test).label("records"),
        sa.func.sum(sa.case((i.file_back == 1, i.reruns), else_=0))
        .over(partition_by=test)
        .label("last_reruns"),
    ).subquery()
    o = outer.c
    reruns = (o.last_reruns + o.records - 1).label("reruns")
    return sa.select(*(reruns if k == "reruns" else o[k] for k in _FOLDED_KEYS)).where(o.back == 1)


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
    # Materialized, so that PostgreSQL finds the few missing tests with a hash
    # anti-join and sorts only them (asked for in order, it sorted both sides).
    missing = (
        sa.select(f.job_id, f.node_id)
        .where(chosen, ~sa.exists().where(same))
        .cte("missing")
        .prefix_with("MATERIALIZED")
    )
    ordered = sa.select(missing.c.job_id, missing.c.node_id).order_by(*missing.c)
    conn.execute(cases.insert().from_select(["job_id", "node_id"], ordered))
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
            f.reason,
            f.output_line,
        )
        .select_from(source.join(cases, same))
        .where(chosen)
    )
    conn.execute(results.insert().from_select([c.name for c in results.columns], rows))


def _bulk_insert(
    conn: sa.Connection, table: sa.Table, keys: Sequence[str], rows: Sequence[tuple]
) -> None:
    """Many rows of one shape (values in the order of `keys`). On PostgreSQL
    through COPY FROM STDIN, in the command's transaction: the rows stream in
    the text format psycopg writes, several times faster than a batch of
    INSERTs. Else the INSERT is compiled by SQLAlchemy once, for this dialect,
    and the driver runs it for every row (SQLAlchemy's own executemany builds
    parameters row by row in Python: most of an ingest's time)."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        preparer = conn.dialect.identifier_preparer
        columns = ", ".join(preparer.quote(k) for k in keys)
        statement = f"COPY {preparer.format_table(table)} ({columns}) FROM STDIN"
        with conn.connection.driver_connection.cursor() as cursor, cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
        return
    compiled = table.insert().compile(dialect=conn.dialect, column_keys=list(keys))
    where = {k: i for i, k in enumerate(keys)}
    order = [where[k] for k in compiled.positiontup or []]  # SQLite's parameters: positional
    if order != list(range(len(keys))):
        rows = [tuple(r[i] for i in order) for r in rows]
    with closing(conn.connection.cursor()) as cursor:
        cursor.executemany(str(compiled), rows)
