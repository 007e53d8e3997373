"""Every way matrixgen can fail, with one documented exit code per kind.

The CLI catches `MatrixgenError` and prints `str(error)`; a user's mistake never
reaches the user as a traceback. Findings (problems located in a file) are
collected, not raised one by one, so a run reports all of them at once.
"""

from __future__ import annotations

import difflib
import errno
import os
from collections.abc import Iterable, Sequence
from enum import IntEnum, StrEnum
from typing import Any, ClassVar

from msgspec import Struct, field

from matrixgen.systems import step_output_option
from matrixgen.systems.ci import ci_value, running
from matrixgen.util.escape import annotation, terminal_lines, terminal_text
from matrixgen.util.values import JsonLayout


class ExitCode(IntEnum):
    """Process exit codes, one per kind of failure. Never renumber. `meaning`
    writes docs/exit-codes.md; `short` is how a command's help says it."""

    short: str
    meaning: str

    def __new__(cls, value: int, short: str, meaning: str) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.short = short
        member.meaning = meaning
        return member

    OK = (0, "done", "success")
    FINDINGS = (
        1,
        "the tree has errors (see validate)",
        "problems found in the recipes or the quarantine entries (errors; warnings too with "
        "`--strict`); pins or graph do not hold",
    )
    USAGE = (
        2,
        "usage error",
        "usage error: unknown option or value, an option that takes one value given twice (also a "
        "scope, platform, environment, model, tag or test case that no job of a tree without "
        "vocabulary uses), bad `--target` or `--expect` (also one naming a system, scope or "
        "platform no target has), missing directory, `migrate --write` that Megatron-LM's parser "
        "would undo without `--for-matrixgen-pipelines`",
    )
    CONFIG = (
        3,
        "bad project config",
        "the project config (`matrixgen.yaml`) is invalid, or is not a regular file",
    )
    LIMIT = (
        4,
        "a CI limit cannot be met",
        "a CI system limit would be broken (matrix output size, GitLab job name length or "
        "collision, child pipeline size)",
    )
    GIT = (
        5,
        "git problem (unknown revision, not a repository)",
        "git: unknown revision, not a repository",
    )
    EXPECTATION = (
        6,
        "an expectation failed",
        "`diff --expect` rules did not hold; `triage`: a failure is new",
    )
    QUARANTINE = (
        7,
        "the quarantine file cannot be read, locked or written",
        "the quarantine file cannot be read (a directory, FIFO, device, or a link out of the tree:"
        " every command stops), locked (another edit held it past `MATRIXGEN_LOCK_TIMEOUT`; the "
        "message names it) or written (it is never overwritten when malformed)",
    )
    TRACKER = (
        8,
        "the tracker API answered with an error",
        "the tracker API answered with an error (`audit` first prints what it found)",
    )
    ENVIRONMENT = (
        9,
        "the output cannot be written (a full or read-only disk)",
        "the machine, not the input: standard output or error closed, broken or full, the working "
        "directory deleted, an output location read-only, full or not permitted",
    )
    RESULTS_FILE = (
        10,
        "a JUnit file is missing or malformed (nothing is stored)",
        "a JUnit XML file is missing, unreadable or not a report (`file:line:column`; nothing is "
        "stored); also one past a bound: over 256 MiB, a duration over a year, a suite end outside"
        " the years 1 to 9999, an encoding the parser cannot read",
    )
    RESULTS_STORE = (
        11,
        "the results store cannot be opened, read or written",
        "the results store cannot be opened, read or written (none at the path, a newer schema, "
        "the server refused); also a file that is not a store, one holding a view or trigger, a "
        "transaction past `MATRIXGEN_STORE_TIMEOUT`, or (for `flaky`, `propose`, `ingest`) a "
        "default store that git tracks; a PostgreSQL URL when the `postgres` extra (its driver) is"
        " not installed",
    )
    OUTPUT = (
        12,
        "the output is a symbolic link or special file (refused, never written through)",
        f"an output refused as unsafe: the file (`--output`, `{step_output_option()}`, a file in "
        "`--output-dir`) or the `--output-dir` folder is a symbolic link or a special file, or "
        "another `generate` held the folder's lock past `MATRIXGEN_LOCK_TIMEOUT` (the message "
        "names it)",
    )


def exit_codes(*codes: ExitCode | tuple[ExitCode, str]) -> str:
    """`Exit 1: ...; 2: usage error.`: each in the command's words where given, else `short`."""
    said = [c if isinstance(c, tuple) else (c, c.short) for c in codes]
    return "Exit " + "; ".join(f"{int(code)}: {text}" for code, text in said) + "."


class Severity(StrEnum):
    """A finding's severity: its value is the level SARIF and GitHub annotations name."""

    ERROR = "error"
    WARNING = "warning"


class Location(Struct, frozen=True, order=True):
    """A place in a file: 1-based line and column; 0 means unknown."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.column}"
        return self.file


class Finding(Struct, frozen=True, kw_only=True):
    """One problem, located: rendered as `file:line:column: severity: message`."""

    location: Location
    severity: Severity
    code: str
    message: str

    # Its JSON (the diff's findings, a golden file's problems): the place as text.
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            ("code", "code"),
            ("severity", "severity"),
            ("location", "where"),
            ("message", "message"),
        )
    )

    def __str__(self) -> str:
        # One line whatever the file name and message hold (they come from the tree).
        return (
            f"{terminal_text(str(self.location))}: {self.severity}: "
            f"{terminal_text(self.message)} [{self.code}]"
        )

    def github_annotation(self) -> str:
        """The message as the log line shows it, escaped as GitHub's runner unescapes it."""
        loc = self.location
        return annotation(
            self.severity.value,
            terminal_text(self.message),
            file=_workspace_path(loc.file),
            line=loc.line,
            column=loc.column,
        )

    @property
    def where(self) -> str:
        return str(self.location)

    def sort_key(self) -> tuple:
        # Severity last, and never left out: findings are de-duplicated through a
        # set, so any tie the key leaves would come out in hash order.
        return (self.location, self.code, self.message, self.severity)


def finding(
    location: Location, code: str, message: str, severity: Severity = Severity.ERROR
) -> Finding:
    return Finding(location=location, severity=severity, code=code, message=message)


def _workspace_path(file: str) -> str:
    """An annotation is placed on a file only by its path from the top of the
    checkout (the running CI's workspace): not absolute, not `./`-prefixed."""
    workspace = ci_value("workspace")
    path = os.path.abspath(file)
    if workspace:
        top = os.path.abspath(workspace)
        if os.path.commonpath([path, top]) == top:
            return os.path.relpath(path, top)
    return os.path.normpath(file)


class Findings(Struct):
    """An ordered, de-duplicated collection of findings."""

    items: list[Finding] = field(default_factory=list)

    def add(
        self, location: Location, code: str, message: str, severity: Severity = Severity.ERROR
    ) -> None:
        self.items.append(finding(location, code, message, severity))

    def extend(self, other: Iterable[Finding]) -> None:
        self.items.extend(other)

    def sorted(self) -> list[Finding]:
        return sorted(set(self.items), key=Finding.sort_key)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.sorted() if f.severity is Severity.ERROR]

    def __len__(self) -> int:
        return len(self.items)


# "Did you mean" is for names mistyped: a longer value gets no suggestion, so that
# a value of tens of kilobytes costs no more than reading it.
SUGGEST_MAX_LENGTH = 64


class FileFindings:
    """Findings in one recipe file: `note` is what Megatron-LM tolerates (a
    warning in v1, an error in v2)."""

    def __init__(self, recipe: Any, findings: Findings) -> None:
        self.recipe = recipe
        self.doc = recipe.document
        self.findings = findings
        self.v2 = recipe.format_version == 2
        self.lenient = Severity.ERROR if self.v2 else Severity.WARNING

    def at(self, *keys: str | int, key: bool = False) -> Location:
        return self.doc.locate(list(keys), key=key)

    def error(self, where: Location, code: str, message: str) -> None:
        self.findings.add(where, code, message, Severity.ERROR)

    def note(self, where: Location, code: str, message: str) -> None:
        self.findings.add(where, code, message, self.lenient)


def did_you_mean(value: object, known: Iterable[str]) -> str:
    """' (did you mean "x"?)' for the closest known value, or ''."""
    if not isinstance(value, str) or len(value) > SUGGEST_MAX_LENGTH:
        return ""
    candidates = sorted({k for k in known if isinstance(k, str)})
    # Case says little about intent ("H100" for "dgx_h100"); the first sorted wins a tie.
    lowered = {c.lower(): c for c in reversed(candidates)}
    squashed = "".join(value.split()).lower()
    if squashed in lowered:
        return f' (did you mean "{lowered[squashed]}"?)'
    close = difflib.get_close_matches(value.lower(), list(lowered), n=1, cutoff=0.6)
    return f' (did you mean "{lowered[close[0]]}"?)' if close else ""


def render_findings(findings: Sequence[Finding]) -> str:
    """One line per finding (annotations are printed apart: only they are commands)."""
    return "\n".join(str(f) for f in findings)


def annotation_lines(findings: Sequence[Finding]) -> list[str]:
    """The annotations of findings, inside a CI that reads them (`Home.annotates`)."""
    home = running()
    if home is None or not home.annotates:
        return []
    return [f.github_annotation() for f in findings]


class MatrixgenError(Exception):
    """Base of every error a user can cause; carries its exit code."""

    exit_code: ExitCode = ExitCode.FINDINGS

    def __init__(
        self, message: str, *, findings: Sequence[Finding] = (), details: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.message = message
        self.findings = list(findings)
        self.details = list(details)

    def text(self) -> str:
        """One line (line breaks in values shown escaped), then one line per detail."""
        lines = [terminal_text(self.message)] + [terminal_text(d) for d in self.details]
        return terminal_lines("\n  ".join(lines))

    def __str__(self) -> str:
        if not self.findings:
            return self.text()
        return render_findings(self.findings) + "\n" + self.text()


class RecipeError(MatrixgenError):
    """Recipe files could not be read or are invalid (exit_code FINDINGS, the base's)."""


class UsageError(MatrixgenError):
    exit_code = ExitCode.USAGE


class ConfigError(MatrixgenError):
    exit_code = ExitCode.CONFIG


class LimitError(MatrixgenError):
    exit_code = ExitCode.LIMIT


class GitError(MatrixgenError):
    exit_code = ExitCode.GIT


class ExpectationError(MatrixgenError):
    exit_code = ExitCode.EXPECTATION


class QuarantineError(MatrixgenError):
    exit_code = ExitCode.QUARANTINE


class TrackerError(MatrixgenError):
    exit_code = ExitCode.TRACKER


class EnvironmentFault(MatrixgenError):
    exit_code = ExitCode.ENVIRONMENT


# What the machine does to a write, whatever path was asked for.
_MACHINE_ERRNOS = frozenset(
    {"EROFS", "ENOSPC", "EDQUOT", "EACCES", "EPERM", "EIO", "EFBIG", "EMFILE", "ENFILE", "ENOMEM"}
)


def file_error(message: str, exc: OSError) -> MatrixgenError:
    """Exit 9 when the machine refused (read-only, full), else 2 (the path is wrong)."""
    return write_failure(f"{message}: {exc.strerror or exc}", exc.errno or 0)


class ResultsFileError(MatrixgenError):
    exit_code = ExitCode.RESULTS_FILE


class ResultsStoreError(MatrixgenError):
    exit_code = ExitCode.RESULTS_STORE


class OutputError(MatrixgenError):
    exit_code = ExitCode.OUTPUT


def write_failure(message: str, errno_number: int | None) -> MatrixgenError:
    """Exit 12 when matrixgen refused the write (no errno), else as `file_error`."""
    if errno_number is None:
        return OutputError(message)
    name = errno.errorcode.get(errno_number, "")
    return (EnvironmentFault if name in _MACHINE_ERRNOS else UsageError)(message)
