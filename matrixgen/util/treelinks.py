"""Resolve symbolic links inside a tree, without leaving it (docs/security.md).

The disk reader and the git reader both resolve through `resolve`, so one rule
holds for both: what lies outside the tree is `Kind.OUTSIDE`, never looked at.
Pure: standard library only.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from msgspec import Struct

MAX_LINK_HOPS = 40  # as Linux's limit on links followed in one lookup


class Kind(StrEnum):
    FILE = "file"
    DIRECTORY = "directory"
    LINK = "link"
    SPECIAL = "special"  # a FIFO, socket, device, git submodule: never read
    MISSING = "missing"
    OUTSIDE = "outside"  # the path leaves the tree
    LOOP = "loop"  # too many links


class Entry(Struct, frozen=True):
    """What is at one path: its kind, and a link's target text."""

    kind: Kind
    target: str | None = None


Lookup = Callable[[str], Entry]


class Resolved(Struct, frozen=True):
    """Where a path leads: the kind of the final entry and its link-free path
    (None when the path leaves the tree or loops)."""

    kind: Kind
    path: str | None


def _parts(path: str) -> list[str]:
    return [c for c in path.split("/") if c not in ("", ".")]


def resolve(path: str, lookup: Lookup) -> Resolved:
    """Follow `path` (relative to the root) through links, inside the tree."""
    done: list[str] = []
    pending = _parts(path)
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if not done:
                return Resolved(Kind.OUTSIDE, None)
            done.pop()
            continue
        here = "/".join([*done, part])
        entry = lookup(here)
        if entry.kind is Kind.LINK:
            hops += 1
            if hops > MAX_LINK_HOPS:
                return Resolved(Kind.LOOP, None)
            target = entry.target or ""
            if target.startswith("/") or not target:
                return Resolved(Kind.OUTSIDE, None)
            pending = _parts(target) + pending
            continue
        if entry.kind is not Kind.DIRECTORY and pending:
            # A file (or nothing) where the path needs a directory.
            return Resolved(Kind.MISSING, "/".join([*done, part, *pending]))
        done.append(part)
    final = "/".join(done)
    if not final:
        return Resolved(Kind.DIRECTORY, "")
    return Resolved(lookup(final).kind, final)
