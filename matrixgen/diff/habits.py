"""Upstream's quarantine habits in a diff: a job that leaves a target while its
row now sits in one of that scope's habit scopes (`mr` -> `mr-broken`), or is
commented out with a tracker, is quarantined; the reverse is lifted (migrate's
notion of a habit)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from matrixgen.diff.gitsource import TreeSource, blob_id
from matrixgen.diff.model import LIFTED, QUARANTINED, Habit, QuarantineChange, TargetDiff
from matrixgen.model.errors import MatrixgenError
from matrixgen.model.jobs import Job, JobId
from matrixgen.pipeline import Generation, PipelineCache, generate_from_files
from matrixgen.quarantine.habits import commented_out, is_habit_scope, parks, row_comment, uncomment


def habit_note(base: Generation, head: Generation) -> str | None:
    """The quarantine habit scopes, left out of a diff without configured targets,
    that a job joins or leaves on this branch (None: none). A job whose recipe
    changes while it stays parked (a script edited for every row of its file)
    is no change there: no pipeline runs it, before or after."""
    if base.tree.config.targets or head.tree.config.targets:
        return None
    parked = [{(i, j.scope) for i, jobs in _parked(g).items() for j in jobs} for g in (base, head)]
    moved = parked[0] ^ parked[1]
    if not moved:
        return None
    habits = sorted({scope for _, scope in moved})
    return (
        f"scope(s) {', '.join(habits)}: jobs join or leave these quarantine habits on "
        "this branch, which no pipeline runs and which are not compared as targets (a job "
        "parked there or lifted from there is a quarantine change of the target it "
        "leaves or joins; --holding-pen compares them)"
    )


def find_habits(
    diffs: Sequence[TargetDiff],
    base: Generation,
    head: Generation,
    sources: tuple[TreeSource, TreeSource] | None,
    cache: PipelineCache | None,
) -> list[TargetDiff]:
    """The diffs with the removed jobs upstream's habits took out, and the added
    ones they brought back, as quarantine changes (see the module)."""
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
        text = texts.get(habit_job.recipe)
        comment, tracker = row_comment(text, habit_job.source.line) if text else ("", None)
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
