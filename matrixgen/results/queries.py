"""Reading the results store: its runs and jobs, each key's history (`flaky`),
one run's outcomes beside its baseline runs (`triage`), run durations, the
stored outcomes of a test-by-run grid (the report), counts per table, and
prune.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from contextlib import closing
from itertools import groupby
from operator import itemgetter

import sqlalchemy as sa
from msgspec import Struct, field

from matrixgen.model.errors import ResultsStoreError, UsageError, did_you_mean
from matrixgen.results.junit import Outcome
from matrixgen.results.rollup import counted, forget, totals
from matrixgen.results.store import History, JobKey, RunRow, Store
from matrixgen.results.tables import (
    FAILED_CODES,
    FAILED_WHERE,
    JOB_IDENTITY,
    OUTCOMES,
    SKIPPED,
    cases,
    jobs,
    partition_start,
    partitions,
    results,
    run_jobs,
    runs,
)

_IN_CHUNK = 500
# A job's run is a sum of its tests' durations, each at most a year when ingested.
_MAX_RUN_SECONDS = 1e15


# A RunRow's columns, in its order.
_RUN_ROW = [runs.c[name] for name in ("id", "run_id", "commit_sha", "finished_at", "ref", "source")]


def read_runs(conn: sa.Connection) -> dict[int, RunRow]:
    return {row[0]: RunRow(*row) for row in conn.execute(sa.select(*_RUN_ROW))}


class RunFilter(Struct, frozen=True, kw_only=True):
    """Which runs a read keeps: those of one ref, or of any of `also` besides
    (and of one source, when given)."""

    ref: str
    source: str | None = None
    also: tuple[str, ...] = ()  # more refs whose runs count too

    @property
    def refs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.ref, *self.also)))

    def where(self) -> list[sa.ColumnElement[bool]]:
        """The matching runs, as conditions on `runs` (off the (ref, finished_at) index)."""
        refs = self.refs
        where = [runs.c.ref == refs[0] if len(refs) == 1 else runs.c.ref.in_(refs)]
        if self.source is not None:
            where.append(runs.c.source == self.source)
        return where

    def __str__(self) -> str:
        refs = self.refs
        named = f"ref {refs[0]}" if len(refs) == 1 else f"refs {', '.join(refs)}"
        return named + (f", source {self.source}" if self.source else "")


def read_jobs(conn: sa.Connection) -> dict[int, JobKey]:
    query = sa.select(jobs.c.id, *(jobs.c[k] for k in JOB_IDENTITY), jobs.c.unit)
    return {row[0]: JobKey(*row[1:8], unit=bool(row[8])) for row in conn.execute(query)}


def histories(
    store: Store,
    *,
    since: int | None,
    until: int | None = None,
    unit_jobs_whole: bool = False,
    only: RunFilter | None = None,
    keys: Collection[tuple[JobKey, str | None]] | None = None,
) -> tuple[dict[int, RunRow], list[History]]:
    """Every key's history in the window (epoch seconds, None: no bound): each
    test of a unit-test bucket, every other job whole (with unit_jobs_whole,
    buckets too). Skipped results are not runs, nor, with `only`, the runs it
    leaves out; with `keys`, only those (job, node id or None) keys (a node id
    of a whole job: that test of it, a check `triage` judges)."""
    chosen = set(keys) if keys is not None else None
    with store.transaction() as conn:
        run_rows = read_runs(conn)
        job_keys = read_jobs(conn)
        bucket_ids = unit_ids = {i for i, k in job_keys.items() if k.unit}
        wanted = set(job_keys) if unit_jobs_whole else set(job_keys) - unit_ids
        if chosen is not None:
            tested = {job for job, node in chosen if node is not None}
            bucket_ids = {i for i, k in job_keys.items() if k in tested}
            wanted = {i for i in wanted if (job_keys[i], None) in chosen}
        whole = list(_grouped(conn, run_jobs, run_jobs.c.job_id, (since, until), wanted, only))
        reasons = _job_reasons(
            conn, [k for k, parts in whole if parts[-1] is not None], (since, until), only
        )
        found = [
            History(job_keys[key_id], None, *parts, *reasons.get(key_id, ((), None)))
            for key_id, parts in whole
        ]
        if bucket_ids:
            case_of = {
                cid: (job_keys[job_id], node)
                for cid, job_id, node in _cases_of(conn, bucket_ids)
                if chosen is None or (job_keys[job_id], node) in chosen
            }
            grouped = _grouped(conn, results, results.c.case_id, (since, until), set(case_of), only)
            found += [History(*case_of[key_id], *parts) for key_id, parts in grouped]
    found.sort(key=lambda h: (h.job, h.node_id or ""))
    return run_rows, found


def _cases_of(conn: sa.Connection, job_ids: Collection[int]) -> sa.CursorResult:
    """(case id, job id, node id) of these jobs' tests."""
    c = cases.c
    return conn.execute(sa.select(c.id, c.job_id, c.node_id).where(c.job_id.in_(sorted(job_ids))))


def _grouped(
    conn: sa.Connection,
    table: sa.Table,
    key: sa.Column,
    window: tuple[int | None, int | None],
    wanted: set[int],
    only: RunFilter | None = None,
) -> Iterator[tuple[int, tuple]]:
    """Phase 1, one aggregate query: runs, failures, reruns per key. Phase 2,
    only for keys that failed or were rerun: their results in time order."""
    if not wanted:
        return
    since, until = window
    cond = [table.c.outcome != SKIPPED, *_in_window(table, window, only)]
    # A few keys (what triage asks for) are read off the primary key, not the whole table.
    few = len(wanted) <= _IN_CHUNK
    if table is results and only is None:
        # Tests' results: the weeks rolled up, and the results of the others.
        summary = conn.execute(
            counted(conn, since, sorted(wanted) if few else None, until=until)
        ).all()
    else:
        summary = conn.execute(
            sa.select(*totals(table, key))
            .where(*cond, *([key.in_(sorted(wanted))] if few else []))
            .group_by(key)
        ).all()
    rows = {
        k: (n, int(f or 0), int(r or 0), first, last)
        for k, n, f, r, first, last in summary
        if k in wanted
    }
    eventful = sorted(k for k, (_, f, r, _, _) in rows.items() if f or r)
    sequences: dict[int, list[tuple[int, int, bool, int]]] = {}
    why: dict[int, list[str | None]] = {}  # each failure's reason, in time order
    # A test's reasons come with its history; a whole job's from its tests (_job_reasons).
    reason = table.c.reason if table is results else sa.null()
    for start in range(0, len(eventful), _IN_CHUNK):
        chunk = eventful[start : start + _IN_CHUNK]
        query = (
            sa.select(
                key, table.c.finished_at, table.c.run_ref, table.c.outcome, table.c.reruns, reason
            )
            .where(key.in_(chunk), *cond)
            .order_by(key, table.c.finished_at, table.c.run_ref)
        )
        for k, at, ref, outcome, rr, because in conn.execute(query):
            failed = outcome in FAILED_CODES
            sequences.setdefault(k, []).append((at, ref, failed, rr))
            if failed:
                why.setdefault(k, []).append(because)
    for k in sorted(rows):
        seq = sequences.get(k)
        parts = (*rows[k], tuple(seq) if seq is not None else None)
        yield k, (*parts, *_counted_reasons(why.get(k, []))) if table is results else parts


def _in_window(
    table: sa.Table, window: tuple[int | None, int | None], only: RunFilter | None
) -> list[sa.ColumnElement[bool]]:
    """The rows of `table` that finished in the window, in the runs `only` keeps."""
    since, until = window
    cond = [] if since is None else [table.c.finished_at >= since]
    if until is not None:
        cond.append(table.c.finished_at <= until)
    if only is not None:
        cond.append(table.c.run_ref.in_(sa.select(runs.c.id).where(*only.where())))
    return cond


def _counted_reasons(reasons: list[str | None]) -> tuple[tuple[tuple[str, int], ...], str | None]:
    """(each reason with its count, the most first; the last one) of failures
    in time order."""
    counts = Counter(because for because in reasons if because is not None)
    ordered = tuple(sorted(counts.items(), key=lambda c: (-c[1], c[0])))
    last = next((b for b in reversed(reasons) if b is not None), None)
    return ordered, last


def _job_reasons(
    conn: sa.Connection,
    job_ids: list[int],
    window: tuple[int | None, int | None],
    only: RunFilter | None,
) -> dict[int, tuple[tuple[tuple[str, int], ...], str | None]]:
    """Per whole job (`flaky`'s eventful keys): its failed tests' reasons."""
    found: dict[int, list[str | None]] = {}
    r, c = results.c, cases.c
    cond = [FAILED_WHERE, *_in_window(results, window, only)]
    for start in range(0, len(job_ids), _IN_CHUNK):
        chunk = sorted(job_ids)[start : start + _IN_CHUNK]
        query = (
            sa.select(c.job_id, r.reason)
            .select_from(results.join(cases, c.id == r.case_id))
            .where(c.job_id.in_(chunk), *cond)
            .order_by(c.job_id, r.finished_at, r.run_ref, c.node_id)
        )
        for job_id, because in conn.execute(query):
            found.setdefault(job_id, []).append(because)
    return {job_id: _counted_reasons(reasons) for job_id, reasons in found.items()}


class RunOutcomes(Struct, frozen=True, kw_only=True):
    """What `triage` reads of one run and its baseline runs."""

    run: RunRow
    baseline: tuple[RunRow, ...]  # latest first
    jobs: Mapping[int, Mapping[JobKey, Outcome]]  # per run (its ref): each job's outcome
    # Per run: each failed test of every job (unit-test buckets and whole
    # jobs), with its reason (None: stored before reasons were, never since).
    failed_tests: Mapping[int, Mapping[tuple[JobKey, str], str | None]]
    # The run's own failed tests: (message, output line) each, what known
    # failures are matched against.
    texts: Mapping[tuple[JobKey, str], tuple[str | None, str | None]] = field(default_factory=dict)


# An unknown --run is matched against this many of the latest run ids.
SUGGEST_RUNS = 1000


def run_outcomes(store: Store, run_id: str, baseline: RunFilter, count: int) -> RunOutcomes:
    """One run's job outcomes and failed tests, and those of the latest `count`
    runs of `baseline` that finished no later than it (not itself). Each read
    goes through an index (tables.py)."""
    with store.transaction() as conn:
        found = conn.execute(sa.select(*_RUN_ROW).where(runs.c.run_id == run_id)).first()
        if found is None:
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
        run, c = RunRow(*found), runs.c
        rows = conn.execute(
            sa.select(*_RUN_ROW)
            .where(*baseline.where(), c.finished_at <= run.finished_at, c.id != run.ref)
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
        failed: dict[int, dict[tuple[JobKey, str], str | None]] = {ref: {} for ref in wanted}
        r = results.c
        # Off the failed-results index alone (run_ref, case_id, reason).
        query = (
            sa.select(r.run_ref, cases.c.job_id, cases.c.node_id, r.reason)
            .select_from(results.join(cases, cases.c.id == r.case_id))
            .where(r.run_ref.in_(wanted), FAILED_WHERE)
        )
        for ref, job_id, node, reason in conn.execute(query):
            failed[ref][(job_keys[job_id], node)] = reason
        # The run's own failures: their messages and output lines.
        query = (
            sa.select(cases.c.job_id, cases.c.node_id, r.message, r.output_line)
            .select_from(results.join(cases, cases.c.id == r.case_id))
            .where(r.run_ref == run.ref, FAILED_WHERE)
        )
        texts = {
            (job_keys[job_id], node): (message, line)
            for job_id, node, message, line in conn.execute(query)
        }
    return RunOutcomes(
        run=run,
        baseline=base,
        jobs=outcomes,
        failed_tests=failed,
        texts=texts,
    )


def test_outcomes(
    store: Store, refs: Collection[int], keys: Collection[JobKey]
) -> dict[int, dict[JobKey, dict[str, Outcome]]]:
    """Per run (its ref), per job of `keys`: each stored test's outcome (what
    the lift of an entry that names node ids is judged on)."""
    found: dict[int, dict[JobKey, dict[str, Outcome]]] = {ref: {} for ref in refs}
    if not refs or not keys:
        return found
    with store.transaction() as conn:
        job_keys = read_jobs(conn)
        chosen = set(keys)
        wanted = sorted(i for i, k in job_keys.items() if k in chosen)
        for start in range(0, len(wanted), _IN_CHUNK):
            chunk = wanted[start : start + _IN_CHUNK]
            query = (
                sa.select(results.c.run_ref, cases.c.job_id, cases.c.node_id, results.c.outcome)
                .select_from(results.join(cases, cases.c.id == results.c.case_id))
                .where(cases.c.job_id.in_(chunk), results.c.run_ref.in_(sorted(refs)))
            )
            for ref, job_id, node, outcome in conn.execute(query):
                found[ref].setdefault(job_keys[job_id], {})[node] = OUTCOMES.get(
                    outcome, Outcome.FAILED
                )
    return found


def runs_of(store: Store, only: RunFilter) -> list[RunRow]:
    """The runs a filter keeps, oldest first."""
    with store.transaction() as conn:
        rows = conn.execute(
            sa.select(*_RUN_ROW).where(*only.where()).order_by(runs.c.finished_at, runs.c.id)
        ).all()
    return [RunRow(*r) for r in rows]


def run_durations(store: Store) -> dict[JobKey, list[float]]:
    """Per job, each stored run's sum of its tests' durations (skipped tests
    and tests without one left out; a run with none of them has no figure)."""
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
    jobs' outcomes and results; rows deleted, per table. A PostgreSQL week's
    partition that ends by then goes whole; the other results go in batches of
    a range of case ids, a range scan of the primary key each: the prune reads
    the table once."""
    deleted = {"runs": 0, "run_jobs": 0, "results": 0}
    with store.transaction() as conn:
        quote = conn.dialect.identifier_preparer.quote
        for name, _start, end in partitions(conn):
            if end <= before:
                count = conn.exec_driver_sql(f"SELECT count(*) FROM {quote(name)}").scalar_one()
                conn.exec_driver_sql(f"DROP TABLE {quote(name)}")
                deleted["results"] += count
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
        forget(conn, partition_start(before), before=True)
        done = conn.execute(run_jobs.delete().where(run_jobs.c.finished_at < before))
        deleted["run_jobs"] = max(done.rowcount, 0)
        done = conn.execute(runs.delete().where(runs.c.finished_at < before))
        deleted["runs"] = max(done.rowcount, 0)
    return deleted


def counts(store: Store) -> Mapping[str, int]:
    with store.transaction() as conn:
        return {
            t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
            for t in (runs, jobs, run_jobs, cases, results)
        }


def _raw_rows(conn: sa.Connection, query: sa.Select) -> list[tuple]:
    """A query's rows off the driver's cursor: SQLAlchemy's rows cost as much
    again as reading them, for the 100,000s of rows of a results table."""
    compiled = query.compile(dialect=conn.dialect)
    params = compiled.params
    with closing(conn.connection.cursor()) as cursor:
        if compiled.positional:
            cursor.execute(str(compiled), tuple(params[k] for k in compiled.positiontup or []))
        else:
            cursor.execute(str(compiled), params)
        return list(cursor.fetchall())


# Per key (a whole job, or a unit-test bucket's test), per run ref: the stored
# outcome code and reruns.
Cells = dict[tuple[JobKey, str | None], dict[int, tuple[int, int]]]


def outcome_cells(store: Store, *, since: int | None) -> tuple[dict[int, RunRow], Cells]:
    """Every stored outcome since `since`, skipped ones included, of the keys
    `histories` reads by default: what a test-by-run grid shows."""
    found: Cells = {}

    def read(conn: sa.Connection, table: sa.Table, key: sa.Column, keys: Mapping) -> None:
        c = table.c
        query = sa.select(key, c.run_ref, c.outcome, c.reruns)
        if since is not None:
            query = query.where(c.finished_at >= since)
        # In primary-key order: each key's outcomes come together.
        for k, group in groupby(_raw_rows(conn, query.order_by(key)), itemgetter(0)):
            if k in keys:
                found[keys[k]] = {ref: (outcome, reruns) for _, ref, outcome, reruns in group}

    with store.transaction() as conn:
        run_rows = read_runs(conn)
        job_keys = read_jobs(conn)
        whole = {i: (k, None) for i, k in job_keys.items() if not k.unit}
        read(conn, run_jobs, run_jobs.c.job_id, whole)
        unit_ids = {i for i, k in job_keys.items() if k.unit}
        if unit_ids:
            case_of = {
                cid: (job_keys[job_id], node) for cid, job_id, node in _cases_of(conn, unit_ids)
            }
            read(conn, results, results.c.case_id, case_of)
    return run_rows, found
