"""Options' names (cli.main.OLD_SPELLINGS): a folder to write into is
`--output-dir` on every command, a file to write `--output`; the folder's old
spelling `--out` still reads the same option, and nothing names it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from matrixgen.cli.main import OLD_SPELLINGS, build_app
from matrixgen.model.errors import ExitCode
from tests.conftest import run_cli
from tests.tree_fixtures import HAND_TREE


def _commands() -> Iterator[tuple[str, Any]]:
    """Every command of the app (aliases too), with its name as typed."""

    def walk(group: Any, prefix: str) -> Iterator[tuple[str, Any]]:
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from walk(command, f"{prefix}{name} ")
            else:
                yield f"{prefix}{name}", command

    yield from walk(typer.main.get_command(build_app()), "")


def _written(command: Any) -> list[tuple[str, Any]]:
    """The options of a command that name what it writes: (shown spellings, option)."""
    return [
        (opt, param) for param in command.params for opt in param.opts if opt.startswith("--out")
    ]


def test_a_folder_is_output_dir_and_a_file_output_on_every_command() -> None:
    seen = {"--output": set(), "--output-dir": set()}
    for name, command in _commands():
        for opt, param in _written(command):
            if opt == "--output":
                assert param.metavar == "FILE", (name, opt)
                seen[opt].add(name)
            elif opt == "--output-dir":
                assert param.metavar == "DIR", (name, opt)
                seen[opt].add(name)
            else:  # Megatron-LM's own name, kept by jet-trigger as its generator has it
                assert (name, opt) == ("jet-trigger", "--output-path"), (name, opt)
    assert seen == {
        "--output": {"github", "gitlab", "jet-buckets"},
        "--output-dir": {"generate", "report"},
    }


@pytest.mark.parametrize("name", ["generate", "report"])
def test_help_shows_the_folder_option_once_and_the_old_spelling_never(name: str) -> None:
    run = run_cli([name, "--help"])
    assert run.code == 0
    assert "--output-dir DIR" in run.out
    for old in OLD_SPELLINGS:
        assert f"{old} " not in run.out and f"{old}," not in run.out, run.out


@pytest.mark.parametrize("name", ["generate", "report"])
def test_the_old_spelling_writes_the_same_bytes(
    name: str, tree: Callable[..., Path], tmp_path: Path
) -> None:
    root = tree(HAND_TREE)
    old_dir, new_dir = tmp_path / "old", tmp_path / "new"
    old = run_cli([name, "--recipes", str(root), "--out", str(old_dir)])
    new = run_cli([name, "--recipes", str(root), "--output-dir", str(new_dir)])
    assert new.code == ExitCode.OK, new
    assert old.code == new.code
    # The same bytes but for the folder's name, where a line names it.
    assert old.out.replace(str(old_dir), "DIR") == new.out.replace(str(new_dir), "DIR")
    assert old.err.replace(str(old_dir), "DIR") == new.err.replace(str(new_dir), "DIR")
    files = sorted(p.relative_to(new_dir) for p in new_dir.rglob("*") if p.is_file())
    assert files
    assert sorted(p.relative_to(old_dir) for p in old_dir.rglob("*") if p.is_file()) == files
    for rel in files:
        assert (old_dir / rel).read_bytes() == (new_dir / rel).read_bytes(), rel


def test_the_old_and_new_spelling_together_are_one_option_given_twice(
    tree: Callable[..., Path], tmp_path: Path
) -> None:
    root = tree(HAND_TREE)
    run = run_cli(
        ["generate", "--recipes", str(root), "--out", str(tmp_path / "a"), "--output-dir", "b"]
    )
    assert run.code == ExitCode.USAGE
    assert "option --output-dir is given 2 times: give it once" in run.err, run
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("name", ["generate", "report"])
def test_a_bad_folder_is_named_as_the_option_now_is(
    name: str, tree: Callable[..., Path], tmp_path: Path
) -> None:
    root = tree(HAND_TREE)
    (tmp_path / "file").write_text("")
    runs = [
        run_cli([name, "--recipes", str(root), spelling, str(tmp_path / "file")])
        for spelling in ("--out", "--output-dir")
    ]
    assert runs[0].code == runs[1].code == ExitCode.USAGE
    assert runs[0].err == runs[1].err
    assert "'--output-dir': Directory" in runs[1].err and "--out'" not in runs[1].err, runs[1]


def test_a_missing_folder_option_names_the_new_spelling(tree: Callable[..., Path]) -> None:
    run = run_cli(["report", "--recipes", str(tree(HAND_TREE))])
    assert run.code == ExitCode.USAGE
    assert "Missing option '--output-dir'.\n" in run.err, run


def test_a_command_without_the_folder_option_refuses_the_old_spelling() -> None:
    run = run_cli(["list", "--out", "x"])
    assert run.code == ExitCode.USAGE
    assert "No such option: --out" in run.err, run
