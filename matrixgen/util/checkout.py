"""The top of the git checkout a path is in, matrixgen's own folder there, and
the one rule for which of the checkout's paths belong to a recipe tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path, PurePosixPath

# matrixgen's own state at the top of a checkout (the default results store):
# never a source file a test case depends on.
STATE_DIR = ".matrixgen"
# The results store's URL or path, when not given with --db.
STORE_VARIABLE = "MATRIXGEN_RESULTS_DB"


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


def tree_path(top: Path, directory: Path) -> str | None:
    """The recipe tree's folder as a path of the checkout at `top`: relative to
    the top, '/'-separated as git names paths, "" for the top itself; None when
    the folder is not inside the checkout. Links are followed, so the path is
    the one git reports changes under."""
    try:
        rel = Path(os.path.realpath(directory)).relative_to(os.path.realpath(top))
    except ValueError:
        return None
    return normal_tree(rel.as_posix())


def normal_tree(tree: str) -> str:
    """A tree's path as `in_tree` compares it: no `.` segments and no trailing
    slash; "" for the top. Only `.` segments go: a leading dot is part of a
    name (`.ci/recipes`)."""
    text = PurePosixPath(tree).as_posix()
    return "" if text in (".", "/") else text.strip("/")


def in_tree(path: str, tree: str) -> bool:
    """Whether `path` (relative to the checkout's top, as git names it) belongs
    to the recipe tree at `tree` (a path as `tree_path` gives it): the folder
    itself or anything below it, its project config and quarantine file
    included (they live at its top). Every path belongs to a tree at the top."""
    folder = normal_tree(tree)
    return folder == "" or path == folder or path.startswith(folder + "/")
