"""`--changed-since REF` and `--full`: change-based selection for generate,
github, gitlab and list (engine/changes.py decides; this wires it in)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from matrixgen.cli.common import option

if TYPE_CHECKING:
    from matrixgen.engine.changes import ChangeSelection
    from matrixgen.pipeline import Generation

ChangedSinceOption = Annotated[
    str | None,
    option(
        "REF",
        "Keep only the jobs whose declared paths match a file changed since REF "
        "(its merge base with HEAD, to the working tree); the full selection when that "
        "could miss one (reported).",
    ),
]
FullOption = Annotated[
    bool,
    typer.Option("--full", help="Ignore --changed-since: the full selection."),
]


def change_selection(
    generation: Generation, recipes: Path, ref: str | None, full: bool
) -> tuple[Generation, ChangeSelection | None]:
    """The generation restricted to the jobs the change needs, and the decision
    (printed; None when change-based selection is off)."""
    if ref is None or full:
        if full and ref is not None:
            typer.echo(
                f"matrixgen: --full: the full selection (--changed-since {ref} ignored)", err=True
            )
        return generation, None
    from matrixgen.engine.changes import ChangeSet, changed_files, describe
    from matrixgen.util.checkout import checkout_top, tree_path
    from matrixgen.util.escape import terminal_text

    directory = recipes.resolve()
    root = checkout_top(directory if directory.is_dir() else Path.cwd())
    tree = tree_path(root, directory) if root is not None else None
    tree_paths: list[str] = []
    if root is None:
        changes = ChangeSet(ref=ref, error=f"{recipes} is not inside a git checkout")
    elif tree is None:
        changes = ChangeSet(ref=ref, error=f"{recipes} is not inside the git checkout at {root}")
    else:
        changes = changed_files(root, ref)
        # The recipe tree holds its config and quarantine file; at the top of the
        # repository ("" here) every change is a change of the tree.
        tree_paths = [tree]
    kept, selection = generation.for_changes(changes, tree_paths)
    typer.echo(f"matrixgen: {terminal_text(describe(selection))}", err=True)
    return kept, selection
