"""The diff on the changes Megatron-LM makes to its own tree, each built as a
real commit on a copy of that tree: a case parked in a habit scope, a row
commented out with its tracker, the way back, a renamed scope, a script_setup
edit in several files and a second `test_case` the parser ignores.

Each is asserted on the JSON, and on what Megatron-LM's parser would select
(matrixgen's selection before quarantine, which test_compat holds equal to
the parser's): a habit is a quarantine change here and a removal there, and
the JSON says both."""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from matrixgen.diff.comment import render_markdown
from matrixgen.diff.data import to_json_data
from matrixgen.diff.gitsource import Repository
from matrixgen.diff.model import SelectionDiff
from matrixgen.diff.render import render_text
from matrixgen.diff.revisions import diff_revisions
from matrixgen.model.jobs import Job, Target
from matrixgen.pipeline import Generation, generate_from_files
from tests.conftest import require_megatron
from tests.gitrepo import GitRepo

GPT = "recipes/h100/gpt.yaml"
# Two rows of h100/gpt.yaml as upstream has them.
FIM = """  - test_case: [gpt3_mcore_te_tp1_pp1_dist_optimizer_fim_dataset]
    products:
      - environment: [dev]
        scope: [mr, mr-github]
        platforms: [dgx_h100]
"""
VP1 = """  - test_case: [gpt3_mcore_te_tp1_pp4_vp1]
    products:
      - environment: [dev]
        scope: [mr, mr-github]
        platforms: [dgx_h100]
      - environment: [lts]
        scope: [nightly]
"""
RECOMPUTE = """  - test_case: [gpt3_mcore_te_tp1_pp1_resume_torch_dist_uniform_full_recompute]
    products:
      - environment: [dev]
        scope: [mr, mr-github]
        platforms: [dgx_h100]
"""
FIM_CASE = "gpt3_mcore_te_tp1_pp1_dist_optimizer_fim_dataset"
VP1_CASE = "gpt3_mcore_te_tp1_pp4_vp1"
RECOMPUTE_CASE = "gpt3_mcore_te_tp1_pp1_resume_torch_dist_uniform_full_recompute"
SETUP_FILES = 5  # files whose script_setup the edit changes


class Upstream:
    """A repository holding the tree and one commit per kind of change."""

    def __init__(self, top: Path, tree: Path) -> None:
        self.repo = GitRepo(top)
        shutil.copytree(tree, top / "recipes")
        for path in [top / "recipes", *(top / "recipes").rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
        self.base = self.repo.commit(message="the tree as upstream has it")
        self.repository = Repository(top)
        self.commits: dict[str, str] = {}
        self._diffs: dict[tuple[str, str, bool], tuple[SelectionDiff, list]] = {}

    def change(self, name: str, edit: Callable[[Path], None]) -> str:
        """Commit the edit on top of the base tree."""
        self.repo.git("checkout", "-q", self.base, "--", "recipes")
        edit(self.repo.top)
        self.commits[name] = self.repo.commit(message=name)
        return self.commits[name]

    def diff(self, base: str, head: str, *, holding_pen: bool = False) -> SelectionDiff:
        key = (base, head, holding_pen)
        if key not in self._diffs:
            self._diffs[key] = diff_revisions(
                self.repository, "recipes", base, head, holding_pen=holding_pen
            )
        return self._diffs[key][0]

    def generation(self, revision: str) -> Generation:
        return generate_from_files(self.repository.read(revision, "recipes").files, root="recipes")


def replace(top: Path, rel: str, old: str, new: str) -> None:
    path = top / rel
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _habit_move(top: Path) -> None:
    # Two cases parked, as upstream parks them: one with its tracker above the row.
    fim = FIM.replace(
        "      - environment: [dev]\n", "      # hang: #513\n      - environment: [dev]\n"
    )
    replace(top, GPT, FIM, fim.replace("scope: [mr, mr-github]", "scope: [mr-broken, mr-github]"))
    vp1 = VP1.replace("scope: [mr, mr-github]", "scope: [mr, mr-github-broken]")
    replace(top, GPT, VP1, vp1.replace("scope: [nightly]", "scope: [nightly-broken]"))


def _commented(top: Path, *, comment: str = "# hang: #513") -> None:
    lines = RECOMPUTE.splitlines(keepends=True)
    out = (
        lines[:2] + [f"      {comment}\n"] + [re.sub(r"^      ", "      # ", x) for x in lines[2:]]
    )
    replace(top, GPT, RECOMPUTE, "".join(out).replace("#   ", "#   "))


def _rename(top: Path) -> None:
    for path in sorted((top / "recipes").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        if "mr-slim" in text:
            path.write_text(re.sub(r"\bmr-slim\b", "mr-lean", text), encoding="utf-8")


def setup_files(top: Path) -> list[str]:
    found = [
        p.relative_to(top / "recipes").as_posix()
        for p in sorted((top / "recipes").rglob("*.yaml"))
        if "  umask 077\n" in p.read_text(encoding="utf-8") and "script_setup" in p.read_text()
    ]
    return found[:SETUP_FILES]


def _script_setup(top: Path) -> None:
    for rel in setup_files(top):
        replace(top, f"recipes/{rel}", "    umask 077\n", "    umask 027\n")


def _extra_test_case(top: Path) -> None:
    replace(
        top,
        GPT,
        f"  - test_case: [{FIM_CASE}]",
        f"  - test_case: [{FIM_CASE}, gpt_583m_perf_async_sched]",
    )


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Upstream:
    tree = require_megatron()
    up = Upstream(tmp_path_factory.mktemp("upstream") / "repo", tree)
    up.change("habit move", _habit_move)
    up.change("commented out", _commented)
    up.change("commented out, no tracker", lambda top: _commented(top, comment="# hangs"))
    up.change("scope rename", _rename)
    up.change("script_setup", _script_setup)
    up.change("extra test_case", _extra_test_case)
    return up


def targets_of(result: SelectionDiff) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in to_json_data(result)["targets"]}


def parser_selection(generation: Generation, target: Target) -> set[str]:
    """What Megatron-LM's parser selects for the target: no quarantine file, no habit."""
    return {str(j.identity) for j in generation.select(target.selector)}


def _case(item: dict[str, Any]) -> str:
    return item["job"]["test_case"]


def _where(result: SelectionDiff, case: str, scope_tier: str) -> list[str]:
    return sorted(
        t["name"]
        for t in targets_of(result).values()
        if any(_case(q) == case for q in t["quarantine"]) and t["target"]["scope"] == scope_tier
    )


# ---------------------------------------------------------------- habits


def test_a_habit_move_is_a_quarantine_change_and_a_removal_to_the_parser(
    upstream: Upstream,
) -> None:
    result = upstream.diff(upstream.base, upstream.commits["habit move"])
    targets = targets_of(result)
    mr = targets["gitlab-mr-dgx_h100-dev"]
    assert mr["removed"] == [] and mr["added"] == []
    changes = {_case(q): q for q in mr["quarantine"]}
    assert set(changes) == {FIM_CASE}
    fim = changes[FIM_CASE]
    assert (fim["change"], fim["old"], fim["new"], fim["parser"]) == (
        "quarantined",
        None,
        None,
        "removed",
    )
    # The habit named, with the comment above the parked row and its tracker.
    assert fim["habit"] == {"scope": "mr-broken", "comment": "# hang: #513", "tracker": "#513"}
    assert fim["job"]["scope"] == "mr"  # the job as it ran, in the scope it left
    # mr-github -> mr-github-broken: GitHub L1; nightly -> nightly-broken: L2.
    l1 = targets["github-L1-dgx_h100-dev"]
    assert [(_case(q), q["habit"]) for q in l1["quarantine"]] == [
        (VP1_CASE, {"scope": "mr-github-broken"})
    ]
    nightly = [t for t in targets.values() if t["target"]["scope"] == "L2" and t["quarantine"]]
    assert [(_case(q), q["habit"]) for t in nightly for q in t["quarantine"]] == [
        (VP1_CASE, {"scope": "nightly-broken"})
    ]
    # Nothing is counted as removed anywhere; the parser counts three removals.
    summary = to_json_data(result)["summary"]
    assert (summary["removed"], summary["quarantine"], summary["parser"]) == (
        0,
        3,
        {"added": 0, "removed": 3},
    )
    # ... which is what the parser selects: per target, its removals are ours.
    before = upstream.generation(upstream.base)
    after = upstream.generation(upstream.commits["habit move"])
    for t in result.targets:
        gone = parser_selection(before, t.target) - parser_selection(after, t.target)
        came = parser_selection(after, t.target) - parser_selection(before, t.target)
        assert t.parser_counts() == {"added": len(came), "removed": len(gone)}, t.target.name
    # The branch changes jobs in habit scopes: the note says which, once.
    notes = [n for n in result.notes if "quarantine habits" in n]
    assert len(notes) == 1
    assert notes[0].startswith("scope(s) mr-broken, mr-github-broken, nightly-broken:")


@pytest.mark.parametrize(
    ("base", "head"),
    [
        ("", "habit move"),
        ("habit move", ""),
        ("", "commented out"),
        ("commented out", ""),
        ("", "scope rename"),
        ("scope rename", ""),
        ("", "script_setup"),
        ("", "extra test_case"),
    ],
)
def test_the_parser_counts_are_what_the_parser_selects(
    upstream: Upstream, base: str, head: str
) -> None:
    """Per target: the jobs Megatron-LM's parser selects at head and not at base,
    and the reverse, are what the JSON's parser counts say."""
    a, b = upstream.commits.get(base, upstream.base), upstream.commits.get(head, upstream.base)
    result = upstream.diff(a, b)
    before, after = upstream.generation(a), upstream.generation(b)
    for t, data in zip(result.targets, to_json_data(result)["targets"], strict=True):
        gone = parser_selection(before, t.target) - parser_selection(after, t.target)
        came = parser_selection(after, t.target) - parser_selection(before, t.target)
        assert data["counts"]["parser"] == {"added": len(came), "removed": len(gone)}, t.target
        # No quarantine file: what starts and stops running is what the parser
        # gains and loses, a row parked in a habit scope or commented out included.
        starts, stops = t.running_changes()
        assert {str(j.identity) for j in starts} == came, t.target
        assert {str(j.identity) for j in stops} == gone, t.target
        assert (data["counts"]["starts"], data["counts"]["stops"]) == (len(came), len(gone))


def test_holding_pens_belong_to_no_system_and_cost_nothing(upstream: Upstream) -> None:
    result = upstream.diff(upstream.base, upstream.commits["habit move"], holding_pen=True)
    data = to_json_data(result)
    pens = {t["name"]: t for t in data["targets"] if t.get("holding_pen")}
    assert "holding-pen-mr-github-broken-dgx_h100-dev" in pens
    assert not [n for n in pens if n.startswith(("gitlab-", "github-"))]
    pen = pens["holding-pen-mr-broken-dgx_h100-dev"]
    assert [j["test_case"] for j in pen["added"]] == [FIM_CASE]
    assert all(
        (t["gpu_hours_before"], t["gpu_hours_after"], t["weighted_gpu_hours_after"]) == (0, 0, 0)
        for t in pens.values()
    )
    assert not [p for p in data["summary"]["pipelines"] if "broken" in p["pipeline"]]
    assert {t["target"]["system"] for t in pens.values()} == {None}
    # A rule about GitLab's targets does not count the pens.
    from matrixgen.diff.expect import evaluate, parse_rule

    [gitlab, every] = evaluate([parse_rule(r) for r in ["gitlab/*:=0", "*/*:=0"]], result)
    assert not [n for n in gitlab.targets if n.startswith("holding-pen-")]
    assert "holding-pen-mr-broken-dgx_h100-dev" in every.targets
    assert "holding-pen-mr-broken-dgx_h100-dev (holding pen mr-broken dgx_h100 dev)" in (
        render_text(result)
    )
    # The real target still says quarantined, not removed.
    assert (
        data["targets"][[t["name"] for t in data["targets"]].index("gitlab-mr-dgx_h100-dev")][
            "removed"
        ]
        == []
    )


def test_a_commented_out_row_is_quarantined_with_its_comment(upstream: Upstream) -> None:
    result = upstream.diff(upstream.base, upstream.commits["commented out"])
    targets = targets_of(result)
    for name in ("gitlab-mr-dgx_h100-dev", "github-L1-dgx_h100-dev"):
        t = targets[name]
        assert t["removed"] == [], name
        assert [(_case(q), q["change"], q["habit"], q["parser"]) for q in t["quarantine"]] == [
            (
                RECOMPUTE_CASE,
                "quarantined",
                {"comment": "# hang: #513", "tracker": "#513"},
                "removed",
            )
        ], name
    assert sum(len(t.quarantine) for t in result.targets) == 2
    text = render_text(result)
    assert f"q quarantined gpt/{RECOMPUTE_CASE}: commented out: # hang: #513, tracker #513" in text
    # No habit scope changes: no habit-scope note.
    assert not [n for n in result.notes if "quarantine habits" in n]
    # Nor a new finding: one whose count in its message moved (a platform used
    # one time fewer) is the same finding.
    assert to_json_data(result)["findings"] == {"added": [], "removed": []}


def test_a_row_commented_out_without_a_tracker_is_a_removal(upstream: Upstream) -> None:
    """migrate's rule: a commented-out row that names no tracker is no habit."""
    result = upstream.diff(upstream.base, upstream.commits["commented out, no tracker"])
    targets = targets_of(result)
    for name in ("gitlab-mr-dgx_h100-dev", "github-L1-dgx_h100-dev"):
        assert [j["test_case"] for j in targets[name]["removed"]] == [RECOMPUTE_CASE]
        assert targets[name]["quarantine"] == []


@pytest.mark.parametrize("kind", ["habit move", "commented out"])
def test_the_way_back_is_a_lift(upstream: Upstream, kind: str) -> None:
    forward = upstream.diff(upstream.base, upstream.commits[kind])
    back = upstream.diff(upstream.commits[kind], upstream.base)
    there = {
        (t.target.name, q.job.test_case, q.change) for t in forward.targets for q in t.quarantine
    }
    home = {(t.target.name, q.job.test_case, q.change) for t in back.targets for q in t.quarantine}
    assert there and {(n, c, "lifted") for n, c, _ in there} == home
    assert all(ch == "quarantined" for _, _, ch in there)
    for t in back.targets:
        assert t.added == (), t.target.name
        for q in t.quarantine:
            assert q.parser == "added" and q.habit is not None
            assert q.habit == next(
                p.habit for f in forward.targets for p in f.quarantine if f.target == t.target
            )
    summary = to_json_data(back)["summary"]
    assert summary["parser"]["added"] == summary["quarantine"] and summary["added"] == 0


# ---------------------------------------------------------------- moves


def test_a_scope_rename_is_a_move(upstream: Upstream) -> None:
    result = upstream.diff(upstream.base, upstream.commits["scope rename"])
    data = to_json_data(result)
    before = upstream.generation(upstream.base)
    slim = {
        p: sorted(j.test_case for j in before.jobs if j.scope == "mr-slim" and j.platform == p)
        for p in ("dgx_h100", "dgx_gb200")
    }
    assert all(slim.values())  # the tree has mr-slim jobs on both platforms
    assert data["summary"]["moves"] == [
        {
            "from": f"gitlab-mr-slim-{p}-dev",
            "to": f"gitlab-mr-lean-{p}-dev",
            "jobs": len(slim[p]),
        }
        for p in ("dgx_gb200", "dgx_h100")
    ]
    assert (data["summary"]["added"], data["summary"]["removed"]) == (0, 0)
    targets = targets_of(result)
    for p, cases in slim.items():
        old, new = targets[f"gitlab-mr-slim-{p}-dev"], targets[f"gitlab-mr-lean-{p}-dev"]
        assert [m["job"]["test_case"] for m in old["moved_out"]] == cases
        assert {m["to"] for m in old["moved_out"]} == {f"gitlab-mr-lean-{p}-dev"}
        assert [m["job"]["test_case"] for m in new["moved_in"]] == cases
        assert {m["from"] for m in new["moved_in"]} == {f"gitlab-mr-slim-{p}-dev"}
        # To the parser, a move is a removal there and an addition here.
        assert old["counts"]["parser"] == {"added": 0, "removed": len(cases)}
        assert new["counts"]["parser"] == {"added": len(cases), "removed": 0}
    text = render_text(result)
    assert "moved from gitlab-mr-slim-dgx_h100-dev to gitlab-mr-lean-dgx_h100-dev (" in text
    markdown = render_markdown(result)
    assert "**Moves**" in markdown and "· 4 moved**" in markdown
    assert (
        f"- moved from `gitlab-mr-slim-dgx_h100-dev` to `gitlab-mr-lean-dgx_h100-dev` "
        f"({len(slim['dgx_h100'])} jobs)"
    ) in markdown


# ---------------------------------------------------------------- what runs


def launcher_workload(job: Job) -> dict[str, Any]:
    """What Megatron-LM's launcher submits for a job (recipe_parser.load_workloads):
    the recipe's resolved spec, its n_repeat and time_limit replaced by the
    launcher's own arguments (which the pipeline passes, as emitted fields)."""
    return {k: v for k, v in job.spec.items() if k not in ("n_repeat", "time_limit")}


def workload_difference(before: Generation, after: Generation, target: Target) -> dict[str, set]:
    """Per job running on both sides: the workload fields that differ."""
    old = {str(j.identity): j for j in before.selection(target).jobs}
    new = {str(j.identity): j for j in after.selection(target).jobs}
    out = {}
    for identity in old.keys() & new.keys():
        a, b = launcher_workload(old[identity]), launcher_workload(new[identity])
        keys = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        if keys:
            out[identity] = {f"workload.{k}" for k in keys}
    return out


@pytest.mark.parametrize("kind", ["script_setup", "habit move", "scope rename", "extra test_case"])
def test_the_diff_is_the_difference_of_the_resolved_workloads(
    upstream: Upstream, kind: str
) -> None:
    result = upstream.diff(upstream.base, upstream.commits[kind])
    before, after = upstream.generation(upstream.base), upstream.generation(upstream.commits[kind])
    for t in result.targets:
        seen = {
            str(c.head.identity): {f for f in c.fields if f.startswith("workload.")}
            for c in t.changed
        }
        seen = {k: v for k, v in seen.items() if v}
        assert seen == workload_difference(before, after, t.target), (kind, t.target.name)


def test_a_script_setup_edit_changes_every_job_it_reaches(upstream: Upstream) -> None:
    head = upstream.commits["script_setup"]
    result = upstream.diff(upstream.base, head)
    files = set(setup_files(upstream.repo.top))
    assert len(files) == SETUP_FILES
    after = upstream.generation(head)
    # Every job these files define, in every target that runs it, is changed.
    want = sum(
        1 for t in result.targets for j in after.selection(t.target).jobs if j.recipe in files
    )
    changed = [c for t in result.targets for c in t.changed]
    assert len(changed) == want > SETUP_FILES
    assert {c.head.recipe for c in changed} == files
    for c in changed:
        assert list(c.fields) == ["workload.script_setup"]
        old, new = c.fields["workload.script_setup"]
        assert old.replace("umask 077", "umask 027") == new
    data = to_json_data(result)
    assert data["summary"]["changed"] == want
    assert (data["summary"]["added"], data["summary"]["removed"]) == (0, 0)
    text = render_text(result)
    assert "      workload.script_setup:\n" in text
    assert "        -umask 077\n        +umask 027\n" in text


# ---------------------------------------------------------------- findings


def test_an_extra_test_case_is_a_new_finding(upstream: Upstream) -> None:
    head = upstream.commits["extra test_case"]
    result = upstream.diff(upstream.base, head)
    assert result.unchanged  # the parser reads the first test case only
    data = to_json_data(result)
    line = next(
        n
        for n, text in enumerate(
            (upstream.repo.top / GPT).read_text(encoding="utf-8").splitlines(), 1
        )
        if "gpt_583m_perf_async_sched" in text
    )
    [found] = data["findings"]["added"]
    assert found["code"] == "test-case-extra" and found["severity"] == "warning"
    assert found["location"].startswith(f"recipes/h100/gpt.yaml:{line}:")
    assert "gpt_583m_perf_async_sched" in found["message"]
    assert data["findings"]["removed"] == []
    # The reverse diff removes it; a diff without a finding change lists none.
    back = to_json_data(upstream.diff(head, upstream.base))["findings"]
    assert back["added"] == [] and [f["code"] for f in back["removed"]] == ["test-case-extra"]
    assert to_json_data(upstream.diff(upstream.base, upstream.commits["scope rename"]))[
        "findings"
    ] == {"added": [], "removed": []}
    assert "test-case-extra" in render_text(result)
    assert "`test-case-extra` (warning) at `recipes/h100/gpt.yaml:" in render_markdown(result)


def _cli(upstream: Upstream, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matrixgen", "diff", *args, "--recipes", "recipes"],
        cwd=upstream.repo.top,
        capture_output=True,
        text=True,
        check=False,
    )


def test_expect_findings_fails_a_branch_that_adds_one(upstream: Upstream) -> None:
    head = upstream.commits["extra test_case"]
    run = _cli(upstream, upstream.base, head, "--expect", "*:findings=0")
    assert run.returncode == 6, run.stderr
    assert "expected exactly 0 new finding(s), got 1 new finding(s)" in run.stderr
    ok = _cli(upstream, upstream.base, upstream.commits["scope rename"], "--expect", "*:findings=0")
    assert ok.returncode == 0, ok.stderr


def test_the_habit_note_once_and_only_when_a_habit_scope_changes(upstream: Upstream) -> None:
    habit = upstream.commits["habit move"]
    run = _cli(upstream, upstream.base, habit)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("quarantine habits") == 1
    assert "quarantine habits" not in run.stdout
    markdown = _cli(upstream, upstream.base, habit, "--format", "markdown")
    assert markdown.stdout.count("quarantine habits") == 1
    # A branch that changes no habit scope: no note at all.
    quiet = _cli(
        upstream, upstream.base, upstream.commits["extra test_case"], "--format", "markdown"
    )
    assert "quarantine habits" not in quiet.stdout + quiet.stderr
    # A script_setup edit of files that hold parked rows: their jobs' workload
    # changes, none joins or leaves a habit scope: no note either.
    edited = setup_files(upstream.repo.top)
    row = re.compile(r"scope: \[[^\]]*(-broken|-temp-disabled|flaky)")
    parked = [r for r in edited if row.search((upstream.repo.top / "recipes" / r).read_text())]
    assert parked, edited
    setup = _cli(upstream, upstream.base, upstream.commits["script_setup"])
    assert setup.returncode == 0 and "quarantine habits" not in setup.stdout + setup.stderr
    data = json.loads(_cli(upstream, upstream.base, habit, "--format", "json").stdout)
    assert sum("quarantine habits" in n for n in data["notes"]) == 1


@pytest.mark.parametrize("holding_pen", [False, True])
def test_every_case_follows_the_published_schema(upstream: Upstream, holding_pen: bool) -> None:
    import jsonschema

    schema = json.loads((Path(__file__).parents[1] / "schema" / "diff.schema.json").read_text())
    for commit in sorted(upstream.commits.values()):
        for base, head in ((upstream.base, commit), (commit, upstream.base)):
            data = to_json_data(upstream.diff(base, head, holding_pen=holding_pen))
            jsonschema.validate(data, schema)
    # A habit without its scope or comment is refused.
    data = to_json_data(upstream.diff(upstream.base, upstream.commits["habit move"]))
    item = next(q for t in data["targets"] for q in t["quarantine"])
    item["habit"] = {}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)
