"""What Megatron-LM's drop-ins (`jet-trigger`, `jet-buckets`) share: their options,
the tree they read and the system whose quarantine entries apply."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from matrixgen.cli.common import (
    held,
    note,
    note_warnings,
    option,
    recipes_dir,
)
from matrixgen.model.vocab import OTHER_TIERS_SYSTEM, System
from matrixgen.systems.ci import job_variables, running

if TYPE_CHECKING:
    from matrixgen.emit.limits import Notice
    from matrixgen.pipeline import Generation


# How --system is chosen when not given, in words.
_ASSUMED = ", ".join(
    [f"{s.value} when {s.job_variable}=true" for s in System if s is not OTHER_TIERS_SYSTEM]
    + [f"else {OTHER_TIERS_SYSTEM.value}"]
)
SystemChoiceOption = Annotated[
    System | None,
    typer.Option(
        "--system",
        help=f"The system whose quarantine entries apply (default: {_ASSUMED}).",
    ),
]
StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="A value no recipe uses, a job the generator would lose, or a CI limit the "
        "file would break, is an error.",
    ),
]
LocalRecipesOption = Annotated[
    Path | None,
    option(
        "DIR",
        "More recipes, read after the tree (default: local_recipes/ beside the tree, "
        "when it exists).",
        file_okay=False,
    ),
]


def load_jet_tree(recipes: Path | None, local: Path | None) -> tuple[Generation, dict[str, int]]:
    """The tree and, as the generator reads it, its local recipes after it; refused
    when `validate` would fail it. Returns the files' order too (tree first, each
    part by path)."""
    from matrixgen.emit.checks import UNREACHABLE
    from matrixgen.engine.load import RESERVED_FILES, folder_in_tree, read_directory
    from matrixgen.model.errors import UsageError
    from matrixgen.pipeline import generate_from_files
    from matrixgen.validate import Needs, require_usable

    directory = recipes_dir(recipes)
    files = read_directory(directory)
    order = sorted(files)
    if local is not None and not local.is_dir():
        raise UsageError(f"--local-recipes: directory not found: {local}")
    # The default, beside the tree, is the checkout's: a link there is refused as
    # in a tree (a link to / would have the whole disk read).
    local_dir = local if local is not None else folder_in_tree(directory.parent, "local_recipes")
    if local_dir is not None and local_dir.resolve() != directory.resolve():
        prefix = os.path.relpath(local_dir, directory).replace(os.sep, "/") + "/"
        extra = {
            prefix + rel: data
            for rel, data in read_directory(local_dir).items()
            if rel.endswith(".yaml") and rel not in RESERVED_FILES
        }
        files.update(extra)
        order += sorted(extra)
    generation = generate_from_files(files, root=str(directory))
    # A node-level entry that cannot reach a job's tests is refused by the call
    # whose pipeline holds that job (each home's `megatron` part), naming entry
    # and job: not by every call, whatever pipeline it writes.
    usable = require_usable(generation, Needs.VALID, own_checks=(UNREACHABLE,))
    note_warnings(usable, generation.tree.root)
    return held(generation), {rel: i for i, rel in enumerate(order)}


def asking_system(given: System | None) -> System:
    """--system, else the one whose job this process runs in (a note says why)."""
    if given is not None:
        return given
    home = running()
    if home is not None:
        chosen, why = System(home.name), f"{home.job_variable}=true"
    else:
        chosen, why = OTHER_TIERS_SYSTEM, " and ".join(job_variables()) + " are not true"
    choices = " or ".join(f"--system {s.value}" for s in System)
    note(
        f"--system {chosen.value} assumed ({why}): the quarantine entries of "
        f"{chosen.value} apply; give {choices} to choose"
    )
    return chosen


def say(notices: list[Notice] | tuple[Notice, ...], strict: bool) -> None:
    """Each notice as a warning; with --strict an error, and nothing written: exit 4
    when a CI system's limit would be broken, else 2."""
    from matrixgen.emit.limits import LIMIT_NOTICE
    from matrixgen.model.errors import LimitError, UsageError
    from matrixgen.util.escape import terminal_text

    if strict and notices:
        error = LimitError if any(n.code == LIMIT_NOTICE for n in notices) else UsageError
        raise error(
            "--strict: "
            + "; ".join(terminal_text(n.message) for n in notices)
            + "; nothing written"
        )
    for notice in notices:
        typer.echo(f"matrixgen: warning: {terminal_text(notice.message)} [{notice.code}]", err=True)
