"""`diff --changed-view`: what change-based selection would run for the files the
branch itself changes, decided exactly as `--changed-since` decides it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.changes_fixtures import git
from tests.changes_fixtures import repo as repo
from tests.conftest import run_cli


@pytest.fixture
def branch(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`feature` changes the Mamba block; main moves on after it branched (an
    inference change that is not the branch's)."""
    git(repo, "branch", "-M", "main")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "megatron/core/ssm/mamba_block.py").write_text("changed\n")
    git(repo, "commit", "-qam", "mamba")
    git(repo, "checkout", "-q", "main")
    (repo / "megatron/core/inference/engine.py").write_text("changed on main\n")
    git(repo, "commit", "-qam", "inference")
    git(repo, "checkout", "-q", "feature")
    monkeypatch.chdir(repo)
    return repo


def diff_json(*args: str) -> dict:
    run = run_cli(["diff", *args, "--format", "json"])
    assert run.code == 0, run.err
    return json.loads(run.out)


def generate_changes(repo: Path, ref: str) -> dict:
    out = repo.parent / "out"
    run = run_cli(
        ["generate", "--recipes", str(repo / "recipes"), "--out", str(out), "--format", "json",
         "--changed-since", ref]
    )  # fmt: skip
    assert run.code == 0, run.err
    return json.loads(run.out)["changes"]


def test_the_view_is_what_changed_since_decides_for_the_branch(branch: Path) -> None:
    view = diff_json("main", "--changed-view")["changed_view"]
    # Only the branch's own change, not main's later one.
    assert view["changed_files"] == ["megatron/core/ssm/mamba_block.py"]
    assert view["fallback"] is None
    expected = generate_changes(branch, "main")
    assert view["ref"] == expected["ref"] == "main"
    assert view["gpu_hours_saved"] == expected["gpu_hours_saved"] > 0
    ours = {t["target"]: t for t in view["targets"]}
    theirs = {t["target"]: t for t in expected["targets"]}
    assert sorted(ours) == sorted(theirs)
    for name, t in theirs.items():
        assert ours[name]["dropped"] == t["dropped"]
        assert ours[name]["gpu_hours_saved"] == t["gpu_hours_saved"]
        # What runs and what is left out make up the target.
        assert len(ours[name]["runs"]) + len(t["dropped"]) == ours[name]["jobs"]
    slim = ours["github-l0-h100-pr"]
    assert "gpt/gpt3_tp1_pp1" in slim["runs"]  # the smoke case always runs
    functional = [r for r in slim["runs"] if not r.startswith("unit-tests/")]
    assert sorted(functional) == ["gpt/gpt3_tp1_pp1", "hybrid/hybrid_mamba2_tp1_pp1"]
    # HEAD given as a revision: the same view.
    assert diff_json("main", "feature", "--changed-view")["changed_view"] == view


def test_the_text_and_markdown_views(branch: Path) -> None:
    run = run_cli(["diff", "main", "--changed-view"])
    assert run.code == 0, run.err
    section = run.out.split("change-based selection for the files this branch changes:\n")[1]
    assert section.startswith("change-based selection since main: 1 changed file(s); ")
    assert "  github-l0-h100-pr runs 44 of 50: gpt/gpt3_tp1_pp1, hybrid/hybrid_mamba2" in section
    markdown = run_cli(["diff", "main", "--changed-view", "--format", "markdown"]).out
    assert "#### Change-based selection for this branch" in markdown
    assert "| `github-l0-h100-pr` | 44 of 50 | 6 | 156 |" in markdown
    assert "`megatron/core/ssm/mamba_block.py`" in markdown
    # Off by default.
    assert "changed_view" not in diff_json("main")
    assert "Change-based selection" not in run_cli(["diff", "main", "--format", "markdown"]).out


@pytest.mark.parametrize(
    ("change", "reason", "words"),
    [
        (
            "recipes/quarantine.yaml",
            "recipe-tree-changed",
            "the recipe tree, its config or its quarantine file changed",
        ),
        (
            "tools/new_script.sh",
            "unmatched-file",
            "a changed file matches no declared path (and no changes.ignore glob)",
        ),
    ],
)
def test_fallbacks_are_reported_as_changed_since_reports_them(
    branch: Path, change: str, reason: str, words: str
) -> None:
    path = branch / change
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write("\n# changed\n")
    git(branch, "add", "-A")
    git(branch, "commit", "-qm", "more")
    view = diff_json("main", "--changed-view")["changed_view"]
    expected = generate_changes(branch, "main")
    assert view["fallback"] == expected["fallback"] == reason
    assert view["fallback_reason"] == expected["fallback_reason"] == f"{words} ({change})"
    assert all(t["dropped"] == [] for t in view["targets"])
    assert all(len(t["runs"]) == t["jobs"] for t in view["targets"])
    text = run_cli(["diff", "main", "--changed-view"]).out
    assert f"change-based selection since main: the full selection ({words}: {change})\n" in text
    markdown = run_cli(["diff", "main", "--changed-view", "--format", "markdown"]).out
    assert "> ⚠️ the full selection: " in markdown and f"(`{change}`)" in markdown


def test_a_working_tree_change_counts_as_the_branchs(branch: Path) -> None:
    (branch / "docs/index.md").write_text("changed in the working tree\n")
    view = diff_json("main", "--changed-view")["changed_view"]
    assert view["changed_files"] == ["docs/index.md", "megatron/core/ssm/mamba_block.py"]
    # With HEAD given, the working tree is not the branch's.
    given = diff_json("main", "HEAD", "--changed-view")["changed_view"]
    assert given["changed_files"] == ["megatron/core/ssm/mamba_block.py"]


def test_the_markdown_lists_are_bounded(branch: Path) -> None:
    markdown = run_cli(["diff", "main", "--changed-view", "--format", "markdown"]).out
    section = markdown.split("#### Change-based selection for this branch")[1]
    listed = section.split("<summary>The cases it would run there</summary>")[1]
    listed = listed.split("</details>")[0]
    assert sum(line.count("`, `") + 1 for line in listed.splitlines() if "`: `" in line) <= 200
    # Past the budget a target says how many cases it runs, never "nothing".
    assert "`gitlab-mr-slim-h100-dev`: 2 case(s) (`--format json` lists them)" in listed
    assert "`gitlab-mr-gb300-dev`: nothing" in listed  # it runs none


def test_hostile_file_names_are_escaped_and_a_long_view_drops_its_lists() -> None:
    import markdown_it

    from matrixgen.changes.dropped import Dropped
    from matrixgen.changes.view import ChangedView, render_changed_view
    from matrixgen.engine.changes import UNMATCHED, ChangeSelection, ChangeSet

    hostile = ["<img src=x onerror=alert(1)>.py", "[a](javascript:x)`|.py", "\n# All clear"]
    changes = ChangeSet(ref="main <b>", files=tuple(hostile))
    for selection in (
        ChangeSelection(changes=changes, fallback=UNMATCHED, fallback_detail=hostile[0]),
        ChangeSelection(changes=changes, fallback=None),
    ):
        view = ChangedView(dropped=Dropped(selection=selection, targets=()), runs=())
        text = render_changed_view(view, "markdown")
        tokens = markdown_it.MarkdownIt("commonmark").enable("table").parse(text)
        every = [t for tok in tokens for t in (tok, *(tok.children or []))]
        assert not [t for t in every if t.type in ("image", "link_open")]
        assert len([t for t in every if t.type == "heading_open"]) == 1  # its own
        html = [t.content for t in every if t.type in ("html_block", "html_inline")]
        assert all(h.startswith(("<details>", "</details>")) for h in html), html
    # Too long for the room left in the comment: the lists go, the summary stays.
    short = render_changed_view(view, "markdown", room=10)
    assert "changed file(s)</summary>" not in short
    assert "#### Change-based selection for this branch" in short


def test_the_json_with_the_view_follows_the_schema(branch: Path) -> None:
    import jsonschema

    schema = json.loads(
        (Path(__file__).parents[1] / "schema" / "diff.schema.json").read_text(encoding="utf-8")
    )
    jsonschema.validate(diff_json("main", "--changed-view"), schema)
    broken = diff_json("main", "--changed-view")
    del broken["changed_view"]["fallback"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
