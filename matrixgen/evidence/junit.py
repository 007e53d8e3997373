"""JUnit XML test reports, read into plain values.

Read: pytest's `--junitxml` (both junit families), and the shapes GitLab's and
GitHub's test reporters read: a `<testsuites>` or `<testsuite>` root, suites
nested in suites, `<failure>`, `<error>` and `<skipped>` children, `file` and
`line` attributes.

Reruns come in two shapes, and both count:
- pytest-rerunfailures (16.6.1 and later) writes one `<testcase>` record per
  attempt: every record of a test but its last is an attempt that failed (a
  test is only run again after a failure), even when the record is empty;
- `<rerunFailure>`, `<rerunError>`, `<flakyFailure>` and `<flakyError>`
  children (Maven Surefire's convention, which GitHub reporters also read):
  one failed attempt each.
A test's outcome is its last attempt's; `reruns` counts the failed attempts
before it.

Hostile input: a DOCTYPE (and so any entity declaration) is refused; the file
is streamed through expat, so cost is linear in its size. Every problem is a
`ResultsFileError` naming the file, line and column.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from enum import StrEnum
from functools import lru_cache
from pathlib import Path

from msgspec import Struct

from matrixgen.engine.errors import ResultsFileError
from matrixgen.util.patterns import name_pattern, whole

MESSAGE_LIMIT = 300  # characters of a failure message kept


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"

    @property
    def failed(self) -> bool:
        return self in (Outcome.FAILED, Outcome.ERROR)


class Testcase(Struct, frozen=True, kw_only=True):
    """One test's result in one report, its reruns folded in."""

    node_id: str  # pytest's node id when the record says enough, else classname::name
    classname: str
    name: str
    suite: str  # the innermost testsuite's name ("" for none)
    outcome: Outcome
    duration: float | None
    reruns: int = 0
    message: str = ""  # the failure's or error's message, cut to MESSAGE_LIMIT
    line: int = 0  # where the (last) record starts in the file


class Report(Struct, frozen=True, kw_only=True):
    path: str
    testcases: tuple[Testcase, ...]
    finished_at: dt.datetime | None  # latest suite timestamp + time, UTC, when given


_FAILURE_TAGS = {"failure": Outcome.FAILED, "error": Outcome.ERROR}
_RERUN_TAGS = frozenset({"rerunFailure", "rerunError", "flakyFailure", "flakyError"})
_ROOTS = ("testsuites", "testsuite")
_PYTHON_FILE = name_pattern(r"test_.*|.*_test")


class _DoctypeRefused(Exception):
    pass


class _Record(Struct):
    classname: str
    name: str
    file: str
    suite: str
    duration: float | None
    line: int
    column: int
    outcome: Outcome = Outcome.PASSED
    reruns: int = 0
    message: str = ""


def parse_report(data: bytes, path: str) -> Report:
    """Parse one JUnit XML document (bytes), `path` naming it in errors."""
    from xml.parsers import expat

    parser = expat.ParserCreate()
    stack: list[str] = []
    suites: list[str] = []
    records: list[_Record] = []
    current: list[_Record | None] = [None]
    finished: list[dt.datetime] = []

    def where() -> str:
        return f"{path}:{parser.CurrentLineNumber}:{parser.CurrentColumnNumber + 1}"

    def refuse_doctype(*_args: object) -> None:
        raise _DoctypeRefused

    def start(tag: str, attrs: dict[str, str]) -> None:
        if not stack and tag not in _ROOTS:
            raise ResultsFileError(
                f"{where()}: not a JUnit XML report: the root element is <{tag}>, "
                "expected <testsuites> or <testsuite>"
            )
        stack.append(tag)
        if tag == "testsuite":
            suites.append(attrs.get("name", ""))
            stamp = _suite_end(attrs)
            if stamp is not None:
                finished.append(stamp)
        elif tag == "testcase":
            if current[0] is not None:
                raise ResultsFileError(f"{where()}: <testcase> inside <testcase>")
            name = attrs.get("name", "").strip()
            if not name:
                raise ResultsFileError(f"{where()}: <testcase> without a name attribute")
            current[0] = _Record(
                classname=attrs.get("classname", "").strip(),
                name=name,
                file=attrs.get("file", "").strip(),
                suite=suites[-1] if suites else "",
                duration=_seconds(attrs.get("time")),
                line=parser.CurrentLineNumber,
                column=parser.CurrentColumnNumber + 1,
            )
        elif current[0] is not None and stack[-2] == "testcase":
            record = current[0]
            if tag in _FAILURE_TAGS:
                outcome = _FAILURE_TAGS[tag]
                # An error beside a failure (a teardown error after a failed call)
                # keeps the failure: the test itself failed.
                if not record.outcome.failed:
                    record.outcome = outcome
                    record.message = attrs.get("message", "")[:MESSAGE_LIMIT]
            elif tag == "skipped":
                if record.outcome is Outcome.PASSED:
                    record.outcome = Outcome.SKIPPED
            elif tag in _RERUN_TAGS:
                record.reruns += 1

    def end(tag: str) -> None:
        stack.pop()
        if tag == "testsuite":
            suites.pop()
        elif tag == "testcase":
            record = current[0]
            assert record is not None
            records.append(record)
            current[0] = None

    if not data.strip():
        raise ResultsFileError(f"{path}: the file is empty, expected a JUnit XML report")
    parser.StartDoctypeDeclHandler = refuse_doctype
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise ResultsFileError(
            f"{path}:{exc.lineno}:{exc.offset + 1}: not well-formed XML "
            f"({expat.errors.messages[exc.code] if exc.code else exc})"
        ) from None
    except _DoctypeRefused:
        raise ResultsFileError(
            f"{where()}: a DOCTYPE is not accepted in a JUnit XML report "
            "(it could declare entities)"
        ) from None
    return Report(
        path=path,
        testcases=tuple(_fold(records)),
        finished_at=max(finished) if finished else None,
    )


def _seconds(text: str | None) -> float | None:
    if not text:
        return None
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if value >= 0 and value == value and value != float("inf") else None


def _suite_end(attrs: dict[str, str]) -> dt.datetime | None:
    stamp = attrs.get("timestamp")
    if not stamp:
        return None
    try:
        start = dt.datetime.fromisoformat(stamp.strip())
    except ValueError:
        return None
    if start.tzinfo is None:
        start = start.replace(tzinfo=dt.UTC)
    return (start + dt.timedelta(seconds=_seconds(attrs.get("time")) or 0)).astimezone(dt.UTC)


def _fold(records: list[_Record]) -> Iterator[Testcase]:
    """One Testcase per node id: the last record decides, the ones before are
    failed attempts. Order: where each test's last record stands."""
    last: dict[str, int] = {}
    attempts: dict[str, int] = {}
    ids = [node_id(r.classname, r.name, r.file) for r in records]
    for i, nid in enumerate(ids):
        if nid in last:
            attempts[nid] = attempts.get(nid, 0) + 1
        last[nid] = i
    for i, record in enumerate(records):
        nid = ids[i]
        if last[nid] != i:
            continue
        yield Testcase(
            node_id=nid,
            classname=record.classname,
            name=record.name,
            suite=record.suite,
            outcome=record.outcome,
            duration=record.duration,
            reruns=record.reruns + attempts.get(nid, 0),
            message=record.message,
            line=record.line,
        )


def node_id(classname: str, name: str, file: str = "") -> str:
    """pytest's node id from a record: `tests/x/test_a.py::TestK::test_b[1]`.

    pytest writes the module's dotted path and the classes as `classname`; which
    part is the module is told by the `file` attribute when present (junit
    family xunit1, GitLab and GitHub shapes), else by pytest's default test file
    names (`test_*`, `*_test`). A record that is not pytest's stays
    `classname::name`."""
    prefix = _node_prefix(classname, file)
    return f"{prefix}::{name}" if prefix else name


@lru_cache(maxsize=4096)
def _node_prefix(classname: str, file: str) -> str:
    """The node id up to the test's name (records of one class share it)."""
    parts = [p for p in classname.split(".") if p] if classname else []
    if file:
        path = file.replace("\\", "/").removeprefix("./")
        stem = path.rsplit("/", 1)[-1].removesuffix(".py")
        classes = parts[parts.index(stem) + 1 :] if stem in parts else []
        return "::".join([path, *classes])
    module_end = next(
        (i for i in range(len(parts) - 1, -1, -1) if whole(_PYTHON_FILE, parts[i])), -1
    )
    if module_end < 0:
        return classname
    path = "/".join(parts[: module_end + 1]) + ".py"
    return "::".join([path, *parts[module_end + 1 :]])


def report_files(paths: Iterable[Path]) -> list[Path]:
    """The report files named: files as given, directories searched for
    `*.xml` (sorted, so the order is the same on every machine)."""
    found: list[Path] = []
    seen: set[Path] = set()
    for path in paths:
        if path.is_dir():
            children = sorted(p for p in path.rglob("*.xml") if p.is_file())
        elif path.is_file():
            children = [path]
        else:
            raise ResultsFileError(f"{path}: no such file or directory")
        for child in children:
            if child not in seen:
                seen.add(child)
                found.append(child)
    return found


def read_report(path: Path) -> Report:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_report(data, str(path))
