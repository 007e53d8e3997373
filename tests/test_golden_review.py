"""The golden-values review of `matrixgen diff` on histories built here: which
files it compares (git's tree diff; an unchanged file is never read), the jobs
that read each, what the JSON, the text and the PR comment say of them, bad
files as located problems while the rest of the diff still prints, and the
`--expect golden...` rules. Every expected figure is worked out here from the
files' own numbers."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import markdown_it
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from matrixgen.diff import golden_read, golden_render, golden_review
from matrixgen.diff.comment import render_markdown
from matrixgen.diff.goldens import GoldenFile, GoldenJob, GoldenReview, MetricChange
from matrixgen.diff.model import SelectionDiff
from matrixgen.diff.render import render_text
from matrixgen.model.errors import Location, finding
from matrixgen.util.values import json_value
from tests.conftest import Run, run_cli
from tests.gitrepo import GitRepo

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "schema" / "diff.schema.json").read_text(encoding="utf-8"))
CASES = "tests/functional_tests/test_cases"
RECIPE = """
type: basic
format_version: 1
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: mcore-pyt-{environment}
  nodes: 1
  gpus: 8
  platforms: dgx_h100
products:
  - test_case: [gpt_a]
    products:
      - {environment: [dev], scope: [mr]}
      - {environment: [dev], scope: [mr], platforms: [dgx_gb200]}
  - test_case: [gpt_b]
    products:
      - {environment: [dev], scope: [mr, nightly]}
"""
BUILD = "type: build\nformat_version: 1\nspec: {name: mcore-pyt-dev}\n"


def golden(metrics: dict[str, dict[str, Any]]) -> str:
    """A golden-values file in Megatron-LM's training layout."""
    return json.dumps(
        {
            name: {"start_step": 1, "end_step": 3, "step_interval": 1, "values": values}
            for name, values in metrics.items()
        },
        indent=1,
        allow_nan=True,
    )


def path(case: str, env: str = "dev", platform: str = "dgx_h100", model: str = "gpt") -> str:
    return f"{CASES}/{model}/{case}/golden_values_{env}_{platform}.json"


A_H100, A_GB200, B_H100 = path("gpt_a"), path("gpt_a", platform="dgx_gb200"), path("gpt_b")
OLD_A = {
    "lm loss": {"1": 10.0, "2": 8.0, "3": 4.0},
    "num-zeros": {"1": 100.0, "2": 0.0, "3": 50.0},
    "iteration-time": {"1": "nan", "2": 2.0, "3": 1.0},
}
NEW_A = {
    "lm loss": {"1": 10.0, "2": 7.0, "3": 5.0},
    "num-zeros": {"1": 100.0, "2": 3.0, "3": 50.0},
    "iteration-time": {"2": 1.0, "3": 1.5},
}


@pytest.fixture
def megatron_like(tmp_path: Path) -> GitRepo:
    """A checkout laid out as Megatron-LM's, no config: recipes, golden values
    for three jobs and one orphan, committed on main."""
    repo = GitRepo(tmp_path / "repo")
    repo.write(
        {
            "tests/test_utils/recipes/h100/gpt.yaml": RECIPE,
            "tests/test_utils/recipes/_build-mcore-dev.yaml": BUILD,
            A_H100: golden(OLD_A),
            A_GB200: golden({"lm loss": {"1": 1.0}}),
            B_H100: golden({"lm loss": {"1": 2.0}}),
            path("gpt_z"): golden({"lm loss": {"1": 3.0}}),
            f"{CASES}/gpt/gpt_a/model_config.yaml": "MODEL_ARGS: {}\n",
        },
        under="",
    )
    repo.commit(message="base")
    return repo


def commit(repo: GitRepo, files: dict[str, str | None], message: str = "change") -> None:
    """Write files (paths from the top of the checkout; None deletes) and commit."""
    repo.write(files, under="")
    repo.commit(message=message)


def diff(repo: GitRepo, *args: str) -> Run:
    cwd = os.getcwd()
    os.chdir(repo.top)
    try:
        return run_cli(["diff", *args])
    finally:
        os.chdir(cwd)


def json_of(repo: GitRepo, *args: str) -> dict[str, Any]:
    run = diff(repo, *args, "--format", "json")
    assert run.code == 0, run
    data = json.loads(run.out)
    jsonschema.validate(data, SCHEMA)
    return data


def by_name(item: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in item["metrics"]}


# ---------------------------------------------------------------- the review


def test_a_refresh_is_compared_file_by_file_with_the_jobs_that_read_it(
    megatron_like: GitRepo,
) -> None:
    repo = megatron_like
    commit(
        repo,
        {
            A_H100: golden(NEW_A),
            path("gpt_b", env="lts"): golden({"lm loss": {"1": 1.0}}),  # no lts job: an orphan
            path("gpt_z"): None,
        },
    )
    data = json_of(repo, "HEAD~1", "HEAD")
    items = {item["path"]: item for item in data["golden_changes"]}
    assert list(items) == sorted([A_H100, path("gpt_b", env="lts"), path("gpt_z")])
    refreshed = items[A_H100]
    assert (refreshed["status"], refreshed["orphan"], refreshed["gated_by"]) == (
        "changed",
        False,
        "default",
    )
    assert (refreshed["model"], refreshed["test_case"], refreshed["environment"]) == (
        "gpt",
        "gpt_a",
        "dev",
    )
    assert refreshed["platform"] == "dgx_h100"
    assert refreshed["jobs"] == [
        {"target": "gitlab-mr-dgx_h100-dev", "model": "gpt", "test_case": "gpt_a"}
    ]
    metrics = by_name(refreshed)
    assert list(metrics) == ["lm loss", "num-zeros", "iteration-time"]
    loss = metrics["lm loss"]
    # (10-10)/10 = 0, (8-7)/8 = 0.125, (4-5)/4 = -0.25: mean -0.041666..., largest 25 at step 3.
    assert loss["gated"] and loss["status"] == "changed"
    assert loss["mean_rel_change_pct"] == pytest.approx(100 * (0 + 0.125 - 0.25) / 3)
    assert (loss["max_abs_rel_change_pct"], loss["max_step"]) == (pytest.approx(25.0), "3")
    assert (loss["steps_compared"], loss["steps_added"], loss["steps_removed"]) == (3, 0, 0)
    zeros = metrics["num-zeros"]
    # Step 2's old value is 0: compared, not measured.
    assert (zeros["steps_compared"], zeros["steps_skipped"]) == (3, 1)
    assert zeros["mean_rel_change_pct"] == 0.0 and zeros["status"] == "changed"
    timing = metrics["iteration-time"]
    # Step 1 ("nan") is gone; (2-1)/2 = 0.5, (1-1.5)/1 = -0.5.
    assert not timing["gated"]
    assert (timing["steps_compared"], timing["steps_removed"], timing["non_finite_new"]) == (
        2,
        1,
        0,
    )
    assert timing["mean_rel_change_pct"] == pytest.approx(0.0)
    assert timing["max_abs_rel_change_pct"] == pytest.approx(50.0) and timing["max_step"] == "2"
    orphan = items[path("gpt_b", env="lts")]
    assert (orphan["status"], orphan["orphan"], orphan["jobs"]) == ("added", True, [])
    assert by_name(orphan)["lm loss"]["status"] == "added"
    gone = items[path("gpt_z")]
    assert (gone["status"], gone["orphan"]) == ("removed", True)
    assert by_name(gone)["lm loss"]["steps_removed"] == 1


def test_the_jobs_of_every_target_read_a_file_and_a_variant(megatron_like: GitRepo) -> None:
    repo = megatron_like
    second = path("gpt_b").replace(".json", "_2nd.json")
    commit(repo, {B_H100: golden({"lm loss": {"1": 2.5}}), second: golden({})})
    data = json_of(repo, "HEAD~1", "HEAD")
    items = {item["path"]: item for item in data["golden_changes"]}
    expected = [
        {"target": "gitlab-L2-dgx_h100-dev", "model": "gpt", "test_case": "gpt_b"},
        {"target": "gitlab-mr-dgx_h100-dev", "model": "gpt", "test_case": "gpt_b"},
    ]
    assert items[B_H100]["jobs"] == expected
    assert items[second]["jobs"] == expected  # the resumed run's values belong to the job


def test_files_git_knows_unchanged_are_never_read(
    megatron_like: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = megatron_like
    for i in range(30):  # files of cases no commit of the branch touches
        repo.write({path(f"gpt_{i}"): golden({"lm loss": {"1": float(i)}})}, under="")
    repo.commit(message="more cases")
    commit(repo, {A_H100: golden(NEW_A)})
    parsed: list[tuple[str, str]] = []
    configs: list[str] = []
    real_parse, real_gating = golden_review.parse_golden, golden_review.read_gating

    def parse(raw: bytes, where: str, side: str) -> Any:
        parsed.append((where, side))
        return real_parse(raw, where, side)

    def gating(raw: bytes | None, where: str) -> Any:
        configs.append(where)
        return real_gating(raw, where)

    monkeypatch.setattr(golden_review, "parse_golden", parse)
    monkeypatch.setattr(golden_review, "read_gating", gating)
    data = json_of(repo, "HEAD~1", "HEAD")
    assert [i["path"] for i in data["golden_changes"]] == [A_H100]
    assert sorted(parsed) == [(A_H100, "base"), (A_H100, "head")]
    assert configs == [f"{CASES}/gpt/gpt_a/model_config.yaml"]


def test_the_working_tree_counts_edits_and_new_files_but_not_a_touched_one(
    megatron_like: GitRepo,
) -> None:
    repo = megatron_like
    repo.write({A_H100: golden(NEW_A), path("gpt_c"): golden({"lm loss": {"1": 1.0}})}, under="")
    touched = repo.top / B_H100
    os.utime(touched, (1, 1))  # its time changes, not its bytes
    data = json_of(repo, "main")
    items = {i["path"]: i["status"] for i in data["golden_changes"]}
    assert items == {A_H100: "changed", path("gpt_c"): "added"}
    assert data["head"] == "worktree"


def test_a_file_whose_bytes_are_the_bases_is_no_change(
    megatron_like: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should git's status report a file of the working tree whose time alone
    changed, its bytes say it is the base's."""
    repo = megatron_like
    real = golden_review.Repository.changed_files
    base_blob = repo.git("rev-parse", f"HEAD:{B_H100}")

    def with_a_touched_file(self: Any, base: str, head: str | None, where: str, *more: Any) -> Any:
        found = real(self, base, head, where, *more)
        touched = golden_review.PathChange(status="M", path=B_H100, old=base_blob)
        return [*found, touched]

    monkeypatch.setattr(golden_review.Repository, "changed_files", with_a_touched_file)
    repo.write({A_H100: golden(NEW_A)}, under="")
    assert [i["path"] for i in json_of(repo, "main")["golden_changes"]] == [A_H100]


def test_metrics_the_case_lists_are_the_gated_ones(megatron_like: GitRepo) -> None:
    repo = megatron_like
    commit(
        repo,
        {
            f"{CASES}/gpt/gpt_a/model_config.yaml": 'METRICS:\n  - "iteration-time"\n',
            A_H100: golden(NEW_A),
        },
    )
    (item,) = json_of(repo, "HEAD~1", "HEAD")["golden_changes"]
    assert item["gated_by"] == f"{CASES}/gpt/gpt_a/model_config.yaml"
    assert {m["name"]: m["gated"] for m in item["metrics"]} == {
        "lm loss": False,
        "num-zeros": False,
        "iteration-time": True,
    }


# ---------------------------------------------------------------- bad files


def test_bad_files_are_located_problems_and_the_rest_of_the_diff_still_prints(
    megatron_like: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = megatron_like
    big = golden({"lm loss": {str(s): 1.0 for s in range(400)}})
    monkeypatch.setattr(golden_read, "GOLDEN_MAX_BYTES", len(big) - 1)
    monkeypatch.setattr(golden_review, "GOLDEN_MAX_BYTES", len(big) - 1)
    link = repo.top / path("gpt_b")
    link.unlink()
    link.symlink_to("/etc/passwd")
    commit(
        repo,
        {
            "tests/test_utils/recipes/h100/gpt.yaml": RECIPE.replace("nodes: 1", "nodes: 2"),
            A_H100: '{"lm loss": {"values": {"1": 1.0,}}}',
            A_GB200: '{"lm loss": {"values": {"1": 1.0, "one": 2.0}}}',
            path("gpt_z"): big,
        },
    )
    run = diff(repo, "HEAD~1", "HEAD")
    assert run.code == 0, run
    assert "Traceback" not in run.out + run.err
    assert "~4 changed" in run.out  # the selection diff is all there (nodes 1 -> 2)
    assert f"{A_H100}:1:34: error: head: not JSON (Expecting property name" in run.out
    assert f'{A_GB200}:1:35: error: head: metric "lm loss": step "one"' in run.out
    assert f"{path('gpt_b')}: error: head: it is a symbolic link: not followed" in run.out
    assert f"{path('gpt_z')}: error: head: {len(big):,} bytes, more than the" in run.out
    assert "root:" not in run.out  # the link's target is never read
    data = json_of(repo, "HEAD~1", "HEAD")
    items = {i["path"]: i for i in data["golden_changes"]}
    assert not items[A_H100]["compared"] and items[A_H100]["metrics"] == []
    assert items[A_GB200]["compared"]
    assert by_name(items[A_GB200])["lm loss"]["status"] == "unchanged"
    assert [p["code"] for p in items[path("gpt_z")]["problems"]] == ["golden-size"]
    assert data["summary"]["changed"] == 4  # gpt_a in two targets, gpt_b in two
    assert diff(repo, "HEAD~1", "HEAD", "--expect", "golden:problems=0").code == 6


# ---------------------------------------------------------------- trees with a config


@pytest.fixture
def shipped(tmp_path: Path, pinned_today: object) -> GitRepo:
    repo = GitRepo(tmp_path / "shipped")
    shutil.copytree(REPO / "recipes", repo.top / "recipes")
    shutil.copytree(REPO / "tests" / "functional_tests", repo.top / "tests" / "functional_tests")
    repo.commit(message="shipped")
    return repo


SHIPPED_FILE = f"{CASES}/gpt/gpt3_tp1_pp1/golden_values_dev_dgx_h100.json"


def test_a_tree_with_a_config_reviews_the_files_of_its_golden_reference(shipped: GitRepo) -> None:
    old = json.loads((shipped.top / SHIPPED_FILE).read_text())
    new = json.loads(json.dumps(old))
    steps = new["lm loss"]["values"]
    first = next(iter(steps))
    steps[first] = steps[first] * 1.02
    commit(shipped, {SHIPPED_FILE: json.dumps(new)})
    (item,) = json_of(shipped, "HEAD~1", "HEAD")["golden_changes"]
    assert item["path"] == SHIPPED_FILE and item["jobs"]
    loss = by_name(item)["lm loss"]
    count = len(steps)
    assert loss["mean_rel_change_pct"] == pytest.approx(-2.0 / count)
    assert loss["max_abs_rel_change_pct"] == pytest.approx(2.0) and loss["max_step"] == first
    targets = {j["target"] for j in item["jobs"]}
    assert "gitlab-mr-h100-dev" in targets


def test_a_config_without_a_golden_reference_has_no_review(shipped: GitRepo) -> None:
    config = shipped.top / "recipes" / "matrixgen.yaml"
    text = config.read_text().replace("    golden: tests/", "    goldens: tests/")
    shipped.commit({"matrixgen.yaml": text}, message="renamed")
    data = json_of(shipped, "HEAD~1", "HEAD")
    assert "golden_changes" not in data
    run = diff(shipped, "HEAD~1", "HEAD", "--expect", "golden:files=0")
    assert run.code == 2 and "declares no golden values" in run.err


def test_jobs_a_skip_entry_keeps_out_are_listed_apart(shipped: GitRepo) -> None:
    entry = """
      - id: x-skip
        tracker: "#1"
        kind: broken
        action: skip
        reason: r
        owner: o
        added: 2026-11-01
        expires: 2027-01-01
        match: {test_case: gpt3_tp1_pp1}
    """
    quarantine = shipped.top / "recipes" / "quarantine.yaml"
    text = quarantine.read_text()
    assert "entries:\n" in text
    text = text.replace(
        "entries:\n",
        "entries:\n"
        + entry.strip("\n").replace("      -", "  -").replace("\n        ", "\n    ")
        + "\n",
        1,
    )
    shipped.commit({"quarantine.yaml": text}, message="skip")
    commit(shipped, {SHIPPED_FILE: (shipped.top / SHIPPED_FILE).read_text().replace("1", "2", 1)})
    (item,) = json_of(shipped, "HEAD~1", "HEAD")["golden_changes"]
    assert item["jobs"] == [] and item["quarantined_jobs"] and not item["orphan"]


# ---------------------------------------------------------------- --expect


@pytest.fixture
def refreshed(megatron_like: GitRepo) -> GitRepo:
    commit(megatron_like, {A_H100: golden(NEW_A)})
    return megatron_like


@pytest.mark.parametrize(
    ("rule", "code", "said"),
    [
        ("golden:files=1", 0, "holds (files=1: 1 golden-values file(s) changed (gpt/gpt_a"),
        ("golden:files=0", 6, "expected exactly 0 golden-values file(s) changed, got 1"),
        ("golden{gpt_a}:others=0", 0, "holds (others=0: 0 file(s) of other test cases)"),
        (
            "golden{gpt_b}:others=0",
            6,
            "got 1 file(s) of other test cases (gpt/gpt_a (dev dgx_h100))",
        ),
        ("golden:max<=25%", 0, "holds (max<=25%: 25.0% (lm loss at step 3 of gpt/gpt_a"),
        ("golden:max<25%", 6, "got 25.0% (lm loss at step 3 of gpt/gpt_a (dev dgx_h100))"),
        ("golden:mean<=4.2%", 0, "mean<=4.2%: 4.17% (lm loss of gpt/gpt_a"),
        (
            "golden:missing=0",
            6,
            "got 1 missing step(s) (iteration-time of gpt/gpt_a (dev dgx_h100): 1)",
        ),
        ("golden:nonfinite=0,orphans=0", 0, "holds (nonfinite=0: 0 non-finite sample(s), orphans"),
        ("golden{gpt_*}:files=1,problems=0", 0, "holds"),
    ],
)
def test_golden_rules(refreshed: GitRepo, rule: str, code: int, said: str) -> None:
    run = diff(refreshed, "HEAD~1", "HEAD", "--expect", rule)
    assert run.code == code, run
    assert said in run.err, run.err


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("golden:max<=2", 'max is a percentage: write "max<=2%"'),
        ("golden:maxx<=2%", '(did you mean "max"?)'),
        ("golden:others=0", '"others" counts the files of test cases the braces do not name'),
        ("golden:files=1,files=1", "a check is given twice"),
        ("golden{gpt_q}:files=1", '"gpt_q" is no test case of either side (did you mean "gpt_'),
        ("golden:+1", 'cannot read "+1"'),
    ],
)
def test_malformed_golden_rules_are_usage_errors(refreshed: GitRepo, rule: str, said: str) -> None:
    run = diff(refreshed, "HEAD~1", "HEAD", "--expect", rule)
    assert run.code == 2, run
    assert said in run.err, run.err


def test_a_rule_may_name_a_case_only_a_golden_file_has(megatron_like: GitRepo) -> None:
    commit(megatron_like, {path("gpt_new"): golden({})})
    run = diff(megatron_like, "HEAD~1", "HEAD", "--expect", "golden{gpt_new}:orphans=1,others=0")
    assert run.code == 0, run


# ---------------------------------------------------------------- text and comment


def metric(name: str, **kw: Any) -> MetricChange:
    return MetricChange(
        name=name, gated=kw.pop("gated", True), status=kw.pop("status", "changed"), **kw
    )


def review_of(strings: dict[str, str]) -> GoldenReview:
    """A review whose every name comes from `strings` (a hostile branch's files)."""
    problem = finding(Location(strings["path"], 3, 4), "golden-json", strings["message"])
    item = GoldenFile(
        path=strings["path"],
        status="changed",
        fields={
            "model": strings["model"],
            "test_case": strings["case"],
            "environment": strings["env"],
            "platform": strings["platform"],
        },
        jobs=(GoldenJob(strings["target"], strings["model"], strings["case"]),),
        metrics=(
            metric(
                strings["metric"],
                mean_rel_change_pct=-1.5,
                max_abs_rel_change_pct=3.0,
                max_step=strings["step"],
                steps_removed=1,
                non_finite_new=2,
            ),
            metric(strings["other"], gated=False, status="unchanged"),
        ),
        problems=(problem,),
    )
    return GoldenReview(template=strings["template"], files=(item, item))


KEYS = (
    "path",
    "message",
    "model",
    "case",
    "env",
    "platform",
    "target",
    "metric",
    "step",
    "other",
    "template",
)
ATTACKS = [
    "<script>alert(1)</script>",
    "![x](https://evil.example/p.png)",
    "[click](javascript:alert(1))",
    "\n\n# All clear\n",
    "\r\n| fake | row |\n",
    "</details><details open>",
    "`",
    "|",
    "\\",
    "\u2028# line separator",
    "*bold* _em_",
]
hostile = st.one_of(st.sampled_from(ATTACKS), st.text(min_size=1, max_size=12))


def selection(review: GoldenReview) -> SelectionDiff:
    return SelectionDiff(base="a" * 40, head="b" * 40, targets=(), goldens=review)


def blocks_of(text: str) -> list[Any]:
    return markdown_it.MarkdownIt("commonmark").enable("table").parse(text)


def tokens_of(text: str) -> list[Any]:
    out, todo = [], list(blocks_of(text))
    while todo:
        token = todo.pop(0)
        out.append(token)
        todo[:0] = token.children or []
    return out


@settings(max_examples=120, deadline=None)
@given(strings=st.fixed_dictionaries({k: hostile for k in KEYS}))
def test_the_comment_says_what_the_files_say_and_nothing_more(strings: dict[str, str]) -> None:
    assume(strings["metric"] != strings["other"])  # two metrics, two columns
    text = render_markdown(selection(review_of(strings)))
    tokens = tokens_of(text)
    plain = render_markdown(selection(review_of({k: f"x{k}" for k in KEYS})))
    assert not [t for t in tokens if t.type in ("image", "link_open")]
    assert [t.content for t in tokens if t.type.startswith("html")] == ["<!-- matrixgen-diff -->\n"]
    # The same blocks in the same nesting as with harmless names: no heading,
    # list item, table row or paragraph came from a name.
    assert [(t.type, t.level) for t in blocks_of(text)] == [
        (t.type, t.level) for t in blocks_of(plain)
    ]
    headings = [t for t in tokens if t.type == "heading_open"]
    assert [t.tag for t in headings] == ["h3", "h4"]
    assert len([t for t in tokens if t.type == "tr_open"]) == 1 + 2


def test_the_comment_has_its_own_heading_and_a_row_per_file(refreshed: GitRepo) -> None:
    run = diff(refreshed, "HEAD~1", "HEAD", "--format", "markdown")
    lines = run.out.splitlines()
    at = lines.index("#### Golden values")
    header = next(line for line in lines[at:] if line.startswith("| case |"))
    assert header == (
        "| case | hardware | file | read by | `lm loss` | `num-zeros` | `iteration-time` "
        "| largest step change | flags |"
    )
    row = next(line for line in lines[at:] if line.startswith("| `gpt/gpt_a`"))
    assert row == (
        "| `gpt/gpt_a` | dev dgx\\_h100 | changed | 1 target | \\-4\\.17% | 0% | 0% "
        "| 50\\.0% `iteration-time` step `2` | missing: `iteration-time` (1); "
        "ungated change: `iteration-time` |"
    )


def test_the_text_keeps_one_line_per_row_whatever_the_names() -> None:
    plain = render_text(selection(review_of(dict.fromkeys(KEYS, "x"))))
    strings = dict.fromkeys(KEYS, "x") | {
        "case": "a\n::error::forged",
        "metric": "m\r\nx",
        "message": "\x1b[2J",
    }
    text = render_text(selection(review_of(strings)))
    assert text.count("\n") == plain.count("\n")
    assert "\x1b" not in text and not any(
        line.lstrip().startswith("::") for line in text.splitlines()
    )


def test_a_long_review_is_cut_in_the_comment_and_whole_in_the_json() -> None:
    files = tuple(
        GoldenFile(path=f"p{i:03}", status="added", fields={"test_case": f"c{i:03}"})
        for i in range(120)
    )
    text = render_markdown(selection(GoldenReview(template="t", files=files)))
    assert text.count("\n| `c") == golden_render.COMMENT_ROWS
    assert "… and 70 more files (`--format json` lists all)" in text
    assert len(json_value(GoldenReview(template="t", files=files).files)) == 120


def test_no_change_is_said_once(megatron_like: GitRepo) -> None:
    run = diff(megatron_like, "HEAD")
    assert run.out.endswith(
        "golden values: no file changes (tests/functional_tests/test_cases/{model}/"
        "{test_case}/golden_values_{environment}_{platforms}.json)\n"
    )
    data = json_of(megatron_like, "HEAD")
    assert data["golden_changes"] == []


# ---------------------------------------------------------------- read while the sides load


def reviews(repo: GitRepo, base: str, head: str | None, recipes: str) -> tuple[Any, Any, bool]:
    """The review read in a thread while the sides load (and whether that
    work started), and the review read after them, in one process."""
    from matrixgen.diff.gitsource import Repository
    from matrixgen.diff.revisions import diff_revisions

    git = Repository(repo.top)
    early = golden_review.EarlyReview(git)
    try:
        _, sides = diff_revisions(git, recipes, base, head, early=early)
        started = early.started
        ahead = golden_review.golden_review(git, sides, early)
    finally:
        early.close()
    after = golden_review.golden_review(Repository(repo.top), sides)
    return ahead, after, started


def test_the_review_read_while_the_sides_load_is_the_one_read_after(
    megatron_like: GitRepo,
) -> None:
    commit(megatron_like, {A_H100: golden(NEW_A), B_H100: None, path("gpt_c"): golden(OLD_A)})
    ahead, after, started = reviews(megatron_like, "HEAD~1", "HEAD", "tests/test_utils/recipes")
    assert started and len(ahead.files) == 3
    assert json_value(ahead) == json_value(after)
    megatron_like.write({A_GB200: golden({"lm loss": {"1": 1.5}})}, under="")
    ahead, after, started = reviews(megatron_like, "HEAD", None, "tests/test_utils/recipes")
    assert started and [f.path for f in ahead.files] == [A_GB200]
    assert json_value(ahead) == json_value(after)


def test_a_tree_with_a_config_starts_the_review_once_its_config_is_read(shipped: GitRepo) -> None:
    text = (shipped.top / SHIPPED_FILE).read_text()
    commit(shipped, {SHIPPED_FILE: text.replace("10.", "11.", 1)})
    ahead, after, started = reviews(shipped, "HEAD~1", "HEAD", "recipes")
    assert started and [f.path for f in ahead.files] == [SHIPPED_FILE]
    assert json_value(ahead) == json_value(after)


def test_a_guess_the_revisions_do_not_bear_out_is_not_used(shipped: GitRepo) -> None:
    """No config in the working tree: Megatron-LM's layout is guessed and read
    ahead; the revisions' config names another root, so the review reads its
    own files."""
    moved = (shipped.top / SHIPPED_FILE).read_text()
    config = shipped.top / "recipes" / "matrixgen.yaml"
    text = config.read_text().replace("    golden: tests/", "    golden: other/tests/")
    assert text != config.read_text()
    other = f"other/{SHIPPED_FILE}"
    commit(shipped, {"recipes/matrixgen.yaml": text, other: moved})
    commit(shipped, {other: moved.replace("10.", "11.", 1), SHIPPED_FILE: moved + " "})
    config.unlink()  # the working tree alone lacks it
    ahead, after, started = reviews(shipped, "HEAD~1", "HEAD", "recipes")
    assert started and [f.path for f in ahead.files] == [other]
    assert json_value(ahead) == json_value(after)


def test_the_switch_interval_is_given_back_and_the_threads_error_raised_where_asked(
    megatron_like: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    commit(megatron_like, {A_H100: golden(NEW_A)})
    own = 0.004  # not the default: a test that left another would not pass for this one
    real = sys.getswitchinterval()
    sys.setswitchinterval(own)
    try:
        assert diff(megatron_like, "HEAD~1", "HEAD").code == 0
        assert sys.getswitchinterval() == own

        def broken(*args: Any) -> Any:
            from matrixgen.model.errors import GitError

            raise GitError("git diff-tree failed: planted")

        monkeypatch.setattr(golden_review.Repository, "changed_files", broken)
        run = diff(megatron_like, "HEAD~1", "HEAD")
        assert run.code == 5 and "planted" in run.err and not run.out
        assert sys.getswitchinterval() == own
        run = diff(megatron_like, "nope", "HEAD")  # the diff fails first: no thread started
        assert run.code == 5 and "unknown revision" in run.err and "planted" not in run.err
        assert sys.getswitchinterval() == own
    finally:
        sys.setswitchinterval(real)


@given(st.text(min_size=1, max_size=8))
@example("a\\b")  # a backslash: two in the terminal table, never four
@example("##[group]x")
@example("x\ny")
def test_the_text_table_shows_each_case_escaped_once(name: str) -> None:
    from matrixgen.util.escape import terminal_text

    text = golden_render.render_text(review_of(dict.fromkeys(KEYS, "m") | {"case": name}))
    rows = text.split("\n")[5:7]  # after the two lines above the table, its header and rule
    assert all(row.startswith(terminal_text(f"m/{name}") + " ") for row in rows), rows
