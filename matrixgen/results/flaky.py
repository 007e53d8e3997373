"""Verdicts from the stored results: flaky, broken, failing or ok, per job and
place, and per pytest node id inside unit-test buckets (docs/evidence.md).

`failing`, which the page leaves out: a key that failed every run it has, but
has fewer than `broken_runs` of them (`min_runs` below `broken_runs`), is not
yet broken and never ok. Everything here but `flaky_rows` works on histories;
`flaky_table` is the rows' table, written for a terminal and as Markdown.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from enum import StrEnum
from itertools import pairwise
from typing import ClassVar

from msgspec import Struct

from matrixgen.model.errors import UsageError
from matrixgen.results.queries import RunFilter
from matrixgen.results.reasons import ReasonGroup, group_reasons
from matrixgen.results.store import JOB_JSON_KEYS, History, JobKey, RunRow, Store, utc_text
from matrixgen.util.escape import markdown_code
from matrixgen.util.values import JsonLayout
from matrixgen.views.table import Column, Report

DEFAULT_SINCE_DAYS = 30
DEFAULT_MIN_RUNS = 3
DEFAULT_FLIP_RATE = 0.1
DEFAULT_BROKEN_RUNS = 3


class Verdict(StrEnum):
    BROKEN = "broken"
    FAILING = "failing"
    FLAKY = "flaky"
    OK = "ok"


_ORDER = {Verdict.BROKEN: 0, Verdict.FAILING: 1, Verdict.FLAKY: 2, Verdict.OK: 3}


class FlakyPolicy(Struct, frozen=True, kw_only=True):
    since_days: int | None = DEFAULT_SINCE_DAYS  # None: all of the history
    min_runs: int = DEFAULT_MIN_RUNS
    flip_rate: float = DEFAULT_FLIP_RATE
    broken_runs: int = DEFAULT_BROKEN_RUNS

    def check(self) -> None:
        if self.since_days is not None and self.since_days < 1:
            raise UsageError("--since must be 1 day or more")
        if self.min_runs < 1:
            raise UsageError("--min-runs must be 1 or more")
        if not 0 <= self.flip_rate < 1:
            raise UsageError("--flip-rate must be at least 0 and below 1")
        if self.broken_runs < 1:
            raise UsageError("--broken-runs must be 1 or more")


class RunRef(Struct, frozen=True):
    run_id: str
    commit: str | None
    at: int  # seconds since the epoch, UTC

    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(("run_id", "run_id"), ("commit", "commit"), ("at", "at_text"))
    )

    @property
    def day(self) -> str:
        return dt.datetime.fromtimestamp(self.at, dt.UTC).date().isoformat()

    @property
    def at_text(self) -> str:
        return iso(self.at)


def runs_text(count: int) -> str:
    return f"{count} run" if count == 1 else f"{count} runs"


iso = utc_text


class FlakyRow(Struct, frozen=True, kw_only=True):
    job: JobKey
    node_id: str | None  # None: the whole job
    runs: int
    failures: int
    flips: int
    verdict: Verdict
    same_commit: tuple[str, ...] = ()  # commits (or run ids) it both failed and passed on
    rerun_passes: int = 0
    first_failure: RunRef | None = None
    last_failure: RunRef | None = None
    broken_since: RunRef | None = None
    passing_streak: int = 0  # passes in a row at the end
    first_at: int = 0
    last_at: int = 0
    reasons: tuple[tuple[str, int], ...] = ()  # its failures' reasons, each with its count
    reason: str | None = None  # its latest failure's

    @property
    def rate(self) -> float:
        return round(self.failures / self.runs, 4) if self.runs else 0.0

    # Its JSON (`matrixgen results flaky --format json`, schema/flaky.schema.json).
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            *JOB_JSON_KEYS,
            *((k, k) for k in ("runs", "failures", "flips", "rate", "verdict", "same_commit")),
            *((k, k) for k in ("rerun_passes", "first_failure", "last_failure", "broken_since")),
            ("passing_streak", "passing_streak"),
            ("first_run_at", "first_run_text"),
            ("last_run_at", "last_run_text"),
            ("reason", "reason"),
            ("reasons", "reason_counts"),
            ("evidence", "evidence_text"),
        )
    )

    @property
    def reason_counts(self) -> tuple[ReasonCount, ...]:
        return tuple(ReasonCount(reason=r, failures=n) for r, n in self.reasons)

    @property
    def first_run_text(self) -> str:
        return iso(self.first_at)

    @property
    def last_run_text(self) -> str:
        return iso(self.last_at)

    @property
    def evidence_text(self) -> str:
        return self.evidence()

    def sort_key(self) -> tuple:
        return (_ORDER[self.verdict], -self.failures, -self.flips, self.job, self.node_id or "")

    def evidence(self) -> str:
        """One line: "failed 3 of 40 runs on dgx_h100/dev (gitlab/mr) since 2026-11-02"."""
        since = dt.datetime.fromtimestamp(self.first_at, dt.UTC).date().isoformat()
        text = (
            f"failed {self.failures} of {runs_text(self.runs)} on {self.job.where} "
            f"({self.job.place}) since {since}"
        )
        if self.verdict is Verdict.BROKEN and self.broken_since is not None:
            commit = (self.broken_since.commit or "")[:12]
            text += (
                f"; every run since {'commit ' + commit + ', ' if commit else ''}"
                f"run {self.broken_since.run_id} ({self.broken_since.day}) failed"
            )
        elif self.same_commit:
            shown = ", ".join(c[:12] for c in self.same_commit[:3])
            more = f" and {len(self.same_commit) - 3} more" if len(self.same_commit) > 3 else ""
            text += f"; failed and passed on {shown}{more}"
        if self.flips:
            text += f"; {self.flips} flip{'' if self.flips == 1 else 's'}"
        if self.first_failure is not None and self.last_failure is not None:
            if self.first_failure == self.last_failure:
                text += f"; failed in run {self.first_failure.run_id}"
            else:
                text += (
                    f"; failures from run {self.first_failure.run_id} "
                    f"({self.first_failure.day}) to run {self.last_failure.run_id} "
                    f"({self.last_failure.day})"
                )
        return text


class ReasonCount(Struct, frozen=True, kw_only=True):
    reason: str
    failures: int


# The fields a row takes from its key's history as they are.
_FROM_HISTORY = ("job", "node_id", "runs", "failures", "first_at", "last_at", "reasons", "reason")


def judge(history: History, run_rows: Mapping[int, RunRow], policy: FlakyPolicy) -> FlakyRow:
    """The verdict on one key's history."""
    base = {k: getattr(history, k) for k in _FROM_HISTORY}
    if history.sequence is None:  # every run passed
        return FlakyRow(**base, flips=0, verdict=Verdict.OK, passing_streak=history.runs)

    def ref(run_ref: int) -> RunRef:
        row = run_rows[run_ref]
        return RunRef(row.run_id, row.commit, row.finished_at)

    sequence = history.sequence
    flips = sum(a[2] != b[2] for a, b in pairwise(sequence))
    outcomes: dict[str, set[bool]] = {}  # per commit (else run), in the order first run
    rerun_passes = 0
    for _at, run_ref, failed, reruns in sequence:
        row = run_rows[run_ref]
        seen = outcomes.setdefault(row.commit or f"run {row.run_id}", set())
        seen.add(failed)
        if not failed and reruns:
            rerun_passes += 1
            seen.add(True)  # it failed before it passed
    failed_refs = [run_ref for _at, run_ref, failed, _rr in sequence if failed]
    # The runs in a row at the end that went as the last one did.
    last_failed = sequence[-1][2]
    tail = next((i for i, s in enumerate(reversed(sequence)) if s[2] != last_failed), len(sequence))
    streak, passing = (tail, 0) if last_failed else (0, tail)
    same_commit = tuple(c for c, seen in outcomes.items() if len(seen) == 2)
    runs = len(sequence)
    if streak >= policy.broken_runs:
        verdict = Verdict.BROKEN
    elif streak == runs:  # every run failed, too few of them to say broken
        verdict = Verdict.FAILING
    elif same_commit or (runs > 1 and flips / (runs - 1) > policy.flip_rate):
        verdict = Verdict.FLAKY
    else:
        verdict = Verdict.OK
    return FlakyRow(
        **base,
        flips=flips,
        verdict=verdict,
        same_commit=same_commit,
        rerun_passes=rerun_passes,
        first_failure=ref(failed_refs[0]) if failed_refs else None,
        last_failure=ref(failed_refs[-1]) if failed_refs else None,
        broken_since=ref(sequence[-streak][1]) if verdict is Verdict.BROKEN else None,
        passing_streak=passing,
    )


def rank(rows: Iterable[FlakyRow]) -> list[FlakyRow]:
    return sorted(rows, key=FlakyRow.sort_key)


def reference_time() -> int:
    """Now, or the end of $MATRIXGEN_TODAY (YYYY-MM-DD) when set: the window of
    `--since` is judged against it, so a past run can be reproduced."""
    from matrixgen.quarantine.policy import TODAY_VARIABLE, current_day

    if not os.environ.get(TODAY_VARIABLE):
        return int(dt.datetime.now(dt.UTC).timestamp())
    end = dt.datetime.combine(current_day() + dt.timedelta(days=1), dt.time(), dt.UTC)
    return int(end.timestamp())


def window_start(policy: FlakyPolicy) -> int | None:
    if policy.since_days is None:
        return None
    return reference_time() - policy.since_days * 86400


class FlakyReport(Struct, frozen=True, kw_only=True):
    rows: tuple[FlakyRow, ...]
    runs: int  # runs in the store
    # The keys left out for having fewer than min_runs runs, each with its runs
    # in the window: (job, node id, runs).
    left_out: tuple[tuple[JobKey, str | None, int], ...] = ()

    def by_verdict(self) -> dict[str, int]:
        return {v.value: sum(r.verdict is v for r in self.rows) for v in Verdict}

    def counted(self, policy: FlakyPolicy) -> str:
        """Its keys by verdict in one line, and the ones left out."""
        counts = self.by_verdict()
        out = f"{len(self.rows)} key(s) over {self.runs} run(s): {counts['broken']} broken, "
        if counts["failing"]:
            out += f"{counts['failing']} failing (every run failed, fewer than --broken-runs "
            out += f"{policy.broken_runs}), "
        out += f"{counts['flaky']} flaky, {counts['ok']} ok"
        if self.left_out:
            left = len(self.left_out)
            out += f"; {left} key(s) with fewer than {policy.min_runs} run(s) left out"
        return out


def flaky_rows(
    store: Store,
    policy: FlakyPolicy,
    *,
    unit_jobs_whole: bool = False,
    only: RunFilter | None = None,
    keys: Collection[tuple[JobKey, str | None]] | None = None,
) -> FlakyReport:
    """Every key's verdict; unit_jobs_whole: buckets get a whole-job row too
    (lifting an allow-failure entry of a bucket needs it); see `histories`."""
    from matrixgen.results.junit import FUTURE_SKEW
    from matrixgen.results.queries import histories

    policy.check()
    # Up to a report's clock skew past the reference time: a result of 2099 (in
    # a store some other writer wrote: the ingest clamps) never changes a verdict.
    run_rows, found = histories(
        store,
        since=window_start(policy),
        until=reference_time() + int(FUTURE_SKEW.total_seconds()),
        unit_jobs_whole=unit_jobs_whole,
        only=only,
        keys=keys,
    )
    judged = [judge(h, run_rows, policy) for h in found if h.runs >= policy.min_runs]
    return FlakyReport(
        rows=tuple(rank(judged)),
        runs=len(run_rows),
        left_out=tuple((h.job, h.node_id, h.runs) for h in found if h.runs < policy.min_runs),
    )


def flaky_table(rows: Iterable[FlakyRow]) -> Report:
    """`matrixgen results flaky`'s table: a terminal's names each part of a key
    and its failures' runs; Markdown's names the case where it ran, with the
    evidence line."""
    columns = [
        Column("verdict", escape=str),
        *(Column(h, markdown=None) for h in ("model", "test_case", "node_id")),
        Column("case", text=False, escape=markdown_code),
        *(Column(h, markdown=None) for h in ("platform", "environment")),
        Column("platform/env", text=False),
        Column("scope"),
        *(Column(h, escape=str, right=True) for h in ("runs", "failures", "flips")),
        *(Column(h, markdown=None) for h in ("rate", "first failure", "last failure")),
        Column("evidence", text=False),
    ]
    return Report(columns, [_cells(r) for r in rows])


def _cells(row: FlakyRow) -> tuple[object, ...]:
    """The row's cells, one per column of `flaky_table`."""
    job = row.job
    case = job.test_case + (f"[{job.tag}]" if job.tag else "")
    node = row.node_id or ""
    if node.startswith(job.test_case + "::"):  # a bucket's test: its file is the case
        node = node.removeprefix(job.test_case)
    return (
        *(row.verdict.value, job.model, case, node, row.node_id or case),
        *(job.platform, job.environment, job.where, job.place, row.runs, row.failures, row.flips),
        *(f"{row.rate:.2f}", _run(row.first_failure), _run(row.last_failure), row.evidence()),
    )


def _run(ref: RunRef | None) -> str | None:
    return f"{ref.run_id} ({ref.day})" if ref is not None else None


def flaky_text(rows: Sequence[FlakyRow], *, judged: bool) -> str:
    """`flaky`'s table for a terminal, then the reasons its failures share;
    `judged`: whether any key had runs enough (before a filter left these)."""
    none = "no key has this verdict" if judged else "no key has enough runs to judge"
    out = flaky_table(rows).text(empty=none)
    return out + "".join(g.text() for g in shared_reasons(rows))


def flaky_markdown(rows: Sequence[FlakyRow]) -> str:
    """`flaky`'s table as Markdown, then the reasons its failures share."""
    lines = flaky_table(rows).markdown()
    if groups := shared_reasons(rows):
        lines += ["", "**Failures that share a reason**", "", *(g.markdown() for g in groups)]
    return "\n".join(lines) + "\n"


def shared_reasons(rows: Iterable[FlakyRow]) -> tuple[ReasonGroup, ...]:
    """The failures of the rows that are not ok, by reason, where several tests
    share one (a whole job named model/case): one cause read once."""
    groups = group_reasons(
        (why, row.node_id or f"{row.job.model}/{row.job.test_case}", count)
        for row in rows
        if row.verdict is not Verdict.OK
        for why, count in row.reasons
    )
    return tuple(g for g in groups if len(g.tests) > 1)


def in_tree_words(rows: Iterable[FlakyRow], word: Callable[[str], str]) -> list[FlakyRow]:
    """The rows with each scope as the tree names it (`word`, the config's
    scope_word): the store holds the tier (`L2`), the tree says `nightly`."""
    from msgspec.structs import replace

    return [
        r if (w := word(r.job.scope)) == r.job.scope else replace(r, job=replace(r.job, scope=w))
        for r in rows
    ]


def summarize(rows: Sequence[FlakyRow]) -> str:
    """Several keys in one line, per platform/environment: "failed 3 of 40
    runs on dgx_h100/dev since 2026-11-02; passed all 12 on dgx_gb200/dev ..."."""
    groups: dict[str, list[FlakyRow]] = {}
    for row in rows:
        groups.setdefault(row.job.where, []).append(row)
    parts = []
    for where, group in sorted(groups.items()):
        runs = sum(r.runs for r in group)
        failures = sum(r.failures for r in group)
        since = dt.datetime.fromtimestamp(min(r.first_at for r in group), dt.UTC).date()
        streak = min(r.passing_streak for r in group)
        tests = f" ({len(group)} tests)" if len(group) > 1 else ""
        if failures:
            last = max((r.last_failure for r in group if r.last_failure), key=lambda ref: ref.at)
            parts.append(
                f"failed {failures} of {runs} runs{tests} on {where} since {since.isoformat()}, "
                f"last in run {last.run_id} ({last.day})"
                + (f", passed the {streak} since" if streak else "")
            )
        else:
            parts.append(f"passed all {runs} runs{tests} on {where} since {since.isoformat()}")
    return "; ".join(parts)
