"""The shipped recipe tree (recipes/): a model of a large H100/GB200 CI.

The expected figures here are the ones docs/generating.md's "What the tree holds" table
states (42 unit-test buckets; 110 GitHub functional cases, 80 H100 and 30 GB200;
GitLab MR 158 and nightly 167, GB300 left out; time limits 2,700 s and one
nightly recipe at 5,400 s; n_repeat 5 for numerical cases; the quarantines of
Task 3), written here by hand, not taken from the tool's output. Every file
`generate` writes for the tree passes the real validators.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
import yaml

from matrixgen.engine.targets import discover_targets, resolve_targets
from matrixgen.generate.output import MANIFEST_NAME
from matrixgen.model.vocab import resolve_scope
from matrixgen.pipeline import Generation, generate
from matrixgen.quarantine.checks import check_entries
from matrixgen.validate import validate
from matrixgen.views.graph import target_graph
from matrixgen.views.images import image_status
from matrixgen.views.stats import compute_stats
from tests import realvalidators as rv
from tests.conftest import SHIPPED_QUARANTINE_DAY

# The commands below run on the shipped tree, whose quarantine entries expire
# by design: expiry is checked against a fixed day, not the calendar.
pytestmark = pytest.mark.usefixtures("pinned_today")

REPO = Path(__file__).resolve().parents[1]
RECIPES = REPO / "recipes"
NUMERICAL_MODELS = {"gpt", "moe", "hybrid"}
FUNCTIONAL_PIN = ("NVTE_FLASH_ATTN_V4", "0")
FUNCTIONAL_ARGS = ["--flash-attention-version", "2"]


@pytest.fixture(scope="module")
def gen() -> Generation:
    return generate(RECIPES)


@pytest.fixture(scope="module")
def raw_config() -> dict:
    return yaml.safe_load((RECIPES / "matrixgen.yaml").read_text())


@pytest.fixture(scope="module")
def entries() -> list[dict]:
    return yaml.safe_load((RECIPES / "quarantine.yaml").read_text())["entries"]


# --------------------------------------------------------------------------- validity


def test_the_tree_is_format_version_2_and_validates_clean(gen: Generation) -> None:
    assert gen.tree.format_version == 2
    assert all(f.format_version == 2 for f in gen.tree.files)
    # Expiry is checked against the pinned day (pytestmark above).
    found = validate(gen.tree, gen.expansion)
    assert found == [], "\n".join(map(str, found))


def test_quarantine_entries_are_valid_on_a_fixed_day(gen: Generation, entries: list) -> None:
    config = gen.tree.config
    targets = resolve_targets(config, gen.jobs)
    day = max(dt.date.fromisoformat(str(e["added"])) for e in entries)
    assert check_entries(gen.quarantine, gen.jobs, targets, config, today=day) == []
    # The day the other tests of the shipped tree check expiry against.
    last = min(dt.date.fromisoformat(str(e["expires"])) for e in entries)
    assert day <= SHIPPED_QUARANTINE_DAY <= last
    for entry in entries:
        added = dt.date.fromisoformat(str(entry["added"]))
        expires = dt.date.fromisoformat(str(entry["expires"]))
        # Short-lived on purpose: someone must look again within a quarter.
        assert dt.timedelta(days=1) <= expires - added <= dt.timedelta(days=100), entry["id"]


# --------------------------------------------------------------------------- vocabulary


def test_vocabulary_and_platforms(raw_config: dict) -> None:
    vocab = raw_config["vocabulary"]
    assert set(vocab["environments"]) == {"dev", "lts"}
    assert vocab["scopes"] == {"github": ["L0", "L1"], "gitlab": ["mr", "mr-slim", "nightly"]}
    assert set(vocab["tags"]) == {"latest", "legacy"}
    assert set(vocab["models"]) == {"gpt", "moe", "hybrid", "inference", "unit-tests"}
    platforms = raw_config["platforms"]
    assert platforms["dgx_h100"]["arch"] == "amd64"
    assert platforms["dgx_gb200"]["arch"] == "arm64"
    assert platforms["dgx_gb300"] == {**platforms["dgx_gb300"], "arch": "arm64", "counted": False}
    aliases = [p for p, info in platforms.items() if info.get("alias_of") == "dgx_gb200"]
    assert aliases, "a one-node GB200 alias"
    assert raw_config["defaults"] == {"time_limit": 2700, "n_repeat": 5}


def test_every_pipeline_has_a_named_target(gen: Generation) -> None:
    config = gen.tree.config
    configured = {
        (
            t.system,
            resolve_scope(t.selector.scope or ""),
            t.selector.platform,
            t.selector.environment,
        )
        for t in config.targets
    }
    for implied in discover_targets(gen.jobs):
        key = (
            implied.system,
            implied.selector.scope,
            implied.selector.platform,
            implied.selector.environment,
        )
        assert key in configured, f"no configured target runs {key}"
    for target in config.targets:
        assert gen.jobs_for(target), f"target {target.name} selects nothing"
    # GitHub runs on pull requests and in the merge group; GitLab MR and nightly.
    github = {t.selector.cadence for t in config.targets if t.system.value == "github"}
    assert github == {"pr", "mergegroup"}


# --------------------------------------------------------------------------- the docs' figures


def test_the_readme_figures(gen: Generation) -> None:
    config = gen.tree.config
    stats = compute_stats(gen, resolve_targets(config, gen.jobs))
    assert stats.excluded_platforms == ("dgx_gb300",)
    pipelines = {p.row.pipeline: msgspec.to_builtins(p.row) for p in stats.pipelines}
    github = pipelines["github"]
    assert github["cases"] == 110
    assert github["cases_by_fleet"] == {"dgx_h100": 80, "dgx_gb200": 30}
    assert pipelines["gitlab/mr"]["cases"] == 158
    assert pipelines["gitlab/nightly"]["cases"] == 167
    assert pipelines["gitlab/mr"]["unit_test_buckets"] == 42
    # GB300 is present and has jobs: counting it changes the figures.
    everything = compute_stats(gen, resolve_targets(config, gen.jobs), all_platforms=True)
    all_pipelines = {p.row.pipeline: msgspec.to_builtins(p.row) for p in everything.pipelines}
    assert all_pipelines["gitlab/nightly"]["cases"] > 167
    assert all_pipelines["gitlab/mr"]["cases"] > 158


def test_unit_test_buckets(gen: Generation) -> None:
    unit = [j for j in gen.jobs if j.model == "unit-tests"]
    buckets = {j.test_case for j in unit}
    assert len(buckets) == 42
    for bucket in buckets:
        tags = {j.tag for j in unit if j.test_case == bucket}
        assert "latest" in tags and tags <= {"latest", "legacy"}
    assert {j.tag for j in unit} == {"latest", "legacy"}


def test_time_limits(gen: Generation) -> None:
    limits = {j.time_limit for j in gen.jobs}
    assert limits == {2700, 5400}
    long = [j for j in gen.jobs if j.time_limit == 5400]
    (recipe,) = {j.recipe for j in long}
    assert {j.scope for j in long} == {"L2"}  # nightly only
    spec = yaml.safe_load((RECIPES / recipe).read_text())["spec"]
    assert spec["time_limit"] == 5400


def test_numerical_cases_repeat_five_times(gen: Generation) -> None:
    numerical = [j for j in gen.jobs if j.model in NUMERICAL_MODELS]
    assert numerical and {j.n_repeat for j in numerical} == {5}


def test_every_functional_job_carries_the_flash_attention_pins(gen: Generation) -> None:
    functional = [j for j in gen.jobs if j.model != "unit-tests"]
    custom = 0
    for job in functional:
        assert dict(job.env).get(FUNCTIONAL_PIN[0]) == FUNCTIONAL_PIN[1], job.name
        launcher = job.spec.get("launcher")
        words = shlex.split(launcher) if launcher else list(job.args)
        custom += launcher is not None
        assert any(words[i : i + 2] == FUNCTIONAL_ARGS for i in range(len(words) - 1)), (
            f"{job.name}: {words}"
        )
    assert custom > 0, "some recipes bypass the shared launcher"
    assert {j.recipe for j in functional if j.spec.get("launcher")} == {
        "h100/inference.yaml",
        "gb200/inference.yaml",
    }


def test_image_pins_agree_on_26_09(raw_config: dict, gen: Generation) -> None:
    assert raw_config["images"]["version"] == "26.09"
    statuses = {s.pin.name: s for s in image_status(gen.tree.config)}
    for name in ("github", "gitlab/amd64", "gitlab/arm64"):
        assert statuses[name].version == "26.09" and statuses[name].ok
    assert all(s.ok for s in statuses.values())


# --------------------------------------------------------------------------- quarantine


def _by_tracker(entries: list[dict], number: str) -> list[dict]:
    return [e for e in entries if str(e["tracker"]).endswith(number)]


def test_flaky_unit_test_node_is_deselected(gen: Generation, entries: list) -> None:
    (entry,) = _by_tracker(entries, "7958")
    assert (entry["kind"], entry["action"]) == ("flaky", "deselect")
    (node,) = entry["node_ids"]
    bucket = entry["match"]["test_case"]
    assert node.startswith(bucket.rstrip("/")) and "::" in node
    marked = [j for j in gen.jobs_for(gen.tree.config.target("gitlab-mr-h100-dev")) if j.quarantine]
    deselected = [j for j in marked if j.quarantine.action == "deselect"]
    assert {j.test_case for j in deselected} == {bucket}
    assert all(j.environment == "dev" for j in deselected)


def test_h100_ep8_cases_are_skipped_before_merge_only(gen: Generation, entries: list) -> None:
    config = gen.tree.config
    ep8 = _by_tracker(entries, "7201") + _by_tracker(entries, "7734")
    assert len(ep8) == 2
    cases = {e["match"]["test_case"] for e in ep8}
    for entry in ep8:
        assert entry["action"] == "skip" and entry["match"]["platforms"] == ["dgx_h100"]
        assert "ep8" in entry["match"]["test_case"]
        assert {"github/L1", "gitlab/mr"} <= set(entry["where"])
    assert sum("gitlab/mr-slim" in e["where"] for e in ep8) == 1
    for name in ("github-l1-h100-pr", "gitlab-mr-h100-dev"):
        selection = gen.selection(config.target(name))
        assert {j.test_case for j in selection.skipped} == cases, name
        assert not cases & {j.test_case for j in selection.jobs}
    slim = gen.selection(config.target("gitlab-mr-slim-h100-dev"))
    assert len(slim.skipped) == 1
    # Nightly keeps running them: that is where the signal to lift them comes from.
    nightly = {j.test_case for j in gen.jobs_for(config.target("gitlab-nightly-h100-dev"))}
    assert cases <= nightly


def test_baseline_failures_keep_running_without_blocking(gen: Generation, entries: list) -> None:
    baseline = [e for e in entries if e["kind"] == "baseline-failure"]
    assert baseline and all(e["action"] == "allow-failure" for e in baseline)
    config = gen.tree.config
    seen = 0
    for target in config.targets:
        for job in gen.jobs_for(target):
            if job.quarantine and job.quarantine.kind == "baseline-failure":
                assert job.quarantine.action == "allow-failure"
                seen += 1
    assert seen == len(baseline)


# --------------------------------------------------------------------------- graph


def test_long_nightly_runs_wait_for_the_warm_up(gen: Generation) -> None:
    config = gen.tree.config
    for name in ("gitlab-nightly-h100-dev", "gitlab-nightly-h100-lts"):
        result = target_graph(gen, config.target(name))
        assert result.missing == [] and result.cycles == []
        long = [j for j in gen.jobs_for(config.target(name)) if j.time_limit == 5400]
        assert long
        for job in long:
            sources = {a for a, _ in result.graph.in_edges(f"job:{job.name}")}
            assert any(s.startswith("job:gpt3_warmup_data_cache") for s in sources), job.name
            assert "parent:generate" in sources


# --------------------------------------------------------------------------- commands


@pytest.mark.parametrize("command", ["validate", "pins", "graph", "stats"])
def test_commands_run_without_arguments(
    command: str, cli: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    run = cli(command)
    assert run.code == 0, run
    assert run.out or command == "validate"


def test_generate_runs_without_arguments(
    tmp_path: Path, cli: Callable, monkeypatch: pytest.MonkeyPatch, gen: Generation
) -> None:
    # Outside a git checkout the default tree is ./recipes and output goes to ./out.
    shutil.copytree(RECIPES, tmp_path / "recipes")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    run = cli("generate")
    assert run.code == 0, run
    written = sorted(p.name for p in (tmp_path / "out").glob("[!.]*"))
    expected = sorted(
        t.name + (".json" if t.system.value == "github" else ".yml")
        for t in gen.tree.config.targets
    )
    assert written == expected


# --------------------------------------------------------------------------- the real validators

# Rejects for each validator, checked in the same batch as the emitted files, so
# that a validator that passes everything fails these tests.
BAD_CHILD = "j:\n  script: [echo]\n  retry: {max: 3}\n  needs: [nope]\n"
BAD_MATRIX = {"include": [{"model": "m"}]}  # no test_case, timeout, ...


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every file `matrixgen generate` writes for the shipped tree, as CI gets them."""
    from matrixgen.cli.main import main

    out = tmp_path_factory.mktemp("generated") / "out"
    assert main(["generate", "--recipes", str(RECIPES), "--out", str(out)]) == 0
    return out


def test_generate_writes_a_file_for_every_configured_target(
    generated: Path, gen: Generation
) -> None:
    config = gen.tree.config
    github = sorted(t.name for t in config.targets if t.system.value == "github")
    gitlab = sorted(t.name for t in config.targets if t.system.value == "gitlab")
    assert (len(github), len(gitlab)) == (10, 12)
    assert sorted(p.stem for p in generated.glob("[!.]*.json")) == github
    assert sorted(p.stem for p in generated.glob("[!.]*.yml")) == gitlab
    # One file per target, and generate's own manifest of what it wrote.
    assert sorted(p.name for p in generated.iterdir() if p.name.startswith(".")) == [MANIFEST_NAME]
    assert len(list(generated.iterdir())) == 22 + 1


@pytest.mark.slow
def test_every_github_matrix_passes_check_jsonschema_and_actionlint(
    generated: Path, tmp_path: Path
) -> None:
    from tests.emit_fixtures import write_workflows

    rv.require_check_jsonschema()
    rv.require_actionlint()
    matrices = sorted(generated.glob("[!.]*.json"))
    assert len(matrices) == 10
    workflows = write_workflows(matrices, tmp_path / ".github" / "workflows")
    schema = rv.check_jsonschema_github(*workflows)
    assert schema.ok, schema
    bad_json = tmp_path / "bad.json"
    bad_json.write_text(json.dumps(BAD_MATRIX))
    (bad,) = write_workflows([bad_json], tmp_path / "bad")
    lint = rv.actionlint(*workflows, bad)  # one run for all of them
    assert lint.returncode == 1, lint
    assert any("test_case" in e.message for e in lint.errors_for(bad)), lint
    assert [e for e in lint.errors if e not in lint.errors_for(bad)] == [], lint


@pytest.mark.slow
def test_every_gitlab_child_passes_check_jsonschema(generated: Path, tmp_path: Path) -> None:
    rv.require_check_jsonschema()
    children = sorted(generated.glob("[!.]*.yml"))
    assert len(children) == 12
    bad = tmp_path / "bad-child.yml"
    bad.write_text(BAD_CHILD)
    result = rv.check_jsonschema_gitlab(*children, bad)  # one run for all of them
    assert result.returncode == 1 and "bad-child.yml" in result.output, result
    assert not [c for c in children if str(c) in result.output], result


@pytest.mark.slow
def test_every_gitlab_child_loads_in_gitlab_ci_local_with_its_jobs(
    generated: Path, tmp_path: Path
) -> None:
    # gitlab-ci-local reads one pipeline per run: each child is listed (parsed,
    # checked against its schema, needs resolved) as the pipeline of a work tree.
    rv.require_gitlab_ci_local()
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "bad-child.yml").write_text(BAD_CHILD)
    refused = rv.gitlab_ci_local_run(repo, file="bad-child.yml", extra_args=["--list-csv"])
    assert refused.returncode != 0, refused
    children = sorted(generated.glob("[!.]*.yml"))
    for child in children:
        shutil.copy2(child, repo / child.name)
    for child in children:
        result = rv.gitlab_ci_local_run(
            repo, file=child.name, extra_args=["--list-csv"], init_git=child == children[0]
        )
        assert result.returncode == 0, result
        listed = {line.split(";")[0] for line in result.stdout.splitlines()[1:] if line}
        document = yaml.safe_load(child.read_text())
        jobs = {k for k, v in document.items() if isinstance(v, dict) and "script" in v}
        assert listed == jobs and jobs, (child.name, sorted(listed ^ jobs)[:5])
