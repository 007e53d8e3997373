"""A recipe tree's config and quarantine file, opened once by `open_project`
and read through it alike by the CLI, the quarantine editor and the pytest
plugin: a "#N" tracker resolves against the config's `quarantine.tracker_base`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from matrixgen.documents.config import DEFAULT_CONFIG, ProjectConfig, parse_config
from matrixgen.model.vocab import CONFIG_FILENAME, QUARANTINE_FILENAME
from matrixgen.quarantine.model import QuarantineFile, read_quarantine


class Project:
    """One recipe tree's project files: the config, read when it is opened; the
    quarantine file, read when first asked for (it need not exist)."""

    def __init__(self, root: Path, config: ProjectConfig) -> None:
        self.root = root
        self.config = config
        self.quarantine_path = root / QUARANTINE_FILENAME

    @cached_property
    def quarantine(self) -> QuarantineFile:
        """The quarantine file as the config reads it; QuarantineError when it
        is not a regular file or cannot be read."""
        from matrixgen.quarantine.edit import read_file

        path = self.quarantine_path
        return read_quarantine(read_file(path), str(path), self.config)

    def edit(
        self,
        change: Callable[[QuarantineFile], tuple[list[Mapping[str, Any]], list[int]]],
        *,
        dry_run: bool = False,
    ) -> tuple[bytes | None, bytes]:
        from matrixgen.quarantine.edit import edit

        self.__dict__.pop("quarantine", None)  # what was read before the lock is read again
        return edit(self.quarantine_path, change, config=self.config, dry_run=dry_run)


def open_project(root: Path) -> Project:
    """The project at the top of a recipe tree on disk: its config (the default
    one for a tree without); ConfigError for a config that is invalid or not a
    regular file."""
    from matrixgen.engine.load import read_root_file

    raw = read_root_file(root, CONFIG_FILENAME)
    config = DEFAULT_CONFIG if raw is None else parse_config(raw, str(root / CONFIG_FILENAME))
    return Project(root, config)
