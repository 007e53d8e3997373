"""The `matrixgen` command line: a thin layer over the library.

Every command parses its options, calls the pipeline, and prints. Errors a user
can cause are `MatrixgenError`s: printed as one clear message (with located
findings), and the process exits with the error's documented code.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer

from matrixgen.cli.changes import ChangedSinceOption, FullOption, change_selection
from matrixgen.cli.common import RecipesOption, dump, echo_findings, load_valid, recipes_dir
from matrixgen.cli.output import (
    StreamError,
    check_working_directory,
    describe_os_error,
    guarded_output,
    write_annotations,
)
from matrixgen.engine.errors import ExitCode, MatrixgenError, Severity, annotation_lines
from matrixgen.engine.vocab import OutputFormat
from matrixgen.views.table import table

APP_SETTINGS: dict[str, Any] = {
    "name": "matrixgen",
    "help": "Declarative YAML test recipes -> GitHub Actions matrices and GitLab child pipelines.",
    "add_completion": False,
    "no_args_is_help": True,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": None,
}

# The module that registers each command (its `register(app)`). A command line
# that names one gets an app of that module's commands only: neither the other
# command modules nor their click commands are built (about a tenth of a short
# run). Anything else (--help, a mistyped command) gets the whole app.
COMMAND_MODULES = {
    "validate": __name__,
    "list": __name__,
    "github": "matrixgen.cli.emit",
    "gitlab": "matrixgen.cli.emit",
    "generate": "matrixgen.cli.emit",
    "migrate": "matrixgen.cli.quarantine",
    "quarantine": "matrixgen.cli.quarantine",
    "diff": "matrixgen.cli.diff",
    "pins": "matrixgen.cli.project",
    "graph": "matrixgen.cli.project",
    "stats": "matrixgen.cli.project",
    "coverage": "matrixgen.cli.coverage",
    "decide": "matrixgen.cli.decide",
    "results": "matrixgen.cli.evidence",
    "flaky": "matrixgen.cli.evidence",
}


def validate(
    recipes: RecipesOption = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings count as problems.")] = False,
) -> None:
    """Check a recipe tree: YAML, schema, vocabulary, templates, builds, duplicates.

    Prints every problem as file:line:column. Exit 0: clean; 1: problems found
    (errors, or warnings with --strict); 2: usage error; 3: bad project config.
    """
    from matrixgen.pipeline import generate
    from matrixgen.validate import validate as run_checks

    directory = recipes_dir(recipes)
    generation = generate(directory)
    settings = generation.tree.config.references
    listing = None
    if settings is not None:  # the declared reference files, listed once
        from matrixgen.views.coverage import read_listing

        listing = read_listing(directory, settings)
    findings = run_checks(generation.tree, generation.expansion, references=listing)
    echo_findings(findings)
    errors = sum(f.severity is Severity.ERROR for f in findings)
    warnings = len(findings) - errors
    files = len(generation.tree.files)
    typer.echo(
        f"{files} recipe file(s), {len(generation.jobs)} job(s): "
        f"{errors} error(s), {warnings} warning(s)",
        err=True,
    )
    if errors or (strict and warnings):
        raise typer.Exit(ExitCode.FINDINGS)


def list_jobs(
    recipes: RecipesOption = None,
    scope: Annotated[str | None, typer.Option(help="Scope or tier (legacy names resolve).")] = None,
    cadence: Annotated[str | None, typer.Option(help="pr, nightly, mergegroup or weekly.")] = None,
    environment: Annotated[str | None, typer.Option()] = None,
    platform: Annotated[str | None, typer.Option()] = None,
    model: Annotated[str | None, typer.Option()] = None,
    tag: Annotated[str | None, typer.Option()] = None,
    test_case: Annotated[
        list[str] | None,
        typer.Option("--test-case", help="Test case name; repeat or separate with commas."),
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
    """
    from matrixgen.engine.model import Selector

    cases = tuple(c for given in test_case or () for c in given.split(",") if c)
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
    for warning in check_selector_values(selector, generation.tree.config, generation.jobs):
        typer.echo(f"matrixgen: warning: {warning}", err=True)
    generation, _ = change_selection(generation, recipes_dir(recipes), changed_since, full)
    chosen = generation.selection(selector)
    jobs = chosen.with_quarantined if with_quarantined else list(chosen.jobs)
    if fmt is OutputFormat.TABLE:
        rows = [
            [
                j.model,
                j.test_case,
                j.tag or "",
                j.environment,
                j.platform,
                j.shown_scope or "",
                ",".join(j.cadence),
                str(j.n_repeat),
                str(j.time_limit),
            ]
            for j in jobs
        ]
        headers = [
            "model",
            "test_case",
            "tag",
            "environment",
            "platform",
            "scope",
            "cadence",
            "n_repeat",
            "time_limit",
        ]
        if any(j.quarantine for j in jobs):
            headers.append("quarantine")
            for row, j in zip(rows, jobs, strict=True):
                q = j.quarantine
                row.append(f"{q.action} {q.id} ({q.tracker})" if q else "")
        typer.echo(table(rows, headers), nl=False)
        skipped = f", {len(chosen.skipped)} skipped by quarantine" if chosen.skipped else ""
        typer.echo(f"{len(jobs)} job(s){skipped}", err=True)
    else:
        typer.echo(dump([j.to_dict() for j in jobs], fmt), nl=False)


def register(app: typer.Typer) -> None:
    app.command()(validate)
    app.command("list")(list_jobs)


def build_app(modules: tuple[str, ...] | None = None) -> typer.Typer:
    """The app with the commands of the given modules (default: every command)."""
    import importlib

    app = typer.Typer(**APP_SETTINGS)
    if modules is not None and len(modules) == 1:
        # With one command typer would make it the root; keep `matrixgen CMD`.
        app.callback()(_root)
    for module in modules or tuple(dict.fromkeys(COMMAND_MODULES.values())):
        if module == __name__:
            register(app)
        else:
            importlib.import_module(module).register(app)
    return app


def _root() -> None:
    """Declarative YAML test recipes -> GitHub Actions matrices and GitLab child pipelines."""


def app_for(argv: list[str]) -> typer.Typer:
    """The app that runs a command line: only its command's module when it names one."""
    if argv and argv[0] in COMMAND_MODULES:
        return build_app((COMMAND_MODULES[argv[0]],))
    return build_app()


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole app, for tools that want it (built on first use)
        return build_app()
    raise AttributeError(name)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turn every user error into a message and an exit code.

    Standard output and error are guarded for the run (see cli.output): no printed
    line carries a workflow command, and a stream that cannot be written ends the
    run with one line and exit 9, as do the other faults of the machine."""
    with guarded_output() as (out, _):
        code = _run(argv)
        try:
            out.finish()
            out.flush()
        except StreamError as exc:
            code = _stream_failed(exc)
    return code


def _run(argv: list[str] | None) -> int:
    from typer.exceptions import TyperException

    args = sys.argv[1:] if argv is None else list(argv)
    try:
        check_working_directory()
        # Without standalone mode click returns the code of a typer.Exit.
        code = app_for(args)(args=args, prog_name="matrixgen", standalone_mode=False)
    except StreamError as exc:
        return _stream_failed(exc)
    except MatrixgenError as exc:
        try:
            typer.echo(f"matrixgen: {exc}" if not exc.findings else str(exc), err=True)
            write_annotations(annotation_lines(exc.findings))
        except StreamError:
            pass  # standard error is gone too: the exit code is all that is left
        return int(exc.exit_code)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        typer.echo("matrixgen: aborted", err=True)
        return 130
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


def _stream_failed(exc: StreamError) -> int:
    if exc.name == "output":
        return _say(f"matrixgen: {exc}", ExitCode.ENVIRONMENT)
    return int(ExitCode.ENVIRONMENT)


def _say(line: str, code: int) -> int:
    try:
        typer.echo(line, err=True)
        sys.stderr.flush()
    except StreamError:
        pass
    return int(code)


def console() -> None:
    """The console script: `main`, then exit without tearing down the objects
    the run built (freeing a big tree's millions of objects one by one takes as
    long as a tenth of the run; the OS takes the memory back at once). Output is
    flushed first; should that fail, the interpreter exits the usual way and
    reports it. Tests call `main` in-process, never this."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    console()
