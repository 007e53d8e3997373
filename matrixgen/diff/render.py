"""Render a selection diff as text (terminals), markdown (a PR comment) or JSON.

JSON shape (`--format json`, published as `schema/diff.schema.json`):

    {"base": SHA, "head": SHA or "worktree",
     "targets": [{"target": {"system", "scope", "platform", "environment", "cadence"},
                  "name": NAME,
                  "added": [JOB], "removed": [JOB],
                  "changed": [{"job": JOB, "fields": {FIELD: [old, new]}}],
                  "quarantine": [{"change": CHANGE, "job": JOB,
                                  "old": MARK or null, "new": MARK or null,
                                  ["habit": HABIT, "parser": "added" | "removed"]}],
                  "moved_out": [{"job": JOB, "to": NAME}],
                  "moved_in": [{"job": JOB, "from": NAME}],
                  "duplicates": [{"change": "added" | "removed", "job": JOB,
                                  "locations": ["file:line:column", ...]}],
                  "settings": {KEY: [old, new]},      # the target's own definition
                  "exists": "both" | "base" | "head",
                  ["holding_pen": true,]              # no system runs it; costs nothing
                  "counts": {"added", "removed", "changed", "quarantine",
                             "moved_out", "moved_in", "parser": {"added", "removed"}},
                  "jobs": {"base": N, "head": N},     # jobs the target runs
                  COST...}],                          # one run of the target
     "summary": {"targets", "targets_changed", "added", "removed", "changed",
                 "quarantine", "moved", "moves": [{"from", "to", "jobs"}],
                 "parser": {"added", "removed"}, "findings_added",
                 "findings_removed", "duplicates", COST...,
                 "pipelines": [{"pipeline", "jobs_before", "jobs_after",
                                "jobs_delta", COST...}]},
     "findings": {"added": [FINDING], "removed": [FINDING]},
     "notes": [TEXT],
     "evidence": {ENTRY ID: TEXT}}                    # with a results store only

COST is `gpu_hours_before`, `gpu_hours_after`, `gpu_hours_delta` and the same
three `weighted_gpu_hours_*` (views/cost.py's formula and platform weights over
the jobs each side's file holds for the target; rounded to 3 decimals, the
delta being after minus before as shown). The summary's figures are the
targets' summed; a pipeline's (system/scope[/cadence], as `stats --cost` names
it) are those of its targets, so "+6 jobs, +12.5 GPU-h per run of gitlab/mr".

JOB is a job as `list --format json` prints it (the head's where both sides
have it); FIELD is an emitted field (a GitHub matrix row's key, a GitLab job's
key, `name` for its job name); CHANGE is one of quarantined, lifted, action
changed, entry changed, arrives quarantined, leaves quarantined; MARK is
{id, tracker, action, kind[, node_ids]}; HABIT is {scope} or {comment} (an
upstream habit instead of an entry, with its tracker when its comment names
one) and "parser" what Megatron-LM's parser, which reads neither, sees; "parser"
counts add moves, habits and jobs arriving or leaving quarantined to the added
and removed; FIELD may be `workload.NAME` (a field of the resolved workload a
launcher that reloads the recipe submits); FINDING is {code, severity,
location, message} (what validate reports on one side and not the other).
The target object echoes the selector
as configured (a scope stays "nightly"); every target is listed, unchanged ones
with empty lists; summary counts are the per-target counts summed, as the
table shows them.

All three are deterministic: targets in system, scope, platform, environment
order; jobs by identity; no times or other run-dependent text. The markdown
starts with a hidden marker (`MARKER`) so a bot can find its own comment and
update it in place; every string in it is escaped for where it goes
(`diff.markdown`); it stays under GitHub's comment size limit by cutting long
lists (the JSON always has everything).
"""

from __future__ import annotations

import difflib
import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from matrixgen.diff import markdown as md
from matrixgen.diff.evidence import evidence_of
from matrixgen.diff.model import (
    LIFTED,
    ChangedJob,
    Moved,
    QuarantineChange,
    SelectionDiff,
    TargetDiff,
    target_counts,
)
from matrixgen.engine.errors import Finding
from matrixgen.engine.model import Job, QuarantineMark, Target
from matrixgen.engine.targets import is_holding_pen
from matrixgen.util import jsontext
from matrixgen.util.escape import json_for_log, terminal_line
from matrixgen.util.patterns import name_pattern, whole
from matrixgen.util.words import counted
from matrixgen.views.cost import Cost, hours, pipeline_name, signed_hours

MARKER = "<!-- matrixgen-diff -->"
# GitHub refuses comments over 65,536 characters; keep a margin for the cut note.
MARKDOWN_LIMIT = 60_000
ITEMS_PER_SECTION = 50
SCRIPT_DIFF_LINES = 40
SHORT_DIFF_LINES = 12  # a longer diff of a multi-line field is folded in Markdown


# ---------------------------------------------------------------- JSON


def to_json_data(diff: SelectionDiff) -> dict[str, Any]:
    """The documented JSON shape."""
    return {
        "base": diff.base,
        "head": diff.head,
        "targets": [_target_data(t) for t in diff.targets],
        "summary": _summary(diff),
        "findings": {
            "added": [_finding_data(f) for f in diff.findings_added],
            "removed": [_finding_data(f) for f in diff.findings_removed],
        },
        "notes": list(diff.notes),
        **({"evidence": dict(diff.evidence)} if diff.evidence is not None else {}),
    }


def _finding_data(finding: Finding) -> dict[str, Any]:
    return {
        "code": finding.code,
        "severity": finding.severity.value,
        "location": str(finding.location),
        "message": finding.message,
    }


def _quarantine_data(q: QuarantineChange) -> dict[str, Any]:
    out: dict[str, Any] = {
        "change": q.change,
        "job": q.job.to_dict(),
        "old": q.old.to_dict() if q.old else None,
        "new": q.new.to_dict() if q.new else None,
    }
    if q.habit is not None:
        out["habit"] = q.habit.to_dict()
    if q.parser is not None:
        out["parser"] = q.parser
    return out


def render_json(diff: SelectionDiff) -> str:
    return json_for_log(jsontext.pretty(to_json_data(diff)))


def _target_data(t: TargetDiff) -> dict[str, Any]:
    counts = t.counts()
    return {
        # A holding pen is no system's target.
        "target": {**t.target.to_dict(), **({"system": None} if t.holding_pen else {})},
        "name": t.target.name,
        "added": [j.to_dict() for j in t.added],
        "removed": [j.to_dict() for j in t.removed],
        "changed": [
            {"job": c.head.to_dict(), "fields": {k: [v[0], v[1]] for k, v in c.fields.items()}}
            for c in t.changed
        ],
        "quarantine": [_quarantine_data(q) for q in t.quarantine],
        "moved_out": [{"job": m.job.to_dict(), "to": m.target} for m in t.moved_out],
        "moved_in": [{"job": m.job.to_dict(), "from": m.target} for m in t.moved_in],
        "duplicates": [
            {"change": d.change, "job": d.job.to_dict(), "locations": [str(w) for w in d.locations]}
            for d in t.duplicates
        ],
        "settings": {k: [v[0], v[1]] for k, v in t.settings.items()},
        "exists": t.exists,
        **({"holding_pen": True} if t.holding_pen else {}),
        "counts": {
            "added": counts["+"],
            "removed": counts["-"],
            "changed": counts["~"],
            "quarantine": counts["q"],
            "moved_out": len(t.moved_out),
            "moved_in": len(t.moved_in),
            "parser": t.parser_counts(),
        },
        "jobs": {"base": t.base_jobs, "head": t.head_jobs},
        **_cost_fields(t.base_cost, t.head_cost),
    }


def _cost_fields(before: Cost, after: Cost) -> dict[str, float]:
    """GPU-hours before, after and the change, as rounded figures whose
    difference is the change shown."""
    out: dict[str, float] = {}
    for prefix, a, b in (
        ("gpu_hours", before.gpu_hours_max, after.gpu_hours_max),
        ("weighted_gpu_hours", before.weighted_max, after.weighted_max),
    ):
        old, new = round(a, 3), round(b, 3)
        out[f"{prefix}_before"] = old
        out[f"{prefix}_after"] = new
        out[f"{prefix}_delta"] = round(new - old, 3) + 0.0  # never -0.0
    return out


def cost_totals(targets: Sequence[TargetDiff]) -> tuple[Cost, Cost]:
    """One run of each of the targets, before and after."""
    before, after = Cost(), Cost()
    for t in targets:
        before, after = before + t.base_cost, after + t.head_cost
    return before, after


def pipelines(diff: SelectionDiff) -> list[tuple[str, list[TargetDiff]]]:
    """The targets of each pipeline (one run of it), in pipeline order."""
    grouped: dict[str, list[TargetDiff]] = defaultdict(list)
    for t in diff.targets:
        if not t.holding_pen:  # no pipeline runs a holding pen
            grouped[pipeline_name(t.target)].append(t)
    return sorted(grouped.items())


def _pipeline_data(name: str, targets: Sequence[TargetDiff]) -> dict[str, Any]:
    before = sum(t.base_jobs for t in targets)
    after = sum(t.head_jobs for t in targets)
    return {
        "pipeline": name,
        "jobs_before": before,
        "jobs_after": after,
        "jobs_delta": after - before,
        **_cost_fields(*cost_totals(targets)),
    }


def _summary(diff: SelectionDiff) -> dict[str, Any]:
    """The per-target counts and costs summed over every target."""
    counts = target_counts(diff.targets)
    parser = [t.parser_counts() for t in diff.targets]
    return {
        "targets": len(diff.targets),
        "targets_changed": sum(not t.unchanged for t in diff.targets),
        "added": counts["+"],
        "removed": counts["-"],
        "changed": counts["~"],
        "quarantine": counts["q"],
        "moved": sum(len(t.moved_out) for t in diff.targets),
        "moves": [{"from": a, "to": b, "jobs": n} for (a, b), n in moves(diff)],
        "parser": {
            "added": sum(p["added"] for p in parser),
            "removed": sum(p["removed"] for p in parser),
        },
        "findings_added": len(diff.findings_added),
        "findings_removed": len(diff.findings_removed),
        "duplicates": sum(len(t.duplicates) for t in diff.targets),
        **_cost_fields(*cost_totals(diff.targets)),
        "pipelines": [_pipeline_data(n, ts) for n, ts in pipelines(diff)],
    }


def moves(diff: SelectionDiff) -> list[tuple[tuple[str, str], int]]:
    """((from, to), jobs) for each pair of targets jobs moved between, in order."""
    counted: dict[tuple[str, str], int] = defaultdict(int)
    for t in diff.targets:
        for m in t.moved_out:
            counted[(t.target.name, m.target)] += 1
    return sorted(counted.items())


def _signed(value: int) -> str:
    return f"+{value}" if value > 0 else str(value)


def cost_change(pipeline: Mapping[str, Any], name: str | None = None) -> str:
    """ "+6 jobs, +12.5 GPU-h per run of gitlab/mr" (the weighted change beside it
    where platform weights make it differ); `name` shows the pipeline (escaped
    for where it goes), the figures being the diff's own text."""
    text = (
        f"{_signed(pipeline['jobs_delta'])} jobs, {signed_hours(pipeline['gpu_hours_delta'])} GPU-h"
    )
    if pipeline["weighted_gpu_hours_delta"] != pipeline["gpu_hours_delta"]:
        text += f" ({signed_hours(pipeline['weighted_gpu_hours_delta'])} weighted)"
    return text + f" per run of {pipeline['pipeline'] if name is None else name}"


def changed_pipelines(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pipelines whose job count or cost changes."""
    return [
        p
        for p in summary["pipelines"]
        if p["jobs_delta"] or p["gpu_hours_delta"] or p["weighted_gpu_hours_delta"]
    ]


def _cost_line(summary: Mapping[str, Any], arrow: str = "->") -> str:
    return (
        f"{signed_hours(summary['gpu_hours_delta'])} GPU-h per run of every target "
        f"({hours(summary['gpu_hours_before'])} {arrow} {hours(summary['gpu_hours_after'])}; "
        "an upper bound, as stats --cost prices it)"
    )


def _target_cost(t: TargetDiff, arrow: str = "->", unit: str = " GPU-h") -> str:
    before, after = hours(t.base_cost.gpu_hours_max), hours(t.head_cost.gpu_hours_max)
    if before == after:
        return f"{after}{unit}"
    return f"{signed_hours(t.gpu_hours_delta)}{unit} ({before} {arrow} {after})"


# ---------------------------------------------------------------- shared helpers


def job_label(job: Job) -> str:
    """`model/test_case [tag]`: platform and environment are the target's."""
    text = f"{job.model}/{job.test_case}"
    if job.tag:
        text += f" [{job.tag}]"
    return text


def show_value(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _is_multiline(old: Any, new: Any) -> bool:
    return any(isinstance(v, str) and "\n" in v.rstrip("\n") for v in (old, new))


def _mapping_change(old: Any, new: Any) -> str | None:
    """`+B=2, -A=1, C: 1 -> 2` for two mappings (env, variables), else None."""
    if not (isinstance(old, Mapping) or old is None) or not (
        isinstance(new, Mapping) or new is None
    ):
        return None
    if old is None and new is None:
        return None
    a, b = dict(old or {}), dict(new or {})
    parts = [f"+{k}={show_value(b[k])}" for k in sorted(b.keys() - a.keys())]
    parts += [f"-{k}={show_value(a[k])}" for k in sorted(a.keys() - b.keys())]
    parts += [
        f"{k}: {show_value(a[k])} -> {show_value(b[k])}"
        for k in sorted(a.keys() & b.keys())
        if a[k] != b[k]
    ]
    return ", ".join(parts)


def _command(value: Any) -> str | None:
    """A command line: a string, or a one-line list of one (a GitLab script)."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value if isinstance(value, str) and "\n" not in value else None


def _word_change(old: Any, new: Any) -> list[tuple[str, str]] | None:
    """For two long command lines: each differing stretch of words, with the word
    before it, as (old, new); None for anything else."""
    a, b = _command(old), _command(new)
    if a is None or b is None or max(len(a), len(b)) <= 80:
        return None
    aw, bw = a.split(" "), b.split(" ")
    out = []
    matcher = difflib.SequenceMatcher(a=aw, b=bw, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        lead = max(0, i1 - 1)
        context = aw[lead:i1] if i1 > 0 else []
        out.append((" ".join([*context, *aw[i1:i2]]), " ".join([*context, *bw[j1:j2]])))
    return out or None


def _text_diff(old: Any, new: Any, name: str) -> list[str]:
    lines = list(
        difflib.unified_diff(
            (old or "").splitlines(),
            (new or "").splitlines(),
            fromfile=f"{name} (base)",
            tofile=f"{name} (head)",
            lineterm="",
            n=1,
        )
    )
    if len(lines) > SCRIPT_DIFF_LINES:
        lines = [
            *lines[:SCRIPT_DIFF_LINES],
            f"... {counted(len(lines) - SCRIPT_DIFF_LINES, 'more line')}",
        ]
    return lines


def _changed_lines(old: Any, new: Any) -> int:
    """How many lines a multi-line value loses and gains."""
    a, b = (old or "").splitlines(), (new or "").splitlines()
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return sum(
        (i2 - i1) + (j2 - j1) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"
    )


def _groups(changed: Sequence[ChangedJob]) -> list[tuple[Mapping[str, tuple], list[Job]]]:
    """Changed jobs grouped by identical field changes (one spec edit, many jobs);
    the job's own name is left out of the key, so a rename does not split groups."""
    grouped: dict[str, tuple[Mapping[str, tuple], list[Job]]] = {}
    for c in changed:
        key = json.dumps(c.fields, sort_keys=True, default=str)
        grouped.setdefault(key, (c.fields, []))[1].append(c.head)
    return sorted(grouped.values(), key=lambda g: (g[1][0].sort_key(), len(g[1])))


def _mark_text(mark: QuarantineMark, *, markdown: bool = False) -> str:
    nodes = f", {counted(len(mark.node_ids), 'node id')}" if mark.node_ids else ""
    if markdown:
        return (
            f"{_tracker_md(mark.tracker)}, {md.text(mark.action)}, {md.text(mark.kind)}"
            f"{nodes}, entry {md.code(mark.id)}"
        )
    return f"{mark.tracker}, {mark.action}, {mark.kind}{nodes}, entry {mark.id}"


_ISSUE_REF = name_pattern(r"(?:[A-Za-z0-9.-]+/[A-Za-z0-9.-]+)?#\d+")


def _tracker_md(tracker: str) -> str:
    """Each tracker of a mark (entries combine theirs with ", ") as a link where it
    is a plain http(s) URL; `#N` stays as it is, for GitHub to link in the PR's
    repository; anything else is escaped text."""
    parts = []
    for ref in tracker.split(", "):
        if md.safe_url(ref):
            parts.append(md.link(_short_tracker(ref), ref))
        elif whole(_ISSUE_REF, ref):
            parts.append(ref)
        else:
            parts.append(md.text(ref))
    return ", ".join(parts)


def _short_tracker(tracker: str) -> str:
    """`#7201` for an issue or pull request URL, the text itself otherwise."""
    match = re.search(r"/(?:issues|pull|merge_requests)/([0-9]+)/?\Z", tracker)
    return f"#{match.group(1)}" if match else tracker


def _tally(t: TargetDiff) -> str:
    text = f"+{len(t.added)} -{len(t.removed)} ~{len(t.changed)}"
    if t.quarantine:
        text += f" q{len(t.quarantine)}"
    if t.moved_out or t.moved_in:
        text += f" m{len(t.moved_out) + len(t.moved_in)}"
    return text


def _target_path(target: Target) -> str:
    sel = target.selector
    system = "holding pen" if is_holding_pen(sel.scope) else target.system.value
    parts = [system, sel.scope, sel.platform, sel.environment, sel.cadence]
    return " ".join(p for p in parts if p)


def _habit_text(q: QuarantineChange) -> str:
    """`parked in mr-broken, tracker #513`, `commented out: # hang: #513, tracker #513`."""
    assert q.habit is not None
    text = q.habit.describe()
    if q.habit.tracker:
        text += f", tracker {q.habit.tracker}"
    return text + (" (a removal, to Megatron-LM's parser)" if q.change != LIFTED else "")


def _moves_by_target(moved: Sequence[Moved]) -> list[tuple[str, list[Job]]]:
    grouped: dict[str, list[Job]] = defaultdict(list)
    for m in moved:
        grouped[m.target].append(m.job)
    return sorted(grouped.items())


def _existence(t: TargetDiff, base: str, head: str) -> str | None:
    if t.exists == "head":
        return f"this target is new: it is configured at {head} only"
    if t.exists == "base":
        return f"this target is gone: it is configured at {base} only"
    return None


def _short(ref: str) -> str:
    return ref[:12] if len(ref) == 40 or len(ref) == 64 else ref


def _quarantine_counts(t: TargetDiff) -> list[tuple[str, int]]:
    counts: dict[str, int] = defaultdict(int)
    for q in t.quarantine:
        counts[q.change] += 1
    return sorted(counts.items())


def _summary_words(summary: Mapping[str, Any]) -> str:
    text = (
        f"+{summary['added']} added, -{summary['removed']} removed, "
        f"~{summary['changed']} changed, {counted(summary['quarantine'], 'quarantine change')}"
    )
    if summary["moved"]:
        text += f", {summary['moved']} moved"
    return text


def _finding_line(finding: Finding) -> str:
    return f"{finding.location}: {finding.severity.value}: {finding.message} [{finding.code}]"


# ---------------------------------------------------------------- text


def render_text(diff: SelectionDiff, *, notes: bool = True) -> str:
    """A terminal report: changed targets with their jobs, then the unchanged ones;
    `notes=False` leaves the notes out (the command prints them on stderr)."""
    base, head = _short(diff.base), _short(diff.head)
    out = [f"selection diff: base {base} -> head {head}"]
    summary = _summary(diff)
    changed = [t for t in diff.targets if not t.unchanged or t.duplicates]
    out.append(
        f"{summary['targets_changed']} of {counted(summary['targets'], 'target')} change: "
        + _summary_words(summary)
        + " (counted per target)"
    )
    out.append("cost: " + _cost_line(summary))
    out.extend(f"  {cost_change(p)}" for p in changed_pipelines(summary))
    out.extend(f"moved from {a} to {b} ({n} jobs)" for (a, b), n in moves(diff))
    if diff.findings_added or diff.findings_removed:
        out.append(
            f"findings: +{len(diff.findings_added)} added, -{len(diff.findings_removed)} "
            "removed (what `matrixgen validate` reports)"
        )
        out.extend(f"  + {_finding_line(f)}" for f in diff.findings_added)
        out.extend(f"  - {_finding_line(f)}" for f in diff.findings_removed)
    for t in changed:
        out.append("")
        jobs = f"{t.base_jobs} -> {t.head_jobs}" if t.base_jobs != t.head_jobs else t.head_jobs
        out.append(
            f"{t.target.name} ({_target_path(t.target)}): {_tally(t)}, {jobs} jobs, "
            + _target_cost(t)
        )
        note = _existence(t, base, head)
        if note:
            out.append(f"  ! {note}")
        for key, (old, new) in t.settings.items():
            out.append(f"  * target {key}: {show_value(old)} -> {show_value(new)}")
        for job in t.added:
            out.append(f"  + {job_label(job)}{_quarantine_suffix(job)}")
        for job in t.removed:
            out.append(f"  - {job_label(job)}{_quarantine_suffix(job)}")
        for fields, jobs_changed in _groups(t.changed):
            for job in jobs_changed:
                out.append(f"  ~ {job_label(job)}")
            for name, (old, new) in fields.items():
                out.extend(f"      {line}" for line in _text_field(name, old, new))
        for q in t.quarantine:
            if q.habit is not None:
                out.append(f"  q {q.change} {job_label(q.job)}: {_habit_text(q)}")
                continue
            out.append(f"  q {q.change} {job_label(q.job)}: {_mark_text(q.mark)}{_was(q)}")
        for other, jobs_moved in _moves_by_target(t.moved_out):
            labels = ", ".join(job_label(j) for j in jobs_moved)
            out.append(f"  > moved to {other} ({len(jobs_moved)} jobs): {labels}")
        for other, jobs_moved in _moves_by_target(t.moved_in):
            labels = ", ".join(job_label(j) for j in jobs_moved)
            out.append(f"  < moved from {other} ({len(jobs_moved)} jobs): {labels}")
        for d in t.duplicates:
            places = ", ".join(str(w) for w in d.locations)
            out.append(f"  . duplicate definition {d.change} at {places}: {job_label(d.job)}")
    unchanged = [t.target.name for t in diff.targets if t.unchanged and not t.duplicates]
    if unchanged:
        out.append("")
        out.append(f"unchanged ({len(unchanged)}): {', '.join(unchanged)}")
    if diff.evidence:
        out += ["", "evidence (results store):"]
        out += [f"  {entry}: {line}" for entry, line in diff.evidence.items()]
    for note in diff.notes if notes else ():
        out.append(f"note: {note}")
    # Each entry is one line: a line break or control character inside a value
    # (a hostile test case) is shown escaped, never as a line of its own.
    return "\n".join(terminal_line(line) for line in out) + "\n"


def _was(q: QuarantineChange, *, markdown: bool = False) -> str:
    if q.old is not None and q.new is not None:
        return f" (was {_mark_text(q.old, markdown=markdown)})"
    return ""


def _text_field(name: str, old: Any, new: Any) -> list[str]:
    if _is_multiline(old, new):
        return [f"{name}:", *(f"  {line}" for line in _text_diff(old, new, name))]
    mapped = _mapping_change(old, new)
    if mapped is not None:
        return [f"{name}: {mapped}"]
    words = _word_change(old, new)
    if words is not None:
        return [f"{name}: " + "; ".join(f"...{a}... -> ...{b}..." for a, b in words)]
    return [f"{name}: {show_value(old)} -> {show_value(new)}"]


def _quarantine_suffix(job: Job) -> str:
    if job.quarantine is None:
        return ""
    return f" (quarantined: {_mark_text(job.quarantine)})"


# ---------------------------------------------------------------- markdown


def render_markdown(diff: SelectionDiff) -> str:
    """A PR comment: a summary line, one table row per changed target, details
    per target folded away."""
    text = _markdown(diff, details=True)
    if len(text) > MARKDOWN_LIMIT:
        text = _markdown(diff, details=False)
    if len(text) > MARKDOWN_LIMIT:  # thousands of targets: cut the table too
        text = _markdown(diff, details=False, rows=200)
    return text


def _markdown(diff: SelectionDiff, *, details: bool, rows: int | None = None) -> str:
    base, head = _short(diff.base), _short(diff.head)
    head_text = "the working tree" if diff.head == "worktree" else md.code(head)
    out = [MARKER, f"### matrixgen selection diff: {md.code(base)} → {head_text}", ""]
    summary = _summary(diff)
    changed = [t for t in diff.targets if not t.unchanged or t.duplicates]
    if not changed:
        out.append(
            f"**No selection change** in any of the {counted(summary['targets'], 'target')}."
        )
    else:
        moved_text = f" · {summary['moved']} moved" if summary["moved"] else ""
        out.append(
            f"**+{summary['added']} added · −{summary['removed']} removed · "
            f"~{summary['changed']} changed · {counted(summary['quarantine'], 'quarantine change')}"
            f"{moved_text}** in {summary['targets_changed']} of "
            f"{counted(summary['targets'], 'target')}."
        )
    moved = changed_pipelines(summary)
    if changed or moved:
        # The figures are the diff's own text; only the pipeline names come from the tree.
        out += ["", "**Cost:** " + _cost_line(summary, "→")]
        if moved:
            out.append("")
            out += [f"- {cost_change(p, md.code(p['pipeline']))}" for p in moved]
    if changed:
        out += ["", "| target | jobs | GPU-h per run | added | removed | changed | quarantine |"]
        out.append("| :-- | --: | --: | --: | --: | --: | :-- |")
        for t in changed[:rows]:
            flag = {"head": " (new)", "base": " (gone)"}.get(t.exists, "")
            if t.settings:
                flag += " (settings)"
            if t.holding_pen:
                flag += " (holding pen)"
            jobs = (
                f"{t.head_jobs}" if t.base_jobs == t.head_jobs else f"{t.base_jobs} → {t.head_jobs}"
            )
            cell = ", ".join(f"{n} {change}" for change, n in _quarantine_counts(t))
            if t.duplicates:
                cell += (", " if cell else "") + counted(len(t.duplicates), "duplicate note")
            for count, word in ((len(t.moved_out), "moved out"), (len(t.moved_in), "moved in")):
                if count:
                    cell += (", " if cell else "") + f"{count} {word}"
            out.append(
                f"| {md.code(t.target.name)}{flag} | {jobs} | {_target_cost(t, '→', unit='')} "
                f"| +{len(t.added)} | −{len(t.removed)} | ~{len(t.changed)} | {cell} |"
            )
        if rows is not None and len(changed) > rows:
            out.append(f"| … and {counted(len(changed) - rows, 'more target')} | | | | | | |")
    unchanged = [t.target.name for t in diff.targets if t.unchanged and not t.duplicates]
    if rows is not None:
        unchanged = unchanged[:rows]
    if unchanged and changed:
        out += [
            "",
            f"<details><summary>{counted(len(unchanged), 'target')} unchanged</summary>",
            "",
            ", ".join(md.code(n) for n in unchanged),
            "",
            "</details>",
        ]
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
        out += _capped(items)
    if diff.notes:
        out.append("")
        out += [f"> ⚠️ {md.text(note)}" for note in diff.notes]
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


def _finding_md(finding: Finding) -> str:
    return (
        f"{md.code(finding.code)} ({md.text(finding.severity.value)}) at "
        f"{md.code(str(finding.location))}: {md.text(finding.message)}"
    )


def _habit_md(q: QuarantineChange) -> str:
    """`parked in `mr-broken`, tracker #513` for a PR comment."""
    habit = q.habit
    assert habit is not None
    if habit.scope is not None:
        text = f"parked in {md.code(habit.scope)}"
        if habit.comment:
            text += f" ({md.code(habit.comment)})"
    else:
        text = f"commented out: {md.code(habit.comment or '')}"
    if habit.tracker:
        text += f", tracker {_tracker_md(habit.tracker)}"
    return text


def _habit_summary(diff: SelectionDiff) -> list[str]:
    grouped: dict[tuple[str, str], tuple[set, list[str], QuarantineChange]] = {}
    for t in diff.targets:
        for q in t.quarantine:
            if q.habit is None:
                continue
            key = (q.change, _habit_md(q))
            jobs, targets, _ = grouped.setdefault(key, (set(), [], q))
            jobs.add((t.target.name, q.job.sort_key()))
            if t.target.name not in targets:
                targets.append(t.target.name)
    return [
        f"- **{md.text(change)}** {text}: {_reach(jobs, targets)}"
        for (change, text), (jobs, targets, _) in sorted(grouped.items())
    ]


def _reach(jobs: set[tuple[str, tuple]], targets: list[str]) -> str:
    """`1 case, 3 jobs in 3 targets (`a`, `b`, `c`)`: a case is a job's identity
    (model, test case, environment, platform, tag), a job one case in one target."""
    cases = len({key[:5] for _, key in jobs})
    return (
        f"{counted(cases, 'case')}, {counted(len(jobs), 'job')} in "
        f"{counted(len(targets), 'target')} ("
        + ", ".join(md.code(n) for n in targets[:10])
        + (f" and {len(targets) - 10} more" if len(targets) > 10 else "")
        + ")"
    )


def _tracker_summary(diff: SelectionDiff) -> list[str]:
    """One line per (change, entry): what it does to how many jobs, where (and
    one per habit)."""
    grouped: dict[tuple[str, str, str, str, str], tuple[set, list[str]]] = {}
    for t in diff.targets:
        for q in t.quarantine:
            if q.habit is not None:
                continue
            mark = q.mark
            key = (q.change, mark.tracker, mark.id, mark.action, mark.kind)
            jobs, targets = grouped.setdefault(key, (set(), []))
            jobs.add((t.target.name, q.job.sort_key()))
            if t.target.name not in targets:
                targets.append(t.target.name)
    lines = []
    evidence = diff.evidence or {}
    for (change, tracker, entry, action, kind), (jobs, targets) in sorted(grouped.items()):
        mark = QuarantineMark(id=entry, tracker=tracker, action=action, kind=kind)
        lines.append(
            f"- **{md.text(change)}** {_tracker_md(tracker)} ({md.text(action)}, "
            f"{md.text(kind)}, entry {md.code(entry)}): {_reach(jobs, targets)}"
            + _evidence_md(mark, evidence)
        )
    return lines + _habit_summary(diff)


def _evidence_md(mark: QuarantineMark, evidence: Mapping[str, str]) -> str:
    """` — evidence: failed 3 of 40 runs ...` where the results store has some."""
    line = evidence_of(mark, evidence)
    return f" — evidence: {md.text(line)}" if line is not None else ""


def _target_details(t: TargetDiff, base: str, head: str, evidence: Mapping[str, str]) -> list[str]:
    out = [
        f"<details><summary><b>{md.html(t.target.name)}</b> "
        f"({md.html(_target_path(t.target))}): {md.html(_tally(t).replace('-', '−'))}"
        "</summary>",
        "",
    ]
    note = _existence(t, base, head)
    if note:
        out += [f"_{md.text(note)}_", ""]
    if t.settings:
        out += ["**Target settings**", ""]
        out += [
            f"- {md.code(k)}: {md.code(show_value(a))} → {md.code(show_value(b))}"
            for k, (a, b) in t.settings.items()
        ]
        out.append("")
    for title, jobs in (("Added", t.added), ("Removed", t.removed)):
        if jobs:
            out += [f"**{title} ({len(jobs)})**", ""]
            items = [f"- {md.code(job_label(job))}{_md_job_facts(job, evidence)}" for job in jobs]
            out += _capped(items)
            out.append("")
    if t.changed:
        out += [f"**Changed ({len(t.changed)})**", ""]
        items: list[str] = []
        for fields, jobs in _groups(t.changed):
            if len(jobs) > 1 and len(jobs) == t.head_jobs:
                names = f"all {len(jobs)} jobs of this target"
            else:
                names = ", ".join(md.code(job_label(j)) for j in jobs[:ITEMS_PER_SECTION])
                if len(jobs) > ITEMS_PER_SECTION:
                    names += f" and {len(jobs) - ITEMS_PER_SECTION} more"
            items.append(f"- {names}")
            for name, (old, new) in fields.items():
                items.extend(f"  {line}" if line else "" for line in _md_field(name, old, new))
        out += _capped(items, limit=ITEMS_PER_SECTION * 4)
        out.append("")
    if t.quarantine:
        out += [f"**Quarantine ({len(t.quarantine)})**", ""]
        items = [
            f"- {md.text(q.change)} {md.code(job_label(q.job))}: "
            + (
                _habit_md(q)
                if q.habit is not None
                else f"{_mark_text(q.mark, markdown=True)}{_was(q, markdown=True)}"
            )
            for q in t.quarantine
        ]
        out += _capped(items)
        out.append("")
    for title, moved, word in (
        ("Moved out", t.moved_out, "to"),
        ("Moved in", t.moved_in, "from"),
    ):
        if moved:
            out += [f"**{title} ({len(moved)})**", ""]
            items = [
                f"- {word} {md.code(other)} ({len(jobs)} jobs): "
                + ", ".join(md.code(job_label(j)) for j in jobs[:ITEMS_PER_SECTION])
                + _more(len(jobs))
                for other, jobs in _moves_by_target(moved)
            ]
            out += _capped(items)
            out.append("")
    if t.duplicates:
        out += [f"**Duplicate definitions ({len(t.duplicates)})**", ""]
        items = [
            f"- duplicate definition {d.change} at "
            + ", ".join(md.code(str(w)) for w in d.locations)
            + f": {md.code(job_label(d.job))} (it runs once, as before)"
            for d in t.duplicates
        ]
        out += _capped(items)
        out.append("")
    out.append("</details>")
    return out


def _md_job_facts(job: Job, evidence: Mapping[str, str]) -> str:
    facts = [f"cadence {','.join(job.cadence)}", f"n_repeat {job.n_repeat}"]
    facts.append(f"time_limit {job.time_limit}s")
    if job.allow_failure:
        facts.append("allow_failure")
    text = " — " + md.text(", ".join(facts))
    if job.quarantine is not None:
        text += f"; quarantined: {_mark_text(job.quarantine, markdown=True)}"
        text += _evidence_md(job.quarantine, evidence)
    return text


def _md_field(name: str, old: Any, new: Any) -> list[str]:
    if _is_multiline(old, new):
        lines = _text_diff(old, new, name)
        fenced = md.fence_lines(lines, info="diff", indent="  ")
        if len(lines) <= SHORT_DIFF_LINES:
            return [f"- {md.code(name)}:", "", *fenced, ""]
        # A long script's diff is folded: the list of jobs stays readable.
        changed = _changed_lines(old, new)
        return [
            f"- {md.code(name)}: {counted(changed, 'line')} changed",
            "",
            f"  <details><summary>the diff of {md.html(name)}</summary>",
            "",
            *fenced,
            "",
            "  </details>",
            "",
        ]
    mapped = _mapping_change(old, new)
    if mapped is not None:
        return [f"- {md.code(name)}: {md.code(mapped)}"]
    words = _word_change(old, new)
    if words is not None:
        shown = "; ".join(f"{md.code(f'…{a}…')} → {md.code(f'…{b}…')}" for a, b in words)
        return [f"- {md.code(name)}: {shown}"]
    return [f"- {md.code(name)}: {md.code(show_value(old))} → {md.code(show_value(new))}"]


def _more(count: int) -> str:
    return f" and {count - ITEMS_PER_SECTION} more" if count > ITEMS_PER_SECTION else ""


def _capped(items: list[str], limit: int = ITEMS_PER_SECTION) -> list[str]:
    if len(items) <= limit:
        return items
    return [*items[:limit], f"- … and {len(items) - limit} more (`--format json` lists all)"]


def render(diff: SelectionDiff, fmt: str, *, notes: bool = True) -> str:
    """The diff in a format; `notes=False` leaves the notes out of the text
    (a command that prints them on stderr)."""
    if fmt == "json":
        return render_json(diff)
    if fmt == "markdown":
        return render_markdown(diff)
    return render_text(diff, notes=notes)
