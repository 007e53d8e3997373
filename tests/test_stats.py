"""`matrixgen stats`: counts per target, pipeline, platform, model and quarantine
state; platforms left out by configuration or on the command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matrixgen.engine.targets import resolve_targets
from matrixgen.pipeline import generate
from matrixgen.validate import validate
from matrixgen.views.stats import compute_stats, fleet

CONFIG = """\
format_version: 2
vocabulary:
  platforms: [big, big_1node, next]
  environments: [dev, lts]
  scopes: {github: [L1], gitlab: [mr, nightly]}
platforms:
  big: {arch: amd64}
  big_1node: {arch: amd64, alias_of: big}
  next: {arch: arm64, counted: false}
targets:
  l1-big-pr: {system: github, scope: L1, platform: big, environment: dev, cadence: pr}
  l1-big-mg: {system: github, scope: L1, platform: big, environment: dev, cadence: mergegroup}
  l1-1node: {system: github, scope: L1, platform: big_1node, environment: dev}
  mr-big: {system: gitlab, scope: mr, platform: big, environment: dev}
  mr-big-lts: {system: gitlab, scope: mr, platform: big, environment: lts}
  mr-1node: {system: gitlab, scope: mr, platform: big_1node, environment: dev}
  mr-next: {system: gitlab, scope: mr, platform: next, environment: dev}
  nightly-big: {system: gitlab, scope: nightly, platform: big, environment: dev}
"""

FUNCTIONAL = """\
type: basic
format_version: 2
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: img
  platforms: big
products:
  - test_case: [both]
    products:
      - {environment: [dev], scope: [mr, L1]}
  - test_case: [merge_only]
    products:
      - {environment: [dev], scope: [L1], cadence: [mergegroup]}
      - {environment: [dev, lts], scope: [mr]}
  - test_case: [one_node]
    products:
      - {environment: [dev], scope: [mr, L1], platforms: [big_1node]}
  - test_case: [new_hw]
    products:
      - {environment: [dev], scope: [mr, nightly], platforms: [next]}
  - test_case: [night]
    products:
      - {environment: [dev], scope: [nightly]}
"""

UNIT = """\
type: basic
format_version: 2
spec:
  name: "{test_case}_{environment}_{platforms}_{tag}"
  model: unit-tests
  build: img
  platforms: big
  # The deselect entry reaches its bucket's tests through the pytest plugin.
  script: "export MATRIXGEN_QUARANTINE=quarantine.yaml; pytest {test_case}"
products:
  - test_case: [bucket_a]
    products:
      - {environment: [dev], scope: [mr], tag: [latest, legacy]}
  - test_case: [bucket_b]
    products:
      - {environment: [dev], scope: [mr], tag: [latest]}
"""

QUARANTINE = """\
entries:
  - id: skip-both
    tracker: "https://tracker.example/1"
    kind: broken
    action: skip
    match: {test_case: both}
    where: [github/L1]
    owner: o
    reason: r
  - id: night-baseline
    tracker: "https://tracker.example/2"
    kind: baseline-failure
    action: allow-failure
    match: {test_case: night}
    owner: o
    reason: r
  - id: flaky-node
    tracker: "https://tracker.example/3"
    kind: flaky
    action: deselect
    match: {test_case: bucket_a, tags: [legacy]}
    node_ids: ["tests/a.py::test_x"]
    owner: o
    reason: r
  - id: muted-node
    tracker: "https://tracker.example/4"
    kind: flaky
    action: mute
    match: {test_case: bucket_b}
    node_ids: ["tests/b.py::test_y"]
    owner: o
    reason: r
"""


def files(quarantine: bool = True) -> dict[str, str]:
    out = {
        "matrixgen.yaml": CONFIG,
        "_build.yaml": "type: build\nformat_version: 2\nspec:\n  name: img\n",
        "gpt.yaml": FUNCTIONAL,
        "unit-tests.yaml": UNIT,
    }
    if quarantine:
        out["quarantine.yaml"] = QUARANTINE
    return out


def stats_json(cli: Callable, root: Path, *args: str) -> dict:
    run = cli("stats", "--recipes", root, "--format", "json", *args)
    assert run.code == 0, run
    return json.loads(run.out)


def test_targets_counts_and_quarantine_states(tree: Callable[..., Path], cli: Callable) -> None:
    data = stats_json(cli, tree(files()))
    targets = {t["name"]: t for t in data["targets"]}
    # mr-next is on a platform with counted: false: listed as excluded only.
    assert data["excluded_platforms"] == ["next"]
    assert data["excluded_targets"] == ["mr-next"]
    assert "mr-next" not in targets
    # L1 on pull requests: both (skipped there) only; merge group adds merge_only.
    assert targets["l1-big-pr"]["jobs"] == 1
    assert targets["l1-big-pr"]["running"] == 0
    assert targets["l1-big-pr"]["quarantine"] == {
        "skip": 1,
        "allow-failure": 0,
        "deselect": 0,
        "mute": 0,
    }
    assert targets["l1-big-mg"]["jobs"] == 2
    # mr dev: both, merge_only, and three unit-test jobs (bucket_a twice).
    assert targets["mr-big"]["jobs"] == 5
    assert targets["mr-big"]["models"] == {"gpt": 2, "unit-tests": 3}
    assert targets["mr-big"]["quarantine"]["deselect"] == 1
    assert targets["mr-big"]["quarantine"]["mute"] == 1
    assert targets["mr-big-lts"]["jobs"] == 1
    assert targets["nightly-big"]["quarantine"]["allow-failure"] == 1


def test_pipelines_count_distinct_jobs_over_their_targets(
    tree: Callable[..., Path], cli: Callable
) -> None:
    data = stats_json(cli, tree(files()))
    pipelines = {p["pipeline"]: p for p in data["pipelines"]}
    # github/L1: both + merge_only on big (pr and mergegroup count once) + one_node.
    l1 = pipelines["github/L1"]
    assert l1["cases"] == 3
    assert l1["cases_by_platform"] == {"big": 2, "big_1node": 1}
    assert l1["cases_by_fleet"] == {"big": 3}
    assert l1["quarantine"]["skip"] == 1
    mr = pipelines["gitlab/mr"]
    # both, merge_only (dev and lts), one_node; new_hw is on an uncounted platform.
    assert mr["cases"] == 4
    assert mr["cases_by_environment"] == {"dev": 3, "lts": 1}
    assert (mr["unit_test_jobs"], mr["unit_test_buckets"]) == (3, 2)
    assert pipelines["gitlab"]["cases"] == 5  # mr's four and night
    assert set(pipelines) == {"github/L1", "github", "gitlab/mr", "gitlab/nightly", "gitlab"}


def test_all_platforms_and_exclude_platform(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(files())
    everything = stats_json(cli, root, "--all-platforms")
    assert everything["excluded_platforms"] == []
    pipelines = {p["pipeline"]: p for p in everything["pipelines"]}
    assert pipelines["gitlab/mr"]["cases"] == 5
    # new_hw is in nightly too, but no target runs nightly on `next`: not counted.
    assert pipelines["gitlab/nightly"]["cases"] == 1
    fewer = stats_json(cli, root, "--exclude-platform", "big_1node")
    assert fewer["excluded_platforms"] == ["big_1node", "next"]
    assert "l1-1node" in fewer["excluded_targets"]
    assert {p["pipeline"]: p["cases"] for p in fewer["pipelines"]}["github/L1"] == 2


def test_unknown_excluded_platform_is_a_usage_error(
    tree: Callable[..., Path], cli: Callable
) -> None:
    run = cli("stats", "--recipes", tree(files()), "--exclude-platform", "bgi")
    assert run.code == 2
    assert 'did you mean "big"?' in run.err


def test_without_quarantine_file_nothing_is_quarantined(
    tree: Callable[..., Path], cli: Callable
) -> None:
    data = stats_json(cli, tree(files(quarantine=False)))
    for target in data["targets"]:
        assert target["jobs"] == target["running"]
        assert set(target["quarantine"].values()) == {0}


def test_platform_and_model_totals(tree: Callable[..., Path], cli: Callable) -> None:
    data = stats_json(cli, tree(files()))
    assert data["platforms"]["big"] == {
        "jobs": 7,  # both, merge_only x2 envs, night, bucket_a x2, bucket_b
        "functional": 4,
        "unit_tests": 3,
        "quarantined": 4,  # both (skip in L1), night, bucket_a legacy, bucket_b (muted)
    }
    assert data["models"]["unit-tests"]["deselect"] == 1
    # A mute entry is counted as such (once a missing key that crashed stats).
    assert data["models"]["unit-tests"]["mute"] == 1
    assert data["models"]["gpt"]["skip"] == 1 and data["models"]["gpt"]["allow-failure"] == 1


def test_table_output(tree: Callable[..., Path], cli: Callable) -> None:
    run = cli("stats", "--recipes", tree(files()))
    assert run.code == 0, run
    out = run.out
    for heading in ("Targets", "Pipelines", "Platforms", "Models", "Not counted: platform next"):
        assert heading in out
    (row,) = [line for line in out.splitlines() if line.startswith("github/L1 ")]
    assert row.split()[1] == "3"


def test_table_rows_of_targets_are_the_json_figures(
    tree: Callable[..., Path], cli: Callable
) -> None:
    """Each target's row of the table shows, column by column, what the JSON
    says of it: jobs, jobs per model, and each quarantine action's count."""
    root = tree(files())
    data = stats_json(cli, root)
    out = cli("stats", "--recipes", root).out
    lines = out.splitlines()
    header = next(line.split() for line in lines if line.startswith("target "))
    rows = {line.split()[0]: line.split() for line in lines if line.split()[:1]}
    models = sorted({m for t in data["targets"] for m in t["models"]})
    assert header == ["target", "platform", "env", "cadence", "jobs", *models,
                      "skip", "allow-fail", "deselect", "mute"]  # fmt: skip
    for target in data["targets"]:
        cells = rows[target["name"]]
        # The figures are the row's last cells (platform, env, cadence may be empty).
        figures = cells[len(cells) - (5 + len(models)) :]
        q = target["quarantine"]
        expected = [target["jobs"], *[target["models"].get(m, 0) for m in models],
                    q["skip"], q["allow-failure"], q["deselect"], q["mute"]]  # fmt: skip
        assert figures == [str(n) for n in expected], target["name"]


def test_tree_without_config_counts_discovered_targets(
    tree: Callable[..., Path], cli: Callable
) -> None:
    v1 = FUNCTIONAL.replace("format_version: 2", "format_version: 1")
    root = tree(
        {"gpt.yaml": v1, "_build.yaml": "type: build\nformat_version: 1\nspec:\n  name: img\n"}
    )
    data = stats_json(cli, root)
    assert data["excluded_platforms"] == []
    names = {t["name"] for t in data["targets"]}
    assert "gitlab-mr-next-dev" in names and "github-L1-big_1node-dev" in names


def test_fleet_follows_aliases(tree: Callable[..., Path]) -> None:
    gen = generate(tree(files()))
    config = gen.tree.config
    assert fleet(config, "big_1node") == "big"
    assert fleet(config, "big") == "big"
    assert fleet(config, "unknown") == "unknown"


def test_platforms_section_is_checked(tree: Callable[..., Path]) -> None:
    bad = CONFIG.replace("alias_of: big}", "alias_of: bgi}").replace(
        "  next: {arch: arm64, counted: false}",
        "  next: {arch: arm64, counted: false, alias_of: next}\n  nxet: {arch: arm64}",
    )
    out = files()
    out["matrixgen.yaml"] = bad
    gen = generate(tree(out))
    messages = [f.message for f in validate(gen.tree, gen.expansion) if f.code == "platform"]
    assert any('"bgi" must be another platform (did you mean "big"?)' in m for m in messages)
    assert any('"next" must be another platform' in m for m in messages)
    assert any(
        '"nxet" is not in vocabulary.platforms (did you mean "next"?)' in m for m in messages
    )


def test_alias_loop_is_reported(tree: Callable[..., Path]) -> None:
    looped = CONFIG.replace("  big: {arch: amd64}", "  big: {arch: amd64, alias_of: big_1node}")
    out = files()
    out["matrixgen.yaml"] = looped
    gen = generate(tree(out))
    messages = [f.message for f in validate(gen.tree, gen.expansion) if f.code == "platform"]
    assert any("aliases form a loop" in m for m in messages)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.sampled_from(["big", "big_1node", "next"]), unique=True))
def test_pipeline_counts_are_unions_of_target_selections(
    tree: Callable[..., Path], excluded: list[str]
) -> None:
    gen = generate(tree(files()))
    config = gen.tree.config
    targets = resolve_targets(config, gen.jobs)
    stats = compute_stats(gen, targets, exclude=excluded, all_platforms=True)
    kept = [t for t in targets if t.selector.platform not in excluded]
    assert [t.target.name for t in stats.targets] == [t.name for t in kept]
    for pipeline in stats.pipelines:
        members = [t for t in stats.targets if t.target.name in pipeline.targets]
        union = {j.identity for t in members for j in t.jobs}
        assert set(pipeline.jobs) == union
        # A pipeline never counts more than the sum of its targets.
        assert len(pipeline.jobs) <= sum(len(t.jobs) for t in members)
