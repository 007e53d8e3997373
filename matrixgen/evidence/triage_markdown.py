"""A triage report as a pull request comment.

Every string from the store or the quarantine file is escaped (`util.escape`):
it comes from a pull request.
"""

from __future__ import annotations

from matrixgen.evidence.flaky import iso
from matrixgen.evidence.triage import NOT_NEW, Failure, TriageReport, TriageVerdict
from matrixgen.util.escape import markdown_code as code
from matrixgen.util.escape import markdown_link
from matrixgen.util.escape import markdown_text as text

MARKER = "<!-- matrixgen-triage -->"
_GROUP_TESTS_SHOWN = 10  # a group's tests the comment names
_HEADER = (
    "| verdict | case | test | platform/env | scope | reason | evidence |",
    "|" + " :-- |" * 7,
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
        lines += ["#### New failures", "", *_HEADER, *(_row(f) for f in new), ""]
    if known:
        lines += [
            "<details>",
            f"<summary>{len(known)} known failure(s): "
            + ", ".join(f"{counts[v]} {v.value}" for v in NOT_NEW)
            + "</summary>",
            "",
            *_HEADER,
            *(_row(f) for f in known),
            "",
            "</details>",
            "",
        ]
    lines += _shared_reasons(report)
    lines += _lifts(report)
    return "\n".join(lines).rstrip("\n") + "\n"


def _baseline_line(report: TriageReport) -> str:
    base = report.baseline_runs
    if not base:
        return f"**No baseline.** {text(report.note or '')}."
    latest = f"{code(base[0].run_id)} ({iso(base[0].finished_at)})"
    runs = f"run {latest}" if len(base) == 1 else f"{len(base)} runs, the latest {latest}"
    return f"Baseline: {text(str(report.baseline))}, {runs}."


def _row(f: Failure) -> str:
    test = code(f.test) if f.test else ""
    evidence = text(f.evidence)
    if f.entry is not None:  # the entry, linked to its tracker
        evidence = (
            f"quarantined by entry {markdown_link(f.entry.id, f.entry.tracker)} "
            f"({text(f.entry.action)}, {text(f.entry.kind)})"
        )
    elif f.known is not None:  # the known failure, linked to its tracker
        said = f.known.introduction()
        rest = f.evidence[len(said) :] if f.evidence.startswith(said) else f.evidence
        evidence = (
            f"{markdown_link('known ' + f.known.kind + ' failure', f.known.tracker)}: {text(rest)}"
        )
    reason = code(f.reason) if f.reason else ""
    return (
        f"| {f.verdict.value} | {code(f.case)} | {test} | {text(f.job.where)} "
        f"| {text(f.job.place)} | {reason} | {evidence} |"
    )


def _shared_reasons(report: TriageReport) -> list[str]:
    if not report.shared:
        return []
    lines = ["#### Failures that share a reason", ""]
    for g in report.shared:
        shown = ", ".join(code(t) for t in g.tests[:_GROUP_TESTS_SHOWN])
        more = len(g.tests) - _GROUP_TESTS_SHOWN
        lines.append(
            f"- **{text(g.sentence())}:** {code(g.reason)}: {shown}"
            + (f" and {more} more" if more > 0 else "")
        )
    return [*lines, ""]


def _lifts(report: TriageReport) -> list[str]:
    candidates = report.lift_candidates
    if not candidates:
        return []
    lines = [
        "<details>",
        f"<summary>{len(candidates)} quarantine entr"
        f"{'y' if len(candidates) == 1 else 'ies'} to lift</summary>",
        "",
        "| entry | action | tracker | why |",
        "| :-- | :-- | :-- | :-- |",
    ]
    for c in candidates:
        lines.append(
            f"| {code(c.entry.id)} | {text(c.entry.action)} | "
            f"{markdown_link(c.entry.tracker, c.entry.tracker)} | {text(c.reason)} |"
        )
    return [*lines, "", "</details>", ""]
