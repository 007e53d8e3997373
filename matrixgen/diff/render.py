"""Render a selection diff as text (terminals), markdown (a PR comment:
diff.comment) or JSON (diff.data, which documents its shape).

All three are deterministic: targets in config order, then by system, scope,
platform, environment; jobs by identity; no times or other run-dependent text.
"""

from __future__ import annotations

from typing import Any

from matrixgen.diff.comment import render_markdown
from matrixgen.diff.data import (
    changed_pipelines,
    cost_change,
    cost_line,
    moves,
    render_json,
    summary_data,
    target_cost,
)
from matrixgen.diff.describe import (
    change_text,
    existence_line,
    field_groups,
    finding_line,
    is_multiline,
    mark_text,
    moves_by_target,
    short_ref,
    show_value,
    summary_words,
    target_path,
    target_tally,
    text_diff,
    value_change,
)
from matrixgen.diff.golden_render import render_text as golden_text
from matrixgen.diff.model import SelectionDiff
from matrixgen.model.jobs import Job
from matrixgen.util.escape import terminal_line
from matrixgen.util.words import counted


def render_text(diff: SelectionDiff, *, notes: bool = True) -> str:
    """A terminal report: changed targets with their jobs, then the unchanged ones;
    `notes=False` leaves the notes out (the command prints them on stderr)."""
    base, head = short_ref(diff.base), short_ref(diff.head)
    out = [f"selection diff: base {base} -> head {head}"]
    summary = summary_data(diff)
    changed = [t for t in diff.targets if not t.unchanged or t.duplicates]
    out.append(
        f"{summary['targets_changed']} of {counted(summary['targets'], 'target')} change: "
        + summary_words(summary)
        + " (counted per target)"
    )
    out.append("cost: " + cost_line(summary))
    out.extend(f"  {cost_change(p)}" for p in changed_pipelines(summary))
    out.extend(f"moved from {a} to {b} ({n} jobs)" for (a, b), n in moves(diff))
    if diff.findings_added or diff.findings_removed:
        out.append(
            f"findings: +{len(diff.findings_added)} added, -{len(diff.findings_removed)} "
            "removed (what `matrixgen validate` reports)"
        )
        out.extend(f"  + {finding_line(f)}" for f in diff.findings_added)
        out.extend(f"  - {finding_line(f)}" for f in diff.findings_removed)
    for t in changed:
        out.append("")
        jobs = f"{t.base_jobs} -> {t.head_jobs}" if t.base_jobs != t.head_jobs else t.head_jobs
        out.append(
            f"{t.target.name} ({target_path(t.target)}): {target_tally(t)}, {jobs} jobs, "
            + target_cost(t)
        )
        note = existence_line(t, base, head)
        if note:
            out.append(f"  ! {note}")
        for key, (old, new) in t.settings.items():
            out.append(f"  * target {key}: {show_value(old)} -> {show_value(new)}")
        for sign, listed in (("+", t.added), ("-", t.removed)):
            out.extend(f"  {sign} {job.label}{_quarantine_suffix(job)}" for job in listed)
        for fields, jobs_changed in field_groups(t.changed):
            out.extend(f"  ~ {job.label}" for job in jobs_changed)
            for name, (old, new) in fields.items():
                out.extend(f"      {line}" for line in _text_field(name, old, new))
        for q in t.quarantine:
            out.append(f"  q {q.change} {q.job.label}: {change_text(q)}")
        for sign, word, moved in ((">", "to", t.moved_out), ("<", "from", t.moved_in)):
            for other, jobs_moved in moves_by_target(moved):
                labels = ", ".join(j.label for j in jobs_moved)
                out.append(f"  {sign} moved {word} {other} ({len(jobs_moved)} jobs): {labels}")
        for d in t.duplicates:
            places = ", ".join(str(w) for w in d.locations)
            out.append(f"  . duplicate definition {d.change} at {places}: {d.job.label}")
    unchanged = [t.target.name for t in diff.targets if t.unchanged and not t.duplicates]
    if unchanged:
        out += ["", f"unchanged ({len(unchanged)}): {', '.join(unchanged)}"]
    if diff.evidence:
        out += ["", "evidence (results store):"]
        out += [f"  {entry}: {line}" for entry, line in diff.evidence.items()]
    out += [f"note: {note}" for note in diff.notes] if notes else []
    # Each entry is one line: a line break or control character inside a value
    # (a hostile test case) is shown escaped, never as a line of its own.
    text = "\n".join(terminal_line(line) for line in out) + "\n"
    return text + golden_text(diff.goldens)


def _text_field(name: str, old: Any, new: Any) -> list[str]:
    if is_multiline(old, new):
        return [f"{name}:", *(f"  {line}" for line in text_diff(old, new, name))]
    return [f"{name}: {value_change(old, new)}"]


def _quarantine_suffix(job: Job) -> str:
    return "" if job.quarantine is None else f" (quarantined: {mark_text(job.quarantine)})"


def render(diff: SelectionDiff, fmt: str, *, notes: bool = True) -> str:
    """The diff in a format (`notes`: as `render_text` takes it)."""
    if fmt == "json":
        return render_json(diff)
    if fmt == "markdown":
        return render_markdown(diff)
    return render_text(diff, notes=notes)
