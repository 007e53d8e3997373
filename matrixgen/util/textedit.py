"""Comment-keeping edits of a text file: spans of its decoded text replaced,
every other byte kept as it was, a UTF-8 byte order mark included. The one
editor of the quarantine file's entries and of migrate's recipe rewrites."""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import accumulate

from msgspec import Struct

_BOM = b"\xef\xbb\xbf"


class TextEdit(Struct, frozen=True, order=True):
    """Replace text[start:end] (character offsets of the decoded file)."""

    start: int
    end: int
    new: str


def apply_edits(text: str, edits: Iterable[TextEdit]) -> str:
    """The text with each edit made (edits must not overlap)."""
    for edit in sorted(edits, reverse=True):
        text = text[: edit.start] + edit.new + text[edit.end :]
    return text


# The line breaks YAML reads (libyaml, YAML 1.1), a CR LF pair first: lines are
# cut here where the parser cuts them, so a line number of its marks is a line
# of `split_lines`. (`str.splitlines` also cuts at \v, \f and \x1c-\x1e.)
LINE_BREAKS = ("\r\n", "\n", "\r", "\x85", "\u2028", "\u2029")
_LINE = re.compile(r"[^\r\n\x85\u2028\u2029]*(?:\r\n|[\r\n\x85\u2028\u2029]|\Z)")
# What an edit writes between new lines: one of these, never the rarer breaks.
_NEWLINES = ("\r\n", "\n", "\r")


def split_lines(text: str) -> list[str]:
    """The text's lines, each with its line break (the last one without, when the
    text does not end in one)."""
    return [line for line in _LINE.findall(text) if line]


def split_ending(line: str) -> tuple[str, str]:
    """(the line without its break, the break)."""
    for ending in LINE_BREAKS:
        if line.endswith(ending):
            return line[: -len(ending)], ending
    return line, ""


def newline_at(lines: list[str], index: int) -> str:
    """The line break new lines written after line `index` take: that line's own,
    else the nearest earlier line's, else the first in the file, else LF. A
    CR-only file gets CR lines, a CRLF one CRLF, a mixed one what is around."""
    for line in (*reversed(lines[: index + 1]), *lines[index + 1 :]):
        ending = split_ending(line)[1]
        if ending in _NEWLINES:
            return ending
    return "\n"


def line_offsets(text: str) -> list[int]:
    """The character offset of each line's start (as `split_lines` cuts them),
    and the text's length last."""
    return [0, *accumulate(map(len, split_lines(text)))]


def decode(raw: bytes | None) -> tuple[str, bool]:
    """The text of UTF-8 bytes (None: no file, empty), and whether a BOM led it."""
    if raw is None:
        return "", False
    return raw.decode("utf-8-sig"), raw.startswith(_BOM)


def encode(text: str, bom: bool) -> bytes:
    return (_BOM if bom else b"") + text.encode("utf-8")
