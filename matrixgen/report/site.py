"""What the site shows, gathered from the functions that compute it, and the
site written to a directory."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from msgspec import Struct

from matrixgen.model.jobs import Target
from matrixgen.model.vocab import QuarantineAction
from matrixgen.pipeline import Generation
from matrixgen.quarantine.apply import Hit, Selection, entry_hits
from matrixgen.quarantine.audit import AuditItem, audit_entries
from matrixgen.quarantine.model import Entry
from matrixgen.views.cost import CostReport, compute_cost

if TYPE_CHECKING:
    from matrixgen.evidence.flaky import FlakyRow
    from matrixgen.evidence.queries import Cells
    from matrixgen.evidence.store import JobKey, RunRow
    from matrixgen.evidence.triage import TriageReport

# The flake grid shows at most this many runs (the last of the window), the
# board's sparklines this many.
GRID_RUNS = 100
SPARK_RUNS = 20
# `quarantine audit`'s default: entries expiring within this many days stand out.
EXPIRING_DAYS = 14

Key = tuple["JobKey", str | None]


class StoreView(Struct, frozen=True, kw_only=True):
    """What the results store adds: the runs of the window (oldest first, at
    most GRID_RUNS), flaky's ranked verdicts, every stored outcome, and each
    entry's evidence line and keys."""

    shown: str
    runs: tuple[RunRow, ...]
    rows: tuple[FlakyRow, ...]
    skipped_only: tuple[Key, ...]  # keys whose every result in the window was a skip
    cells: Cells
    muted: frozenset[Key]  # keys an allow-failure or deselect entry keeps from blocking
    evidence: Mapping[str, str]
    entry_keys: Mapping[str, tuple[Key, ...]]


class TriageQuery(Struct, frozen=True, kw_only=True):
    """`--run` and the baseline options: the run the Triage page triages."""

    run_id: str
    baseline_ref: str = "main"
    baseline_source: str | None = None
    baseline_runs: int = 1


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
    store: StoreView | None
    triage: TriageReport | None = None  # with --run: that run's triage


def gather(
    generation: Generation,
    *,
    db: str | None,
    since_days: int,
    today: dt.date,
    targets: Sequence[Target] | None = None,
    triage: TriageQuery | None = None,
) -> SiteData:
    """Everything the pages show. Without a store (none given, none in the
    environment, no default file) `store` is None and sqlalchemy is not imported;
    a `triage` query then is an error (exit 11): there is no run to read."""
    from matrixgen.evidence.summary import store_configured

    chosen = tuple(targets if targets is not None else generation.targets())
    measured = None
    store_view = None
    report = None
    entries = generation.quarantine.entries
    hits = entry_hits(generation.jobs, entries, chosen)
    if store_configured(db):
        from matrixgen.evidence.durations import measured_from_store

        measured = measured_from_store(db)
        store_view = _store_view(generation, chosen, hits, db=db, since_days=since_days)
        if triage is not None:
            report = _triage(generation, db, triage, since_days)
    elif triage is not None:
        from matrixgen.model.errors import ResultsStoreError

        raise ResultsStoreError(
            f"--run {triage.run_id}: no results store to read the run from: pass --db or set "
            "$MATRIXGEN_RESULTS_DB (or ingest into .matrixgen/results.db)"
        )
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
        store=store_view,
        triage=report,
    )


def _triage(
    generation: Generation, db: str | None, query: TriageQuery, since_days: int
) -> TriageReport:
    """The run's triage, as `matrixgen results triage --since DAYS` (its other policy
    options at their defaults) gives it: the same library call."""
    from matrixgen.evidence.flaky import FlakyPolicy
    from matrixgen.evidence.queries import RunFilter
    from matrixgen.evidence.triage import read_triage

    return read_triage(
        db,
        generation,
        query.run_id,
        baseline=RunFilter(ref=query.baseline_ref, source=query.baseline_source),
        count=query.baseline_runs,
        policy=FlakyPolicy(since_days=since_days),
    )


def _store_view(
    generation: Generation,
    targets: Sequence[Target],
    hits: Mapping[str, list[Hit]],
    *,
    db: str | None,
    since_days: int,
) -> StoreView:
    from matrixgen.evidence.flaky import FlakyPolicy, window_start
    from matrixgen.evidence.mapping import job_key
    from matrixgen.evidence.queries import outcome_cells
    from matrixgen.evidence.store import open_store
    from matrixgen.evidence.summary import entry_evidence, entry_verdicts

    # One reading of the verdicts for the grid and the entries' evidence: the
    # grid leaves out the whole-job rows of unit-test buckets (their tests
    # have rows of their own, as in `matrixgen results flaky`).
    verdicts = entry_verdicts(db, since_days)
    rows = tuple(r for r in verdicts.rows if not (r.job.unit and r.node_id is None))
    store = open_store(db, write=False)
    try:
        shown = store.shown
        since = window_start(FlakyPolicy(since_days=since_days))
        run_rows, cells = outcome_cells(store, since=since)
    finally:
        store.close()
    refs = {ref for outcomes in cells.values() for ref in outcomes}
    runs = sorted((run_rows[r] for r in refs), key=lambda r: (r.finished_at, r.ref))
    ranked = {(r.job, r.node_id) for r in rows}
    entries = generation.quarantine.entries
    entry_keys: dict[str, tuple[Key, ...]] = {}
    muted: set[Key] = set()
    for entry in entries:
        jobs = sorted({job_key(h.job, h.target.system) for h in hits.get(entry.id, [])})
        if entry.action is QuarantineAction.DESELECT:
            keys: tuple[Key, ...] = tuple((k, n) for k in jobs for n in entry.node_ids)
        else:
            keys = tuple((k, None) for k in jobs)
        entry_keys[entry.id] = keys
        if entry.action is not QuarantineAction.SKIP:
            muted.update(keys)
    return StoreView(
        shown=shown,
        runs=tuple(runs[-GRID_RUNS:]),
        rows=rows,
        skipped_only=tuple(
            sorted((k for k in cells if k not in ranked), key=lambda k: (k[0], k[1] or ""))
        ),
        cells=cells,
        muted=frozenset(muted),
        evidence=entry_evidence(
            generation,
            entries,
            db=db,
            since_days=since_days,
            targets=targets,
            verdicts=verdicts,
            hits=hits,
        )
        or {},
        entry_keys=entry_keys,
    )


def write_site(out: Path, site: Mapping[str, str]) -> None:
    """Each page into `out` (made when missing), each file replaced whole and
    never written through a link (`util.atomic`). A file where the directory
    should be is a usage error; a disk that refuses the files, exit 9."""
    from matrixgen.model.errors import UsageError, file_error, write_failure
    from matrixgen.util.atomic import WriteError, write_atomic

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
