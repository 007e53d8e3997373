"""The CLI's registry (matrixgen/cli/registry.py): the app holds what it lists;
every group's help names each of its commands; and each old spelling (a hidden
alias) runs its command with the same exit code and the same bytes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from matrixgen.cli import registry
from matrixgen.cli.main import build_app
from matrixgen.model.errors import ExitCode
from tests.conftest import Run, run_cli
from tests.results_fixtures import RECIPES, TARGET, TODAY

JUNIT = Path(__file__).resolve().parent / "junit" / "gitlab.xml"


def _groups(command: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every group below `command` (itself left out), depth first, with its path."""
    for name, sub in command.commands.items():
        if hasattr(sub, "commands"):
            yield f"{path} {name}", sub
            yield from _groups(sub, f"{path} {name}")


def _listed(summary: str) -> list[str]:
    """The command names a group's one-line help lists: `subject: a, b, c.`"""
    _, sep, names = summary.partition(": ")
    assert sep and names.endswith("."), f"no command list in {summary!r}"
    return names.removesuffix(".").split(", ")


def _group_help_faults(root: Any) -> list[str]:
    """Each group whose one-line help (as `matrixgen --help` and the group's own
    help show it) leaves out a registered, shown command, or names one it lacks.
    The root is not a group of commands in this sense: click lists its
    commands itself, under "Commands:"."""
    faults = []
    for path, group in _groups(root, "matrixgen"):
        shown = [n for n, c in group.commands.items() if not c.hidden]
        for where, summary in (
            ("short help", group.get_short_help_str()),
            ("help", (group.help or "").split("\n\n")[0].replace("\n", " ")),
        ):
            listed = _listed(summary)
            missing = [n for n in shown if n not in listed]
            extra = [n for n in listed if n not in group.commands]
            if missing or extra:
                faults.append(f"{path} {where}: missing {missing}, not a command {extra}")
    return faults


def test_every_groups_help_names_each_of_its_commands() -> None:
    root = typer.main.get_command(build_app())
    assert [p for p, _ in _groups(root, "matrixgen")] == [
        "matrixgen quarantine",
        "matrixgen results",
    ]
    assert _group_help_faults(root) == []


def test_a_command_added_past_the_registry_fails_the_help_check() -> None:
    """The check itself: a group given a command its help does not name is caught."""
    app = build_app(("results",))
    app.registered_groups[0].typer_instance.command("extra")(lambda: None)  # type: ignore[union-attr]
    faults = _group_help_faults(typer.main.get_command(app))
    assert faults and all("missing ['extra']" in f for f in faults), faults


def test_the_groups_hold_the_moved_commands() -> None:
    root = typer.main.get_command(build_app())
    commands = root.commands  # type: ignore[attr-defined]
    assert list(commands["quarantine"].commands) == [
        "add",
        "remove",
        "lift",
        "list",
        "audit",
        "propose",
        "migrate",
    ]
    assert list(commands["results"].commands) == ["ingest", "prune", "flaky", "triage"]
    hidden = sorted(n for n, c in commands.items() if c.hidden)
    assert hidden == ["flaky", "migrate", "triage"]


def test_help_lists_no_alias() -> None:
    out = run_cli(["--help"]).out
    rows = out.split("Commands:\n", 1)[1].splitlines()
    listed = [r.split()[0] for r in rows if r.startswith("  ") and not r.startswith("   ")]
    assert "results" in listed and "quarantine" in listed
    assert not {"flaky", "triage", "migrate"} & set(listed)


ALIASES = [e for e in registry.CLI if isinstance(e, registry.Alias)]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Three runs of one JUnit report (two of its tests fail in each) in a SQLite store."""
    db = str(tmp_path_factory.mktemp("aliases") / "results.db")
    for run in ("1", "2", "3"):
        done = run_cli(
            [
                "results", "ingest", str(JUNIT), "--run-id", run, "--target", TARGET,
                "--tag", "latest", "--finished-at", f"2026-11-2{run}T10:00:00Z", "--ref", "main",
                "--commit", run * 40, "--recipes", str(RECIPES), "--db", db,
            ]
        )  # fmt: skip
        assert done.code == 0, done
    return db


# Megatron-LM's habits for `migrate`: a parked scope with its tracker, and a
# commented-out row naming one.
HABITS = """
type: basic
format_version: 1
maintainers: [mcore]
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: mcore-pyt-dev
  platforms: dgx_h100
products:
  - test_case: [ok_case]
    products:
      - environment: [dev]
        scope: [mr]
  - test_case: [broken_mr]
    products:
      - environment: [dev]
        scope: [mr-broken]  # hang: #513
  - test_case: [with_commented_row]
    products:
      - environment: [dev]
        scope: [mr]
      # - environment: [dev]
      #   scope: [nightly] # outdated TE: #501
"""


@pytest.fixture
def habits(tree: Callable[..., Path]) -> Path:
    build = "type: build\nformat_version: 1\nspec: {name: mcore-pyt-dev}\n"
    return tree({"_build-dev.yaml": build, "h100/gpt.yaml": HABITS})


# Per alias, command lines that reach the command (a listing, JSON, and a
# user's mistake the command itself reports), and the exit code of each.
RUNS: dict[str, list[tuple[list[str], int]]] = {
    "flaky": [
        (["--db", "{db}", "--recipes", "{recipes}", "--min-runs", "1"], ExitCode.OK),
        (["--db", "{db}", "--recipes", "{recipes}", "--format", "json"], ExitCode.OK),
        (["--db", "{missing}", "--recipes", "{recipes}"], ExitCode.RESULTS_STORE),
    ],
    "triage": [
        (["--run", "3", "--db", "{db}", "--recipes", "{recipes}"], ExitCode.OK),
        (["--run", "3", "--db", "{db}", "--recipes", "{recipes}", "--format", "markdown"], 0),
        (["--run", "404", "--db", "{db}", "--recipes", "{recipes}"], ExitCode.USAGE),
    ],
    "migrate": [
        (["--recipes", "{habits}"], ExitCode.OK),
        (["--recipes", "{habits}", "--format", "json"], ExitCode.OK),
        (["--recipes", "{missing}"], ExitCode.USAGE),
    ],
}
# Command lines click refuses, and help: their usage line names the spelling
# typed, the rest is the same.
USAGE = [["--format", "nope"], ["--help"], ["--db", "a", "--db", "b"]]


def test_every_alias_has_its_runs() -> None:
    assert sorted(RUNS) == sorted(a.name for a in ALIASES)


def _args(args: list[str], **values: str) -> list[str]:
    return [a.format(**values) for a in args]


def _both(alias: registry.Alias, args: list[str]) -> tuple[Run, Run]:
    return run_cli([alias.name, *args]), run_cli([alias.group, alias.command, *args])


@pytest.mark.parametrize("alias", ALIASES, ids=lambda a: a.name)
@pytest.mark.parametrize("case", range(3))
def test_an_alias_gives_the_same_bytes_and_exit_code(
    alias: registry.Alias,
    case: int,
    store: str,
    habits: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", TODAY)
    given, code = RUNS[alias.name][case]
    args = _args(
        given,
        db=store,
        recipes=str(RECIPES),
        habits=str(habits),
        missing=str(tmp_path / "missing"),
    )
    old, new = _both(alias, args)
    assert (old.code, old.out, old.err) == (new.code, new.out, new.err)
    assert new.code == code, new
    assert new.out if code == ExitCode.OK else new.err, new


@pytest.mark.parametrize("alias", ALIASES, ids=lambda a: a.name)
@pytest.mark.parametrize("args", USAGE, ids=" ".join)
def test_an_alias_refuses_and_helps_as_its_command(alias: registry.Alias, args: list[str]) -> None:
    old, new = _both(alias, args)
    typed = f"matrixgen {alias.group} {alias.command}"
    assert old.code == new.code and new.code in (ExitCode.OK, ExitCode.USAGE)
    assert typed in new.out + new.err
    assert (old.out, old.err) == (
        new.out.replace(typed, f"matrixgen {alias.name}"),
        new.err.replace(typed, f"matrixgen {alias.name}"),
    )
