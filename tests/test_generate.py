"""`generate`: every target from one load, one file each, a summary; the real
validators on everything emitted; byte-identical output whatever the hash seed
or the order files come in."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

import matrixgen.pipeline as pipeline_module
from matrixgen.emit.common import EmitSettings
from matrixgen.emit.generate import file_name, generate_all
from matrixgen.engine.checks import typo_platforms
from matrixgen.engine.load import read_directory
from matrixgen.engine.targets import is_holding_pen
from matrixgen.model.errors import UsageError
from matrixgen.model.jobs import Selector, Target
from matrixgen.model.vocab import System
from matrixgen.pipeline import Generation, generate_from_files
from matrixgen.systems.github.emitter import emit_github
from matrixgen.systems.github.limits import GITHUB_MAX_MATRIX_ROWS
from tests import realvalidators as rv
from tests.conftest import megatron_recipes_path, require_megatron, write_tree
from tests.emit_fixtures import V1_TREE, V2_TREE, tree_files, write_workflows

QUARANTINE = """
    entries:
      - id: gpt-tp1-allow
        tracker: https://example.com/issues/1
        kind: flaky
        action: allow-failure
        match: {model: gpt, test_case: gpt3_tp1}
        where: [gitlab/mr]
        owner: team-gpt
        added: "2026-01-01"
        expires: "2099-01-01"
        reason: fails one run in ten
      - id: bert-skip
        tracker: https://example.com/issues/2
        kind: broken
        action: skip
        match: {test_case: bert_tp4}
        owner: team-bert
        added: "2026-01-01"
        expires: "2099-01-01"
        reason: broken on every platform
      - id: tagged-deselect
        tracker: https://example.com/issues/3
        kind: flaky
        action: deselect
        match: {test_case: gpt3_tagged, tags: [legacy]}
        node_ids: ["tests/test_x.py::test_y[a b]"]
        owner: team-gpt
        added: "2026-01-01"
        expires: "2099-01-01"
        reason: one flaky unit test
"""
Q_TREE = {**V2_TREE, "quarantine.yaml": QUARANTINE}


def texts(generation: Generation, targets: list[Target] | None = None) -> dict[str, str]:
    """{file: text} of every target (the ones `generate` writes by default)."""
    if targets is None:
        targets = generation.targets()
    return {o.file: o.text for o in generate_all(generation, targets)}


@cache
def megatron_files() -> dict[str, bytes] | None:
    path = megatron_recipes_path()
    return read_directory(path) if path is not None else None


def job_count(path: Path) -> int:
    """Jobs in an emitted file, read back the way CI reads it."""
    if path.suffix == ".json":
        document = json.loads(path.read_text())
        matrices = document.get("matrices", [document])
        return sum(len(m["include"]) for m in matrices)
    document = yaml.safe_load(path.read_text())
    return sum(1 for k in document if k not in ("stages", "no-jobs-selected"))


# --------------------------------------------------------------------------- generate


def test_generate_writes_one_file_per_configured_target(tree, cli: Callable, tmp_path) -> None:
    root = tree(Q_TREE)
    out = tmp_path / "out"
    run = cli("generate", "--recipes", root, "--out", out, "--format", "json")
    assert run.code == 0, run
    summary = json.loads(run.out)
    gen = generate_from_files(tree_files(Q_TREE))
    config = gen.tree.config
    # In config order, as every command lists targets.
    assert [t["target"] for t in summary["targets"]] == [t.name for t in config.targets]
    assert sorted(p.name for p in out.glob("[!.]*")) == sorted(
        f"{t.name}.json" if t.system is System.GITHUB else f"{t.name}.yml" for t in config.targets
    )
    for entry in summary["targets"]:
        target = config.target(entry["target"])
        assert entry["jobs"] == len(gen.jobs_for(target)) == job_count(out / entry["file"])
        assert entry["system"] == target.system.value
        assert entry["platform"] == target.selector.platform
    by_target = {t["target"]: t for t in summary["targets"]}
    # Each quarantined job, kept or skipped, is named with its entry and tracker.
    marks = [
        (m["job"], m["id"], m["tracker"], m["action"])
        for m in by_target["gl-mr-h100"]["quarantine"]
    ]
    assert marks == [
        (
            "gpt/gpt3_tagged[legacy] on dgx_h100/dev",
            "tagged-deselect",
            "https://example.com/issues/3",
            "deselect",
        ),
        (
            "gpt/gpt3_tp1 on dgx_h100/dev",
            "gpt-tp1-allow",
            "https://example.com/issues/1",
            "allow-failure",
        ),
    ]
    skipped = [(m["id"], m["action"]) for m in by_target["gl-mr-gb200"]["quarantine"]]
    assert skipped == [("bert-skip", "skip"), ("gpt-tp1-allow", "allow-failure")]
    assert by_target["gl-mr-h100"]["quarantined"] == 2  # allow-failure + deselect
    assert by_target["gl-mr-h100"]["allow_failure"] == 1
    assert by_target["gl-mr-gb200"]["skipped"] == 1  # bert_tp4
    assert by_target["gh-l1-h100"]["quarantined"] == 0  # the entry is for gitlab/mr only
    assert summary["total"]["jobs"] == sum(t["jobs"] for t in summary["targets"])
    platforms = summary["platforms"]
    assert platforms["dgx_h100"]["jobs"] == sum(
        t["jobs"] for t in summary["targets"] if t["platform"] == "dgx_h100"
    )


def test_quarantine_marks_reach_the_generated_files(tree, cli: Callable, tmp_path) -> None:
    root = tree(Q_TREE)
    assert cli("generate", "--recipes", root, "--out", tmp_path).code == 0
    child = yaml.safe_load((tmp_path / "gl-mr-h100.yml").read_text())
    allowed = child["gpt3_tp1_dev_dgx_h100"]
    assert allowed["allow_failure"] is True
    assert allowed["variables"]["MATRIXGEN_QUARANTINE"] == (
        "gpt-tp1-allow https://example.com/issues/1"
    )
    legacy = child["gpt3_tagged_dev_dgx_h100_legacy"]
    # The node id reaches the pytest plugin (an exact match), not --deselect.
    assert "--deselect" not in legacy["script"][0]
    assert legacy["variables"]["MATRIXGEN_QUARANTINE_ENTRY"].startswith("tagged-deselect ")
    assert legacy["variables"]["MATRIXGEN_TAG"] == "legacy"
    assert "allow_failure" not in legacy
    gb200 = yaml.safe_load((tmp_path / "gl-mr-gb200.yml").read_text())
    assert "bert_tp4_dev_dgx_gb200" not in gb200 and "bert_tp2_dev_dgx_gb200" in gb200
    rows = json.loads((tmp_path / "gh-l1-h100.json").read_text())["include"]
    assert not any("quarantine" in r for r in rows)


def test_summary_table(tree, cli: Callable, tmp_path) -> None:
    run = cli("generate", "--recipes", tree(Q_TREE), "--out", tmp_path)
    assert run.code == 0, run
    header, _rule, *rows = run.out.split("\n\n")[0].splitlines()
    assert header.split()[:4] == ["target", "system", "platform", "jobs"]
    assert len(rows) == 6
    assert any(r.split()[:4] == ["gl-mr-gb200", "gitlab", "dgx_gb200", "2"] for r in rows), rows
    platforms = run.out.split("\n\n")[1].splitlines()
    assert platforms[0].split() == ["platform", "targets", "jobs"]
    # The quarantine table is the third, after a blank line of its own.
    marked = run.out.split("\n\n")[2].splitlines()
    assert marked[0].split() == ["quarantine", "tracker", "action", "targets", "jobs"]
    assert "6 target(s)" in run.err


def test_v1_tree_gets_a_target_per_scope_platform_environment(tree, cli, tmp_path) -> None:
    run = cli("generate", "--recipes", tree(V1_TREE), "--out", tmp_path, "--format", "json")
    assert run.code == 0, run
    summary = json.loads(run.out)
    assert {t["target"]: t["jobs"] for t in summary["targets"]} == {
        "github-L1-dgx_h100-dev": 1,  # mr-github is the L1 tier, on GitHub
        "gitlab-L2-dgx_h100-dev": 1,  # nightly is L2
        "gitlab-mr-dgx_h100-dev": 2,
    }
    child = yaml.safe_load((tmp_path / "gitlab-mr-dgx_h100-dev.yml").read_text())
    assert child["gpt3_flaky_dev_dgx_h100"]["allow_failure"] is True
    assert "allow_failure" not in child["gpt3_small_dev_dgx_h100"]


def test_given_targets_only(tree, cli: Callable, tmp_path) -> None:
    root, out = tree(V2_TREE), tmp_path / "out"
    run = cli(
        "generate",
        *("--recipes", root, "--out", out, "--format", "json"),
        *("--target-name", "gl-mr-h100"),
        *("--target", "scope=L0,platform=dgx_gb200,environment=dev"),
    )
    assert run.code == 0, run
    assert [t["target"] for t in json.loads(run.out)["targets"]] == [
        "gl-mr-h100",
        "github-L0-dgx_gb200-dev",
    ]
    assert sorted(p.name for p in out.glob("[!.]*")) == [
        "github-L0-dgx_gb200-dev.json",
        "gl-mr-h100.yml",
    ]
    unknown = cli("generate", "--recipes", root, "--out", tmp_path, "--target-name", "nope")
    assert unknown.code == 2


def test_targets_sharing_a_file_are_refused(tree, cli: Callable, tmp_path) -> None:
    root = tree(V1_TREE)
    # Two ad hoc targets whose names differ only in characters a file name cannot keep.
    gen = generate_from_files(tree_files(V1_TREE))
    a = Target(name="x y", system=System.GITLAB, selector=Selector(scope="mr"))
    b = Target(name="x/y", system=System.GITLAB, selector=Selector(scope="mr"))
    assert file_name(a) == file_name(b) == "x_y.yml"
    with pytest.raises(Exception, match="same file"):
        generate_all(gen, [a, b])
    # Names that differ only in case are one file on macOS and Windows.
    upper = Target(name="Gl-MR", system=System.GITLAB, selector=Selector(scope="mr"))
    lower = Target(name="gl-mr", system=System.GITLAB, selector=Selector(scope="mr"))
    with pytest.raises(UsageError, match="same file"):
        generate_all(gen, [upper, lower])
    blocked = tmp_path / "file"
    blocked.write_text("")
    run = cli("generate", "--recipes", root, "--out", blocked)
    assert run.code == 2 and "Traceback" not in run.err


def test_ad_hoc_targets_are_checked_against_the_vocabulary(tree, cli: Callable, tmp_path) -> None:
    root = tree(V2_TREE)
    for command, spec, says in [
        ("gitlab", "scope=mr,platform=dgx_h10,environment=dev", 'did you mean "dgx_h100"'),
        ("github", "scope=L1,platform=dgx_h100,environment=deV", 'did you mean "dev"'),
        ("github", "scope=mr,platform=dgx_h100,environment=dev", "a gitlab scope"),
        ("gitlab", "scope=nightly,platform=dgx_h100,environment=lts,tag=lastest", "latest"),
    ]:
        run = cli(command, "--recipes", root, "--target", spec)
        assert run.code == 2 and says in run.err, (spec, run)
    out = tmp_path / "out"
    spec = "scope=mr-slim,platform=dgx_h100,environment=dev"
    run = cli("generate", "--recipes", root, "--out", out, "--target", spec)
    assert run.code == 2 and 'unknown gitlab scope "mr-slim"' in run.err, run
    assert not out.exists()
    # A legacy name of a declared tier is the tier.
    run = cli("gitlab", "--recipes", root, "--target", "scope=L2,platform=dgx_h100,environment=lts")
    assert run.code == 0 and "warning" not in run.err, run


def test_a_tree_without_vocabulary_refuses_a_target_value_no_job_uses(tree, cli: Callable) -> None:
    root = tree(V1_TREE)
    for command in ("gitlab", "github", "list"):
        run = cli(
            command, "--recipes", root, "--target", "scope=mr,platform=dgx_h10,environment=dev"
        )
        assert run.code == 2 and run.out == "", run
        assert 'platform "dgx_h10": no job of the tree has this platform' in run.err
        assert '(did you mean "dgx_h100"?); used: dgx_h100' in run.err
    # Every value used, but no job has them together: the placeholder, no warning.
    spec = "scope=nightly,platform=dgx_h100,environment=dev,cadence=pr"
    run = cli("gitlab", "--recipes", root, "--target", spec)
    assert run.code == 0 and "warning" not in run.err, run
    assert "no-jobs-selected" in run.out
    run = cli(
        "gitlab", "--recipes", root, "--target", "scope=nightly,platform=dgx_h100,environment=dev"
    )
    assert run.code == 0 and "warning" not in run.err, run


@settings(max_examples=60, deadline=None)
@given(
    scope=st.sampled_from([None, "mr", "L0", "L1", "nightly", "L2", "mr-slim", "x"]),
    platform=st.sampled_from([None, "dgx_h100", "dgx_gb200", "x"]),
    environment=st.sampled_from([None, "dev", "lts"]),
    cadence=st.sampled_from([None, "pr", "nightly"]),
    tag=st.sampled_from([None, "latest", "legacy"]),
    system=st.sampled_from(list(System)),
)
def test_selections_select_what_the_generation_selects(**fields) -> None:
    """The indexed, shared selection of a target is what selecting from every
    job and applying quarantine gives, asked once or twice."""
    from matrixgen.quarantine.apply import selection as quarantine_selection

    generation = generate_from_files(tree_files(Q_TREE))
    system = fields.pop("system")
    target = Target(name="t", system=system, selector=Selector(**fields))
    plain = quarantine_selection(generation.jobs, generation.quarantine.entries, target)
    assert generation.selection(target) == plain
    assert generation.selection(target) is generation.selection(target)


def test_generate_loads_and_expands_once(tree, cli: Callable, tmp_path, monkeypatch) -> None:
    calls = {"load": 0, "expand": 0}
    real_load, real_expand = pipeline_module.load_tree, pipeline_module.expand_tree

    def load(*args, **kwargs):
        calls["load"] += 1
        return real_load(*args, **kwargs)

    def expand(*args, **kwargs):
        calls["expand"] += 1
        return real_expand(*args, **kwargs)

    monkeypatch.setattr(pipeline_module, "load_tree", load)
    monkeypatch.setattr(pipeline_module, "expand_tree", expand)
    run = cli("generate", "--recipes", tree(V2_TREE), "--out", tmp_path / "out")
    assert run.code == 0, run
    assert len(list((tmp_path / "out").glob("[!.]*"))) == 6
    assert calls == {"load": 1, "expand": 1}


def test_a_generation_with_other_jobs_selects_afresh() -> None:
    """Narrowing the jobs (as change-based selection does, or by building a
    generation from another expansion) must not reuse the selections made from
    the wider set: the cache belongs to the generation, not to its values."""
    generation = generate_from_files(tree_files(Q_TREE))
    target = Target(name="t", system=System.GITLAB, selector=Selector(scope="mr"))
    wide = generation.selection(target)
    assert wide.jobs
    for narrow in (
        generation.with_jobs(()),
        Generation(generation.tree, replace(generation.expansion, jobs=())),
        Generation(generation.tree, generation.expansion.with_jobs(())),
    ):
        assert narrow.selection(target).jobs == ()
        assert generation.selection(target) is wide


def test_generate_selects_each_target_once(tree, cli: Callable, tmp_path, monkeypatch) -> None:
    """validate's checks (GitLab names, the graph, stats) and the emitters share
    each target's selection: one quarantine pass per target in a whole run."""
    from collections import Counter

    selected: Counter[str] = Counter()
    real = pipeline_module.quarantine_selection

    def counting(jobs, entries, target, **kwargs):
        selected[getattr(target, "name", "?")] += 1
        return real(jobs, entries, target, **kwargs)

    monkeypatch.setattr(pipeline_module, "quarantine_selection", counting)
    run = cli("generate", "--recipes", tree(Q_TREE), "--out", tmp_path / "out")
    assert run.code == 0, run
    assert len(selected) == 6
    assert set(selected.values()) == {1}, selected


def test_without_arguments_it_runs_on_the_checkout_recipes(tmp_path, cli, monkeypatch) -> None:
    checkout = tmp_path / "checkout"
    write_tree(checkout / "recipes", V2_TREE)
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    (checkout / "sub").mkdir()
    monkeypatch.chdir(checkout / "sub")
    run = cli("generate")
    assert run.code == 0, run
    assert len(list((checkout / "sub" / "out").glob("[!.]*"))) == 6


def test_an_invalid_tree_generates_nothing(tree, cli: Callable, tmp_path) -> None:
    broken = {**V2_TREE, "bert.yaml": V2_TREE["bert.yaml"].replace("[mr, L0]", "[mr, L9]")}
    run = cli("generate", "--recipes", tree(broken), "--out", tmp_path / "out")
    assert run.code == 1, run
    assert not (tmp_path / "out").exists()


def test_one_job_defined_twice_for_a_target_is_one_job(tree, cli: Callable, tmp_path) -> None:
    """The same job twice in scope mr (other cadences: a GitLab mr target, which
    asks for no cadence, takes both): validate warns and names both rows; the
    child pipeline holds the job once."""
    twice = V2_TREE["bert.yaml"].replace(
        "      - test_case: [bert_tp4]\n        products:\n          - environment: [dev]\n"
        "            scope: [mr]\n",
        "      - test_case: [bert_tp4]\n        products:\n          - environment: [dev]\n"
        "            scope: [mr]\n            cadence: [pr]\n"
        "          - environment: [dev]\n            scope: [mr]\n            cadence: [nightly]\n",
    )
    assert twice != V2_TREE["bert.yaml"]
    root = tree({**V2_TREE, "bert.yaml": twice})
    checked = cli("validate", "--recipes", root)
    assert checked.code == 0, checked
    lines = [line for line in checked.err.splitlines() if "[duplicate-job]" in line]
    assert len(lines) == 1, checked.err
    assert re.match(r".*bert\.yaml:\d+:\d+: warning: ", lines[0]), lines
    assert len(re.findall(r"bert\.yaml:\d+:\d+", lines[0])) == 3, lines  # where + both rows
    assert "gl-mr-gb200" in lines[0]
    run = cli("generate", "--recipes", root, "--out", tmp_path / "out")
    assert run.code == 0, run
    single = cli("generate", "--recipes", tree(V2_TREE), "--out", tmp_path / "single")
    assert single.code == 0, single
    for path in sorted((tmp_path / "single").iterdir()):
        assert (tmp_path / "out" / path.name).read_text() == path.read_text(), path.name


# --------------------------------------------------------------------------- Megatron-LM


def test_megatron_every_target_in_one_run(megatron_dir: Path, cli, tmp_path) -> None:
    run = cli("generate", "--recipes", megatron_dir, "--out", tmp_path, "--format", "json")
    assert run.code == 0, run
    summary = json.loads(run.out)
    gen = generate_from_files(read_directory(megatron_dir))
    targets = gen.targets()
    assert [t["target"] for t in summary["targets"]] == [t.name for t in targets]
    systems = {t["system"] for t in summary["targets"]}
    assert systems == {"github", "gitlab"}  # GitHub tiers included
    for entry, target in zip(summary["targets"], targets, strict=True):
        assert entry["jobs"] == len(gen.select(target.selector)) > 0
        assert job_count(tmp_path / entry["file"]) == entry["jobs"]
    # No pipeline for the holding pens, nor for the platform validate calls a typo.
    typo = typo_platforms(gen.tree)
    assert typo == {"dg  x_h100"}
    scopes = {t["scope"] for t in summary["targets"]}
    assert {"mr", "L0", "L1", "L2", "mr-slim", "unit-tests"} <= scopes
    assert not scopes & {"mr-broken", "mr-github-temp-disabled", "flaky", "deprecated", "cleanup"}
    assert not any(is_holding_pen(s) for s in scopes)
    assert {t["platform"] for t in summary["targets"]} == {"dgx_h100", "dgx_gb200", "dgx_a100"}
    # Every other job of a scope, platform and environment lands in exactly one
    # target of each system that runs its scope (unit-test buckets: GitLab's and
    # GitHub's, which builds its bucket matrix from the same rows).
    placed = sum(t["jobs"] for t in summary["targets"])
    real = [
        j
        for j in gen.jobs
        if j.scope and j.platform and j.environment
        if not is_holding_pen(j.scope) and j.platform not in typo
    ]
    from matrixgen.model.vocab import System

    both = sum(1 for j in real if j.scope in System.GITHUB.also_runs)
    assert both > 0 and placed == len(real) + both

    # Asked for, the holding pens get their targets; a name generate printed is an input.
    more = cli(
        "generate",
        "--recipes",
        megatron_dir,
        "--out",
        tmp_path / "all",
        "--format",
        "json",
        "--holding-pen",
    )
    assert more.code == 0, more
    every = {t["target"]: t for t in json.loads(more.out)["targets"]}
    pens = {t["scope"] for t in every.values()} - scopes
    assert pens == {
        "mr-broken",
        "mr-github-broken",
        "nightly-broken",
        "mr-github-temp-disabled",
        "flaky",
        "deprecated",
        "cleanup",
    }
    assert sum(t["jobs"] for t in every.values()) == sum(
        1 + (j.scope in System.GITHUB.also_runs)
        for j in gen.jobs
        if j.scope and j.platform and j.environment and j.platform not in typo
    )
    for name in ("gitlab-mr-broken-dgx_h100-dev", summary["targets"][0]["target"]):
        one = cli(
            "generate",
            "--recipes",
            megatron_dir,
            "--out",
            tmp_path / "one",
            "--target",
            name,
            "--format",
            "json",
        )
        assert one.code == 0, one
        assert json.loads(one.out)["targets"][0]["jobs"] == every[name]["jobs"]


# --------------------------------------------------------------------------- validators


def _emit_trees(root: Path, trees: dict[str, dict[str, bytes]]) -> dict[str, int]:
    """Write every file generate writes for each tree into root/<name>/;
    returns {tree: number of GitLab child pipelines written}."""
    children = {}
    for name, files in trees.items():
        (root / name).mkdir()
        written = texts(generate_from_files(files))
        for file, text in written.items():
            (root / name / file).write_text(text)
        children[name] = sum(1 for f in written if f.endswith(".yml"))
    return children


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> Path:
    """Every file generate writes for the fixture trees, and one sharded
    matrix, in one directory per tree."""
    root = tmp_path_factory.mktemp("emitted")
    _emit_trees(root, {"v2": tree_files(Q_TREE), "v1": tree_files(V1_TREE)})
    gen = generate_from_files(tree_files(V2_TREE))
    target = gen.tree.config.target("gh-l1-h100")
    base = gen.jobs_for(target)[0]
    jobs = [
        replace(base, test_case=f"c{i:03d}", name=f"c{i:03d}", env=(), args=())
        for i in range(GITHUB_MAX_MATRIX_ROWS + 1)
    ]
    (root / "sharded").mkdir()
    matrix = emit_github(jobs, EmitSettings(target=target))
    (root / "sharded" / "big.json").write_text(matrix.text())
    return root


@pytest.fixture(scope="module")
def emitted_megatron(tmp_path_factory) -> Path:
    """Every file generate writes for the Megatron-LM tree (skips when it is
    absent, fails under MATRIXGEN_REQUIRE_MEGATRON=1)."""
    require_megatron()
    files = megatron_files()
    assert files is not None
    root = tmp_path_factory.mktemp("emitted-megatron")
    _emit_trees(root, {"megatron": files})
    return root / "megatron"


# Files the validators must reject, checked in the same batch as the emitted ones
# so a validator that passes everything would fail these tests.
BAD_CHILD = "j:\n  script: [echo]\n  retry: {max: 3}\n"
BAD_MATRIX = {"include": [{"model": "m"}]}  # a row without test_case, timeout, ...


def _check_gitlab_children(files: list[Path], tmp_path: Path) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    bad = tmp_path / "bad-child.yml"
    bad.write_text(BAD_CHILD)
    result = rv.check_jsonschema_gitlab(*files, bad)
    assert result.returncode == 1, str(result)
    assert "bad-child.yml" in result.output, str(result)
    assert not [f for f in files if str(f) in result.output], str(result)


def _check_github_matrices(files: list[Path], tmp_path: Path) -> list[Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    dest = tmp_path / ".github" / "workflows"
    workflows = write_workflows(files, dest)
    result = rv.check_jsonschema_github(*workflows)
    assert result.ok, str(result)
    rv.require_actionlint()
    # A workflow that reads a key the rows do not have must fail actionlint.
    (bad,) = write_workflows([_write_json(tmp_path, BAD_MATRIX)], tmp_path / "bad")
    lint = rv.actionlint(*workflows, bad)
    assert lint.returncode == 1, str(lint)
    assert any("test_case" in e.message for e in lint.errors_for(bad)), str(lint)
    assert [e for e in lint.errors if e not in lint.errors_for(bad)] == [], str(lint)
    return workflows


@pytest.mark.slow
def test_emitted_gitlab_files_pass_check_jsonschema(emitted: Path, tmp_path) -> None:
    rv.require_check_jsonschema()
    files = sorted(emitted.rglob("*.yml"))
    # Every GitLab target of both fixture trees, counted from their targets.
    expected = sum(
        sum(1 for t in g.targets() if t.system is System.GITLAB)
        for g in (generate_from_files(tree_files(Q_TREE)), generate_from_files(tree_files(V1_TREE)))
    )
    assert len(files) == expected >= 6, files
    _check_gitlab_children(files, tmp_path)


@pytest.mark.slow
def test_emitted_github_matrices_pass_check_jsonschema_and_actionlint(
    emitted: Path, tmp_path
) -> None:
    rv.require_check_jsonschema()
    files = sorted(emitted.rglob("*.json"))
    assert len(files) >= 2 + 1 + 1, files
    workflows = _check_github_matrices(files, tmp_path)
    sharded = yaml.safe_load((tmp_path / ".github" / "workflows" / "big.yml").read_text())
    assert {"shard-0", "shard-1"} <= set(sharded["jobs"])
    assert len(workflows) == len(files)


@pytest.mark.slow
def test_megatron_emitted_files_pass_check_jsonschema_and_actionlint(
    emitted_megatron: Path, tmp_path
) -> None:
    rv.require_check_jsonschema()
    children = sorted(emitted_megatron.glob("*.yml"))
    matrices = sorted(emitted_megatron.glob("*.json"))
    # 16 GitLab targets once holding pens and the typo platform are left out.
    assert len(children) >= 16 and len(matrices) >= 4, (children, matrices)
    _check_gitlab_children(children, tmp_path / "gitlab")
    _check_github_matrices(matrices, tmp_path / "github")


def _write_json(where: Path, document: dict) -> Path:
    path = where / "m.json"
    path.write_text(json.dumps(document))
    return path


# --------------------------------------------------------------------------- determinism


@settings(max_examples=20, deadline=None)
@given(st.permutations(sorted(tree_files(Q_TREE))))
def test_same_bytes_whatever_the_file_order(order: list[str]) -> None:
    files = tree_files(Q_TREE)
    expected = _reference("v2")
    assert texts(generate_from_files({rel: files[rel] for rel in order})) == expected


@settings(max_examples=4, deadline=None)
@given(st.randoms(use_true_random=False))
def test_megatron_same_bytes_whatever_the_file_order(rnd) -> None:
    require_megatron()
    files = megatron_files()
    assert files is not None
    order = sorted(files)
    rnd.shuffle(order)
    assert texts(generate_from_files({rel: files[rel] for rel in order})) == _reference("megatron")


@cache
def _reference(which: str) -> dict[str, str]:
    files = tree_files(Q_TREE) if which == "v2" else megatron_files()
    assert files is not None
    return texts(generate_from_files(dict(sorted(files.items()))))


def _cli_digest(recipes: Path, out: Path, seed: int) -> str:
    """sha256 over stdout and every file of `generate` run in a fresh process."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "matrixgen",
            "generate",
            "--recipes",
            str(recipes),
            "--out",
            str(out),
            "--format",
            "json",
        ],
        capture_output=True,
        env=env,
        check=True,
    )
    digest = hashlib.sha256(proc.stdout)
    for path in sorted(out.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(min_value=1, max_value=2**32 - 1))
def test_same_bytes_whatever_the_hash_seed(tmp_path_factory, seed: int) -> None:
    trees = _seed_trees(tmp_path_factory)
    for name, recipes in trees.items():
        reference = _seed_reference(name, recipes, tmp_path_factory)
        out = tmp_path_factory.mktemp(f"seed{seed}")
        assert _cli_digest(recipes, out, seed) == reference, (name, seed)


_SEED_CACHE: dict[str, object] = {}


def _seed_trees(factory) -> dict[str, Path]:
    if "trees" not in _SEED_CACHE:
        trees = {"v2": write_tree(factory.mktemp("seedtree"), Q_TREE)}
        path = megatron_recipes_path()
        if path is not None:
            trees["megatron"] = path
        _SEED_CACHE["trees"] = trees
    return _SEED_CACHE["trees"]  # type: ignore[return-value]


def _seed_reference(name: str, recipes: Path, factory) -> str:
    key = f"ref-{name}"
    if key not in _SEED_CACHE:
        _SEED_CACHE[key] = _cli_digest(recipes, factory.mktemp("ref"), 0)
    return _SEED_CACHE[key]  # type: ignore[return-value]
