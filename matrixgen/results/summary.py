"""The evidence beside each quarantine entry, where decisions are made:
`quarantine audit` and the selection diff's Markdown. One line per entry, such
as "failed 3 of 40 runs on dgx_h100/dev since 2026-11-02, last in run 9120
(2026-11-20)", over the jobs (or node ids) the entry covers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import closing
from typing import TYPE_CHECKING

from matrixgen.engine.targets import resolve_targets
from matrixgen.model.jobs import Target
from matrixgen.pipeline import Generation
from matrixgen.quarantine.apply import Hit, entry_hits
from matrixgen.quarantine.model import Entry

if TYPE_CHECKING:
    from matrixgen.results.flaky import FlakyReport


def store_configured(db: str | None) -> bool:
    """Is there a results store to read (`util.checkout.choose_store`)?"""
    from matrixgen.util.checkout import choose_store

    return choose_store(db).location is not None


def entry_verdicts(db: str | None, since_days: int) -> FlakyReport:
    """The verdicts entries' evidence is made of: every key of the window, one
    run being enough, unit-test buckets also as whole jobs."""
    from matrixgen.results.flaky import FlakyPolicy, flaky_rows
    from matrixgen.results.store import open_store

    with closing(open_store(db, write=False)) as store:
        return flaky_rows(
            store, FlakyPolicy(since_days=since_days, min_runs=1), unit_jobs_whole=True
        )


def entry_evidence(
    generation: Generation,
    entries: Sequence[Entry],
    *,
    db: str | None = None,
    since_days: int = 30,
    targets: Sequence[Target] | None = None,
    verdicts: FlakyReport | None = None,
    hits: Mapping[str, Sequence[Hit]] | None = None,
) -> dict[str, str] | None:
    """{entry id: one line of evidence}; None without a store, so that callers
    show nothing rather than "no results". A caller that has the verdicts and
    the hits passes them, not to read them again."""
    if not store_configured(db):
        return None
    from matrixgen.results.flaky import summarize
    from matrixgen.results.mapping import job_key

    report = verdicts if verdicts is not None else entry_verdicts(db, since_days)
    by_key = {(r.job, r.node_id): r for r in report.rows}
    if targets is None:
        targets = resolve_targets(generation.tree.config, generation.jobs)
    if hits is None:
        hits = entry_hits(generation.jobs, entries, targets)
    found: dict[str, str] = {}
    for entry in entries:
        keys = sorted({job_key(h.job, h.target.system) for h in hits.get(entry.id, [])})
        nodes = entry.node_ids if entry.action.node_level else (None,)
        rows = [by_key[(k, n)] for k in keys for n in nodes if (k, n) in by_key]
        found[entry.id] = summarize(rows) if rows else f"no results in the last {since_days} days"
    return found


def diff_notes(
    generations: Sequence[Generation], wanted: frozenset[str], options: Mapping[str, object]
) -> dict[str, str] | None:
    """The selection diff's evidence line beside each entry it names, judged
    on the last of `generations` (base, head) that has it (`contributes.DIFF`)."""
    db = options.get("db")
    assert db is None or isinstance(db, str)
    if not store_configured(db):
        return None
    if not wanted:
        if db:  # a store given but unreadable is an error even with nothing to show
            from matrixgen.results.store import open_store

            open_store(db, write=False).close()
        return {}
    found: dict[str, str] = {}
    for generation in reversed(generations):
        entries = [e for e in generation.quarantine.entries if e.id in wanted - found.keys()]
        if not entries:
            continue
        evidence = entry_evidence(generation, entries, db=db)
        found.update(evidence or {})
    return dict(sorted(found.items()))
