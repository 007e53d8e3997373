"""Tracker references: `#N` resolved against the config's tracker base, issue
URLs, and which spellings name the same tracker."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from matrixgen.util.patterns import NON_BLANK, name_pattern, whole

if TYPE_CHECKING:
    from matrixgen.quarantine.model import Entry

ISSUE_NUMBER = name_pattern(r"#(\d+)")
_HTTP_URL = name_pattern(f"https?://{NON_BLANK}+", re.IGNORECASE)


def resolve_tracker(ref: str, tracker_base: str | None) -> str | None:
    """`#N` -> tracker_base + N; a URL stays; anything else cannot be resolved."""
    ref = ref.strip()
    number = whole(ISSUE_NUMBER, ref)
    if number:
        if not tracker_base:
            return None
        return tracker_base.rstrip("/") + "/" + number[1]
    if whole(_HTTP_URL, ref):
        return ref.rstrip("/")
    return None


def same_tracker(a: str, b: str, tracker_base: str | None) -> bool:
    """`#7201`, `7201` and its URL name the same tracker."""
    return _tracker_key(a, tracker_base) == _tracker_key(b, tracker_base)


def _tracker_key(ref: str, tracker_base: str | None) -> str:
    ref = tracker_text(ref)
    resolved = resolve_tracker(ref, tracker_base)
    return _url_key(resolved) if resolved else ref


def entries_tracked_by(entries: Iterable[Entry], ref: str, tracker_base: str | None) -> list[Entry]:
    """The entries of one tracker, however it is spelled (`7201`, `#7201`, URL).

    Without a tracker base a bare number still finds entries whose tracker URL
    ends in that issue number, when those URLs all name one repository; when
    they name several, which one is meant is unclear (ValueError)."""
    entries = list(entries)
    found = [e for e in entries if same_tracker(e.tracker, ref, tracker_base)]
    number = whole(ISSUE_NUMBER, tracker_text(ref))
    if found or number is None or tracker_base:
        return found
    by_number: dict[str, list[Entry]] = {}
    for entry in entries:
        key = _url_key(entry.tracker_url) if entry.tracker_url else ""
        issue = whole(_ISSUE_PATH, key[key.find("/") :]) if "/" in key else None
        if issue and issue[3] == number[1]:
            by_number.setdefault(key, []).append(entry)
    if len(by_number) > 1:
        urls = ", ".join(sorted(e[0].tracker_url or "" for e in by_number.values()))
        raise ValueError(f"{ref} is ambiguous without a tracker base: it could be {urls}")
    return next(iter(by_number.values()), [])


_ISSUE_PATH = name_pattern(r"/([^/]+)/([^/]+)/(?:issues|pull)/(\d+)/?")


def _url_key(url: str) -> str:
    """What tells two spellings of one issue URL apart from another issue: not
    the scheme, the host's case, a query, a fragment (a comment link) or a
    trailing slash; on GitHub-style paths neither owner/repo case nor
    issues-vs-pull (one number space)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = (parts.hostname or "").lower().removeprefix("www.")
    if parts.port:
        host = f"{host}:{parts.port}"
    path = parts.path.rstrip("/")
    issue = whole(_ISSUE_PATH, path)
    if issue:
        path = f"/{issue[1].lower()}/{issue[2].lower()}/issues/{issue[3]}"
    return f"{host}{path}"


def tracker_text(ref: str) -> str:
    """A tracker as the file writes it: a bare issue number N as "#N"."""
    ref = ref.strip()
    return f"#{ref}" if ref.isdigit() else ref


def shell_tracker(tracker: str) -> str:
    """The tracker as typed in a shell: `#7201` unquoted would start a comment."""
    number = whole(ISSUE_NUMBER, tracker)
    return number[1] if number else (tracker or "...")
