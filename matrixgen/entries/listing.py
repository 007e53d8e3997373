"""`quarantine list`: which entries to show (each filter given must pass; a
tracker however it is spelled, an owner in any case, a platform the entry lists
or any when it lists none), and what each one matches."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from msgspec import Struct

from matrixgen.model.vocab import QuarantineAction, QuarantineKind
from matrixgen.quarantine.model import Entry, entries_tracked_by


class EntryFilter(Struct, frozen=True, kw_only=True):
    """What `quarantine list` was asked for; None (or False) is no filter."""

    tracker: str | None = None
    owner: str | None = None
    kind: QuarantineKind | None = None
    action: QuarantineAction | None = None
    platform: str | None = None
    expired_before: dt.date | None = None  # the day judged against, with --expired


def filter_entries(
    entries: Iterable[Entry], wanted: EntryFilter, *, tracker_base: str | None = None
) -> list[Entry]:
    """The entries that pass every filter, in file order; ValueError for an
    ambiguous tracker number (several repositories, no tracker base)."""
    chosen = list(entries)
    if wanted.tracker is not None:  # in file order too
        chosen = entries_tracked_by(chosen, wanted.tracker, tracker_base)
    owner = wanted.owner.strip().casefold() if wanted.owner is not None else None
    platform, day = wanted.platform, wanted.expired_before
    return [
        e
        for e in chosen
        if (owner is None or e.owner.strip().casefold() == owner)
        and (wanted.kind is None or e.kind is wanted.kind)
        and (wanted.action is None or e.action is wanted.action)
        and (platform is None or not e.match.platforms or platform in e.match.platforms)
        and (day is None or e.expired(day))
    ]


def _any(values: Sequence[str]) -> str:
    return ",".join(values) if values else "any"


def entry_row(entry: Entry) -> dict[str, Any]:
    """One entry as `quarantine list` shows it: what it matches
    (`model/test_case[tag,...]`, platforms aside) and where."""
    matches = ", ".join(entry.match.test_cases)
    if entry.match.model:
        matches = f"{entry.match.model}/{matches}"
    if entry.match.tags:
        matches += f"[{','.join(entry.match.tags)}]"
    if entry.node_ids:
        matches += f" ({len(entry.node_ids)} node id(s))"
    return {
        "id": entry.id,
        "action": entry.action.value,
        "kind": entry.kind.value,
        "tracker": entry.tracker_ref,
        "matches": matches,
        "platforms": _any(entry.match.platforms),
        "environments": _any(entry.match.environments),
        "where": ",".join(entry.where) or "everywhere",
        "owner": entry.owner,
        "expires": entry.expires.isoformat() if entry.expires else "",
    }
