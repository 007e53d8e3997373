"""A recipe tree's project: its config and its quarantine file, opened once by
`open_project` and read through it alike by the CLI, the quarantine editor and
the pytest plugin (the recipes themselves are the pipeline's: `pipeline.generate`).

The quarantine file is read with its config (a "#N" tracker resolves against
`quarantine.tracker_base`), the same way whoever asks (`read_quarantine`), and
edited under its lock through `Project.edit`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from matrixgen.documents.config import DEFAULT_CONFIG, ProjectConfig, parse_config
from matrixgen.model.vocab import CONFIG_FILENAME, QUARANTINE_FILENAME
from matrixgen.quarantine.model import QuarantineFile, read_quarantine


class Project:
    """One recipe tree's project files: the config, read when it is opened; the
    quarantine file, read when first asked for (it need not exist)."""

    __slots__ = ("_quarantine", "config", "root")

    def __init__(self, root: Path, config: ProjectConfig) -> None:
        self.root = root
        self.config = config
        self._quarantine: QuarantineFile | None = None

    @property
    def quarantine_path(self) -> Path:
        return self.root / QUARANTINE_FILENAME

    @property
    def quarantine(self) -> QuarantineFile:
        """The quarantine file as the config reads it; QuarantineError when it
        is not a regular file or cannot be read."""
        if self._quarantine is None:
            from matrixgen.quarantine.edit import read_file

            path = self.quarantine_path
            self._quarantine = read_quarantine(read_file(path), str(path), self.config)
        return self._quarantine

    def edit(
        self,
        change: Callable[[QuarantineFile], tuple[list[Mapping[str, Any]], list[int]]],
        *,
        dry_run: bool = False,
    ) -> tuple[bytes | None, bytes]:
        """Change the quarantine file under its lock (`quarantine.edit.edit`)."""
        from matrixgen.quarantine.edit import edit

        self._quarantine = None  # what was read before the lock is read again
        return edit(self.quarantine_path, change, config=self.config, dry_run=dry_run)


def open_project(root: Path) -> Project:
    """The project at the top of a recipe tree on disk: its config (the default
    one for a tree without); ConfigError for a config that is invalid or not a
    regular file."""
    from matrixgen.engine.load import read_root_file

    raw = read_root_file(root, CONFIG_FILENAME)
    config = DEFAULT_CONFIG if raw is None else parse_config(raw, str(root / CONFIG_FILENAME))
    return Project(root, config)
