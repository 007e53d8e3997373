"""`matrixgen quarantine add/remove/lift/list/audit/propose` and `matrixgen migrate`.

Exit codes: 0 done; 1 audit found stale entries (or the recipes have errors);
2 a usage error (unknown id, a value no job has, ...); 3 bad project config;
7 the quarantine file is malformed, is not a regular file (a directory, FIFO,
device, a link out of the tree), or cannot be locked (MATRIXGEN_LOCK_TIMEOUT,
the holder named) or written (it is then left as it was); 8 the tracker API
answered with an error.
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
