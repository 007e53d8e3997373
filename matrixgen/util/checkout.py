"""The top of the git checkout a path is in, and matrixgen's own folder there."""

from __future__ import annotations

import subprocess
from pathlib import Path

# matrixgen's own state at the top of a checkout (the default results store):
# never a source file a test case depends on.
STATE_DIR = ".matrixgen"


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
