"""Node-level entries (deselect, mute) in matrixgen's own emitters: how they
reach the tests of each job (emit.common.node_route), and the error when they
cannot.

- a deselect or mute entry: the job carries the pytest plugin's variables
  (GitLab job variables, the GitHub row's env), and those are exactly what the
  plugin needs to find the job's entries again; no node id goes to pytest's
  `--deselect` (a prefix match);
- Megatron-LM's launcher (launch_jet_workload.py) runs the recipe's script on a
  cluster: only a script that sets MATRIXGEN_QUARANTINE reaches the plugin;
  otherwise `validate` and `generate` name the entry and the target.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from matrixgen.model.errors import ExitCode
from matrixgen.quarantine.jobenv import identity_from, load_job_quarantine

SHIPPED = Path(__file__).resolve().parents[1] / "recipes"
MUTE_NODE = "tests/unit_tests/data/test_loader.py::test_epoch"
MUTE = f"""
  - id: mute-loader
    tracker: "#8001"
    kind: flaky
    action: mute
    match: {{model: unit-tests, test_case: tests/unit_tests/data/, environments: [dev]}}
    node_ids: ["{MUTE_NODE}"]
    owner: mcore-data
    added: "2026-11-20"
    expires: "2027-02-20"
    reason: The loader test times out now and then.
"""
# The shipped deselect entry's bucket, muted as well: one job with both.
MUTE_ASYNC = """
  - id: mute-async-other
    tracker: "#8002"
    kind: flaky
    action: mute
    match: {model: unit-tests, test_case: tests/unit_tests/dist_checkpointing/test_async_save.py}
    node_ids: ["tests/unit_tests/dist_checkpointing/test_async_save.py::test_other"]
    owner: mcore-dist-ckpt
    added: "2026-11-20"
    expires: "2027-02-20"
    reason: Flaky too.
"""
DESELECTED = (
    "tests/unit_tests/dist_checkpointing/test_async_save.py"
    "::TestAsyncSave::test_async_is_equivalent_to_sync"
)


@pytest.fixture
def shipped_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped tree at tmp/recipes, matrixgen run from tmp (the checkout top)."""
    root = tmp_path / "recipes"
    shutil.copytree(SHIPPED, root)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-12-01")
    return root


def add_entries(root: Path, *texts: str) -> None:
    path = root / "quarantine.yaml"
    path.write_text(path.read_text() + "".join(texts))


def generated(cli: Callable[..., object], root: Path, out: Path) -> dict[str, object]:
    run = cli("generate", "--recipes", "recipes", "--out", str(out))
    assert run.code == 0, run  # type: ignore[attr-defined]
    files: dict[str, object] = {}
    for path in sorted(out.iterdir()):
        if path.name.startswith("."):
            continue  # the manifest: digests of the files
        if path.suffix == ".yml":
            files[path.name] = yaml.safe_load(path.read_text())
        elif path.suffix == ".json":
            files[path.name] = json.loads(path.read_text())
    return files


def gitlab_job(document: dict, test_case: str, tag: str) -> dict:
    found = [
        job
        for name, job in document.items()
        if isinstance(job, dict)
        and "script" in job
        and f"--test-case {test_case} " in job["script"][0]
        and f"--tag {tag} " in job["script"][0]
    ]
    assert len(found) == 1, found
    return found[0]


def test_a_mute_job_carries_what_the_plugin_needs_and_other_jobs_stay_as_they_were(
    shipped_copy: Path, tmp_path: Path, cli
) -> None:
    before = generated(cli, shipped_copy, tmp_path / "before")
    add_entries(shipped_copy, MUTE, MUTE_ASYNC)
    after = generated(cli, shipped_copy, tmp_path / "after")
    pipeline = after["gitlab-mr-h100-dev.yml"]
    assert isinstance(pipeline, dict)
    job = gitlab_job(pipeline, "tests/unit_tests/data/", "latest")
    variables = job["variables"]
    assert variables["MATRIXGEN_QUARANTINE"] == "$CI_PROJECT_DIR/recipes/quarantine.yaml"
    assert variables["MATRIXGEN_QUARANTINE_ENTRY"] == (
        "mute-loader https://github.com/example/mcore/issues/8001"
    )
    # The job's variables name the job: the plugin finds the mute entry with them.
    env = {k: v for k, v in variables.items() if isinstance(v, str)}
    env["MATRIXGEN_QUARANTINE"] = "recipes/quarantine.yaml"  # GitLab expands $CI_PROJECT_DIR
    identity = identity_from(env)
    assert (identity.system.value, identity.scope, identity.environment, identity.tag) == (
        "gitlab",
        "mr",
        "dev",
        "latest",
    )
    loaded = load_job_quarantine(env)
    assert loaded is not None and [e.id for e in loaded.entries] == ["mute-loader"]
    # A job with a deselect and a mute entry: the plugin applies both, the
    # launcher gets no --deselect.
    both = gitlab_job(pipeline, "tests/unit_tests/dist_checkpointing/test_async_save.py", "latest")
    assert "--deselect" not in both["script"][0]
    env = {k: v for k, v in both["variables"].items() if isinstance(v, str)}
    env["MATRIXGEN_QUARANTINE"] = "recipes/quarantine.yaml"
    loaded = load_job_quarantine(env)
    assert loaded is not None
    assert loaded.node_actions()[DESELECTED].id == "ut-async-save-flaky-dev"
    assert loaded.node_actions()[DESELECTED].action.value == "deselect"
    # lts: the shipped deselect entry (dev only) does not apply, the new mute does.
    lts = after["gitlab-mr-h100-lts.yml"]
    assert isinstance(lts, dict)
    lts_job = gitlab_job(lts, "tests/unit_tests/dist_checkpointing/test_async_save.py", "latest")
    assert lts_job["variables"]["MATRIXGEN_ENVIRONMENT"] == "lts"
    # GitHub: the row's env carries the variables, and no "deselect".
    matrix = after["github-l0-h100-pr.json"]
    assert isinstance(matrix, dict)
    rows = {r["test_case"]: r for r in matrix["include"] if r["model"] == "unit-tests"}
    row = rows["tests/unit_tests/dist_checkpointing/test_async_save.py"]
    assert "deselect" not in row
    assert row["env"]["MATRIXGEN_SYSTEM"] == "github" and row["env"]["MATRIXGEN_SCOPE"] == "L0"
    loaded = load_job_quarantine(row["env"])
    assert loaded is not None
    assert sorted(e.id for e in loaded.entries) == ["mute-async-other", "ut-async-save-flaky-dev"]
    # Every job no mute entry reaches is emitted byte for byte as before.
    for name, content in before.items():
        if name not in ("gitlab-mr-h100-dev.yml", "gitlab-mr-h100-lts.yml") and not name.startswith(
            "github-l"
        ):
            assert after[name] == content, name
    old = before["gitlab-mr-h100-dev.yml"]
    assert isinstance(old, dict)
    changed = {n for n in pipeline if pipeline[n] != old.get(n)}
    assert all("tests/unit_tests/data/" in n or "test_async_save" in n for n in changed), changed


def test_a_deselect_reaches_the_plugin_never_the_launchers_prefix_match(
    shipped_copy: Path, tmp_path: Path, cli
) -> None:
    """pytest's --deselect matches by prefix: `::test_async_is_equivalent_to_sync`
    would also take out `::test_async_is_equivalent_to_sync_after_restart`. A
    deselect entry reaches the plugin, which matches exactly, as a mute does."""
    files = generated(cli, shipped_copy, tmp_path / "out")
    for name, document in files.items():
        text = json.dumps(document)
        assert "--deselect" not in text and '"deselect":' not in text, name
    pipeline = files["gitlab-mr-h100-dev.yml"]
    assert isinstance(pipeline, dict)
    job = gitlab_job(pipeline, "tests/unit_tests/dist_checkpointing/test_async_save.py", "latest")
    variables = job["variables"]
    assert variables["MATRIXGEN_QUARANTINE"] == "$CI_PROJECT_DIR/recipes/quarantine.yaml"
    assert variables["MATRIXGEN_QUARANTINE_ENTRY"] == (
        "ut-async-save-flaky-dev https://github.com/example/mcore/issues/7958"
    )
    env = {k: v for k, v in variables.items() if isinstance(v, str)}
    env["MATRIXGEN_QUARANTINE"] = "recipes/quarantine.yaml"
    loaded = load_job_quarantine(env)
    assert loaded is not None
    assert loaded.node_actions()[DESELECTED].id == "ut-async-save-flaky-dev"


def _megatron_launcher(root: Path) -> None:
    config = root / "matrixgen.yaml"
    text = config.read_text()
    assert "    launcher: bash tests/functional_tests/launch.sh\n" in text
    config.write_text(text.replace("    launcher: bash tests/functional_tests/launch.sh\n", ""))


def test_an_entry_the_megatron_launcher_cannot_take_is_an_error_naming_entry_and_target(
    shipped_copy: Path, tmp_path: Path, cli
) -> None:
    _megatron_launcher(shipped_copy)  # jobs run launch_jet_workload.py
    add_entries(shipped_copy, MUTE)
    run = cli("validate", "--recipes", "recipes")
    assert run.code == ExitCode.FINDINGS
    lines = [line for line in run.out.splitlines() + run.err.splitlines() if "unreachable" in line]
    targets = {"gitlab-mr-h100-dev"}  # mute-loader: dev only, on GitLab in mr
    assert {line.split("target ")[1].split(" ")[0] for line in lines if "mute-loader" in line} == (
        targets
    )
    mute_line = next(line for line in lines if '"mute-loader"' in line)
    assert mute_line.startswith("recipes/quarantine.yaml:")
    assert "launch_jet_workload.py) takes no node ids" in mute_line
    assert "never exports MATRIXGEN_QUARANTINE" in mute_line
    assert any('"ut-async-save-flaky-dev" (deselect)' in line for line in lines)
    run = cli("generate", "--recipes", "recipes", "--out", str(tmp_path / "out"))
    assert run.code == ExitCode.FINDINGS
    assert "quarantine-unreachable" in run.err


def test_a_recipe_script_that_sets_the_variable_reaches_the_plugin(
    shipped_copy: Path, tmp_path: Path, cli
) -> None:
    _megatron_launcher(shipped_copy)
    unit = shipped_copy / "h100" / "unit-tests.yaml"
    recipe = yaml.safe_load(unit.read_text())
    recipe["spec"]["script"] = (
        "export MATRIXGEN_QUARANTINE=/opt/megatron-lm/tests/test_utils/recipes/quarantine.yaml "
        "MATRIXGEN_SCOPE={scope} MATRIXGEN_PLATFORM={platforms}\n"
        "bash tests/unit_tests/run_ci_test.sh --bucket {test_case}"
    )
    unit.write_text(yaml.safe_dump(recipe, sort_keys=False))
    add_entries(shipped_copy, MUTE)
    files = generated(cli, shipped_copy, tmp_path / "out")
    pipeline = files["gitlab-mr-h100-dev.yml"]
    assert isinstance(pipeline, dict)
    for test_case in (
        "tests/unit_tests/data/",
        "tests/unit_tests/dist_checkpointing/test_async_save.py",
    ):
        job = gitlab_job(pipeline, test_case, "latest")
        # The launcher takes no node ids; the recipe's script hands over the file.
        assert "--deselect" not in job["script"][0]
        assert "MATRIXGEN_SYSTEM" not in job.get("variables", {})


def test_a_recipe_env_that_sets_a_plugin_variable_is_an_error(
    shipped_copy: Path, tmp_path: Path, cli
) -> None:
    unit = shipped_copy / "h100" / "unit-tests.yaml"
    recipe = yaml.safe_load(unit.read_text())
    recipe["spec"]["env"] = {"MATRIXGEN_SCOPE": "mr"}
    unit.write_text(yaml.safe_dump(recipe, sort_keys=False))
    add_entries(shipped_copy, MUTE)
    run = cli("validate", "--recipes", "recipes")
    assert run.code == ExitCode.FINDINGS
    assert "its recipe env sets MATRIXGEN_SCOPE, which the pytest plugin reads" in run.out + run.err
