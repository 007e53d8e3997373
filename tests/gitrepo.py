"""Temporary git repositories for the diff tests: write files, commit, branch."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from collections.abc import Mapping
from pathlib import Path

# Commits must not depend on the machine's git config (CI has none).
GIT_ENV = {
    "GIT_AUTHOR_NAME": "matrixgen tests",
    "GIT_AUTHOR_EMAIL": "tests@matrixgen.invalid",
    "GIT_COMMITTER_NAME": "matrixgen tests",
    "GIT_COMMITTER_EMAIL": "tests@matrixgen.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


class GitRepo:
    def __init__(self, top: Path) -> None:
        self.top = top
        top.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        result = subprocess.run(
            ["git", *args],
            cwd=self.top,
            capture_output=True,
            text=True,
            env={**os.environ, **GIT_ENV},
            check=True,
        )
        return result.stdout.strip()

    def write(self, files: Mapping[str, str | bytes | None], under: str = "recipes") -> None:
        """Write {path: text} below `under` (text dedented); None deletes."""
        for rel, content in files.items():
            path = self.top / under / rel if under else self.top / rel
            if content is None:
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.exists() or path.is_symlink():
                    path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")

    def commit(
        self, files: Mapping[str, str | bytes | None] | None = None, message: str = "change"
    ) -> str:
        """Write files (if given), commit everything, return the commit id."""
        if files:
            self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")
