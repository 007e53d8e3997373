"""The ecosystem entry points at the top of the repository: the composite GitHub
Action (`action.yml`), which the functional workflow uses, and the pre-commit
hooks (`.pre-commit-hooks.yaml`). Checked by the real validators (GitHub's
action metadata schema via check-jsonschema, pre-commit's own manifest reader)
and run: the action's scripts under bash as a runner would, the hooks' entries
on the shipped tree."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests import realvalidators as rv

REPO = Path(__file__).resolve().parents[1]
ACTION = REPO / "action.yml"
HOOKS = REPO / ".pre-commit-hooks.yaml"
FUNCTIONAL = REPO / ".github" / "workflows" / "functional.yml"

pytestmark = pytest.mark.usefixtures("pinned_today")


@pytest.fixture(scope="module")
def action() -> dict:
    return yaml.safe_load(ACTION.read_text())


def read_outputs(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT as the runner reads it: lines ended by LF, CRLF or a lone
    CR; `k=v` when the first `=` comes before any `<<`, else a `k<<DELIM` block."""
    outputs: dict[str, str] = {}
    lines = iter(re.split(r"\r\n|\r|\n", path.read_bytes().decode("utf-8")))
    for line in lines:
        equals, heredoc = line.find("="), line.find("<<")
        if heredoc >= 0 and (equals < 0 or heredoc < equals):
            name, delimiter = line.split("<<", 1)
            value = []
            for inner in lines:
                if inner == delimiter:
                    break
                value.append(inner)
            outputs[name] = "\n".join(value)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


# --------------------------------------------------------------------------- action.yml


@pytest.mark.slow
def test_action_passes_the_action_metadata_schema(tmp_path: Path) -> None:
    rv.require_check_jsonschema()
    result = rv.check_jsonschema(ACTION, builtin_schema="vendor.github-actions")
    assert result.ok, result
    # The schema has teeth: a composite step without its shell is refused.
    broken = tmp_path / "action.yml"
    broken.write_text(ACTION.read_text().replace("using: composite", "using: compost"))
    assert not rv.check_jsonschema(broken, builtin_schema="vendor.github-actions").ok


def test_action_references_hold(action: dict) -> None:
    text = ACTION.read_text()
    used_inputs = set(re.findall(r"inputs\.([A-Za-z0-9_-]+)", text))
    assert used_inputs <= set(action["inputs"]), used_inputs - set(action["inputs"])
    assert set(action["inputs"]) <= used_inputs  # no input is ignored
    steps = action["runs"]["steps"]
    ids = {s["id"] for s in steps if "id" in s}
    for name, output in action["outputs"].items():
        (step_id, key) = re.fullmatch(
            r"\$\{\{ steps\.(\S+)\.outputs\.(\S+) \}\}", output["value"]
        ).groups()
        assert step_id in ids and key == name, name
        assert output["description"]
    for step in steps:
        assert "uses" in step or step.get("shell") == "bash", step
    for name, spec in action["inputs"].items():
        assert spec["description"], name


def _script(action: dict, step_id_or_name: str) -> str:
    step = next(
        s for s in action["runs"]["steps"] if step_id_or_name in (s.get("id"), s.get("name"))
    )
    return step["run"]


def _run_step(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    bin_dir = str(Path(sys.executable).parent)
    full_env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **env}
    # As the runner runs a `shell: bash` step.
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
def test_action_generate_step_exposes_each_matrix(action: dict, tmp_path: Path) -> None:
    if shutil.which("matrixgen", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("matrixgen is not installed as a command next to this Python")
    out = tmp_path / "out"
    github_output = tmp_path / "github_output"
    github_output.write_text("earlier=1")  # no newline at the end: ours must not join it
    targets = "\n  github-l1-h100-pr\n\ngithub-l0-gb200-mergegroup  \ngitlab-mr-slim-h100-dev\n"
    run = _run_step(
        _script(action, "generate"),
        {
            "TARGETS": targets,
            "RECIPES": "recipes",
            "OUT": str(out),
            "GITHUB_OUTPUT": str(github_output),
        },
        REPO,
    )
    assert run.returncode == 0, run.stderr
    outputs = read_outputs(github_output)
    assert outputs["earlier"] == "1"
    assert json.loads(outputs["targets"]) == [  # as given, blank lines and spaces aside
        "github-l1-h100-pr",
        "github-l0-gb200-mergegroup",
        "gitlab-mr-slim-h100-dev",
    ]
    matrices = json.loads(outputs["matrices"])
    shards = json.loads(outputs["shards"])
    assert set(matrices) == set(shards) == {"github-l0-gb200-mergegroup", "github-l1-h100-pr"}
    for name, shard_list in matrices.items():
        written = json.loads((out / f"{name}.json").read_text())
        assert shard_list == [written] and shards[name] == 1
        assert written["include"], name
    files = json.loads(outputs["files"])
    assert files["gitlab-mr-slim-h100-dev"] == "gitlab-mr-slim-h100-dev.yml"
    assert (out / "gitlab-mr-slim-h100-dev.yml").is_file()
    assert outputs["out"] == str(out)

    # No targets: every target of the tree.
    github_output.write_text("")
    run = _run_step(
        _script(action, "generate"),
        {
            "TARGETS": "",
            "RECIPES": "recipes",
            "OUT": str(tmp_path / "all"),
            "GITHUB_OUTPUT": str(github_output),
        },
        REPO,
    )
    assert run.returncode == 0, run.stderr
    all_outputs = read_outputs(github_output)
    every = json.loads(all_outputs["targets"])
    assert len(every) == 22
    # pr and mergegroup targets share output groups: those outputs are left out, said so.
    assert "groups" not in all_outputs and "no output group outputs" in run.stderr
    assert len(json.loads(all_outputs["matrices"])) == 10

    # A typo stops the job, quoting what was typed.
    run = _run_step(
        _script(action, "generate"),
        {
            "TARGETS": "github-l1-h100-p",
            "RECIPES": "recipes",
            "OUT": str(tmp_path / "x"),
            "GITHUB_OUTPUT": str(github_output),
        },
        REPO,
    )
    assert run.returncode == 2 and '--target "github-l1-h100-p"' in run.stderr


FORGED = 'targets=["forged"]'
OUT_VALUES = st.builds(
    lambda head, brk, tail: head + brk + tail,
    st.text(st.sampled_from("ab/=<%-. "), max_size=6),
    st.sampled_from(["\n", "\r", "\r\n", "\n\n", "\r\r"]),
    st.sampled_from([FORGED, "matrices<<EOF\n{}\nEOF", "out=elsewhere", "", "x"]),
)


@example(out="out\n" + FORGED)
@example(out="out\r" + FORGED)  # the runner also ends a line at a lone CR
@example(out="out\r\n" + FORGED)
@example(out="out\nmatrices<<EOF\n{}\nEOF")
@example(out="\n")
@settings(max_examples=25, deadline=None)
@given(out=OUT_VALUES)
def test_action_refuses_an_out_input_that_would_forge_an_output(
    action: dict, tmp_path_factory: pytest.TempPathFactory, out: str
) -> None:
    """Whatever the `out` input holds, $GITHUB_OUTPUT gets no line of its
    choosing: a line break in it is refused (exit 2) before anything is written."""
    tmp = tmp_path_factory.mktemp("forge")
    github_output = tmp / "github_output"
    github_output.write_text("earlier=1\n")
    folder = f"{tmp}/{out}"
    run = _run_step(
        _script(action, "generate"),
        {"TARGETS": "github-l1-h100-pr", "RECIPES": "recipes", "OUT": folder,
         "GITHUB_OUTPUT": str(github_output)},
        REPO,  # a tree that generates: the refusal comes before anything runs
    )  # fmt: skip
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "::error::matrixgen: the input out holds a line break" in run.stdout
    assert folder not in run.stdout + run.stderr  # the value is never echoed
    assert github_output.read_text() == "earlier=1\n"
    assert list(tmp.iterdir()) == [github_output]


def test_action_out_input_is_written_back_as_given(action: dict, tmp_path: Path) -> None:
    """Any folder name on one line comes back as the `out` output, byte for byte."""
    if shutil.which("matrixgen", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("matrixgen is not installed as a command next to this Python")
    out = str(tmp_path / "a=b <<EOF %0A \u00e9 ::x")
    github_output = tmp_path / "github_output"
    run = _run_step(
        _script(action, "generate"),
        {"TARGETS": "github-l1-h100-pr", "RECIPES": "recipes", "OUT": out,
         "GITHUB_OUTPUT": str(github_output)},
        REPO,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    outputs = read_outputs(github_output)
    assert outputs["out"] == out and set(outputs) == {
        "matrices", "shards", "groups", "group-shards", "targets", "files", "out",
        *json.loads(outputs["groups"]), *(f"{g}-shards" for g in json.loads(outputs["groups"])),
    }  # fmt: skip


def test_action_summary_step_writes_the_diff(action: dict, tmp_path: Path) -> None:
    if shutil.which("matrixgen", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("matrixgen is not installed as a command next to this Python")
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    script = _script(action, "Selection diff to the job summary")
    summary = tmp_path / "summary.md"
    none = _run_step(
        script, {"BASE": "", "RECIPES": "recipes", "GITHUB_STEP_SUMMARY": str(summary)}, REPO
    )
    assert none.returncode == 0 and "no diff base" in none.stdout
    assert not summary.exists()
    run = _run_step(
        script, {"BASE": "HEAD", "RECIPES": "recipes", "GITHUB_STEP_SUMMARY": str(summary)}, REPO
    )
    assert run.returncode == 0, run.stderr
    assert summary.read_text().startswith("<!-- matrixgen-diff -->")


def test_action_report_step_writes_the_site_it_uploads(action: dict, tmp_path: Path) -> None:
    if shutil.which("matrixgen", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("matrixgen is not installed as a command next to this Python")
    steps = {s.get("name"): s for s in action["runs"]["steps"]}
    written = steps["Report site"]["env"]["REPORT_DIR"]
    upload = steps["Upload the report site"]
    assert upload["uses"].startswith("actions/upload-artifact@")
    assert upload["with"]["path"] == written and upload["with"]["name"] == "matrixgen-report"
    assert steps["Report site"]["if"] == upload["if"] == "inputs.report == 'true'"
    site = tmp_path / "site"
    run = _run_step(
        _script(action, "Report site"), {"RECIPES": "recipes", "REPORT_DIR": str(site)}, REPO
    )
    assert run.returncode == 0, run.stderr
    assert (site / "index.html").is_file() and (site / "quarantine.html").is_file()


def test_action_report_step_triages_the_run_of_the_triage_input(
    action: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `triage` set, the report's Triage page is that run's triage, with
    the triage step's store and baseline: the branch's failing run has its one
    new failure there, and the step exits 0 all the same (the triage step is
    the one that fails on it)."""
    if shutil.which("matrixgen", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("matrixgen is not installed as a command next to this Python")
    from tests.triage_fixtures import _store

    steps = {s.get("name"): s for s in action["runs"]["steps"]}
    report_env, triage_env = steps["Report site"]["env"], steps["Triage to the job summary"]["env"]
    for name in ("RUN", "DB", "BASELINE_REF", "BASELINE_SOURCE"):
        assert report_env[name] == triage_env[name], name
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-12-01")
    db = tmp_path / "results.db"
    _store(str(db), "PPP")  # baseline runs 100-102 pass; run 103 of a branch fails
    env = {"RECIPES": "recipes", "DB": str(db), "BASELINE_REF": "main",
           "BASELINE_SOURCE": "schedule", "MATRIXGEN_TODAY": "2026-12-01"}  # fmt: skip
    site = tmp_path / "site"
    run = _run_step(_script(action, "Report site"), {**env, "RUN": "103", "REPORT_DIR": str(site)},
                    REPO)  # fmt: skip
    assert run.returncode == 0, run.stderr
    page = (site / "triage.html").read_text()
    assert page.count('<tr><td><span class="verdict-new">new</span>') == 1
    assert "run 103 (ref feature, source merge_request_event" in page
    assert "run 102 (ref main, source schedule" in page  # the baseline
    bare = tmp_path / "bare"
    run = _run_step(_script(action, "Report site"), {**env, "RUN": "", "REPORT_DIR": str(bare)},
                    REPO)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "No results store" in (bare / "triage.html").read_text()  # no --db without a triage
    assert '<span class="verdict-' not in (bare / "triage.html").read_text()


def test_action_triage_step_writes_the_triage(
    action: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step triages a stored run into the job summary: exit 6 on a new
    failure (the summary written all the same), 0 without one."""
    if shutil.which("matrixgen", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("matrixgen is not installed as a command next to this Python")
    from matrixgen.results.triage_markdown import MARKER
    from tests.triage_fixtures import _store

    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-12-01")
    script = _script(action, "Triage to the job summary")
    db = tmp_path / "results.db"
    _store(str(db), "PPP")  # baseline runs 100-102 pass; run 103 of a branch fails
    summary = tmp_path / "summary.md"
    env = {
        "RECIPES": "recipes",
        "DB": str(db),
        "BASELINE_REF": "main",
        "BASELINE_SOURCE": "schedule",
        "GITHUB_STEP_SUMMARY": str(summary),
        "MATRIXGEN_TODAY": "2026-12-01",
    }
    run = _run_step(script, {**env, "RUN": "103"}, REPO)
    assert run.returncode == 6, run.stderr
    assert summary.read_text().startswith(MARKER + "\n")
    assert "**1 new** of 1 failure(s)" in summary.read_text()
    summary.unlink()
    run = _run_step(script, {**env, "RUN": "102"}, REPO)  # a baseline run: nothing failed
    assert run.returncode == 0, run.stderr
    assert "**0 new** of 0 failure(s)" in summary.read_text()


def test_functional_workflow_uses_the_action(action: dict) -> None:
    workflow = yaml.safe_load(FUNCTIONAL.read_text())
    job = workflow["jobs"]["generate"]
    (step,) = [s for s in job["steps"] if s.get("uses") == "./"]
    assert set(step["with"]) <= set(action["inputs"])
    assert step["with"]["summary"] is True or step["with"]["summary"] == "true"
    checkout = next(
        s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout")
    )
    assert checkout["with"]["fetch-depth"] == 0  # the summary's diff needs the base
    read = set(
        re.findall(rf"steps\.{step['id']}\.outputs\.([A-Za-z0-9_-]+)", FUNCTIONAL.read_text())
    )
    assert read and read <= set(action["outputs"])


@pytest.mark.slow
def test_workflow_using_the_action_passes_actionlint(tmp_path: Path) -> None:
    rv.require_actionlint()
    result = rv.actionlint(FUNCTIONAL)
    assert result.ok, result
    broken = tmp_path / "functional.yml"
    broken.write_text(
        FUNCTIONAL.read_text().replace(
            "steps.matrixgen.outputs.group-shards", "steps.matrixgem.outputs.group-shards"
        )
    )
    assert any("matrixgem" in e.message for e in rv.actionlint(broken).errors)


# --------------------------------------------------------------------------- pre-commit


@pytest.mark.slow
def test_hooks_pass_pre_commits_manifest_reader(tmp_path: Path) -> None:
    rv.require_pre_commit()
    result = rv.pre_commit_manifest(HOOKS)
    assert result.ok, result
    hooks = {h["id"]: h for h in json.loads(result.stdout)}
    assert set(hooks) == {"matrixgen-validate", "matrixgen-quarantine-audit"}
    for hook in hooks.values():
        assert hook["language"] == "python" and hook["pass_filenames"] is False
        assert re.search(hook["files"], "recipes/h100/gpt.yaml")
        assert re.search(hook["files"], "recipes/quarantine.yaml")
        assert not re.search(hook["files"], "matrixgen/cli/main.py")
    broken = tmp_path / "hooks.yaml"
    broken.write_text(HOOKS.read_text().replace("language: python", "language: pythn", 1))
    assert not rv.pre_commit_manifest(broken).ok


def test_hook_entries_run_on_the_shipped_tree(cli, tree) -> None:
    hooks = {h["id"]: h for h in yaml.safe_load(HOOKS.read_text())}
    for hook_id, hook in hooks.items():
        program, *args = shlex.split(hook["entry"])
        assert program == "matrixgen"
        run = cli(*args, "--recipes", REPO / "recipes")
        assert run.code == 0, (hook_id, run)
    # They fail where they should: a tree with an error, an expired entry.
    broken = tree({"a.yaml": "type: basic\nformat_version: 1\nproducts: 3\n"})
    assert (
        cli(*shlex.split(hooks["matrixgen-validate"]["entry"])[1:], "--recipes", broken).code == 1
    )


def test_action_generates_what_an_event_decides(action: dict, tmp_path: Path) -> None:
    if shutil.which("matrixgen", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("matrixgen is not installed as a command next to this Python")
    github_output = tmp_path / "github_output"
    run = _run_step(
        _script(action, "generate"),
        {
            "TARGETS": "",
            "EVENT": "pull_request",
            "LABELS_JSON": "[]",
            "SYSTEM": "github",
            "RECIPES": "recipes",
            "OUT": str(tmp_path / "out"),
            "GITHUB_OUTPUT": str(github_output),
        },
        REPO,
    )
    assert run.returncode == 0, run.stderr
    outputs = read_outputs(github_output)
    generated = json.loads(outputs["targets"])
    assert generated and all(name.startswith("github-") for name in generated)
    groups = json.loads(outputs["groups"])
    counts = json.loads(outputs["group-shards"])
    assert set(groups) == set(counts) and sum(counts.values()) >= 1
    for group, shards in groups.items():
        # The per-group outputs and the JSON ones say the same.
        assert int(outputs[f"{group}-shards"]) == counts[group]
        assert json.loads(outputs[group]) == shards[0]
        assert (counts[group] == 0) == (shards == [{"include": []}])
