"""Counts and lists in words: a number with its unit, a few items and how many more."""

from __future__ import annotations

from collections.abc import Sequence


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 case`, `3 jobs`, `2 entries` (given `plural`): never `job(s)`."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def listed(items: Sequence[str], limit: int) -> str:
    """The first `limit` items, then how many more: `a, b and 3 more`."""
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" and {more} more" if more > 0 else "")
