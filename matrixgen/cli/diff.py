"""`matrixgen diff`: what a branch does to the selection of every target."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from msgspec.structs import replace

from matrixgen.cli.common import HoldingPenOption, TargetOption, echo_findings, echo_json, option
from matrixgen.cli.results import DbOption, note_ignored_store
from matrixgen.model.errors import ExitCode, exit_codes
from matrixgen.systems import names
from matrixgen.util.escape import terminal_text
from matrixgen.util.values import json_value

if TYPE_CHECKING:
    from collections.abc import Sequence

    from matrixgen.changes.view import ChangedView
    from matrixgen.diff.expect import Rule
    from matrixgen.diff.golden_rules import GoldenRule
    from matrixgen.diff.model import SelectionDiff, Side
    from matrixgen.diff.references import ReferenceGaps


class DiffFormat(StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    JSON = "json"


# The first and last system, as the examples of the help name them.
_F, _L = names()[0], names()[-1]
DIFF_HELP = f"""Per target, the difference between what HEAD and BASE emit for it.

Added / removed: jobs that run at HEAD and not at BASE / the reverse (a job a
skip entry takes out does not run). Changed: jobs whose emitted content (GitHub
matrix row, GitLab job) differs, field by field, and, where the launcher reloads
the recipe at run time (a format_version 1 tree), whose resolved workload
differs (workload.script_setup, ...). Quarantine: quarantined, lifted, action
changed, entry changed, arrives quarantined, leaves quarantined; a row parked
in a habit scope (mr -> mr-broken) or commented out with a tracker is
quarantined, and back, lifted. Moved: jobs that leave one target for another
unchanged (a renamed scope, platform or environment). Findings: what
`matrixgen validate` reports at HEAD and not at BASE, and the reverse.
A row that duplicates (or stops duplicating) a job is a note, not a change.
Cost: each target's and pipeline's GPU-hours per run on both sides and the
change ("+6 jobs, +12.5 GPU-h per run of {_L}/mr"), priced as `stats --cost`
prices the jobs each side's file holds.

BASE and HEAD are git revisions (HEAD: the working tree when left out). The
recipe trees are read from git objects, not checked out, so this works in a
dirty working tree and in CI. A revision that starts with "-" is refused.

Evidence: with a results store (--db, $MATRIXGEN_RESULTS_DB, or
.matrixgen/results.db when it exists and git does not track it), each
quarantine entry the diff names carries its evidence, as `quarantine audit`
shows it (markdown, text, json).

--changed-view: what change-based selection would run for the branch's own
changed files (between the merge base of BASE and HEAD, and HEAD), decided and
reported as `--changed-since BASE` decides, fallbacks included.

Targets: --target as in the emitters (a name configured or discovered on
either side, or key=value pairs); else every target configured on either
side; else (trees without config) every scope x platform x environment used
on either side, holding-pen scopes only with --holding-pen. A key=value target
whose scope, platform, environment, model or tag no job of either side has
(in trees without vocabulary) is compared as empty, all such targets named in
one note: a CI keeps one target list for every revision it compares.

--expect RULE (repeatable) fails the command when the diff is otherwise:

\b
    RULE    = PATTERN ["{{" CASE[,CASE]... "}}"] ":" CHECK [[","] CHECK]...
    PATTERN = SYSTEM/SCOPE[/PLATFORM[/ENVIRONMENT[/CADENCE]]] | TARGET-NAME
              (globs allowed; a scope matches by name or tier)
    CASE    = a test case name or glob: the checks count its jobs only
    CHECK   = KIND [OP] COUNT | starts|stops|findings [OP] COUNT
              | cost [OP] AMOUNT
    KIND    = + added | - removed | ~ changed | q quarantine changes
              | m moved in or out | = all of them (and target definition changes)
    starts  = jobs that start running, whatever the cause (added, lifted,
              brought back from a habit scope); stops: the reverse
    OP      = <= >= < > != == (none: exactly)
    AMOUNT  = [+|-]NUMBER h (GPU-hours) | [+|-]NUMBER m (GPU-minutes) | 0:
              the change in GPU-hours per run (head minus base, unweighted)

\b
    {_F}/L1:+6       exactly six jobs added to GitHub L1
    {_L}/*:=0        no change at all on GitLab
    */nightly:-0       nothing removed from nightly
    {_F}/L0/dgx_h100:+>=1,-0
    {_F}/L1:starts=6   six jobs start running on GitHub L1 (a lift too)
    {_L}/mr{{*cp2*}}:stops=0   no CP2 job stops running in {_L}/mr
    {_L}/mr:cost<=+2h  at most 2 GPU-hours more per run of {_L}/mr
    */nightly:cost<=0    nightly costs no more than before
    *:findings=0         no new error or warning of `matrixgen validate`

Counts are per target, as the table shows them, summed over the targets a
pattern matches. A system, scope, platform, environment or cadence (without
globs) that no target has is a usage error.

Golden values: every golden-values file the branch adds, removes or changes
(Megatron-LM's tests/functional_tests/test_cases/{{model}}/{{test_case}}/
golden_values_{{environment}}_{{platforms}}.json in a tree without config, else
the config's reference named golden; git says which files differ, an
unchanged one is never read) is compared metric by metric: the signed mean of
(old - new) / old in percent, the largest change at any step, steps added,
removed and compared, non-finite samples, whether the case's test gates the
metric (its model_config.yaml's METRICS, else lm loss and num-zeros), and the
jobs of every target that read the file. A file that cannot be read is a
problem at its line, and the rest of the diff still prints. Rules over them:

\b
    golden[{{CASE,...}}]:GCHECK[,GCHECK]...
    GCHECK  = files|others|orphans|missing|nonfinite|problems [OP] COUNT
              | max|mean [OP] PERCENT%   (the gated metrics)

\b
    golden:files=0               no golden-values file changes at all
    golden{{*_1node}}:others=0     only the 1-node cases' golden values change
    golden:max<=2%               no gated metric moves more than 2% at any step
    golden:nonfinite=0,missing=0 no NaN or "nan" on the new side, no step lost
"""
DIFF_HELP += "\n" + exit_codes(
    (ExitCode.OK, "ok (changes or not)"),
    (
        ExitCode.USAGE,
        "usage error (a malformed --expect rule, a cost without its unit, or one naming an "
        "unknown system, scope or platform, a golden rule in a tree without golden values, a "
        'revision starting with "-")',
    ),
    (ExitCode.CONFIG, "bad project config on a side"),
    ExitCode.GIT,
    (ExitCode.EXPECTATION, "an expectation failed or matched no target"),
    (ExitCode.RESULTS_STORE, "the results store cannot be opened or read"),
)


def diff_command(
    base: Annotated[str, typer.Argument(metavar="BASE", help="The revision to compare against.")],
    head: Annotated[
        str | None,
        typer.Argument(metavar="HEAD", help="The revision to compare (default: the working tree)."),
    ] = None,
    # Not common.RecipesOption: a directory inside the repository, which
    # may exist at one revision only.
    recipes: Annotated[
        Path | None,
        option(
            "DIR",
            "The recipe tree's directory in the repository (default: $MATRIXGEN_RECIPES, "
            "else recipes/ at its top, else tests/test_utils/recipes/ as in Megatron-LM).",
        ),
    ] = None,
    target: TargetOption = None,
    holding_pen: HoldingPenOption = False,
    fmt: Annotated[
        DiffFormat, typer.Option("--format", help="text, markdown (a PR comment) or json.")
    ] = DiffFormat.TEXT,
    expect: Annotated[
        list[str] | None, option("RULE", "An assertion about the diff (see above); repeatable.")
    ] = None,
    db: DbOption = None,
    changed_view: Annotated[
        bool,
        typer.Option(
            "--changed-view",
            help="Also show what change-based selection (--changed-since BASE) would run "
            "for the files this branch changes.",
        ),
    ] = False,
) -> None:
    from matrixgen.diff.expect import Rule, check_rules, parse_rule
    from matrixgen.diff.gitsource import check_revision, locate_recipes
    from matrixgen.diff.golden_rules import (
        GoldenRule,
        check_golden_rules,
        is_golden,
        parse_golden_rule,
    )
    from matrixgen.diff.references import reference_gaps
    from matrixgen.diff.revisions import diff_revisions

    # A malformed rule stops us before any git work.
    rules = [parse_golden_rule(t) if is_golden(t) else parse_rule(t) for t in expect or ()]
    check_revision(base)
    if head is not None:
        check_revision(head)
    repo, path = locate_recipes(recipes)
    from matrixgen.diff.golden_review import EarlyReview, golden_review

    # The golden-values review reads its files while the sides load.
    early = EarlyReview(repo)
    try:
        result, sides = diff_revisions(
            repo, path, base, head, values=target or (), holding_pen=holding_pen, early=early
        )
        result = _with_evidence(result, sides, db)
        goldens = golden_review(repo, sides, early)
    finally:
        early.close()
    if goldens is not None:
        result = replace(result, goldens=goldens)
    # Exit 2 before any output: a rule naming what no side has.
    check_rules([r for r in rules if isinstance(r, Rule)], result)
    check_golden_rules([r for r in rules if isinstance(r, GoldenRule)], result)
    _echo_side_notes(result, sides)
    # Jobs the head runs without their reference files (each side's own revision).
    gaps = reference_gaps(repo, result, sides)
    view = None
    if changed_view:
        from matrixgen.changes.view import changed_view as view_of

        head_targets = [t.target for t in result.targets if t.exists != "base"]
        view = view_of(repo.top, path, base, head, sides[1].generation, head_targets)
    _echo_diff(result, fmt, gaps, view)
    if rules:
        _judge(rules, result)


def _judge(rules: Sequence[Rule | GoldenRule], result: SelectionDiff) -> None:
    """Those that hold on stderr; exit 6 listing those that do not."""
    from matrixgen.diff.expect import evaluate, require
    from matrixgen.diff.golden_rules import GoldenRule, evaluate_golden

    outcomes = [
        evaluate_golden(r, result) if isinstance(r, GoldenRule) else evaluate([r], result)[0]
        for r in rules
    ]
    for outcome in outcomes:
        if outcome.ok:
            typer.echo(f"matrixgen: {terminal_text(outcome)}", err=True)
    require(outcomes, result)


def _echo_side_notes(result: SelectionDiff, sides: list[Side]) -> None:
    for side in sides:
        if side.errors:
            typer.echo(
                f"matrixgen: {terminal_text(side.label)}: {len(side.errors)} error(s) "
                "in the recipe tree:",
                err=True,
            )
            echo_findings(side.errors)
    for note in result.notes:
        typer.echo(f"matrixgen: note: {terminal_text(note)}", err=True)


def _echo_diff(
    result: SelectionDiff, fmt: DiffFormat, gaps: ReferenceGaps, view: ChangedView | None
) -> None:
    from matrixgen.diff.data import to_json_data
    from matrixgen.diff.references import render_gaps
    from matrixgen.diff.render import render

    if fmt is DiffFormat.JSON and (gaps.declared or view is not None):
        data = to_json_data(result)
        if gaps.declared:
            data["references"] = json_value(gaps.targets)
        if view is not None:
            data["changed_view"] = json_value(view)
        echo_json(data)
    else:
        # The notes went to stderr above: a terminal shows each once.
        text = render(result, fmt.value, notes=False) + render_gaps(gaps, fmt.value)
        if view is not None:
            from matrixgen.changes.view import render_changed_view

            # A PR comment stays under GitHub's size limit.
            room = max(0, 65_000 - len(text))
            text += render_changed_view(view, fmt.value, room=room)
        typer.echo(text, nl=False)


def _with_evidence(result: SelectionDiff, sides: Sequence[Side], db: str | None) -> SelectionDiff:
    """The diff with each entry's notes from the contributing features."""
    from matrixgen.cli.features import diff_contributions
    from matrixgen.diff.evidence import diff_evidence

    note_ignored_store(db)
    evidence = diff_evidence(
        result, [side.generation for side in sides], diff_contributions(), {"db": db}
    )
    return result if evidence is None else replace(result, evidence=evidence)
