"""The pipeline, top to bottom: load -> validate -> expand -> quarantine -> select
-> emit. This module wires the stages; each stage lives in its own module.

The CLI and the diff both call these functions; nothing here prints.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from matrixgen.errors import Finding, RecipeError, Severity
from matrixgen.expand import Expansion, expand_tree
from matrixgen.load import RecipeTree, load_tree, read_directory
from matrixgen.model import Job, Selector, Target
from matrixgen.select import select


@dataclass(frozen=True, slots=True)
class Generation:
    """A loaded and expanded tree: what every later stage starts from."""

    tree: RecipeTree
    expansion: Expansion

    @property
    def jobs(self) -> tuple[Job, ...]:
        return self.expansion.jobs

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.expansion.findings

    def select(self, selector: Selector) -> list[Job]:
        return select(self.expansion.jobs, selector)

    def jobs_for(self, target: Target) -> list[Job]:
        """The selection of one target."""
        return self.select(target.selector)


def default_recipes_dir(start: Path | None = None) -> Path:
    """`recipes/` at the top of the git checkout we are in, else `./recipes`."""
    start = start or Path.cwd()
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=start,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        top = ""
    return Path(top) / "recipes" if top else start / "recipes"


def generate_from_files(files: Mapping[str, bytes], *, root: str = ".") -> Generation:
    """Load and expand a tree given as {relative path: bytes} (a directory or git)."""
    tree = load_tree(files, root=root)
    return Generation(tree=tree, expansion=expand_tree(tree))


def generate(recipes: Path) -> Generation:
    """Load and expand the recipe tree in a directory."""
    return generate_from_files(read_directory(recipes), root=str(recipes))


def require_no_errors(generation: Generation) -> None:
    """Refuse to go on with a tree that has errors; warnings pass."""
    errors = [f for f in generation.findings if f.severity is Severity.ERROR]
    if errors:
        raise RecipeError(
            f"{len(errors)} error(s) in {generation.tree.root}; "
            "nothing was generated (run `matrixgen validate` for every finding)",
            findings=errors,
        )
