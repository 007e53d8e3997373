"""The `matrixgen` command line: a thin layer over the library. An error a user
can cause is one clear message (with located findings) and its documented exit code."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from matrixgen import __version__
from matrixgen.cli import registry
from matrixgen.cli.changes import ChangedSinceOption, FullOption, change_selection
from matrixgen.cli.common import (
    RecipesOption,
    TargetOption,
    check_ad_hoc,
    dump,
    echo_findings,
    echo_json,
    exits,
    hold_until_exit,
    load_valid,
    option,
    recipes_dir,
    report_base,
)
from matrixgen.cli.output import (
    StreamError,
    check_working_directory,
    describe_os_error,
    guarded_output,
    write_annotations,
)
from matrixgen.model.errors import ExitCode, MatrixgenError, Severity, annotation_lines
from matrixgen.model.vocab import OutputFormat
from matrixgen.util.values import json_value
from matrixgen.views.table import each_shown, table_of_columns

if TYPE_CHECKING:
    from collections.abc import Callable

    from matrixgen.model.jobs import Selector, Target
    from matrixgen.pipeline import Generation


#: Old spellings of options: each still read as the option it names, by every
#: command that has that option, and named nowhere (help, errors, completion
#: name the option's own spelling). `--out`: the output folder's name before it
#: was `--output-dir`, beside the output file's `--output`.
OLD_SPELLINGS = {"--out": "--output-dir"}


class _Plain:
    """Help as the ecosystem writes it: every command's first sentence in full in
    a command list, usage lines without typer's braces (`diff [OPTIONS] BASE [HEAD]`).

    An option that takes one value, given twice, is a usage error (exit 2) as the
    command line is parsed: click would keep the last silently (`--test-case A
    --test-case B` would quarantine B alone). The parser also reads each old
    spelling (OLD_SPELLINGS) as the option it names."""

    def get_short_help_str(self, limit: int = 45) -> str:
        return super().get_short_help_str(limit=1_000_000)  # type: ignore[misc]

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)  # type: ignore[misc]
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]

    def make_parser(self, ctx: Any) -> Any:
        parser = super().make_parser(ctx)  # type: ignore[misc]
        # click has no spelling of an option that help and errors leave out: the
        # parser's table of long options gets the old one as another key
        # (tests/test_cli_spellings.py fails should that table change).
        for old, now in OLD_SPELLINGS.items():
            if now in parser._long_opt and old not in parser._long_opt:
                parser._long_opt[old] = parser._long_opt[now]
        parse = parser.parse_args

        def parse_args(args: list[str]) -> Any:
            opts, rest, order = parse(args)
            twice = []
            for p in dict.fromkeys(order):
                if p.param_type_name != "option" or not p.expose_value or p.multiple or p.count:
                    continue
                if (times := order.count(p)) > 1:
                    names = "/".join([*p.opts, *p.secondary_opts])
                    what = "a flag" if p.is_flag else "it takes one value"
                    twice.append(f"option {names} is given {times} times: give it once ({what})")
            if twice:
                ctx.fail("; ".join(twice))
            return opts, rest, order

        parser.parse_args = parse_args
        return parser


class Command(_Plain, TyperCommand):
    pass


class Group(_Plain, TyperGroup):
    pass


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"matrixgen {__version__}")
        raise typer.Exit(ExitCode.OK)


class ValidateFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    SARIF = "sarif"


@exits(
    (ExitCode.OK, "clean"),
    (ExitCode.FINDINGS, "problems found (errors, or warnings with --strict)"),
    ExitCode.USAGE,
    ExitCode.CONFIG,
)
def validate(
    recipes: RecipesOption = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings count as problems.")] = False,
    fmt: Annotated[
        ValidateFormat,
        typer.Option(
            "--format",
            help="text: one line per problem on stderr; json: the findings and counts on "
            "stdout; sarif: SARIF 2.1.0 on stdout, for GitHub code scanning.",
        ),
    ] = ValidateFormat.TEXT,
) -> None:
    """Check a recipe tree: YAML, schema, vocabulary, templates, builds, duplicates.

    Prints every problem as file:line:column (--format json or sarif: on stdout,
    the summary line still on stderr).
    """
    from matrixgen.pipeline import generate
    from matrixgen.validate import validate as run_checks

    directory = recipes_dir(recipes)
    generation = generate(directory)
    settings = generation.tree.config.references
    listing = None
    if settings is not None:  # the declared reference files, listed once
        from matrixgen.views.references import read_listing

        listing = read_listing(directory, settings)
    findings = run_checks(generation.tree, generation.expansion, references=listing)
    errors = sum(f.severity is Severity.ERROR for f in findings)
    warnings = len(findings) - errors
    files = len(generation.tree.files)
    if fmt is ValidateFormat.TEXT:
        echo_findings(findings)
    elif fmt is ValidateFormat.JSON:
        echo_json(
            {
                "findings": [
                    {
                        **json_value(f.location),  # file, line, column
                        "severity": f.severity.value,
                        "code": f.code,
                        "message": f.message,
                    }
                    for f in findings
                ],
                "files": files,
                "jobs": len(generation.jobs),
                "errors": errors,
                "warnings": warnings,
            }
        )
    else:
        from matrixgen.views.sarif import render_sarif

        typer.echo(render_sarif(findings, version=__version__, base=report_base()), nl=False)
    typer.echo(
        f"{files} recipe file(s), {len(generation.jobs)} job(s): "
        f"{errors} error(s), {warnings} warning(s)",
        err=True,
    )
    if errors or (strict and warnings):
        raise typer.Exit(ExitCode.FINDINGS)


@exits(
    (ExitCode.OK, "listed (also when nothing matches)"),
    ExitCode.FINDINGS,
    ExitCode.USAGE,
    ExitCode.CONFIG,
)
def list_jobs(
    recipes: RecipesOption = None,
    target: TargetOption = None,
    scope: Annotated[
        str | None, option("SCOPE", "Only this scope or tier (legacy names resolve).")
    ] = None,
    cadence: Annotated[
        str | None, option("CADENCE", "Only this cadence: pr, nightly, mergegroup, weekly.")
    ] = None,
    environment: Annotated[
        str | None, option("ENV", "Only this environment (dev, lts, ...).")
    ] = None,
    platform: Annotated[
        str | None, option("PLATFORM", "Only this platform (dgx_h100, ...).")
    ] = None,
    model: Annotated[str | None, option("MODEL", "Only this model.")] = None,
    tag: Annotated[str | None, option("TAG", "Only this tag.")] = None,
    test_case: Annotated[
        list[str] | None, option("NAME", "Test case name; repeat or separate with commas.")
    ] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="table, json or yaml.")] = (
        OutputFormat.TABLE
    ),
    with_quarantined: Annotated[
        bool,
        typer.Option(
            "--with-quarantined", help="Include the jobs quarantine skips (marked as skipped)."
        ),
    ] = False,
    changed_since: ChangedSinceOption = None,
    full: FullOption = False,
) -> None:
    """List the jobs a selection gets, after quarantine.

    A quarantined job carries its entry (id, tracker, action, kind); jobs an entry
    skips are left out unless --with-quarantined. With --scope, entries apply as in
    the target of that scope's system; without, each job as in its own scope's.
    With --target, the jobs of those targets, exactly as `generate` emits them
    (--model, --tag and --test-case narrow them further; the row says its target).
    """
    from matrixgen.model.errors import UsageError
    from matrixgen.model.jobs import Selector

    cases = tuple(c for given in test_case or () for c in given.split(",") if c)
    fixed = {"scope": scope, "cadence": cadence, "environment": environment, "platform": platform}
    given = [f"--{name}" for name, value in fixed.items() if value is not None]
    if target and given:
        raise UsageError(
            f"give --target or {'/'.join(given)}, not both: a target fixes its scope, "
            "cadence, environment and platform"
        )
    selector = Selector(
        scope=scope,
        cadence=cadence,
        environment=environment,
        platform=platform,
        model=model,
        tag=tag,
        test_cases=cases,
    )
    from matrixgen.engine.select import check_selector, check_selector_values

    check_selector(selector)
    generation = load_valid(recipes)
    check_selector_values(selector, generation.tree.config, generation.jobs)
    generation, _ = change_selection(generation, recipes_dir(recipes), changed_since, full)
    if target:
        targets = generation.targets(target)
        check_ad_hoc(generation, targets)
        jobs, owners, skipped_count = _target_jobs(generation, targets, selector, with_quarantined)
    else:
        chosen = generation.selection(selector)
        jobs = chosen.with_quarantined if with_quarantined else list(chosen.jobs)
        owners, skipped_count = None, len(chosen.skipped)
    _echo_jobs(jobs, owners, skipped_count, fmt)


def _target_jobs(
    generation: Generation, targets: list[Target], selector: Selector, with_quarantined: bool
) -> tuple[list[Any], list[str], int]:
    """The jobs of the targets that match, the target of each, and how many
    quarantine skips."""
    from matrixgen.engine.select import matches

    jobs: list[Any] = []
    owners: list[str] = []
    skipped_count = 0
    for chosen_target in targets:
        chosen = generation.selection(chosen_target)
        picked = [
            j
            for j in (chosen.with_quarantined if with_quarantined else chosen.jobs)
            if matches(j, selector)
        ]
        skipped_count += sum(matches(j, selector) for j in chosen.skipped)
        jobs += picked
        owners += [chosen_target.name] * len(picked)
    return jobs, owners, skipped_count


def _echo_jobs(
    jobs: list[Any], owners: list[str] | None, skipped_count: int, fmt: OutputFormat
) -> None:
    """With `owners` (--target), each job's target first."""
    if fmt is OutputFormat.TABLE:
        headers, columns = _job_columns(jobs)
        if owners is not None:
            headers.insert(0, "target")
            columns.insert(0, owners)
        typer.echo(table_of_columns(columns, headers) if jobs else "no job matches\n", nl=False)
        skipped = f", {skipped_count} skipped by quarantine" if skipped_count else ""
        typer.echo(f"{len(jobs)} job(s){skipped}", err=True)
    elif owners is not None:
        data = [{"target": n, **json_value(j)} for n, j in zip(owners, jobs, strict=True)]
        typer.echo(dump(data, fmt), nl=False)
    else:
        typer.echo(dump([json_value(j) for j in jobs], fmt), nl=False)


def _job_columns(jobs: list[Any]) -> tuple[list[str], list[Any]]:
    """The headers and columns of `list`'s table: one field of the jobs per
    column, each distinct value spelled once (many jobs share each)."""
    from operator import attrgetter

    # How a field is shown where not as it is.
    show: dict[str, Callable[[Any], str]] = dict.fromkeys(("tag", "shown_scope"), lambda v: v or "")
    show |= {"cadence": ",".join, "n_repeat": str, "time_limit": str}
    fields = ("model", "test_case", "tag", "environment", "platform", "shown_scope")
    fields += ("cadence", "n_repeat", "time_limit", "quarantine")
    # One pass over the jobs reads every field (each job is visited once: the
    # jobs of a big tree do not fit in a cache), then the columns are the fields.
    values: list[Any] = list(zip(*map(attrgetter(*fields), jobs), strict=True)) or [
        () for _ in fields
    ]
    *values, marks = values
    headers = [f.removeprefix("shown_") for f in fields[:-1]]
    shown = zip(fields[:-1], values, strict=True)
    columns = [each_shown(v, show[f]) if f in show else v for f, v in shown]
    if any(marks):
        headers.append("quarantine")
        columns.append([f"{q.action} {q.id} ({q.tracker})" if q else "" for q in marks])
    return headers, columns


def build_app(names: tuple[str, ...] | None = None, only: str | None = None) -> typer.Typer:
    """The app with the given top-level commands, groups and aliases of the
    registry (default: all of them), in the registry's order; of a group, only
    the command `only` when given."""
    app = typer.Typer(
        cls=Group,
        name="matrixgen",
        add_completion=True,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    # The root's own options (--version); with one command typer would also make
    # that command the root without a callback: this keeps `matrixgen CMD`.
    app.callback()(_root)
    for name in names or registry.top_level_names():
        _add(app, name, only)
    return app


def _add(app: typer.Typer, name: str, only: str | None) -> None:
    found = registry.entry(name)
    if isinstance(found, registry.Command):
        _command(app, found, found.name)
    elif isinstance(found, registry.Alias):
        _command(app, registry.aliased(found), found.name, hidden=True)
    elif isinstance(found, registry.Group):
        group = typer.Typer(
            cls=Group,
            name=found.name,
            help=found.summary(),
            no_args_is_help=True,
            add_completion=False,
            rich_markup_mode=None,
        )
        for command in found.commands:
            if only is None or command.name == only:
                _command(group, command, command.name)
        app.add_typer(group, name=found.name)
    else:
        raise KeyError(name)


def _command(app: typer.Typer, command: registry.Command, name: str, hidden: bool = False) -> None:
    import importlib

    module = importlib.import_module(command.module)
    function = getattr(module, command.function)
    help_text = getattr(module, command.help_attr) if command.help_attr else None
    app.command(name, cls=Command, help=help_text, hidden=hidden)(function)


def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_show_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Declarative YAML test recipes -> GitHub Actions matrices and GitLab child pipelines."""


def app_for(argv: list[str]) -> typer.Typer:
    """The app of the command (or group's command) a command line names, alone:
    building the others would cost about a tenth of a short run. Anything else
    (--help, a mistyped command) gets the whole app."""
    found = registry.entry(argv[0]) if argv else None
    if found is None:
        return build_app()
    only = None
    if isinstance(found, registry.Group) and len(argv) > 1 and found.command(argv[1]):
        only = argv[1]
    return build_app((found.name,), only)


def main(argv: list[str] | None = None) -> int:
    """Run the app with standard output and error guarded (see cli.output); every
    user error and fault of the machine is one message and an exit code."""
    with guarded_output() as (out, _):
        code = _run(argv)
        try:
            out.finish()
            out.flush()
        except StreamError as exc:
            code = _say(f"matrixgen: {exc}", ExitCode.ENVIRONMENT)
    return code


def _run(argv: list[str] | None) -> int:
    from typer.exceptions import TyperException

    args = sys.argv[1:] if argv is None else list(argv)
    try:
        check_working_directory()
        # Without standalone mode click returns the code of a typer.Exit.
        code = app_for(args)(args=args, prog_name="matrixgen", standalone_mode=False)
    except StreamError as exc:
        return _say(f"matrixgen: {exc}", ExitCode.ENVIRONMENT)
    except MatrixgenError as exc:
        typer.echo(f"matrixgen: {exc}" if not exc.findings else str(exc), err=True)
        write_annotations(annotation_lines(exc.findings))
        return int(exc.exit_code)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        return _say("matrixgen: aborted", 130)
    except TyperException as exc:  # usage errors: bad option, missing argument, ...
        exc.show()  # type: ignore[attr-defined]
        return int(getattr(exc, "exit_code", ExitCode.USAGE))
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        # The machine failed us (a read-only or full disk, a file gone under us):
        # one line, never a traceback.
        return _say(f"matrixgen: {describe_os_error(exc)}", ExitCode.ENVIRONMENT)
    return code if isinstance(code, int) else 0


def _say(line: str, code: int) -> int:
    """The line on standard error (which never raises: should the line be lost,
    the exit code still tells), and the code."""
    typer.echo(line, err=True)
    return int(code)


def console() -> None:
    """The console script: `main`, then exit without tearing down the objects the
    run built (see common.held). Should flushing the output fail, the interpreter
    exits the usual way and reports it."""
    hold_until_exit()
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    console()
