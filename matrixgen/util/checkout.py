"""The top of the git checkout a path is in, the recipe tree and matrixgen's own
folder there."""

from __future__ import annotations

import subprocess
from pathlib import Path

# matrixgen's own state at the top of a checkout (the default results store):
# never a source file a test case depends on.
STATE_DIR = ".matrixgen"
# The results store's URL or path, when not given with --db.
STORE_VARIABLE = "MATRIXGEN_RESULTS_DB"
# The recipe tree, when not given with --recipes (the flag wins).
RECIPES_VARIABLE = "MATRIXGEN_RECIPES"
# Where a checkout keeps its recipe tree, by preference: matrixgen's own layout,
# then Megatron-LM's (which has no recipes/ at its top).
RECIPE_DIRS = ("recipes", "tests/test_utils/recipes")


def recipes_in(top: Path) -> str:
    """The recipe tree of the checkout at `top`, relative to it: the first of
    RECIPE_DIRS that is a directory there, else `recipes`."""
    return next((rel for rel in RECIPE_DIRS if (top / rel).is_dir()), RECIPE_DIRS[0])


def checkout_top(start: Path) -> Path | None:
    """The top folder of the git checkout `start` is in; None outside one (or
    without git)."""
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=start,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        return None
    return Path(top) if top else None


def default_store_path(start: Path | None = None) -> Path:
    """`.matrixgen/results.db` at the top of the git checkout (else here): where
    the results store is when none is configured. Here, not beside the store's
    code, so that asking whether there is one does not import sqlalchemy."""
    start = start or Path.cwd()
    return (checkout_top(start) or start) / STATE_DIR / "results.db"
