"""The coverage feature, views.references and `matrixgen coverage`: per target
the selected jobs that miss a reference file, orphans, the validate check and
generate's switch; on trees written here, on the shipped tree (its reference
tree below tests/functional_tests/test_cases), and on the Megatron-LM tree with
a tree of empty files built from the listing of its test cases."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.coverage.report import compute_coverage
from matrixgen.model.references import (
    ReferenceSettings,
    ReferenceTemplate,
    job_opt_out,
    list_directory,
    reference_path,
)
from matrixgen.pipeline import Generation, generate
from matrixgen.views.references import ReferenceChecker, read_listing
from tests.conftest import REQUIRE_MEGATRON_ENV, megatron_required, write_tree
from tests.gitrepo import GitRepo

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "schema" / "coverage.schema.json").read_text())
LOCATED = re.compile(
    r"^(?P<file>[^\n:]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning): (?P<msg>.*)$", re.M
)
GOLDEN = (
    "tests/functional_tests/test_cases/{model}/{test_case}/"
    "golden_values_{environment}_{platforms}.json"
)
CONFIG_FILE = "tests/functional_tests/test_cases/{model}/{test_case}/model_config.yaml"

CONFIG: dict[str, Any] = {
    "format_version": 2,
    "vocabulary": {
        "platforms": ["dgx_h100", "dgx_gb200"],
        "environments": ["dev", "lts"],
        "scopes": {"gitlab": ["mr", "nightly"]},
    },
    "targets": {
        "mr-h100": {
            "system": "gitlab",
            "scope": "mr",
            "platform": "dgx_h100",
            "environment": "dev",
        },
        "mr-gb200": {
            "system": "gitlab",
            "scope": "mr",
            "platform": "dgx_gb200",
            "environment": "dev",
        },
        "nightly-h100": {
            "system": "gitlab",
            "scope": "nightly",
            "platform": "dgx_h100",
            "environment": "dev",
        },
    },
    "references": {
        "templates": {"golden": GOLDEN, "config": CONFIG_FILE},
        "gating": ["mr-*"],
    },
}

GPT = """\
type: basic
format_version: 2
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: mcore-pyt-{environment}
  platforms: dgx_h100
products:
  - test_case: [gpt_a]
    products:
      - {environment: [dev], scope: [mr, nightly], platforms: [dgx_h100, dgx_gb200]}
  - test_case: [gpt_b]
    products:
      - {environment: [dev], scope: [nightly]}
  - test_case: [gpt_c]
    products:
      - environment: [dev]
        scope: [mr]
        references: {skip: [golden], reason: compares its config only}
"""
PERF = """\
type: basic
format_version: 2
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: perf
  build: mcore-pyt-{environment}
  platforms: dgx_h100
  references: {skip: all, reason: perf cases report to a dashboard}
products:
  - test_case: [perf_a]
    products:
      - {environment: [dev], scope: [mr]}
"""
BUILD = """\
type: build
format_version: 2
spec: {name: mcore-pyt-dev, source: {image: "nvcr.io/pytorch:26.09"}}
"""
CASES = "tests/functional_tests/test_cases"
# Every reference the tree needs but gpt_a's GB200 golden values; one orphan.
FILES = {
    f"{CASES}/gpt/gpt_a/model_config.yaml": "",
    f"{CASES}/gpt/gpt_a/golden_values_dev_dgx_h100.json": "{}",
    f"{CASES}/gpt/gpt_b/model_config.yaml": "",
    f"{CASES}/gpt/gpt_b/golden_values_dev_dgx_h100.json": "{}",
    f"{CASES}/gpt/gpt_b/golden_values_dev_dgx_h100_2nd.json": "{}",
    f"{CASES}/gpt/gpt_c/model_config.yaml": "",
    f"{CASES}/gpt/gpt_old/golden_values_lts_dgx_a100.json": "{}",
    f"{CASES}/gpt/README.md": "not a reference",
}


def project(
    root: Path,
    config: Mapping[str, Any] | None = None,
    files: Mapping[str, str | None] | None = None,
    **recipes: str,
) -> Path:
    """A checkout-like directory: recipes/ and the reference tree beside it."""
    wanted = dict(FILES)
    wanted.update(files or {})
    write_tree(root, {k: v for k, v in wanted.items() if v is not None})
    tree = {
        "recipes/matrixgen.yaml": yaml.safe_dump(dict(config or CONFIG), sort_keys=False),
        "recipes/gpt.yaml": GPT,
        "recipes/perf.yaml": PERF,
        "recipes/_build-dev.yaml": BUILD,
    }
    tree.update({f"recipes/{name}.yaml": text for name, text in recipes.items()})
    write_tree(root, tree)
    return root / "recipes"


@pytest.fixture
def outside_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """tmp_path, with git never looking above it (the top is the recipes' parent)."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def coverage_json(cli: Callable, *args: str | Path) -> tuple[int, dict[str, Any], str]:
    run = cli("coverage", "--format", "json", *args)
    data = json.loads(run.out)
    jsonschema.validate(data, SCHEMA)
    return run.code, data, run.err


# --------------------------------------------------------------------------- small tree


def test_missing_per_target_with_hint_and_orphans(outside_git: Path, cli: Callable) -> None:
    recipes = project(outside_git / "repo")
    code, data, err = coverage_json(cli, "--recipes", recipes)
    assert code == 1, err  # mr-gb200 gates
    missing = f"repo/{CASES}/gpt/gpt_a/golden_values_dev_dgx_gb200.json"
    assert data["missing"] == [
        {
            "target": "mr-gb200",
            "model": "gpt",
            "test_case": "gpt_a",
            "tag": None,
            "environment": "dev",
            "platform": "dgx_gb200",
            "reference": "golden",
            "path": missing,
            "hint": f"repo/{CASES}/gpt/gpt_a/golden_values_dev_dgx_h100.json",
        }
    ]
    # The variant of a used file and a file fitting no template are no orphans.
    assert data["orphans"] == [
        {
            "path": f"repo/{CASES}/gpt/gpt_old/golden_values_lts_dgx_a100.json",
            "model": "gpt",
            "test_case": "gpt_old",
            "environment": "lts",
            "platform": "dgx_a100",
        }
    ]
    by_target = {t["target"]: t for t in data["targets"]}
    # mr-h100: gpt_a, gpt_c (config only) and perf_a (opted out of everything).
    assert by_target["mr-h100"] == {
        "target": "mr-h100",
        "gating": True,
        "jobs": 3,
        "checked": 2,
        "missing": 0,
    }
    assert by_target["nightly-h100"]["gating"] is False
    assert data["root"] == "repo"
    assert "1 missing reference(s) (1 in gating targets), 1 orphan(s)" in err


def test_validate_gating_error_and_warning_elsewhere(outside_git: Path, cli: Callable) -> None:
    recipes = project(outside_git / "repo", files={f"{CASES}/gpt/gpt_b/model_config.yaml": None})
    run = cli("validate", "--recipes", recipes)
    assert run.code == 1, run
    found = {(m["sev"], m["msg"].split(":")[0]) for m in LOCATED.finditer(run.err)}
    assert found == {
        ("error", "gpt/gpt_a on dgx_gb200/dev"),
        ("warning", "gpt/gpt_b on dgx_h100/dev"),
    }
    error = next(m for m in LOCATED.finditer(run.err) if m["sev"] == "error")
    assert error["file"] == str(recipes / "gpt.yaml")
    # The row that selects it.
    assert int(error["line"]) == line_of(recipes / "gpt.yaml", "platforms: [dgx_h100, dgx_gb200]")
    assert "gating target(s) mr-gb200" in error["msg"]
    assert "nearest: " in error["msg"] and error["msg"].endswith("[reference-missing]")
    # The same tree without the gating gap: warnings only, exit 0.
    write_tree(outside_git / "repo", {f"{CASES}/gpt/gpt_a/golden_values_dev_dgx_gb200.json": ""})
    run = cli("validate", "--recipes", recipes)
    assert run.code == 0, run
    assert "0 error(s), 1 warning(s)" in run.err


SKIP_GPT_A = """\
entries:
  - id: gpt-a-off
    tracker: "https://github.com/example/x/issues/1"
    kind: broken
    action: skip
    reason: hangs
    owner: someone
    added: "2026-11-20"
    expires: "2026-12-20"
    match: {test_case: gpt_a}
"""


def test_a_job_quarantine_skips_needs_nothing_and_keeps_its_files(
    outside_git: Path, cli: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    # gpt_a is skipped everywhere: its GB200 gap is no gap, and its H100 files,
    # which only skipped jobs look for, are still no orphans.
    recipes = project(outside_git / "repo")
    write_tree(recipes, {"quarantine.yaml": SKIP_GPT_A})
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-12-01")
    code, data, err = coverage_json(cli, "--recipes", recipes)
    assert code == 0, err
    assert data["missing"] == []
    assert [o["test_case"] for o in data["orphans"]] == ["gpt_old"]
    by_target = {t["target"]: t for t in data["targets"]}
    assert by_target["mr-gb200"]["jobs"] == 0


def test_generate_refuses_only_behind_the_switch(outside_git: Path, cli: Callable) -> None:
    recipes = project(outside_git / "repo")
    out = outside_git / "out"
    run = cli("generate", "--recipes", recipes, "--out", out)
    assert run.code == 0, run
    config = copy_config(refuse_generate=True)
    recipes = project(outside_git / "repo", config=config)
    run = cli("generate", "--recipes", recipes, "--out", out)
    assert run.code == 1, run
    assert "golden_values_dev_dgx_gb200.json" in run.err and "[reference-missing]" in run.err
    assert "nothing was generated" in run.err
    # The emitter of one target refuses too; a target without the gap does not matter:
    # the tree is refused as a whole, as for any validate error.
    run = cli("gitlab", "--recipes", recipes, "--target-name", "mr-h100")
    assert run.code == 1, run
    write_tree(outside_git / "repo", {f"{CASES}/gpt/gpt_a/golden_values_dev_dgx_gb200.json": ""})
    run = cli("generate", "--recipes", recipes, "--out", out)
    assert run.code == 0, run


def copy_config(**references: Any) -> dict[str, Any]:
    config = json.loads(json.dumps(CONFIG))
    config["references"].update(references)
    return config


def test_opt_outs_are_checked(outside_git: Path, cli: Callable) -> None:
    bad = GPT.replace(
        "references: {skip: [golden], reason: compares its config only}",
        "references: {skip: [goldne], reason: compares its config only}",
    )
    no_reason = PERF.replace(", reason: perf cases report to a dashboard", "")
    recipes = project(outside_git / "repo", gpt=bad, perf=no_reason)
    run = cli("validate", "--recipes", recipes)
    assert run.code == 1, run
    found = [m for m in LOCATED.finditer(run.err) if "[reference-opt-out]" in m["msg"]]
    assert len(found) == 2, run.err
    by_file = {Path(m["file"]).name: m for m in found}
    assert 'did you mean "golden"' in by_file["gpt.yaml"]["msg"]
    assert int(by_file["gpt.yaml"]["line"]) == line_of(recipes / "gpt.yaml", "goldne")
    assert "needs a reason" in by_file["perf.yaml"]["msg"]
    assert int(by_file["perf.yaml"]["line"]) == line_of(recipes / "perf.yaml", "references:")


def test_config_mistakes_are_config_errors(outside_git: Path, cli: Callable) -> None:
    recipes = project(outside_git / "repo", config=copy_config(gating=["mr-h10"]))
    run = cli("validate", "--recipes", recipes)
    assert run.code == 3, run
    assert 'names no configured target (did you mean "mr-h100"?)' in run.err
    recipes = project(outside_git / "repo", config=copy_config(root="/etc"))
    run = cli("validate", "--recipes", recipes)
    assert run.code == 3, run
    assert "relative to the top of the repository" in run.err
    config = copy_config()
    config["references"]["templates"]["golden"] = "../{model}/x.json"
    recipes = project(outside_git / "repo", config=config)
    run = cli("coverage", "--recipes", recipes)
    assert run.code == 3, run
    assert 'reference "golden"' in run.err


def test_a_template_naming_an_unknown_field(outside_git: Path, cli: Callable) -> None:
    config = copy_config()
    config["references"]["templates"]["golden"] = CASES + "/{model}/{bucket}.json"
    recipes = project(outside_git / "repo", config=config)
    run = cli("validate", "--recipes", recipes)
    assert run.code == 1, run
    assert "[reference-template]" in run.err and "{bucket}" in run.err


UNFILLABLE = CASES + "/{model}/{bucket}.json"  # no job has a bucket


def test_a_job_that_cannot_fill_a_template_is_counted_once(
    outside_git: Path, cli: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Asked for its paths and for what it misses, and selected by two targets
    # (skipped by a quarantine entry in both: a new value in each), a job is one job.
    config = copy_config()
    config["references"]["templates"]["golden"] = UNFILLABLE
    recipes = project(outside_git / "repo", config=config)
    write_tree(recipes, {"quarantine.yaml": SKIP_GPT_A})
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-12-01")
    gen = generate(recipes)
    selections = [gen.selection(t) for t in gen.targets()]
    jobs = {j.duplicate_key() for s in selections for j in (*s.jobs, *s.skipped)}
    assert len(jobs) > 1
    run = cli("validate", "--recipes", recipes)
    assert f" and {len(jobs) - 1} other job(s))" in run.err, run.err
    run = cli("coverage", "--recipes", recipes)
    assert f", {len(jobs)} job(s))" in run.err, run.err
    mr_h100 = "scope=mr,platform=dgx_h100,environment=dev,system=gitlab"
    run = cli("coverage", "--recipes", recipes, "--target", "mr-h100", "--target", mr_h100)
    assert f", {len(jobs)} job(s))" in run.err, run.err


@pytest.fixture(scope="module")
def unfillable(tmp_path_factory: pytest.TempPathFactory) -> tuple[Generation, ReferenceChecker]:
    """The small tree with a template no job fills, and a checker of it."""
    config = copy_config()
    config["references"]["templates"]["golden"] = UNFILLABLE
    top = tmp_path_factory.mktemp("unfillable")
    gen = generate(project(top, config=config))
    settings = gen.tree.config.references
    assert settings is not None
    return gen, ReferenceChecker(settings, list_directory(top, settings.prefix, shown_root=""))


@given(asked=st.lists(st.tuples(st.booleans(), st.integers(0, 99)), max_size=20))
@example(asked=[(True, 0), (False, 0)])  # its paths, then what it misses
@example(asked=[(False, 0), (True, 0), (False, 0)])
def test_a_problem_names_each_job_once(
    unfillable: tuple[Generation, ReferenceChecker], asked: list[tuple[bool, int]]
) -> None:
    """Whatever the checker is asked of which jobs, in any order, a template a
    job cannot fill names that job once; and every job whose paths were asked."""
    gen, shared = unfillable
    checker = ReferenceChecker(shared.settings, shared.listing)
    jobs = [gen.jobs[i % len(gen.jobs)] for _, i in asked]
    for (paths, _), job in zip(asked, jobs, strict=True):
        (checker.paths if paths else checker.missing)(job)
    named = [[id(j) for j in each.values()] for each in checker.problems.values()]
    for ids in named:
        assert len(set(ids)) == len(ids)
        assert set(ids) <= {id(j) for j in jobs}
    pathed = {id(j) for (paths, _), j in zip(asked, jobs, strict=True) if paths}
    assert pathed <= {i for ids in named for i in ids}


def test_an_absent_reference_tree_is_said_once(outside_git: Path, cli: Callable) -> None:
    recipes = project(outside_git / "repo")
    shutil.rmtree(outside_git / "repo" / "tests")
    run = cli("validate", "--recipes", recipes)
    assert run.code == 0, run
    assert run.err.count("[reference-tree]") == 1
    assert "no reference is checked" in run.err
    code, data, err = coverage_json(cli, "--recipes", recipes)
    assert code == 1 and data["present"] is False
    assert "no reference tree at repo/tests/functional_tests/test_cases" in err


def test_library_reference_checker_is_one_lookup_per_job(outside_git: Path) -> None:
    recipes = project(outside_git / "repo")
    gen = generate(recipes)
    settings = gen.tree.config.references
    assert settings is not None
    listing = read_listing(recipes, settings)
    checker = ReferenceChecker(settings, listing)
    missing = [m for job in gen.jobs for m in checker.missing(job)]
    # One job per scope (mr, and nightly as its tier L2) of the same case and platform.
    assert sorted((m.job.test_case, m.job.platform, m.job.scope, m.reference) for m in missing) == [
        ("gpt_a", "dgx_gb200", "L2", "golden"),
        ("gpt_a", "dgx_gb200", "mr", "golden"),
    ]


# --------------------------------------------------------------------------- trees without config

V1 = """\
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  platforms: dgx_h100
products:
  - test_case: [gpt_a]
    products:
      - {environment: [dev], scope: [mr]}
  - test_case: ["gpt|b`x"]
    products:
      - {environment: [dev], scope: [mr]}
  - test_case: [bucket]
    products:
      - {environment: [dev], scope: [unit-tests]}
"""


def test_reference_and_root_for_a_tree_without_config(outside_git: Path, cli: Callable) -> None:
    recipes = write_tree(outside_git / "megatron" / "recipes", {"gpt.yaml": V1})
    refs = write_tree(outside_git / "refs", {"gpt/gpt_a/golden_values_dev_dgx_h100.json": "{}"})
    template = "golden={model}/{test_case}/golden_values_{environment}_{platforms}.json"
    code, data, err = coverage_json(
        cli, "--recipes", recipes, "--reference", template, "--root", refs
    )
    assert code == 0, err  # nothing gates without a config
    assert [(m["test_case"], m["path"]) for m in data["missing"]] == [
        ("gpt|b`x", "refs/gpt/gpt|b`x/golden_values_dev_dgx_h100.json"),  # target mr
        ("bucket", "refs/gpt/bucket/golden_values_dev_dgx_h100.json"),  # gitlab unit-tests
        ("bucket", "refs/gpt/bucket/golden_values_dev_dgx_h100.json"),  # github unit-tests
    ]
    code, data, err = coverage_json(
        cli,
        "--recipes",
        recipes,
        "--reference",
        template,
        "--root",
        refs,
        "--exclude-model",
        "gpt",
        "--strict",
    )
    assert code == 0 and data["missing"] == [], err
    run = cli("coverage", "--recipes", recipes, "--reference", template, "--root", refs, "--strict")
    assert run.code == 1
    # Markdown: every hostile name stays inside its cell and its code span.
    run = cli(
        "coverage",
        "--recipes",
        recipes,
        "--reference",
        template,
        "--root",
        refs,
        "--format",
        "markdown",
    )
    rows = [line for line in run.out.splitlines() if "gpt`\\|``b`x" in line]
    assert rows, run.out
    for row in rows:
        cells = re.split(r"(?<!\\)\|", row)[1:-1]
        assert len(cells) == 5, row
        assert "``" in row  # a longer fence around the backtick


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "no references are declared"),
        (("--reference", "golden"), "expected NAME=TEMPLATE"),
        (("--reference", "golden=/abs/{model}"), "relative to the reference root"),
        (("--reference", "g={model}", "--reference", "g={test_case}"), "given twice"),
        (("--reference", "g={model}", "--root", "nowhere"), "not a directory"),
    ],
)
def test_usage_errors(
    outside_git: Path, cli: Callable, args: tuple[str, ...], message: str
) -> None:
    recipes = write_tree(outside_git / "recipes", {"gpt.yaml": V1})
    run = cli("coverage", "--recipes", recipes, *args)
    assert run.code == 2, run
    assert message in run.err


# --------------------------------------------------------------------------- git revisions


def test_coverage_reads_a_revision_not_the_disk(
    tmp_path: Path, cli: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = tmp_path / "repo"
    project(top)
    repo = GitRepo(top)
    repo.commit(message="tree and references")
    monkeypatch.chdir(top)
    (top / CASES / "gpt" / "gpt_a" / "golden_values_dev_dgx_h100.json").unlink()
    write_tree(top, {f"{CASES}/gpt/gpt_a/golden_values_dev_dgx_gb200.json": ""})
    _, on_disk, _ = coverage_json(cli)
    _, committed, err = coverage_json(cli, "--revision", "HEAD")
    assert [m["platform"] for m in on_disk["missing"]] == ["dgx_h100", "dgx_h100"]
    assert [m["platform"] for m in committed["missing"]] == ["dgx_gb200"], err
    assert "(at HEAD)" in err
    run = cli("coverage", "--revision", "nope")
    assert run.code == 5, run


def test_the_diff_reports_added_jobs_without_references(
    tmp_path: Path, cli: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = tmp_path / "repo"
    project(top, files={f"{CASES}/gpt/gpt_a/golden_values_dev_dgx_gb200.json": "{}"})
    repo = GitRepo(top)
    base = repo.commit(message="base")
    monkeypatch.chdir(top)
    # The head adds gpt_b to mr on GB200 (no golden values there) and deletes
    # gpt_a's H100 golden values, which the base had.
    text = GPT.replace(
        "      - {environment: [dev], scope: [nightly]}\n",
        "      - {environment: [dev], scope: [nightly]}\n"
        "      - {environment: [dev], scope: [mr], platforms: [dgx_gb200]}\n",
        1,
    )
    write_tree(top, {"recipes/gpt.yaml": text})
    write_tree(top, {f"{CASES}/gpt/gpt_b/model_config.yaml": ""})
    (top / CASES / "gpt" / "gpt_a" / "golden_values_dev_dgx_h100.json").unlink()
    head = repo.commit(message="head")
    run = cli("diff", base, head)
    assert run.code == 0, run
    assert "mr-gb200: +1 job(s), no golden for dgx_gb200" in run.out
    assert "mr-h100: 1 job(s) lose references: no golden for dgx_h100" in run.out
    looked_for = f"{CASES}/gpt/gpt_b/golden_values_dev_dgx_gb200.json"
    assert f"+ gpt/gpt_b on dgx_gb200/dev: no golden file {looked_for}" in run.out
    run = cli("diff", base, head, "--format", "json")
    data = json.loads(run.out)
    gaps = {t["target"]: t for t in data["references"]}
    assert [m["test_case"] for m in gaps["mr-gb200"]["added"]] == ["gpt_b"]
    assert [m["test_case"] for m in gaps["mr-h100"]["lost"]] == ["gpt_a"]
    run = cli("diff", base, head, "--format", "markdown")
    assert "#### Jobs without their references" in run.out
    # Each side reads its own revision: restoring the file on disk changes nothing
    # for the head commit, and the working tree as the head sees it.
    write_tree(top, {f"{CASES}/gpt/gpt_a/golden_values_dev_dgx_h100.json": "{}"})
    assert "lose references" in cli("diff", base, head).out
    assert "lose references" not in cli("diff", base).out


# --------------------------------------------------------------------------- the shipped tree


def brute_force(
    gen: Generation, settings: ReferenceSettings, top: Path
) -> set[tuple[str, str, str]]:
    """(target, job, path) for every missing reference, one stat per job."""
    found = set()
    for target in gen.targets():
        for job in gen.selection(target).jobs:
            opt = job_opt_out(job)
            for template in settings.templates:
                if opt is not None and opt.covers(template.name):
                    continue
                rel = reference_path(template, job)
                if not (top / settings.root / rel).is_file():
                    found.add((target.name, str(job.identity), rel))
    return found


def test_the_shipped_tree_misses_one_lts_golden_file_and_has_one_orphan(
    cli: Callable, monkeypatch: pytest.MonkeyPatch, pinned_today: object
) -> None:
    monkeypatch.chdir(REPO)
    code, data, err = coverage_json(cli)
    assert code == 0, err
    case = f"{CASES}/gpt/gpt3_175b_proxy_tp8_pp4_convergence"
    assert [(m["target"], m["path"], m["hint"]) for m in data["missing"]] == [
        (
            "gitlab-nightly-h100-lts",
            f"{case}/golden_values_lts_dgx_h100.json",
            f"{case}/golden_values_dev_dgx_h100.json",
        )
    ]
    assert [o["path"] for o in data["orphans"]] == [
        f"{CASES}/gpt/gpt3_tp1_pp1/golden_values_dev_dgx_a100.json"
    ]
    gen = generate(REPO / "recipes")
    settings = gen.tree.config.references
    assert settings is not None
    expected = brute_force(gen, settings, REPO)
    got = {
        (
            m["target"],
            f"{m['model']}/{m['test_case']} on {m['platform']}/{m['environment']}",
            m["path"],
        )
        for m in data["missing"]
    }
    assert got == expected
    # Every gating target is complete; unit-test buckets and the warm-up job opt out.
    assert all(t["missing"] == 0 for t in data["targets"] if t["gating"])
    # GitHub's 10 targets, GitLab mr and mr-slim but GB300.
    assert sum(t["gating"] for t in data["targets"]) == 16


def test_validate_on_the_shipped_tree_warns_once(
    cli: Callable, monkeypatch: pytest.MonkeyPatch, pinned_today: object
) -> None:
    monkeypatch.chdir(REPO)
    run = cli("validate")
    assert run.code == 0, run
    (match,) = LOCATED.finditer(run.err)
    assert match["sev"] == "warning" and "[reference-missing]" in match["msg"]
    assert match["file"] == "recipes/h100/gpt-long.yaml"
    assert "0 error(s), 1 warning(s)" in run.err


def test_a_gating_gap_in_a_copy_of_the_shipped_tree(
    tmp_path: Path, cli: Callable, monkeypatch: pytest.MonkeyPatch, pinned_today: object
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    shutil.copytree(REPO / "recipes", tmp_path / "recipes")
    shutil.copytree(REPO / "tests" / "functional_tests", tmp_path / "tests" / "functional_tests")
    monkeypatch.chdir(tmp_path)
    assert cli("validate").code == 0
    (
        tmp_path
        / CASES
        / "moe"
        / "moe_gb200_mixtral_tp1_pp1_ep4"
        / "golden_values_dev_dgx_gb200.json"
    ).unlink()
    run = cli("validate")
    assert run.code == 1, run
    errors = [m for m in LOCATED.finditer(run.err) if m["sev"] == "error"]
    assert len(errors) == 1, run.err  # one finding per missing file
    assert errors[0]["file"].endswith("recipes/gb200/moe.yaml")
    assert cli("generate", "--out", tmp_path / "out").code == 0  # refuse_generate: false
    config = tmp_path / "recipes" / "matrixgen.yaml"
    config.write_text(config.read_text().replace("refuse_generate: false", "refuse_generate: true"))
    assert cli("generate", "--out", tmp_path / "out").code == 1


# --------------------------------------------------------------------------- Megatron-LM

TEST_CASES_ENV = "MATRIXGEN_MEGATRON_TEST_CASES"
MEGATRON_TEMPLATES = (
    ReferenceTemplate(
        "config", "tests/functional_tests/test_cases/{model}/{test_case}/model_config.yaml"
    ),
    ReferenceTemplate("golden", GOLDEN),
)


@pytest.fixture
def megatron_test_cases(tmp_path: Path) -> Path:
    """A tree of empty files from the listing of Megatron-LM's test cases."""
    value = os.environ.get(TEST_CASES_ENV)
    listing = Path(value) if value else REPO.parents[1] / "shared" / "megatron-test-cases.txt"
    if not listing.is_file():
        why = f"the listing of Megatron-LM's test cases is absent (set {TEST_CASES_ENV})"
        if megatron_required():
            pytest.fail(f"{REQUIRE_MEGATRON_ENV}=1 but {why}")
        pytest.skip(why)
    top = tmp_path / "megatron"
    for line in listing.read_text().splitlines():
        if line.strip():
            path = top / CASES / line.strip()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    return top


def test_megatron_coverage_figures(
    megatron_dir: Path,
    megatron_test_cases: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Callable,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    monkeypatch.chdir(megatron_test_cases)
    gen = generate(megatron_dir)
    settings = ReferenceSettings(templates=MEGATRON_TEMPLATES)
    listing = list_directory(megatron_test_cases, settings.prefix, shown_root="")
    # The targets the commands use: no holding-pen scope, no typo platform.
    targets = gen.targets()
    result = compute_coverage(gen, settings, listing, targets, exclude_models=["unit-tests"])
    functional = [j for j in gen.jobs if j.model != "unit-tests"]
    # One stat per job gives the same answer as one listing.
    expected = {
        (t, j, p)
        for t, j, p in brute_force(gen, settings, megatron_test_cases)
        if "unit-tests/" not in j
    }
    got = {(t.target.name, str(m.job.identity), m.path) for t, m in result.missing}
    assert got == expected
    for orphan in result.orphans:
        assert orphan.path in listing.files
    # The command line gives the same figures.
    run = cli(
        "coverage",
        "--recipes",
        megatron_dir,
        "--reference",
        f"golden={GOLDEN}",
        "--reference",
        f"config={MEGATRON_TEMPLATES[0].template}",
        "--root",
        megatron_test_cases,
        "--exclude-model",
        "unit-tests",
        "--format",
        "json",
    )
    data = json.loads(run.out)
    assert len(data["missing"]) == len(result.missing)
    assert len(data["orphans"]) == len(result.orphans)
    figures = {
        t.target.name: (t.jobs, sum(1 for m in t.missing if m.reference == "golden"))
        for t in result.targets
    }
    golden_missing = sum(g for _, g in figures.values())
    assert golden_missing > 0 and result.orphans  # the real tree has both
    if request.config.getoption("capture") != "no":
        return  # the figures are printed for whoever runs this test with -s
    with capsys.disabled():
        print(f"\nMegatron-LM: {len(functional)} functional jobs, {len(listing.files)} files")
        for name, (jobs, golden) in sorted(figures.items()):
            print(f"  {name}: {jobs} job(s), {golden} without golden values")
        print(f"  golden values missing over all targets: {golden_missing}")
        print(f"  config missing: {sum(1 for _, m in result.missing if m.reference == 'config')}")
        print(f"  orphans: {len(result.orphans)}")


def test_a_configured_root_below_the_top(outside_git: Path, cli: Callable) -> None:
    top = outside_git / "repo"
    recipes = project(top, config=copy_config(root="ci/refs/"))
    (top / "ci" / "refs").mkdir(parents=True)
    shutil.move(top / "tests", top / "ci" / "refs" / "tests")
    code, data, err = coverage_json(cli, "--recipes", recipes)
    assert code == 1, err  # mr-gb200 gates
    assert data["root"] == "repo/ci/refs", err
    assert [m["path"] for m in data["missing"]] == [
        f"repo/ci/refs/{CASES}/gpt/gpt_a/golden_values_dev_dgx_gb200.json"
    ]


def test_the_comment_tables_the_gaps_and_the_orphans(outside_git: Path, cli: Callable) -> None:
    recipes = project(outside_git / "repo")
    run = cli("coverage", "--format", "markdown", "--recipes", recipes)
    assert run.code == 1, run.err
    cases = f"repo/{CASES}/gpt"
    assert run.out.split("\n\n")[2:] == [
        "| target | gating | jobs | checked | missing |\n"
        "| :-- | :-- | --: | --: | --: |\n"
        "| `mr-gb200` | yes | 1 | 1 | 1 |",
        "#### Missing references",
        "| target | job | reference | looked for | nearest |\n"
        "| :-- | :-- | :-- | :-- | :-- |\n"
        "| `mr-gb200` | `gpt/gpt_a on dgx_gb200/dev` | `golden` | "
        f"`{cases}/gpt_a/golden_values_dev_dgx_gb200.json` | `golden_values_dev_dgx_h100.json` |",
        "#### Orphans (no job of any target selects them)",
        "| file | model | test case | environment | platform |\n"
        "| :-- | :-- | :-- | :-- | :-- |\n"
        f"| `{cases}/gpt_old/golden_values_lts_dgx_a100.json` | `gpt` | `gpt_old` | `lts` | "
        "`dgx_a100` |",
        "",
    ]
