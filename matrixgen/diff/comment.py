"""The diff as a pull request comment (`matrixgen diff --format markdown`):
a hidden marker to update it in place, every string escaped for where it goes
(util.markdown), and under GitHub's size limit by cutting long lists."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from matrixgen.diff.data import (
    changed_pipelines,
    cost_change,
    cost_line,
    moves,
    summary_data,
    target_cost,
)
from matrixgen.diff.describe import (
    SHORT_DIFF_LINES,
    change_text,
    changed_lines,
    existence_line,
    field_groups,
    habit_text,
    is_multiline,
    mark_text,
    moves_by_target,
    short_ref,
    show_value,
    summary_words,
    target_path,
    target_tally,
    text_diff,
    tracker_md,
    value_change,
)
from matrixgen.diff.evidence import evidence_of
from matrixgen.diff.golden_render import COMMENT_ROWS, SHORT_COMMENT_ROWS
from matrixgen.diff.golden_render import render_markdown as golden_markdown
from matrixgen.diff.model import (
    QuarantineChange,
    SelectionDiff,
    TargetDiff,
)
from matrixgen.model.errors import Finding
from matrixgen.model.jobs import Job, QuarantineMark
from matrixgen.util import markdown as md
from matrixgen.util.words import counted, listed
from matrixgen.views.table import Column, Report

MARKER = "<!-- matrixgen-diff -->"
# GitHub refuses comments over 65,536 characters; keep a margin for the cut note.
MARKDOWN_LIMIT = 60_000
ITEMS_PER_SECTION = 50


def render_markdown(diff: SelectionDiff) -> str:
    """A PR comment, shortened until it fits GitHub's limit."""
    text = _markdown(diff, details=True)
    if len(text) > MARKDOWN_LIMIT:
        text = _markdown(diff, details=False)
    if len(text) > MARKDOWN_LIMIT:  # thousands of targets: cut the table too
        text = _markdown(diff, details=False, rows=200)
    return text


def _markdown(diff: SelectionDiff, *, details: bool, rows: int | None = None) -> str:
    base, head = short_ref(diff.base), short_ref(diff.head)
    head_text = "the working tree" if diff.head == "worktree" else md.code(head)
    out = [MARKER, f"### matrixgen selection diff: {md.code(base)} → {head_text}", ""]
    summary = summary_data(diff)
    changed = [t for t in diff.targets if not t.unchanged or t.duplicates]
    every = counted(summary["targets"], "target")
    if not changed:
        out.append(f"**No selection change** in any of the {every}.")
    else:
        words = summary_words(summary, " · ", "−")
        out.append(f"**{words}** in {summary['targets_changed']} of {every}.")
    moved = changed_pipelines(summary)
    if changed or moved:
        # The figures are the diff's own text; only the pipeline names come from the tree.
        out += ["", "**Cost:** " + cost_line(summary, "→")]
        if moved:
            out.append("")
            out += [f"- {cost_change(p, md.code(p['pipeline']))}" for p in moved]
    if changed:
        out += ["", *_targets(changed[:rows]).markdown()]
        if rows is not None and len(changed) > rows:
            out.append(f"| … and {counted(len(changed) - rows, 'more target')} | | | | | | |")
    unchanged = [t.target.name for t in diff.targets if t.unchanged and not t.duplicates][:rows]
    if unchanged and changed:
        names = ", ".join(md.code(n) for n in unchanged)
        out += md.details(f"{counted(len(unchanged), 'target')} unchanged", [names])
    moved_lines = [
        f"- moved from {md.code(a)} to {md.code(b)} ({n} jobs)" for (a, b), n in moves(diff)
    ]
    if moved_lines:
        out += ["", "**Moves**", "", *moved_lines[:ITEMS_PER_SECTION]]
    trackers = _tracker_summary(diff)
    if trackers:
        out += ["", "**Quarantine changes**", "", *trackers]
    if diff.findings_added or diff.findings_removed:
        out += [
            "",
            f"**Findings** (what `matrixgen validate` reports): "
            f"+{len(diff.findings_added)} added · −{len(diff.findings_removed)} removed",
            "",
        ]
        items = [f"- added: {_finding_md(f)}" for f in diff.findings_added]
        items += [f"- removed: {_finding_md(f)}" for f in diff.findings_removed]
        out += md.capped(items, ITEMS_PER_SECTION)
    out += ["", *(f"> ⚠️ {md.text(note)}" for note in diff.notes)] if diff.notes else []
    out += golden_markdown(diff.goldens, rows=COMMENT_ROWS if details else SHORT_COMMENT_ROWS)
    if changed and details:
        for t in changed:
            out += ["", *_target_details(t, base, head, diff.evidence or {})]
    elif changed:
        out += [
            "",
            "_Per-target details are left out: they would pass the size of a comment. "
            "Run `matrixgen diff --format json` for every job._",
        ]
    return "\n".join(out) + "\n"


def _targets(changed: Sequence[TargetDiff]) -> Report:
    """The comment's table: a row per changed target, its cells written here."""
    numbers = ("jobs", "GPU-h per run", "added", "removed", "changed")
    columns = [Column("target", escape=str), *(Column(h, escape=str, right=True) for h in numbers)]
    return Report([*columns, Column("quarantine", escape=str)], list(map(_target_row, changed)))


def _target_row(t: TargetDiff) -> list[str]:
    """The comment's table row of one changed target."""
    flags = [{"head": " (new)", "base": " (gone)"}.get(t.exists, "")]
    flags += [f for f, on in ((" (settings)", t.settings), (" (holding pen)", t.holding_pen)) if on]
    jobs = f"{t.head_jobs}" if t.base_jobs == t.head_jobs else f"{t.base_jobs} → {t.head_jobs}"
    changes = sorted(Counter(q.change for q in t.quarantine).items())
    parts = [f"{n} {change}" for change, n in changes]
    parts += [counted(len(t.duplicates), "duplicate note")] if t.duplicates else []
    moved = ((len(t.moved_out), "moved out"), (len(t.moved_in), "moved in"))
    cell = ", ".join([*parts, *(f"{n} {word}" for n, word in moved if n)])
    name, cost = md.code(t.target.name) + "".join(flags), target_cost(t, "→", unit="")
    return [name, jobs, cost, f"+{len(t.added)}", f"−{len(t.removed)}", f"~{len(t.changed)}", cell]


def _finding_md(finding: Finding) -> str:
    return (
        f"{md.code(finding.code)} ({md.text(finding.severity.value)}) at "
        f"{md.code(str(finding.location))}: {md.text(finding.message)}"
    )


def _grouped(
    diff: SelectionDiff, key: Callable[[QuarantineChange], tuple], *, habits: bool
) -> list[tuple[tuple, tuple[set, list[str]]]]:
    """The quarantine changes (of habits, or of entries) grouped by `key`: the
    jobs (target, job key) and the targets, in order, of each group."""
    grouped: dict[tuple, tuple[set, list[str]]] = {}
    for t in diff.targets:
        for q in t.quarantine:
            if (q.habit is not None) != habits:
                continue
            jobs, targets = grouped.setdefault(key(q), (set(), []))
            jobs.add((t.target.name, q.job.sort_key()))
            if t.target.name not in targets:
                targets.append(t.target.name)
    return sorted(grouped.items())


def _reach(jobs: set[tuple[str, tuple]], targets: list[str]) -> str:
    """`1 case, 3 jobs in 3 targets (`a`, `b`, `c`)`: a case is a job's identity
    (model, test case, environment, platform, tag), a job one case in one target."""
    cases = len({key[:5] for _, key in jobs})
    return (
        f"{counted(cases, 'case')}, {counted(len(jobs), 'job')} in "
        f"{counted(len(targets), 'target')} ({listed([md.code(n) for n in targets], 10)})"
    )


def _tracker_summary(diff: SelectionDiff) -> list[str]:
    """One line per (change, entry): what it does to how many jobs, where (and
    one per habit)."""
    lines = []
    evidence = diff.evidence or {}
    groups = _grouped(
        diff,
        lambda q: (q.change, q.mark.tracker, q.mark.id, q.mark.action, q.mark.kind),
        habits=False,
    )
    for (change, tracker, entry, action, kind), (jobs, targets) in groups:
        mark = QuarantineMark(id=entry, tracker=tracker, action=action, kind=kind)
        lines.append(
            f"- **{md.text(change)}** {tracker_md(tracker)} ({md.text(action)}, "
            f"{md.text(kind)}, entry {md.code(entry)}): {_reach(jobs, targets)}"
            + _evidence_md(mark, evidence)
        )
    habits = _grouped(diff, lambda q: (q.change, habit_text(q, markdown=True)), habits=True)
    for (change, text), (jobs, targets) in habits:
        lines.append(f"- **{md.text(change)}** {text}: {_reach(jobs, targets)}")
    return lines


def _evidence_md(mark: QuarantineMark, evidence: Mapping[str, str]) -> str:
    """` — evidence: failed 3 of 40 runs ...` where the results store has some."""
    line = evidence_of(mark, evidence)
    return f" — evidence: {md.text(line)}" if line is not None else ""


def _target_details(t: TargetDiff, base: str, head: str, evidence: Mapping[str, str]) -> list[str]:
    out = [
        f"<details><summary><b>{md.html(t.target.name)}</b> "
        f"({md.html(target_path(t.target))}): {md.html(target_tally(t).replace('-', '−'))}"
        "</summary>",
        "",
    ]
    note = existence_line(t, base, head)
    if note:
        out += [f"_{md.text(note)}_", ""]
    if t.settings:
        settings = [
            f"- {md.code(k)}: {md.code(show_value(a))} → {md.code(show_value(b))}"
            for k, (a, b) in t.settings.items()
        ]
        out += ["**Target settings**", "", *settings, ""]
    for title, jobs in (("Added", t.added), ("Removed", t.removed)):
        items = [f"- {md.code(job.label)}{_md_job_facts(job, evidence)}" for job in jobs]
        out += _section(title, len(jobs), items)
    items = []
    for fields, jobs in field_groups(t.changed):
        every = len(jobs) > 1 and len(jobs) == t.head_jobs
        items.append(f"- all {len(jobs)} jobs of this target" if every else f"- {_job_list(jobs)}")
        for name, (old, new) in fields.items():
            items.extend(f"  {line}" if line else "" for line in _md_field(name, old, new))
    out += _section("Changed", len(t.changed), items, limit=ITEMS_PER_SECTION * 4)
    items = [
        f"- {md.text(q.change)} {md.code(q.job.label)}: {change_text(q, markdown=True)}"
        for q in t.quarantine
    ]
    out += _section("Quarantine", len(t.quarantine), items)
    for title, moved, word in (("Moved out", t.moved_out, "to"), ("Moved in", t.moved_in, "from")):
        items = [
            f"- {word} {md.code(other)} ({len(jobs)} jobs): {_job_list(jobs)}"
            for other, jobs in moves_by_target(moved)
        ]
        out += _section(title, len(moved), items)
    items = [
        f"- duplicate definition {d.change} at "
        + ", ".join(md.code(str(w)) for w in d.locations)
        + f": {md.code(d.job.label)} (it runs once, as before)"
        for d in t.duplicates
    ]
    return [*out, *_section("Duplicate definitions", len(t.duplicates), items), "</details>"]


def _md_job_facts(job: Job, evidence: Mapping[str, str]) -> str:
    facts = [f"cadence {','.join(job.cadence)}", f"n_repeat {job.n_repeat}"]
    facts += [f"time_limit {job.time_limit}s", *(["allow_failure"] if job.allow_failure else [])]
    text = " — " + md.text(", ".join(facts))
    if job.quarantine is not None:
        text += f"; quarantined: {mark_text(job.quarantine, markdown=True)}"
        text += _evidence_md(job.quarantine, evidence)
    return text


def _md_field(name: str, old: Any, new: Any) -> list[str]:
    if is_multiline(old, new):
        lines = text_diff(old, new, name)
        fenced = md.fence_lines(lines, info="diff", indent="  ")
        if len(lines) <= SHORT_DIFF_LINES:
            return [f"- {md.code(name)}:", "", *fenced, ""]
        # A long script's diff is folded: the list of jobs stays readable.
        changed = counted(changed_lines(old, new), "line")
        folded = md.details(f"the diff of {md.html(name)}", fenced, indent="  ")
        return [f"- {md.code(name)}: {changed} changed", *folded, ""]
    return [f"- {md.code(name)}: {value_change(old, new, markdown=True)}"]


def _job_list(jobs: list[Job]) -> str:
    return listed([md.code(j.label) for j in jobs], ITEMS_PER_SECTION)


def _section(title: str, count: int, items: list[str], limit: int = ITEMS_PER_SECTION) -> list[str]:
    """A bold title with its count, its items (cut at `limit`), a blank line;
    nothing when the count is 0."""
    return [f"**{title} ({count})**", "", *md.capped(items, limit), ""] if count else []
