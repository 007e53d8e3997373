"""How the diff's text and comment name things: a job, a value and its
change, a tracker, a quarantine mark, a habit, a target's tally."""

from __future__ import annotations

import difflib
import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from matrixgen.diff.model import (
    LIFTED,
    ChangedJob,
    Moved,
    QuarantineChange,
    TargetDiff,
)
from matrixgen.engine.targets import is_holding_pen
from matrixgen.model.errors import Finding
from matrixgen.model.jobs import Job, QuarantineMark, Target
from matrixgen.util import markdown as md
from matrixgen.util.patterns import name_pattern, whole
from matrixgen.util.words import counted

SCRIPT_DIFF_LINES = 40
SHORT_DIFF_LINES = 12  # a longer diff of a multi-line field is folded in Markdown


def show_value(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def is_multiline(old: Any, new: Any) -> bool:
    return any(isinstance(v, str) and "\n" in v.rstrip("\n") for v in (old, new))


def mapping_change(old: Any, new: Any) -> str | None:
    """`+B=2, -A=1, C: 1 -> 2` for two mappings (env, variables), else None."""
    sides = (old, new)
    if sides == (None, None) or not all(isinstance(v, Mapping) or v is None for v in sides):
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


def word_change(old: Any, new: Any) -> list[tuple[str, str]] | None:
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
        context = aw[max(0, i1 - 1) : i1]
        out.append((" ".join([*context, *aw[i1:i2]]), " ".join([*context, *bw[j1:j2]])))
    return out or None


def value_change(old: Any, new: Any, *, markdown: bool = False) -> str:
    """A one-line value's change, each side as code in Markdown: two mappings as
    `mapping_change` says it, two long command lines by the words that differ,
    else `old -> new`."""
    show, arrow, dots = (md.code, "→", "…") if markdown else (str, "->", "...")
    mapped = mapping_change(old, new)
    if mapped is not None:
        return show(mapped)
    words = word_change(old, new)
    if words is not None:
        return "; ".join(
            f"{show(dots + a + dots)} {arrow} {show(dots + b + dots)}" for a, b in words
        )
    return f"{show(show_value(old))} {arrow} {show(show_value(new))}"


def text_diff(old: Any, new: Any, name: str) -> list[str]:
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


def changed_lines(old: Any, new: Any) -> int:
    """How many lines a multi-line value loses and gains."""
    a, b = (old or "").splitlines(), (new or "").splitlines()
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return sum(
        (i2 - i1) + (j2 - j1) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"
    )


def field_groups(changed: Sequence[ChangedJob]) -> list[tuple[Mapping[str, tuple], list[Job]]]:
    """Changed jobs grouped by identical field changes (one spec edit, many jobs);
    the job's own name is left out of the key, so a rename does not split groups."""
    grouped: dict[str, tuple[Mapping[str, tuple], list[Job]]] = {}
    for c in changed:
        key = json.dumps(c.fields, sort_keys=True, default=str)
        grouped.setdefault(key, (c.fields, []))[1].append(c.head)
    return sorted(grouped.values(), key=lambda g: (g[1][0].sort_key(), len(g[1])))


def mark_text(mark: QuarantineMark, *, markdown: bool = False) -> str:
    nodes = f", {counted(len(mark.node_ids), 'node id')}" if mark.node_ids else ""
    tracker, text, code = (tracker_md, md.text, md.code) if markdown else (str, str, str)
    words = f"{text(mark.action)}, {text(mark.kind)}{nodes}"
    return f"{tracker(mark.tracker)}, {words}, entry {code(mark.id)}"


_ISSUE_REF = name_pattern(r"(?:[A-Za-z0-9.-]+/[A-Za-z0-9.-]+)?#\d+")


def tracker_md(tracker: str) -> str:
    """Each tracker of a mark (entries combine theirs with ", ") as a link where it
    is a plain http(s) URL; `#N` stays as it is, for GitHub to link in the PR's
    repository; anything else is escaped text."""

    def one(ref: str) -> str:
        if md.safe_url(ref):
            return md.link(_short_tracker(ref), ref)
        return ref if whole(_ISSUE_REF, ref) else md.text(ref)

    return ", ".join(map(one, tracker.split(", ")))


def _short_tracker(tracker: str) -> str:
    """`#7201` for an issue or pull request URL, the text itself otherwise."""
    match = re.search(r"/(?:issues|pull|merge_requests)/([0-9]+)/?\Z", tracker)
    return f"#{match.group(1)}" if match else tracker


def target_tally(t: TargetDiff) -> str:
    text = f"+{len(t.added)} -{len(t.removed)} ~{len(t.changed)}"
    if t.quarantine:
        text += f" q{len(t.quarantine)}"
    if t.moved_out or t.moved_in:
        text += f" m{len(t.moved_out) + len(t.moved_in)}"
    return text


def target_path(target: Target) -> str:
    sel = target.selector
    system = "holding pen" if is_holding_pen(sel.scope) else target.system.value
    parts = [system, sel.scope, sel.platform, sel.environment, sel.cadence]
    return " ".join(p for p in parts if p)


def habit_text(q: QuarantineChange, *, markdown: bool = False) -> str:
    """`parked in mr-broken, tracker #513`, `commented out: # hang: #513, tracker #513`
    (and in the text, what Megatron-LM's parser makes of it)."""
    habit = q.habit
    assert habit is not None
    text = habit.describe(md.code if markdown else str)
    if habit.tracker:
        text += f", tracker {tracker_md(habit.tracker) if markdown else habit.tracker}"
    if markdown or q.change == LIFTED:
        return text
    return text + " (a removal, to Megatron-LM's parser)"


def moves_by_target(moved: Sequence[Moved]) -> list[tuple[str, list[Job]]]:
    grouped: dict[str, list[Job]] = defaultdict(list)
    for m in moved:
        grouped[m.target].append(m.job)
    return sorted(grouped.items())


def existence_line(t: TargetDiff, base: str, head: str) -> str | None:
    said = {"head": ("new", head), "base": ("gone", base)}.get(t.exists)
    return None if said is None else f"this target is {said[0]}: it is configured at {said[1]} only"


def short_ref(ref: str) -> str:
    return ref[:12] if len(ref) == 40 or len(ref) == 64 else ref


def summary_words(summary: Mapping[str, Any], sep: str = ", ", minus: str = "-") -> str:
    """`+6 added, -1 removed, ~2 changed, 1 quarantine change` (`, 3 moved`)."""
    words = [f"+{summary['added']} added", f"{minus}{summary['removed']} removed"]
    words += [f"~{summary['changed']} changed", counted(summary["quarantine"], "quarantine change")]
    return sep.join([*words, *([f"{summary['moved']} moved"] if summary["moved"] else [])])


def finding_line(finding: Finding) -> str:
    return f"{finding.location}: {finding.severity.value}: {finding.message} [{finding.code}]"


def change_text(q: QuarantineChange, *, markdown: bool = False) -> str:
    """What a quarantine change says of its job: its habit, or its mark (and the
    mark it had, when it had another)."""
    if q.habit is not None:
        return habit_text(q, markdown=markdown)
    said = mark_text(q.mark, markdown=markdown)
    if q.old is not None and q.new is not None:
        return f"{said} (was {mark_text(q.old, markdown=markdown)})"
    return said
