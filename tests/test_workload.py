"""engine.workload: which launchers reload the recipe at run time, and what
they submit; the diff compares that for those targets only."""

from __future__ import annotations

import copy

from msgspec.structs import replace

from matrixgen.engine.workload import rereads_recipe, workload, workload_changes
from matrixgen.model.jobs import Selector, Target
from matrixgen.model.vocab import System
from tests.diff_fixtures import GPT, V1_GPT, by_name, diff, gen, v2_tree

TARGET = Target(name="t", system=System.GITLAB, selector=Selector(scope="mr", platform="dgx_h100"))


def _with(setting: bool) -> Target:
    return replace(TARGET, rereads_recipe=setting)


def test_a_v1_tree_rereads_a_v2_tree_does_not_unless_a_target_says_so() -> None:
    v1, v2 = gen({"gpt.yaml": V1_GPT}).tree, gen(v2_tree()).tree
    assert rereads_recipe(v1) and rereads_recipe(v1, TARGET)
    assert not rereads_recipe(v2) and not rereads_recipe(v2, TARGET)
    # A drop-in profile of that launcher sets it on its targets; the setting wins.
    assert rereads_recipe(v2, _with(True))
    assert not rereads_recipe(v1, _with(False))


def test_the_workload_leaves_out_what_the_launcher_takes_from_its_arguments() -> None:
    job = next(j for j in gen(v2_tree()).jobs if j.test_case == "gpt_a")
    fields = workload(job)
    assert "script" in fields and "n_repeat" not in fields and "time_limit" not in fields
    other = replace(job, spec={**job.spec, "script": "x", "n_repeat": 9})
    assert workload_changes(job, other) == {"workload.script": (job.spec["script"], "x")}
    assert workload_changes(job, job) == {}


def test_a_script_edit_is_a_change_of_a_v1_tree_only() -> None:
    """The emitted pipeline of both trees is the same after a script edit; the
    v1 tree's launcher reloads the recipe and runs the new script."""
    head = copy.deepcopy(V1_GPT)
    head["spec"]["script"] = "bash run.sh {test_case}"
    targets = by_name(diff({"gpt.yaml": V1_GPT}, {"gpt.yaml": head}))
    changed = {n: [c.fields for c in t.changed] for n, t in targets.items() if t.changed}
    assert changed and all(
        fields == [{"workload.script": (None, "bash run.sh {test_case}")}] * len(fields)
        for fields in changed.values()
    )
    gpt = copy.deepcopy(GPT)
    gpt["spec"]["script"] = "bash other.sh"
    assert diff(v2_tree(), v2_tree(gpt)).unchanged


def test_a_configured_target_that_says_so_compares_the_workload() -> None:
    base = v2_tree()
    base["matrixgen.yaml"]["targets"]["gitlab-mr-h100"]["rereads_recipe"] = True
    head = copy.deepcopy(base)
    head["h100/gpt.yaml"]["spec"]["script"] = "bash other.sh"
    targets = by_name(diff(base, head))
    assert {n for n, t in targets.items() if t.changed} == {"gitlab-mr-h100"}
    assert {tuple(c.fields) for c in targets["gitlab-mr-h100"].changed} == {("workload.script",)}
