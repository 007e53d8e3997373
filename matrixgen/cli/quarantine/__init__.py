"""`matrixgen quarantine add/remove/lift/list/audit/propose` and `matrixgen migrate`.

Each command's help lists its exit codes.
"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    from matrixgen.cli.quarantine.entries import add, lift, list_entries, remove
    from matrixgen.cli.quarantine.migrate import migrate
    from matrixgen.cli.quarantine.review import audit, propose

    group = typer.Typer(
        name="quarantine",
        help="Tracker-linked quarantine entries: add, remove, lift, list, audit.",
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
    )
    group.command("add")(add)
    group.command("remove")(remove)
    group.command("lift")(lift)
    group.command("list")(list_entries)
    group.command("audit")(audit)
    group.command("propose")(propose)
    app.add_typer(group, name="quarantine")
    app.command("migrate")(migrate)
