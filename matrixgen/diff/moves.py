"""Moves in a diff: a job removed from one target and added to another with the
same content but for the renamed scope, platform or environment."""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import attrgetter

from matrixgen.diff.model import Moved, TargetDiff, target_order
from matrixgen.model.jobs import Job, Target


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
    return [
        _replace(
            d,
            removed=tuple(j for j in d.removed if id(j) not in taken),
            added=tuple(j for j in d.added if id(j) not in taken),
            moved_out=tuple(sorted(moved_out.get(index, ()), key=lambda m: m.job.sort_key())),
            moved_in=tuple(sorted(moved_in.get(index, ()), key=lambda m: m.job.sort_key())),
        )
        for index, d in enumerate(diffs)
    ]


# The fields a rename of a target's scope, platform or environment changes, and
# the job's own fields a move keeps.
_RENAMED = frozenset({"scope", "platforms", "environment"})
_KEPT = attrgetter("model", "test_case", "n_repeat", "time_limit", "nodes", "gpus")
_KEPT_TOO = attrgetter("allow_failure", "env", "args", "quarantine")


def _move_key(job: Job) -> tuple:
    """A job's content but for its scope, platform and environment (and what
    is rendered from them: its name, its build): what a move keeps."""
    spec = json.dumps(
        {k: v for k, v in job.spec.items() if k not in _RENAMED}, sort_keys=True, default=str
    )
    return (*_KEPT(job), *_KEPT_TOO(job), job.tag or "", spec)


def _distance(a: Target, b: Target) -> int:
    one, two = target_order(a)[:5], target_order(b)[:5]
    return sum(x != y for x, y in zip(one, two, strict=True))
