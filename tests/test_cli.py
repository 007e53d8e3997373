"""The command line as a user meets it: exit codes, formats, start-up cost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.test_compat import HAND_TREE


def test_usage_errors_exit_2(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(HAND_TREE)
    assert cli("list", "--recipes", root, "--format", "xml").code == 2
    assert cli("list", "--recipes", root, "--bogus").code == 2
    assert cli("frobnicate").code == 2
    bad_cadence = cli("list", "--recipes", root, "--cadence", "nightyl")
    assert bad_cadence.code == 2
    assert 'did you mean "nightly"' in bad_cadence.err
    missing = cli("list", "--recipes", root / "nope")
    assert missing.code == 2
    assert "Traceback" not in missing.err


def test_formats(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(HAND_TREE)
    as_json = json.loads(cli("list", "--recipes", root, "--format", "json").out)
    as_yaml = yaml.safe_load(cli("list", "--recipes", root, "--format", "yaml").out)
    assert as_json == as_yaml
    assert len(as_json) == 8
    table = cli("list", "--recipes", root, "--scope", "mr")
    lines = table.out.splitlines()
    assert lines[0].split()[:3] == ["model", "test_case", "tag"]
    assert len(lines) == 2 + 1 and "a_mr_and_github" in lines[2]
    assert "1 job(s)" in table.err


def test_test_case_filter_takes_lists(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(HAND_TREE)
    run = cli(
        "list",
        "--recipes",
        root,
        "--format",
        "json",
        "--test-case",
        "d_slim,e_broken",
        "--test-case",
        "a_mr_and_github",
    )
    assert sorted({j["test_case"] for j in json.loads(run.out)}) == [
        "a_mr_and_github",
        "d_slim",
        "e_broken",
    ]


def test_errors_block_list_but_warnings_do_not(tree: Callable[..., Path], cli: Callable):
    files = dict(HAND_TREE)
    files["h100/bad.yaml"] = HAND_TREE["h100/gpt.yaml"].replace("[dev]", "dev", 1)
    run = cli("list", "--recipes", tree(files))
    assert run.code == 1
    assert "bad.yaml:" in run.err and "nothing was generated" in run.err
    assert run.out == ""


def test_recipes_default_to_the_checkout(tmp_path: Path, monkeypatch, cli: Callable) -> None:
    from tests.conftest import write_tree

    write_tree(tmp_path / "recipes", HAND_TREE)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    run = cli("list", "--format", "json")
    assert run.code == 0, run
    assert len(json.loads(run.out)) == 8


def run_module(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "matrixgen", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_output_is_identical_across_hash_seeds(tree: Callable[..., Path]) -> None:
    root = tree(HAND_TREE)
    outputs = {
        run_module(
            "list", "--recipes", str(root), "--format", "json", env={"PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("0", "1", "4242", "random")
    }
    assert len(outputs) == 1 and len(next(iter(outputs))) > 100


def test_real_tree_output_is_identical_across_hash_seeds(megatron_dir: Path) -> None:
    outputs = {
        run_module(
            "list", "--recipes", str(megatron_dir), "--format", "json", env={"PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("0", "123")
    }
    assert len(outputs) == 1


def test_start_up_imports_no_heavy_modules() -> None:
    heavy = ("jsonschema", "networkx", "ruamel.yaml", "urllib.request", "http.client")
    code = f"import sys, matrixgen.cli; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


@pytest.mark.parametrize("command", ["validate", "list"])
def test_help_documents_exit_codes_and_options(command: str) -> None:
    result = run_module(command, "--help")
    assert result.returncode == 0
    assert "--recipes" in result.stdout
