"""An option given twice: a usage error when it takes one value (click would
keep the last silently), the values gathered when it is repeatable.

The test walks the whole command tree as the CLI builds it, so a command or an
option added later is covered without being named here."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from matrixgen.cli.main import build_app
from tests.conftest import run_cli
from tests.quarantine_fixtures import v2_files


def _commands() -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path of names, click command) for every command and group of the app."""
    import typer.main

    def walk(path: tuple[str, ...], command: Any) -> Iterator[tuple[tuple[str, ...], Any]]:
        yield path, command
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk((*path, name), sub)

    yield from walk((), typer.main.get_command(build_app()))


def _single_valued(command: Any) -> list[Any]:
    return [
        p
        for p in command.params
        if p.param_type_name == "option" and p.expose_value and not p.multiple and not p.count
    ]


def _repeatable(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option" and p.multiple]


def _twice(param: Any, first: str = "a", second: str = "b") -> list[str]:
    if param.is_flag:
        other = param.secondary_opts[0] if param.secondary_opts else param.opts[0]
        return [param.opts[0], other]
    return [param.opts[0], first, param.opts[-1], second]


def _cases() -> list[tuple[tuple[str, ...], str, list[str]]]:
    return [
        (path, param.name, _twice(param))
        for path, command in _commands()
        for param in _single_valued(command)
    ]


CASES = _cases()


def test_the_walk_reaches_every_command_and_their_options() -> None:
    paths = {path for path, _ in _commands()}
    assert {("jet-trigger",), ("quarantine", "add"), ("results", "ingest"), ("diff",)} <= paths
    assert len(CASES) > 150  # every single-valued option of every command
    assert {name for path, name, _ in CASES if path == ("jet-trigger",)} >= {
        "scope",
        "enable_warmup",
        "n_repeat",
    }


@pytest.mark.parametrize(("path", "name", "repeated"), CASES, ids=lambda v: str(v))
def test_a_single_valued_option_given_twice_is_a_usage_error(
    path: tuple[str, ...],
    name: str,
    repeated: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # a command that ran anyway would write here
    run = run_cli([*path, *repeated])
    assert run.code == 2, (path, repeated, run)
    assert f"option {repeated[0]}" in run.err and "is given 2 times: give it once" in run.err
    assert "Traceback" not in run.err


def test_repeatable_options_still_gather_every_value() -> None:
    """Parsed only (resilient parsing: nothing converted, checked or run)."""
    seen = 0
    for path, command in _commands():
        for param in _repeatable(command):
            args = _twice(param)
            ctx = command.make_context(path[-1], args, resilient_parsing=True)
            if not param.is_flag:
                assert list(ctx.params[param.name] or ()) == ["a", "b"], (path, param.name)
            seen += 1
    assert seen > 20


def test_each_repeated_option_is_named_once_however_many_there_are() -> None:
    run = run_cli(
        ["quarantine", "add", "--kind", "flaky", "--kind", "broken", "--reason", "a",
         "--reason", "b", "--reason", "c"]
    )  # fmt: skip
    assert run.code == 2
    assert "option --kind is given 2 times" in run.err
    assert "option --reason is given 3 times" in run.err


def test_quarantine_add_with_two_test_cases_writes_one_entry_covering_both(
    tree: Callable[..., Path], cli: Callable[..., Any]
) -> None:
    root = tree(v2_files(quarantine=None))
    run = cli(
        "quarantine", "add", "--recipes", root, "--test-case", "ep8_dist_opt",
        "--test-case", "ep8_muon", "--tracker", "7201", "--kind", "flaky", "--action", "skip",
        "--platform", "dgx_h100", "--scope", "gitlab/mr", "--owner", "alice",
        "--reason", "EP8 hang", "--id", "ep8", "--format", "json",
    )  # fmt: skip
    assert run.code == 0, run
    written = yaml.safe_load((root / "quarantine.yaml").read_text())["entries"]
    assert len(written) == 1
    assert written[0]["match"]["test_case"] == ["ep8_dist_opt", "ep8_muon"]
    added = json.loads(run.out)
    assert [t["target"] for t in added["targets"]] == ["gitlab-mr-dgx_h100-dev"]
    skipped = {j["test_case"] for t in added["targets"] for j in t["jobs"]}
    assert skipped == {"ep8_dist_opt", "ep8_muon"}
    pipeline = cli("gitlab", "--recipes", root, "--target", "gitlab-mr-dgx_h100-dev")
    assert pipeline.code == 0, pipeline
    assert "ep8_dist_opt" not in pipeline.out and "ep8_muon" not in pipeline.out
    assert cli("validate", "--recipes", root).code == 0
    listed = json.loads(cli("quarantine", "list", "--recipes", root, "--format", "json").out)
    assert listed[0]["match"]["test_case"] == ["ep8_dist_opt", "ep8_muon"]


def test_one_test_case_of_several_that_matches_nothing_is_named(
    tree: Callable[..., Path], cli: Callable[..., Any]
) -> None:
    root = tree(v2_files(quarantine=None))
    run = cli(
        "quarantine", "add", "--recipes", root, "--test-case", "ep8_dist_opt",
        "--test-case", "ep8_muonn", "--tracker", "7201", "--kind", "flaky", "--action", "skip",
        "--owner", "alice", "--reason", "EP8 hang",
    )  # fmt: skip
    assert run.code == 2
    assert '"ep8_muonn" is not a test case' in run.err and 'did you mean "ep8_muon"' in run.err
    assert not (root / "quarantine.yaml").exists()
