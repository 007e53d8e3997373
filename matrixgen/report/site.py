"""What the site shows, gathered from the functions that compute it and from
the contributions the report is handed (`views.contributions`), and the site
written to a directory."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path

from msgspec import Struct

from matrixgen.model.jobs import Target
from matrixgen.pipeline import Generation
from matrixgen.quarantine.apply import Hit, Selection, entry_hits
from matrixgen.quarantine.audit import AuditItem, audit_entries
from matrixgen.quarantine.model import Entry
from matrixgen.views.contributions import ReportContribution, SitePart, SiteRequest
from matrixgen.views.cost import CostReport, compute_cost

# `quarantine audit`'s default: entries expiring within this many days stand out.
EXPIRING_DAYS = 14


class SiteData(Struct, frozen=True, kw_only=True):
    generation: Generation
    targets: tuple[Target, ...]
    selections: Mapping[str, Selection]  # by target name
    cost: CostReport
    entries: tuple[Entry, ...]  # the quarantine file's, in file order
    hits: Mapping[str, list[Hit]]
    audit: tuple[AuditItem, ...]
    today: dt.date
    since_days: int
    # Each contribution's part, by its name, in the order it was handed over,
    # and the pages it adds (file, title).
    parts: Mapping[str, SitePart] = {}
    part_pages: tuple[tuple[str, str], ...] = ()


def gather(
    generation: Generation,
    *,
    since_days: int,
    today: dt.date,
    targets: Sequence[Target] | None = None,
    contributions: Sequence[ReportContribution] = (),
    options: Mapping[str, object] | None = None,
) -> SiteData:
    """Everything the pages show: the report's own figures and each
    contribution's part, computed from the same request."""
    chosen = tuple(targets if targets is not None else generation.targets())
    entries = generation.quarantine.entries
    hits = entry_hits(generation.jobs, entries, chosen)
    request = SiteRequest(
        generation=generation,
        targets=chosen,
        hits=hits,
        since_days=since_days,
        today=today,
        options=dict(options or {}),
    )
    parts = {c.name: c.computed(request) for c in contributions}
    measured = next((p.measured for p in parts.values() if p.measured is not None), None)
    return SiteData(
        generation=generation,
        targets=chosen,
        selections={t.name: generation.selection(t) for t in chosen},
        cost=compute_cost(generation, chosen, measured=measured),
        entries=entries,
        hits=hits,
        audit=tuple(audit_entries(entries, hits, today=today, days=EXPIRING_DAYS)),
        today=today,
        since_days=since_days,
        parts=parts,
        part_pages=tuple(p for c in contributions for p in c.pages),
    )


def write_site(out: Path, site: Mapping[str, str]) -> None:
    """Each page into `out` (made when missing), each file replaced whole and
    never written through a link (`util.atomic`), nor into a linked `out`
    (exit 12). A file where the directory should be is a usage error; a disk
    that refuses the files, exit 9."""
    from matrixgen.model.errors import OutputError, UsageError, file_error, write_failure
    from matrixgen.util.atomic import WriteError, write_atomic

    if out.is_symlink():  # as generate's --output-dir: never written through
        raise OutputError(f"--output-dir {out} is a symbolic link: give the real directory")
    blocking = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise UsageError(f"cannot write the site into {out}: {blocking} is a file, not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise file_error(f"cannot write {out}", exc) from None
    for name, content in site.items():
        try:
            write_atomic(out / name, content.encode("utf-8"), sync=False)
        except WriteError as exc:
            raise write_failure(exc.message, exc.errno) from None
