"""Comment-keeping edits of a text file: spans of its decoded text replaced,
every other byte kept as it was, a UTF-8 byte order mark included. The one
editor of the quarantine file's entries and of migrate's recipe rewrites."""

from __future__ import annotations

from collections.abc import Iterable

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


def line_offsets(text: str) -> list[int]:
    """The character offset of each line's start (as `splitlines` cuts them),
    and the text's length last."""
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    return offsets


def decode(raw: bytes | None) -> tuple[str, bool]:
    """The text of UTF-8 bytes (None: no file, empty), and whether a BOM led it."""
    if raw is None:
        return "", False
    return raw.decode("utf-8-sig"), raw.startswith(_BOM)


def encode(text: str, bom: bool) -> bytes:
    return (_BOM if bom else b"") + text.encode("utf-8")
