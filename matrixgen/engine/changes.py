"""Change-based selection: keep only the jobs whose declared `paths` match a file
that changed, and fall back to the full selection, with the reason, whenever
that could miss one (docs/cost.md#change-based-selection). Nothing is dropped
silently: every dropped job carries its reason.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct

from matrixgen.documents.recipe import blocks, rows, show
from matrixgen.engine.context import ValidationContext
from matrixgen.engine.globs import glob_problem, matches
from matrixgen.model.errors import Finding, Location, finding
from matrixgen.model.jobs import Job
from matrixgen.model.vocab import RecipeType
from matrixgen.util.checkout import STATE_DIR, in_tree

# Whole-selection fallbacks, as the summary names them.
UNRESOLVED = "unresolved-ref"
TREE_CHANGED = "recipe-tree-changed"
UNMATCHED = "unmatched-file"


def job_paths(job: Job) -> tuple[str, ...]:
    paths = job.spec.get("paths")
    return tuple(p for p in paths if isinstance(p, str)) if isinstance(paths, list) else ()


class ChangeSet(Struct, frozen=True, kw_only=True):
    """The files that changed since `ref`, or why they could not be known."""

    ref: str
    files: tuple[str, ...] = ()
    error: str | None = None  # set: the revision could not be resolved


class ChangeSelection(Struct, frozen=True, kw_only=True):
    """What change-based selection decided over a set of jobs."""

    changes: ChangeSet
    fallback: str | None  # UNRESOLVED, TREE_CHANGED, UNMATCHED: everything is kept
    fallback_detail: str = ""
    dropped: tuple[tuple[Job, str], ...] = ()  # (job, why it is not needed)

    def kept(self, jobs: Iterable[Job]) -> list[Job]:
        if self.fallback is not None:
            return list(jobs)
        dropped = frozenset(job for job, _ in self.dropped)
        return [j for j in jobs if j not in dropped]


def changed_files(repo: Path, ref: str, head: str | None = None) -> ChangeSet:
    """Files that differ between `ref` (its merge base with HEAD, as a pull
    request sees it) and the working tree, untracked files included; with
    `head` (a revision), between the merge base of `ref` and `head` and `head`
    itself: the files a branch changes, as `matrixgen diff BASE HEAD` compares it.
    Untracked files in matrixgen's own folder (STATE_DIR) are not changes."""

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)

    def commit_of(rev: str) -> str | None:
        if rev.startswith("-"):  # never an option to git
            return None
        found = git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
        return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else None

    try:
        resolved = commit_of(ref)
        tip = commit_of(head) if head is not None else None
    except OSError as exc:
        return ChangeSet(ref=ref, error=f"git could not run: {exc.strerror}")
    if resolved is None:
        return ChangeSet(ref=ref, error=f'"{ref}" is not a revision of {repo}')
    if head is not None and tip is None:
        return ChangeSet(ref=ref, error=f'"{head}" is not a revision of {repo}')
    base = git("merge-base", resolved, tip or "HEAD")
    start = base.stdout.strip() if base.returncode == 0 and base.stdout.strip() else resolved
    if tip is not None:
        diff = git("diff", "--name-only", "-z", "--no-renames", start, tip, "--")
        untracked_files: set[str] = set()
    else:
        diff = git("diff", "--name-only", "-z", "--no-renames", start, "--")
        untracked = git("ls-files", "--others", "--exclude-standard", "-z")
        # matrixgen's own state (the default results store) is no change of the
        # project's: counting it would send every run to the full selection.
        untracked_files = {
            f for f in untracked.stdout.split("\0") if f and not in_tree(f, STATE_DIR)
        }
    if diff.returncode != 0:
        return ChangeSet(ref=ref, error=f"git diff failed: {diff.stderr.strip()}")
    files = {f for f in diff.stdout.split("\0") if f} | untracked_files
    return ChangeSet(ref=ref, files=tuple(sorted(files)))


def select_changed(
    jobs: Sequence[Job],
    changes: ChangeSet,
    *,
    tree_paths: Sequence[str],
    ignore: Sequence[str] = (),
) -> ChangeSelection:
    """Which of `jobs` the change needs. `tree_paths` are the repository paths of
    recipe tree folders (`util.checkout.tree_path`): a change to anything in one,
    its config and quarantine file included, changes what every target runs
    (`util.checkout.in_tree` decides); `ignore` globs name files no case needs (docs)."""
    if changes.error is not None:
        return ChangeSelection(changes=changes, fallback=UNRESOLVED, fallback_detail=changes.error)
    for path in changes.files:
        if any(in_tree(path, t) for t in tree_paths):
            return ChangeSelection(changes=changes, fallback=TREE_CHANGED, fallback_detail=path)
    declared = sorted({glob for job in jobs for glob in job_paths(job)})
    relevant = [p for p in changes.files if not any(matches(g, p) for g in ignore)]
    for path in relevant:
        if not any(matches(g, path) for g in declared):
            return ChangeSelection(changes=changes, fallback=UNMATCHED, fallback_detail=path)
    # Each glob meets each file once, however many jobs declare it.
    hit = {g for g in declared if any(matches(g, p) for p in relevant)}
    dropped: list[tuple[Job, str]] = []
    for job in jobs:
        paths = job_paths(job)
        if job.spec.get("always") is True or not paths:
            continue
        if not any(g in hit for g in paths):
            shown = ", ".join(paths[:3]) + (", ..." if len(paths) > 3 else "")
            dropped.append((job, f"no changed file matches its paths ({shown})"))
    return ChangeSelection(changes=changes, fallback=None, dropped=tuple(dropped))


FALLBACK_TEXT = {
    UNRESOLVED: "the revision could not be resolved",
    TREE_CHANGED: "the recipe tree, its config or its quarantine file changed",
    UNMATCHED: "a changed file matches no declared path (and no changes.ignore glob)",
}


def describe(selection: ChangeSelection) -> str:
    """One line: what change-based selection did."""
    changes = selection.changes
    if selection.fallback is not None:
        return (
            f"change-based selection since {changes.ref}: full selection kept: "
            f"{FALLBACK_TEXT[selection.fallback]} ({selection.fallback_detail})"
        )
    return (
        f"change-based selection since {changes.ref}: {len(changes.files)} changed file(s), "
        f"{len(selection.dropped)} job(s) not needed"
    )


def check_globs(context: ValidationContext) -> Iterator[Finding]:
    """A glob longer than the limit, or with more wildcards (`engine.globs`):
    an error where it is written, in a recipe's `paths` or `changes.ignore`."""
    tree = context.tree
    for recipe in tree.files:
        if recipe.kind is not RecipeType.BASIC:
            continue
        for keys, globs in recipe_lists(recipe.data, "paths", spec=True):
            for i, glob in enumerate(globs):
                yield from _glob_finding(glob, recipe.document.locate([*keys, i]), "paths")
    for i, glob in enumerate(tree.config.doc.changes.ignore):
        where = tree.config.locate(["changes", "ignore", i])
        yield from _glob_finding(glob, where, "changes.ignore")


def recipe_lists(
    data: dict, key: str, *, spec: bool
) -> Iterator[tuple[tuple[str | int, ...], list]]:
    """(keys, list) of every `key` list of a test recipe: its spec if asked, blocks, rows."""
    places: list[tuple[tuple[str | int, ...], Any]] = (
        [(("spec",), data.get("spec"))] if spec else []
    )
    places += [(("products", bi), block) for bi, block in blocks(data)]
    for keys, mapping in [*places, *rows(data)]:
        if isinstance(mapping, dict) and isinstance(mapping.get(key), list):
            yield (*keys, key), mapping[key]


def _glob_finding(glob: object, where: Location, key: str) -> Iterator[Finding]:
    problem = glob_problem(glob) if isinstance(glob, str) else None
    if problem is not None:
        yield finding(where, "path-glob", f'{key}: the glob "{show(glob)}" {problem}')
