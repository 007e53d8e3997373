"""Each test's totals per week, for the weeks that are over: what `flaky` and
`triage` count instead of every result.

When a week is rolled up, and why the figures equal counting every result:
docs/results-store.md, "Schema 5". Weeks are the partitions' (Monday to
Monday, UTC).
"""

from __future__ import annotations

import sqlalchemy as sa

from matrixgen.results.tables import (
    PARTITION_SECONDS,
    SKIPPED,
    case_weeks,
    failed_count,
    partition_start,
    results,
    rolled_weeks,
    runs,
)

WEEK = PARTITION_SECONDS
_OVER_AFTER = 2 * 86_400  # after a week's end, until it is over


def roll_up(conn: sa.Connection, stored_at: int) -> None:
    """After an ingest of a run that finished at `stored_at`: its week counted
    anew, and every week that is over rolled."""
    forget(conn, partition_start(stored_at))
    finished = set(conn.execute(sa.select(runs.c.finished_at).distinct()).scalars())
    if not finished:
        return
    rolled = set(conn.execute(sa.select(rolled_weeks.c.week)).scalars())
    newest = max(finished)
    for week in sorted({partition_start(at) for at in finished} - rolled):
        if week + WEEK + _OVER_AFTER <= newest:
            _count_week(conn, week)


def _count_week(conn: sa.Connection, week: int) -> None:
    r = results.c
    counted = (
        sa.select(sa.literal(week, sa.BigInteger), *totals(results, r.case_id))
        .where(r.outcome != SKIPPED, r.finished_at >= week, r.finished_at < week + WEEK)
        .group_by(r.case_id)
    )
    conn.execute(case_weeks.insert().from_select(list(case_weeks.c.keys()), counted))
    conn.execute(rolled_weeks.insert().values(week=week))


def totals(table: sa.Table, key: sa.ColumnElement) -> list[sa.ColumnElement]:
    """The key, runs, failures, runs with reruns, first and last finish."""
    c = table.c
    return [
        key,
        sa.func.count(),
        sa.func.sum(failed_count(c.outcome)),
        sa.func.sum(sa.case((c.reruns > 0, 1), else_=0)),
        sa.func.min(c.finished_at),
        sa.func.max(c.finished_at),
    ]


def forget(conn: sa.Connection, week: int, *, before: bool = False) -> None:
    """This week is no longer rolled (its results changed); with `before`, nor
    are the weeks before it (prune deleted results of them)."""
    for table in (case_weeks, rolled_weeks):
        conn.execute(table.delete().where(table.c.week <= week if before else table.c.week == week))


def counted(
    conn: sa.Connection, since: int | None, keys: list[int] | None, *, until: int | None = None
) -> sa.Select:
    """`totals` per test (case id, of `keys` when given) in the window; a
    rolled week counts whole only when it ends by `until`."""
    weeks = rolled_weeks.c.week
    whole = [
        week
        for week in conn.execute(sa.select(weeks).order_by(weeks)).scalars()
        if (since is None or week >= since) and (until is None or week + WEEK <= until)
    ]
    w, r = case_weeks.c, results.c
    rolled = sa.select(w.case_id, w.runs, w.failures, w.rerun_runs, w.first_at, w.last_at).where(
        w.week.in_(whole)
    )
    fresh = sa.select(
        r.case_id,
        sa.literal(1, sa.Integer),
        failed_count(r.outcome),
        sa.case((r.reruns > 0, 1), else_=0),
        r.finished_at,
        r.finished_at,
    ).where(
        r.outcome != SKIPPED,
        sa.or_(*_outside(whole, since)),
        *([r.finished_at <= until] if until is not None else []),
    )
    if keys is not None:
        rolled = rolled.where(w.case_id.in_(keys))
        fresh = fresh.where(r.case_id.in_(keys))
    both = sa.union_all(rolled, fresh).subquery()
    b = both.c
    return sa.select(
        b.case_id,
        sa.func.sum(b.runs),
        sa.func.sum(b.failures),
        sa.func.sum(b.rerun_runs),
        sa.func.min(b.first_at),
        sa.func.max(b.last_at),
    ).group_by(b.case_id)


def _outside(whole: list[int], since: int | None) -> list[sa.ColumnElement[bool]]:
    """The stretches since `since` that the rolled weeks `whole` (sorted) leave
    out, as conditions on finished_at (PostgreSQL reads only those partitions)."""
    at = results.c.finished_at
    stretches = []
    start = since
    for week in whole:
        if start is None or start < week:
            lower = [] if start is None else [at >= start]
            stretches.append(sa.and_(*lower, at < week))
        start = week + WEEK
    stretches.append(sa.true() if start is None else at >= start)
    return stretches
