"""Change-based selection (`--changed-since`): globs, the fail-safe fallbacks,
the dropped jobs' summary, and the invariants that make it safe to use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.changes.dropped import Dropped, dropped_report, render_dropped
from matrixgen.engine.changes import (
    TREE_CHANGED,
    UNMATCHED,
    UNRESOLVED,
    ChangeSelection,
    ChangeSet,
    matches,
    select_changed,
)
from matrixgen.model.jobs import Job, Selector, Target
from matrixgen.model.vocab import System
from matrixgen.util.checkout import in_tree, tree_path
from matrixgen.util.escape import markdown_code
from matrixgen.views.cost import Cost
from matrixgen.views.table import table
from tests.changes_fixtures import REPO, git
from tests.changes_fixtures import repo as repo
from tests.conftest import Run, run_cli


@pytest.mark.parametrize(
    ("glob", "path", "expected"),
    [
        ("megatron/core/ssm/**", "megatron/core/ssm/mamba_block.py", True),
        ("megatron/core/ssm/**", "megatron/core/ssm/a/b.py", True),
        ("megatron/core/ssm/**", "megatron/core/ssmx/a.py", False),
        ("megatron/core/*.py", "megatron/core/parallel_state.py", True),
        ("megatron/core/*.py", "megatron/core/ssm/a.py", False),
        ("**/*.md", "README.md", True),
        ("**/*.md", "docs/a/b.md", True),
        ("docs/", "docs/index.rst", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("a.b", "axb", False),  # literal dot
        ("[x]", "[x]", True),  # brackets are literal, not a class
    ],
)
def test_globs(glob: str, path: str, expected: bool) -> None:
    assert matches(glob, path) is expected


def job(i: int, paths: list[str] | None, always: bool = False) -> Job:
    spec: dict = {}
    if paths is not None:
        spec["paths"] = paths
    if always:
        spec["always"] = True
    return Job(
        model="gpt",
        test_case=f"case{i}",
        environment="dev",
        platform="dgx_h100",
        tag=None,
        scope="mr",
        cadence=("pr",),
        name=f"case{i}",
        build=None,
        n_repeat=5,
        time_limit=2700,
        spec=spec,
    )


AREAS = ["src/a", "src/b", "src/c", "docs"]
path_st = st.builds(
    lambda area, name: f"{area}/{name}.py",
    st.sampled_from(AREAS),
    st.sampled_from(["x", "y", "z"]),
)
jobs_st = st.lists(
    st.tuples(
        st.one_of(st.none(), st.lists(st.sampled_from([f"{a}/**" for a in AREAS[:3]]), min_size=1)),
        st.booleans(),
    ),
    max_size=12,
).map(lambda specs: [job(i, p, a) for i, (p, a) in enumerate(specs)])


@given(jobs=jobs_st, files=st.lists(path_st, max_size=6))
def test_the_changed_selection_is_a_subset_of_the_full_one(
    jobs: list[Job], files: list[str]
) -> None:
    selection = select_changed(
        jobs, ChangeSet(ref="base", files=tuple(files)), tree_paths=["recipes"], ignore=["docs/**"]
    )
    kept = selection.kept(jobs)
    assert set(kept) <= set(jobs)
    assert len(kept) + len(selection.dropped) == len(jobs) or selection.fallback is not None
    # Every job that can be affected is kept: always, no paths, or a match.
    for one in jobs:
        paths = one.spec.get("paths")
        needed = (
            one.spec.get("always") is True
            or paths is None
            or any(matches(g, f) for g in paths for f in files if not f.startswith("docs/"))
        )
        if needed:
            assert one in kept


@given(jobs=jobs_st, files=st.lists(st.sampled_from(["docs/x.py", "docs/y.py"]), min_size=1))
def test_a_change_to_ignorable_files_only_runs_the_always_jobs(
    jobs: list[Job], files: list[str]
) -> None:
    selection = select_changed(
        jobs, ChangeSet(ref="base", files=tuple(files)), tree_paths=["recipes"], ignore=["docs/**"]
    )
    assert selection.fallback is None
    assert selection.kept(jobs) == [
        j for j in jobs if j.spec.get("always") is True or "paths" not in j.spec
    ]


@given(
    jobs=jobs_st,
    files=st.lists(path_st, max_size=4),
    fallback=st.sampled_from([UNRESOLVED, TREE_CHANGED, UNMATCHED]),
)
def test_every_fail_safe_condition_keeps_the_full_selection(
    jobs: list[Job], files: list[str], fallback: str
) -> None:
    if fallback == UNRESOLVED:
        changes = ChangeSet(ref="nope", error='"nope" is not a revision')
    elif fallback == TREE_CHANGED:
        changes = ChangeSet(ref="base", files=(*files, "recipes/h100/gpt.yaml"))
    else:
        changes = ChangeSet(ref="base", files=(*files, "tools/unknown.sh"))
    selection = select_changed(jobs, changes, tree_paths=["recipes"], ignore=["docs/**"])
    assert selection.fallback == fallback
    assert selection.kept(jobs) == jobs and selection.dropped == ()


# --- on a real git repository ----------------------------------------------


def generate(repo: Path, *extra: str) -> tuple[Run, dict]:
    run = run_cli(
        [
            "generate",
            "--recipes",
            str(repo / "recipes"),
            "--out",
            str(repo.parent / "out"),
            "--format",
            "json",
            *extra,
        ]
    )
    assert run.code == 0, run.err
    return run, json.loads(run.out)


def test_the_summary_of_a_change_based_selection_is_its_own_section(repo: Path) -> None:
    (repo / "megatron/core/ssm/mamba_block.py").write_text("changed\n")
    out = repo.parent / "out"
    argv = ["generate", "--recipes", str(repo / "recipes"), "--out", str(out)]
    run = run_cli([*argv, "--changed-since", "HEAD"])
    assert run.code == 0, run.err
    assert "\n\nchange-based selection since HEAD: " in run.out


def test_a_hybrid_change_runs_the_hybrid_cases_and_the_smoke_case(repo: Path) -> None:
    _, full = generate(repo)
    (repo / "megatron/core/ssm/mamba_block.py").write_text("changed\n")
    run, changed = generate(repo, "--changed-since", "HEAD")
    assert "1 changed file(s)" in run.err
    by_target = {t["target"]: t for t in changed["targets"]}
    full_by_target = {t["target"]: t for t in full["targets"]}
    assert all(by_target[n]["jobs"] <= full_by_target[n]["jobs"] for n in by_target)
    saved = changed["changes"]
    assert saved["fallback"] is None and saved["changed_files"] == [
        "megatron/core/ssm/mamba_block.py"
    ]
    slim = json.loads((repo.parent / "out" / "github-l0-h100-pr.json").read_text())["include"]
    functional = {(r["model"], r["test_case"]) for r in slim if r["model"] != "unit-tests"}
    # The always (smoke) case, and hybrid cases only.
    assert ("gpt", "gpt3_tp1_pp1") in functional
    assert {m for m, _ in functional} <= {"gpt", "hybrid"}
    assert {c for m, c in functional if m == "gpt"} == {"gpt3_tp1_pp1"}
    dropped = {d["job"] for t in saved["targets"] for d in t["dropped"]}
    assert any(j.startswith("inference/") for j in dropped)
    assert not any(j.startswith("hybrid/") for j in dropped)
    assert saved["gpu_hours_saved"] > 0
    # --full overrides.
    run, again = generate(repo, "--changed-since", "HEAD", "--full")
    assert "changes" not in again
    assert [t["jobs"] for t in again["targets"]] == [t["jobs"] for t in full["targets"]]


def test_a_docs_change_runs_only_what_always_runs(repo: Path) -> None:
    (repo / "docs/index.md").write_text("changed\n")
    generate(repo, "--changed-since", "HEAD")
    jobs = json.loads((repo.parent / "out" / "github-l1-h100-pr.json").read_text())["include"]
    assert jobs == []  # no L1 case is always; the smoke case is L0
    smoke = json.loads((repo.parent / "out" / "github-l0-h100-pr.json").read_text())["include"]
    assert {r["test_case"] for r in smoke if r["model"] == "gpt"} == {"gpt3_tp1_pp1"}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("recipes/quarantine.yaml", "recipe-tree-changed"),
        ("recipes/matrixgen.yaml", "recipe-tree-changed"),
        ("tools/new_script.sh", "unmatched-file"),
    ],
)
def test_fail_safe_on_a_real_repository(repo: Path, change: str, reason: str) -> None:
    _, full = generate(repo)
    path = repo / change
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write("\n# changed\n")
    run, changed = generate(repo, "--changed-since", "HEAD")
    assert changed["changes"]["fallback"] == reason
    assert change in changed["changes"]["fallback_reason"]
    assert "full selection kept" in run.err
    assert [t["jobs"] for t in changed["targets"]] == [t["jobs"] for t in full["targets"]]


def test_an_unknown_revision_keeps_everything_and_says_so(repo: Path) -> None:
    run, changed = generate(repo, "--changed-since", "no-such-branch")
    assert changed["changes"]["fallback"] == "unresolved-ref"
    assert '"no-such-branch" is not a revision' in run.err


def test_list_github_and_gitlab_take_the_flag_too(repo: Path) -> None:
    (repo / "megatron/core/ssm/mamba_block.py").write_text("changed\n")
    recipes = str(repo / "recipes")
    listed = run_cli(
        [
            "list",
            "--recipes",
            recipes,
            "--scope",
            "mr",
            "--platform",
            "dgx_h100",
            "--environment",
            "dev",
            "--model",
            "inference",
            "--format",
            "json",
            "--changed-since",
            "HEAD",
        ]
    )
    assert listed.code == 0 and json.loads(listed.out) == []
    matrix = run_cli(
        [
            "github",
            "--recipes",
            recipes,
            "--target-name",
            "github-l1-h100-pr",
            "--changed-since",
            "HEAD",
        ]
    )
    assert matrix.code == 0, matrix.err
    assert {r["model"] for r in json.loads(matrix.out)["include"]} == {"hybrid"}
    pipeline = run_cli(
        [
            "gitlab",
            "--recipes",
            recipes,
            "--target-name",
            "gitlab-mr-h100-dev",
            "--changed-since",
            "HEAD",
            "--launcher",
            "echo",
        ]
    )
    assert pipeline.code == 0, pipeline.err
    assert "stage: inference" not in pipeline.out and "stage: hybrid" in pipeline.out


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="1">
<testcase classname="tests.test_a" name="test_x" time="1.5"/>
</testsuite></testsuites>
"""


def test_the_default_results_store_is_no_change_of_the_project(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `results ingest` writes .matrixgen/results.db at the top of the checkout; a
    # repository that does not ignore that folder must still select by its changes.
    report = tmp_path / "report.xml"
    report.write_text(JUNIT)
    monkeypatch.chdir(repo)
    monkeypatch.delenv("MATRIXGEN_RESULTS_DB", raising=False)
    listed = run_cli(["list", "--format", "json"])
    job_name = json.loads(listed.out)[0]["name"]
    ingested = run_cli(["results", "ingest", str(report), "--run-id", "r1", "--job", job_name])
    assert ingested.code == 0, ingested.err
    assert (repo / ".matrixgen" / "results.db").is_file()
    (repo / "megatron/core/ssm/mamba_block.py").write_text("changed\n")
    _, changed = generate(repo, "--changed-since", "HEAD")
    assert changed["changes"]["fallback"] is None, changed["changes"]
    assert changed["changes"]["changed_files"] == ["megatron/core/ssm/mamba_block.py"]


# --- which changed paths belong to the tree -------------------------------
#
# One rule (util.checkout.in_tree over util.checkout.tree_path) decides for
# --changed-since, --changed-view and the diff. A tree in a dot-folder once lost
# its leading dot on the way, so no change to it counted as one.

# Folder names a checkout can hold, dot-folders and dotted names among them.
SEGMENT = st.sampled_from(
    [".ci", "ci", ".github", "recipes", ".r", "r.", "..x", "a.b", "x", "tests", "c i"]
)
segments_st = st.lists(SEGMENT, max_size=4)


@given(tree=segments_st, rest=st.lists(SEGMENT, max_size=4), file=SEGMENT)
def test_a_path_is_in_the_tree_exactly_when_it_is_below_its_folder(
    tree: list[str], rest: list[str], file: str
) -> None:
    top = Path("/checkout")
    folder = tree_path(top, top.joinpath(*tree))
    assert folder == "/".join(tree)  # the folder as git names it: dots kept
    path = "/".join([*rest, file])
    # The reference: the path's leading folders are the tree's folders.
    expected = [*rest, file][: len(tree)] == tree
    assert in_tree(path, folder) is expected
    # Below the tree, its config and its quarantine file are all in it.
    for name in ("matrixgen.yaml", "quarantine.yaml", f"{file}/{file}"):
        assert in_tree("/".join([*tree, name]), folder)
    # The same folder written with ./ and a trailing slash is the same tree.
    assert in_tree(path, "./" + folder + "/") is expected


def test_tree_paths_at_the_top_outside_and_through_a_link(tmp_path: Path) -> None:
    top = tmp_path / "checkout"
    (top / ".ci" / "recipes").mkdir(parents=True)
    assert tree_path(top, top) == ""
    assert all(in_tree(p, "") for p in ("README.md", ".ci/recipes/quarantine.yaml"))
    assert tree_path(top, tmp_path / "elsewhere") is None
    (top / "recipes").symlink_to(top / ".ci" / "recipes")
    # git reports the changes under the folder the link points to.
    assert tree_path(top, top / "recipes") == ".ci/recipes"


@pytest.mark.parametrize("where", [".ci/recipes", "ci/.matrix/recipes", "."])
@pytest.mark.parametrize("change", ["ignore-everything", "quarantine"])
def test_a_change_to_a_tree_anywhere_keeps_the_full_selection(
    tmp_path: Path, pinned_today: object, where: str, change: str
) -> None:
    # A pull request that edits only the tree (here: tells change-based selection to
    # ignore every file, or edits a quarantine entry) must not slim the selection.
    root = tmp_path / "repo"
    tree = root / where
    shutil.copytree(REPO / "recipes", tree, dirs_exist_ok=True)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    if change == "ignore-everything":
        config = tree / "matrixgen.yaml"
        text = config.read_text()
        assert 'ignore: ["docs/**"' in text
        config.write_text(text.replace('ignore: ["docs/**"', 'ignore: ["**", "docs/**"'))
    else:
        with (tree / "quarantine.yaml").open("a") as handle:
            handle.write("\n# changed\n")
    out = tmp_path / "out"
    argv = ["--recipes", str(tree), "--format", "json", "--changed-since", "HEAD"]
    full = run_cli(["generate", "--recipes", str(tree), "--out", str(out), "--format", "json"])
    run = run_cli(["generate", "--out", str(out), *argv])
    assert run.code == 0, run.err
    changes = json.loads(run.out)["changes"]
    assert changes["fallback"] == TREE_CHANGED, changes["fallback_reason"]
    jobs = [t["jobs"] for t in json.loads(run.out)["targets"]]
    assert jobs == [t["jobs"] for t in json.loads(full.out)["targets"]]
    listed = run_cli(["list", *argv])
    assert len(json.loads(listed.out)) == len(json.loads(run_cli(["list", *argv[:-2]]).out))
    # The diff's view of the same change decides the same.
    view = run_cli(["diff", "HEAD", "--changed-view", *argv[:-2]])
    assert view.code == 0, view.err
    assert json.loads(view.out)["changed_view"]["fallback"] == TREE_CHANGED


def _left_out(names: list[str]) -> Dropped:
    """One job left out of each named target (30 GPU-h), none of a last one."""
    job = Job(
        model="gpt",
        test_case="gpt_a",
        environment="dev",
        platform="dgx_h100",
        tag=None,
        scope="mr",
        cadence=("pr",),
        name="gpt_a",
        build=None,
        n_repeat=5,
        time_limit=2700,
    )
    selector = Selector(scope="mr", platform="dgx_h100", environment="dev")
    targets = [Target(name=n, system=System.GITLAB, selector=selector) for n in [*names, "none"]]
    cost = Cost(jobs=1, gpu_hours_max=30, weighted_max=30)
    rows = [(t, ((job, "not needed"),), cost) for t in targets[:-1]]
    selection = ChangeSelection(changes=ChangeSet(ref="main", files=("a.py",)), fallback=None)
    return Dropped(selection=selection, targets=(*rows, (targets[-1], (), Cost())))


@given(st.text(min_size=1, max_size=8))
@example("a\\b")  # a backslash: two in the terminal (escaped once), never four
@example("##[group]x")
@example("x\n::error::y")
@example("`|`")
def test_what_is_left_out_is_one_table_in_both_formats(name: str) -> None:
    dropped = _left_out([name, "other"])
    text = render_dropped(dropped, details=False)
    # The terminal table of the raw cells (escaped once, by `table`); no "runs".
    rows = [[name, "1", "30"], ["other", "1", "30"]]
    assert text.split("\n", 1)[1] == table(rows, ["target", "left out", "GPU-h saved"])
    report = dropped_report(dropped, {name: "2 of 3", "other": "1 of 2"})
    assert report.markdown() == [
        "| target | runs | left out | GPU-h saved |",
        "| :-- | --: | --: | --: |",
        f"| {markdown_code(name)} | 2 of 3 | 1 | 30 |",
        "| `other` | 1 of 2 | 1 | 30 |",
    ]
