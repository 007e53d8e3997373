"""The pipeline, top to bottom: load -> validate -> expand -> quarantine -> select
-> emit. This module wires the stages; each stage lives in its own module.

The CLI and the diff both call these functions; nothing here prints.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from msgspec import Struct, field

from matrixgen.engine.changes import ChangeSelection, ChangeSet, select_changed
from matrixgen.engine.expand import Expansion, expand_tree
from matrixgen.engine.load import RecipeTree, folder_in_tree, load_tree, read_directory
from matrixgen.engine.select import JobIndex, select
from matrixgen.engine.targets import resolve_targets
from matrixgen.model.errors import Finding
from matrixgen.model.jobs import Job, Selector, Target
from matrixgen.model.vocab import System
from matrixgen.quarantine.apply import Selection
from matrixgen.quarantine.apply import selection as quarantine_selection
from matrixgen.quarantine.model import QuarantineFile, load_quarantine
from matrixgen.util.checkout import RECIPES_VARIABLE, checkout_top, recipes_in


class Generation:
    """A loaded and expanded tree: what every later stage starts from, and the
    cache of what those stages derive from it for each other (the tree and the
    expansion stay frozen). A generation with other jobs starts afresh, so
    nothing made from one set of jobs is handed out for another."""

    __slots__ = ("_checked_targets", "_index", "_quarantine", "_selections", "expansion", "tree")

    def __init__(self, tree: RecipeTree, expansion: Expansion) -> None:
        self.tree = tree
        self.expansion = expansion
        self._quarantine: QuarantineFile | None = None
        self._index: JobIndex | None = None
        self._selections: dict[Target, Selection] = {}
        self._checked_targets: tuple[Target, ...] | None = None

    def with_jobs(self, jobs: tuple[Job, ...]) -> Generation:
        """The same tree with other jobs (change-based selection), selecting afresh."""
        return Generation(self.tree, self.expansion.with_jobs(jobs))

    def for_changes(
        self, changes: ChangeSet, tree_paths: Sequence[str]
    ) -> tuple[Generation, ChangeSelection]:
        """What change-based selection decides over these jobs (with the config's
        `changes.ignore` globs), and the generation with only the jobs the change
        needs (itself on a fallback)."""
        ignore = self.tree.config.doc.changes.ignore
        selection = select_changed(self.jobs, changes, tree_paths=tree_paths, ignore=ignore)
        if selection.fallback is not None or not selection.dropped:
            return self, selection
        return self.with_jobs(tuple(selection.kept(self.jobs))), selection

    @property
    def jobs(self) -> tuple[Job, ...]:
        return self.expansion.jobs

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Expansion findings, and the quarantine file's (a broken quarantine file
        must stop generation: nobody could tell what it meant to skip)."""
        extra = self.quarantine.findings
        if not extra:
            return self.expansion.findings
        return tuple(sorted({*self.expansion.findings, *extra}, key=Finding.sort_key))

    @property
    def quarantine(self) -> QuarantineFile:
        """The parsed quarantine file of the tree (parsed once per content)."""
        if self._quarantine is None:
            self._quarantine = load_quarantine(self.tree)
        return self._quarantine

    def select(self, selector: Selector) -> list[Job]:
        """The jobs a selector matches, before quarantine."""
        return select(self.expansion.jobs, selector)

    def selection(self, target: Target | Selector) -> Selection:
        """Stage 4 then 5: the target's jobs with quarantine applied; `.jobs` are
        the kept ones (marked where an entry applies), `.skipped` the removed ones.
        A bare selector is placed on the system that runs its scope. Each is
        made from its group of the JobIndex; a target's once, shared by
        everything that asks (validate's checks, the emitters, stats)."""
        named = isinstance(target, Target)
        found = self._selections.get(target) if named else None
        if found is None:
            index = self._index
            if index is None:
                index = self._index = JobIndex(self.expansion.jobs)
            found = quarantine_selection(
                index.candidates(target.selector if named else target),
                self.quarantine.entries,
                target,
                known_test_cases=index.test_cases,
            )
            if named:
                self._selections[target] = found
        return found

    def checked_targets(self) -> tuple[Target, ...]:
        """The targets validate's checks look at: `resolve_targets` of the config
        and the jobs, resolved once per generation."""
        if self._checked_targets is None:
            self._checked_targets = tuple(resolve_targets(self.tree.config, self.jobs))
        return self._checked_targets

    def targets(
        self,
        values: Sequence[str] = (),
        *,
        system: System | None = None,
        holding_pen: bool = False,
    ) -> list[Target]:
        """The targets a command works on: the `--target` values given (names or
        key=value pairs; `system` is the default of pairs that name none), else
        the configured ones, else the ones the jobs imply, holding-pen scopes
        only with `holding_pen` and no platform validate reports as a typo."""
        config = self.tree.config
        exclude: frozenset[str] = frozenset()
        if not values and not config.targets:
            from matrixgen.engine.checks import typo_platforms

            exclude = typo_platforms(self.tree)
        return resolve_targets(
            config,
            self.jobs,
            values=values,
            system=system,
            holding_pen=holding_pen,
            exclude_platforms=exclude,
        )

    def jobs_for(self, target: Target) -> list[Job]:
        """The selection of one target: skipped jobs left out, the others marked."""
        return list(self.selection(target).jobs)


def default_recipes_dir(start: Path | None = None) -> Path:
    """The recipe tree when --recipes is not given: $MATRIXGEN_RECIPES; else, at
    the top of the git checkout we are in (else here), `recipes/`, else
    Megatron-LM's `tests/test_utils/recipes/` (see util.checkout.recipes_in)."""
    given = os.environ.get(RECIPES_VARIABLE)
    if given:
        return Path(given)
    start = start or Path.cwd()
    top = checkout_top(start)
    # Found in the checkout, not given: a link on the way is refused as in a tree.
    folder_in_tree(top or start, recipes_in(top or start))
    if top is None:
        return start / recipes_in(start)
    found = top / recipes_in(top)
    # Shown in every message: `recipes/h100/gpt.yaml:12:5` from the top of the
    # checkout, as a reader (and GitHub's annotations) know the file.
    return found.relative_to(Path.cwd()) if found.is_relative_to(Path.cwd()) else found


class PipelineCache(Struct, frozen=True):
    """Parsed files and per-file expansions, kept by content id across trees."""

    parsed: dict = field(default_factory=dict)
    expanded: dict = field(default_factory=dict)


def generate_from_files(
    files: Mapping[str, bytes],
    *,
    root: str = ".",
    blob_ids: Mapping[str, str] | None = None,
    cache: PipelineCache | None = None,
) -> Generation:
    """Load and expand a tree given as {relative path: bytes} (a directory or git).

    With content ids for the files and a cache shared between calls, files seen
    before are neither parsed nor expanded again (two revisions of one tree).
    """
    with _collector_paused():
        tree = load_tree(
            files, root=root, blob_ids=blob_ids, cache=cache.parsed if cache is not None else None
        )
        expansion = expand_tree(tree, cache=cache.expanded if cache is not None else None)
    return Generation(tree=tree, expansion=expansion)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Loading builds many objects that all stay alive, and CPython's cyclic
    collector would scan them again at every threshold: quadratic on a big tree
    (2,000 files: 6.6 s instead of 2.2 s). Reference counting still frees what
    loading drops. Afterwards, what is alive is frozen (`gc.freeze`): the later
    stages would otherwise rescan the loaded tree at each full collection, half
    of a run on a tree of 30,000 jobs. Frozen objects are still freed by
    reference counting; only cycles among them would wait for the process end."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def generate(recipes: Path) -> Generation:
    """Load and expand the recipe tree in a directory."""
    return generate_from_files(read_directory(recipes), root=str(recipes))
