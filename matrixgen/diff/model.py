"""The values a selection diff is made of: each side compared (`Side`, loaded by
diff.revisions) and per target the jobs added, removed, changed, moved and the
quarantine transitions (diff.compare builds them; the renderers, expect and
evidence read them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from msgspec import Struct, field

from matrixgen.diff.goldens import GoldenReview
from matrixgen.engine.targets import is_holding_pen
from matrixgen.model.errors import Finding, Location, Severity
from matrixgen.model.jobs import Job, QuarantineMark, Target
from matrixgen.util.values import JsonLayout
from matrixgen.views.cost import Cost

if TYPE_CHECKING:
    from matrixgen.diff.gitsource import TreeSource
    from matrixgen.pipeline import Generation

# Quarantine transitions of a job in a target.
QUARANTINED = "quarantined"
LIFTED = "lifted"
ACTION_CHANGED = "action changed"
ENTRY_CHANGED = "entry changed"
ARRIVES_QUARANTINED = "arrives quarantined"
LEAVES_QUARANTINED = "leaves quarantined"
DUPLICATE_ADDED = "added"
DUPLICATE_REMOVED = "removed"
SKIP = "skip"  # the quarantine action that takes a job out of a target


class Habit(Struct, frozen=True, kw_only=True):
    """How upstream took a job out (or brought it back) without an entry: parked
    in a habit scope (`scope`), or commented out (`comment`); `tracker` when the
    comment names one."""

    scope: str | None = None
    comment: str | None = None
    tracker: str | None = None

    def describe(self, show: Callable[[str], str] = str) -> str:
        """`parked in mr-broken (# hang)`, `commented out: # hang`; `show` writes
        the scope and the comment (md.code in a PR comment)."""
        if self.scope is not None:
            text = f"parked in {show(self.scope)}"
            return text + (f" ({show(self.comment)})" if self.comment else "")
        return f"commented out: {show(self.comment or '')}"

    # Its JSON: the parts it has.
    JSON: ClassVar[JsonLayout] = JsonLayout(when_set=frozenset({"scope", "comment", "tracker"}))


class ChangedJob(Struct, frozen=True):
    """A job that runs on both sides whose emitted content differs:
    {emitted field: (old, new)}, in the order the file has the fields."""

    base: Job
    head: Job
    fields: Mapping[str, tuple[Any, Any]]


class QuarantineChange(Struct, frozen=True):
    """One quarantine transition of a job in a target (see the module docstring)."""

    change: str  # one of the transitions above
    base: Job | None  # None: the job is new to the target
    head: Job | None  # None: the job left the target
    # An upstream habit (a row parked in a habit scope, or commented out) rather
    # than an entry: the job left the target (quarantined) or joined it (lifted).
    habit: Habit | None = None

    @property
    def parser(self) -> str | None:
        """What Megatron-LM's parser, which reads no quarantine file, sees of the
        change: "added" or "removed" from the target's selection, or None."""
        if self.change == ARRIVES_QUARANTINED or (self.habit and self.change == LIFTED):
            return "added"
        if self.change == LEAVES_QUARANTINED or (self.habit and self.change == QUARANTINED):
            return "removed"
        return None

    @property
    def job(self) -> Job:
        job = self.head or self.base
        assert job is not None
        return job

    @property
    def old(self) -> QuarantineMark | None:
        return self.base.quarantine if self.base is not None else None

    @property
    def new(self) -> QuarantineMark | None:
        return self.head.quarantine if self.head is not None else None

    @property
    def mark(self) -> QuarantineMark:
        """The entry the change is about: the new one, or the lifted one."""
        mark = self.new or self.old
        assert mark is not None
        return mark


class Moved(Struct, frozen=True):
    """A job that left this target for another (or came from one) unchanged:
    a scope, platform or environment renamed."""

    job: Job
    target: str  # the other target's name


class DuplicateNote(Struct, frozen=True):
    """A row that defines a job another row defines too, added or removed."""

    change: str  # DUPLICATE_ADDED or DUPLICATE_REMOVED
    job: Job
    locations: tuple[Location, ...]


class TargetDiff(Struct, frozen=True):
    """What changes for one target."""

    target: Target
    added: tuple[Job, ...] = ()
    removed: tuple[Job, ...] = ()
    changed: tuple[ChangedJob, ...] = ()
    quarantine: tuple[QuarantineChange, ...] = ()
    duplicates: tuple[DuplicateNote, ...] = ()
    moved_out: tuple[Moved, ...] = ()  # to another target
    moved_in: tuple[Moved, ...] = ()  # from another target
    # Differences in the target's own definition (selector and system settings).
    settings: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    # "both", or the one side the target exists on (a configured target added or removed).
    exists: str = "both"
    # How many jobs the target runs on each side (skipped jobs left out).
    base_jobs: int = 0
    head_jobs: int = 0
    # What one run of the target costs on each side (views.cost: the emitted
    # jobs it runs, under that side's config and target definition).
    base_cost: Cost = field(default_factory=Cost)
    head_cost: Cost = field(default_factory=Cost)

    @property
    def gpu_hours_delta(self) -> float:
        """The change in GPU-hours (upper bound) of one run of the target."""
        return self.head_cost.gpu_hours_max - self.base_cost.gpu_hours_max

    @property
    def holding_pen(self) -> bool:
        """A habit scope's holding pen (`--holding-pen`): no system runs it."""
        return is_holding_pen(self.target.selector.scope)

    @property
    def unchanged(self) -> bool:
        """Nothing CI receives changes (a duplicate row added or removed is a note)."""
        jobs = (self.added, self.removed, self.changed, self.quarantine, self.moved_out)
        return not any((*jobs, self.moved_in, self.settings))

    def running_changes(self) -> tuple[tuple[Job, ...], tuple[Job, ...]]:
        """The jobs that start running in the target (run at head and not at
        base) and those that stop, whatever the cause: added or removed rows,
        moves, a skip entry added or lifted (or its action changed to or from
        skip), a row parked in a habit scope or brought back. A job an
        allow-failure, deselect or mute entry marks still runs.
        `len(starts) - len(stops)` is `head_jobs - base_jobs`."""
        starts = [*self.added, *(m.job for m in self.moved_in)]
        stops = [*self.removed, *(m.job for m in self.moved_out)]
        for q in self.quarantine:
            before, after = runs(q.base), runs(q.head)
            if after and not before:
                starts.append(q.job)
            elif before and not after:
                stops.append(q.job)
        return tuple(sorted(starts, key=Job.sort_key)), tuple(sorted(stops, key=Job.sort_key))

    def parser_counts(self) -> dict[str, int]:
        """Added and removed as Megatron-LM's parser counts them: it reads no
        quarantine file and no habit, so a move, a habit and a job arriving or
        leaving quarantined are additions and removals to it."""
        moves = [q.parser for q in self.quarantine]
        return {
            "added": len(self.added) + len(self.moved_in) + moves.count("added"),
            "removed": len(self.removed) + len(self.moved_out) + moves.count("removed"),
        }


def runs(job: Job | None) -> bool:
    """Whether a job (None: none) runs in its target: no skip entry keeps it out."""
    return job is not None and (job.quarantine is None or job.quarantine.action != SKIP)


class SelectionDiff(Struct, frozen=True):
    """The diff of every target, in a deterministic order."""

    base: str  # full commit id
    head: str  # full commit id, or "worktree"
    targets: tuple[TargetDiff, ...]
    notes: tuple[str, ...] = ()  # what the reader must know (errors on a side, absent trees)
    # {entry id: evidence line} from a results store (diff.evidence); None: no store.
    evidence: Mapping[str, str] | None = None
    # What `matrixgen validate` reports (errors and warnings) at head and not at
    # base, and the reverse (compared by severity, code, file and message).
    findings_added: tuple[Finding, ...] = ()
    findings_removed: tuple[Finding, ...] = ()
    # Every test case a job of either side has (for --expect rules that name
    # test cases); () when not known.
    test_cases: tuple[str, ...] = ()
    # The golden-values files the diff changes (diff.golden_review); None: the
    # tree declares no golden values, or they were not looked at.
    goldens: GoldenReview | None = None

    @property
    def unchanged(self) -> bool:
        return all(t.unchanged for t in self.targets)


class TargetPair(Struct, frozen=True):
    """One target as each side defines it (None: not defined there)."""

    shown: Target
    base: Target | None
    head: Target | None
    ad_hoc: bool = False  # given with --target (checked against both sides' trees)


def target_order(target: Target) -> tuple:
    sel = target.selector
    return (
        target.system.value,
        sel.scope or "",
        sel.platform or "",
        sel.environment or "",
        sel.cadence or "",
        target.name,
    )


class Side(Struct, frozen=True):
    """One loaded side of a diff."""

    name: str  # "base" or "head"
    source: TreeSource
    generation: Generation
    # Every finding `matrixgen validate` reports on this side (errors and
    # warnings; without its JSON Schema pass, like the emitters).
    findings: tuple[Finding, ...] = ()

    @property
    def errors(self) -> tuple[Finding, ...]:
        """The errors among the findings: the side's CI would refuse to generate."""
        return tuple(f for f in self.findings if f.severity is Severity.ERROR)

    @property
    def label(self) -> str:
        return f"{self.name} {self.source.label}"
