"""quarantine.project: a tree's config and quarantine file, opened by one function
for the CLI, the editor and the pytest plugin, and read the same way by each."""

from __future__ import annotations

from pathlib import Path

import pytest

from matrixgen.documents.config import DEFAULT_CONFIG
from matrixgen.model.errors import ConfigError, ExitCode
from matrixgen.quarantine.project import open_project

ENTRY = (
    "entries:\n"
    "  - id: a\n    tracker: '#7'\n    kind: flaky\n    action: skip\n"
    "    match: {test_case: tc}\n    owner: o\n    reason: r\n"
)


def test_the_quarantine_is_read_with_the_config_beside_it(tmp_path: Path) -> None:
    (tmp_path / "matrixgen.yaml").write_text("quarantine: {tracker_base: https://x.invalid/i/}\n")
    (tmp_path / "quarantine.yaml").write_text(ENTRY)
    project = open_project(tmp_path)
    assert project.config.doc.quarantine.tracker_base == "https://x.invalid/i/"
    (entry,) = project.quarantine.entries
    assert entry.tracker_url == "https://x.invalid/i/7"
    assert project.quarantine is project.quarantine  # read once


def test_a_tree_without_files_has_the_default_config_and_no_quarantine(tmp_path: Path) -> None:
    project = open_project(tmp_path)
    assert project.config is DEFAULT_CONFIG
    assert not project.quarantine.present and not project.quarantine.entries


def test_a_broken_config_stops_the_opening_with_its_exit_code(tmp_path: Path) -> None:
    (tmp_path / "matrixgen.yaml").write_text("format_version: 2\n")
    with pytest.raises(ConfigError) as caught:
        open_project(tmp_path)
    assert caught.value.exit_code == ExitCode.CONFIG


def test_an_edit_goes_through_the_lock_and_the_project_reads_it_again(tmp_path: Path) -> None:
    (tmp_path / "quarantine.yaml").write_text(ENTRY)
    project = open_project(tmp_path)
    assert [e.id for e in project.quarantine.entries] == ["a"]
    old, new = project.edit(lambda q: ([], [q.by_id("a").index]))  # type: ignore[union-attr]
    assert old == ENTRY.encode() and b"id: a" not in new
    assert project.quarantine.entries == ()
