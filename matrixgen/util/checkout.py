"""The top of the git checkout a path is in, and matrixgen's own folder there."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
