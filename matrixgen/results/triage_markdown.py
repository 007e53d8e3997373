"""A triage report written: its table and lines for a terminal, and its pull
request comment.

Every string from the store or the quarantine file is escaped (`util.escape`):
it comes from a pull request.
"""

from __future__ import annotations

from collections.abc import Iterable

from matrixgen.results.flaky import iso
from matrixgen.results.lifts import LiftCandidate
from matrixgen.results.triage import NOT_NEW, Failure, TriageReport, TriageVerdict
from matrixgen.util.escape import markdown_code as code
from matrixgen.util.escape import markdown_link, terminal_text
from matrixgen.util.escape import markdown_text as text
from matrixgen.util.words import counted
from matrixgen.views.table import Column, Markdown, Report

MARKER = "<!-- matrixgen-triage -->"
_GROUP_TESTS_SHOWN = 10  # a group's tests the comment names


def failures_table(failures: Iterable[Failure]) -> Report:
    """The failures: a terminal's table names each part of their job; the
    comment's, where it ran, the reason and the evidence (linked to its tracker)."""
    columns = [
        Column("verdict", escape=str),
        Column("model", markdown=None),
        Column("test_case", markdown="case", escape=code),
        Column("node_id", markdown="test", escape=code),
        Column("platform", markdown=None),
        Column("environment", markdown=None),
        Column("platform/env", text=False),
        Column("scope"),
        Column("reason", text=False, escape=code),
        Column("evidence", text=False),
    ]
    rows = [
        (
            *(f.verdict.value, f.job.model, f.case, f.test, f.job.platform, f.job.environment),
            *(f.job.where, f.job.place, f.reason or None, _evidence(f)),
        )
        for f in failures
    ]
    return Report(columns, rows)


def lifts_table(candidates: Iterable[LiftCandidate]) -> Report:
    """The entries a run's passes could lift, each linked to its tracker."""
    columns = [Column("entry", escape=code), Column("action"), Column("tracker"), Column("why")]
    rows = []
    for c in candidates:
        tracker = Markdown(markdown_link(c.entry.tracker, c.entry.tracker))
        rows.append((c.entry.id, c.entry.action, tracker, c.reason))
    return Report(columns, rows)


def render_table(report: TriageReport) -> str:
    """For a terminal: the failures' table, then each failure's evidence and
    reason, the reasons several share and the entries to lift."""
    out = failures_table(report.failures).text(empty="no failures")
    for f in report.failures:
        out += f"{f.verdict.value}: {terminal_text(failure_name(f))}: {terminal_text(f.evidence)}\n"
        if f.reason is not None:
            out += f"  reason: {terminal_text(f.reason)}\n"
    out += "".join(g.text() for g in report.shared)
    for c in report.lift_candidates:
        entry = f"{terminal_text(c.entry.id)} ({terminal_text(c.entry.action)})"
        out += f"lift candidate: {entry}: {terminal_text(c.reason)}\n"
    return out


def failure_name(f: Failure) -> str:
    """The failure in words: its job, where it ran, and its test or check."""
    name = f"{f.job.model}/{f.case} on {f.job.where} ({f.job.place})"
    if f.metric:
        return f"{name} check {f.metric}"
    return f"{name} {f.node_id}" if f.node_id else name


def summary(report: TriageReport) -> str:
    """One line: the run's failures by verdict, and its lift candidates."""
    counts = report.summary()
    verdicts = ", ".join(f"{n} {verdict}" for verdict, n in counts.items())
    return (
        f"run {terminal_text(report.run.run_id)}: {len(report.failures)} failure(s): "
        f"{verdicts}; {len(report.lift_candidates)} lift candidate(s)"
    )


def markdown(report: TriageReport) -> str:
    """The comment: the hidden marker (to update it in place), new failures
    first, the known ones folded, then the shared reasons and the lifts."""
    counts = report.summary()
    lines = [MARKER, f"### matrixgen triage of run {code(report.run.run_id)}", ""]
    lines += [_baseline_line(report), ""]
    others = ", ".join(f"{counts[v]} {v.counted}" for v in NOT_NEW)
    lines += [f"**{counts['new']} new** of {len(report.failures)} failure(s); {others}.", ""]
    new = [f for f in report.failures if f.verdict is TriageVerdict.NEW]
    known = [f for f in report.failures if f.verdict is not TriageVerdict.NEW]
    if new:
        lines += ["#### New failures", "", *failures_table(new).markdown(), ""]
    if known:
        shown = ", ".join(f"{counts[v]} {v.value}" for v in NOT_NEW)
        lines += _folded(f"{len(known)} known failure(s): {shown}", failures_table(known))
    if report.shared:
        lines += ["#### Failures that share a reason", ""]
        lines += [*(g.markdown(_GROUP_TESTS_SHOWN) for g in report.shared), ""]
    if report.lift_candidates:
        lifts = counted(len(report.lift_candidates), "quarantine entry", "quarantine entries")
        lines += _folded(f"{lifts} to lift", lifts_table(report.lift_candidates))
    return "\n".join(lines).rstrip("\n") + "\n"


def _baseline_line(report: TriageReport) -> str:
    base = report.baseline_runs
    if not base:
        return f"**No baseline.** {text(report.note or '')}."
    latest = f"{code(base[0].run_id)} ({iso(base[0].finished_at)})"
    runs = f"run {latest}" if len(base) == 1 else f"{len(base)} runs, the latest {latest}"
    return f"Baseline: {text(str(report.baseline))}, {runs}."


def _evidence(f: Failure) -> str:
    """A failure's evidence in the comment: the entry or the known failure that
    explains it linked to its tracker, else its words."""
    if f.entry is not None:
        return Markdown(
            f"quarantined by entry {markdown_link(f.entry.id, f.entry.tracker)} "
            f"({text(f.entry.action)}, {text(f.entry.kind)})"
        )
    if f.known is not None:
        said = f.known.introduction()
        rest = f.evidence[len(said) :] if f.evidence.startswith(said) else f.evidence
        link = markdown_link("known " + f.known.kind + " failure", f.known.tracker)
        return Markdown(f"{link}: {text(rest)}")
    return f.evidence


def _folded(summary: str, table: Report) -> list[str]:
    """The table folded under its summary line: the reader opens it."""
    head = ["<details>", f"<summary>{summary}</summary>", ""]
    return [*head, *table.markdown(), "", "</details>", ""]
