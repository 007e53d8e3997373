"""Rendering a selection diff: the JSON shape, the PR comment, the terminal text,
and byte-for-byte determinism."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from matrixgen.diff.comment import MARKDOWN_LIMIT, MARKER, render_markdown
from matrixgen.diff.data import render_json
from matrixgen.diff.model import (
    LIFTED,
    QUARANTINED,
    ChangedJob,
    QuarantineChange,
    SelectionDiff,
    TargetDiff,
)
from matrixgen.diff.render import render, render_text
from matrixgen.model.jobs import Job, QuarantineMark, Selector, Target
from matrixgen.model.vocab import System
from matrixgen.util import markdown as md
from matrixgen.util.values import json_value
from matrixgen.util.words import listed
from matrixgen.views.cost import Cost
from tests.diff_fixtures import GPT, block, diff, dumped, v2_tree
from tests.gitrepo import GIT_ENV, GitRepo

SCRIPT_OLD = "set -e\nbash run.sh {test_case}\necho done"
SCRIPT_NEW = "set -e\nbash run.sh {test_case} --fast\necho done"


def job(test_case: str, scope: str = "L1", **kw: Any) -> Job:
    fields: dict[str, Any] = {
        "model": "gpt",
        "test_case": test_case,
        "environment": "dev",
        "platform": "dgx_h100",
        "tag": None,
        "scope": scope,
        "cadence": ("pr", "mergegroup"),
        "name": f"{test_case}_dev_dgx_h100",
        "build": "mcore-pyt-dev",
        "n_repeat": 5,
        "time_limit": 2700,
    }
    return Job(**{**fields, **kw})


def target(name: str, system: str, scope: str, cadence: str | None = None) -> Target:
    selector = Selector(scope=scope, platform="dgx_h100", environment="dev", cadence=cadence)
    return Target(name=name, system=System(system), selector=selector)


MARK = QuarantineMark(
    id="moe-ep8-hang",
    tracker="https://github.com/example/mcore/issues/7201",
    action="skip",
    kind="broken",
)


def price(jobs: int, gpu_hours: float, weighted: float | None = None) -> Cost:
    return Cost(
        jobs=jobs, gpu_hours_max=gpu_hours, weighted_max=gpu_hours if weighted is None else weighted
    )


def sample() -> SelectionDiff:
    """Costs as 30 GPU-h an H100 job (8 GPUs x 45 min x 5); the mr target's
    time-limit change doubles one job, its new skip takes one out."""
    changed = [
        ChangedJob(job(c, "mr"), job(c, "mr"), {"script": (SCRIPT_OLD, SCRIPT_NEW)})
        for c in ("c1", "c2", "c3")
    ]
    changed.append(
        ChangedJob(
            job("t", "mr"),
            job("t", "mr", time_limit=5400),
            {"env": ({"A": "1"}, {"A": "2", "B": "3"}), "time_limit": (2700, 5400)},
        )
    )
    return SelectionDiff(
        base="0123456789abcdef0123456789abcdef01234567",
        head="worktree",
        targets=(
            TargetDiff(
                target("github-l1-h100", "github", "L1"),
                added=tuple(job(f"new{i}") for i in range(6)),
                base_jobs=10,
                head_jobs=16,
                base_cost=price(10, 300),
                head_cost=price(16, 480),
            ),
            TargetDiff(
                target("gitlab-mr-h100", "gitlab", "mr"),
                changed=tuple(changed),
                quarantine=(
                    QuarantineChange(
                        QUARANTINED, job("moe_ep8", "mr"), job("moe_ep8", "mr", quarantine=MARK)
                    ),
                    QuarantineChange(
                        LIFTED,
                        job(
                            "cp2",
                            "mr",
                            quarantine=QuarantineMark(
                                id="cp2", tracker="#7733", action="skip", kind="flaky"
                            ),
                        ),
                        job("cp2", "mr"),
                    ),
                ),
                base_jobs=20,
                head_jobs=21,
                base_cost=price(20, 600),
                head_cost=price(21, 660),
            ),
            TargetDiff(
                target("gitlab-nightly-h100", "gitlab", "nightly", "nightly"),
                removed=(job("old", "L2", cadence=("nightly",)),),
                base_jobs=1,
                head_jobs=0,
                base_cost=price(1, 30, 45),
                head_cost=price(0, 0),
            ),
            TargetDiff(
                target("gitlab-mr-slim-h100", "gitlab", "mr-slim"),
                base_jobs=2,
                head_jobs=2,
                base_cost=price(2, 60),
                head_cost=price(2, 60),
            ),
        ),
        notes=("base 0123456789ab: 1 recipe error(s); rows that could not be read yield no jobs",),
    )


# ---------------------------------------------------------------- JSON


def test_json_shape() -> None:
    data = json.loads(render_json(sample()))
    assert data["base"] == "0123456789abcdef0123456789abcdef01234567"
    assert data["head"] == "worktree"
    assert len(data["targets"]) == 4
    first = data["targets"][0]
    assert first["target"] == {
        "system": "github",
        "scope": "L1",
        "platform": "dgx_h100",
        "environment": "dev",
        "cadence": None,
    }
    assert first["added"][0] == json_value(job("new0"))
    assert first["removed"] == [] and first["changed"] == []
    assert first["jobs"] == {"base": 10, "head": 16}
    mr = data["targets"][1]
    assert mr["changed"][3] == {
        "job": json_value(job("t", "mr", time_limit=5400)),
        "fields": {"env": [{"A": "1"}, {"A": "2", "B": "3"}], "time_limit": [2700, 5400]},
    }
    assert [q["change"] for q in mr["quarantine"]] == ["quarantined", "lifted"]
    assert mr["quarantine"][0]["new"]["tracker"] == MARK.tracker
    assert mr["quarantine"][0]["old"] is None
    # The nightly target echoes its selector as configured (cadence included).
    assert data["targets"][2]["target"]["scope"] == "nightly"
    assert data["targets"][2]["target"]["cadence"] == "nightly"
    unchanged = data["targets"][3]
    assert (unchanged["added"], unchanged["removed"], unchanged["changed"]) == ([], [], [])
    assert data["summary"] == {
        "targets": 4,
        "targets_changed": 3,
        "added": 6,
        "removed": 1,
        "changed": 4,
        "quarantine": 2,
        "moved": 0,
        "moves": [],
        # The parser's view: the same here (no habit, no move, nothing arrives
        # or leaves quarantined).
        "parser": {"added": 6, "removed": 1},
        "findings_added": 0,
        "findings_removed": 0,
        "duplicates": 0,
        # One run of every target: 300 + 600 + 30 + 60 before, 480 + 660 + 0 + 60 after.
        "gpu_hours_before": 990,
        "gpu_hours_after": 1200,
        "gpu_hours_delta": 210,
        "weighted_gpu_hours_before": 1005,
        "weighted_gpu_hours_after": 1200,
        "weighted_gpu_hours_delta": 195,
        "pipelines": [
            {
                "pipeline": "github/L1",
                "jobs_before": 10,
                "jobs_after": 16,
                "jobs_delta": 6,
                "gpu_hours_before": 300,
                "gpu_hours_after": 480,
                "gpu_hours_delta": 180,
                "weighted_gpu_hours_before": 300,
                "weighted_gpu_hours_after": 480,
                "weighted_gpu_hours_delta": 180,
            },
            {
                "pipeline": "gitlab/mr",
                "jobs_before": 20,
                "jobs_after": 21,
                "jobs_delta": 1,
                "gpu_hours_before": 600,
                "gpu_hours_after": 660,
                "gpu_hours_delta": 60,
                "weighted_gpu_hours_before": 600,
                "weighted_gpu_hours_after": 660,
                "weighted_gpu_hours_delta": 60,
            },
            {
                "pipeline": "gitlab/mr-slim",
                "jobs_before": 2,
                "jobs_after": 2,
                "jobs_delta": 0,
                "gpu_hours_before": 60,
                "gpu_hours_after": 60,
                "gpu_hours_delta": 0,
                "weighted_gpu_hours_before": 60,
                "weighted_gpu_hours_after": 60,
                "weighted_gpu_hours_delta": 0,
            },
            {
                "pipeline": "gitlab/nightly",
                "jobs_before": 1,
                "jobs_after": 0,
                "jobs_delta": -1,
                "gpu_hours_before": 30,
                "gpu_hours_after": 0,
                "gpu_hours_delta": -30,
                "weighted_gpu_hours_before": 45,
                "weighted_gpu_hours_after": 0,
                "weighted_gpu_hours_delta": -45,
            },
        ],
    }
    assert (first["gpu_hours_before"], first["gpu_hours_after"], first["gpu_hours_delta"]) == (
        300,
        480,
        180,
    )
    assert mr["counts"] == {
        "added": 0,
        "removed": 0,
        "changed": 4,
        "quarantine": 2,
        "moved_out": 0,
        "moved_in": 0,
        # Entries the parser does not read: to it, nothing was added or removed.
        "parser": {"added": 0, "removed": 0},
        # One job skipped (it stops running), one lifted (it starts again).
        "starts": 1,
        "stops": 1,
    }
    assert data["notes"] == list(sample().notes)


# ---------------------------------------------------------------- markdown


def table_rows(text: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if (
            line.startswith("| ")
            and not line.startswith("| :--")
            and not line.startswith("| target")
        ):
            cells = re.split(r"(?<!\\)\|", line)[1:-1]
            rows.append([c.strip() for c in cells])
    return rows


def test_markdown_summary_first() -> None:
    text = render_markdown(sample())
    assert text.startswith(MARKER + "\n")
    assert "`0123456789ab` → the working tree" in text
    assert (
        "**+6 added · −1 removed · ~4 changed · 2 quarantine changes** in 3 of 4 targets." in text
    )
    assert table_rows(text) == [
        ["`github-l1-h100`", "10 → 16", "+180 (300 → 480)", "+6", "−0", "~0", ""],
        [
            "`gitlab-mr-h100`",
            "20 → 21",
            "+60 (600 → 660)",
            "+0",
            "−0",
            "~4",
            "1 lifted, 1 quarantined",
        ],
        ["`gitlab-nightly-h100`", "1 → 0", "-30 (30 → 0)", "+0", "−1", "~0", ""],
    ]
    # The cost change per pipeline, under the summary; weights show where they differ.
    assert "- +6 jobs, +180 GPU-h per run of `github/L1`\n" in text
    assert "- -1 jobs, -30 GPU-h (-45 weighted) per run of `gitlab/nightly`\n" in text
    assert "`gitlab/mr-slim`" not in text  # no change there
    assert "**Cost:** +210 GPU-h per run of every target (990 → 1,200; an upper bound" in text
    assert "<details><summary>1 target unchanged</summary>" in text
    assert "`gitlab-mr-slim-h100`" in text
    assert "> ⚠️ base 0123456789ab: 1 recipe error(s); rows that could not be read" in text


def test_markdown_quarantine_changes_link_their_trackers() -> None:
    text = render_markdown(sample())
    assert (
        "- **quarantined** [#7201](https://github.com/example/mcore/issues/7201) "
        "(skip, broken, entry `moe-ep8-hang`): 1 case, 1 job in 1 target (`gitlab-mr-h100`)"
    ) in text
    # A bare #N is left for GitHub to link in the repository of the PR.
    assert "- **lifted** #7733 (skip, flaky, entry `cp2`)" in text


def test_markdown_details_group_one_edit_of_many_jobs() -> None:
    text = render_markdown(sample())
    details = text[text.index("<details><summary><b>gitlab-mr-h100</b>") :]
    details = details[: details.index("</details>")]
    # The script edit is shown once for its three jobs, as a diff.
    assert details.count("```diff") == 1
    assert "- `gpt/c1`, `gpt/c2`, `gpt/c3`" in details
    assert "-bash run.sh {test_case}" in details and "+bash run.sh {test_case} --fast" in details
    assert "`env`: `+B=3, A: 1 -> 2`" in details
    assert "`time_limit`: `2700` → `5400`" in details
    assert details.count("<summary>") == 1


def test_markdown_folds_the_diff_of_a_long_script() -> None:
    old = "\n".join(f"step {i}" for i in range(40))
    new = "\n".join(f"step {i}" if i % 3 else f"step {i} --fast" for i in range(40))
    changed = (ChangedJob(job("a"), job("a"), {"workload.script_setup": (old, new)}),)
    diff_ = SelectionDiff(
        base="a" * 40,
        head="b" * 40,
        targets=(
            TargetDiff(target("t", "gitlab", "mr"), changed=changed, base_jobs=2, head_jobs=2),
        ),
    )
    text = render_markdown(diff_)
    assert "- `workload.script_setup`: 28 lines changed" in text
    folded = text[text.index("<details><summary>the diff of workload.script_setup</summary>") :]
    assert "-step 0\n" in folded and "+step 0 --fast\n" in folded
    assert folded.index("```diff") < folded.index("  </details>")
    # The terminal shows the same diff, cut at its limit.
    plain = render_text(diff_)
    assert "        -step 0" in plain and "more lines" in plain


def test_markdown_says_all_jobs_when_one_edit_changes_a_whole_target() -> None:
    jobs = [job(f"j{i}") for i in range(30)]
    image = ("reg/ci:26.09", "reg/ci:26.10")
    changed = tuple(ChangedJob(j, j, {"image": image}) for j in jobs)
    diff_ = SelectionDiff(
        base="a" * 40,
        head="b" * 40,
        targets=(
            TargetDiff(target("t", "github", "L1"), changed=changed, base_jobs=30, head_jobs=30),
        ),
    )
    text = render_markdown(diff_)
    assert "- all 30 jobs of this target\n  - `image`: `reg/ci:26.09` → `reg/ci:26.10`" in text
    assert "`gpt/j0`" not in text


def test_markdown_combined_trackers_and_backticks_in_scripts() -> None:
    mark = QuarantineMark(
        id="a, b",
        tracker="https://github.com/example/mcore/issues/1, #2",
        action="skip",
        kind="flaky",
    )
    old_script, new_script = "echo ```a```\nrun", "echo ```b```\nrun"
    diff_ = SelectionDiff(
        base="a" * 40,
        head="b" * 40,
        targets=(
            TargetDiff(
                target("t", "gitlab", "mr"),
                quarantine=(QuarantineChange(QUARANTINED, job("x"), job("x", quarantine=mark)),),
                changed=(ChangedJob(job("y"), job("y"), {"script": (old_script, new_script)}),),
            ),
        ),
    )
    text = render_markdown(diff_)
    assert "[#1](https://github.com/example/mcore/issues/1), #2" in text
    assert "    ````diff\n" in text and "\n    ````\n" in text


def test_markdown_without_changes() -> None:
    unchanged = SelectionDiff(base="a" * 40, head="b" * 40, targets=sample().targets[3:])
    text = render_markdown(unchanged)
    assert text.startswith(MARKER)
    assert "**No selection change** in any of the 1 target." in text
    assert "<details>" not in text and "|" not in text


def test_markdown_stays_under_the_comment_limit() -> None:
    # Each target's list is cut at 50 jobs; forty targets of long names still
    # pass the limit, so the details go and the summary stays.
    many = tuple(job(f"case_{i:03d}_" + "x" * 80) for i in range(60))
    huge = SelectionDiff(
        base="a" * 40,
        head="b" * 40,
        targets=tuple(
            TargetDiff(target(f"github-l1-{i:02d}", "github", "L1"), added=many) for i in range(40)
        ),
    )
    text = render_markdown(huge)
    assert len(text) <= MARKDOWN_LIMIT
    # The summary counts per target, as the table shows them: 40 x 60.
    assert "**+2400 added · −0 removed" in text and "| `github-l1-39` | 0 | 0 | +60 |" in text
    # Details are left out, and the JSON still has everything.
    assert "Per-target details are left out" in text
    assert len(json.loads(render_json(huge))["targets"][0]["added"]) == 60


def test_markdown_cuts_long_lists() -> None:
    many = tuple(job(f"case_{i:03d}") for i in range(120))
    diff_ = SelectionDiff(
        base="a" * 40,
        head="b" * 40,
        targets=(TargetDiff(target("t", "github", "L1"), added=many),),
    )
    text = render_markdown(diff_)
    assert "`gpt/case_049`" in text and "`gpt/case_050`" not in text
    assert "- … and 70 more (`--format json` lists all)" in text


def test_markdown_with_thousands_of_targets() -> None:
    huge = SelectionDiff(
        base="a" * 40,
        head="b" * 40,
        targets=tuple(
            TargetDiff(target(f"target-{i:05d}-" + "y" * 60, "github", "L1"), added=(job("a"),))
            for i in range(3000)
        ),
    )
    text = render_markdown(huge)
    assert len(text) <= MARKDOWN_LIMIT
    assert "| … and 2800 more targets | | | | | | |\n" in text


def test_markdown_escapes_what_would_break_a_table() -> None:
    odd = job("a|b`c")
    diff_ = SelectionDiff(
        base="a" * 40,
        head="b" * 40,
        targets=(TargetDiff(target("x|y", "github", "L1"), added=(odd,)),),
    )
    text = render_markdown(diff_)
    (row,) = table_rows(text)
    # A pipe cannot be escaped inside a code span: it sits escaped between two.
    assert len(row) == 7 and row[0] == "`x`\\|`y`"
    assert "`gpt/a`\\|``b`c``" in text


@settings(max_examples=200)
@given(st.text(alphabet=st.sampled_from(list("ab `|\\*_<>")), min_size=1, max_size=30))
def test_code_spans_show_the_text_as_it_is(text: str) -> None:
    import markdown_it

    # A table cell: pipes must not split it, backticks must not end the span early.
    rendered = markdown_it.MarkdownIt("commonmark").enable("table")
    tokens = rendered.parse(f"| h |\n| -- |\n| {md.code(text)} |\n")
    cell = next(t for t in tokens if t.type == "inline" and t.map and t.map[0] == 2)
    children = cell.children or []
    assert {c.type for c in children} <= {"code_inline", "text"}
    assert "".join(c.content for c in children) == text
    assert all(set(c.content) <= {"|"} for c in children if c.type == "text")


# ---------------------------------------------------------------- text


def test_text_report() -> None:
    text = render_text(sample())
    assert text.splitlines()[0] == "selection diff: base 0123456789ab -> head worktree"
    assert "3 of 4 targets change: +6 added, -1 removed, ~4 changed" in text
    assert "  + gpt/new0\n" in text
    assert "  - gpt/old\n" in text
    assert "      time_limit: 2700 -> 5400" in text
    assert "      env: +B=3, A: 1 -> 2" in text
    assert "  q quarantined gpt/moe_ep8: https://github.com/example/mcore/issues/7201, skip" in text
    assert "unchanged (1): gitlab-mr-slim-h100" in text
    assert (
        "github-l1-h100 (github L1 dgx_h100 dev): +6 -0 ~0, 10 -> 16 jobs, "
        "+180 GPU-h (300 -> 480)\n"
    ) in text
    assert "cost: +210 GPU-h per run of every target (990 -> 1,200; an upper bound" in text
    assert "  +6 jobs, +180 GPU-h per run of github/L1\n" in text
    assert "  +1 jobs, +60 GPU-h per run of gitlab/mr\n" in text
    assert "  -1 jobs, -30 GPU-h (-45 weighted) per run of gitlab/nightly\n" in text
    assert "per run of gitlab/mr-slim" not in text
    assert "note: base 0123456789ab: 1 recipe error(s)" in text


def test_a_job_is_named_with_its_tag_when_it_has_one() -> None:
    # Platform and environment are the target's; a tag tells two rows of a case apart.
    assert job("c1").label == "gpt/c1"
    added = TargetDiff(
        target("github-l1-h100", "github", "L1"),
        added=(job("c1", tag="2.0"),),
        base_jobs=0,
        head_jobs=1,
        base_cost=price(0, 0),
        head_cost=price(1, 30),
    )
    text = render_text(SelectionDiff(base="0" * 40, head="worktree", targets=(added,)))
    assert "  + gpt/c1 [2.0]\n" in text


# ---------------------------------------------------------------- determinism


def test_same_bytes_whatever_the_file_order() -> None:
    head_gpt = copy.deepcopy(GPT)
    head_gpt["products"].append(block("gpt_new", scope=["L1"]))
    head_gpt["products"][0]["products"][0]["time_limit"] = [5400]
    base, head = v2_tree(), v2_tree(head_gpt)
    forward = diff(base, head)
    backward = diff(dict(reversed(list(base.items()))), dict(reversed(list(head.items()))))
    for fmt in ("json", "markdown", "text"):
        assert render(forward, fmt) == render(backward, fmt)


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
def test_same_bytes_whatever_the_hash_seed(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.commit(dumped(v2_tree()))
    head_gpt = copy.deepcopy(GPT)
    head_gpt["products"].append(block("gpt_new", scope=["L1"]))
    head_gpt["spec"]["env"]["ZZ"] = "1"
    repo.write(dumped(v2_tree(head_gpt)))
    outputs = set()
    for seed in ("1", "2"):
        result = subprocess.run(
            [sys.executable, "-m", "matrixgen", "diff", "HEAD", "--format", "markdown"],
            cwd=repo.top,
            capture_output=True,
            text=True,
            env={**os.environ, **GIT_ENV, "PYTHONHASHSEED": seed},
            check=True,
        )
        outputs.add(result.stdout)
    assert len(outputs) == 1
    assert "`gpt_new`" not in outputs.pop()  # jobs are model/test_case, not the raw name


def test_quarantine_change_counts_say_their_units() -> None:
    from matrixgen.diff.comment import _reach

    # One case (a job identity) run by three targets is three jobs: the count
    # the summary gave as "2 job(s)" (its jobs per scope) for the EP8 FP8 entry.
    key = ("moe", "moe_deepseek_tp1_pp2_ep8_etp1_fp8", "dev", "dgx_h100", "", "L1", ("pr",))
    gitlab = (*key[:5], "mr", ("pr", "nightly", "mergegroup"))
    targets = ["github-l1-h100-mergegroup", "github-l1-h100-pr", "gitlab-mr-h100-dev"]
    jobs = {(targets[0], key), (targets[1], key), (targets[2], gitlab)}
    assert _reach(jobs, targets) == (
        "1 case, 3 jobs in 3 targets "
        "(`github-l1-h100-mergegroup`, `github-l1-h100-pr`, `gitlab-mr-h100-dev`)"
    )
    # Two cases in one target; a case on another platform is another case.
    other = (key[0], key[1], "dev", "dgx_gb200", "", "L1", ("pr",))
    assert _reach({(targets[0], key), (targets[0], other)}, targets[:1]) == (
        "2 cases, 2 jobs in 1 target (`github-l1-h100-mergegroup`)"
    )


@given(st.lists(st.text(min_size=1, max_size=3), max_size=8), st.integers(1, 6))
@example(["a", "b", "c"], 3)  # exactly the limit: nothing more to say
@example(["a", "b", "c"], 2)
def test_a_cut_list_says_how_many_more(items: list[str], limit: int) -> None:
    text = listed(items, limit)
    assert text.startswith(", ".join(items[:limit]))
    more = len(items) - limit
    assert text.endswith(f" and {more} more") == (more > 0)
    if more <= 0:
        assert text == ", ".join(items)


def test_a_changed_targets_row_names_what_is_special_about_it() -> None:
    new = TargetDiff(target("t", "github", "L1"), added=(job("a"),), exists="head")
    gone = TargetDiff(target("g", "github", "L1"), removed=(job("b"),), exists="base")
    moved = TargetDiff(target("s", "github", "L1"), settings={"timeout": (1, 2)})
    pen = TargetDiff(target("p", "github", "mr-broken"), added=(job("c", "mr-broken"),))
    both = TargetDiff(
        target("n", "github", "L1"), added=(job("d"),), exists="head", settings={"x": (1, 2)}
    )
    text = render_markdown(
        SelectionDiff(base="a" * 40, head="b" * 40, targets=(new, gone, moved, pen, both))
    )
    for row in ("`t` (new)", "`g` (gone)", "`s` (settings)", "`p` (holding pen)"):
        assert f"| {row} |" in text
    assert "| `n` (new) (settings) |" in text


@given(st.text(min_size=1, max_size=8))
@example("a\\b")  # a backslash: two in the terminal, never four
@example("`|`")  # a code span's fence, a cell's end
@example("\n# forged")
def test_jobs_without_their_references_are_a_row_each_escaped_once(name: str) -> None:
    from matrixgen.diff.references import ReferenceGaps, TargetGaps, render_gaps
    from matrixgen.util.escape import markdown_code, terminal_text
    from matrixgen.views.references import MissingReference

    missing = MissingReference(job=job(name), reference=name, path=f"{name}/g.json", hint=None)
    gaps = ReferenceGaps(targets=(TargetGaps(target="t", added=(missing,), lost=(missing,)),))
    text = render_gaps(gaps, "text").split("\n")
    said = terminal_text(f"{missing.job.identity}: no {name} file {name}/g.json")
    assert text[3:] == [f"    + {said}", f"    ! {said}", ""]
    job_, reference, path = map(markdown_code, (missing.job.identity, name, f"{name}/g.json"))
    assert render_gaps(gaps, "markdown").split("\n")[5:] == [
        f"| `t` | {job_} | {change} | {reference} | {path} |" for change in ("added", "lost")
    ] + [""]
