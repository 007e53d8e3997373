"""Stage 2, validate: every check of every stage, in one list. Each check lives
beside the stage it checks (engine.checks for the tree itself, quarantine, views,
emit); this module only assembles them, beside what expansion already reported.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from enum import Enum

from matrixgen.emit.checks import (
    check_duplicates,
    check_gitlab_names,
    check_node_routes,
    check_timeouts,
)
from matrixgen.engine.changes import check_globs
from matrixgen.engine.checks import check_tree
from matrixgen.engine.context import ValidationContext
from matrixgen.engine.expand import Expansion
from matrixgen.engine.load import RecipeTree
from matrixgen.model.errors import Finding, Findings, RecipeError, Severity
from matrixgen.model.references import ReferenceListing
from matrixgen.pipeline import Generation
from matrixgen.quarantine.checks import check_quarantine
from matrixgen.views.graph import check_graph
from matrixgen.views.images import check_images
from matrixgen.views.pins import check_value_pins
from matrixgen.views.references import check_references
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
    return validate_generation(Generation(tree, expansion), schema=schema, references=references)


def validate_generation(
    generation: Generation,
    *,
    schema: bool = True,
    references: ReferenceListing | None = None,
) -> list[Finding]:
    """`validate` of a generation: the checks select through it, so the
    selections they make are the ones its emitters use afterwards."""
    found = Findings(list(generation.expansion.findings))
    context = ValidationContext(
        generation=generation, targets=generation.checked_targets(), references=references
    )
    found.extend(check_tree(context, schema=schema))
    for check in CHECKS:
        found.extend(check(context))
    return found.sorted()


class Needs(Enum):
    """What a command needs of a tree: each level takes in the ones above it."""

    # The jobs are what the files say: loading and expansion found no error
    # (the quarantine commands, which must still read a broken quarantine file; pins).
    JOBS = "jobs"
    # And the quarantine file is sound, so every selection means what it says
    # (graph, coverage, results ingest, quarantine propose, triage).
    SELECTION = "selection"
    # And validate's checks find no error (all but the JSON Schema pass), so a
    # mistyped scope cannot quietly drop jobs from a target (the commands that
    # generate or list jobs: generate, github, gitlab, list, decide, report,
    # jet-trigger, project).
    VALID = "valid"


def require_usable(
    generation: Generation,
    needs: Needs,
    *,
    references: ReferenceListing | None = None,
    own_checks: Collection[str] = (),
) -> list[Finding]:
    """The one refusal policy: is this tree usable for a command that needs
    `needs`? Raises RecipeError with the errors if not; returns the findings
    that do not refuse (warnings), sorted, for the caller to show. With a
    reference listing (VALID only), a gating target's missing reference refuses
    too. `own_checks`: finding codes the command checks itself, where they
    apply to what it writes (jet-trigger refuses a node-level entry that cannot
    reach a job of its own call, not of every target): left out here."""
    root = generation.tree.root
    if needs is Needs.JOBS:
        errors = generation.expansion.errors
        if errors:
            raise RecipeError(
                f"{len(errors)} error(s) in {root}; fix them first (run `matrixgen validate`)",
                findings=errors,
            )
        return [f for f in generation.expansion.findings if f.severity is not Severity.ERROR]
    found: set[Finding] = set(generation.findings)
    if needs is Needs.VALID:
        found.update(validate_generation(generation, schema=False, references=references))
    findings = sorted((f for f in found if f.code not in own_checks), key=Finding.sort_key)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if errors:
        raise RecipeError(
            f"{len(errors)} error(s) in {root}; "
            "nothing was generated (run `matrixgen validate` for every finding)",
            findings=errors,
        )
    return findings
