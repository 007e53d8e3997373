"""The top of the git checkout a path is in, the recipe tree and matrixgen's own
folder there, which results store a command reads, and the one rule for which
of the checkout's paths belong to a recipe tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path, PurePosixPath
from typing import NamedTuple

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


def tracked_by_git(path: Path) -> bool:
    """Is `path` tracked by the git checkout it is in (in the index, or in the
    commit checked out)? False outside a checkout or without git."""
    folder = path.parent if path.parent.is_dir() else Path.cwd()
    for args in (["--with-tree=HEAD"], []):  # without a first commit: the index alone
        try:
            done = subprocess.run(
                ["git", "ls-files", *args, "-z", "--", path.name],
                cwd=folder,
                capture_output=True,
                check=False,
            )
        except OSError:
            return False
        if done.returncode == 0:
            return bool(done.stdout.strip(b"\0"))
    return False


class StoreChoice(NamedTuple):
    """Which results store a command reads: `location` (a path or URL) or None
    for none; `note` says why a default store found was not read."""

    location: str | None
    explicit: bool
    note: str | None = None


def choose_store(given: str | None) -> StoreChoice:
    """The results store: `--db` (given), else $MATRIXGEN_RESULTS_DB, else the
    default file when it exists and git does not track it. A store committed
    into the checkout is the pull request's to forge: it is never read."""
    text = given or os.environ.get(STORE_VARIABLE) or ""
    if text:
        return StoreChoice(text, True)
    path = default_store_path()
    if not path.exists():
        return StoreChoice(None, False)
    if path.is_symlink() or path.parent.is_symlink():
        why = "is reached through a symbolic link, so it is not read as the results store"
    elif tracked_by_git(path):
        why = "is tracked by git, so it is not read as the results store (a commit can forge it)"
    else:
        return StoreChoice(str(path), False)
    return StoreChoice(None, False, f"{path} {why}: pass --db or set {STORE_VARIABLE}")


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
