"""Selection diff: per target, the difference between what each revision of a
tree emits for it.

One definition: both sides are emitted as `generate` emits them (the same
`EmittedJob` values the GitHub and GitLab emitters serialise), and compared
job by job, a job being its identity (JobId in engine/model.py: model, test case,
environment, platform, tag) within the target. Per target:

- added: jobs that run at HEAD and did not at BASE; removed: the reverse. A job
  that a skip entry takes out of a target does not run.
- changed: a job that runs on both sides whose emitted content differs (its
  GitHub matrix row, its GitLab job), each emitted field with old and new value;
  quarantine's own marks are left out of it (they are the next category).
- quarantine: each transition with its entry id, tracker, action and kind:
  quarantined (a running job becomes skipped, allow-failure or deselected),
  lifted (the reverse), action changed, entry changed (another entry, tracker,
  kind or node ids with the same action), arrives quarantined (new to the target
  and skipped on arrival), leaves quarantined (removed while skipped).
- duplicates: a job that one more (or one fewer) row defines: "duplicate
  definition added/removed at file:line". The job itself is counted only where
  its emitted content changes.

Where the target's launcher reloads the recipe at run time (engine.workload:
every target of a format_version 1 tree, or one whose settings say so),
changed also covers each field of the job's resolved workload
(`workload.script_setup`, ...), its pipeline content the same or not.

Then, over every target (`find_habits`, `find_moves`): a removed job whose row
the head parks in a habit scope of the target's scope (migrate's notion:
`mr` -> `mr-broken`, `flaky`, ...) or comments out with a tracker is a
quarantine change with its habit, "quarantined"; an added one that the base
had parked or commented out, "lifted". A job removed from one target and added
to another with the same content but for the scope, platform or environment
is moved. Each keeps what Megatron-LM's parser sees (`parser`,
`TargetDiff.parser_counts`): to it these are removals and additions.

Findings: what validate reports on each side (already run to load it) is
compared; the diff lists what the head adds and what it removes.

The file a job is defined in is not emitted: moving a case to another file
changes nothing. A change to a target's own definition (selector, system
settings) is listed once per target, besides the jobs it changes.

Targets: the ones asked for (`--target`, `--target-name`), else every target
configured on either side, else (trees without config) every scope x platform
x environment used on either side, except Megatron-LM's quarantine habit scopes
(`mr-broken`, ...), which no pipeline runs. A target configured on one side
only lists all its jobs as added (or removed); a side without any config
selects with the other side's definition, so moving a tree to a config changes
no job.

Robustness decisions: a side whose recipes have errors (what `matrixgen validate`
reports, its JSON Schema pass left out) is still compared (the rows that cannot
be read yield no jobs there) and the diff says so in its notes; a target that a
side cannot emit (two jobs left with one GitLab name, an unmet need) is compared
job by job as each would be emitted alone, with a note; a recipe directory that
does not exist on one side is an empty tree there (also noted); a bad project
config on a side stops the diff (exit 3) and names the side.

Speed: both sides load through one `PipelineCache` keyed by git blob id, so the
head parses and expands only the files that differ from the base; a target whose
selection is the very same job objects under the same config on both sides is
unchanged without being emitted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from msgspec import Struct, field

from matrixgen.diff.gitsource import Repository, TreeSource, blob_id
from matrixgen.documents.config import ProjectConfig
from matrixgen.emit.common import (
    EmitSettings,
    EmittedJob,
    EmittedTarget,
    check_ad_hoc_target,
    emitted_jobs,
    skipped_jobs,
)
from matrixgen.emit.generate import emitted_target
from matrixgen.engine.checks import typo_platforms
from matrixgen.engine.errors import (
    ConfigError,
    Finding,
    Location,
    MatrixgenError,
    Severity,
    UsageError,
    did_you_mean,
)
from matrixgen.engine.model import Job, JobId, QuarantineMark, Target
from matrixgen.engine.targets import discover_targets, is_holding_pen, parse_target
from matrixgen.engine.vocab import System
from matrixgen.engine.workload import rereads_recipe, workload_changes
from matrixgen.migrate import commented_out, is_habit_scope, parks, row_comment, uncomment
from matrixgen.pipeline import Generation, PipelineCache, generate_from_files
from matrixgen.quarantine.entries import Selection
from matrixgen.views.cost import Cost, jobs_cost

# Quarantine transitions of a job in a target.
QUARANTINED = "quarantined"
LIFTED = "lifted"
ACTION_CHANGED = "action changed"
ENTRY_CHANGED = "entry changed"
ARRIVES_QUARANTINED = "arrives quarantined"
LEAVES_QUARANTINED = "leaves quarantined"
QUARANTINE_CHANGES: tuple[str, ...] = (
    QUARANTINED,
    LIFTED,
    ACTION_CHANGED,
    ENTRY_CHANGED,
    ARRIVES_QUARANTINED,
    LEAVES_QUARANTINED,
)
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

    def describe(self) -> str:
        if self.scope is not None:
            text = f"parked in {self.scope}"
            return text + (f" ({self.comment})" if self.comment else "")
        return f"commented out: {self.comment}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.scope is not None:
            out["scope"] = self.scope
        if self.comment:
            out["comment"] = self.comment
        if self.tracker:
            out["tracker"] = self.tracker
        return out


class ChangedJob(Struct, frozen=True):
    """A job that runs on both sides whose emitted content differs:
    {emitted field: (old, new)}, in the order the file has the fields."""

    base: Job
    head: Job
    fields: Mapping[str, tuple[Any, Any]]


class QuarantineChange(Struct, frozen=True):
    """One quarantine transition of a job in a target (see the module docstring)."""

    change: str  # one of QUARANTINE_CHANGES
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
    def weighted_delta(self) -> float:
        return self.head_cost.weighted_max - self.base_cost.weighted_max

    @property
    def holding_pen(self) -> bool:
        """A habit scope's holding pen (`--holding-pen`): no system runs it."""
        return is_holding_pen(self.target.selector.scope)

    @property
    def unchanged(self) -> bool:
        """Nothing CI receives changes (a duplicate row added or removed is a note)."""
        return not (
            self.added
            or self.removed
            or self.changed
            or self.quarantine
            or self.settings
            or self.moved_out
            or self.moved_in
        )

    def counts(self) -> dict[str, int]:
        """+ added, - removed, ~ changed, q quarantine changes, m moved (in and
        out), = all of them and 1 for a changed target definition: what the
        table shows for the target."""
        out = {
            "+": len(self.added),
            "-": len(self.removed),
            "~": len(self.changed),
            "q": len(self.quarantine),
            "m": len(self.moved_out) + len(self.moved_in),
        }
        out["="] = sum(out.values()) + (1 if self.settings else 0)
        return out

    def parser_counts(self) -> dict[str, int]:
        """Added and removed as Megatron-LM's parser counts them: it reads no
        quarantine file and no habit, so a move, a habit and a job arriving or
        leaving quarantined are additions and removals to it."""
        moves = [q.parser for q in self.quarantine]
        return {
            "added": len(self.added) + len(self.moved_in) + moves.count("added"),
            "removed": len(self.removed) + len(self.moved_out) + moves.count("removed"),
        }


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

    @property
    def unchanged(self) -> bool:
        return all(t.unchanged for t in self.targets)


def target_counts(targets: Sequence[TargetDiff]) -> dict[str, int]:
    """The per-target counts (`TargetDiff.counts`) summed over some targets: a job
    added to two targets counts twice, as the table shows it in both rows."""
    total = {"+": 0, "-": 0, "~": 0, "q": 0, "m": 0, "=": 0}
    for t in targets:
        for kind, n in t.counts().items():
            total[kind] += n
    return total


# ---------------------------------------------------------------- targets


class TargetPair(Struct, frozen=True):
    """One target as each side defines it (None: not defined there)."""

    shown: Target
    base: Target | None
    head: Target | None
    ad_hoc: bool = False  # given with --target (checked against both sides' trees)


# ---------------------------------------------------------------- targets


def resolve_diff_targets(
    base: Generation,
    head: Generation,
    *,
    values: Sequence[str] = (),
    specs: Sequence[str] = (),
    names: Sequence[str] = (),
    holding_pen: bool = False,
) -> list[TargetPair]:
    """The targets to compare, each as the base and the head define it.

    `values` are `--target` values: a target's name (configured, or discovered,
    on either side), else key=value pairs."""
    base_config, head_config = base.tree.config, head.tree.config
    # The targets the jobs imply, by name: only looked up for targets given.
    discovered = (
        {t.name: t for t in discover_targets(_chain(base.jobs, head.jobs), holding_pen=True)}
        if values or names
        else {}
    )
    names = list(names)
    specs = list(specs)
    for value in values:
        if (
            "=" in value
            and value not in discovered
            and base_config.target(value) is None
            and head_config.target(value) is None
        ):
            specs.append(value)
        else:
            names.append(value)
    pairs: list[TargetPair] = []
    for name in names:
        pair = _configured_pair(name, base, head)
        if pair is None and name in discovered:
            found = discovered[name]
            pair = TargetPair(found, found, found)
        if pair is None:
            known = sorted({t.name for t in (*base_config.targets, *head_config.targets)})
            hint = did_you_mean(name, known or list(discovered))
            if not hint:
                hint = f"; configured: {', '.join(known)}" if known else "; no target is configured"
            raise UsageError(f'--target "{name}": no target has this name{hint}')
        pairs.append(pair)
    for spec in specs:
        head_target = parse_target(spec, head_config)
        pairs.append(
            TargetPair(head_target, parse_target(spec, base_config), head_target, ad_hoc=True)
        )
    if pairs:
        seen: set[str] = set()
        for pair in pairs:
            if pair.shown.name in seen:
                raise UsageError(f'target "{pair.shown.name}" is given twice')
            seen.add(pair.shown.name)
        return pairs
    configured = sorted({t.name for t in (*base_config.targets, *head_config.targets)})
    if configured:
        return [p for p in (_configured_pair(n, base, head) for n in configured) if p]
    typos = typo_platforms(base.tree) | typo_platforms(head.tree)
    return [
        TargetPair(_pen(t), t, t)
        for t in discover_targets(
            _chain(base.jobs, head.jobs), holding_pen=holding_pen, exclude_platforms=typos
        )
    ]


def _pen(target: Target) -> Target:
    """A discovered holding pen, shown by a name that claims no system
    (`holding-pen-mr-broken-dgx_h100-dev`): no pipeline runs it."""
    sel = target.selector
    if not is_holding_pen(sel.scope):
        return target
    parts = ["holding-pen", sel.scope, sel.platform, sel.environment]
    from msgspec.structs import replace as _replace

    return _replace(target, name="-".join(p for p in parts if p))


def habit_note(base: Generation, head: Generation) -> str | None:
    """The quarantine habit scopes, left out of a diff without configured targets,
    in which the branch changes a job (None: it changes none)."""
    if base.tree.config.targets or head.tree.config.targets:
        return None
    before, after = _habit_jobs(base), _habit_jobs(head)
    if before == after:
        return None
    habits = sorted(
        {key[1] for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
    )
    return (
        f"scope(s) {', '.join(habits)}: this branch changes jobs in these quarantine "
        "habits, which no pipeline runs and which are not compared as targets (a job "
        "parked there or lifted from there is a quarantine change of the target it "
        "leaves or joins; --holding-pen compares them)"
    )


def _habit_jobs(generation: Generation) -> dict[tuple[JobId, str], tuple[Job, Mapping[str, Any]]]:
    return {
        (j.identity, j.scope): (j, j.spec)
        for j in generation.jobs
        if j.scope and is_habit_scope(j.scope)
    }


def _chain(*groups: Iterable[Job]) -> list[Job]:
    return [job for group in groups for job in group]


def _configured_pair(name: str, base: Generation, head: Generation) -> TargetPair | None:
    """A configured target on each side. A side without a vocabulary (a tree that
    has not moved to format_version 2 yet, whose config, if any, has no targets)
    selects with the other side's definition."""
    base_target = base.tree.config.target(name)
    head_target = head.tree.config.target(name)
    if base_target is None and head_target is None:
        return None
    if base_target is None and base.tree.config.vocabulary is None:
        base_target = head_target
    if head_target is None and head.tree.config.vocabulary is None:
        head_target = base_target
    shown = head_target or base_target
    assert shown is not None
    return TargetPair(shown, base_target, head_target)


# ---------------------------------------------------------------- emitting


class SideIndex:
    """One side's targets as `generate` emits them."""

    def __init__(self, name: str, generation: Generation) -> None:
        self.name = name
        self.generation = generation
        self.notes: list[str] = []

    def selection(self, target: Target | None) -> Selection:
        if target is None:
            return Selection(())
        return self.generation.selection(target)

    def emit(self, target: Target | None, chosen: Selection) -> EmittedTarget | None:
        """The target's emitted jobs (None: the target does not exist on this side)."""
        if target is None:
            return None
        config = self.generation.tree.config
        try:
            return emitted_target(target, chosen, config)[0]
        except ConfigError as exc:
            exc.message = f"{self.name}: {exc.message}"
            raise
        except MatrixgenError as exc:
            self.notes.append(
                f"{self.name}: target {target.name} cannot be emitted ({exc.message}); "
                "its jobs are compared one by one, each as it would be emitted alone"
            )
            return _one_by_one(target, chosen)


def _one_by_one(target: Target, chosen: Selection) -> EmittedTarget:
    """A target that cannot be emitted whole: each job as it would be emitted alone."""
    from msgspec.structs import replace as _replace

    from matrixgen.emit.github import github_row
    from matrixgen.emit.gitlab import standalone_content

    settings = EmitSettings(target=target)
    content = github_row if target.system is System.GITHUB else standalone_content
    jobs = emitted_jobs(chosen.jobs)
    out = []
    for job in jobs:
        row = content(job, settings)
        plain = row if job.quarantine is None else content(_replace(job, quarantine=None), settings)
        out.append(
            EmittedJob(
                identity=job.identity, content=row, plain=plain, quarantine=job.quarantine, job=job
            )
        )
    kept = {id(j) for j in jobs}
    left_out = [*chosen.skipped, *(j for j in chosen.jobs if id(j) not in kept)]
    return EmittedTarget(target=target, jobs=tuple(out), skipped=skipped_jobs(left_out))


# ---------------------------------------------------------------- comparing


def diff_generations(
    base: Generation,
    head: Generation,
    *,
    values: Sequence[str] = (),
    specs: Sequence[str] = (),
    names: Sequence[str] = (),
    holding_pen: bool = False,
    base_ref: str = "base",
    head_ref: str = "head",
    notes: Sequence[str] = (),
    sources: tuple[TreeSource, TreeSource] | None = None,
    cache: PipelineCache | None = None,
) -> SelectionDiff:
    """Compare two loaded trees target by target. With the trees' `sources`
    (base, head), a row commented out (or back in) is told from a deletion."""
    pairs = resolve_diff_targets(
        base, head, values=values, specs=specs, names=names, holding_pen=holding_pen
    )
    sides = [(base.tree.config, base.jobs), (head.tree.config, head.jobs)]
    for pair in pairs:
        if pair.ad_hoc:
            check_ad_hoc_target(pair.shown, sides)
    base_index, head_index = (
        SideIndex(f"base {base_ref[:12]}", base),
        SideIndex(f"head {head_ref[:12]}", head),
    )
    diffs = [diff_target(pair, base_index, head_index) for pair in pairs]
    diffs.sort(key=lambda d: _target_order(d.target))
    if any(d.added or d.removed for d in diffs):
        diffs = find_moves(find_habits(diffs, base, head, sources, cache))
    habits = habit_note(base, head) if not (values or specs or names or holding_pen) else None
    extra = [*base_index.notes, *head_index.notes, *([habits] if habits else [])]
    return SelectionDiff(base=base_ref, head=head_ref, targets=tuple(diffs), notes=(*notes, *extra))


# ---------------------------------------------------------------- habits and moves


def find_habits(
    diffs: Sequence[TargetDiff],
    base: Generation,
    head: Generation,
    sources: tuple[TreeSource, TreeSource] | None,
    cache: PipelineCache | None,
) -> list[TargetDiff]:
    """Removed jobs that upstream's habits took out, and added ones they brought
    back, as quarantine changes (migrate's notion of a habit): a job that leaves
    a target while its row now sits in one of that scope's habit scopes
    (`mr` -> `mr-broken`), or is now commented out with a tracker in the
    comment, is quarantined; the reverse is lifted."""
    from msgspec.structs import replace as _replace

    gens = (base, head)
    texts = (_texts(sources[0]), _texts(sources[1])) if sources else ({}, {})
    parked = (_parked(base), _parked(head))
    # Where a job is missing on a side, what that side's commented-out rows hold.
    wanted = (
        {j.recipe for d in diffs if not d.holding_pen for j in d.added},
        {j.recipe for d in diffs if not d.holding_pen for j in d.removed},
    )
    restored = [
        _commented_jobs(gens[i], texts[i], wanted[i], sources[i] if sources else None, cache)
        for i in (0, 1)
    ]
    out = []
    for d in diffs:
        if d.holding_pen or not (d.added or d.removed):
            out.append(d)
            continue
        scope = d.target.selector.scope or ""
        changes = list(d.quarantine)
        kept: dict[str, list[Job]] = {"removed": [], "added": []}
        # A removed job is looked for at head, an added one at base.
        for kind, jobs, side in (("removed", d.removed, 1), ("added", d.added, 0)):
            for job in jobs:
                habit = _habit_of(job, scope, side, parked, restored[side], texts[side])
                if habit is None:
                    kept[kind].append(job)
                elif kind == "removed":
                    changes.append(QuarantineChange(QUARANTINED, job, None, habit=habit))
                else:
                    changes.append(QuarantineChange(LIFTED, None, job, habit=habit))
        if len(changes) == len(d.quarantine):
            out.append(d)
            continue
        out.append(
            _replace(
                d,
                added=tuple(kept["added"]),
                removed=tuple(kept["removed"]),
                quarantine=tuple(sorted(changes, key=lambda q: (q.job.sort_key(), q.change))),
            )
        )
    return out


def _texts(source: TreeSource) -> dict[str, str]:
    return {
        rel: data.decode("utf-8-sig", errors="replace")
        for rel, data in source.files.items()
        if rel.endswith((".yaml", ".yml"))
    }


def _parked(generation: Generation) -> dict[JobId, list[Job]]:
    """The jobs of a side's habit scopes, by identity."""
    out: dict[JobId, list[Job]] = {}
    for job in generation.jobs:
        if job.scope and is_habit_scope(job.scope):
            out.setdefault(job.identity, []).append(job)
    return out


def _habit_of(
    job: Job,
    scope: str,
    side: int,
    parked: tuple[Mapping[JobId, list[Job]], Mapping[JobId, list[Job]]],
    restored: Mapping[tuple[JobId, str | None], tuple[str, str | None]],
    texts: Mapping[str, str],
) -> Habit | None:
    """The habit that explains a job's leaving (joining) a target of `scope`:
    on the side it is missing from (`side`), its row parked in one of that
    scope's habit scopes (and not parked there on the other side too), or
    commented out with a tracker."""
    for habit_job in parked[side].get(job.identity, ()):
        where = habit_job.scope or ""
        if not parks(where, scope):
            continue
        if any(j.scope == where for j in parked[1 - side].get(job.identity, ())):
            continue
        comment, tracker = "", None
        text = texts.get(habit_job.recipe)
        if text is not None:
            comment, tracker = row_comment(text, habit_job.source.line)
        return Habit(scope=habit_job.shown_scope, comment=comment or None, tracker=tracker)
    found = restored.get((job.identity, job.scope))
    if found is not None:
        return Habit(comment=found[0], tracker=found[1])
    return None


def _commented_jobs(
    generation: Generation,
    texts: Mapping[str, str],
    wanted: Iterable[str],
    source: TreeSource | None,
    cache: PipelineCache | None,
) -> dict[tuple[JobId, str | None], tuple[str, str | None]]:
    """{(identity, scope): (comment, tracker)} of the jobs that the commented-out
    habits of the `wanted` files of one side would define, uncommented."""
    if source is None:
        return {}
    recipes = {r.rel: r for r in generation.tree.tests}
    items = {}
    for rel in sorted(set(wanted)):
        if rel in recipes and rel in texts:
            found = commented_out(recipes[rel], texts[rel])
            if found:
                items[rel] = found
    if not items:
        return {}
    files = dict(source.files)
    blob_ids = dict(source.blob_ids)
    for rel, found in items.items():
        files[rel] = uncomment(texts[rel], found).encode("utf-8")
        blob_ids[rel] = blob_id(files[rel])
    try:
        restored = generate_from_files(
            files, root=source.path or ".", blob_ids=blob_ids, cache=cache
        )
    except MatrixgenError:  # what does not uncomment to a tree is no habit
        return {}
    out: dict[tuple[JobId, str | None], tuple[str, str | None]] = {}
    for job in restored.jobs:
        for item in items.get(job.recipe, ()):
            if item.first_line <= job.source.line <= item.last_line:
                out.setdefault((job.identity, job.scope), (item.comment, item.tracker))
    return out


def find_moves(diffs: Sequence[TargetDiff]) -> list[TargetDiff]:
    """Jobs removed from one target and added to another with the same content
    but for the renamed scope, platform or environment, as moves. Pairs are
    made closest first: the targets that differ in the fewest of system, scope,
    platform, environment and cadence, then in target order (the same pairs
    whichever side is the base)."""
    from msgspec.structs import replace as _replace

    arrivals: dict[tuple, list[tuple[int, Job]]] = {}
    for index, d in enumerate(diffs):
        if not d.holding_pen:
            for job in d.added:
                arrivals.setdefault(_move_key(job), []).append((index, job))
    if not arrivals:
        return list(diffs)
    options = []
    for index, d in enumerate(diffs):
        if d.holding_pen:
            continue
        for job in d.removed:
            for i, other in arrivals.get(_move_key(job), ()):
                if i != index:
                    order = sorted([(index, job.sort_key()), (i, other.sort_key())])
                    options.append(
                        (_distance(d.target, diffs[i].target), order, index, job, i, other)
                    )
    if not options:
        return list(diffs)
    options.sort(key=lambda o: (o[0], o[1]))
    moved_out: dict[int, list[Moved]] = {}
    moved_in: dict[int, list[Moved]] = {}
    taken: set[int] = set()
    for _, _, index, job, i, other in options:
        if id(job) in taken or id(other) in taken:
            continue
        taken.update((id(job), id(other)))
        moved_out.setdefault(index, []).append(Moved(job, diffs[i].target.name))
        moved_in.setdefault(i, []).append(Moved(other, diffs[index].target.name))
    out = []
    for index, d in enumerate(diffs):
        if index not in moved_out and index not in moved_in:
            out.append(d)
            continue
        out.append(
            _replace(
                d,
                removed=tuple(j for j in d.removed if id(j) not in taken),
                added=tuple(j for j in d.added if id(j) not in taken),
                moved_out=tuple(sorted(moved_out.get(index, ()), key=lambda m: m.job.sort_key())),
                moved_in=tuple(sorted(moved_in.get(index, ()), key=lambda m: m.job.sort_key())),
            )
        )
    return out


# The fields a rename of a target's scope, platform or environment changes.
_RENAMED = frozenset({"scope", "platforms", "environment"})


def _move_key(job: Job) -> tuple:
    """A job's content but for its scope, platform and environment (and what
    is rendered from them: its name, its build): what a move keeps."""
    spec = json.dumps(
        {k: v for k, v in job.spec.items() if k not in _RENAMED}, sort_keys=True, default=str
    )
    return (
        job.model,
        job.test_case,
        job.tag or "",
        job.n_repeat,
        job.time_limit,
        job.nodes,
        job.gpus,
        job.allow_failure,
        job.env,
        job.args,
        job.quarantine,
        spec,
    )


def _distance(a: Target, b: Target) -> int:
    one, two = _target_order(a)[:5], _target_order(b)[:5]
    return sum(x != y for x, y in zip(one, two, strict=True))


def _target_order(target: Target) -> tuple:
    sel = target.selector
    return (
        target.system.value,
        sel.scope or "",
        sel.platform or "",
        sel.environment or "",
        sel.cadence or "",
        target.name,
    )


def _same_objects(a: Sequence[Job], b: Sequence[Job]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def diff_target(pair: TargetPair, base: SideIndex, head: SideIndex) -> TargetDiff:
    """The diff of one target: its emitted jobs on each side, compared."""
    old_sel, new_sel = base.selection(pair.base), head.selection(pair.head)
    settings = target_changes(pair.base, pair.head)
    exists = "both" if pair.base and pair.head else "base" if pair.base else "head"
    if (
        pair.base is not None
        and pair.head is not None
        and base.generation.tree.config is head.generation.tree.config
        and (pair.base is pair.head or not settings)
        and _same_objects(old_sel.jobs, new_sel.jobs)
        and _same_objects(old_sel.skipped, new_sel.skipped)
    ):
        # The very same jobs under the very same config: the same file.
        jobs = emitted_jobs(new_sel.jobs)
        cost = (
            Cost()
            if is_holding_pen(pair.shown.selector.scope)
            else jobs_cost(jobs, pair.head, head.generation.tree.config)
        )
        return TargetDiff(
            target=pair.shown,
            settings=settings,
            base_jobs=len(jobs),
            head_jobs=len(jobs),
            base_cost=cost,
            head_cost=cost,
        )
    old = base.emit(pair.base, old_sel)
    new = head.emit(pair.head, new_sel)
    # A holding pen is no system's target: nothing runs it, it costs nothing.
    priced = not is_holding_pen(pair.shown.selector.scope)
    return compare_emitted(
        pair.shown,
        old,
        new,
        settings=settings,
        exists=exists,
        configs=(base.generation.tree.config, head.generation.tree.config) if priced else None,
        workloads=any(
            target is not None and rereads_recipe(side.generation.tree, target)
            for side, target in ((base, pair.base), (head, pair.head))
        ),
    )


def compare_emitted(
    shown: Target,
    old: EmittedTarget | None,
    new: EmittedTarget | None,
    *,
    settings: Mapping[str, tuple[Any, Any]] | None = None,
    exists: str = "both",
    configs: tuple[ProjectConfig, ProjectConfig] | None = None,
    workloads: bool = False,
) -> TargetDiff:
    """Compare what two sides emit for one target (None: the target is absent);
    `configs` (base, head) price each side's running jobs (no cost without them).
    `workloads`: the target's launcher reloads the recipe at run time
    (engine.workload), so a running job also changes where its resolved
    workload does (`workload.FIELD`), its pipeline content unchanged or not."""
    olds: dict[JobId, EmittedJob] = old.by_identity() if old is not None else {}
    news: dict[JobId, EmittedJob] = new.by_identity() if new is not None else {}
    added: list[Job] = []
    removed: list[Job] = []
    changed: list[ChangedJob] = []
    quarantine: list[QuarantineChange] = []
    duplicates: list[DuplicateNote] = []
    for identity in sorted(olds.keys() | news.keys()):
        a, b = olds.get(identity), news.get(identity)
        if a is None:
            assert b is not None
            if b.skipped:
                quarantine.append(QuarantineChange(ARRIVES_QUARANTINED, None, b.job))
            else:
                added.append(b.job)
            continue
        if b is None:
            if a.skipped:
                quarantine.append(QuarantineChange(LEAVES_QUARANTINED, a.job, None))
            else:
                removed.append(a.job)
            continue
        change = quarantine_change(a.quarantine, b.quarantine)
        if change is not None:
            quarantine.append(QuarantineChange(change, a.job, b.job))
        if a.running and b.running:
            fields = (
                field_changes(a.plain, b.plain)
                if a.plain is not b.plain and a.plain != b.plain
                else {}
            )
            if workloads and a.job is not b.job:
                fields.update(workload_changes(a.job, b.job))
            if fields:
                changed.append(ChangedJob(a.job, b.job, fields))
        duplicates.extend(duplicate_notes(a.job, b.job))
    return TargetDiff(
        target=shown,
        added=tuple(sorted(added, key=Job.sort_key)),
        removed=tuple(sorted(removed, key=Job.sort_key)),
        changed=tuple(sorted(changed, key=lambda c: c.head.sort_key())),
        quarantine=tuple(sorted(quarantine, key=lambda q: q.job.sort_key())),
        duplicates=tuple(duplicates),
        settings=dict(settings or {}),
        exists=exists,
        base_jobs=len(old.jobs) if old is not None else 0,
        head_jobs=len(new.jobs) if new is not None else 0,
        base_cost=emitted_cost(old, configs[0]) if configs else Cost(),
        head_cost=emitted_cost(new, configs[1]) if configs else Cost(),
    )


def emitted_cost(emitted: EmittedTarget | None, config: ProjectConfig) -> Cost:
    """What one run of a side's target costs: the jobs its file holds (a job a
    skip entry keeps out costs nothing), priced as `stats --cost` prices them."""
    if emitted is None:
        return Cost()
    return jobs_cost([e.job for e in emitted.jobs], emitted.target, config)


def quarantine_change(old: QuarantineMark | None, new: QuarantineMark | None) -> str | None:
    """The transition between two marks of a job present on both sides."""
    if old == new:
        return None
    if old is None:
        return QUARANTINED
    if new is None:
        return LIFTED
    if old.action != new.action:
        return ACTION_CHANGED
    return ENTRY_CHANGED


def field_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{emitted field: (old, new)} for each field that differs, in file order."""
    keys = [*new, *(k for k in old if k not in new)]
    return {k: (plain(old.get(k)), plain(new.get(k))) for k in keys if old.get(k) != new.get(k)}


def duplicate_notes(old: Job, new: Job) -> list[DuplicateNote]:
    """A row added or removed among the definitions of one job."""
    before, after = old.locations, new.locations
    if len(before) == len(after):
        return []
    if len(after) > len(before):
        extra = tuple(w for w in after if w not in before) or after
        return [DuplicateNote(DUPLICATE_ADDED, new, extra)]
    gone = tuple(w for w in before if w not in after) or before
    return [DuplicateNote(DUPLICATE_REMOVED, new, gone)]


def target_changes(base: Target | None, head: Target | None) -> dict[str, tuple[Any, Any]]:
    """Differences in a target's definition between the sides (both must exist)."""
    if base is None or head is None or base is head:
        return {}
    old = {**base.to_dict(), **plain(dict(base.settings))}
    new = {**head.to_dict(), **plain(dict(head.settings))}
    old.pop("system", None)
    new.pop("system", None)
    if base.system != head.system:
        old["system"], new["system"] = base.system.value, head.system.value
    out = {}
    for key in sorted(old.keys() | new.keys()):
        if old.get(key) != new.get(key):
            out[key] = (old.get(key), new.get(key))
    return out


def plain(value: Any, name: str = "") -> Any:
    """A JSON-ready copy of a value (env as a mapping, tuples as lists, dates as text)."""
    if name == "env" and isinstance(value, tuple):
        return {k: v for k, v in value}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return json.loads(json.dumps(value, default=str))


# ---------------------------------------------------------------- revisions


class Side(Struct, frozen=True):
    """One loaded side of a diff."""

    name: str  # "base" or "head"
    source: TreeSource
    generation: Generation
    # The errors `matrixgen validate` reports on this side (without its JSON
    # Schema pass, like the emitters): the side's CI would refuse to generate.
    errors: tuple[Finding, ...] = ()
    # Every finding of that validation (errors and warnings).
    findings: tuple[Finding, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.name} {self.source.label}"


def load_side(name: str, source: TreeSource, cache: PipelineCache) -> Side:
    """Load, expand and check one side; a bad project config names the side it is on."""
    from matrixgen.validate import validate  # imports every stage's checks

    root = source.path or "."
    try:
        generation = generate_from_files(
            source.files, root=root, blob_ids=source.blob_ids, cache=cache
        )
        found = {*validate(generation.tree, generation.expansion, schema=False)}
    except MatrixgenError as exc:
        exc.message = f"{name} ({source.label}): {exc.message}"
        raise
    found.update(generation.findings)  # the quarantine file's too
    findings = sorted(found, key=Finding.sort_key)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    return Side(name, source, generation, tuple(errors), tuple(findings))


_DIGITS = re.compile(r"[0-9]+")


def finding_changes(
    base: Sequence[Finding], head: Sequence[Finding]
) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """The findings head has and base has not, and the reverse, compared by
    severity, code, file and message, numbers left out (a line moved by an edit
    above it, a count in the message that another row changes: the same
    finding), each as many times as one side has it more than the other."""
    from collections import Counter

    def key(f: Finding) -> tuple[str, str, str, str]:
        return (f.severity.value, f.code, f.location.file, _DIGITS.sub("0", f.message))

    before, after = Counter(map(key, base)), Counter(map(key, head))
    added, removed = after - before, before - after

    def pick(findings: Sequence[Finding], wanted: Counter) -> tuple[Finding, ...]:
        out = []
        for f in findings:
            if wanted[key(f)] > 0:
                wanted[key(f)] -= 1
                out.append(f)
        return tuple(out)

    return pick(head, added), pick(base, removed)


def side_notes(side: Side) -> list[str]:
    """What a reader must know about one side: an absent tree, errors in it."""
    notes = [f"{side.label}: {note}" for note in side.source.notes]
    where = side.source.path or "the repository top"
    if not side.source.present:
        other = "added" if side.name == "base" else "removed"
        notes.append(
            f"{side.label}: {where} does not exist there; "
            f"it counts as an empty tree (every job is {other})"
        )
    if side.errors:
        notes.append(
            f"{side.label}: {len(side.errors)} error(s) in the recipe tree: `matrixgen "
            "validate` fails there and the emitters would refuse it; what could not be "
            "read yields no jobs on this side, what was read is compared as it is"
        )
    return notes


def diff_revisions(
    repo: Repository,
    path: str,
    base: str,
    head: str | None = None,
    *,
    values: Sequence[str] = (),
    specs: Sequence[str] = (),
    names: Sequence[str] = (),
    holding_pen: bool = False,
    cache: PipelineCache | None = None,
) -> tuple[SelectionDiff, list[Side]]:
    """The selection diff between two revisions (head None: the working tree)."""
    cache = cache if cache is not None else PipelineCache()
    base_source = repo.read(base, path)
    head_source = repo.read(head, path)
    if not base_source.present and not head_source.present:
        where = path or "the repository top"
        raise UsageError(
            f"the recipe directory {where} exists neither at {base} nor at "
            f"{head or 'the working tree'} (give it with --recipes)"
        )
    sides = [load_side("base", base_source, cache), load_side("head", head_source, cache)]
    notes = [note for side in sides for note in side_notes(side)]
    result = diff_generations(
        sides[0].generation,
        sides[1].generation,
        values=values,
        specs=specs,
        names=names,
        holding_pen=holding_pen,
        base_ref=base_source.ref,
        head_ref=head_source.ref,
        notes=notes,
        sources=(base_source, head_source),
        cache=cache,
    )
    added, removed = finding_changes(sides[0].findings, sides[1].findings)
    if added or removed:
        from msgspec.structs import replace as _replace

        result = _replace(result, findings_added=added, findings_removed=removed)
    return result, sides
