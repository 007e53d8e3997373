"""What every `matrixgen` command module shares: options, format choices, output helpers.

matrixgen.cli.main and the command modules import this at start-up, so it
imports none of them and nothing heavy: the pipeline and YAML dumping are
imported inside the functions.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from matrixgen.cli.output import write_annotations
from matrixgen.model.errors import (
    ExitCode,
    Finding,
    annotation_lines,
    exit_codes,
    render_findings,
)
from matrixgen.model.vocab import OutputFormat
from matrixgen.util.escape import terminal_text
from matrixgen.util.jsontext import pretty

F = TypeVar("F", bound=Callable[..., Any])
Renderer = Callable[[Any], str]

if TYPE_CHECKING:
    from matrixgen.documents.config import ProjectConfig
    from matrixgen.model.jobs import Target
    from matrixgen.pipeline import Generation


def option(metavar: str | None, text: str, *flags: str, **more: Any) -> Any:
    """A typer option: its metavar, help and flags (none given: the parameter's name)."""
    return typer.Option(*flags, metavar=metavar, help=text, **more)


RecipesOption = Annotated[
    Path | None,
    option(
        "DIR",
        "Recipe tree directory (default: $MATRIXGEN_RECIPES, else recipes/ at the top of "
        "this git checkout, else tests/test_utils/recipes/ there as in Megatron-LM).",
        file_okay=False,
    ),
]


def exits(*codes: ExitCode | tuple[ExitCode, str]) -> Callable[[F], F]:
    """A command's help closes with its exit codes, in its own words where it gives them."""

    def add(command: F) -> F:
        command.__doc__ = f"{inspect.cleandoc(command.__doc__ or '')}\n\n{exit_codes(*codes)}"
        return command

    return add


# Where `quarantine audit` and `propose` send the tracker token: only a root the
# operator gives, never one the recipe tree names.
ApiUrlOption = Annotated[
    str | None,
    option(
        "URL",
        "GitHub API root, the only place the token is sent (https; default "
        "https://api.github.com). Never read from the recipe tree.",
        envvar="GITHUB_API_URL",
        show_envvar=True,
    ),
]
JsonOutputOption = Annotated[Path | None, option("FILE", "Write the JSON here instead of stdout.")]
TargetOption = Annotated[
    list[str] | None,
    option(
        "TARGET",
        "A name as `generate` prints it (configured, or implied by a tree without config), "
        "or key=value pairs: scope=S,platform=P,environment=E[,system=...][,cadence=...]"
        "[,model=...][,tag=...]. Repeatable; --target-name is the same.",
        "--target",
        "--target-name",
    ),
]
OwnerOption = Annotated[
    str | None,
    option("OWNER", "Who lifts it: a person or a team (default: quarantine.default_owner)."),
]
ExpiresOption = Annotated[
    str | None, option("YYYY-MM-DD", "Expiry day (default: today + default_expiry_days).")
]
HoldingPenOption = Annotated[
    bool,
    typer.Option(
        "--holding-pen",
        help="A tree without config: also the targets of holding-pen scopes (ending in "
        "-broken or -temp-disabled; flaky, deprecated, cleanup), which are left out "
        "by default.",
    ),
]


def check_ad_hoc(generation: Generation, targets: list[Target]) -> None:
    """Targets given as key=value pairs checked like a configured target's (see
    check_ad_hoc_target)."""
    from matrixgen.emit.common import check_ad_hoc_target

    config = generation.tree.config
    for target in targets:
        if config.target(target.name) is not target:  # configured: the config's checks ran
            check_ad_hoc_target(target, [(config, generation.jobs)])


class TableOrJson(StrEnum):
    TABLE = "table"
    JSON = "json"


TableOrJsonOption = Annotated[TableOrJson, typer.Option("--format", help="table or json.")]


class TableJsonOrMarkdown(StrEnum):
    TABLE = "table"
    JSON = "json"
    MARKDOWN = "markdown"


def recipes_dir(given: Path | None) -> Path:
    from matrixgen.pipeline import default_recipes_dir

    return given if given is not None else default_recipes_dir()


def existing_recipes_dir(given: Path | None) -> Path:
    """The recipe tree's directory, refused when it is not there."""
    from matrixgen.model.errors import UsageError

    directory = recipes_dir(given)
    if not directory.is_dir():
        raise UsageError(f"recipe directory not found: {directory}")
    return directory


def tree_config(given: Path | None) -> ProjectConfig | None:
    """The project config of the recipe tree, read alone (the commands that name
    the tree's scopes but need none of its recipes); None when --recipes is not
    given and no tree is found."""
    from matrixgen.quarantine.project import open_project

    directory = recipes_dir(given)
    if given is None and not directory.is_dir():
        return None
    return open_project(existing_recipes_dir(directory)).config


def report_base() -> Path:
    """Where paths in reports are relative to: the running CI's workspace, else
    the top of the git checkout we are in, else the current directory."""
    from matrixgen.systems.ci import ci_value
    from matrixgen.util.checkout import checkout_top

    workspace = ci_value("workspace")
    if workspace:
        return Path(workspace)
    here = Path.cwd()
    return checkout_top(here) or here


def echo_findings(findings: list[Finding] | tuple[Finding, ...]) -> None:
    if findings:
        typer.echo(render_findings(list(findings)), err=True)
        write_annotations(annotation_lines(list(findings)))


# The loaded tree of a run, held until the process ends when the console
# script runs: it exits without tearing objects down (cli.main.console), and
# freeing a big tree's millions of objects one by one when a command returns
# would cost a few percent of the run.
# None: values are freed as usual (tests and other callers of `main`).
_held: list[Any] | None = None


def hold_until_exit() -> None:
    global _held
    _held = []


def held(value: Any) -> Any:
    if _held is not None:
        _held.append(value)
    return value


def usable_generation(recipes: Path | None, *, selection: bool = False) -> Generation:
    """The tree, refused when its jobs (`selection`: or its quarantine file) have
    errors; its warnings unsaid."""
    from matrixgen.pipeline import generate
    from matrixgen.validate import Needs, require_usable

    generation = generate(recipes_dir(recipes))
    require_usable(generation, Needs.SELECTION if selection else Needs.JOBS)
    return generation


def load_valid(recipes: Path | None, *, emitting: bool = False) -> Generation:
    """The tree, refused when `validate` would fail it (a mistyped scope would
    otherwise drop its jobs from every selection). `emitting`: with
    references.refuse_generate, a gating target's missing reference refuses too."""
    from matrixgen.pipeline import generate
    from matrixgen.validate import Needs, require_usable

    directory = recipes_dir(recipes)
    generation = generate(directory)
    settings = generation.tree.config.references
    listing = None
    if emitting and settings is not None and settings.refuse_generate:
        from matrixgen.views.references import read_listing

        listing = read_listing(directory, settings)
    found = require_usable(generation, Needs.VALID, references=listing)
    note_warnings(found, generation.tree.root)
    return held(generation)


# Set to 1, the notes a command adds to its output (the tree's warnings
# counted, the system assumed) are left out: a CI that makes many calls on one
# tree (Megatron-LM's configure jobs) says them once, with `validate`.
QUIET_VARIABLE = "MATRIXGEN_QUIET"


def note(text: str) -> None:
    """One `matrixgen: note:` line on stderr, unless $MATRIXGEN_QUIET=1."""
    if os.environ.get(QUIET_VARIABLE, "") != "1":
        typer.echo(f"matrixgen: note: {terminal_text(text)}", err=True)


def note_warnings(findings: list[Finding], root: str) -> None:
    """The warnings of a tree that a command other than `validate` loaded: one
    line that counts them, not the findings again (validate shows each, once)."""
    if findings:
        import shlex

        command = f"matrixgen validate --recipes {shlex.quote(root)}"
        note(
            f"{len(findings)} warning(s) in {root} (`{command}` shows them; "
            f"{QUIET_VARIABLE}=1 leaves this note out)"
        )


def dump(value: Any, fmt: OutputFormat) -> str:
    """JSON or YAML text of plain data, stable byte for byte, in a spelling that is
    safe to print in a CI log (`json_for_log`, `yaml_for_log`)."""
    from matrixgen.util.escape import YAML_WIDTH, json_for_log, yaml_double_quoted, yaml_for_log

    if fmt is OutputFormat.YAML:
        import yaml

        base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

        class Dumper(base):  # type: ignore[misc, valid-type]
            pass

        def represent_str(dumper: Any, text: str) -> Any:
            style = '"' if yaml_double_quoted(text) else None
            return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)

        Dumper.add_representer(str, represent_str)
        return yaml_for_log(
            yaml.dump(
                value,
                Dumper=Dumper,
                sort_keys=False,
                default_flow_style=False,
                allow_unicode=True,
                width=YAML_WIDTH,
            )
        )
    return json_for_log(pretty(value))


def echo_json(value: Any) -> None:
    typer.echo(dump(value, OutputFormat.JSON), nl=False)


def echo_as(fmt: str, value: Any, table: Renderer, markdown: Renderer) -> None:
    """The value as --format asks: JSON (from its declaration), a table or Markdown."""
    from matrixgen.util.values import json_value

    if fmt == "json":
        echo_json(json_value(value))
    else:
        typer.echo((markdown if fmt == "markdown" else table)(value), nl=False)
