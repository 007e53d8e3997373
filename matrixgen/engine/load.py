"""Stage 1, load: read a recipe tree (a directory, or files from git) into values.

A tree is every `*.yaml` file below its root, in sorted path order, except the
project config (`matrixgen.yaml`) and the quarantine file at the root. Each file
is parsed on its own, so one broken file does not hide the others' problems.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from matrixgen.engine.config import DEFAULT_CONFIG, ProjectConfig, parse_config
from matrixgen.engine.errors import Finding, Findings, Location, RecipeError, Severity, did_you_mean
from matrixgen.engine.model import RecipeFile
from matrixgen.engine.vocab import CONFIG_FILENAME, QUARANTINE_FILENAME, RecipeType
from matrixgen.engine.yamlio import parse_yaml

RESERVED_FILES = frozenset({CONFIG_FILENAME, QUARANTINE_FILENAME})


@dataclass(frozen=True, slots=True, kw_only=True)
class RecipeTree:
    """A loaded tree: its files, its config, and what loading found wrong."""

    root: str  # how to show the tree's root in messages
    files: tuple[RecipeFile, ...]
    config: ProjectConfig
    findings: tuple[Finding, ...] = ()
    extra_files: Mapping[str, bytes] | None = None  # root-level files we do not parse here
    # Content ids (git blob ids) of the files, when known: keys for reusing results.
    blob_ids: Mapping[str, str] | None = None

    @property
    def format_version(self) -> int:
        return 2 if self.config.vocabulary is not None else 1

    @property
    def builds(self) -> tuple[RecipeFile, ...]:
        return tuple(f for f in self.files if f.kind is RecipeType.BUILD)

    @property
    def tests(self) -> tuple[RecipeFile, ...]:
        return tuple(f for f in self.files if f.kind is RecipeType.BASIC)


def read_directory(root: Path) -> dict[str, bytes]:
    """Every file a tree may need, keyed by '/'-separated path relative to root."""
    if not root.is_dir():
        from matrixgen.engine.errors import UsageError

        raise UsageError(f"recipe directory not found: {root}")
    files: dict[str, bytes] = {}
    for path in root.rglob("*"):
        if path.is_symlink():
            _check_link(path)
        if path.suffix in (".yaml", ".yml") and path.is_file():
            try:
                files[path.relative_to(root).as_posix()] = path.read_bytes()
            except OSError as exc:
                raise RecipeError(f"{path}: cannot be read: {exc.strerror}") from None
    return files


def _check_link(path: Path) -> None:
    """A link whose files would be left out silently is refused: rglob does not
    enter linked directories (a link loop would never end), and a git revision
    of the tree holds the link, not what it points at."""
    if path.is_dir():
        raise RecipeError(
            f"{path}: a symbolic link to a directory; recipe trees are read without "
            "following those: move the files into the tree"
        )
    if path.suffix in (".yaml", ".yml") and not path.exists():
        raise RecipeError(f"{path}: a symbolic link to {os.readlink(path)}, which does not exist")


def load_tree(
    files: Mapping[str, bytes],
    *,
    root: str = ".",
    blob_ids: Mapping[str, str] | None = None,
    cache: dict[Hashable, Any] | None = None,
) -> RecipeTree:
    """Parse the files of one tree. Raises ConfigError for a bad project config;
    recipe problems are returned as findings, not raised.

    With `blob_ids` (content ids of the files, e.g. git blob ids) and a `cache`
    shared between calls, a file whose content was parsed before (at the same
    shown path) is not parsed again: the diff loads two revisions of one tree.
    """
    findings = Findings()
    config = DEFAULT_CONFIG
    ids = blob_ids or {}
    if CONFIG_FILENAME in files:
        shown = _display(root, CONFIG_FILENAME)
        key = ("config", ids.get(CONFIG_FILENAME), shown)
        cached = cache.get(key) if cache is not None and key[1] else None
        if cached is None:
            cached = parse_config(files[CONFIG_FILENAME], shown)
            if cache is not None and key[1]:
                cache[key] = cached
        config = cached
    parsed: list[RecipeFile] = []
    for rel in sorted(files):
        if rel in RESERVED_FILES:
            continue
        shown = _display(root, rel)
        if rel.removesuffix(".yml") + ".yaml" in RESERVED_FILES:
            # Not read at all: its vocabulary, pins or quarantine would silently not apply.
            findings.add(
                Location(shown),
                "file-ignored",
                f"not read: the file must be named {rel.removesuffix('.yml')}.yaml",
            )
            continue
        if not rel.endswith(".yaml"):
            findings.add(
                Location(shown),
                "file-ignored",
                "ignored: recipe files must end in .yaml",
                Severity.WARNING,
            )
            continue
        key = ("recipe", ids.get(rel), shown)
        hit = cache.get(key) if cache is not None and key[1] else None
        if hit is None:
            found = Findings()
            hit = (parse_recipe(files[rel], rel, shown, found), tuple(found.items))
            if cache is not None and key[1]:
                cache[key] = hit
        recipe, file_findings = hit
        findings.extend(file_findings)
        if recipe is not None:
            parsed.append(recipe)
    if CONFIG_FILENAME not in files:
        _check_needs_config(parsed, files, root, findings)
    extra = {k: v for k, v in files.items() if k in RESERVED_FILES}
    return RecipeTree(
        root=root,
        files=tuple(parsed),
        config=config,
        findings=tuple(findings.items),
        extra_files=extra,
        blob_ids=dict(ids) if blob_ids is not None else None,
    )


def parse_recipe(raw: bytes, rel: str, shown: str, findings: Findings) -> RecipeFile | None:
    """One recipe file, or None (with findings) when it cannot be used at all."""
    document = parse_yaml(raw, shown, findings)
    if document is None:
        return None
    data = document.data
    if not isinstance(data, dict):
        findings.add(
            document.locate([]),
            "recipe-type",
            f"a recipe file must be a mapping with spec and products, not {_kind(data)}",
        )
        return None
    version = data.get("format_version", 1)
    if version not in (1, 2) or isinstance(version, bool):
        findings.add(
            document.locate(["format_version"]),
            "recipe-format-version",
            f"format_version must be 1 or 2, not {version!r}",
        )
        return None
    if version == 1:
        # Megatron-LM's parser takes `on:` or `1:` as the key YAML makes of it (an
        # axis no selection looks at): in its format, a warning.
        findings.items[:] = [
            replace(f, severity=Severity.WARNING)
            if f.code == "yaml-key-type" and f.location.file == shown
            else f
            for f in findings.items
        ]
    name = rel.rsplit("/", 1)[-1]
    declared = data.get("type")
    if declared == RecipeType.BUILD or name.startswith("_build"):
        kind = RecipeType.BUILD
    elif declared in (None, RecipeType.BASIC):
        kind = RecipeType.BASIC
    else:
        findings.add(
            document.locate(["type"]),
            "recipe-type",
            f'type must be "basic" or "build", not {declared!r}',
        )
        return None
    return RecipeFile(path=shown, rel=rel, document=document, kind=kind, format_version=version)


def _check_needs_config(
    parsed: list[RecipeFile], files: Mapping[str, bytes], root: str, findings: Findings
) -> None:
    """format_version 2 files are checked against the project config: without
    one, nothing would check their vocabulary or pins, so say so, once."""
    v2 = [r for r in parsed if r.format_version == 2]
    if not v2:
        return
    others = f" (and {len(v2) - 1} other file(s))" if len(v2) > 1 else ""
    near = sorted(
        rel
        for rel in files
        if "/" not in rel and rel not in RESERVED_FILES and did_you_mean(rel, [CONFIG_FILENAME])
    )
    hint = f"; rename {_display(root, near[0])} to {CONFIG_FILENAME}" if near else ""
    findings.add(
        v2[0].document.locate(["format_version"]),
        "config-missing",
        f"format_version 2{others} needs the project config {_display(root, CONFIG_FILENAME)}, "
        f"which does not exist{hint}",
    )


def _display(root: str, rel: str) -> str:
    return rel if root in ("", ".") else f"{root.rstrip('/')}/{rel}"


def _kind(value: object) -> str:
    if value is None:
        return "an empty document"
    return {list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )
