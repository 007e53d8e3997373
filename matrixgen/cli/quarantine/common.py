"""What the quarantine commands share: the recipe tree, its config, the file, the options."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from matrixgen.cli.common import recipes_dir
from matrixgen.engine.errors import UsageError
from matrixgen.engine.vocab import QUARANTINE_FILENAME

if TYPE_CHECKING:
    from matrixgen.documents.config import ProjectConfig
    from matrixgen.pipeline import Generation
    from matrixgen.quarantine.model import QuarantineFile


def _root(recipes: Path | None) -> Path:
    root = recipes_dir(recipes)
    if not root.is_dir():
        raise UsageError(f"recipe directory not found: {root}")
    return root


def _read(root: Path, config: ProjectConfig) -> QuarantineFile:
    """The quarantine file, refused when malformed (exit 7)."""
    from matrixgen.quarantine.edit import read_file
    from matrixgen.quarantine.model import parse_quarantine
    from matrixgen.quarantine.policy import policy

    path = root / QUARANTINE_FILENAME
    qfile = parse_quarantine(read_file(path), str(path), tracker_base=policy(config).tracker_base)
    qfile.refuse_errors(
        f"{path} has {len(qfile.errors)} error(s); fix them first "
        "(`matrixgen quarantine audit` still lists what it can read)"
    )
    return qfile


def _generation(root: Path, *, selection: bool = False) -> Generation:
    """The tree, refused when its jobs have errors (`selection`: or its quarantine file)."""
    from matrixgen.pipeline import generate
    from matrixgen.validate import Needs, require_usable

    generation = generate(root)
    require_usable(generation, Needs.SELECTION if selection else Needs.JOBS)
    return generation


def _option(metavar: str, text: str, flag: str | None = None) -> Any:
    return typer.Option(*([flag] if flag else []), metavar=metavar, help=text)


OwnerOption = Annotated[
    str | None,
    _option("OWNER", "Who lifts it: a person or a team (default: quarantine.default_owner)."),
]
ExpiresOption = Annotated[
    str | None, _option("YYYY-MM-DD", "Expiry day (default: today + default_expiry_days).")
]
