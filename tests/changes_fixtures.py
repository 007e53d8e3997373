"""A git repository holding the shipped recipes and some source, shared by the change-
detection tests (not a test module)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path, pinned_today: object) -> Path:
    """The shipped recipes in a repository of their own, with some source."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "recipes", root / "recipes")
    for rel in (
        "megatron/core/ssm/mamba_block.py",
        "megatron/core/inference/engine.py",
        "docs/index.md",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root
