"""`matrixgen migrate`: turn Megatron-LM's quarantine habits into entries.

Upstream takes a case out of CI by renaming its scope (`mr-broken`,
`mr-github-broken`, `nightly-broken`, `mr-github-temp-disabled`, `flaky`) or by
commenting its row out, with the tracker, if any, only in a comment
(`# hang: #513`). Migration restores the row (`mr-broken` -> `mr`, or the row
uncommented) and adds a skip entry for exactly the restored jobs in exactly the
restored scopes, so every real target selects the same jobs as before, while the
quarantined ones become visible (`list --with-quarantined`) and carry a tracker.

That holds for the pipelines matrixgen generates, which apply the quarantine file.
Megatron-LM's own parser does not read it: on a format_version 1 tree the plan
counts, per target, the jobs that parser would select once the habits are gone
(`Migration.parser_changes`; matrixgen's selection before quarantine is the
parser's), and the CLI writes such a plan only when told that matrixgen generates
every pipeline of the tree.

A habit is migrated only when that is unambiguous; everything else is reported
and left as it is:
- `flaky` does not say which scope the row ran in before: nothing to restore;
- a restored scope no other row uses, or that the row already has;
- a row or commented-out item naming several trackers, or none (unless
  `--default-tracker` names an umbrella issue);
- commented-out text that does not uncomment to a well-formed row or block at
  its position;
- a restored job that another row already has, or an entry that would also hit
  jobs that are not quarantined today (checked on the migrated tree).

Recipe files are edited as text at the exact positions of the YAML nodes (a scope
value renamed, `# ` removed from the commented lines), so every other byte,
comments included, stays as it was.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from msgspec import Struct, field

from matrixgen.documents.recipe import BLOCK_KEYS, ROW_KEYS_V2, block_rows
from matrixgen.documents.yamlio import last_content_line
from matrixgen.engine.errors import Finding, QuarantineError
from matrixgen.engine.load import read_directory, read_root_file
from matrixgen.engine.model import Job, JobId, RecipeFile, Target
from matrixgen.engine.targets import default_system, discover_targets, resolve_targets
from matrixgen.engine.vocab import (
    QUARANTINE_FILENAME,
    QuarantineAction,
    QuarantineKind,
    resolve_scope,
)
from matrixgen.pipeline import Generation, generate_from_files
from matrixgen.quarantine.entries import (
    current_day,
    entry_from_mapping,
    policy,
)
from matrixgen.quarantine.entries import selection as quarantine_selection

HABIT_SUFFIXES = ("-broken", "-temp-disabled")
FLAKY_SCOPE = "flaky"
# Commented-out YAML, told from prose ("# Broken: ...") by its keys.
_CODE_LINE = re.compile(
    r"^\s*(?:-\s+)?(?:" + "|".join(sorted(ROW_KEYS_V2 | BLOCK_KEYS)) + r")\s*:(?:\s|\Z)"
)
_TRACKER_REF = re.compile(r"(?<![\w&/#])#(\d+)\b|(https?://\S+/(?:issues|pull)/\d+)")

_RULE_LINE = re.compile(r"^\s*#+\s*\Z|#{5,}")
_KIND_WORDS: tuple[tuple[re.Pattern[str], QuarantineKind], ...] = (
    (re.compile(r"flaky|non-?determinis|intermittent", re.I), QuarantineKind.FLAKY),
    (re.compile(r"timeout|time limit|exceeds|too long|infra", re.I), QuarantineKind.INFRA),
    (re.compile(r"hang|oom|broken|outdated|requires|fail", re.I), QuarantineKind.BROKEN),
)


def is_habit_scope(scope: str) -> bool:
    return scope == FLAKY_SCOPE or scope.endswith(HABIT_SUFFIXES)


def parks(habit: str, scope: str) -> bool:
    """Whether the habit scope `habit` is where upstream parks a job of `scope`:
    its restored scope is `scope` (by tier: `mr-github-broken` parks `L1`), or it
    is one that does not say which scope it parks (`flaky`)."""
    if not is_habit_scope(habit) or is_habit_scope(scope):
        return False
    back = restore_scope(habit)
    return back is None or resolve_scope(back) == resolve_scope(scope)


def restore_scope(scope: str) -> str | None:
    """`mr-broken` -> `mr`; None when the habit does not say (`flaky`)."""
    for suffix in HABIT_SUFFIXES:
        if scope.endswith(suffix) and len(scope) > len(suffix):
            return scope[: -len(suffix)]
    return None


# --------------------------------------------------------------------------- values


class TextEdit(Struct, frozen=True, order=True):
    """Replace text[start:end] (character offsets of the decoded file)."""

    start: int
    end: int
    new: str


class Candidate(Struct, frozen=True, kw_only=True):
    """One habit that migration restores: a row, or a commented-out item."""

    rel: str
    path: str  # as shown in messages
    habit: str  # "scope *-broken", "scope *-temp-disabled", "commented-out"
    first_line: int  # 1-based, inclusive: the lines the restored row(s) span
    last_line: int
    edits: tuple[TextEdit, ...]
    describe: str  # one line for the report
    tracker: str
    kind: QuarantineKind
    reason: str
    owner: str
    # Scopes whose jobs are quarantined: for a renamed row, only the restored ones.
    scopes: frozenset[str] | None = None  # resolved; None: every job of the span


class LeftAlone(Struct, frozen=True, kw_only=True):
    path: str
    line: int
    habit: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.habit}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.path, "line": self.line, "habit": self.habit, "reason": self.reason}


class ParserChange(Struct, frozen=True, kw_only=True):
    """What Megatron-LM's own parser, which reads no quarantine file, selects for
    one target before and after the migration: `added` jobs come back."""

    target: str
    before: int
    after: int
    added: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "before": self.before,
            "after": self.after,
            "added": self.added,
        }


class Migration(Struct, frozen=True, kw_only=True):
    """A planned migration: entries to add, recipe files to rewrite, and what was
    left alone (with the reason)."""

    root: Path
    changes: tuple[tuple[Candidate, tuple[dict[str, Any], ...]], ...]
    left_alone: tuple[LeftAlone, ...]
    files_before: Mapping[str, bytes]
    files_after: Mapping[str, bytes]
    untracked_comments: int = 0  # commented-out rows without a tracker: not habits
    # format_version 1: the targets whose selection by Megatron-LM's parser grows.
    parser_changes: tuple[ParserChange, ...] = ()

    @property
    def parser_added(self) -> int:
        """Jobs Megatron-LM's own parser would select in addition, over every target."""
        return sum(c.added for c in self.parser_changes)

    @property
    def entries(self) -> list[dict[str, Any]]:
        return [entry for _, entries in self.changes for entry in entries]

    @property
    def changed_files(self) -> list[str]:
        return sorted(
            rel
            for rel, data in self.files_after.items()
            if rel != QUARANTINE_FILENAME and self.files_before.get(rel) != data
        )

    def summary(self) -> dict[str, Any]:
        by_habit: dict[str, int] = {}
        rows_by_habit: dict[str, int] = {}
        for candidate, entries in self.changes:
            by_habit[candidate.habit] = by_habit.get(candidate.habit, 0) + len(entries)
            rows_by_habit[candidate.habit] = rows_by_habit.get(candidate.habit, 0) + 1
        left: dict[str, int] = {}
        for item in self.left_alone:
            left[item.habit] = left.get(item.habit, 0) + 1
        return {
            "entries": len(self.entries),
            "entries_by_habit": dict(sorted(by_habit.items())),
            "migrated_by_habit": dict(sorted(rows_by_habit.items())),
            "left_alone_by_habit": dict(sorted(left.items())),
            "recipe_files_changed": len(self.changed_files),
            "commented_out_without_tracker": self.untracked_comments,
            "parser_added_jobs": self.parser_added,
        }


# --------------------------------------------------------------------------- comments


def _comment_of(line: str) -> str:
    """The comment part of a YAML line (Megatron-LM rows never hold a # in values)."""
    stripped = line.lstrip()
    if stripped.startswith("#"):
        return stripped.lstrip("#").strip()
    at = line.find(" #")
    return line[at + 2 :].strip() if at >= 0 else ""


def _is_prose(line: str) -> bool:
    """A comment line that is neither commented-out YAML nor a ##### rule."""
    stripped = line.strip()
    if not stripped.startswith("#") or _RULE_LINE.search(stripped):
        return False
    return not _CODE_LINE.match(stripped.lstrip("#"))  # prefix


def _prose_above(lines: Sequence[str], first: int) -> list[str]:
    """Prose comment lines directly above line index `first`."""
    found: list[str] = []
    n = first - 1
    while n >= 0 and _is_prose(lines[n]):
        found.insert(0, lines[n])
        n -= 1
    return found


def _trackers(texts: Iterable[str]) -> list[str]:
    refs: list[str] = []
    for text in texts:
        for number, url in _TRACKER_REF.findall(text):
            ref = f"#{number}" if number else url.rstrip(".,;)")
            if ref not in refs:
                refs.append(ref)
    return refs


def _kind(texts: Sequence[str], default: QuarantineKind) -> QuarantineKind:
    joined = " ".join(texts)
    for pattern, kind in _KIND_WORDS:
        if pattern.search(joined):
            return kind
    return default


def _reason(texts: Sequence[str], origin: str) -> str:
    said = " ".join(" ".join(t.split()) for t in texts if t.strip())
    if len(said) > 300:
        said = said[:297] + "..."
    return f"{said} ({origin})" if said else origin


# --------------------------------------------------------------------------- scanning


def _value(node: Any, key: str) -> Any:
    for key_node, value_node in getattr(node, "value", ()) or ():
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return value_node
    return None


def _line_offsets(text: str) -> list[int]:
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    return offsets


class _Scan(Struct, kw_only=True):
    """Scanning one file: what every step reads, and what they found."""

    recipe: RecipeFile
    lines: Sequence[str]
    offsets: Sequence[int]  # character offset of each line's start
    real_scopes: frozenset[str]
    default_tracker: str | None
    owner: str  # --owner, else the file's maintainers, else quarantine.default_owner, else ""
    candidates: list[Candidate] = field(default_factory=list)
    left_alone: list[LeftAlone] = field(default_factory=list)
    untracked_comments: int = 0

    def leave(self, line: int, habit: str, reason: str) -> None:
        """Note a habit migration leaves as it is; `line` is 1-based."""
        self.left_alone.append(
            LeftAlone(path=self.recipe.path, line=line, habit=habit, reason=reason)
        )


def _owner(recipe: RecipeFile, owner: str | None, default: str | None = None) -> str:
    """--owner, else the file's maintainers, else quarantine.default_owner."""
    if owner:
        return owner
    maintainers = recipe.data.get("maintainers") if isinstance(recipe.data, dict) else None
    if (
        isinstance(maintainers, list)
        and maintainers
        and all(isinstance(m, str) for m in maintainers)
    ):
        return ", ".join(maintainers)
    return default or ""


def _scan_file(
    recipe: RecipeFile,
    text: str,
    real_scopes: frozenset[str],
    *,
    default_tracker: str | None,
    owner: str | None,
    default_owner: str | None = None,
) -> _Scan:
    scan = _Scan(
        recipe=recipe,
        lines=text.splitlines(keepends=True),
        offsets=_line_offsets(text),
        real_scopes=real_scopes,
        default_tracker=default_tracker,
        owner=_owner(recipe, owner, default_owner),
    )
    products = _value(recipe.document.root, "products")
    if not isinstance(products, yaml.SequenceNode):
        return scan
    blocks = [b for b in products.value if isinstance(b, yaml.MappingNode)]
    for block in blocks:
        rows = _value(block, "products")
        if not isinstance(rows, yaml.SequenceNode):
            continue
        for row in rows.value:
            if isinstance(row, yaml.MappingNode):
                _scan_row(scan, row)
    _scan_comments(scan, products, blocks)
    return scan


def _need_tracker(refs: list[str], default_tracker: str | None) -> tuple[str | None, str]:
    if len(refs) == 1:
        return refs[0], ""
    if len(refs) > 1:
        return None, f"names several trackers ({', '.join(refs)}): which one it is for is unclear"
    if default_tracker:
        return default_tracker, ""
    return None, "names no tracker; pass --default-tracker REF (an umbrella issue) to migrate it"


def _scan_row(scan: _Scan, row: yaml.MappingNode) -> None:
    recipe, lines, owner = scan.recipe, scan.lines, scan.owner
    scope_node = _value(row, "scope")
    if not isinstance(scope_node, yaml.SequenceNode):
        return
    values = [n for n in scope_node.value if isinstance(n, yaml.ScalarNode)]
    habits = [n for n in values if is_habit_scope(n.value)]
    if not habits:
        return
    first, last = row.start_mark.line, last_content_line(row)
    line_no = first + 1
    habit = "scope " + " + ".join(n.value for n in habits)

    def leave(reason: str) -> None:
        scan.leave(line_no, habit, reason)

    restored: dict[str, str] = {}
    for node in habits:
        back = restore_scope(node.value)
        if back is None:
            leave(
                f'scope "{node.value}" does not say which scope the row ran in before '
                "(mr, mr-slim, nightly, ...): nothing to restore"
            )
            return
        if resolve_scope(back) not in scan.real_scopes:
            leave(f'restoring "{node.value}" gives "{back}", a scope no other row uses')
            return
        restored[node.value] = back
    after = [restored.get(n.value, n.value) for n in values]
    if len({resolve_scope(s) for s in after}) != len(after):
        leave(f"restoring gives the scope list [{', '.join(after)}], with a scope twice")
        return
    own = [_comment_of(lines[n]) for n in range(first, last + 1)]
    said = [_comment_of(line) for line in _prose_above(lines, first)] + [c for c in own if c]
    tracker, problem = _need_tracker(_trackers(said), scan.default_tracker)
    if tracker is None:
        leave(problem)
        return
    if not owner:
        leave("the file names no maintainers; pass --owner or set quarantine.default_owner")
        return
    edits = []
    for node in habits:
        start = scan.offsets[node.start_mark.line] + node.start_mark.column
        end = scan.offsets[node.end_mark.line] + node.end_mark.column
        quote = "" if node.style in (None, "") else node.style
        edits.append(TextEdit(start, end, f"{quote}{restored[node.value]}{quote}"))
    default_kind = (
        QuarantineKind.INVESTIGATING
        if habits[0].value.endswith("-temp-disabled")
        else QuarantineKind.BROKEN
    )
    renames = ", ".join(f"{old} -> {new}" for old, new in restored.items())
    scan.candidates.append(
        Candidate(
            rel=recipe.rel,
            path=recipe.path,
            habit=habit,
            first_line=first + 1,
            last_line=last + 1,
            edits=tuple(edits),
            describe=f"{recipe.path}:{line_no}: scope {renames}",
            tracker=tracker,
            kind=_kind(said, default_kind),
            reason=_reason(said, f"was scope {', '.join(restored)} in {recipe.rel}"),
            owner=owner,
            scopes=frozenset(resolve_scope(s) for s in restored.values()),
        )
    )


def _scan_comments(
    scan: _Scan, products: yaml.SequenceNode, blocks: Sequence[yaml.MappingNode]
) -> None:
    """Commented-out rows and blocks: `# - environment: [dev]` ..."""
    if not blocks:
        return
    block_col = _dash_col(scan.lines, blocks[0])
    for run_start, run_stop in _comment_runs(scan.lines, products.start_mark.line):
        _scan_run(scan, run_start, run_stop, blocks, block_col)


def _comment_runs(lines: Sequence[str], start: int) -> Iterator[tuple[int, int]]:
    """(first, past-last) line index of each run of comment lines from `start` on."""
    n, end = start, len(lines)
    while n < end:
        if not lines[n].lstrip().startswith("#"):
            n += 1
            continue
        run_start = n
        while n < end and lines[n].lstrip().startswith("#"):
            n += 1
        yield run_start, n


def _uncomment_edits(
    lines: Sequence[str], offsets: Sequence[int], item: Sequence[int]
) -> tuple[TextEdit, ...]:
    """Remove the `# ` of each line of a commented-out item."""
    return tuple(
        TextEdit(offsets[k] + lines[k].find("#"), offsets[k] + lines[k].find("#") + 2, "")
        for k in item
    )


def _item_comments(lines: Sequence[str], item: Sequence[int]) -> list[str]:
    """What is said about a commented-out item: the prose above it, and each of
    its lines' own comment."""
    inline = [_comment_of(_uncommented(lines[k])[0]) for k in item]  # type: ignore[index]
    said = [_comment_of(line) for line in _prose_above(lines, item[0])]
    return said + [c for c in inline if c]


def _dash_col(lines: Sequence[str], node: yaml.Node) -> int:
    line = lines[node.start_mark.line]
    dash = line.rfind("-", 0, node.start_mark.column)
    return dash if dash >= 0 else node.start_mark.column


def _uncommented(line: str) -> tuple[str, int] | None:
    """`  # - a: b` -> (`  - a: b`, column of the #); None when not `# ` code."""
    at = line.find("#")
    if at < 0 or line[:at].strip():
        return None
    rest = line[at + 1 :]
    if not rest.startswith(" "):
        return None
    text = line[:at] + rest[1:]
    return (text, at) if _CODE_LINE.match(text) else None  # prefix


def _scan_run(
    scan: _Scan, start: int, stop: int, blocks: Sequence[yaml.MappingNode], block_col: int
) -> None:
    """Split a run of comment lines into commented-out items and judge each."""
    for item, dash in _run_items(scan.lines, start, stop):
        _judge_item(scan, item, dash, blocks, block_col)


def _run_items(lines: Sequence[str], start: int, stop: int) -> Iterator[tuple[list[int], int]]:
    """The commented-out items of a run of comment lines: (line indexes, dash column)."""
    n = start
    while n < stop:
        code = _uncommented(lines[n])
        if code is None or not code[0].lstrip().startswith("- "):
            n += 1
            continue
        text, _ = code
        dash = len(text) - len(text.lstrip())
        item = [n]
        m = n + 1
        while m < stop:
            more = _uncommented(lines[m])
            if more is None:
                break
            indent = len(more[0]) - len(more[0].lstrip())
            if indent <= dash:
                break
            item.append(m)
            m += 1
        yield item, dash
        n = m


class CommentedOut(Struct, frozen=True, kw_only=True):
    """A commented-out row or block that carries a tracker in its comment: the
    commented-out habit (one without a tracker is not a habit: nothing says why)."""

    first_line: int  # 1-based, inclusive
    last_line: int
    comment: str  # the comment as written, `# hang: #513` (several joined with " ")
    tracker: str | None  # None when the comment names several trackers
    edits: tuple[TextEdit, ...]  # what uncomments it (every other byte kept)


def commented_out(recipe: RecipeFile, text: str) -> list[CommentedOut]:
    """The commented-out habits of one recipe file's text (`recipe` parsed from it):
    the items migration would consider, found the way it finds them, before its
    checks of whether restoring one is unambiguous."""
    products = _value(recipe.document.root, "products")
    if not isinstance(products, yaml.SequenceNode):
        return []
    lines = text.splitlines(keepends=True)
    offsets = _line_offsets(text)
    out: list[CommentedOut] = []
    for run_start, run_stop in _comment_runs(lines, products.start_mark.line):
        for item, _dash in _run_items(lines, run_start, run_stop):
            first = item[0]
            said = _item_comments(lines, item)
            refs = _trackers(said)
            if not refs:
                continue
            out.append(
                CommentedOut(
                    first_line=first + 1,
                    last_line=item[-1] + 1,
                    comment=" ".join(f"# {c}" for c in said if c),
                    tracker=refs[0] if len(refs) == 1 else None,
                    edits=_uncomment_edits(lines, offsets, item),
                )
            )
    return out


def row_comment(text: str, line: int) -> tuple[str, str | None]:
    """The comment of the row starting at 1-based `line` (prose above it, and
    each of its lines' own), as written (`# hang: #513`), and its tracker (None
    when it names none, or several)."""
    lines = text.splitlines()
    first = line - 1
    if not 0 <= first < len(lines):
        return "", None
    dash = len(lines[first]) - len(lines[first].lstrip())  # the row's `-` (or first key)
    own = [first]
    for n in range(first + 1, len(lines)):
        body = lines[n]
        if body.strip() and len(body) - len(body.lstrip()) <= dash:
            break
        own.append(n)
    said = [_comment_of(t) for t in _prose_above(lines, first)]
    said += [c for c in (_comment_of(lines[n]) for n in own) if c]
    refs = _trackers(said)
    return " ".join(f"# {c}" for c in said if c), refs[0] if len(refs) == 1 else None


def uncomment(text: str, items: Iterable[CommentedOut]) -> str:
    """The text with the given commented-out items uncommented (lines kept)."""
    return _apply_edits(text, [e for item in items for e in item.edits])


def _enclosing_block(blocks: Sequence[yaml.MappingNode], line: int) -> yaml.MappingNode | None:
    """The block a row-level comment at `line` sits in: the last block starting above it."""
    found = None
    for block in blocks:
        if block.start_mark.line < line:
            found = block
    return found


def _judge_item(
    scan: _Scan, item: list[int], dash: int, blocks: Sequence[yaml.MappingNode], block_col: int
) -> None:
    recipe, lines, owner = scan.recipe, scan.lines, scan.owner
    first = item[0]
    said = _item_comments(lines, item)
    refs = _trackers(said)
    if not refs:
        scan.untracked_comments += 1
        return
    habit = "commented-out"

    def leave(reason: str) -> None:
        scan.leave(first + 1, habit, reason)

    tracker, problem = _need_tracker(refs, None)
    if tracker is None:
        leave(problem)
        return
    source = "".join(_uncommented(lines[k])[0] for k in item)  # type: ignore[index]
    try:
        parsed = yaml.safe_load(source)
    except yaml.YAMLError:
        leave("does not uncomment to valid YAML")
        return
    if not (isinstance(parsed, list) and len(parsed) == 1 and isinstance(parsed[0], dict)):
        leave("does not uncomment to one row or one test-case block")
        return
    mapping = parsed[0]
    block = _enclosing_block(blocks, first)
    row_col = None
    if block is not None:
        rows = _value(block, "products")
        if isinstance(rows, yaml.SequenceNode) and rows.value:
            row_col = _dash_col(lines, rows.value[0])
    if dash == block_col:
        rows_data = block_rows(mapping)
        if rows_data is None:
            leave("uncommented at the level of test-case blocks, it is not a well-formed block")
            return
        what = f"test case {mapping['test_case'][0] if mapping['test_case'] else '?'}"
    elif row_col is not None and dash == row_col:
        if not set(mapping) <= ROW_KEYS_V2:
            extra = ", ".join(sorted(set(mapping) - ROW_KEYS_V2))
            leave(f"uncommented at the level of product rows, it has block keys ({extra})")
            return
        rows_data = [mapping]
        what = "a row of test case " + _test_case_of(block)
    else:
        leave("its indentation matches neither a test-case block nor a product row here")
        return
    for row in rows_data:
        scopes = row.get("scope")
        if not isinstance(scopes, list) or not scopes:
            leave("a row in it has no scope list")
            return
        for scope in scopes:
            if not isinstance(scope, str) or is_habit_scope(scope):
                leave(f'it has the scope "{scope}", itself a habit: restore that first')
                return
            if resolve_scope(scope) not in scan.real_scopes:
                leave(f'its scope "{scope}" is one no active row uses')
                return
    if not owner:
        leave("the file names no maintainers; pass --owner or set quarantine.default_owner")
        return
    edits = _uncomment_edits(lines, scan.offsets, item)
    scan.candidates.append(
        Candidate(
            rel=recipe.rel,
            path=recipe.path,
            habit=habit,
            first_line=first + 1,
            last_line=item[-1] + 1,
            edits=edits,
            describe=f"{recipe.path}:{first + 1}-{item[-1] + 1}: uncomment {what}",
            tracker=tracker,
            kind=_kind(said, QuarantineKind.BROKEN),
            reason=_reason(said, f"was commented out in {recipe.rel}"),
            owner=owner,
        )
    )


def _test_case_of(block: yaml.MappingNode | None) -> str:
    node = _value(block, "test_case")
    if isinstance(node, yaml.SequenceNode) and node.value:
        return str(node.value[0].value)
    return "?"


# --------------------------------------------------------------------------- planning


def _apply_edits(text: str, edits: Iterable[TextEdit]) -> str:
    for edit in sorted(edits, reverse=True):
        text = text[: edit.start] + edit.new + text[edit.end :]
    return text


def _decode(raw: bytes) -> tuple[str, bool]:
    return raw.decode("utf-8-sig"), raw.startswith(b"\xef\xbb\xbf")


def _encode(text: str, bom: bool) -> bytes:
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")


def _real_scopes(generation: Generation) -> frozenset[str]:
    scopes = {j.scope for j in generation.jobs if j.scope and not is_habit_scope(j.scope)}
    vocab = generation.tree.config.vocabulary
    if vocab is not None:
        scopes |= {s for s in vocab.all_scopes if not is_habit_scope(s)}
    return frozenset(resolve_scope(s) for s in scopes)


def _span_jobs(jobs: Iterable[Job], candidate: Candidate) -> list[Job]:
    return [
        j
        for j in jobs
        if j.recipe == candidate.rel
        and candidate.first_line <= j.source.line <= candidate.last_line
        and (candidate.scopes is None or j.scope in candidate.scopes)
    ]


def _entries_for(
    candidate: Candidate,
    jobs: Sequence[Job],
    *,
    today: dt.date,
    expires: dt.date,
) -> list[dict[str, Any]]:
    """One skip entry per restored row: exactly that row's jobs in its scopes."""
    by_row: dict[int, list[Job]] = {}
    for job in jobs:
        by_row.setdefault(job.source.line, []).append(job)
    entries = []
    for _, row_jobs in sorted(by_row.items()):
        models = sorted({j.model for j in row_jobs})
        cases = sorted({j.test_case for j in row_jobs})
        if len(models) != 1 or len(cases) != 1:
            continue
        tags = sorted({j.tag for j in row_jobs if j.tag})
        match: dict[str, Any] = {
            "model": models[0],
            "test_case": cases[0],
            "platforms": sorted({j.platform for j in row_jobs}),
            "environments": sorted({j.environment for j in row_jobs}),
        }
        if tags:
            match["tags"] = tags
        where = sorted(
            {f"{default_system(j.scope or '').value}/{j.scope}" for j in row_jobs if j.scope}
        )
        entries.append(
            {
                "tracker": candidate.tracker,
                "kind": candidate.kind.value,
                "action": QuarantineAction.SKIP.value,
                "match": match,
                "where": where,
                "owner": candidate.owner,
                "added": today,
                "expires": expires,
                "reason": candidate.reason,
            }
        )
    return entries


def _identity_scopes(jobs: Iterable[Job]) -> set[tuple[JobId, str | None]]:
    return {(j.identity, j.scope) for j in jobs}


def plan_migration(
    root: Path,
    *,
    default_tracker: str | None = None,
    owner: str | None = None,
    today: dt.date | None = None,
    expires: dt.date | None = None,
) -> Migration:
    """Find the habits of the tree in `root` and plan their migration. Nothing is
    written; `files_after` holds the recipe files (and quarantine file) as they
    would be."""
    from matrixgen.quarantine.edit import entry_id, insert_entries, unique_id

    today = today or current_day()
    files = read_directory(root)
    before = generate_from_files(files, root=str(root))
    if before.expansion.errors:
        raise QuarantineError(
            f"{root} has recipe errors; fix them before migrating (run `matrixgen validate`)",
            findings=before.expansion.errors,
        )
    if before.quarantine.errors:
        raise QuarantineError(
            f"{root / QUARANTINE_FILENAME} has errors; fix them before migrating",
            findings=before.quarantine.errors,
        )
    pol = policy(before.tree.config)
    expires = expires or today + dt.timedelta(days=pol.default_expiry_days)
    real_scopes = _real_scopes(before)
    candidates: list[Candidate] = []
    left: list[LeftAlone] = []
    untracked = 0
    texts: dict[str, tuple[str, bool]] = {}
    for recipe in before.tree.tests:
        text, bom = _decode(files[recipe.rel])
        texts[recipe.rel] = (text, bom)
        scan = _scan_file(
            recipe,
            text,
            real_scopes,
            default_tracker=default_tracker,
            owner=owner,
            default_owner=pol.default_owner,
        )
        candidates += scan.candidates
        left += scan.left_alone
        untracked += scan.untracked_comments
    taken = {e.id for e in before.quarantine.entries}
    before_jobs = _identity_scopes(before.jobs)
    before_findings = _finding_keys(before.findings)
    # Apply, check each candidate on the result, drop the ones that fail; repeat
    # until every remaining one holds (each round drops at least one).
    while True:
        after_files = dict(files)
        for rel in sorted({c.rel for c in candidates}):
            text, bom = texts[rel]
            edits = [e for c in candidates if c.rel == rel for e in c.edits]
            after_files[rel] = _encode(_apply_edits(text, edits), bom)
        after = generate_from_files(after_files, root=str(root))
        new_findings = _finding_keys(after.findings) - before_findings
        failed: dict[int, str] = {}
        planned: list[tuple[Candidate, list[dict[str, Any]]]] = []
        known = {j.test_case for j in after.jobs}
        for index, candidate in enumerate(candidates):
            problem = _finding_problem(candidate, new_findings)
            span = _span_jobs(after.jobs, candidate)
            if problem is None and not span:
                problem = "restoring it yields no job"
            if problem is None:
                clash = _identity_scopes(span) & before_jobs
                if clash:
                    some = sorted(clash, key=str)[0]
                    problem = f"another row already has {some[0]} in scope {some[1]}"
            entries: list[dict[str, Any]] = []
            if problem is None:
                entries = _entries_for(candidate, span, today=today, expires=expires)
                problem = _check_entries(entries, span, after.jobs, known, pol.tracker_base)
            if problem is not None:
                failed[index] = problem
            else:
                planned.append((candidate, entries))
        if not failed:
            break
        for index, problem in sorted(failed.items()):
            c = candidates[index]
            left.append(LeftAlone(path=c.path, line=c.first_line, habit=c.habit, reason=problem))
        candidates = [c for i, c in enumerate(candidates) if i not in failed]
    changes: list[tuple[Candidate, tuple[dict[str, Any], ...]]] = []
    for candidate, entries in planned:
        named = []
        for entry in entries:
            new_id = unique_id(entry_id(entry), taken)
            taken.add(new_id)
            named.append({"id": new_id, **entry})
        changes.append((candidate, tuple(named)))
    all_entries = [e for _, entries in changes for e in entries]
    if all_entries:
        old_q, bom = _decode(files.get(QUARANTINE_FILENAME, b""))
        after_files[QUARANTINE_FILENAME] = _encode(insert_entries(old_q, all_entries), bom)
    migration = Migration(
        root=root,
        changes=tuple(changes),
        left_alone=tuple(sorted(left, key=lambda x: (x.path, x.line))),
        files_before=files,
        files_after=after_files,
        untracked_comments=untracked,
        parser_changes=parser_changes(before, after) if changes else (),
    )
    problems = equivalence_problems(files, after_files, root=str(root))
    if problems:
        raise QuarantineError(
            "the migration would change what targets select; nothing was planned:",
            details=problems[:20],
        )
    return migration


def _finding_keys(findings: Iterable[Finding]) -> set[tuple[str, int, str, str]]:
    return {(f.location.file, f.location.line, f.code, f.message) for f in findings}


def _finding_problem(candidate: Candidate, new: set[tuple[str, int, str, str]]) -> str | None:
    for file, line, code, message in sorted(new):
        if file == candidate.path and candidate.first_line <= line <= candidate.last_line:
            return f"restoring it would be reported: {message} [{code}]"
    return None


def _check_entries(
    entries: Sequence[dict[str, Any]],
    span: Sequence[Job],
    jobs: Sequence[Job],
    known: set[str],
    tracker_base: str | None,
) -> str | None:
    """Each entry must be valid and apply to exactly the restored jobs."""
    if not entries:
        return "its jobs do not share one model and test case"
    hit: set[tuple[JobId, str | None]] = set()
    for data in entries:
        entry, findings = entry_from_mapping({"id": "candidate", **data}, tracker_base=tracker_base)
        if entry is None or findings:
            text = "; ".join(f.message for f in findings) or "invalid"
            return f"its entry would be invalid: {text}"
        for job in jobs:
            system = default_system(job.scope or "")
            if entry.applies_in(system, job.scope) and entry.match.matches(job, known):
                hit.add((job.identity, job.scope))
    want = _identity_scopes(span)
    if hit != want:
        extra = sorted(hit - want, key=str)
        if extra:
            return f"its entry would also skip {extra[0][0]} in scope {extra[0][1]}"
        return "its entry would not cover every restored job"
    return None


# --------------------------------------------------------------------------- checking


def real_targets(generation: Generation) -> list[Target]:
    """Every target the tree implies (or configures), except habit scopes: no
    pipeline runs `mr-broken`."""
    targets = resolve_targets(generation.tree.config, generation.jobs)
    if not generation.tree.config.targets:
        targets = discover_targets(generation.jobs, holding_pen=True)
    return [t for t in targets if not is_habit_scope(t.selector.scope or "")]


def parser_changes(before: Generation, after: Generation) -> tuple[ParserChange, ...]:
    """On a format_version 1 tree, the real targets for which Megatron-LM's own
    parser selects more jobs after the migration than before: it reads no
    quarantine file, so every restored job comes back there. matrixgen's
    selection before quarantine is that parser's (tests/test_compat.py). A
    format_version 2 tree is read by matrixgen only: nothing to count."""
    if before.tree.format_version != 1:
        return ()
    targets: dict[str, Target] = {}
    for target in (*real_targets(before), *real_targets(after)):
        targets.setdefault(target.name, target)
    found = []
    for name in sorted(targets):
        selector = targets[name].selector
        old = before.select(selector)
        new = after.select(selector)
        seen = _identity_scopes(old)
        added = sum((j.identity, j.scope) not in seen for j in new)
        if added:
            found.append(ParserChange(target=name, before=len(old), after=len(new), added=added))
    return tuple(found)


def selections(generation: Generation, targets: Iterable[Target]) -> dict[str, list[dict]]:
    """Target name -> the jobs it runs after quarantine, as comparable dicts."""
    out = {}
    known = {j.test_case for j in generation.jobs}
    for target in targets:
        chosen = quarantine_selection(
            generation.jobs, generation.quarantine.entries, target, known_test_cases=known
        )
        out[target.name] = [j.to_dict() for j in chosen.jobs]
    return out


def equivalence_problems(
    files_before: Mapping[str, bytes], files_after: Mapping[str, bytes], *, root: str
) -> list[str]:
    """Targets (real ones, of either tree, with and without each cadence) whose
    selection after quarantine differs between the two trees."""
    before = generate_from_files(files_before, root=root)
    after = generate_from_files(files_after, root=root)
    targets: dict[str, Target] = {}
    for target in (*real_targets(before), *real_targets(after)):
        targets.setdefault(target.name, target)
    problems = []
    ordered = [targets[name] for name in sorted(targets)]
    a, b = selections(before, ordered), selections(after, ordered)
    for name in sorted(targets):
        if a[name] != b[name]:
            gone = len([j for j in a[name] if j not in b[name]])
            new = len([j for j in b[name] if j not in a[name]])
            problems.append(f"{name}: {gone} job(s) no longer selected, {new} newly selected")
    return problems


# --------------------------------------------------------------------------- writing


def write_migration(migration: Migration) -> None:
    """Add the entries (under the quarantine file's lock), then rewrite the recipe
    files: if writing recipes failed, the entries would match nothing (validate
    says so) but no target would select a quarantined job."""
    from matrixgen.quarantine.edit import atomic_write, check_writable, edit, read_file

    root = migration.root
    entries = migration.entries
    # Refuse before writing anything rather than half-way through.
    for rel in migration.changed_files:
        check_writable(root / rel, root=root)
    if entries:
        check_writable(root / QUARANTINE_FILENAME, root=root)
    if entries:
        pol_base = None
        config_path = root / "matrixgen.yaml"
        config_raw = read_root_file(root, "matrixgen.yaml")
        if config_raw is not None:
            from matrixgen.documents.config import parse_config

            pol_base = policy(parse_config(config_raw, str(config_path))).tracker_base

        def change(qfile: Any) -> tuple[list[dict[str, Any]], list[int]]:
            clash = {e.id for e in qfile.entries} & {e["id"] for e in entries}
            if clash:
                raise QuarantineError(
                    f"{root / QUARANTINE_FILENAME} changed since the migration was planned "
                    f"(ids {', '.join(sorted(clash))} exist now); run migrate again"
                )
            return list(entries), []

        edit(root / QUARANTINE_FILENAME, change, tracker_base=pol_base)
    for rel in migration.changed_files:
        path = root / rel
        current = read_file(path, root=root)
        if current != migration.files_before[rel]:
            raise QuarantineError(f"{path} changed since the migration was planned; run it again")
        atomic_write(path, migration.files_after[rel], root=root)
