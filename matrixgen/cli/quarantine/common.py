"""What the quarantine commands share: the recipe tree, its config, the file, the options."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from matrixgen.cli.common import recipes_dir
from matrixgen.model.errors import UsageError


def _root(recipes: Path | None) -> Path:
    root = recipes_dir(recipes)
    if not root.is_dir():
        raise UsageError(f"recipe directory not found: {root}")
    return root


def _option(metavar: str, text: str, flag: str | None = None) -> Any:
    return typer.Option(*([flag] if flag else []), metavar=metavar, help=text)


OwnerOption = Annotated[
    str | None,
    _option("OWNER", "Who lifts it: a person or a team (default: quarantine.default_owner)."),
]
ExpiresOption = Annotated[
    str | None, _option("YYYY-MM-DD", "Expiry day (default: today + default_expiry_days).")
]
