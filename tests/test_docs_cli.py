"""docs/cli.md is what the CLI says of itself: the page cannot drift from the
commands, their usage, options and help (matrixgen/cli/reference.py writes it)."""

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
    assert {"generate", "diff", "flaky", "quarantine", "results"} <= set(names)
    for name in names:
        command = root.get_command(ctx, name)
        assert f"\n## matrixgen {name}\n" in page
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("-"):
                    assert opt in page, f"matrixgen {name} {opt} missing from docs/cli.md"
