"""Upstream's quarantine habits themselves: habit scopes, what comments say
(trackers, kinds, reasons), and commented-out rows and blocks. In the core
because two features read them: `migrate` turns them into entries and the
diff shows a job a habit takes out or brings back as a quarantine change."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import yaml
from msgspec import Struct

from matrixgen.documents.recipe import RecipeFile
from matrixgen.documents.recipe_fields import BLOCK_KEYS, ROW_KEYS_V2
from matrixgen.model.vocab import QuarantineKind, resolve_scope
from matrixgen.util.textedit import (
    TextEdit,
    apply_edits,
    line_offsets,
    split_ending,
    split_lines,
)

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


# --------------------------------------------------------------------------- comments


def _comment_of(line: str) -> str:
    """The comment part of a YAML line: from a `#` at its start or after a blank
    or a tab, as YAML reads it (Megatron-LM rows never hold a # in values)."""
    stripped = line.lstrip()
    if stripped.startswith("#"):
        return stripped.lstrip("#").strip()
    found = _COMMENT_START.search(line)
    return line[found.end() :].strip() if found else ""


_COMMENT_START = re.compile(r"[ \t]#")


def _is_prose(line: str) -> bool:
    """A comment line that is neither commented-out YAML nor a ##### rule."""
    stripped = line.strip()
    if not stripped.startswith("#") or _RULE_LINE.search(stripped):
        return False
    return not _CODE_LINE.match(stripped.lstrip("#"))  # prefix


def _prose_above(lines: Sequence[str], first: int) -> list[str]:
    """Prose comment lines directly above line index `first`."""
    n = first
    while n > 0 and _is_prose(lines[n - 1]):
        n -= 1
    return list(lines[n:first])


def _said(lines: Sequence[str], first: int, own: Iterable[str]) -> list[str]:
    """What is said about the row or item at line index `first`: the prose
    directly above it, then the comment of each of its own lines that has one."""
    above = [_comment_of(line) for line in _prose_above(lines, first)]
    return above + [c for c in map(_comment_of, own) if c]


def _trackers(texts: Iterable[str]) -> list[str]:
    """The trackers the texts name (`#513`, an issue or pull request URL), once each, in order."""
    refs = (
        f"#{number}" if number else url.rstrip(".,;)")
        for text in texts
        for number, url in _TRACKER_REF.findall(text)
    )
    return list(dict.fromkeys(refs))


def _kind(texts: Sequence[str], default: QuarantineKind) -> QuarantineKind:
    joined = " ".join(texts)
    return next((kind for pattern, kind in _KIND_WORDS if pattern.search(joined)), default)


def _reason(texts: Sequence[str], origin: str) -> str:
    said = " ".join(" ".join(t.split()) for t in texts if t.strip())
    if len(said) > 300:
        said = said[:297] + "..."
    return f"{said} ({origin})" if said else origin


def _value(node: Any, key: str) -> Any:
    pairs = getattr(node, "value", ()) or ()
    return next((v for k, v in pairs if isinstance(k, yaml.ScalarNode) and k.value == key), None)


def _uncomment_edits(
    lines: Sequence[str], offsets: Sequence[int], item: Sequence[int]
) -> tuple[TextEdit, ...]:
    """Remove the `# ` of each line of a commented-out item."""
    return tuple(
        TextEdit(offsets[k] + lines[k].find("#"), offsets[k] + lines[k].find("#") + 2, "")
        for k in item
    )


def _item_comments(lines: Sequence[str], item: Sequence[int]) -> list[str]:
    """What is said about a commented-out item (`_said`), its lines read uncommented."""
    return _said(lines, item[0], (_uncommented(lines[k]) for k in item))  # type: ignore[arg-type]


def _dash_col(lines: Sequence[str], node: yaml.Node) -> int:
    line = lines[node.start_mark.line]
    dash = line.rfind("-", 0, node.start_mark.column)
    return dash if dash >= 0 else node.start_mark.column


def _uncommented(line: str) -> str | None:
    """`  # - a: b` -> `  - a: b`; None when not `# ` code."""
    at = line.find("#")
    if at < 0 or line[:at].strip():
        return None
    rest = line[at + 1 :]
    if not rest.startswith(" "):
        return None
    text = line[:at] + rest[1:]
    return text if _CODE_LINE.match(text) else None  # prefix


def _commented_items(lines: Sequence[str], start: int) -> Iterator[tuple[list[int], int]]:
    """The commented-out items from line index `start` on: (line indexes, dash
    column). Only a comment line uncomments, so an item never spans two runs of
    comment lines."""
    n = start
    while n < len(lines):
        text = _uncommented(lines[n])
        if text is None or not text.lstrip().startswith("- "):
            n += 1
            continue
        dash = len(text) - len(text.lstrip())
        m = n + 1
        while (
            m < len(lines)
            and (more := _uncommented(lines[m])) is not None
            and len(more) - len(more.lstrip()) > dash
        ):
            m += 1
        yield list(range(n, m)), dash
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
    lines = split_lines(text)
    offsets = line_offsets(text)
    out: list[CommentedOut] = []
    for item, _dash in _commented_items(lines, products.start_mark.line):
        said = _item_comments(lines, item)
        refs = _trackers(said)
        if not refs:
            continue
        out.append(
            CommentedOut(
                first_line=item[0] + 1,
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
    lines = [split_ending(line)[0] for line in split_lines(text)]
    first = line - 1
    if not 0 <= first < len(lines):
        return "", None
    dash = len(lines[first]) - len(lines[first].lstrip())  # the row's `-` (or first key)
    own = [lines[first]]
    for body in lines[first + 1 :]:
        if body.strip() and len(body) - len(body.lstrip()) <= dash:
            break
        own.append(body)
    said = _said(lines, first, own)
    refs = _trackers(said)
    return " ".join(f"# {c}" for c in said if c), refs[0] if len(refs) == 1 else None


def uncomment(text: str, items: Iterable[CommentedOut]) -> str:
    """The text with the given commented-out items uncommented (lines kept)."""
    return apply_edits(text, [e for item in items for e in item.edits])
