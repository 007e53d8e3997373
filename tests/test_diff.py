"""Selection diff between two revisions of a tree: per target, added, removed and
changed jobs and quarantine changes, on trees written here (format_version 2 with
a config, format_version 1 without) and in temporary git repositories."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matrixgen.diff.compare import SideIndex, diff_generations
from matrixgen.diff.describe import existence_line
from matrixgen.diff.gitsource import Repository
from matrixgen.diff.model import (
    ACTION_CHANGED,
    ARRIVES_QUARANTINED,
    DUPLICATE_ADDED,
    DUPLICATE_REMOVED,
    LEAVES_QUARANTINED,
    LIFTED,
    QUARANTINED,
)
from matrixgen.diff.revisions import diff_revisions
from matrixgen.engine import expand, load
from matrixgen.model.errors import ConfigError, ExitCode, GitError, UsageError
from matrixgen.util.values import json_value
from tests.diff_fixtures import (
    CONFIG,
    GPT,
    V1_GPT,
    block,
    by_name,
    diff,
    dumped,
    entry,
    gen,
    quarantine_file,
    v2_tree,
)
from tests.diff_fixtures import in_repo as in_repo
from tests.diff_fixtures import repo as repo
from tests.gitrepo import GitRepo


def cases(jobs) -> list[str]:  # type: ignore[no-untyped-def]
    return [j.test_case for j in jobs]


# ---------------------------------------------------------------- targets and jobs


def test_identical_trees_list_every_target_with_empty_lists() -> None:
    result = diff(v2_tree(), v2_tree())
    assert result.unchanged
    assert sorted(by_name(result)) == sorted(CONFIG["targets"])
    for t in result.targets:
        assert t.added == t.removed == t.changed == t.quarantine == ()


def test_added_and_removed_jobs_land_in_the_right_targets() -> None:
    head = copy.deepcopy(GPT)
    head["products"].append(block("gpt_new", scope=["L1"]))
    head["products"] = [b for b in head["products"] if b["test_case"] != ["gpt_c"]]
    targets = by_name(diff(v2_tree(), v2_tree(head)))
    assert cases(targets["github-l1-h100"].added) == ["gpt_new"]
    assert targets["github-l1-h100"].removed == ()
    assert cases(targets["gitlab-mr-h100"].removed) == ["gpt_c"]
    assert targets["gitlab-mr-h100"].added == ()
    assert targets["github-l1-gb200"].unchanged  # gpt_new runs on H100 only
    assert targets["gitlab-nightly-h100"].unchanged


def test_changed_fields_are_listed_old_and_new() -> None:
    head = copy.deepcopy(GPT)
    head["products"][0]["products"][0].update(
        {"time_limit": [5400], "n_repeat": [1], "nodes": [2], "env": {"EXTRA": "1"}}
    )
    head["products"][0]["products"][0]["args"] = ["--seed", "7"]
    head["spec"]["script"] = "bash run.sh {test_case} --fast\necho done"
    targets = by_name(diff(v2_tree(), v2_tree(head)))
    # The emitted fields: a GitHub matrix row's keys...
    (row,) = targets["github-l1-h100"].changed
    assert row.fields == {
        "n_repeat": (5, 1),
        "timeout": (225, 90),  # minutes: 5 x 45 before, 1 x 90 after
        "nodes": (1, 2),
        "env": ({"NVTE_FLASH_ATTN_V4": "0"}, {"NVTE_FLASH_ATTN_V4": "0", "EXTRA": "1"}),
        "args": (
            ["--flash-attention-version", "2"],
            ["--flash-attention-version", "2", "--seed", "7"],
        ),
    }
    assert list(row.fields) == ["n_repeat", "timeout", "nodes", "env", "args"]  # row order
    # ... and a GitLab job's.
    (job,) = targets["gitlab-mr-h100"].changed
    assert job.head.test_case == "gpt_a"
    assert set(job.fields) == {"timeout", "variables", "script"}
    assert job.fields["timeout"] == ("3h 45m", "1h 30m")
    old_script, new_script = job.fields["script"]
    assert "--n-repeat 5 --time-limit 2700 --nodes 1" in old_script[0]
    assert "--n-repeat 1 --time-limit 5400 --nodes 2" in new_script[0]
    assert new_script[0].endswith("-- --flash-attention-version 2 --seed 7")
    # spec.script reaches no emitted file: no job changes for it (validate warns).


def test_cadence_change_is_a_change_not_a_new_job() -> None:
    head = copy.deepcopy(GPT)
    head["products"][0]["cadence"] = ["nightly"]
    result = diff(v2_tree(), v2_tree(head))
    # Cadence selects; it is not emitted. No target here asks for pr or
    # mergegroup, so every one of them still runs gpt_a as before.
    assert result.unchanged
    pr_target = "system=github,scope=L1,platform=dgx_h100,environment=dev,cadence=pr"
    (pr,) = diff(v2_tree(), v2_tree(head), values=[pr_target]).targets
    assert cases(pr.removed) == ["gpt_a"] and pr.changed == ()


def test_image_pin_changes_every_job_of_the_targets_it_covers() -> None:
    head = v2_tree()
    head["matrixgen.yaml"]["images"]["gitlab"]["amd64"]["tag"] = "26.10-amd64"
    targets = by_name(diff(v2_tree(), head))
    mr = targets["gitlab-mr-h100"]
    assert sorted(cases(c.head for c in mr.changed)) == ["gpt_a", "gpt_b", "gpt_c"]
    assert {json.dumps(c.fields) for c in mr.changed} == {
        json.dumps({"image": ["reg/ci:26.09-amd64", "reg/ci:26.10-amd64"]})
    }
    # GitHub's pin and GitLab's arm64 pin did not move.
    assert targets["github-l1-h100"].unchanged and targets["github-l1-gb200"].unchanged


def test_build_recipe_image_in_a_tree_without_pins() -> None:
    def tree(image: str) -> dict[str, Any]:
        build = {
            "type": "build",
            "format_version": 1,
            "spec": {"name": "mcore-pyt-dev", "source": {"image": image}},
        }
        gpt = {
            "type": "basic",
            "format_version": 1,
            "spec": {"name": "{test_case}", "model": "gpt", "build": "mcore-pyt-{environment}"},
            "products": [block("a", scope=["mr"], platforms=["dgx_h100"])],
        }
        return {"_build-dev.yaml": build, "gpt.yaml": gpt}

    # Without pins the image a job runs in is its build's, which the launcher
    # resolves (`--build`): no emitted file names it, so the diff is empty.
    (target,) = diff(tree("reg/dev:1"), tree("reg/dev:2")).targets
    assert target.unchanged


def test_moving_a_case_to_another_file_changes_nothing() -> None:
    rest = copy.deepcopy(GPT)
    moved = copy.deepcopy(GPT)
    rest["products"] = [b for b in rest["products"] if b["test_case"] != ["gpt_c"]]
    moved["products"] = [b for b in moved["products"] if b["test_case"] == ["gpt_c"]]
    head = v2_tree(rest, **{"h100/gpt-moved.yaml": moved})
    result = diff(v2_tree(), head)
    assert result.unchanged


def test_the_same_identity_twice_in_a_target_is_one_job_the_last_row() -> None:
    def tree(nightly_repeat: int) -> dict[str, Any]:
        gpt = copy.deepcopy(GPT)
        gpt["products"] = [
            {
                "test_case": ["gpt_a"],
                "products": [
                    {"environment": ["dev"], "scope": ["mr"], "cadence": ["pr"]},
                    {
                        "environment": ["dev"],
                        "scope": ["mr"],
                        "cadence": ["nightly"],
                        "n_repeat": [nightly_repeat],
                    },
                ],
            }
        ]
        return v2_tree(gpt)

    # GitLab mr takes both rows (it asks for no cadence): one job, the last row's.
    mr = by_name(diff(tree(5), tree(2)))["gitlab-mr-h100"]
    assert mr.added == mr.removed == () and (mr.base_jobs, mr.head_jobs) == (1, 1)
    (change,) = mr.changed
    assert change.head.cadence == ("nightly",)
    assert list(change.fields) == ["timeout", "script"]  # n_repeat x time_limit, --n-repeat
    assert "--n-repeat 2" in change.fields["script"][1][0]


def test_a_duplicate_row_added_or_removed_is_a_note_at_its_row() -> None:
    twice = copy.deepcopy(GPT)
    twice["products"].append(block("gpt_c", scope=["mr"]))  # gpt_c again, same job
    added = by_name(diff(v2_tree(), v2_tree(twice)))["gitlab-mr-h100"]
    removed = by_name(diff(v2_tree(twice), v2_tree()))["gitlab-mr-h100"]
    assert added.unchanged and removed.unchanged  # the same job runs, emitted the same
    for result, change in ((added, DUPLICATE_ADDED), (removed, DUPLICATE_REMOVED)):
        (note,) = result.duplicates
        assert (note.change, note.job.test_case) == (change, "gpt_c")
        assert [(w.file, w.line) for w in note.locations] == [("recipes/h100/gpt.yaml", 49)]
    assert by_name(diff(v2_tree(twice), v2_tree(twice)))["gitlab-mr-h100"].duplicates == ()


# ---------------------------------------------------------------- quarantine


def test_a_new_skip_is_a_quarantine_change_not_a_removal() -> None:
    head = v2_tree(**{"quarantine.yaml": quarantine_file(entry())})
    targets = by_name(diff(v2_tree(), head))
    l1 = targets["github-l1-h100"]
    assert l1.removed == () and l1.changed == ()
    (change,) = l1.quarantine
    assert change.change == QUARANTINED and change.job.test_case == "gpt_a"
    assert change.old is None
    assert change.mark.tracker == "https://github.com/example/mcore/issues/7201"
    assert change.mark.action == "skip"
    # The entry applies to github/L1 only.
    assert targets["gitlab-mr-h100"].unchanged


def test_lifting_and_changing_an_entry() -> None:
    quarantined = v2_tree(**{"quarantine.yaml": quarantine_file(entry())})
    lifted = by_name(diff(quarantined, v2_tree()))["github-l1-h100"]
    assert [(q.change, q.mark.id) for q in lifted.quarantine] == [(LIFTED, "gpt-a-hang")]
    assert lifted.added == ()
    relaxed = v2_tree(**{"quarantine.yaml": quarantine_file(entry("allow-failure"))})
    changed = by_name(diff(quarantined, relaxed))["github-l1-h100"]
    (q,) = changed.quarantine
    assert q.change == ACTION_CHANGED
    assert (q.old.action, q.new.action) == ("skip", "allow-failure")


def test_the_diff_selects_what_the_pipeline_selects() -> None:
    """The diff's indexed selection must agree with `Generation.selection`, which
    the emitters use, quarantine marks and skipped jobs included."""
    generation = gen(v2_tree(**{"quarantine.yaml": quarantine_file(entry("skip"))}))
    index = SideIndex("head", generation)
    for target in generation.tree.config.targets:
        ours = index.selection(target).with_quarantined
        theirs = generation.selection(target).with_quarantined
        assert ours == theirs
        assert [j.quarantine for j in ours] == [j.quarantine for j in theirs]
    assert any(
        j.quarantine
        for t in generation.tree.config.targets
        for j in index.selection(t).with_quarantined
    )


def test_jobs_skipped_on_both_sides_do_not_change() -> None:
    quarantined = v2_tree(**{"quarantine.yaml": quarantine_file(entry())})
    head = copy.deepcopy(quarantined)
    head["h100/gpt.yaml"]["products"][0]["products"][0]["time_limit"] = [5400]
    targets = by_name(diff(quarantined, head))
    l1 = targets["github-l1-h100"]  # gpt_a is skipped there: it runs on neither side
    assert l1.unchanged and (l1.base_jobs, l1.head_jobs) == (1, 1)
    mr = targets["gitlab-mr-h100"]  # not quarantined there: the change shows
    assert [(c.head.test_case, list(c.fields)) for c in mr.changed] == [
        ("gpt_a", ["timeout", "script"])
    ]
    assert (mr.base_jobs, mr.head_jobs) == (3, 3)


def test_jobs_that_arrive_skipped_are_a_quarantine_change_not_an_addition() -> None:
    head_gpt = copy.deepcopy(GPT)
    head_gpt["products"].append(block("gpt_new", scope=["L1"]))
    base = v2_tree(**{"quarantine.yaml": quarantine_file(entry(match={"test_case": "gpt_*"}))})
    head = v2_tree(head_gpt, **{"quarantine.yaml": base["quarantine.yaml"]})
    l1 = by_name(diff(base, head))["github-l1-h100"]
    assert l1.added == () and (l1.base_jobs, l1.head_jobs) == (0, 0)  # gpt_* skipped
    (arrival,) = l1.quarantine
    assert (arrival.change, arrival.job.test_case) == (ARRIVES_QUARANTINED, "gpt_new")
    assert arrival.base is None and arrival.mark.id == "gpt-a-hang"
    # Removing it again while it is skipped: it leaves quarantined, no removal.
    back = by_name(diff(head, base))["github-l1-h100"]
    assert back.removed == ()
    assert [q.change for q in back.quarantine] == [LEAVES_QUARANTINED]
    # An allow-failure entry lets it run: then it is added, and carries its mark.
    relaxed = copy.deepcopy(base["quarantine.yaml"])
    relaxed["entries"][0]["action"] = "allow-failure"
    added = by_name(
        diff(
            v2_tree(**{"quarantine.yaml": relaxed}),
            v2_tree(head_gpt, **{"quarantine.yaml": relaxed}),
        )
    )["github-l1-h100"]
    assert cases(added.added) == ["gpt_new"] and added.added[0].quarantine is not None


# ---------------------------------------------------------------- which targets


def test_without_config_targets_are_every_combination_used_on_either_side() -> None:
    head = copy.deepcopy(V1_GPT)
    head["products"].append(block("c", scope=["mr-slim"]))
    head["products"][0]["products"][0]["scope"] = ["mr"]  # a leaves nightly
    result = diff({"gpt.yaml": V1_GPT}, {"gpt.yaml": head})
    targets = by_name(result)
    assert sorted(targets) == [
        "github-L1-dgx_h100-dev",
        "gitlab-L2-dgx_h100-dev",
        "gitlab-mr-dgx_h100-dev",
        "gitlab-mr-slim-dgx_h100-dev",
    ]
    assert cases(targets["gitlab-mr-slim-dgx_h100-dev"].added) == ["c"]
    assert cases(targets["gitlab-L2-dgx_h100-dev"].removed) == ["a"]  # now empty on head


def test_quarantine_habit_scopes_are_left_out_and_noted_only_where_the_branch_changes_them() -> (
    None
):
    habits = copy.deepcopy(V1_GPT)
    habits["products"].append(block("c", scope=["mr-broken", "nightly-temp-disabled"]))
    result = diff({"gpt.yaml": habits}, {"gpt.yaml": habits})
    assert not [t for t in by_name(result) if "broken" in t or "disabled" in t]
    # Habit scopes on both sides, none of their jobs changed: nothing to say.
    assert result.notes == ()
    # A job joins one habit scope: the note names that scope only.
    head = copy.deepcopy(habits)
    head["products"][-1]["products"].append(
        {
            "environment": ["dev"],
            "scope": ["mr-broken"],
            "n_repeat": [3],
            "platforms": ["dgx_gb200"],
        }
    )
    result = diff({"gpt.yaml": habits}, {"gpt.yaml": head})
    assert result.notes == (
        "scope(s) mr-broken: jobs join or leave these quarantine habits on this branch, "
        "which no pipeline runs and which are not compared as targets (a job parked there "
        "or lifted from there is a quarantine change of the target it leaves or joins; "
        "--holding-pen compares them)",
    )
    # The recipe of a parked job changes (every row of its file), none joins or
    # leaves: no pipeline runs it, before or after; nothing to say.
    edited = copy.deepcopy(habits)
    edited["spec"]["script"] = "echo changed {test_case}"
    result = diff({"gpt.yaml": habits}, {"gpt.yaml": edited})
    assert not [n for n in result.notes if "quarantine habits" in n]
    assert result.targets and any(t.changed for t in result.targets)  # running jobs changed
    # No habit scope on either side: no note.
    assert diff({"gpt.yaml": V1_GPT}, {"gpt.yaml": V1_GPT}).notes == ()


def test_ad_hoc_targets_echo_the_selector_as_given() -> None:
    head = copy.deepcopy(V1_GPT)
    head["products"][0]["products"][0]["n_repeat"] = [1]
    result = diff(
        {"gpt.yaml": V1_GPT},
        {"gpt.yaml": head},
        values=["scope=nightly,platform=dgx_h100,environment=dev,cadence=nightly"],
    )
    (t,) = result.targets
    assert json_value(t.target.place) == {
        "system": "gitlab",
        "scope": "nightly",
        "platform": "dgx_h100",
        "environment": "dev",
        "cadence": "nightly",
    }
    (change,) = t.changed
    assert list(change.fields) == ["timeout", "script"]  # derived timeout, --n-repeat
    assert "--n-repeat 1" in change.fields["script"][1][0]


def test_ad_hoc_targets_are_checked_against_both_sides() -> None:
    with pytest.raises(UsageError, match=r'unknown platform "dgx_h10" \(did you mean "dgx_h100"'):
        diff(v2_tree(), v2_tree(), values=["scope=mr,platform=dgx_h10,environment=dev"])
    # A value used on one side only is a fine target (its jobs are added or removed).
    head = copy.deepcopy(V1_GPT)
    head["products"].append(block("c", scope=["mr-slim"]))
    spec = "scope=mr-slim,platform=dgx_h100,environment=dev"
    result = diff({"gpt.yaml": V1_GPT}, {"gpt.yaml": head}, values=[spec])
    assert result.notes == () and cases(result.targets[0].added) == ["c"]
    # Without a vocabulary, a value no job uses on either side is an empty target:
    # one note for every such target (with "did you mean"), compared as selecting
    # nothing. A CI keeps one list of targets for revisions older than some of them.
    typo = "scope=mr-slm,platform=dgx_h100,environment=dev"
    later = "scope=L0-smoke,platform=dgx_h100,environment=dev"
    result = diff({"gpt.yaml": V1_GPT}, {"gpt.yaml": head}, values=[typo, later, spec])
    assert len(result.notes) == 1
    assert result.notes[0] == (
        'no job of either side has scope "mr-slm" (did you mean "mr-slim"?); scope '
        '"L0-smoke": 2 target(s) compared as empty, selecting nothing '
        "(gitlab-mr-slm-dgx_h100-dev, gitlab-L0-smoke-dgx_h100-dev)"
    )
    by_name = {t.target.name: t for t in result.targets}
    for name in ("gitlab-mr-slm-dgx_h100-dev", "gitlab-L0-smoke-dgx_h100-dev"):
        t = by_name[name]
        assert (t.base_jobs, t.head_jobs, t.unchanged) == (0, 0, True)
    assert cases(by_name["gitlab-mr-slim-dgx_h100-dev"].added) == ["c"]


def test_target_names_and_their_mistakes() -> None:
    result = diff(v2_tree(), v2_tree(), values=["gitlab-mr-h100"])
    assert [t.target.name for t in result.targets] == ["gitlab-mr-h100"]
    with pytest.raises(UsageError, match='did you mean "gitlab-mr-h100"'):
        diff(v2_tree(), v2_tree(), values=["gitlab-mr-h10"])
    with pytest.raises(UsageError, match="given twice"):
        diff(v2_tree(), v2_tree(), values=["gitlab-mr-h100", "gitlab-mr-h100"])


def test_a_target_a_side_cannot_emit_is_compared_job_by_job_with_a_note() -> None:
    head = copy.deepcopy(GPT)
    head["spec"]["name"] = "gpt"  # one GitLab job name for every job of a target
    base_ref, head_ref = "b" * 40, "0123456789abcdef" * 2 + "01234567"
    result = diff(v2_tree(), v2_tree(head), base_ref=base_ref, head_ref=head_ref)
    (note,) = result.notes  # the side's name: "head" and 12 characters of its ref
    assert note.startswith(
        "head 0123456789ab: target gitlab-mr-h100 cannot be emitted (3 job(s) cannot "
        "be written to a GitLab child pipeline: gpt/gpt_a on dgx_h100/dev gets no unique"
    )
    assert note.endswith("); its jobs are compared one by one, each as it would be emitted alone")
    mr = by_name(result)["gitlab-mr-h100"]
    assert mr.added == mr.removed == ()
    assert [(c.head.test_case, c.fields["name"]) for c in mr.changed] == [
        ("gpt_a", ("gpt_a_dev_dgx_h100", "gpt")),
        ("gpt_b", ("gpt_b_dev_dgx_h100", "gpt")),
        ("gpt_c", ("gpt_c_dev_dgx_h100", "gpt")),
    ]
    # The target the head can emit (one job, so one name) gets no note.
    nightly = by_name(result)["gitlab-nightly-h100"]
    assert [c.head.test_case for c in nightly.changed] == ["gpt_a"]


def test_a_target_configured_on_one_side_only() -> None:
    head = v2_tree()
    head["matrixgen.yaml"]["targets"]["github-l0-h100"] = {
        "system": "github",
        "scope": "L0",
        "platform": "dgx_h100",
        "environment": "dev",
    }
    head["h100/gpt.yaml"]["products"].append(block("gpt_l0", scope=["L0"]))
    targets = by_name(diff(v2_tree(), head))
    assert targets["github-l0-h100"].exists == "head"
    assert cases(targets["github-l0-h100"].added) == ["gpt_l0"]
    gone = by_name(diff(head, v2_tree()))["github-l0-h100"]
    assert gone.exists == "base" and cases(gone.removed) == ["gpt_l0"]
    new = "this target is new: it is configured at h only"
    assert existence_line(targets["github-l0-h100"], "b", "h") == new
    assert existence_line(gone, "b", "h") == "this target is gone: it is configured at b only"
    assert existence_line(targets["gitlab-mr-h100"], "b", "h") is None


def test_a_target_definition_change_is_reported_once() -> None:
    head = v2_tree()
    head["matrixgen.yaml"]["targets"]["gitlab-mr-h100"]["timeout"] = 3600
    mr = by_name(diff(v2_tree(), head))["gitlab-mr-h100"]
    assert mr.settings == {"timeout": (None, 3600)}
    # ... and the emitted timeout of every job it changes.
    assert {c.head.test_case: c.fields for c in mr.changed} == {
        case: {"timeout": ("3h 45m", "1h")} for case in ("gpt_a", "gpt_b", "gpt_c")
    }


def test_moving_a_v1_tree_to_a_config_changes_no_job() -> None:
    base = {"gpt.yaml": V1_GPT}
    head_gpt = copy.deepcopy(V1_GPT)
    head = {
        "gpt.yaml": head_gpt,
        "matrixgen.yaml": {
            "format_version": 2,
            "vocabulary": {
                "platforms": ["dgx_h100"],
                "environments": ["dev"],
                "scopes": {"github": ["L1"], "gitlab": ["mr", "nightly"]},
            },
            "targets": {
                "mr": {
                    "system": "gitlab",
                    "scope": "mr",
                    "platform": "dgx_h100",
                    "environment": "dev",
                }
            },
        },
    }
    (t,) = diff(base, head).targets
    assert t.exists == "both" and t.added == t.removed == t.changed == ()


# ---------------------------------------------------------------- properties


CASE_NAMES = st.sampled_from(["a", "b", "c", "d"])
ROW = st.fixed_dictionaries(
    {
        "environment": st.lists(
            st.sampled_from(["dev", "lts"]), min_size=1, max_size=2, unique=True
        ),
        "scope": st.lists(
            st.sampled_from(["mr", "nightly", "mr-github", "L0"]),
            min_size=1,
            max_size=2,
            unique=True,
        ),
        "platforms": st.lists(
            st.sampled_from(["dgx_h100", "dgx_gb200"]), min_size=1, max_size=2, unique=True
        ),
    },
    optional={
        "n_repeat": st.lists(st.integers(1, 5), min_size=1, max_size=1),
        "time_limit": st.lists(st.sampled_from([1800, 2700]), min_size=1, max_size=1),
    },
)
TREE = st.dictionaries(CASE_NAMES, ROW, max_size=4).map(
    lambda rows: {
        "gpt.yaml": {
            "type": "basic",
            "format_version": 1,
            "spec": {"name": "{test_case}", "model": "gpt", "script": "run {test_case}"},
            "products": [{"test_case": [name], "products": [row]} for name, row in rows.items()],
        }
    }
)


def _keys(jobs) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted(j.sort_key() for j in jobs)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREE, TREE)
def test_diff_properties(base: dict[str, Any], head: dict[str, Any]) -> None:
    assert diff(base, base).unchanged
    forward, backward = by_name(diff(base, head)), by_name(diff(head, base))
    assert sorted(forward) == sorted(backward)
    for name, f in forward.items():
        b = backward[name]
        assert _keys(f.added) == _keys(b.removed)
        assert _keys(f.removed) == _keys(b.added)
        # A move one way is the same move the other way.
        assert sorted((m.job.sort_key(), m.target) for m in f.moved_out) == sorted(
            (m.job.sort_key(), m.target) for m in b.moved_in
        )
        swapped = {
            c.head.sort_key(): {k: (v[1], v[0]) for k, v in c.fields.items()} for c in b.changed
        }
        assert {c.base.sort_key(): dict(c.fields) for c in f.changed} == swapped


# ---------------------------------------------------------------- git revisions


def test_diff_of_a_commit_against_the_dirty_worktree(repo: GitRepo) -> None:
    base = repo.commit(dumped(v2_tree()))
    head_gpt = copy.deepcopy(GPT)
    head_gpt["products"].append(block("gpt_new", scope=["L1"]))
    repo.write(dumped(v2_tree(head_gpt)))
    result, _ = diff_revisions(Repository(repo.top), "recipes", "HEAD")
    assert result.base == base and result.head == "worktree"
    assert cases(by_name(result)["github-l1-h100"].added) == ["gpt_new"]
    assert result.notes == ()
    # Swapping the sides swaps added and removed (committed both, to compare revisions).
    head = repo.commit()
    back, _ = diff_revisions(Repository(repo.top), "recipes", head, base)
    assert cases(by_name(back)["github-l1-h100"].removed) == ["gpt_new"]
    assert (back.base, back.head) == (head, base)


def test_only_changed_files_are_parsed_and_expanded_again(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"h100/gpt{i}.yaml": copy.deepcopy(GPT) for i in range(20)}
    for i, data in enumerate(files.values()):
        for b in data["products"]:
            b["test_case"] = [f"{b['test_case'][0]}_{i}"]
    repo.commit(dumped(v2_tree(**files)))
    files["h100/gpt3.yaml"]["spec"]["nodes"] = 2
    repo.write(dumped(files))
    parsed: list[str] = []
    expanded: list[str] = []
    real_parse, real_expand = load.parse_recipe, expand.expand_file

    def count_parse(raw, rel, shown, findings):  # type: ignore[no-untyped-def]
        parsed.append(rel)
        return real_parse(raw, rel, shown, findings)

    def count_expand(recipe, config, **kwargs):  # type: ignore[no-untyped-def]
        expanded.append(recipe.rel)
        return real_expand(recipe, config, **kwargs)

    monkeypatch.setattr(load, "parse_recipe", count_parse)
    monkeypatch.setattr(expand, "expand_file", count_expand)
    result, _ = diff_revisions(Repository(repo.top), "recipes", "HEAD")
    # Every file once for the base, then only the changed one for the head.
    assert sorted(parsed) == sorted(
        [*[r for r in dumped(v2_tree(**files)) if r != "matrixgen.yaml"], "h100/gpt3.yaml"]
    )
    assert expanded.count("h100/gpt3.yaml") == 2 and expanded.count("h100/gpt4.yaml") == 1
    changed = by_name(result)["gitlab-mr-h100"].changed
    assert sorted(c.head.test_case for c in changed) == ["gpt_a_3", "gpt_b_3", "gpt_c_3"]


def test_recipes_absent_at_the_base(repo: GitRepo) -> None:
    repo.write({"README": "x\n"}, under="")
    base = repo.commit()
    repo.write(dumped(v2_tree()))
    result, _ = diff_revisions(Repository(repo.top), "recipes", base)
    assert any(
        "recipes does not exist there" in n and "every job is added" in n for n in result.notes
    )
    assert cases(by_name(result)["gitlab-mr-h100"].added) == ["gpt_a", "gpt_b", "gpt_c"]
    with pytest.raises(UsageError, match="exists neither"):
        diff_revisions(Repository(repo.top), "nowhere", base)


def test_a_base_with_broken_recipes_is_still_compared(repo: GitRepo) -> None:
    broken = dumped(v2_tree())
    broken["h100/bad.yaml"] = "spec: [unclosed\n"
    base = repo.commit(broken)
    repo.write({"h100/bad.yaml": None})
    result, sides = diff_revisions(Repository(repo.top), "recipes", base)
    assert any(
        n.startswith(f"base {base[:12]}: 1 error(s) in the recipe tree") for n in result.notes
    )
    assert result.unchanged  # the readable files are the same on both sides
    assert sides[0].generation.findings


def test_a_head_that_fails_validation_says_so(repo: GitRepo) -> None:
    # A mistyped platform parses and expands: its job just matches no target. The
    # diff alone would show no change at all; validate (and so every emitter)
    # refuses the tree.
    base = repo.commit(dumped(v2_tree()))
    head_gpt = copy.deepcopy(GPT)
    head_gpt["products"].append(block("gpt_typo", scope=["L1"], platforms=["dgx_h10"]))
    repo.write(dumped(v2_tree(head_gpt)))
    result, sides = diff_revisions(Repository(repo.top), "recipes", base)
    assert result.unchanged
    assert sides[0].errors == ()
    assert [f.code for f in sides[1].errors] == ["vocabulary"]
    assert 'did you mean "dgx_h100"' in sides[1].errors[0].message
    assert [n for n in result.notes if "validate` fails there" in n] == [
        next(n for n in result.notes if n.startswith("head worktree: 1 error(s)"))
    ]


def test_cli_prints_the_validation_errors_of_a_side(
    in_repo: GitRepo, cli: Callable[..., Any]
) -> None:
    in_repo.commit(dumped(v2_tree()))
    head_gpt = copy.deepcopy(GPT)
    head_gpt["products"].append(block("gpt_typo", scope=["L1"], platforms=["dgx_h10"]))
    in_repo.write(dumped(v2_tree(head_gpt)))
    run = cli("diff", "HEAD", "--format", "markdown")
    assert run.code == 0, run
    assert "matrixgen: head worktree: 1 error(s) in the recipe tree:" in run.err
    assert 'unknown platform "dgx_h10"' in run.err
    assert "1 error(s) in the recipe tree" in run.out  # the PR comment says so too


def test_a_bad_config_on_the_base_names_the_side(repo: GitRepo) -> None:
    tree = dumped(v2_tree())
    tree["matrixgen.yaml"] = "format_version: 2\nvocabulary: 7\n"
    base = repo.commit(tree)
    repo.write(dumped(v2_tree()))
    with pytest.raises(ConfigError) as info:
        diff_revisions(Repository(repo.top), "recipes", base)
    assert str(info.value.message).startswith(f"base ({base[:12]}): invalid project config")
    assert info.value.exit_code is ExitCode.CONFIG


def test_unknown_revision(repo: GitRepo) -> None:
    repo.commit(dumped(v2_tree()))
    with pytest.raises(GitError, match='unknown revision "nope"'):
        diff_revisions(Repository(repo.top), "recipes", "nope")


# ---------------------------------------------------------------- the command


def test_cli_json(in_repo: GitRepo, cli: Callable[..., Any]) -> None:
    base = in_repo.commit(dumped(v2_tree()))
    head_gpt = copy.deepcopy(GPT)
    head_gpt["products"].append(block("gpt_new", scope=["L1"]))
    in_repo.write(dumped(v2_tree(head_gpt)))
    run = cli("diff", "HEAD", "--format", "json")
    assert run.code == 0, run
    data = json.loads(run.out)
    assert data["base"] == base and data["head"] == "worktree"
    # The first target in config order: CONFIG writes github-l1-h100 first.
    assert data["targets"][0]["target"] == {
        "system": "github",
        "scope": "L1",
        "platform": "dgx_h100",
        "environment": "dev",
        "cadence": None,
    }
    l1 = next(t for t in data["targets"] if t["name"] == "github-l1-h100")
    assert [j["test_case"] for j in l1["added"]] == ["gpt_new"]
    assert l1["added"][0]["scope"] == "L1" and l1["removed"] == [] and l1["changed"] == []


def test_cli_markdown_and_expectations(in_repo: GitRepo, cli: Callable[..., Any]) -> None:
    in_repo.commit(dumped(v2_tree()))
    head_gpt = copy.deepcopy(GPT)
    head_gpt["products"].append(block("gpt_new", scope=["L1"]))
    in_repo.write(dumped(v2_tree(head_gpt)))
    run = cli(
        "diff",
        "HEAD",
        "--format",
        "markdown",
        "--expect",
        "github/L1:+1,-0",
        "--expect",
        "gitlab/*:=0",
    )
    assert run.code == 0, run
    assert run.out.startswith("<!-- matrixgen-diff -->\n")
    assert "holds" in run.err
    run = cli("diff", "HEAD", "--expect", "github/L1:+6")
    assert run.code == ExitCode.EXPECTATION
    assert "expected exactly 6 added, got 1" in run.err
    assert "gpt_new" in run.out  # the diff is printed before the verdict
    run = cli("diff", "HEAD", "--expect", "github/L1+6")
    assert run.code == ExitCode.USAGE and "PATTERN:CHECKS" in run.err


def test_cli_refuses_revisions_that_look_like_options(
    in_repo: GitRepo, cli: Callable[..., Any]
) -> None:
    in_repo.commit(dumped(v2_tree()))
    run = cli("diff", "--", "--output=owned")
    assert run.code == ExitCode.USAGE and 'starts with "-"' in run.err
    assert not (in_repo.top / "owned").exists()
    run = cli("diff", "HEAD", "--", "-p")
    assert run.code == ExitCode.USAGE
    run = cli("diff", "no-such-branch")
    assert run.code == ExitCode.GIT and 'unknown revision "no-such-branch"' in run.err
    assert "Traceback" not in run.err


def test_cli_reports_errors_of_a_side_and_still_diffs(
    in_repo: GitRepo, cli: Callable[..., Any]
) -> None:
    broken = dumped(v2_tree())
    broken["h100/bad.yaml"] = "spec: [unclosed\n"
    base = in_repo.commit(broken)
    in_repo.write({"h100/bad.yaml": None})
    run = cli("diff", base, "--expect", "*:=0")
    assert run.code == 0, run
    assert f"matrixgen: base {base[:12]}: 1 error(s) in the recipe tree:" in run.err
    assert "recipes/h100/bad.yaml:2:1: error:" in run.err
    assert "Traceback" not in run.err


def test_cli_with_renamed_and_deleted_files(in_repo: GitRepo, cli: Callable[..., Any]) -> None:
    extra = {"type": "basic", "format_version": 2, "spec": copy.deepcopy(GPT["spec"])}
    extra["products"] = [block("gpt_x", scope=["mr"])]
    in_repo.commit(dumped(v2_tree(**{"h100/extra.yaml": extra})))
    in_repo.git("mv", "recipes/h100/gpt.yaml", "recipes/h100/gpt-renamed.yaml")
    in_repo.write({"h100/extra.yaml": None})
    run = cli("diff", "HEAD", "--format", "json", "--expect", "gitlab/mr:-1,+0,~0")
    assert run.code == 0, run
    mr = next(t for t in json.loads(run.out)["targets"] if t["name"] == "gitlab-mr-h100")
    assert [j["test_case"] for j in mr["removed"]] == ["gpt_x"]
    assert mr["removed"][0]["recipe"] == "h100/extra.yaml"


# ---------------------------------------------------------------- habits (scope)


@pytest.mark.parametrize(
    ("parked", "quarantined", "removed"),
    [
        # nightly-broken parks nightly (L2) jobs only: the mr job is removed.
        ("nightly-broken", ["gitlab-L2-dgx_h100-dev"], ["gitlab-mr-dgx_h100-dev"]),
        ("mr-broken", ["gitlab-mr-dgx_h100-dev"], ["gitlab-L2-dgx_h100-dev"]),
        # flaky does not say which scope it parks: any.
        ("flaky", ["gitlab-L2-dgx_h100-dev", "gitlab-mr-dgx_h100-dev"], []),
    ],
)
def test_a_job_parked_in_a_habit_scope_is_quarantined_where_that_habit_parks_its_scope(
    parked: str, quarantined: list[str], removed: list[str]
) -> None:
    head = copy.deepcopy(V1_GPT)
    head["products"][0] = block("a", scope=[parked])
    targets = by_name(diff({"gpt.yaml": V1_GPT}, {"gpt.yaml": head}))
    assert sorted(n for n, t in targets.items() if t.quarantine) == quarantined
    assert sorted(n for n, t in targets.items() if t.removed) == removed
    for name in quarantined:
        [q] = targets[name].quarantine
        assert (q.change, q.habit and q.habit.scope, q.parser) == (QUARANTINED, parked, "removed")
    # Already parked there on both sides: the job that leaves is removed.
    both = copy.deepcopy(V1_GPT)
    both["products"].append(block("a", scope=[parked]))
    targets = by_name(diff({"gpt.yaml": both}, {"gpt.yaml": head}))
    assert not [n for n, t in targets.items() if t.quarantine]


def test_every_command_lists_targets_in_config_order(cli: Callable) -> None:
    """One target order everywhere: the order the config writes them (the shipped
    tree writes GitHub H100 before GB200, not by name)."""
    from matrixgen.pipeline import generate

    shipped = Path(__file__).resolve().parents[1] / "recipes"
    written = list(yaml.safe_load((shipped / "matrixgen.yaml").read_text())["targets"])
    assert written != sorted(written)  # else the order would not be seen
    generation = generate(shipped)
    assert [t.name for t in generation.targets()] == written
    result = diff_generations(generation, generate(shipped))
    assert [t.target.name for t in result.targets] == written
    stats = json.loads(
        cli("stats", "--recipes", shipped, "--all-platforms", "--format", "json").out
    )
    assert [t["name"] for t in stats["targets"]] == written
    # The head's config decides the order (targets only the base has come after).
    head = v2_tree()
    head["matrixgen.yaml"]["targets"] = dict(reversed(CONFIG["targets"].items()))
    names = [t.target.name for t in diff(v2_tree(), head).targets]
    assert names == list(reversed(CONFIG["targets"]))


def test_a_removed_job_moves_to_the_closest_target_it_arrives_in() -> None:
    """Removed from mr/dgx_h100, added to mr/dgx_a100 (one field apart) and to
    mr-slim/dgx_gb200 (two apart): the move is to the first; the other stays added."""

    def tree(*rows: tuple[str, str]) -> dict[str, Any]:
        products = [{"environment": ["dev"], "scope": [s], "platforms": [p]} for s, p in rows]
        return {
            "gpt.yaml": {
                "type": "basic",
                "format_version": 1,
                "spec": {"name": "{test_case}", "model": "gpt", "script": "run {test_case}"},
                "products": [{"test_case": ["x"], "products": products}],
            }
        }

    moves = {
        name: ([m.target for m in d.moved_out], [m.target for m in d.moved_in], len(d.added))
        for name, d in by_name(
            diff(tree(("mr", "dgx_h100")), tree(("mr", "dgx_a100"), ("mr-slim", "dgx_gb200")))
        ).items()
        if d.moved_out or d.moved_in or d.added
    }
    assert moves == {
        "gitlab-mr-dgx_h100-dev": (["gitlab-mr-dgx_a100-dev"], [], 0),
        "gitlab-mr-dgx_a100-dev": ([], ["gitlab-mr-dgx_h100-dev"], 0),
        "gitlab-mr-slim-dgx_gb200-dev": ([], [], 1),
    }


def test_a_job_changed_on_its_way_to_another_target_is_no_move() -> None:
    """A move keeps all but the renamed scope, platform or environment: a job
    whose env, args or node count changes as well is removed and added."""

    def tree(platform: str, **spec: Any) -> dict[str, Any]:
        products = [{"environment": ["dev"], "scope": ["mr"], "platforms": [platform]}]
        return {
            "gpt.yaml": {
                "type": "basic",
                "format_version": 1,
                "spec": {"name": "{test_case}", "model": "gpt", "script": "run", **spec},
                "products": [{"test_case": ["x"], "products": products}],
            }
        }

    moved = by_name(diff(tree("dgx_h100"), tree("dgx_a100")))["gitlab-mr-dgx_a100-dev"]
    assert [m.target for m in moved.moved_in] == ["gitlab-mr-dgx_h100-dev"]
    for change in ({"env": {"A": "1"}}, {"args": ["--fast"]}, {"nodes": 2}):
        arrived = by_name(diff(tree("dgx_h100"), tree("dgx_a100", **change)))
        assert not arrived["gitlab-mr-dgx_a100-dev"].moved_in, change
        assert cases(arrived["gitlab-mr-dgx_a100-dev"].added) == ["x"]
