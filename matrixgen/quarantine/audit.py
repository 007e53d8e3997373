"""`quarantine audit`: stale entries (expired, expiring, ownerless, trackerless,
matching nothing, tracker closed)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from msgspec import Struct
from msgspec.structs import replace

from matrixgen.engine.targets import resolve_targets
from matrixgen.model.jobs import Job, Target
from matrixgen.quarantine.apply import Hit, entry_hits
from matrixgen.quarantine.checks import describe
from matrixgen.quarantine.model import Entry, QuarantineFile
from matrixgen.quarantine.policy import current_day
from matrixgen.quarantine.trackers import resolve_tracker

if TYPE_CHECKING:
    from matrixgen.documents.config import ProjectConfig
    from matrixgen.quarantine.tracker import TrackerReport


class AuditItem(Struct, frozen=True, kw_only=True, rename={"entry_id": "id"}):
    """One problem of one entry (its JSON: its fields, the entry's id as `id`)."""

    entry_id: str
    problem: str  # expired, expiring, ownerless, trackerless, matches-nothing, tracker-closed
    tracker: str = ""
    detail: str


# Audit problems that make `quarantine audit` exit non-zero; "expiring" only informs.
FAILING_PROBLEMS = frozenset(
    {"expired", "ownerless", "trackerless", "matches-nothing", "tracker-closed", "tracker-missing"}
)


def audit_entries(
    entries: Sequence[Entry],
    hits: Mapping[str, Sequence[Hit]],
    *,
    today: dt.date,
    days: int,
    tracker_states: Mapping[str, str] | None = None,
) -> list[AuditItem]:
    """Expired, expiring within `days`, ownerless, trackerless, matching nothing,
    and (when tracker states are given: entry id -> open/closed/missing) closed."""
    items: list[AuditItem] = []
    for entry in entries:
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
    return sorted(items, key=lambda it: (it.entry_id, it.problem))


class Audit(Struct, frozen=True, kw_only=True):
    """What `quarantine audit` found: the entries (trackers resolved against the
    given tracker base), the targets judged, the problems, the tracker states."""

    entries: tuple[Entry, ...]
    targets: tuple[Target, ...]
    items: tuple[AuditItem, ...]
    trackers: TrackerReport

    @property
    def failing(self) -> list[AuditItem]:
        return [i for i in self.items if i.problem in FAILING_PROBLEMS]


def audit_quarantine(
    qfile: QuarantineFile,
    jobs: Sequence[Job],
    config: ProjectConfig,
    *,
    days: int,
    token: str | None,
    api_url: str,
    tracker_base: str | None = None,
) -> Audit:
    """Audit the entries of a readable file (QuarantineError for one that cannot
    be read): `tracker_base`, when given, resolves the `#N` trackers the config
    cannot; tracker states come from the API at `api_url` (checked)."""
    from matrixgen.quarantine.tracker import check_trackers

    if qfile.present and qfile.document is None:
        qfile.refuse_errors(f"{qfile.path} cannot be read")
    entries = qfile.entries
    if tracker_base:
        entries = tuple(
            replace(e, tracker_url=e.tracker_url or resolve_tracker(e.tracker, tracker_base))
            for e in entries
        )
    targets = resolve_targets(config, jobs)
    hits = entry_hits(jobs, entries, targets)
    report = check_trackers(
        [(e.id, e.tracker_url) for e in entries if e.tracker], token=token, api_url=api_url
    )
    items = audit_entries(
        entries, hits, today=current_day(), days=days, tracker_states=report.states
    )
    return Audit(entries=entries, targets=tuple(targets), items=tuple(items), trackers=report)
