"""Which quarantine entries a run's passes could lift (`triage` gathers the
values; this is pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from msgspec import Struct

from matrixgen.model.jobs import Job, Target
from matrixgen.quarantine.apply import applying_entries
from matrixgen.quarantine.model import Entry
from matrixgen.results.junit import Outcome
from matrixgen.results.queries import RunOutcomes
from matrixgen.results.store import JobKey
from matrixgen.util.nodeid import covers
from matrixgen.util.values import JsonLayout

# Actions that keep a job running and let it fail, by value (a file whose tool
# knows `mute` counts it too): a pass there is what lifts them.
LIFTABLE_ACTIONS = frozenset({"allow-failure", "mute"})


class EntryRef(Struct, frozen=True, kw_only=True):
    id: str
    action: str
    kind: str
    tracker: str


def entry_ref(entry: Entry) -> EntryRef:
    return EntryRef(
        id=entry.id, action=entry.action.value, kind=entry.kind.value, tracker=entry.tracker_ref
    )


class LiftCandidate(Struct, frozen=True, kw_only=True):
    entry: EntryRef
    jobs: int  # its jobs in the run
    reason: str

    # Its JSON: the entry's fields, then its jobs and the reason.
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            *((k, f"entry.{k}") for k in EntryRef.__struct_fields__),
            ("jobs", "jobs"),
            ("reason", "reason"),
        )
    )


def lift_candidates(
    outcomes: RunOutcomes,
    places_of: Mapping[JobKey, Sequence[tuple[Target, Job]]],
    entries: Sequence[Entry],
    known: set[str],
    tests: Mapping[int, Mapping[JobKey, Mapping[str, Outcome]]] | None = None,
) -> list[LiftCandidate]:
    """Entries that let jobs fail (or mute tests) whose every job passed in the
    run and in every baseline run (none without a baseline). For an entry that
    names node ids the evidence is those tests, not the job (`tests`: per run,
    `queries.test_outcomes`): another test of the bucket that failed is no
    evidence for or against it."""
    if not outcomes.baseline:
        return []
    liftable = [e for e in entries if e.action.value in LIFTABLE_ACTIONS]
    if not liftable:
        return []
    run_jobs = outcomes.jobs.get(outcomes.run.ref, {})
    covered: dict[str, dict[JobKey, None]] = {}  # each entry's jobs, in order, once
    for key in sorted(run_jobs):
        for target, job in places_of.get(key, ()):
            for entry in applying_entries(job, liftable, target, known):
                covered.setdefault(entry.id, {})[key] = None
    found: list[LiftCandidate] = []
    runs = [outcomes.run, *outcomes.baseline]
    baseline = (
        f"baseline run {outcomes.baseline[0].run_id}"
        if len(outcomes.baseline) == 1
        else f"the {len(outcomes.baseline)} baseline runs"
    )
    for entry in liftable:
        keys = covered.get(entry.id)
        if not keys:
            continue
        if not all(_passed(outcomes, tests or {}, r.ref, k, entry) for r in runs for k in keys):
            continue
        what = (
            f"its {len(entry.node_ids)} named test(s) passed in its {len(keys)} job(s)"
            if entry.node_ids
            else f"its {len(keys)} job(s) passed"
        )
        found.append(
            LiftCandidate(
                entry=entry_ref(entry),
                jobs=len(keys),
                reason=f"{what} in run {outcomes.run.run_id} and in {baseline}",
            )
        )
    return found


def _passed(
    outcomes: RunOutcomes,
    tests: Mapping[int, Mapping[JobKey, Mapping[str, Outcome]]],
    ref: int,
    key: JobKey,
    entry: Entry,
) -> bool:
    """The job passed in that run; for an entry naming node ids, each has
    results there and all passed (not run, skipped or muted is no pass)."""
    outcome = outcomes.jobs.get(ref, {}).get(key)
    if outcome is None:
        return False  # not run there: no evidence
    if entry.node_ids:
        ran = tests.get(ref, {}).get(key, {})
        for named in entry.node_ids:
            results = [o for node, o in ran.items() if covers(named, node)]
            if not results or any(o is not Outcome.PASSED for o in results):
                return False
        return True
    return outcome is Outcome.PASSED  # a job muted or allowed to fail that failed is no pass


def names_tests(
    where: Sequence[tuple[Target, Job]], entries: Sequence[Entry], known: set[str]
) -> bool:
    """Does a liftable entry that names node ids apply to the job somewhere?"""
    return any(
        e.node_ids and e.action.value in LIFTABLE_ACTIONS
        for target, job in where
        for e in applying_entries(job, entries, target, known)
    )
