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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from msgspec import Struct, field

from matrixgen.diff.gitsource import Repository, TreeSource
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
from matrixgen.engine.config import ProjectConfig
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
from matrixgen.engine.targets import discover_targets, parse_target
from matrixgen.engine.vocab import System
from matrixgen.migrate import is_habit_scope
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
    def unchanged(self) -> bool:
        """Nothing CI receives changes (a duplicate row added or removed is a note)."""
        return not (self.added or self.removed or self.changed or self.quarantine or self.settings)

    def counts(self) -> dict[str, int]:
        """+ added, - removed, ~ changed, q quarantine changes, = all of them and
        1 for a changed target definition: what the table shows for the target."""
        out = {
            "+": len(self.added),
            "-": len(self.removed),
            "~": len(self.changed),
            "q": len(self.quarantine),
        }
        out["="] = sum(out.values()) + (1 if self.settings else 0)
        return out


class SelectionDiff(Struct, frozen=True):
    """The diff of every target, in a deterministic order."""

    base: str  # full commit id
    head: str  # full commit id, or "worktree"
    targets: tuple[TargetDiff, ...]
    notes: tuple[str, ...] = ()  # what the reader must know (errors on a side, absent trees)
    # {entry id: evidence line} from a results store (diff.evidence); None: no store.
    evidence: Mapping[str, str] | None = None

    @property
    def unchanged(self) -> bool:
        return all(t.unchanged for t in self.targets)


def target_counts(targets: Sequence[TargetDiff]) -> dict[str, int]:
    """The per-target counts (`TargetDiff.counts`) summed over some targets: a job
    added to two targets counts twice, as the table shows it in both rows."""
    total = {"+": 0, "-": 0, "~": 0, "q": 0, "=": 0}
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
        TargetPair(t, t, t)
        for t in discover_targets(
            _chain(base.jobs, head.jobs), holding_pen=holding_pen, exclude_platforms=typos
        )
    ]


def habit_note(base: Generation, head: Generation) -> str | None:
    """Which quarantine habit scopes a diff without configured targets leaves out."""
    if base.tree.config.targets or head.tree.config.targets:
        return None
    habits = sorted(
        {j.scope for j in (*base.jobs, *head.jobs) if j.scope and is_habit_scope(j.scope)}
    )
    if not habits:
        return None
    return (
        f"scope(s) {', '.join(habits)}: quarantine habits that no pipeline runs, not "
        "compared as targets (their jobs count where an entry quarantines them; "
        "--target compares one)"
    )


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
) -> SelectionDiff:
    """Compare two loaded trees target by target."""
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
    habits = habit_note(base, head) if not (values or specs or names or holding_pen) else None
    extra = [*base_index.notes, *head_index.notes, *([habits] if habits else [])]
    return SelectionDiff(base=base_ref, head=head_ref, targets=tuple(diffs), notes=(*notes, *extra))


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
        cost = jobs_cost(jobs, pair.head, head.generation.tree.config)
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
    return compare_emitted(
        pair.shown,
        old,
        new,
        settings=settings,
        exists=exists,
        configs=(base.generation.tree.config, head.generation.tree.config),
    )


def compare_emitted(
    shown: Target,
    old: EmittedTarget | None,
    new: EmittedTarget | None,
    *,
    settings: Mapping[str, tuple[Any, Any]] | None = None,
    exists: str = "both",
    configs: tuple[ProjectConfig, ProjectConfig] | None = None,
) -> TargetDiff:
    """Compare what two sides emit for one target (None: the target is absent);
    `configs` (base, head) price each side's running jobs (no cost without them)."""
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
        if a.running and b.running and a.plain is not b.plain and a.plain != b.plain:
            changed.append(ChangedJob(a.job, b.job, field_changes(a.plain, b.plain)))
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
    errors = sorted((f for f in found if f.severity is Severity.ERROR), key=Finding.sort_key)
    return Side(name, source, generation, tuple(errors))


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
    )
    return result, sides
