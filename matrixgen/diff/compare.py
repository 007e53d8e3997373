"""Selection diff: per target, the jobs one revision of a tree adds, removes and
changes compared with another, and the quarantine changes between them.

Two jobs are the same job when they have the same identity (JobId in engine/model.py: model,
test case, environment, platform, tag) and the same scope; a target selects one
scope, so within a target this is the identity. When one side holds the same
identity twice in a target (cadences that do not overlap), the jobs are paired
by equal cadence first, then in order.

A changed job lists each field that differs as (old, new): the resolved job
fields (cadence, name, build, n_repeat, time_limit, nodes, gpus, allow_failure,
env, args), `image` (the container image the target runs it in: the target's
settings or the pin for its system and architecture, as the emitters resolve
it; else the image its build recipe names), and every other spec field (script,
script_setup, launcher, extra axes, ...). The file a job is defined in is not a
field: moving a case to another file changes nothing that runs. A change to a
target's own definition (selector, system settings) is listed once per target.

Quarantine is compared apart from the fields: a job the recipes select on both
sides whose quarantine mark differs is "quarantined" (none before), "lifted"
(none after) or "requarantined" (another entry, tracker or action). Jobs that a
skip entry takes out of a target still count as selected by the recipes, so a
new quarantine is never reported as a removal; a job skipped on both sides runs
on neither, so its field changes are not listed (they show once it is lifted).

Targets: the ones asked for (`--target`, `--target-name`), else every target
configured on either side, else (trees without config) every scope x platform
x environment used on either side. A target configured on one side only lists
all its jobs as added (or removed); a side without any config selects with the
other side's definition, so moving a tree to a config changes no job.

Robustness decisions: a side whose recipes have errors (what `matrixgen validate`
reports, its JSON Schema pass left out: a mistyped platform as much as a file
that does not parse) is still compared (the rows that cannot be read yield no
jobs there) and the diff says so in its notes;
a recipe directory that does not exist on one side is an empty tree there (also
noted); a bad project config on a side stops the diff (exit 3) and names the
side, since nothing there can be expanded without it.

Speed: both sides load through one `PipelineCache` keyed by git blob id, so the
head parses and expands only the files that differ from the base; jobs reused
from the base are the same objects, which pair with themselves at no cost.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from matrixgen.diff.gitsource import Repository, TreeSource
from matrixgen.emit.common import check_ad_hoc_target
from matrixgen.engine.checks import typo_platforms
from matrixgen.engine.errors import Finding, MatrixgenError, Severity, UsageError, did_you_mean
from matrixgen.engine.model import Job, QuarantineMark, Selector, Target
from matrixgen.engine.select import JobIndex
from matrixgen.engine.targets import discover_targets, parse_target
from matrixgen.pipeline import Generation, PipelineCache, generate_from_files
from matrixgen.quarantine.entries import apply_quarantine

# Job attributes compared directly (identity and scope are the key).
JOB_FIELDS: tuple[str, ...] = (
    "cadence",
    "name",
    "build",
    "n_repeat",
    "time_limit",
    "nodes",
    "gpus",
    "allow_failure",
    "env",
    "args",
)
# Spec keys that the job fields above (or the identity) already cover.
COVERED_SPEC_KEYS = frozenset(
    {"model", "test_case", "environment", "platforms", "tag", "scope", *JOB_FIELDS}
)

QUARANTINED = "quarantined"
LIFTED = "lifted"
REQUARANTINED = "requarantined"
SKIP = "skip"  # the quarantine action that takes a job out of a target


@dataclass(frozen=True, slots=True)
class ChangedJob:
    """A job on both sides whose fields differ: {field: (old, new)}, sorted by field."""

    base: Job
    head: Job
    fields: Mapping[str, tuple[Any, Any]]


@dataclass(frozen=True, slots=True)
class QuarantineChange:
    """A job selected on both sides whose quarantine mark differs."""

    change: str  # quarantined, lifted or requarantined
    base: Job
    head: Job

    @property
    def old(self) -> QuarantineMark | None:
        return self.base.quarantine

    @property
    def new(self) -> QuarantineMark | None:
        return self.head.quarantine

    @property
    def mark(self) -> QuarantineMark:
        """The entry the change is about: the new one, or the lifted one."""
        mark = self.new or self.old
        assert mark is not None
        return mark


@dataclass(frozen=True, slots=True)
class TargetDiff:
    """What changes for one target."""

    target: Target
    added: tuple[Job, ...] = ()
    removed: tuple[Job, ...] = ()
    changed: tuple[ChangedJob, ...] = ()
    quarantine: tuple[QuarantineChange, ...] = ()
    # Differences in the target's own definition (selector and system settings).
    settings: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    # "both", or the one side the target exists on (a configured target added or removed).
    exists: str = "both"
    # How many jobs the target runs on each side (jobs a skip entry takes out left out).
    base_jobs: int = 0
    head_jobs: int = 0

    @property
    def unchanged(self) -> bool:
        return not (self.added or self.removed or self.changed or self.quarantine or self.settings)


@dataclass(frozen=True, slots=True)
class SelectionDiff:
    """The diff of every target, in a deterministic order."""

    base: str  # full commit id
    head: str  # full commit id, or "worktree"
    targets: tuple[TargetDiff, ...]
    notes: tuple[str, ...] = ()  # what the reader must know (errors on a side, absent trees)

    @property
    def unchanged(self) -> bool:
        return all(t.unchanged for t in self.targets)


def distinct_counts(targets: Sequence[TargetDiff]) -> dict[str, int]:
    """Distinct jobs per kind (+ added, - removed, ~ changed, q quarantine) over
    some targets, and "=" their sum plus the targets whose definition changed.

    A job is counted once however many targets list it: the same six jobs added
    to the pr and the mergegroup targets of a tier are six additions.
    """
    seen: dict[str, set[tuple]] = {"+": set(), "-": set(), "~": set(), "q": set()}
    for t in targets:
        seen["+"].update(j.sort_key() for j in t.added)
        seen["-"].update(j.sort_key() for j in t.removed)
        seen["~"].update(c.head.sort_key() for c in t.changed)
        seen["q"].update(q.head.sort_key() for q in t.quarantine)
    counts = {kind: len(keys) for kind, keys in seen.items()}
    counts["="] = sum(counts.values()) + sum(1 for t in targets if t.settings)
    return counts


@dataclass(frozen=True, slots=True)
class TargetPair:
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
    discovered = {
        t.name: t for t in discover_targets(_chain(base.jobs, head.jobs), holding_pen=True)
    }
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


def _configured_pair(name: str, base: Generation, head: Generation) -> TargetPair | None:
    """A configured target on each side. A side without any config (a tree that
    has not moved to format_version 2 yet) selects with the other side's definition."""
    base_target = base.tree.config.target(name)
    head_target = head.tree.config.target(name)
    if base_target is None and head_target is None:
        return None
    if base_target is None and base.tree.config.document is None:
        base_target = head_target
    if head_target is None and head.tree.config.document is None:
        head_target = base_target
    shown = head_target or base_target
    assert shown is not None
    return TargetPair(shown, base_target, head_target)


def _chain(*groups: Iterable[Job]) -> list[Job]:
    return [job for group in groups for job in group]


# ---------------------------------------------------------------- selection


class SideIndex:
    """One side's jobs grouped for fast per-target selection, and its images."""

    def __init__(self, name: str, generation: Generation) -> None:
        self.name = name
        self.generation = generation
        self.index = JobIndex(generation.jobs)
        self.build_images = build_images(generation)
        self._target_images: dict[tuple[str, str, str], str | None] = {}

    def recipe_selection(self, selector: Selector) -> list[Job]:
        """The jobs the recipes give a selector, before quarantine."""
        return self.index.select(selector)

    def selection(self, target: Target | None) -> list[Job]:
        """The target's jobs with their quarantine marks, the ones a skip entry
        takes out included (so a new skip shows as a quarantine, not a removal)."""
        if target is None:
            return []
        jobs = self.recipe_selection(target.selector)
        entries = self.generation.quarantine.entries
        if not entries or not jobs:
            return jobs
        kept, skipped = apply_quarantine(
            jobs, entries, target, known_test_cases=self.index.test_cases
        )
        return [*kept, *skipped]

    def image(self, job: Job, target: Target) -> Any:
        """The image the target runs the job in (its settings, else the pin for its
        system and architecture), else the image of the job's build recipe."""
        key = (target.name, job.platform, job.environment)
        if key not in self._target_images:
            from matrixgen.emit.common import resolve_settings

            config = self.generation.tree.config
            try:
                settings = resolve_settings(target, config, [job])
            except MatrixgenError as exc:
                exc.message = f"{self.name}: {exc.message}"
                raise
            self._target_images[key] = settings.image(job)
        image = self._target_images[key]
        if image is None and job.build is not None:
            return self.build_images.get(job.build)
        return image


def build_images(generation: Generation) -> dict[str, Any]:
    """Build name -> the container image its build recipe names (spec.source.image
    or spec.image): what a tree without pinned images runs."""
    images: dict[str, Any] = {}
    for recipe in generation.tree.builds:
        spec = recipe.data.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            continue
        source = spec.get("source")
        image = source.get("image") if isinstance(source, dict) else None
        if image is None:
            image = spec.get("image")
        images[spec["name"]] = plain(image)
    return images


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
    warnings = [w for p in pairs if p.ad_hoc for w in check_ad_hoc_target(p.shown, sides)]
    base_index, head_index = (
        SideIndex(f"base {base_ref[:12]}", base),
        SideIndex(f"head {head_ref[:12]}", head),
    )
    diffs = [diff_target(pair, base_index, head_index) for pair in pairs]
    diffs.sort(key=lambda d: _target_order(d.target))
    return SelectionDiff(
        base=base_ref, head=head_ref, targets=tuple(diffs), notes=(*notes, *warnings)
    )


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


def diff_target(pair: TargetPair, base: SideIndex, head: SideIndex) -> TargetDiff:
    """The diff of one target."""
    old_jobs = base.selection(pair.base)
    new_jobs = head.selection(pair.head)
    settings = target_changes(pair.base, pair.head)
    exists = "both" if pair.base and pair.head else "base" if pair.base else "head"
    same_context = _same_context(base, head)
    sizes = {"base_jobs": _running(old_jobs), "head_jobs": _running(new_jobs)}
    if same_context and _same_objects(old_jobs, new_jobs):
        return TargetDiff(target=pair.shown, settings=settings, exists=exists, **sizes)
    added: list[Job] = []
    removed: list[Job] = []
    changed: list[ChangedJob] = []
    quarantine: list[QuarantineChange] = []
    for old, new in pair_jobs(old_jobs, new_jobs):
        if old is None:
            assert new is not None
            added.append(new)
        elif new is None:
            removed.append(old)
        elif old is new and same_context:
            continue  # one object, one config, one set of build images: nothing differs
        else:
            assert pair.base is not None and pair.head is not None
            # A job skipped on both sides runs on neither: its fields are no change
            # to what the target runs (they show when the entry is lifted).
            if not (_skipped(old) and _skipped(new)):
                old_image, new_image = base.image(old, pair.base), head.image(new, pair.head)
                fields = job_changes(old, new, old_image, new_image)
                if fields:
                    changed.append(ChangedJob(old, new, fields))
            if old.quarantine != new.quarantine:
                kind = (
                    QUARANTINED
                    if old.quarantine is None
                    else LIFTED
                    if new.quarantine is None
                    else REQUARANTINED
                )
                quarantine.append(QuarantineChange(kind, old, new))
    return TargetDiff(
        target=pair.shown,
        added=tuple(sorted(added, key=Job.sort_key)),
        removed=tuple(sorted(removed, key=Job.sort_key)),
        changed=tuple(sorted(changed, key=lambda c: c.head.sort_key())),
        quarantine=tuple(sorted(quarantine, key=lambda q: q.head.sort_key())),
        settings=settings,
        exists=exists,
        **sizes,
    )


def _skipped(job: Job) -> bool:
    return job.quarantine is not None and job.quarantine.action == SKIP


def _running(jobs: Sequence[Job]) -> int:
    return sum(1 for j in jobs if not _skipped(j))


def _same_context(base: SideIndex, head: SideIndex) -> bool:
    """Both sides resolve images alike: one config object, the same build images."""
    return (
        base.generation.tree.config is head.generation.tree.config
        and base.build_images == head.build_images
    )


def _same_objects(old_jobs: Sequence[Job], new_jobs: Sequence[Job]) -> bool:
    return len(old_jobs) == len(new_jobs) and all(
        a is b for a, b in zip(old_jobs, new_jobs, strict=True)
    )


def pair_jobs(
    old_jobs: Sequence[Job], new_jobs: Sequence[Job]
) -> list[tuple[Job | None, Job | None]]:
    """Match the jobs of two sides of one target: (old, new), None where absent."""
    # The very same job object on both sides (a file whose expansion was reused)
    # pairs with itself; only the rest is matched by identity.
    old_ids = {id(job) for job in old_jobs}
    new_ids = {id(job) for job in new_jobs}
    pairs: list[tuple[Job | None, Job | None]] = [
        (job, job) for job in old_jobs if id(job) in new_ids
    ]
    old_groups: dict[tuple, list[Job]] = defaultdict(list)
    new_groups: dict[tuple, list[Job]] = defaultdict(list)
    for job in old_jobs:
        if id(job) not in new_ids:
            old_groups[_pair_key(job)].append(job)
    for job in new_jobs:
        if id(job) not in old_ids:
            new_groups[_pair_key(job)].append(job)
    for key in sorted(old_groups.keys() | new_groups.keys()):
        olds = old_groups.get(key, [])
        news = new_groups.get(key, [])
        if len(olds) == 1 and len(news) == 1:
            pairs.append((olds[0], news[0]))
            continue
        olds = sorted(olds, key=Job.sort_key)
        news = sorted(news, key=Job.sort_key)
        # The same identity more than once: equal cadences pair first, then in order.
        rest_old: list[Job] = []
        for job in olds:
            twin = next((n for n in news if n.cadence == job.cadence), None)
            if twin is None:
                rest_old.append(job)
            else:
                news.remove(twin)
                pairs.append((job, twin))
        for i in range(max(len(rest_old), len(news))):
            pairs.append(
                (rest_old[i] if i < len(rest_old) else None, news[i] if i < len(news) else None)
            )
    return pairs


def _pair_key(job: Job) -> tuple[str, ...]:
    """Identity and scope as a plain tuple (cheaper than building JobIds)."""
    return (job.model, job.test_case, job.environment, job.platform, job.tag or "", job.scope or "")


def job_changes(old: Job, new: Job, old_image: Any = None, new_image: Any = None) -> dict:
    """{field: (old, new)} for every field that differs, sorted by field name."""
    out: dict[str, tuple[Any, Any]] = {}
    if old_image != new_image:
        out["image"] = (old_image, new_image)
    if old is not new:
        for name in JOB_FIELDS:
            a, b = getattr(old, name), getattr(new, name)
            if a != b:
                out[name] = (plain(a, name), plain(b, name))
        if old.spec is not new.spec:
            for key in sorted((old.spec.keys() | new.spec.keys()) - COVERED_SPEC_KEYS):
                a, b = plain(old.spec.get(key)), plain(new.spec.get(key))
                if a != b:
                    out[key] = (a, b)
    return dict(sorted(out.items()))


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


@dataclass(frozen=True, slots=True)
class Side:
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
