"""`matrixgen decide`: what a CI event runs, from the project config's decisions
(its options shared with `generate --event`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from matrixgen.cli.common import (
    RecipesOption,
    TableJsonOrMarkdown,
    echo_as,
    exits,
    load_valid,
    option,
)
from matrixgen.model.errors import ExitCode
from matrixgen.model.vocab import System
from matrixgen.systems import HOMES, step_output_file, step_output_option

if TYPE_CHECKING:
    from matrixgen.model.decide import Decision
    from matrixgen.pipeline import Generation


EventOption = Annotated[
    str | None,
    option(
        "NAME",
        "The CI event: GitHub's event name (pull_request, merge_group, schedule, "
        "workflow_dispatch) or GitLab's pipeline source (merge_request_event, schedule).",
    ),
]
LabelOption = Annotated[
    list[str] | None,
    option(
        "LABEL",
        "A label of the pull or merge request that a rule names (a label no rule "
        "names is an error). Repeatable.",
    ),
]


LabelsJsonOption = Annotated[
    str | None,
    option(
        "JSON",
        "Every label of the pull request as a JSON list of strings "
        f"({', '.join(h.labels_expression for h in HOMES if h.labels_expression)}); "
        "labels no rule names are ignored and reported.",
    ),
]
SystemOption = Annotated[
    System | None,
    typer.Option("--system", help="The system whose rules decide, when both have the event."),
]


def parse_labels_json(text: str | None) -> list[str]:
    from matrixgen.model.errors import UsageError

    if text is None or not text.strip():
        return []
    from matrixgen.util.jsontext import JsonInputError, load_bounded

    try:
        value = load_bounded(text)
    except JsonInputError as exc:
        raise UsageError(f"--labels-json: {exc}") from None
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError("--labels-json: expected a JSON list of strings, e.g. '[\"Run tests\"]'")
    return value


def decision_for(
    generation: Generation,
    event: str,
    labels: list[str] | None,
    labels_json: str | None,
    system: System | None,
) -> Decision:
    from matrixgen.decide.decision import decide

    config = generation.tree.config
    return decide(
        config.decisions,
        config.targets,
        event=event,
        labels=list(labels or ()),
        loose_labels=parse_labels_json(labels_json),
        system=system,
    )


@exits(
    (ExitCode.FINDINGS, "the tree has errors"),
    (ExitCode.USAGE, "usage error (unknown event or label)"),
    ExitCode.CONFIG,
)
def decide_command(
    event: EventOption = None,
    label: LabelOption = None,
    labels_json: LabelsJsonOption = None,
    system: SystemOption = None,
    recipes: RecipesOption = None,
    fmt: Annotated[
        TableJsonOrMarkdown,
        typer.Option("--format", help="table, json, or markdown (a job summary)."),
    ] = TableJsonOrMarkdown.TABLE,
    github_output: Annotated[
        bool,
        typer.Option(
            step_output_option(),
            help="Also append scope, cadence, environment, n_repeat, lightweight, targets and "
            f"decision to {step_output_file()}.",
        ),
    ] = False,
) -> None:
    """What a CI event runs: scope, cadence, environment, n_repeat, lightweight mode
    and targets, each with the rule that decided it (decisions in the project config).

    Precedence: a label rule overrides the event's rule for the fields it sets; of
    several labels, the first listed in the config wins each field.

    """
    from matrixgen.decide.render import github_outputs, render_markdown, render_table
    from matrixgen.model.errors import UsageError

    if event is None:
        raise UsageError("decide needs --event NAME (pull_request, merge_group, schedule, ...)")
    generation = load_valid(recipes)
    decision = decision_for(generation, event, label, labels_json, system)
    if github_output:
        from matrixgen.emit.registry import step_outputs

        step_outputs().append(github_outputs(decision))
    echo_as(fmt, decision, render_table, render_markdown)
