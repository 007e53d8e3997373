"""Stage 1, load: read a recipe tree (a directory, or files from git) into values.

A tree is every `*.yaml` file below its root, in sorted path order, except the
project config (`matrixgen.yaml`) and the quarantine file at the root. Each file
is parsed on its own, so one broken file does not hide the others' problems.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from msgspec import Struct, field
from msgspec.structs import replace

from matrixgen.documents.config import DEFAULT_CONFIG, ProjectConfig, parse_config
from matrixgen.documents.recipe import RecipeFile
from matrixgen.documents.yamlio import parse_yaml
from matrixgen.model.errors import (
    ConfigError,
    Finding,
    Findings,
    Location,
    QuarantineError,
    RecipeError,
    Severity,
    UsageError,
    did_you_mean,
)
from matrixgen.model.vocab import CONFIG_FILENAME, QUARANTINE_FILENAME, RecipeType
from matrixgen.util import treelinks
from matrixgen.util.atomic import describe_kind
from matrixgen.util.readfile import NotRegularFile, read_regular

RESERVED_FILES = frozenset({CONFIG_FILENAME, QUARANTINE_FILENAME})


class RecipeTree(Struct, frozen=True, kw_only=True):
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


RECIPE_SUFFIXES = (".yaml", ".yml")


class TreeListing(Struct, frozen=True, kw_only=True):
    """What a directory or a git revision holds, by '/'-separated path, unread."""

    files: frozenset[str]  # regular files, every name
    links: Mapping[str, str]  # symbolic links: path -> target text
    directories: frozenset[str]
    special: Mapping[str, str] = field(default_factory=dict)  # path -> "a FIFO (named pipe)", ...

    def lookup(self, path: str) -> treelinks.Entry:
        if path in self.files:
            return treelinks.Entry(treelinks.Kind.FILE)
        if path in self.links:
            return treelinks.Entry(treelinks.Kind.LINK, self.links[path])
        if path in self.directories:
            return treelinks.Entry(treelinks.Kind.DIRECTORY)
        if path in self.special:
            return treelinks.Entry(treelinks.Kind.SPECIAL)
        return treelinks.Entry(treelinks.Kind.MISSING)


def plan_reads(listing: TreeListing, *, root: str = ".", where: str = "") -> dict[str, str]:
    """Which files of a tree are read, and from where: {path in the tree: path
    whose bytes it holds}; one rule for the disk and git readers (docs/security.md,
    links in recipe trees). Every problem is raised at once, as the error of the
    quarantine file or the config when it is among them."""
    findings = Findings()
    reads: dict[str, str] = {}

    def refuse(rel: str, code: str, message: str) -> None:
        findings.add(Location(_display(root, rel)), code, message)

    for rel in sorted(RESERVED_FILES & listing.directories):
        refuse(rel, "tree-file-kind", f"a directory, not a file: {rel} must be a regular file")
    for rel, kind in sorted(listing.special.items()):
        if rel.endswith(RECIPE_SUFFIXES):
            refuse(rel, "tree-file-kind", f"{kind}, not a regular file: not read")
    for rel in sorted(listing.files):
        if rel.endswith(RECIPE_SUFFIXES):
            reads[rel] = rel
    for rel, target in sorted(listing.links.items()):
        shown_target = repr(target)
        found = treelinks.resolve(rel, listing.lookup)
        recipe_named = rel.endswith(RECIPE_SUFFIXES) or rel in RESERVED_FILES
        if found.kind is treelinks.Kind.OUTSIDE:
            refuse(
                rel,
                "tree-link",
                f"a symbolic link to {shown_target}, which leaves the recipe tree: refused "
                "(links are followed only inside the tree; what it points at was not read)",
            )
        elif found.kind is treelinks.Kind.LOOP:
            refuse(rel, "tree-link", f"a symbolic link to {shown_target} that loops: refused")
        elif found.kind is treelinks.Kind.DIRECTORY:
            refuse(
                rel,
                "tree-link",
                f"a symbolic link to a directory ({shown_target}); recipe trees are read "
                "without following those: move the files into the tree",
            )
        elif not recipe_named:
            continue
        elif found.kind is treelinks.Kind.FILE:
            assert found.path is not None
            reads[rel] = found.path
        elif found.kind is treelinks.Kind.SPECIAL:
            refuse(rel, "tree-file-kind", f"a symbolic link to {shown_target}, not a regular file")
        else:
            refuse(rel, "tree-link", f"a symbolic link to {shown_target}, which does not exist")
    if findings.items:
        _raise_tree_problems(findings, root, where)
    return dict(sorted(reads.items()))


def _raise_tree_problems(findings: Findings, root: str, where: str) -> NoReturn:
    items = findings.sorted()
    at = f" {where}" if where else ""

    def about(rel: str) -> bool:
        return any(f.location.file == _display(root, rel) for f in items)

    count = f"{len(items)} problem(s) with the files of the recipe tree {root}{at}"
    if about(QUARANTINE_FILENAME):
        raise QuarantineError(
            f"{count}; the quarantine file cannot be read, so nothing was read", findings=items
        )
    if about(CONFIG_FILENAME):
        raise ConfigError(f"{count}; nothing was read", findings=items)
    raise RecipeError(f"{count}; nothing was read", findings=items)


def list_directory(root: Path) -> TreeListing:
    """Every entry below `root`, links and special files included, not followed."""
    files: set[str] = set()
    links: dict[str, str] = {}
    directories: set[str] = set()
    special: dict[str, str] = {}
    pending = [""]
    while pending:
        rel = pending.pop()
        try:
            with os.scandir(root / rel if rel else root) as entries:
                items = list(entries)
        except OSError as exc:
            raise RecipeError(f"{root / rel}: cannot be read: {exc.strerror}") from None
        for entry in items:
            path = f"{rel}/{entry.name}" if rel else entry.name
            try:
                if entry.is_symlink():
                    links[path] = os.readlink(entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    directories.add(path)
                    pending.append(path)
                elif entry.is_file(follow_symlinks=False):
                    files.add(path)
                else:
                    special[path] = describe_kind(entry.stat(follow_symlinks=False).st_mode)
            except OSError as exc:
                raise RecipeError(f"{entry.path}: cannot be read: {exc.strerror}") from None
    return TreeListing(
        files=frozenset(files),
        links=links,
        directories=frozenset(directories),
        special=special,
    )


def disk_lookup(root: Path) -> treelinks.Lookup:
    """`treelinks.resolve`'s view of a directory on disk (lstat: nothing followed)."""

    def lookup(rel: str) -> treelinks.Entry:
        path = root / rel
        try:
            info = os.lstat(path)
        except OSError:
            return treelinks.Entry(treelinks.Kind.MISSING)
        if stat.S_ISLNK(info.st_mode):
            return treelinks.Entry(treelinks.Kind.LINK, os.readlink(path))
        if stat.S_ISDIR(info.st_mode):
            return treelinks.Entry(treelinks.Kind.DIRECTORY)
        if stat.S_ISREG(info.st_mode):
            return treelinks.Entry(treelinks.Kind.FILE)
        return treelinks.Entry(treelinks.Kind.SPECIAL)

    return lookup


def locate_in_tree(root: Path, rel: str) -> tuple[treelinks.Resolved, str | None]:
    """Where the tree's `rel` leads on disk, and its target text when it is a link."""
    lookup = disk_lookup(root)
    return treelinks.resolve(rel, lookup), lookup(rel).target


def folder_in_tree(root: Path, rel: str) -> Path | None:
    """The folder at `rel` below `root` that a command finds by itself (a
    checkout's recipe tree, jet-trigger's `local_recipes`), by `plan_reads`'s
    rule for links; None when there is none. A folder given on the command line
    is taken as given instead."""
    lookup = disk_lookup(root)
    done: list[str] = []
    for part in (p for p in rel.split("/") if p):
        here = "/".join([*done, part])
        entry = lookup(here)
        if entry.kind is treelinks.Kind.LINK:
            found = treelinks.resolve(here, lookup)
            why = {
                treelinks.Kind.OUTSIDE: f"which leaves {root}: refused (what it points at "
                "was not looked at)",
                treelinks.Kind.LOOP: "that loops: refused",
                treelinks.Kind.DIRECTORY: "a directory: links to directories are not followed; "
                "give the folder itself on the command line",
            }.get(found.kind)
            if why is None:
                return None
            raise RecipeError(f"{root / here}: a symbolic link to {entry.target!r}, {why}")
        if entry.kind is not treelinks.Kind.DIRECTORY:
            return None
        done.append(part)
    return root / "/".join(done) if done else root


def read_root_file(root: Path, name: str) -> bytes | None:
    """One file at the root of a tree on disk, by the rule of `plan_reads`; None
    when absent. What it refuses is an error of the file's kind, never opened."""
    error = {CONFIG_FILENAME: ConfigError, QUARANTINE_FILENAME: QuarantineError}.get(
        name, RecipeError
    )
    found, target = locate_in_tree(root, name)
    shown = root / name
    via = f"a symbolic link to {target!r}, which " if target is not None else ""
    kind = found.kind
    if kind is treelinks.Kind.MISSING and target is None:
        return None
    if kind is not treelinks.Kind.FILE or found.path is None:
        why = {
            treelinks.Kind.OUTSIDE: "leaves the recipe tree: refused (its target was not read)",
            treelinks.Kind.LOOP: "loops: refused",
            treelinks.Kind.DIRECTORY: "is a directory, not a file",
            treelinks.Kind.SPECIAL: "is not a regular file: not read",
            treelinks.Kind.MISSING: "does not exist",
        }[kind]
        raise error(f"{shown}: {via}{why}")
    try:
        return read_regular(root / found.path)
    except NotRegularFile as exc:
        raise error(f"{shown}: {exc.kind}, not a regular file: not read") from None
    except OSError as exc:
        raise error(f"{shown}: cannot be read: {exc.strerror}") from None


def read_directory(root: Path) -> dict[str, bytes]:
    """Every file `plan_reads` reads in a directory, by '/'-separated path."""
    if not root.is_dir():
        raise UsageError(f"recipe directory not found: {root}")
    plan = plan_reads(list_directory(root), root=str(root))
    files: dict[str, bytes] = {}
    for rel, real in plan.items():
        path = root / real
        try:
            data = read_regular(path)
        except NotRegularFile as exc:  # changed since it was listed
            found = Findings()
            where = Location(_display(str(root), rel))
            found.add(where, "tree-file-kind", f"{exc.kind}, not a regular file: not read")
            _raise_tree_problems(found, str(root), "")
        except OSError as exc:
            raise RecipeError(f"{path}: cannot be read: {exc.strerror}") from None
        if data is None:
            raise RecipeError(f"{path}: removed while the tree was being read")
        files[rel] = data
    return files


def load_tree(
    files: Mapping[str, bytes],
    *,
    root: str = ".",
    blob_ids: Mapping[str, str] | None = None,
    cache: dict[Hashable, Any] | None = None,
) -> RecipeTree:
    """Parse the files of one tree: ConfigError for a bad project config, the
    recipes' problems as findings. With `blob_ids` (git blob ids) and a `cache`
    shared between calls, a file parsed before at the same path is not parsed
    again: the diff loads two revisions of one tree.
    """
    findings = Findings()
    config = tree_config(files, root=root, blob_ids=blob_ids, cache=cache)
    ids = blob_ids or {}
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
    if config.vocabulary is None:
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
    parsed: list[RecipeFile],
    files: Mapping[str, bytes],
    root: str,
    findings: Findings,
) -> None:
    """Without a vocabulary nothing would check a format_version 2 file's values
    or pins: say so, once."""
    v2 = [r for r in parsed if r.format_version == 2]
    if not v2:
        return
    others = f" (and {len(v2) - 1} other file(s))" if len(v2) > 1 else ""
    config = _display(root, CONFIG_FILENAME)
    if CONFIG_FILENAME in files:
        need = (
            f"a vocabulary in the project config {config}, which declares none "
            "(add format_version: 2 and vocabulary there)"
        )
    else:
        near = sorted(
            rel
            for rel in files
            if "/" not in rel and rel not in RESERVED_FILES and did_you_mean(rel, [CONFIG_FILENAME])
        )
        hint = f"; rename {_display(root, near[0])} to {CONFIG_FILENAME}" if near else ""
        need = f"the project config {config}, which does not exist{hint}"
    findings.add(
        v2[0].document.locate(["format_version"]),
        "config-missing",
        f"format_version 2{others} needs {need}",
    )


def tree_config(
    files: Mapping[str, bytes],
    *,
    root: str = ".",
    blob_ids: Mapping[str, str] | None = None,
    cache: dict[Hashable, Any] | None = None,
) -> ProjectConfig:
    """A tree's project config (DEFAULT_CONFIG without one), cached as `load_tree` caches."""
    if CONFIG_FILENAME not in files:
        return DEFAULT_CONFIG
    shown = _display(root, CONFIG_FILENAME)
    key = ("config", (blob_ids or {}).get(CONFIG_FILENAME), shown)
    cached = cache.get(key) if cache is not None and key[1] else None
    if cached is None:
        cached = parse_config(files[CONFIG_FILENAME], shown)
        if cache is not None and key[1]:
            cache[key] = cached
    return cached


def _display(root: str, rel: str) -> str:
    return rel if root in ("", ".") else f"{root.rstrip('/')}/{rel}"


def _kind(value: object) -> str:
    if value is None:
        return "an empty document"
    return {list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )
