"""`matrixgen migrate`: Megatron-LM quarantine habits become entries, and every
real target selects exactly the same jobs before and after."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from matrixgen.engine.targets import discover_targets
from matrixgen.model.jobs import Selector, Target
from matrixgen.model.vocab import ALL_CADENCES
from matrixgen.pipeline import Generation, generate
from matrixgen.util.values import json_value

HABITS = """
type: basic
format_version: 1
maintainers: [mcore]
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: mcore-pyt-{environment}
  platforms: dgx_a100
products:
  - test_case: [ok_case]
    products:
      - environment: [dev]
        scope: [mr, mr-github, mr-slim]
        platforms: [dgx_h100, dgx_gb200]
      - environment: [lts]
        scope: [nightly]
  - test_case: [broken_mr]
    products:
      - environment: [dev]
        scope: [mr-broken]
        platforms: [dgx_h100] # hang: #513
  - test_case: [broken_both]
    products:
      # Broken: exceeds the 1h job limit, see issue #4657.
      - environment: [dev]
        scope: [mr-broken, mr-github-broken]
        platforms: [dgx_h100]
  - test_case: [half_broken]
    products:
      - environment: [dev]
        scope: [mr, mr-github-broken]  # https://github.com/acme/ml/issues/77
        platforms: [dgx_h100]
  - test_case: [nightly_broken]
    products:
      - environment: [dev, lts]
        scope: [nightly-broken]  # OOM: #434
  - test_case: [temp_disabled]
    products:
      - environment: [dev]
        scope: [mr-github-temp-disabled]
        platforms: [dgx_gb200]
  - test_case: [flaky_one]
    products:
      - environment: [dev]
        scope: [flaky]  # #999
  - test_case: [two_trackers]
    products:
      - environment: [dev]
        scope: [mr-broken]  # #1 or #2
        platforms: [dgx_h100]
  - test_case: [clash]
    products:
      - environment: [dev]
        scope: [mr]
        platforms: [dgx_h100]
      - environment: [dev]
        scope: [mr-broken]  # dup: #5
        platforms: [dgx_h100]
  # - test_case: [commented_block]
  #   products:
  #     - environment: [dev]
  #       scope: [mr]
  #       platforms: [dgx_h100] # hang: #513
  - test_case: [with_commented_row]
    products:
      - environment: [dev]
        scope: [mr]
        platforms: [dgx_h100]
      # - environment: [lts]
      #   scope: [nightly] # outdated TE: #501
  - test_case: [ambiguous]
    products:
      - environment: [dev]
        scope: [mr]
        platforms: [dgx_h100]
      # - test_case: [nested]
      #   products:
      #     - environment: [dev]
      #       scope: [mr] # Hangs: #513
  # - test_case: [untracked_block]
  #   products:
  #     - environment: [dev]
  #       scope: [mr]
  # - test_case: [two_trackers_block]
  #   products:
  #     - environment: [dev]   # Broken: #484
  #       scope: [mr]
  #     - environment: [lts]   # Requires PyT 2.4: #481
  #       scope: [nightly]
"""

# Writing a format_version 1 migration that brings jobs back for Megatron-LM's
# own parser needs this: the pipelines of the tree are matrixgen's.
MATRIXGEN_PIPELINES = "--for-matrixgen-pipelines"

BUILD = "type: build\nformat_version: 1\nspec: {name: mcore-pyt-ENV}\n"


def habit_files() -> dict[str, str]:
    return {
        "_build-dev.yaml": BUILD.replace("ENV", "dev"),
        "_build-lts.yaml": BUILD.replace("ENV", "lts"),
        "h100/gpt.yaml": HABITS,
    }


def is_habit(scope: str | None) -> bool:
    return scope == "flaky" or (scope or "").endswith(("-broken", "-temp-disabled"))


def all_targets(*generations: Generation) -> list[Target]:
    """Every scope x platform x environment either tree uses, with and without
    each cadence; habit scopes (mr-broken, ...) are no pipeline's target."""
    found: dict[str, Target] = {}
    for generation in generations:
        for target in discover_targets(generation.jobs, holding_pen=True):
            if is_habit(target.selector.scope):
                continue
            for cadence in (None, *ALL_CADENCES):
                selector = Selector(
                    scope=target.selector.scope,
                    platform=target.selector.platform,
                    environment=target.selector.environment,
                    cadence=cadence,
                )
                name = f"{target.name}-{cadence}"
                found[name] = Target(name=name, system=target.system, selector=selector)
    return [found[k] for k in sorted(found)]


def assert_same_selections(before: Generation, after: Generation) -> int:
    targets = all_targets(before, after)
    for target in targets:
        a = [json_value(j) for j in before.jobs_for(target)]
        b = [json_value(j) for j in after.jobs_for(target)]
        assert a == b, target.name
    return len(targets)


def run_migrate(cli: Callable, root: Path, *extra: str) -> dict:
    run = cli("quarantine", "migrate", "--recipes", root, "--format", "json", *extra)
    assert run.code == 0, run
    return json.loads(run.out)


def test_plan_names_each_habit_and_writes_nothing(tree: Callable[..., Path], cli) -> None:
    root = tree(habit_files())
    before = {p: p.read_bytes() for p in root.rglob("*.yaml")}
    plan = run_migrate(cli, root)
    assert {p: p.read_bytes() for p in root.rglob("*.yaml")} == before
    assert not (root / "quarantine.yaml").exists()
    by_case = {e["match"]["test_case"]: e for e in plan["entries"]}
    assert set(by_case) == {
        "broken_mr",
        "broken_both",
        "half_broken",
        "nightly_broken",
        "commented_block",
        "with_commented_row",
    }
    expect = {
        # test case: (where, tracker, kind)
        "broken_mr": (["gitlab/mr"], "#513", "broken"),
        "broken_both": (["github/L1", "gitlab/mr"], "#4657", "infra"),
        "half_broken": (["github/L1"], "https://github.com/acme/ml/issues/77", "broken"),
        "nightly_broken": (["gitlab/L2"], "#434", "broken"),
        "commented_block": (["gitlab/mr"], "#513", "broken"),
        "with_commented_row": (["gitlab/L2"], "#501", "broken"),
    }
    for case, (where, tracker, kind) in expect.items():
        entry = by_case[case]
        assert (entry["where"], entry["tracker"], entry["kind"]) == (where, tracker, kind), case
        assert entry["action"] == "skip" and entry["owner"] == "mcore"
    # Rows without their own platform get the spec's default platform.
    assert by_case["nightly_broken"]["match"]["platforms"] == ["dgx_a100"]
    assert by_case["nightly_broken"]["match"]["environments"] == ["dev", "lts"]
    assert by_case["with_commented_row"]["match"]["environments"] == ["lts"]
    left = {(x["habit"], x["reason"].split(":")[0].split(" (")[0]) for x in plan["left_alone"]}
    reasons = " | ".join(x["reason"] for x in plan["left_alone"])
    assert ("scope flaky", 'scope "flaky" does not say which scope the row ran in before') in left
    assert "names no tracker; pass --default-tracker" in reasons  # temp_disabled
    assert "names several trackers (#1, #2)" in reasons
    assert "names several trackers (#484, #481)" in reasons
    assert "it has block keys (products, test_case)" in reasons
    assert "another row already has" in reasons or "duplicate" in reasons  # clash
    assert len(plan["left_alone"]) == 6
    assert [(x["line"], x["habit"]) for x in plan["left_alone"]] == [
        (39, "scope mr-github-temp-disabled"),
        (44, "scope flaky"),
        (48, "scope mr-broken"),
        (56, "scope mr-broken"),
        (76, "commented-out"),
        (84, "commented-out"),
    ]
    assert plan["edits"][-2:] == [
        "h100/gpt.yaml:59-63: uncomment test case commented_block",
        "h100/gpt.yaml:69-70: uncomment a row of test case with_commented_row",
    ]
    assert plan["summary"]["commented_out_without_tracker"] == 1


def test_plan_is_the_same_wherever_the_tree_lies(
    tree: Callable[..., Path], cli, tmp_path: Path
) -> None:
    """The document names each habit's file relative to the recipes folder, as
    `list` does, so CI and a laptop print the same bytes for one tree."""
    root = tree(habit_files())
    elsewhere = tmp_path / "somewhere" / "else"
    shutil.copytree(root, elsewhere)
    here, there = run_migrate(cli, root), run_migrate(cli, elsewhere)
    assert here == there
    assert here["entries"] and here["left_alone"]
    assert {e["from"].split(":")[0] for e in here["entries"]} == {"h100/gpt.yaml"}
    assert {x["file"] for x in here["left_alone"]} == {"h100/gpt.yaml"}


def test_plan_counts_what_megatron_parser_would_select_again(
    tree: Callable[..., Path], cli
) -> None:
    # Megatron-LM's parser reads no quarantine file: each restored job is selected
    # there again. Counted by hand from HABITS (migrated without a default
    # tracker): mr/dgx_h100/dev gets broken_mr, broken_both and commented_block
    # back beside ok_case, half_broken, clash, with_commented_row and ambiguous; L1 gets
    # broken_both and half_broken; nightly_broken comes back in L2 on the spec's
    # default platform in dev and lts, with_commented_row in L2/lts.
    root = tree(habit_files())
    plan = run_migrate(cli, root)
    assert plan["parser_changes"] == [
        {"target": "github-L1-dgx_h100-dev", "before": 1, "after": 3, "added": 2},
        {"target": "gitlab-L2-dgx_a100-dev", "before": 0, "after": 1, "added": 1},
        {"target": "gitlab-L2-dgx_a100-lts", "before": 1, "after": 3, "added": 2},
        {"target": "gitlab-mr-dgx_h100-dev", "before": 5, "after": 8, "added": 3},
    ]
    assert plan["summary"]["parser_added_jobs"] == 8
    text = cli("quarantine", "migrate", "--recipes", root)
    assert text.code == 0, text
    assert "# Megatron-LM's own parser reads no quarantine file: it would select 8 more" in text.out
    assert "# gitlab-mr-dgx_h100-dev: 5 -> 8 job(s) (+3)" in text.out
    assert "pass --write --for-matrixgen-pipelines to apply" in text.err


def test_write_that_brings_jobs_back_for_megatron_parser_needs_the_flag(
    tree: Callable[..., Path], cli
) -> None:
    root = tree(habit_files())
    before = {p: p.read_bytes() for p in root.rglob("*.yaml")}
    for fmt in ("table", "json"):
        run = cli("quarantine", "migrate", "--recipes", root, "--write", "--format", fmt)
        assert run.code == 2 and run.out == "", run
        assert "Megatron-LM's own parser reads no quarantine file" in run.err
        assert "select 8 more job(s)" in run.err and "gitlab-mr-dgx_h100-dev 5 -> 8" in run.err
        assert "Pass --for-matrixgen-pipelines" in run.err and "matrixgen jet-trigger" in run.err
        assert {p: p.read_bytes() for p in root.rglob("*.yaml")} == before
    run = cli("quarantine", "migrate", "--recipes", root, "--write", MATRIXGEN_PIPELINES)
    assert run.code == 0, run
    assert (
        "every real target selects the same jobs as before in the pipelines matrixgen "
        "generates; Megatron-LM's own parser would select 8 more job(s) in 4 target(s)"
    ) in run.err
    assert (root / "quarantine.yaml").exists()


def test_write_keeps_selections_and_comments(tree: Callable[..., Path], cli) -> None:
    root = tree(habit_files())
    original = (root / "h100/gpt.yaml").read_text()
    before = generate(root)
    plan = run_migrate(cli, root, "--write", MATRIXGEN_PIPELINES, "--default-tracker", "100")
    assert plan["written"] and plan["summary"]["entries"] == 7  # temp_disabled joins
    after = generate(root)
    assert not [f for f in after.findings if f.severity == "error"]
    assert assert_same_selections(before, after) > 0
    text = (root / "h100/gpt.yaml").read_text()
    # Only scope values changed and "# " prefixes went; every line is still there.
    old_lines, new_lines = original.splitlines(), text.splitlines()
    assert len(old_lines) == len(new_lines)
    changed = [(a, b) for a, b in zip(old_lines, new_lines, strict=True) if a != b]
    for a, b in changed:
        assert a.replace("# ", "", 1) == b or (
            a.replace("-broken", "").replace("-temp-disabled", "") == b
        ), (a, b)
    assert "scope: [mr, mr-github]  # https://github.com/acme/ml/issues/77" in text
    assert "platforms: [dgx_h100] # hang: #513" in text  # the tracker comment stays
    assert "# Broken: exceeds the 1h job limit, see issue #4657." in text
    assert "scope: [flaky]  # #999" in text  # left as it was
    assert "  # - test_case: [untracked_block]" in text
    # What was quarantined by renaming is now visible, marked, with its tracker.
    listed = cli("list", "--recipes", root, "--format", "json", "--with-quarantined").out
    skipped = {
        (j["test_case"], j["scope"]): j["quarantine"]["tracker"]
        for j in json.loads(listed)
        if j.get("quarantine", {}).get("action") == "skip"
    }
    assert skipped[("broken_both", "L1")] == skipped[("broken_both", "mr")] == "#4657"
    assert skipped[("temp_disabled", "L1")] == "#100"
    assert ("half_broken", "mr") not in skipped and ("half_broken", "L1") in skipped
    validate = cli("validate", "--recipes", root)
    assert validate.code == 0, validate
    # Running it again finds nothing new to do.
    again = run_migrate(cli, root, "--default-tracker", "100")
    assert again["entries"] == [] and again["edits"] == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--expires", "2020-01-01"], "--expires 2020-01-01 is in the past"),
        (["--expires", "20990101"], "is not a date: write YYYY-MM-DD"),
        (["--default-tracker", "JIRA-1"], '--default-tracker "JIRA-1": give an issue URL'),
        (["--default-tracker", "#x"], '--default-tracker "#x": give an issue URL'),
    ],
)
def test_options_that_would_make_every_entry_invalid_are_usage_errors(
    tree: Callable[..., Path], cli, extra: list[str], message: str
) -> None:
    # Not one "left alone" reason per habit: one clear error, nothing written.
    root = tree(habit_files())
    run = cli("quarantine", "migrate", "--recipes", root, "--write", *extra)
    assert run.code == 2, run
    assert message in run.err and "left alone" not in run.out
    assert not (root / "quarantine.yaml").exists()


def test_write_refuses_a_read_only_recipe_before_writing_anything(
    tree: Callable[..., Path], cli
) -> None:
    root = tree(habit_files())
    recipe = root / "h100/gpt.yaml"
    original = recipe.read_bytes()
    recipe.chmod(0o444)
    run = cli("quarantine", "migrate", "--recipes", root, "--write", MATRIXGEN_PIPELINES)
    assert run.code == 7, run
    assert "gpt.yaml is read-only; the file was not changed" in run.err
    # No entries were added for rows that still carry their habit scope.
    assert not (root / "quarantine.yaml").exists()
    assert recipe.read_bytes() == original


def test_migration_adds_to_an_existing_quarantine_file(tree: Callable[..., Path], cli) -> None:
    files = habit_files()
    files["quarantine.yaml"] = (
        "# hand-kept\nentries:\n  - id: keep\n    tracker: https://github.com/acme/ml/issues/1\n"
        "    kind: flaky\n    action: allow-failure\n    match: {test_case: ok_case}\n"
        "    owner: me\n    reason: r\n"
    )
    root = tree(files)
    before = generate(root)
    run_migrate(cli, root, "--write", MATRIXGEN_PIPELINES)
    text = (root / "quarantine.yaml").read_text()
    assert text.startswith(files["quarantine.yaml"])
    ids = [e["id"] for e in yaml.safe_load(text)["entries"]]
    assert ids[0] == "keep" and len(ids) == 7
    assert_same_selections(before, generate(root))


def test_a_migrated_entry_never_takes_an_id_the_file_has(tree: Callable[..., Path], cli) -> None:
    """The derived id of broken_mr's entry is taken already: it gets the next free one."""
    files = habit_files()
    files["quarantine.yaml"] = (
        "entries:\n  - id: broken_mr-c3bda9\n    tracker: https://github.com/acme/ml/issues/1\n"
        "    kind: flaky\n    action: allow-failure\n    match: {test_case: ok_case}\n"
        "    owner: me\n    reason: r\n"
    )
    ids = [e["id"] for e in run_migrate(cli, tree(files))["entries"]]
    assert ids[0] == "broken_mr-c3bda9-2" and "broken_mr-c3bda9" not in ids


def test_the_configured_default_owner_stands_in_for_missing_maintainers(
    tree: Callable[..., Path], cli
) -> None:
    files = habit_files()
    files["h100/gpt.yaml"] = HABITS.replace("maintainers: [mcore]\n", "")
    plan = run_migrate(cli, tree(files))
    assert plan["entries"] == []
    assert (
        "the file names no maintainers; pass --owner or set quarantine.default_owner"
        in (plan["left_alone"][0]["reason"])
    )
    files["matrixgen.yaml"] = "quarantine: {default_owner: ci-team}\n"
    plan = run_migrate(cli, tree(files))
    assert plan["entries"] and {e["owner"] for e in plan["entries"]} == {"ci-team"}
    # The file's maintainers come first, --owner before both.
    files["h100/gpt.yaml"] = HABITS
    assert {e["owner"] for e in run_migrate(cli, tree(files))["entries"]} == {"mcore"}
    owned = run_migrate(cli, tree(files), "--owner", "me")
    assert {e["owner"] for e in owned["entries"]} == {"me"}


def test_refuses_a_tree_with_errors(tree: Callable[..., Path], cli) -> None:
    files = habit_files()
    files["quarantine.yaml"] = "entries: [\n"
    run = cli("quarantine", "migrate", "--recipes", tree(files))
    assert run.code == 7 and "quarantine.yaml" in run.err


# --------------------------------------------------------------------------- Megatron-LM


def habit_rows(root: Path) -> int:
    """Rows whose scope list holds a -broken or -temp-disabled scope, counted here
    by reading the YAML directly."""
    count = 0
    for path in sorted(root.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict):
            continue
        for block in data.get("products") or []:
            for row in (block or {}).get("products") or []:
                scopes = row.get("scope") or []
                if any(str(s).endswith(("-broken", "-temp-disabled")) for s in scopes):
                    count += 1
    return count


@pytest.fixture
def megatron_copy(megatron_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "megatron"
    shutil.copytree(megatron_dir, copy)
    for path in copy.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


def test_megatron_migration_keeps_every_real_target(megatron_copy: Path, cli) -> None:
    root = megatron_copy
    before = generate(root)
    rows = habit_rows(root)
    plan = run_migrate(cli, root, "--write", MATRIXGEN_PIPELINES, "--default-tracker", "#9999")
    summary = plan["summary"]
    after = generate(root)
    # Every real target of either tree (scope x platform x environment, with and
    # without each cadence) selects exactly the same jobs.
    assert assert_same_selections(before, after) >= 5 * 20
    # Every renamed-scope row was migrated (a default tracker was given); only
    # the flaky row keeps a habit scope.
    migrated_rows = sum(n for h, n in summary["migrated_by_habit"].items() if h != "commented-out")
    assert migrated_rows == rows
    assert {j.scope for j in after.jobs if is_habit(j.scope)} == {"flaky"}
    for habit in (
        "scope mr-broken",
        "scope mr-github-broken",
        "scope mr-broken + mr-github-broken",
        "scope nightly-broken",
        "scope mr-github-temp-disabled",
        "commented-out",
    ):
        assert summary["entries_by_habit"].get(habit, 0) > 0, habit
    # What the habit scopes held is now skipped, with its entry, in the restored
    # target: the same (identity) jobs, now visible.
    was_hidden = {
        (j.identity, j.scope.replace("-temp-disabled", "").replace("-broken", ""))
        for j in before.jobs
        if is_habit(j.scope) and j.scope != "flaky"
    }
    now_skipped = set()
    for target in discover_targets(after.jobs, holding_pen=True):
        for job in after.selection(target).skipped:
            assert job.quarantine and job.quarantine.tracker
            now_skipped.add((job.identity, job.scope))
    legacy = {"mr-github": "L1", "nightly": "L2"}
    assert {(i, legacy.get(s, s)) for i, s in was_hidden} <= now_skipped
    # The #513 hang that upstream kept only in a comment is now an entry.
    assert any(e["tracker"] == "#513" for e in plan["entries"])
    validate = cli("validate", "--recipes", root)
    assert validate.code == 0, validate
    assert " 0 error(s)" in validate.err


# Measured with Megatron-LM's own parser (recipe_parser.load_workloads, test
# workloads only) on the tree before and after `migrate --write`: per scope, and
# for the target gitlab-mr-dgx_h100-dev.
MEGATRON_PARSER = {"mr": (152, 166), "L1": (108, 111), "L2": (163, 176)}


def test_megatron_plan_counts_what_its_parser_would_select_again(megatron_copy: Path, cli) -> None:
    root = megatron_copy
    before = {p: p.read_bytes() for p in root.rglob("*.yaml")}
    plan = run_migrate(cli, root)
    changes = {c["target"]: c for c in plan["parser_changes"]}
    assert changes["gitlab-mr-dgx_h100-dev"] == {
        "target": "gitlab-mr-dgx_h100-dev",
        "before": 134,
        "after": 144,
        "added": 10,
    }
    # The targets of a scope partition its jobs: their additions sum to what the
    # parser adds for the whole scope; after writing, matrixgen's selection
    # before quarantine (the parser's) is the parser's figure.
    # (system-scope-platform-environment: no platform or environment of this
    # tree holds a "-"; some targets exist only once the habits are gone.)
    scope_of = {n: "-".join(n.split("-")[1:-2]) for n in changes}
    for scope, (old, new) in MEGATRON_PARSER.items():
        added = sum(c["added"] for n, c in changes.items() if scope_of.get(n) == scope)
        assert (len(generate(root).select(Selector(scope=scope))), added) == (old, new - old)
    assert plan["summary"]["parser_added_jobs"] == sum(c["added"] for c in changes.values())
    run = cli("quarantine", "migrate", "--recipes", root, "--write")
    assert run.code == 2 and "--for-matrixgen-pipelines" in run.err, run
    assert {p: p.read_bytes() for p in root.rglob("*.yaml")} == before
    assert not (root / "quarantine.yaml").exists()


def test_megatron_without_default_tracker_migrates_only_tracked_habits(
    megatron_copy: Path, cli
) -> None:
    root = megatron_copy
    before = generate(root)
    plan = run_migrate(cli, root, "--write", MATRIXGEN_PIPELINES)
    after = generate(root)
    for scope, (_, new) in MEGATRON_PARSER.items():
        assert len(after.select(Selector(scope=scope))) == new, scope
    mr = Selector(scope="mr", platform="dgx_h100", environment="dev")
    assert len(after.select(mr)) == 144
    trackers = {e["tracker"] for e in plan["entries"]}
    assert "#9999" not in trackers and trackers  # only trackers named in comments
    untracked = [x for x in plan["left_alone"] if "names no tracker" in x["reason"]]
    assert untracked
    assert assert_same_selections(before, generate(root)) > 0


# --------------------------------------------------------------------------- the safety check

# A tree whose config runs a scope other than L0/L1 on GitHub: the entry that a
# restored `extra-broken` row gets places `extra` by its name (GitLab), so the
# configured GitHub target gh-extra would newly select the restored job. The
# per-row checks do not see the configured system; the last check, which
# compares every real target's selection before and after, must.
SYSTEM_BY_CONFIG = {
    "matrixgen.yaml": """
        format_version: 2
        project: fixture
        vocabulary:
          platforms: [dgx_h100]
          environments: [dev]
          scopes:
            github: [L1, extra, extra-broken]
            gitlab: [mr]
        targets:
          gh-extra: {system: github, scope: extra, platform: dgx_h100, environment: dev}
          gh-l1: {system: github, scope: L1, platform: dgx_h100, environment: dev}
    """,
    "_build.yaml": "type: build\nformat_version: 2\nspec: {name: mcore-pyt-dev}\n",
    "gpt.yaml": """
        type: basic
        format_version: 2
        maintainers: [mcore]
        spec:
          name: "{test_case}_{environment}_{platforms}"
          model: gpt
          build: mcore-pyt-{environment}
          platforms: dgx_h100
        products:
          - test_case: [ok_case]
            products:
              - environment: [dev]
                scope: [extra, L1]
          - test_case: [broken_case]
            products:
              - environment: [dev]
                scope: [extra-broken]  # hang: #513
    """,
}


@pytest.mark.parametrize("write", [False, True])
def test_refuses_a_rewrite_that_would_change_a_selection(
    tree: Callable[..., Path], cli, write: bool
) -> None:
    root = tree(SYSTEM_BY_CONFIG)
    before = {p: p.read_bytes() for p in sorted(root.rglob("*"))}
    run = cli("quarantine", "migrate", "--recipes", root, *(["--write"] if write else []))
    assert run.code == 7, run
    assert "would change what targets select; nothing was planned" in run.err, run
    assert "gh-extra: 0 job(s) no longer selected, 1 newly selected" in run.err, run
    assert "gh-l1" not in run.err
    assert "Traceback" not in run.err
    assert {p: p.read_bytes() for p in sorted(root.rglob("*"))} == before


@pytest.mark.parametrize(("expires", "refused"), [("2026-12-01", False), ("2026-11-30", True)])
def test_an_expiry_today_is_in_force_and_yesterday_is_past(
    tree: Callable[..., Path], cli, monkeypatch: pytest.MonkeyPatch, expires: str, refused: bool
) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-12-01")
    root = tree(habit_files())
    run = cli(
        "quarantine",
        "migrate",
        "--recipes",
        root,
        "--write",
        MATRIXGEN_PIPELINES,
        "--expires",
        expires,
    )
    if refused:
        assert run.code == 2 and f"--expires {expires} is in the past" in run.err, run
        return
    assert run.code == 0, run
    entries = yaml.safe_load((root / "quarantine.yaml").read_text(encoding="utf-8"))["entries"]
    assert entries and {str(e["expires"]) for e in entries} == {expires}
    assert cli("validate", "--recipes", root).code == 0


def test_a_habit_row_written_on_one_line_is_migrated(tree: Callable[..., Path], cli) -> None:
    """A flow mapping row starts and ends on one line: its jobs are its own."""
    block = "      - environment: [dev]\n        scope: [mr-broken]\n        platforms: [dgx_h100]"
    text = HABITS.replace(
        f"{block} # hang: #513",
        "      - {environment: [dev], scope: [mr-broken], platforms: [dgx_h100]} # hang: #513",
    )
    assert "{environment: [dev], scope: [mr-broken]" in text
    root = tree({**habit_files(), "h100/gpt.yaml": text})
    plan = run_migrate(cli, root)
    by_case = {e["match"]["test_case"]: e for e in plan["entries"]}
    assert by_case["broken_mr"]["where"] == ["gitlab/mr"]
    assert by_case["broken_mr"]["tracker"] == "#513"
