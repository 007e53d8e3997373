"""Selection diff: per target, the difference between what each revision of a
tree emits for it (docs/reviewing.md says each category).

Both sides are emitted as `generate` emits them and compared job by job, a job
being its identity (JobId) within the target, so the diff and the emitted files
cannot disagree. The file a job is defined in is not emitted: moving a case to
another file changes nothing. A change to a target's own definition is listed
once per target. A target a side cannot emit (two jobs left with one GitLab
name, an unmet need) is compared job by job as each would be emitted alone,
with a note.

Speed: both sides load through one `PipelineCache` keyed by git blob id, so the
head parses and expands only the files that differ from the base; a target whose
selection is the very same job objects under the same config on both sides is
unchanged without being emitted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from matrixgen.diff.gitsource import TreeSource
from matrixgen.diff.habits import find_habits, habit_note
from matrixgen.diff.model import (
    ACTION_CHANGED,
    ARRIVES_QUARANTINED,
    DUPLICATE_ADDED,
    DUPLICATE_REMOVED,
    ENTRY_CHANGED,
    LEAVES_QUARANTINED,
    LIFTED,
    QUARANTINED,
    ChangedJob,
    DuplicateNote,
    QuarantineChange,
    SelectionDiff,
    TargetDiff,
    TargetPair,
    target_order,
)
from matrixgen.diff.moves import find_moves
from matrixgen.diff.targets import resolve_diff_targets
from matrixgen.documents.config import ProjectConfig
from matrixgen.emit.common import (
    EmitSettings,
    EmittedJob,
    EmittedTarget,
    ad_hoc_target_problems,
    emitted_jobs,
    skipped_jobs,
)
from matrixgen.emit.generate import emitted_target
from matrixgen.engine.select import used_values
from matrixgen.engine.targets import is_holding_pen
from matrixgen.engine.workload import rereads_recipe, workload_changes
from matrixgen.model.errors import (
    ConfigError,
    MatrixgenError,
    UsageError,
    did_you_mean,
)
from matrixgen.model.jobs import Job, JobId, QuarantineMark, Target
from matrixgen.pipeline import Generation, PipelineCache
from matrixgen.quarantine.apply import Selection
from matrixgen.util.values import json_value
from matrixgen.views.cost import Cost, jobs_cost


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
        try:
            return emitted_target(target, chosen, self.generation.tree.config)[0]
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

    from matrixgen.emit.registry import emitter_for

    settings = EmitSettings(target=target)
    content = emitter_for(target.system).standalone
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


def diff_generations(
    base: Generation,
    head: Generation,
    *,
    values: Sequence[str] = (),
    holding_pen: bool = False,
    base_ref: str = "base",
    head_ref: str = "head",
    notes: Sequence[str] = (),
    sources: tuple[TreeSource, TreeSource] | None = None,
    cache: PipelineCache | None = None,
    pairs: Sequence[TargetPair] | None = None,
) -> SelectionDiff:
    """Compare two loaded trees target by target. With the trees' `sources`
    (base, head), a row commented out (or back in) is told from a deletion;
    `pairs`: the targets, when the caller resolved them for these arguments."""
    if pairs is None:
        pairs = resolve_diff_targets(base, head, values=values, holding_pen=holding_pen)
    empty = _empty_targets(pairs, base, head)
    base_index = SideIndex(f"base {base_ref[:12]}", base)
    head_index = SideIndex(f"head {head_ref[:12]}", head)
    diffs = [diff_target(pair, base_index, head_index) for pair in pairs]
    # Configured targets in config order (head's, then the base's), as every
    # command lists them; others (given as key=value, or implied) after, by selector.
    configured = (*head.tree.config.targets, *base.tree.config.targets)
    written = {n: i for i, n in enumerate(dict.fromkeys(t.name for t in configured))}
    diffs.sort(key=lambda d: (written.get(d.target.name, len(written)), target_order(d.target)))
    if any(d.added or d.removed for d in diffs):
        diffs = find_moves(find_habits(diffs, base, head, sources, cache))
    habits = habit_note(base, head) if not (values or holding_pen) else None
    extra = [*empty, *base_index.notes, *head_index.notes, *([habits] if habits else [])]
    cases = tuple(sorted({j.test_case for j in (*base.jobs, *head.jobs)}))
    return SelectionDiff(
        base=base_ref,
        head=head_ref,
        targets=tuple(diffs),
        notes=(*notes, *extra),
        test_cases=cases,
    )


def _empty_targets(pairs: Sequence[TargetPair], base: Generation, head: Generation) -> list[str]:
    """Targets given as key=value pairs are checked as every command checks them;
    one that, in trees without vocabulary, asks for a value no job of either side
    uses is compared as empty, in one note, not refused (docs/reviewing.md: one
    target list for every revision)."""
    sides = [(base.tree.config, base.jobs), (head.tree.config, head.jobs)]
    names: list[str] = []
    values: dict[tuple[str, str], list[str]] = {}
    for pair in pairs:
        if not pair.ad_hoc:
            continue
        problems = ad_hoc_target_problems(pair.shown, sides)
        if problems.undeclared:
            raise UsageError(f"target {pair.shown.name}: " + "; ".join(problems.undeclared))
        if problems.unused_values:
            names.append(pair.shown.name)
            for key, value in problems.unused_values:
                used = used_values(key, [*base.jobs, *head.jobs])
                values.setdefault((key, value), []).append(did_you_mean(value, used))
    if not names:
        return []
    said = "; ".join(f'{key} "{value}"{hints[0]}' for (key, value), hints in values.items())
    return [
        f"no job of either side has {said}: {len(names)} target(s) compared as empty, "
        f"selecting nothing ({', '.join(names)})"
    ]


def _same_objects(a: Sequence[Job], b: Sequence[Job]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def diff_target(pair: TargetPair, base: SideIndex, head: SideIndex) -> TargetDiff:
    """The diff of one target: its emitted jobs on each side, compared."""
    old_sel, new_sel = base.selection(pair.base), head.selection(pair.head)
    settings = target_changes(pair.base, pair.head)
    exists = "both" if pair.base and pair.head else "base" if pair.base else "head"
    configs = (base.generation.tree.config, head.generation.tree.config)
    # A holding pen is no system's target: nothing runs it, it costs nothing.
    priced = not is_holding_pen(pair.shown.selector.scope)
    if (
        pair.base is not None
        and pair.head is not None
        and configs[0] is configs[1]
        and (pair.base is pair.head or not settings)
        and _same_objects(old_sel.jobs, new_sel.jobs)
        and _same_objects(old_sel.skipped, new_sel.skipped)
    ):
        # The very same jobs under the very same config: the same file.
        jobs = emitted_jobs(new_sel.jobs)
        cost = jobs_cost(jobs, pair.head, configs[1]) if priced else Cost()
        n = len(jobs)
        return TargetDiff(
            pair.shown, settings=settings, base_jobs=n, head_jobs=n, base_cost=cost, head_cost=cost
        )
    return compare_emitted(
        pair.shown,
        base.emit(pair.base, old_sel),
        head.emit(pair.head, new_sel),
        settings=settings,
        exists=exists,
        configs=configs if priced else None,
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
    `configs` (base, head) price each side's running jobs (no cost without them);
    `workloads`: the launcher reloads the recipe, so every field of the resolved
    workload counts too (docs/reviewing.md)."""
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
    old, new = _definition(base), _definition(head)
    keys = sorted(old.keys() | new.keys())
    return {k: (old.get(k), new.get(k)) for k in keys if old.get(k) != new.get(k)}


def _definition(target: Target) -> dict[str, Any]:
    """What defines a target, by the config's names: its selector, its own
    fields, its settings (those set), and what a decision sets."""
    selector = target.selector
    return {
        **json_value(target.place),
        "model": selector.model,
        "tag": selector.tag,
        "description": target.description,
        "rereads_recipe": target.rereads_recipe,
        **json_value(target.settings),
        "n_repeat": target.n_repeat,
        "lightweight": target.lightweight or None,
    }


def plain(value: Any) -> Any:
    """A JSON-ready copy of a value (tuples as lists, dates as text)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return json.loads(json.dumps(value, default=str))
