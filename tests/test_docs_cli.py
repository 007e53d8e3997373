"""docs/cli.md is what the CLI says of itself: the page cannot drift from the
commands, their usage, options and help (matrixgen/cli/reference.py writes it);
docs/exit-codes.md is what the exit codes say of themselves, and each command's
help names its codes as they are."""

from __future__ import annotations

import difflib

import pytest

from matrixgen.cli import reference

pytestmark = pytest.mark.docs


def test_the_committed_cli_reference_is_what_the_cli_generates() -> None:
    committed = reference.PAGE.read_text(encoding="utf-8")
    generated = reference.render()
    diff = "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            generated.splitlines(keepends=True),
            "docs/cli.md (committed)",
            "docs/cli.md (from the CLI)",
            n=1,
        )
    )
    assert committed == generated, (
        f"docs/cli.md differs from the CLI; regenerate it with `{reference.REGENERATE}`:\n{diff}"
    )


def test_the_reference_holds_every_command_and_option() -> None:
    import typer.main

    from matrixgen.cli.main import build_app

    page = reference.render()
    root = typer.main.get_command(build_app())
    ctx = root.context_class(root, info_name="matrixgen")
    names = root.list_commands(ctx)
    assert {"generate", "diff", "quarantine", "results"} <= set(names)
    shown = [(name, root.get_command(ctx, name)) for name in names]
    for group, command in list(shown):  # the groups' commands too
        for name in getattr(command, "commands", {}):
            shown.append((f"{group} {name}", command.commands[name]))
    assert {"results flaky", "results triage", "quarantine migrate"} <= {n for n, _ in shown}
    for name, command in shown:
        if command.hidden:  # an old spelling, documented under its group
            assert f"\n## matrixgen {name}\n" not in page
            continue
        assert f"\n## matrixgen {name}\n" in page
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("-"):
                    assert opt in page, f"matrixgen {name} {opt} missing from docs/cli.md"


def test_the_exit_code_page_is_written_from_the_exit_codes() -> None:
    from matrixgen.model.errors import ExitCode

    committed = reference.EXIT_PAGE.read_text(encoding="utf-8")
    assert committed == reference.render_exit_codes(), (
        f"docs/exit-codes.md differs from model.errors.ExitCode: run `{reference.REGENERATE}`"
    )
    for code in ExitCode:
        assert f"\n| {int(code)} | {code.meaning} |\n" in committed


def test_each_command_help_names_its_exit_codes_as_the_codes_do() -> None:
    """A command's `Exit N: ...` line names codes that exist, in order, and a
    code given without the command's own words in the code's short words."""
    import re

    from matrixgen.model.errors import ExitCode, exit_codes

    assert exit_codes(ExitCode.USAGE, (ExitCode.CONFIG, "bad config on a side")) == (
        "Exit 2: usage error; 3: bad config on a side."
    )
    page = reference.render()
    lines = re.findall(r"Exit ((?:\d+: [^;]*?; )*\d+: .*?\.)\s*$", page, re.M | re.S)
    assert lines, "no command lists its exit codes"
    for said in re.findall(r"(?:^|; |Exit )(\d+): ", page):
        assert int(said) in set(ExitCode), said
