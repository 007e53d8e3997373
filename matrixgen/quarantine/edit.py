"""Safe edits of the quarantine file: add, remove and lift entries.

Each edit is locked, written whole and checked by parsing the result again; only
the edited entry's lines change (`render`, `delete_entries`), so add then remove
gives back the original file byte for byte. The lock, the refused file kinds and
the atomic write are told in docs/security.md ("The quarantine file").
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from msgspec import Struct, field

from matrixgen.documents.yamlio import YamlDocument, last_content_line, parse_yaml, yaml_anchors
from matrixgen.model.errors import Findings, QuarantineError, UsageError
from matrixgen.quarantine.model import QuarantineFile, plain, read_quarantine
from matrixgen.quarantine.render import QuoteStyle, quote_style, render_entry
from matrixgen.util.atomic import WriteError, describe_kind, remove_stale_temps, write_atomic
from matrixgen.util.readfile import NotRegularFile, read_regular

if TYPE_CHECKING:
    from matrixgen.documents.config import ProjectConfig
from matrixgen.util.textedit import (
    TextEdit,
    apply_edits,
    decode,
    encode,
    line_offsets,
    newline_at,
    split_ending,
    split_lines,
)

HEADER = (
    "# Quarantined jobs: each entry names its tracker, owner and expiry.\n"
    "# Edit with `matrixgen quarantine add / remove / lift`; see `matrixgen quarantine --help`.\n"
)


# --------------------------------------------------------------------------- locking, writing


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock for edits of `path` (the file edits land in)."""
    from matrixgen.util.lockfile import LockError, hold, timeout_from_env

    try:
        timeout = timeout_from_env()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        with hold(path.parent / f".{path.name}.lock", timeout=timeout):
            remove_stale_temps(path.parent, path.name, every=True)
            yield
    except LockError as exc:
        raise QuarantineError(
            f"cannot edit {path}: {exc.message}; the file was not changed"
        ) from None


def locate(path: Path, *, root: Path | None = None) -> Path:
    """The file that reading and editing `path` touch: `path` itself, or where a
    link inside the recipe tree `root` (default: the file's directory) leads;
    QuarantineError for anything else (docs/security.md, "The quarantine file")."""
    from matrixgen.engine.load import locate_in_tree
    from matrixgen.util.treelinks import Kind

    root = path.parent if root is None else root
    rel = path.relative_to(root).as_posix()
    found, target = locate_in_tree(root, rel)
    via = f"a symbolic link to {target!r}, which " if target is not None else ""
    if found.kind is Kind.OUTSIDE:
        raise QuarantineError(
            f"{path}: {via}leaves the recipe tree {root}: refused (links are followed "
            "only inside the tree; what it points at was not read)"
        )
    if found.kind is Kind.LOOP:
        raise QuarantineError(f"{path}: {via}loops: refused")
    assert found.path is not None
    real = root / found.path
    if found.kind is Kind.DIRECTORY:
        raise QuarantineError(f"{path}: {via}is a directory, not a file")
    if found.kind is Kind.SPECIAL:
        kind = describe_kind(os.lstat(real).st_mode)
        raise QuarantineError(f"{path}: {via}is {kind}, not a regular file: not read")
    if found.kind is Kind.MISSING and target is not None:
        raise QuarantineError(f"{path}: {via}does not exist")
    return real


def check_writable(path: Path, *, root: Path | None = None) -> int | None:
    """The file's mode (None when it does not exist yet); a read-only file is
    refused: renaming over it would succeed (that needs only the directory)."""
    path = locate(path, root=root)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return None
    if not mode & 0o222 or not os.access(path, os.W_OK):
        raise QuarantineError(f"{path} is read-only; the file was not changed")
    return mode


def atomic_write(path: Path, data: bytes, *, root: Path | None = None) -> None:
    """Write whole (`util.atomic.write_atomic`), keeping the file's mode."""
    path = locate(path, root=root)
    mode = check_writable(path, root=path.parent)
    try:
        write_atomic(path, data, mode=mode)
    except WriteError as exc:
        raise QuarantineError(exc.message) from None


def read_file(path: Path, *, root: Path | None = None) -> bytes | None:
    """The bytes of the quarantine (or another tree) file; None when absent.
    QuarantineError when it is not a regular file (see `locate`) or unreadable."""
    real = locate(path, root=root)
    try:
        return read_regular(real)
    except NotRegularFile as exc:
        raise QuarantineError(f"{path}: {exc.kind}, not a regular file: not read") from None
    except OSError as exc:
        raise QuarantineError(f"cannot read {path}: {exc.strerror}") from None


# --------------------------------------------------------------------------- text edits


class _Layout(Struct, frozen=True):
    """Where the entries are in the text, line by line (0-based)."""

    lines: list[str]  # as `util.textedit.split_lines` cuts them: where YAML does
    value_kind: str  # "block", "flow", "null" or "absent"
    key_line: int | None = None  # the `entries:` line, None when the key is absent
    starts: list[int] = field(default_factory=list)  # first line (the dash) of each entry
    ends: list[int] = field(default_factory=list)  # one past the last content line of each
    dash_col: int = 2
    key_col: int = 4
    flow_span: tuple[int, int] | None = None  # columns of `[]` on key_line
    style: QuoteStyle = field(default_factory=lambda: QuoteStyle())


def _document(text: str) -> YamlDocument | None:
    """The text as every command reads it (`documents.yamlio`, with its bounds on
    nesting and aliases); None when it holds no document (nothing, or only
    comments). QuarantineError, at the line and column, for text it refuses."""
    if not text.strip():
        return None
    findings = Findings()
    doc = parse_yaml(text.encode("utf-8"), "quarantine", findings)
    _refuse(findings)
    return doc


def _refuse(findings: Findings) -> None:
    problems = [f for f in findings.errors if f.code != "file-empty"]
    if problems:
        where = problems[0].location
        raise QuarantineError(
            f"line {where.line}, column {where.column}: {problems[0].message}", findings=problems
        )


def _layout(text: str) -> _Layout:
    lines = split_lines(text)
    doc = _document(text)
    root = doc.root if doc is not None else None
    pairs = root.value if isinstance(root, yaml.MappingNode) else []
    found = [(k, v) for k, v in pairs if isinstance(k, yaml.ScalarNode) and k.value == "entries"]
    if not found:
        return _Layout(lines, "absent")
    key_node, value = found[-1]
    key_line = key_node.start_mark.line
    if isinstance(value, yaml.ScalarNode):
        return _Layout(lines, "null", key_line)
    if not isinstance(value, yaml.SequenceNode):
        raise QuarantineError("entries must be a list")
    if value.flow_style:
        if value.value:
            raise QuarantineError(
                "entries is written as a one-line [..] list; write it as a block list first"
            )
        span = (value.start_mark.column, value.end_mark.column)
        if value.start_mark.line != key_line:
            raise QuarantineError("entries: [] must be on the entries line")
        return _Layout(lines, "flow", key_line, flow_span=span)
    starts, ends = [], []
    for item in value.value:
        first = item.start_mark.line
        end = last_content_line(item) + 1
        # A block scalar's end mark lies past the blank lines that follow it.
        while end - 1 > first and not lines[end - 1].strip():
            end -= 1
        starts.append(first)
        ends.append(end)
    # A block list holds at least one item (an empty one is `[]` or null).
    key_col = value.value[0].start_mark.column
    dash = lines[starts[0]].rfind("-", 0, key_col)
    dash_col = dash if dash >= 0 else max(key_col - 2, 0)
    style = quote_style(value.value)
    return _Layout(lines, "block", key_line, starts, ends, dash_col, key_col, style=style)


def _keep_final_newline(original: str, result: str) -> str:
    """A file that ends without a newline keeps ending without one, so that
    add then remove gives it back byte for byte."""
    if not original or split_ending(original)[1]:
        return result
    return split_ending(result)[0]


def insert_entries(text: str, entries: Sequence[Mapping[str, Any]]) -> str:
    """The text with entries appended to its `entries:` list."""
    if not entries:
        return text
    layout = _layout(text)
    lines = layout.lines
    # New lines end as the line they follow does (`util.textedit.newline_at`).
    if layout.value_kind == "block":
        at = min(layout.ends[-1], len(lines))
    else:
        at = len(lines) if layout.key_line is None else layout.key_line + 1
    nl = newline_at(lines, at - 1)
    separated = _blank_separated(layout)
    block = "".join(
        (nl if separated else "")
        + render_entry(e, layout.dash_col, layout.key_col, nl, layout.style)
        for e in entries
    )
    if layout.value_kind == "absent":
        # No file yet, or only comments: start the list below what is there.
        head = text if text.strip() else HEADER.replace("\n", nl)
        if not split_ending(head)[1]:
            head += nl
        return _keep_final_newline(text, head + "entries:" + nl + block)
    assert layout.key_line is not None
    offsets = line_offsets(text)
    if layout.value_kind in ("null", "flow"):
        # `entries: []` (or `entries:`) becomes `entries:` followed by the list.
        key = layout.key_line
        body, ending = split_ending(lines[key])
        if layout.flow_span is not None:
            start, end = layout.flow_span
            body = body[:start] + body[end:]
        if not body[body.index(":") + 1 :].strip():
            body = body.rstrip()
        edits = [TextEdit(offsets[key], offsets[key + 1], body + (ending or nl) + block)]
    else:
        if at == len(lines) and lines and not split_ending(lines[-1])[1]:
            block = nl + block
        edits = [TextEdit(offsets[at], offsets[at], block)]
    return _keep_final_newline(text, apply_edits(text, edits))


def _blank_separated(layout: _Layout) -> bool:
    """Are the existing entries separated by blank lines?"""
    ends, starts = layout.ends, layout.starts[1:]
    gaps = [layout.lines[end:start] for end, start in zip(ends, starts, strict=False)]
    return bool(gaps) and all(any(not line.strip() for line in gap) for gap in gaps)


def _headings(layout: _Layout) -> list[int]:
    """For each entry, the first line of the comment block directly above it
    (its own first line when it has none)."""
    lines = layout.lines
    heads = []
    for i, first in enumerate(layout.starts):
        bound = layout.ends[i - 1] - 1 if i > 0 else (layout.key_line or 0)
        start = first
        while start - 1 > bound and lines[start - 1].lstrip().startswith("#"):
            start -= 1
        heads.append(start)
    return heads


def delete_entries(text: str, indices: Sequence[int]) -> str:
    """The text without the entries at `indices`; an emptied list becomes
    `entries: []`.

    What goes with an entry: its own lines (comments inside it included) and one
    blank line that separated it. A comment block directly above an entry (no
    blank line between) heads a group: that entry and the entries after it up to
    the next comment between entries. The heading goes only with the last entry of
    its group; until then it stays, directly above the group's first remaining
    entry. Every other comment stays where it is."""
    layout = _layout(text)
    if layout.value_kind != "block":
        raise QuarantineError("there are no entries to remove")
    lines = list(layout.lines)
    starts, ends = layout.starts, layout.ends
    headings = _headings(layout)
    # The group of each entry: the index of the entry whose heading it is under.
    # A group runs until an entry with a heading of its own, or a comment between
    # two entries (a free-standing note, a section rule).
    group: list[int | None] = []
    for i in range(len(starts)):
        if headings[i] < starts[i]:
            group.append(i)
        elif i and not any(lines[n].strip() for n in range(ends[i - 1], starts[i])):
            group.append(group[i - 1])
        else:
            group.append(None)
    removed = set(indices)
    doomed: set[int] = set()
    done: set[int] = set()
    for i in sorted(removed):
        if i in done:
            continue
        members = (j for j in range(i, len(starts)) if group[j] == i and j not in removed)
        survivor = next(members, None)
        if group[i] == i and survivor is not None:
            # The heading stays for the rest of its group: the removed entries up
            # to the first remaining one go, with the blank lines between them,
            # so that the heading sits directly above that entry again.
            for j in range(i, survivor):
                doomed.update(range(starts[j], ends[j]))
                gap = range(ends[j], starts[j + 1])
                if all(not lines[n].strip() for n in gap):
                    doomed.update(gap)
                done.add(j)
            continue
        start, end = (headings[i] if group[i] == i else starts[i]), ends[i]
        last = i == len(starts) - 1
        above_blank = start - 1 >= 0 and not lines[start - 1].strip() and start - 1 not in doomed
        below_blank = end >= len(lines) or not lines[end].strip()
        if above_blank and (last or below_blank) and i > 0:
            start -= 1
        doomed.update(range(start, end))
    _check_anchors(text, doomed)
    offsets = line_offsets(text)
    edits = [TextEdit(offsets[n], offsets[n + 1], "") for n in sorted(doomed)]
    if len(set(indices)) == len(layout.starts):
        key = layout.key_line
        assert key is not None
        body, _ = split_ending(lines[key])
        colon = body.index(":", body.index("entries") + len("entries"))
        rest = body[colon + 1 :]
        if not rest.strip():
            new = body[: colon + 1] + " []"
        else:
            # `entries:` W `# note`, where adding to `entries:` A `[]` B `# note`
            # left W = A + B: one blank goes before `[]` (as `entries: []`
            # writes it) when one is left after it, so that add then remove
            # gives the line back; with one blank left, `[]` gets a blank of its own
            # (`entries:[]` is no key).
            blanks = len(rest) - len(rest.lstrip(" \t"))
            before = rest[:1] if blanks >= 2 else ""
            new = body[: colon + 1] + (before or " ") + "[]" + rest[len(before) :]
        edits.append(TextEdit(offsets[key], offsets[key] + len(body), new))
    return _keep_final_newline(text, apply_edits(text, edits))


def _check_anchors(text: str, doomed: set[int]) -> None:
    """Refuse to delete an anchor (`&name`) that a kept line still uses (`*name`)."""
    defined: dict[str, int] = {}
    used: dict[str, int] = {}
    findings = Findings()
    found = yaml_anchors(text, "quarantine", findings)
    _refuse(findings)
    for anchor in found or ():
        if anchor.alias:
            if anchor.line not in doomed:
                used.setdefault(anchor.name, anchor.line)
        elif anchor.line in doomed:
            defined[anchor.name] = anchor.line
    for anchor in sorted(set(defined) & set(used)):
        raise QuarantineError(
            f"the entry to remove defines the YAML anchor &{anchor} (line {defined[anchor] + 1}) "
            f"that line {used[anchor] + 1} still uses as *{anchor}; write that value out "
            "in full first, the file was not changed"
        )


# --------------------------------------------------------------------------- edits


def _plain_entries(text: str) -> list[Any]:
    doc = _document(text)
    data = doc.data if doc is not None else None
    entries = data.get("entries") if isinstance(data, dict) else None
    return list(entries or [])


def edit(
    path: Path,
    change: Callable[[QuarantineFile], tuple[list[Mapping[str, Any]], list[int]]],
    *,
    config: ProjectConfig | None = None,
    dry_run: bool = False,
) -> tuple[bytes | None, bytes]:
    """Under the lock: read and check the file (with its project's config:
    `Project.edit`; none, the default one), ask `change` for (entries to add,
    indices to remove), apply both, check the result, write it atomically.
    Returns (old bytes, new bytes)."""
    from matrixgen.documents.config import DEFAULT_CONFIG

    config = config or DEFAULT_CONFIG
    path = locate(path)
    with contextlib.nullcontext() if dry_run else locked(path):
        raw = read_file(path)
        qfile = read_quarantine(raw, str(path), config)
        n = len(qfile.errors)
        qfile.refuse_errors(f"{path} has {n} error(s); fix them first, the file was not changed")
        added, removed = change(qfile)
        text, bom = decode(raw)
        new_text = text
        try:
            before = _plain_entries(text)
            if removed:
                new_text = delete_entries(new_text, sorted(set(removed)))
            new_text = insert_entries(new_text, added)
            after = _plain_entries(new_text)
        except QuarantineError as exc:
            # The text edits do not know the file's name; the user needs it.
            raise QuarantineError(f"{path}: {exc.message}", findings=exc.findings) from None
        expected = [e for i, e in enumerate(before) if i not in set(removed)] + list(added)
        if plain(after, sparse=True) != plain(expected, sparse=True):
            raise QuarantineError(
                f"editing {path} would not give the intended entries; the file was not changed "
                "(please report this with the file attached)"
            )
        data = encode(new_text, bom)
        check = read_quarantine(data, str(path), config)
        check.refuse_errors(f"the edited {path} would have errors; the file was not changed")
        if not dry_run and data != raw:
            atomic_write(path, data)
        return raw, data
