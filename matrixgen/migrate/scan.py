"""Scanning one recipe file for habits migration can restore unambiguously
(candidates), and the ones it leaves as they are (with the reason)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml
from msgspec import Struct, field

from matrixgen.documents.recipe import RecipeFile, block_rows
from matrixgen.documents.recipe_fields import ROW_KEYS_V2
from matrixgen.documents.yamlio import last_content_line, parse_yaml
from matrixgen.model.errors import Findings
from matrixgen.model.vocab import QuarantineKind, resolve_scope
from matrixgen.quarantine.habits import (
    _commented_items,
    _dash_col,
    _item_comments,
    _kind,
    _reason,
    _said,
    _trackers,
    _uncomment_edits,
    _uncommented,
    _value,
    is_habit_scope,
    restore_scope,
)
from matrixgen.util.textedit import TextEdit, line_offsets, split_lines


class Candidate(Struct, frozen=True, kw_only=True):
    """One habit that migration restores: a row, or a commented-out item."""

    rel: str  # relative to the recipes folder: what the report and the JSON name
    path: str  # as findings locate it
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


class LeftAlone(Struct, frozen=True, kw_only=True, rename={"path": "file"}):
    """A habit migrate leaves as it is, and why (its JSON: its fields, the path as `file`)."""

    path: str  # relative to the recipes folder, so the document is the same wherever it lies
    line: int
    habit: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.habit}: {self.reason}"


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
        lines=split_lines(text),
        offsets=line_offsets(text),
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
    # Commented-out rows and blocks (`# - environment: [dev]` ...), each judged.
    if blocks:
        block_col = _dash_col(scan.lines, blocks[0])
        for item, dash in _commented_items(scan.lines, products.start_mark.line):
            _judge_item(scan, item, dash, blocks, block_col)
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
        scan.left_alone.append(LeftAlone(path=recipe.rel, line=line_no, habit=habit, reason=reason))

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
    said = _said(lines, first, lines[first : last + 1])
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
            describe=f"{recipe.rel}:{line_no}: scope {renames}",
            tracker=tracker,
            kind=_kind(said, default_kind),
            reason=_reason(said, f"was scope {', '.join(restored)} in {recipe.rel}"),
            owner=owner,
            scopes=frozenset(resolve_scope(s) for s in restored.values()),
        )
    )


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
        scan.left_alone.append(
            LeftAlone(path=recipe.rel, line=first + 1, habit=habit, reason=reason)
        )

    tracker, problem = _need_tracker(refs, None)
    if tracker is None:
        leave(problem)
        return
    source = "".join(_uncommented(lines[k]) for k in item)  # type: ignore[arg-type]
    # Read as the recipe itself is, with the same bounds (nesting, aliases).
    findings = Findings()
    document = parse_yaml(source.encode("utf-8"), recipe.path, findings)
    if document is None or findings.errors:
        leave(f"does not uncomment to valid YAML{_where(findings, item)}")
        return
    parsed = document.data
    if not (isinstance(parsed, list) and len(parsed) == 1 and isinstance(parsed[0], dict)):
        leave("does not uncomment to one row or one test-case block")
        return
    # The block a row-level comment sits in: the last one starting above it.
    block = next((b for b in reversed(blocks) if b.start_mark.line < first), None)
    found = _rows_of(parsed[0], dash, lines, block, block_col)
    if isinstance(found, str):
        leave(found)
        return
    rows_data, what = found
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
            describe=f"{recipe.rel}:{first + 1}-{item[-1] + 1}: uncomment {what}",
            tracker=tracker,
            kind=_kind(said, QuarantineKind.BROKEN),
            reason=_reason(said, f"was commented out in {recipe.rel}"),
            owner=owner,
        )
    )


def _where(findings: Findings, item: Sequence[int]) -> str:
    """` (line N: what is wrong)` of the first error reading an uncommented item,
    its line counted in the recipe file (the item's lines are its text's lines)."""
    problem = findings.errors[0] if findings.errors else None
    if problem is None:
        return ""
    line = problem.location.line
    if not line:
        return f" ({problem.message})"
    return f" (line {item[min(line, len(item)) - 1] + 1}: {problem.message})"


def _rows_of(
    mapping: dict[str, Any],
    dash: int,
    lines: Sequence[str],
    block: yaml.MappingNode | None,
    block_col: int,
) -> tuple[list[Any], str] | str:
    """The rows an uncommented item holds, and what it is (a test-case block or
    a row of one, by its indentation); or why it is neither."""
    row_col = None
    rows = _value(block, "products")  # None without a block
    if isinstance(rows, yaml.SequenceNode) and rows.value:
        row_col = _dash_col(lines, rows.value[0])
    if dash == block_col:
        rows_data = block_rows(mapping)
        if rows_data is None:
            return "uncommented at the level of test-case blocks, it is not a well-formed block"
        return rows_data, (f"test case {mapping['test_case'][0] if mapping['test_case'] else '?'}")
    if dash == row_col:
        if not set(mapping) <= ROW_KEYS_V2:
            extra = ", ".join(sorted(set(mapping) - ROW_KEYS_V2))
            return f"uncommented at the level of product rows, it has block keys ({extra})"
        node = _value(block, "test_case")
        case = node.value[0].value if isinstance(node, yaml.SequenceNode) and node.value else "?"
        return [mapping], f"a row of test case {case}"
    return "its indentation matches neither a test-case block nor a product row here"
