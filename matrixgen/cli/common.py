"""What every `matrixgen` command module shares: options, format choices, output helpers.

matrixgen.cli.main and its extension modules (cli_emit, cli_quarantine, cli_diff,
cli_project) import this at start-up, so it imports none of them and nothing
heavy: the pipeline and YAML dumping are imported inside the functions.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from matrixgen.engine.errors import Finding, render_findings
from matrixgen.engine.vocab import OutputFormat

if TYPE_CHECKING:
    from matrixgen.pipeline import Generation

RecipesOption = Annotated[
    Path | None,
    typer.Option(
        "--recipes",
        help="Recipe tree directory (default: recipes/ at the top of this git checkout).",
        file_okay=False,
        dir_okay=True,
    ),
]
TargetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--target",
        metavar="SPEC",
        help="Ad hoc target: system=gitlab,scope=mr,platform=dgx_h100,environment=dev"
        "[,cadence=pr][,model=M][,tag=T]. Repeatable.",
    ),
]
TargetNameOption = Annotated[
    list[str] | None,
    typer.Option(
        "--target-name", metavar="NAME", help="A target named in the project config. Repeatable."
    ),
]


class TableOrJson(StrEnum):
    """--format of the commands that print a table, or the same data as JSON."""

    TABLE = "table"
    JSON = "json"


TableOrJsonOption = Annotated[TableOrJson, typer.Option("--format", help="table or json.")]


def recipes_dir(given: Path | None) -> Path:
    from matrixgen.pipeline import default_recipes_dir

    return given if given is not None else default_recipes_dir()


def echo_findings(findings: list[Finding] | tuple[Finding, ...]) -> None:
    if findings:
        typer.echo(render_findings(list(findings)), err=True)


def load_valid(recipes: Path | None, *, emitting: bool = False) -> Generation:
    """Load, expand and validate the tree; refuse one that `validate` would fail
    (a mistyped scope would otherwise drop its jobs from every selection).
    `emitting` (generate, github, gitlab): with references.refuse_generate in
    the config, a gating target's missing reference refuses too."""
    from matrixgen.pipeline import generate
    from matrixgen.validate import require_valid

    directory = recipes_dir(recipes)
    generation = generate(directory)
    settings = generation.tree.config.references
    listing = None
    if emitting and settings is not None and settings.refuse_generate:
        from matrixgen.views.coverage import read_listing

        listing = read_listing(directory, settings)
    echo_findings(require_valid(generation, references=listing))
    return generation


def dump(value: Any, fmt: OutputFormat) -> str:
    """JSON or YAML text of plain data, stable byte for byte."""
    if fmt is OutputFormat.YAML:
        import yaml

        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        return yaml.dump(
            value,
            Dumper=dumper,
            sort_keys=False,
            default_flow_style=False,
            allow_unicode=True,
            width=1000,
        )
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def echo_json(value: Any) -> None:
    typer.echo(dump(value, OutputFormat.JSON), nl=False)
