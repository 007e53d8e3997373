"""Quarantine entries drafted from the evidence, and lifts of the ones it clears.

Part of the evidence feature, whose verdicts it reads (tests/test_layout.py).
Which action a draft gets and what lifts an entry: docs/evidence.md. A record
whose node id names no test (pytest writes one for a collection error) is never
drafted: `Proposal.not_node_ids` lists it. A draft is split into as many
entries as covering exactly the failing jobs takes (a match is a product of
lists).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from msgspec import Struct
from msgspec.structs import replace

from matrixgen.engine.targets import resolve_targets
from matrixgen.model.jobs import Job, Target
from matrixgen.model.vocab import QuarantineAction, QuarantineKind, System
from matrixgen.pipeline import Generation
from matrixgen.quarantine.apply import applying_entries, entry_hits
from matrixgen.quarantine.model import Entry, QuarantineFile
from matrixgen.quarantine.policy import current_day, policy
from matrixgen.quarantine.render import entry_id, slug, unique_id
from matrixgen.quarantine.trackers import tracker_text
from matrixgen.results.flaky import FlakyPolicy, FlakyRow, Verdict, in_tree_words, runs_text
from matrixgen.results.mapping import job_key
from matrixgen.results.mapping import places as mapping_places
from matrixgen.results.store import JobKey
from matrixgen.util.nodeid import is_node_id
from matrixgen.util.values import JsonLayout

if TYPE_CHECKING:
    from matrixgen.documents.config import ProjectConfig


class Draft(Struct, frozen=True, kw_only=True):
    """One entry to add: its fields as the editor writes them, and the rows behind it."""

    data: Mapping[str, Any]
    rows: tuple[FlakyRow, ...]

    JSON: ClassVar[JsonLayout] = JsonLayout(keys=(("entry", "data"), ("evidence", "rows")))

    @property
    def id(self) -> str:
        return str(self.data["id"])


class Lift(Struct, frozen=True, kw_only=True):
    entry: Entry
    reason: str

    JSON: ClassVar[JsonLayout] = JsonLayout(keys=(("id", "entry.id"), ("reason", "reason")))


class Covered(Struct, frozen=True, kw_only=True):
    row: FlakyRow
    by: tuple[str, ...]  # entry ids; empty: the job is in no target of the recipes now

    JSON: ClassVar[JsonLayout] = JsonLayout(keys=(("evidence", "row"), ("entries", "by")))


class NotJudged(Struct, frozen=True, kw_only=True):
    id: str
    why: str


class LiftEvidence(Struct, frozen=True, kw_only=True):
    refs: tuple[str, ...]
    runs: tuple[str, ...]


class Proposal(Struct, frozen=True, kw_only=True):
    drafts: tuple[Draft, ...]
    lifts: tuple[Lift, ...]
    covered: tuple[Covered, ...]  # flaky/broken rows left out, and why
    unjudged: tuple[tuple[str, str], ...]  # (entry id, why no lift could be judged)
    # Flaky/broken rows of a record that names no test (a bare path or directory,
    # as pytest writes a collection error): never drafted as a deselect.
    not_node_ids: tuple[FlakyRow, ...] = ()
    trackers_unchecked: int = 0  # entries whose tracker state was not asked
    # The runs the lifts were judged on: those of the refs the operator named.
    lift_refs: tuple[str, ...] = ()
    lift_runs: tuple[str, ...] = ()  # their run ids, oldest first

    @property
    def lift_evidence(self) -> str:
        """Which runs the lifts were judged on, in words."""
        refs = ", ".join(self.lift_refs) or "none"
        runs = self.lift_runs
        if not runs:
            return f"lifts judged on the runs of ref(s) {refs}: there are none"
        span = f"run {runs[0]}" if len(runs) == 1 else f"runs {runs[0]} to {runs[-1]}"
        return f"lifts judged on the {len(runs)} run(s) of ref(s) {refs} ({span})"

    # Its JSON (`quarantine propose --format json`, which adds whether it was written).
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            ("drafts", "drafts"),
            ("lifts", "lifts"),
            ("already_quarantined", "covered"),
            ("not_judged", "not_judged"),
            ("not_node_ids", "not_node_ids"),
            ("lift_evidence", "lift_runs_judged"),
        )
    )

    @property
    def not_judged(self) -> tuple[NotJudged, ...]:
        return tuple(NotJudged(id=i, why=why) for i, why in self.unjudged)

    @property
    def lift_runs_judged(self) -> LiftEvidence:
        return LiftEvidence(refs=self.lift_refs, runs=self.lift_runs)


def proposal_from_store(
    generation: Generation,
    *,
    db: str | None,
    flaky_policy: FlakyPolicy,
    tracker: str | None,
    owner: str | None,
    lift_runs: int,
    token: str | None,
    api_url: str | None,
    lift_refs: Sequence[str] = ("main",),
) -> Proposal:
    """`propose` over the store at `db`, with the entries' tracker states where
    a token allows asking. Drafts come from every run; lifts only from the runs
    of `lift_refs`: a run of an unreviewed branch must not lift an entry."""
    from matrixgen.results.flaky import flaky_rows
    from matrixgen.results.queries import RunFilter, runs_of
    from matrixgen.results.store import open_store

    qfile = generation.quarantine
    qfile.refuse_errors(f"{qfile.path} has errors; fix them first")
    trusted = RunFilter(ref=lift_refs[0], also=tuple(lift_refs[1:]))
    policy_all = replace(flaky_policy, min_runs=1)
    with closing(open_store(db, write=False)) as store:
        report = flaky_rows(store, policy_all, unit_jobs_whole=True)
        lift_report = flaky_rows(store, policy_all, unit_jobs_whole=True, only=trusted)
        used = runs_of(store, trusted)
    states: Mapping[str, str] = {}
    unchecked = 0
    if qfile.entries:
        from matrixgen.quarantine.tracker import DEFAULT_API_URL, check_api_url, check_trackers

        checked = check_trackers(
            [(e.id, e.tracker_url) for e in qfile.entries if e.tracker],
            token=token,
            api_url=check_api_url(api_url or DEFAULT_API_URL),
        )
        states, unchecked = checked.states, len(checked.unchecked)
    found = propose(
        generation,
        report.rows,
        tracker=tracker,
        owner=owner,
        min_runs=flaky_policy.min_runs,
        lift_runs=lift_runs,
        tracker_states=states,
        lift_rows=lift_report.rows,
    )
    return replace(
        found,
        trackers_unchecked=unchecked,
        lift_refs=trusted.refs,
        lift_runs=tuple(r.run_id for r in used),
    )


def write_proposal(path: Path, proposal: Proposal, config: ProjectConfig) -> None:
    """Add the drafts and remove the lifted entries, under the file's lock; a
    draft whose id the file holds now gets a new one."""
    from matrixgen.quarantine.edit import edit

    def change(current: QuarantineFile) -> tuple[list[dict[str, Any]], list[int]]:
        taken = {e.id for e in current.entries}
        lifted = {lift.entry.id for lift in proposal.lifts}
        added = []
        for d in proposal.drafts:
            new_id = unique_id(d.id, taken - lifted)
            taken.add(new_id)
            added.append({**d.data, "id": new_id})
        removed = [e.index for e in current.entries if e.id in lifted]
        return added, removed

    edit(path, change, config=config)


def _key(generation: Generation, job: Job, system: System) -> JobKey:
    """A job's key with its scope in the tree's word, as the rows are named here."""
    key = job_key(job, system)
    word = generation.tree.config.scope_word(key.scope)
    return key if word == key.scope else replace(key, scope=word)


def _owner(generation: Generation, job: Job, fallback: str | None) -> str:
    for recipe in generation.tree.files:
        if recipe.rel == job.recipe:
            maintainers = recipe.data.get("maintainers") if isinstance(recipe.data, dict) else None
            if isinstance(maintainers, list) and maintainers:
                return ", ".join(str(m) for m in maintainers)
    return fallback or ""


def _action(row: FlakyRow) -> tuple[QuarantineAction, QuarantineKind]:
    # Failing (every run failed, too few to say broken) is drafted as broken:
    # no run of it passed.
    broken = row.verdict in (Verdict.BROKEN, Verdict.FAILING)
    kind = QuarantineKind.BROKEN if broken else QuarantineKind.FLAKY
    if row.node_id is not None:
        return QuarantineAction.DESELECT, kind
    if broken:
        return QuarantineAction.SKIP, kind
    return QuarantineAction.ALLOW_FAILURE, kind


def _covering(
    row: FlakyRow, places: list[tuple[Target, Job]], entries: Sequence[Entry], known: set[str]
) -> list[str]:
    """Ids of entries that already take this key out (or let it fail): of the
    node-level ones, those that name the row's node id."""
    ids = (
        entry.id
        for target, job in places
        for entry in applying_entries(job, entries, target, known)
        if row.node_id is None or not entry.action.node_level or row.node_id in entry.node_ids
    )
    return list(dict.fromkeys(ids))


def rectangles(cells: set[tuple[str, str, str, str]]) -> list[tuple[tuple[str, ...], ...]]:
    """(platform, environment, tag, place) cells as products of lists that
    cover exactly them: merged one dimension at a time, where the others agree."""
    groups: list[tuple[frozenset[str], ...]] = [
        tuple(frozenset([v]) for v in cell) for cell in sorted(cells)
    ]
    for axis in (3, 1, 0, 2):  # places, environments, platforms, tags
        merged: dict[tuple, set[str]] = {}
        for group in groups:
            rest = tuple(g for i, g in enumerate(group) if i != axis)
            merged.setdefault(rest, set()).update(group[axis])
        groups = [(*rest[:axis], frozenset(v), *rest[axis:]) for rest, v in merged.items()]
    return sorted(tuple(tuple(sorted(g)) for g in group) for group in groups)


def propose(
    generation: Generation,
    rows: Sequence[FlakyRow],
    *,
    tracker: str | None,
    owner: str | None,
    min_runs: int,
    lift_runs: int,
    tracker_states: Mapping[str, str],
    lift_rows: Sequence[FlakyRow] | None = None,
) -> Proposal:
    """Drafts and lifts from every key's row (ok ones too: lifts need them);
    lifts are judged on `lift_rows` (the trusted refs' runs) when given."""
    today = current_day()
    config = generation.tree.config
    expiry = today + dt.timedelta(days=policy(config).default_expiry_days)
    entries = generation.quarantine.entries
    targets = resolve_targets(config, generation.jobs)
    places = mapping_places(generation, targets, partial(_key, generation))
    known = {j.test_case for j in generation.jobs}
    # Every place (drafts' `where`, reasons, what is left out) in the tree's words.
    rows = in_tree_words(rows, config.scope_word)

    groups: dict[tuple, list[FlakyRow]] = {}
    covered: list[Covered] = []
    not_node_ids: list[FlakyRow] = []
    for row in rows:
        if row.verdict is Verdict.OK or row.runs < min_runs:
            continue
        if row.node_id is None and row.job.unit:
            continue  # a bucket is judged per node id; its whole-job row serves lifts
        if row.node_id is not None and not is_node_id(row.node_id):
            not_node_ids.append(row)  # pytest deselects by prefix: it would take a folder out
            continue
        found = places.get(row.job)  # none: the job is in no target now
        by = _covering(row, found, entries, known) if found else []
        if not found or by:
            covered.append(Covered(row=row, by=tuple(by)))
            continue
        action, kind = _action(row)
        key = (action, kind, row.job.model, row.job.test_case, row.node_id or "")
        groups.setdefault(key, []).append(row)

    drafts = _drafts(generation, groups, places, tracker, owner, today, expiry)
    trusted = rows if lift_rows is None else in_tree_words(lift_rows, config.scope_word)
    lifts, unjudged = _lifts(
        generation, entries, targets, trusted, lift_runs=lift_runs, tracker_states=tracker_states
    )
    return Proposal(
        drafts=tuple(drafts),
        lifts=tuple(lifts),
        covered=tuple(covered),
        unjudged=tuple(unjudged),
        not_node_ids=tuple(not_node_ids),
    )


def _drafts(
    generation: Generation,
    groups: Mapping[tuple, list[FlakyRow]],
    places: Mapping[JobKey, list[tuple[Target, Job]]],
    tracker: str | None,
    owner: str | None,
    today: dt.date,
    expiry: dt.date,
) -> list[Draft]:
    """One draft per rectangle of each group's cells (see `rectangles`)."""
    drafts: list[Draft] = []
    taken = {e.id for e in generation.quarantine.entries}
    for (action, kind, model, test_case, node), members in sorted(groups.items()):
        by_cell = {(r.job.platform, r.job.environment, r.job.tag, r.job.place): r for r in members}
        first_job = places[members[0].job][0][1]
        for rectangle in rectangles(set(by_cell)):
            platforms, environments, tags, where = rectangle
            chosen = tuple(
                r
                for cell, r in sorted(by_cell.items())
                if all(value in axis for value, axis in zip(cell, rectangle, strict=True))
            )
            match: dict[str, Any] = {"model": model, "test_case": test_case}
            match["platforms"] = list(platforms)
            match["environments"] = list(environments)
            if any(tags):
                match["tags"] = list(tags)
            data: dict[str, Any] = {
                "tracker": tracker_text(tracker) if tracker else "",
                "kind": kind.value,
                "action": action.value,
                "match": match,
                "where": list(where),
                "node_ids": [node] if node else [],
                "owner": _owner(generation, first_job, owner),
                "added": today,
                "expires": expiry,
                "reason": _reason(kind, chosen),
            }
            data = {k: v for k, v in data.items() if v not in ([], "")}
            derived = entry_id(data)
            if node:  # named after the test, not its bucket
                derived = f"{slug(node.rsplit('::', 1)[-1])}-{derived.rsplit('-', 1)[-1]}"
            data = {"id": unique_id(derived, taken), **data}
            taken.add(data["id"])
            drafts.append(Draft(data=data, rows=chosen))
    return drafts


def _reason(kind: QuarantineKind, rows: Sequence[FlakyRow]) -> str:
    shown = "; ".join(r.evidence() for r in rows[:3])
    more = f"; and {len(rows) - 3} more place(s)" if len(rows) > 3 else ""
    return f"{kind.value} in the test results: {shown}{more}"


def _lifts(
    generation: Generation,
    entries: Sequence[Entry],
    targets: Sequence[Target],
    rows: Sequence[FlakyRow],
    *,
    lift_runs: int,
    tracker_states: Mapping[str, str],
) -> tuple[list[Lift], list[tuple[str, str]]]:
    from matrixgen.results.flaky import summarize

    lifts: list[Lift] = []
    unjudged: list[tuple[str, str]] = []
    by_key: dict[tuple[JobKey, str | None], FlakyRow] = {(r.job, r.node_id): r for r in rows}
    hits = entry_hits(generation.jobs, entries, targets)
    for entry in entries:
        if tracker_states.get(entry.id) == "closed":
            lifts.append(Lift(entry=entry, reason=f"its tracker {entry.tracker_ref} is closed"))
            continue
        if entry.action is QuarantineAction.SKIP:
            continue  # its jobs do not run: no evidence can clear it
        keys = sorted({_key(generation, h.job, h.target.system) for h in hits.get(entry.id, [])})
        if not keys:
            continue
        silent = 0
        nodes = entry.node_ids if entry.action.node_level else (None,)
        found = [by_key[(k, n)] for k in keys for n in nodes if (k, n) in by_key]
        if entry.action.node_level:
            # A deselected test runs only where something still runs it: judge it
            # there, and say how many of its jobs gave no results. A muted test
            # runs wherever the entry applies.
            missing = [n for n in entry.node_ids if not any((k, n) in by_key for k in keys)]
            silent = sum(1 for k in keys if not any((k, n) in by_key for n in entry.node_ids))
        else:
            missing = [
                f"{k.test_case} on {k.where} ({k.place})" for k in keys if (k, None) not in by_key
            ]
        if missing:
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            unjudged.append((entry.id, f"no results for {', '.join(missing[:3])}{more}"))
            continue
        worst = min(found, key=lambda r: r.passing_streak)
        if worst.passing_streak < lift_runs:
            short = f"passed only its last {runs_text(worst.passing_streak)} on {worst.job.where}"
            unjudged.append((entry.id, f"{short} ({worst.job.place}); a lift needs {lift_runs}"))
            continue
        where = f"; no results from the other {silent} job(s) it applies to" if silent else ""
        passed = f"passed its last {runs_text(worst.passing_streak)}: {summarize(found)}{where}"
        lifts.append(Lift(entry=entry, reason=passed))
    return lifts, unjudged
