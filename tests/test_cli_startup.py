"""Start-up: a command builds only its own module's commands and imports only
the heavy libraries it uses; the console script skips teardown."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from matrixgen.cli.main import app_for, build_app
from matrixgen.cli.registry import top_level_names

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "recipes"
HEAVY = (
    "pydantic",
    "networkx",
    "jsonschema",
    "ruamel",
    "urllib.request",
    "http.client",
    "matrixgen.quarantine.tracker",
    "matrixgen.quarantine.edit",
    "matrixgen.diff",
    "sqlalchemy",
    "psycopg",
    "matrixgen.results",
    # Known-failure patterns are compiled only where a config declares some.
    "re2",
    "matrixgen.util.linear_regex",
    # Not heavy, but each costs a few ms of every run for nothing: the host
    # name comes from os.uname(), a schema file is read only by the schema pass.
    "socket",
    "importlib.resources",
)


def _help(app: typer.Typer, args: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        app(args=args, prog_name="matrixgen", standalone_mode=False)
    return out.getvalue()


def test_the_app_holds_the_registry_in_its_order() -> None:
    """The whole app is the registry: every top-level name, aliases included,
    and help lists them in the registry's order (commands before groups)."""
    commands = typer.main.get_command(build_app()).commands  # type: ignore[attr-defined]
    assert list(commands) == top_level_names()


@pytest.mark.parametrize(
    "args",
    [[n, "--help"] for n in top_level_names()]
    + [
        ["quarantine", "add", "--help"],
        ["results", "triage", "--help"],
    ],
)
def test_the_app_of_one_command_behaves_as_the_whole_app(args: list[str]) -> None:
    assert _help(app_for(args), args) == _help(build_app(), args)


@pytest.mark.parametrize("name", top_level_names())
def test_the_app_of_one_command_holds_only_that_command(name: str) -> None:
    """typer builds the options of every command an app holds, at every run."""
    commands = typer.main.get_command(app_for([name])).commands  # type: ignore[attr-defined]
    assert sorted(commands) == [name]


@pytest.mark.parametrize(("group", "name"), [("quarantine", "migrate"), ("results", "flaky")])
def test_the_app_of_a_groups_command_holds_only_that_command(group: str, name: str) -> None:
    root = typer.main.get_command(app_for([group, name, "--help"]))
    assert list(root.commands) == [group]  # type: ignore[attr-defined]
    assert list(root.commands[group].commands) == [name]  # type: ignore[attr-defined]


def _imported(args: list[str], cwd: Path) -> set[str]:
    """Run `main(args)` in a fresh interpreter: the modules it imported."""
    code = (
        "import json, sys\n"
        "from matrixgen.cli.main import main\n"
        f"rc = main({args!r})\n"
        "sys.stdout.flush()\n"
        "print('\\nMODULES' + json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=True
    )
    modules = json.loads(done.stdout.rsplit("\nMODULES", 1)[1])
    return set(modules)


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


V1_TREE = {
    "_build.yaml": "type: build\nformat_version: 1\nspec:\n  name: img\n",
    "gpt.yaml": (
        "type: basic\nformat_version: 1\n"
        "spec:\n  name: '{test_case}'\n  model: gpt\n  build: img\n  platforms: dgx_h100\n"
        "  environment: dev\n  script: echo {test_case}\n"
        "products:\n  - test_case: [a]\n    products:\n      - scope: [mr]\n"
    ),
}


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["list", "--format", "json"],
        ["generate", "--output-dir", "{out}"],
        ["gitlab", "--target", "system=gitlab,scope=mr,platform=dgx_h100,environment=dev"],
        ["stats"],
        ["pins"],
    ],
)
def test_commands_on_a_plain_tree_import_nothing_heavy(tmp_path: Path, args: list[str]) -> None:
    tree = tmp_path / "recipes"
    for rel, text in V1_TREE.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    argv = [a.replace("{out}", str(tmp_path / "out")) for a in args]
    modules = _imported([*argv, "--recipes", str(tree)], tmp_path)
    assert _heavy(modules) == []
    # The command modules of quarantine editing and of diff stay out of other commands.
    assert "matrixgen.cli.quarantine" not in modules
    assert "matrixgen.cli.diff" not in modules


def test_re2_is_imported_only_for_a_config_that_declares_known_failures(tmp_path: Path) -> None:
    """The config's known-failure patterns are checked where they are read, so
    a tree that declares some pays for RE2 (a few ms); one that does not never
    imports it (the plain tree above)."""
    tree = tmp_path / "recipes"
    for rel, text in V1_TREE.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    (tree / "matrixgen.yaml").write_text(
        "triage:\n  known_failures:\n"
        "    - {pattern: 'Segmentation fault', tracker: 'https://example.com/1', kind: infra}\n"
    )
    modules = _imported(["list", "--recipes", str(tree)], tmp_path)
    assert "re2" in modules and "matrixgen.util.linear_regex" in modules
    assert not {m for m in modules if m.split(".")[0] in ("sqlalchemy", "psycopg")}


def test_validate_imports_jsonschema_for_its_schema_pass(tmp_path: Path) -> None:
    tree = tmp_path / "recipes"
    for rel, text in V1_TREE.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    modules = _imported(["validate", "--recipes", str(tree)], tmp_path)
    assert {m.split(".")[0] for m in _heavy(modules)} - {"importlib"} == {"jsonschema"}


def test_the_console_script_exits_with_the_code_and_flushed_output(tmp_path: Path) -> None:
    """`python -m matrixgen` (the console script's path) ends with os._exit:
    the exit code and every line written must still come out."""
    tree = tmp_path / "recipes"
    for rel, text in V1_TREE.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # pipes buffer
    done = subprocess.run(
        [sys.executable, "-m", "matrixgen", "list", "--format", "json", "--recipes", str(tree)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [j["test_case"] for j in json.loads(done.stdout)] == ["a"]
    bad = subprocess.run(
        [sys.executable, "-m", "matrixgen", "list", "--recipes", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.strip()


def test_a_diff_without_a_results_store_imports_no_database_driver(tmp_path: Path) -> None:
    """The diff shows quarantine evidence only from a configured store; asking
    whether one is configured must not cost sqlalchemy's import (half a second)."""
    from tests.gitrepo import GitRepo

    repo = GitRepo(tmp_path / "repo")
    repo.commit(V1_TREE)
    repo.write({"gpt.yaml": V1_TREE["gpt.yaml"].replace("[a]", "[a, b]")})
    modules = _imported(["diff", "HEAD", "--recipes", "recipes"], repo.top)
    assert "matrixgen.diff.compare" in modules  # the diff ran
    assert not {m for m in modules if m.split(".")[0] in ("sqlalchemy", "psycopg")}
    assert "matrixgen.results.store" not in modules
