"""What a job runs when its launcher loads the recipe again at run time
(docs/diff-upstream.md, docs/reviewing.md).

Megatron-LM's launcher reloads the recipe tree and submits the job's whole
resolved `spec`, so a recipe edit can change what a job runs while its pipeline
stays byte-identical. `rereads_recipe` says whether a target's launcher does
that; `workload` is what it submits for a job, field by field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matrixgen.engine.load import RecipeTree
from matrixgen.model.jobs import Job, Target

#: Spec fields the launcher takes from its own arguments, not from the recipe
#: (so what the pipeline passes wins: they are compared as emitted fields).
LAUNCH_ARGUMENTS = frozenset({"n_repeat", "time_limit"})
#: How a diff names a workload field beside the emitted ones (`workload.script`).
WORKLOAD_PREFIX = "workload."


def rereads_recipe(tree: RecipeTree, target: Target | None = None) -> bool:
    """Whether the launcher of the target's jobs loads the recipe again at run
    time: a target setting decides where one is set, else the tree's format."""
    if target is not None and target.rereads_recipe is not None:
        return target.rereads_recipe
    return tree.format_version == 1


def workload(job: Job) -> Mapping[str, Any]:
    """The fields of the resolved workload the launcher submits for the job."""
    return {k: v for k, v in job.spec.items() if k not in LAUNCH_ARGUMENTS}


def workload_changes(old: Job, new: Job) -> dict[str, tuple[Any, Any]]:
    """{`workload.FIELD`: (old, new)} for each workload field that differs, in
    the new spec's order, then the fields only the old one has."""
    a, b = workload(old), workload(new)
    if a == b:
        return {}
    keys = [*b, *(k for k in a if k not in b)]
    return {WORKLOAD_PREFIX + k: (a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)}
