"""Stage 2, validate: every check of every stage, in one list.

Each check lives beside the stage it checks (engine.checks for the tree itself,
quarantine, views, emit); this module only assembles them. Expansion already
reports what makes a row unusable (types, cadence, templates, builds, duplicates,
caps); its findings come first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from matrixgen.emit.checks import (
    check_duplicates,
    check_gitlab_names,
    check_node_routes,
    check_timeouts,
)
from matrixgen.engine.changes import check_globs
from matrixgen.engine.checks import check_tree
from matrixgen.engine.context import ValidationContext
from matrixgen.engine.errors import Finding, Findings, RecipeError, Severity
from matrixgen.engine.expand import Expansion
from matrixgen.engine.load import RecipeTree
from matrixgen.engine.references import ReferenceListing
from matrixgen.pipeline import Generation
from matrixgen.quarantine.entries import check_quarantine
from matrixgen.views.coverage import check_references
from matrixgen.views.graph import check_graph
from matrixgen.views.pins import check_images, check_value_pins
from matrixgen.views.stats import check_platforms

# The checks of the stages after expansion: each yields findings.
CHECKS: list[Callable[[ValidationContext], Iterable[Finding]]] = [
    check_quarantine,
    check_globs,
    check_platforms,
    check_images,
    check_value_pins,
    check_graph,
    check_gitlab_names,
    check_references,
    check_timeouts,
    check_duplicates,
    check_node_routes,
]


def validate(
    tree: RecipeTree,
    expansion: Expansion,
    *,
    schema: bool = True,
    references: ReferenceListing | None = None,
) -> list[Finding]:
    """Every finding of the tree, sorted and de-duplicated.

    `schema=False` leaves out the JSON Schema pass: expansion's own checks already
    refuse what would make a job wrong, and the schema pass costs more than
    loading the tree, so the commands that only need a sound tree skip it.
    `references`: the listing of the reference tree, to check each target's jobs
    against the declared reference files (not checked without one).
    """
    found = Findings()
    found.extend(expansion.findings)
    context = ValidationContext(tree, expansion, references)
    found.extend(check_tree(context, schema=schema))
    for check in CHECKS:
        found.extend(check(context))
    return found.sorted()


def require_valid(
    generation: Generation, *, references: ReferenceListing | None = None
) -> list[Finding]:
    """Stage 2 for the commands that generate: run validate's checks (all but the
    JSON Schema pass) and refuse a tree with errors, so a mistyped scope cannot
    quietly drop jobs from a target. Returns the warnings, for the caller to show.
    With a reference listing, a gating target's missing reference refuses too."""
    checked = validate(generation.tree, generation.expansion, schema=False, references=references)
    found = {*checked, *generation.findings}
    findings = sorted(found, key=Finding.sort_key)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if errors:
        raise RecipeError(
            f"{len(errors)} error(s) in {generation.tree.root}; "
            "nothing was generated (run `matrixgen validate` for every finding)",
            findings=errors,
        )
    return findings
