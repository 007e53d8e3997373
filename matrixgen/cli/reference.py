"""docs/cli.md, written from the CLI itself (the help of every command, in help's
order), and docs/exit-codes.md, from model.errors.ExitCode; `--check` exits 1 when
a page differs (docs/testing.md). The help is laid out at a fixed width, so the
page is the same on every terminal."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from matrixgen.systems import HOMES

#: The width click lays the help out at (its default is the terminal's).
WIDTH = 100
PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
EXIT_PAGE = PAGE.with_name("exit-codes.md")
REGENERATE = "python -m matrixgen.cli.reference"

HEAD = f"""# CLI reference

Every command's usage, options and help, as `matrixgen COMMAND --help` prints
them. This page is generated from the CLI (`{REGENERATE}`); a test fails
when it differs from what the CLI says. The commands at a glance, with the
options every command shares: [commands](commands.md). Exit codes:
[exit codes](exit-codes.md).
"""


def _sections() -> list[tuple[str, str]]:
    """(command path, help text) of the root and of every command, depth first."""
    import typer.main

    from matrixgen.cli.main import build_app

    # typer carries its own click: its classes are reached through the command.
    root = typer.main.get_command(build_app())
    found: list[tuple[str, str]] = []

    def walk(command: Any, ctx: Any) -> None:
        found.append((ctx.command_path, command.get_help(ctx).rstrip()))
        if hasattr(command, "list_commands"):  # a group
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is None or sub.hidden:
                    continue
                walk(sub, sub.context_class(sub, info_name=name, parent=ctx))

    walk(
        root,
        root.context_class(
            root, info_name="matrixgen", terminal_width=WIDTH, max_content_width=WIDTH
        ),
    )
    return found


def render() -> str:
    sections = _sections()
    parts = [HEAD, "Commands:\n"]
    parts.append(
        "\n".join(f"- [`{path}`](#{path.replace(' ', '-')})" for path, _ in sections[1:]) + "\n"
    )
    for path, text in sections:
        parts.append(f"## {path}\n\n```text\n{text}\n```\n")
    return "\n".join(parts)


# The job variables under which findings are annotations too, as `NAME=true`.
_ANNOTATING = " or ".join(f"`{h.job_variable}=true`" for h in HOMES if h.annotates)
EXIT_TAIL = f"""
A user's mistake never ends in a traceback, nor does a fault of the machine: each is
one line on stderr and its exit code. Under {_ANNOTATING} findings are
also printed as `::error file=…,line=…,col=…::…` annotations.
"""


def render_exit_codes() -> str:
    """docs/exit-codes.md: one row per exit code, in its own words."""
    from matrixgen.model.errors import ExitCode

    rows = "".join(f"| {int(code)} | {code.meaning} |\n" for code in ExitCode)
    return f"# Exit codes\n\n| code | meaning |\n| --- | --- |\n{rows}{EXIT_TAIL}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    pages = {PAGE: render(), EXIT_PAGE: render_exit_codes()}
    if args == ["--check"]:
        stale = [page for page, text in pages.items() if page.read_text(encoding="utf-8") != text]
        for page in stale:
            print(f"{page} differs from the CLI: run `{REGENERATE}`", file=sys.stderr)
        return 1 if stale else 0
    if args:
        print(f"usage: {REGENERATE} [--check]", file=sys.stderr)
        return 2
    for page, text in pages.items():
        page.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
