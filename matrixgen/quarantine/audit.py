"""`quarantine audit`: stale entries (expired, expiring, ownerless, trackerless,
matching nothing, tracker closed)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from msgspec import Struct

from matrixgen.quarantine.checks import describe

if TYPE_CHECKING:
    from matrixgen.quarantine.apply import Hit
    from matrixgen.quarantine.model import Entry, QuarantineFile

# --------------------------------------------------------------------------- audit


class AuditItem(Struct, frozen=True, kw_only=True):
    entry_id: str
    problem: str  # expired, expiring, ownerless, trackerless, matches-nothing, tracker-closed
    detail: str
    tracker: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "id": self.entry_id,
            "problem": self.problem,
            "tracker": self.tracker,
            "detail": self.detail,
        }


# Audit problems that make `quarantine audit` exit non-zero; "expiring" only informs.
FAILING_PROBLEMS = frozenset(
    {"expired", "ownerless", "trackerless", "matches-nothing", "tracker-closed", "tracker-missing"}
)


def audit_entries(
    qfile: QuarantineFile,
    hits: Mapping[str, Sequence[Hit]],
    *,
    today: dt.date,
    days: int,
    tracker_states: Mapping[str, str] | None = None,
) -> list[AuditItem]:
    """Expired, expiring within `days`, ownerless, trackerless, matching nothing,
    and (when tracker states are given: entry id -> open/closed/missing) closed."""
    items: list[AuditItem] = []
    for entry in qfile.entries:
        tracker = entry.tracker_ref

        def add(problem: str, detail: str, entry: Entry = entry, tracker: str = tracker) -> None:
            items.append(
                AuditItem(entry_id=entry.id, problem=problem, detail=detail, tracker=tracker)
            )

        if entry.expires is not None:
            left = (entry.expires - today).days
            if left < 0:
                add("expired", f"expired on {entry.expires} ({-left} day(s) ago)")
            elif left <= days:
                add("expiring", f"expires on {entry.expires} (in {left} day(s))")
        if not entry.owner:
            add("ownerless", "no owner")
        if not entry.tracker:
            add("trackerless", "no tracker")
        if not hits.get(entry.id):
            add("matches-nothing", f"applies to no job in any target ({describe(entry)})")
        state = (tracker_states or {}).get(entry.id)
        if state == "closed":
            add("tracker-closed", f"tracker {tracker} is closed: lift the entry")
        elif state == "missing":
            add("tracker-missing", f"tracker {tracker} does not exist")
    order = {p: i for i, p in enumerate(sorted(FAILING_PROBLEMS | {"expiring"}))}
    return sorted(items, key=lambda it: (it.entry_id, order[it.problem]))
