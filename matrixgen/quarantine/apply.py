"""Applying entries: what each entry does to the jobs of one target (skip,
allow-failure, deselect, mute), and which entries apply to which jobs."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from heapq import merge
from typing import TYPE_CHECKING

from msgspec import Struct
from msgspec.structs import replace

from matrixgen.documents.quarantine import is_glob
from matrixgen.engine.select import select
from matrixgen.engine.targets import default_system, target_name
from matrixgen.model.jobs import Job, QuarantineMark, Selector, Target
from matrixgen.model.vocab import QuarantineAction

if TYPE_CHECKING:
    from matrixgen.quarantine.model import Entry

# When several entries apply to one job in one target, the strongest action
# wins: QuarantineAction declares them strongest first.
_STRENGTH = {action: n for n, action in enumerate(QuarantineAction)}

# --------------------------------------------------------------------------- applying


class Selection(Struct, frozen=True):
    """What one target gets: its jobs (marked where an entry applies), and the
    jobs an entry skipped (marked too), both in selection order."""

    jobs: tuple[Job, ...]
    skipped: tuple[Job, ...] = ()

    @property
    def with_quarantined(self) -> list[Job]:
        return sorted((*self.jobs, *self.skipped), key=Job.sort_key)


def apply_quarantine(
    jobs: Sequence[Job],
    entries: Sequence[Entry],
    target: Target | None,
    *,
    known_test_cases: frozenset[str] | set[str] | None = None,
) -> tuple[list[Job], list[Job]]:
    """(selected jobs with marks, skipped jobs with marks) for one target.

    `target` None means "no target": each job is placed by its own scope on the
    system that runs that scope (L0/L1 on GitHub, the rest on GitLab).
    `known_test_cases` are every test case of the tree, so that a name that is
    also a glob (`tests/unit_tests/models/**/*.py`) matches only itself; by
    default the test cases of `jobs`.
    """
    if known_test_cases is None:
        known_test_cases = {j.test_case for j in jobs}
    candidates = _candidates(entries, known_test_cases)
    selected: list[Job] = []
    skipped: list[Job] = []
    for job in jobs:
        applying = applying_entries(job, candidates(job.test_case), target, known_test_cases)
        if not applying:
            selected.append(job)
            continue
        skip = applying[0].action is QuarantineAction.SKIP
        (skipped if skip else selected).append(replace(job, quarantine=combined_mark(applying)))
    return selected, skipped


def applying_entries(
    job: Job,
    entries: Iterable[Entry],
    target: Target | None,
    known: frozenset[str] | set[str],
) -> list[Entry]:
    """The entries that apply to a job in a target (None: on the system that runs
    the job's scope), strongest action first."""
    system = target.system if target is not None else default_system(job.scope or "")
    found = [e for e in entries if e.applies_in(system, job.scope) and e.match.matches(job, known)]
    found.sort(key=lambda e: (_STRENGTH[e.action], e.index))
    return found


def _candidates(entries: Sequence[Entry], known: Container[str]) -> Callable[[str], list[Entry]]:
    """The entries that may apply to a test case: those that name it, and those
    with a glob that is no known name (`matches_test_case`: only these two ever
    match), so that a tree's jobs times its entries is not the cost."""
    named: dict[str, list[tuple[int, Entry]]] = {}
    globbing: list[tuple[int, Entry]] = []
    for n, entry in enumerate(entries):
        patterns = entry.match.test_cases
        if any(p not in known and is_glob(p) for p in patterns):
            globbing.append((n, entry))
        else:
            for pattern in dict.fromkeys(patterns):
                named.setdefault(pattern, []).append((n, entry))
    # In the order given, as the entries themselves are: ties keep it when sorted.
    return lambda test_case: [e for _, e in merge(named.get(test_case, []), globbing)]


def combined_mark(applying: Sequence[Entry]) -> QuarantineMark:
    """One mark for a job: the strongest entry's action and kind; every applying
    entry's id and tracker (comma-separated, strongest first); the node ids of
    every deselect and mute entry, unless the job is skipped anyway (`muted`:
    those only a mute entry names; one a deselect entry names is deselected)."""
    first = applying[0]
    node_ids: list[str] = []
    deselected: set[str] = set()
    if first.action is not QuarantineAction.SKIP:
        for entry in applying:
            if entry.action.node_level:
                node_ids.extend(n for n in entry.node_ids if n not in node_ids)
            if entry.action is QuarantineAction.DESELECT:
                deselected.update(entry.node_ids)
    trackers = dict.fromkeys(e.tracker_ref for e in applying)  # each once, in order
    return QuarantineMark(
        id=", ".join(e.id for e in applying),
        tracker=", ".join(trackers),
        action=first.action.value,
        kind=first.kind.value,
        node_ids=tuple(node_ids),
        muted=tuple(n for n in node_ids if n not in deselected),
    )


def selection(
    jobs: Sequence[Job],
    entries: Sequence[Entry],
    target: Target | Selector,
    *,
    known_test_cases: frozenset[str] | set[str] | None = None,
) -> Selection:
    """Select for a target (or a bare selector), then apply quarantine.

    A bare selector with a scope is placed on the system that runs that scope;
    without a scope each job is placed by its own scope."""
    if known_test_cases is None:
        known_test_cases = {j.test_case for j in jobs}
    if isinstance(target, Selector):
        selector = target
        as_target: Target | None = None
        if selector.scope is not None:
            system = default_system(selector.scope)
            as_target = Target(name=target_name(system, selector), system=system, selector=selector)
    else:
        selector, as_target = target.selector, target
    chosen = select(jobs, selector)
    if not entries:
        return Selection(tuple(chosen))
    kept, skipped = apply_quarantine(chosen, entries, as_target, known_test_cases=known_test_cases)
    return Selection(tuple(kept), tuple(skipped))


# --------------------------------------------------------------------------- usage


class Hit(Struct, frozen=True):
    """One job an entry applies to, in one target."""

    target: Target
    job: Job


def _applying(
    jobs: Sequence[Job], entries: Sequence[Entry], targets: Sequence[Target]
) -> Iterator[tuple[Target, Job, list[Entry]]]:
    """Each job of each target, with the entries that apply to it there."""
    known = {j.test_case for j in jobs}
    candidates = _candidates(entries, known)
    for target in targets:
        for job in select(jobs, target.selector):
            yield target, job, applying_entries(job, candidates(job.test_case), target, known)


def entry_hits(
    jobs: Sequence[Job], entries: Sequence[Entry], targets: Sequence[Target]
) -> dict[str, list[Hit]]:
    """For each entry id: the (target, job) pairs it applies to."""
    hits: dict[str, list[Hit]] = {e.id: [] for e in entries}
    for target, job, applying in _applying(jobs, entries, targets):
        for entry in applying:
            hits[entry.id].append(Hit(target, job))
    return hits


def overlaps(
    jobs: Sequence[Job], entries: Sequence[Entry], targets: Sequence[Target]
) -> list[tuple[Target, Job, list[Entry]]]:
    """Jobs that several entries apply to in one target (merged node-level entries
    excepted: their node ids all apply)."""
    return [
        (target, job, applying)
        for target, job, applying in _applying(jobs, entries, targets)
        if len(applying) > 1 and any(not e.action.node_level for e in applying)
    ]
