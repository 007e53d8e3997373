"""JUnit XML test reports, read into plain values.

Read: pytest's `--junitxml` (both junit families) and the shapes GitLab's and
GitHub's reporters read. How reruns count (pytest-rerunfailures' one record per
attempt, Surefire's `<rerunFailure>` children): docs/results-store.md; the
`quarantined` property and `muted`: docs/pytest-plugin.md.

Known failures: a `watch` is handed a failed record's whole message, then its
system-out and system-err (not the failure's text: a traceback quotes source
lines, which name errors they handle), in pieces of whole lines of at most
_WATCH_PIECE characters, so memory stays flat.

Hostile input: a DOCTYPE (and so any entity declaration) is refused; expat
streams the file (cost linear in its size); elements nested more than
MAX_DEPTH deep are refused where they open; running out of memory anyway is
a located error. Every problem is a `ResultsFileError` naming file, line and
column.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from functools import lru_cache, partial
from itertools import chain
from pathlib import Path

from msgspec import Struct
from msgspec.structs import replace

from matrixgen.model.errors import ResultsFileError
from matrixgen.util.patterns import name_pattern, whole

MESSAGE_LIMIT = 300  # characters of a failure message kept


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    MUTED = "muted"  # failed or errored, under a mute entry: the job did not fail

    @property
    def failed(self) -> bool:
        """A failure that fails the job."""
        return self in (Outcome.FAILED, Outcome.ERROR)

    @property
    def test_failed(self) -> bool:
        """The test itself failed, muted or not (what flaky verdicts count)."""
        return self in (Outcome.FAILED, Outcome.ERROR, Outcome.MUTED)


class Testcase(Struct, frozen=True, kw_only=True, gc=False):
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
    # A muted record's outcome before the mute (failed or error): the report
    # only claims the mute; the ingest grants it from the quarantine file alone.
    muted_from: Outcome | None = None
    # The line of the failure's message or output that a known-failure
    # pattern matched when it was read ("" for none; see the module).
    output_line: str = ""


# Bounds on one report's bytes, and on any one `time`: more than a year is no
# measurement, and sums of such durations stay finite.
MAX_REPORT_BYTES = 256 * 1024 * 1024
MAX_SECONDS = 366 * 24 * 3600
# Elements open at once: reports nest a few levels, and expat and the reader
# keep state per open element (a million deep would take unbounded memory).
MAX_DEPTH = 100
_CHUNK = 1024 * 1024  # bytes fed to the parser at a time

_FAILURE_TAGS = {"failure": Outcome.FAILED, "error": Outcome.ERROR}
_RERUN_TAGS = frozenset({"rerunFailure", "rerunError", "flakyFailure", "flakyError"})
QUARANTINED_PROPERTY = "quarantined"  # written by matrixgen.results.pytest_plugin
_ROOTS = ("testsuites", "testsuite")
# A failed record's elements a `watch` reads (of a failure or error: its message).
_WATCHED = frozenset({"failure", "error", "system-out", "system-err"})
_WATCH_PIECE = 64 * 1024  # characters handed to a `watch` at a time

# The line of a failed record's text a known-failure pattern matches, or None.
Watch = Callable[[str], "str | None"]
_PYTHON_FILE = name_pattern(r"test_.*|.*_test")
_DECLARED_ENCODING = re.compile(rb"""^\s*<\?xml[^>]*?\bencoding\s*=\s*["']([^"']{0,80})["']""")


class ReportEnd(Struct, frozen=True, kw_only=True):
    """What a report says once its records are read (stream_report)."""

    path: str
    finished_at: dt.datetime | None  # latest suite timestamp + time, UTC, when given


class Report(ReportEnd, frozen=True, kw_only=True):
    testcases: tuple[Testcase, ...]


def parse_report(data: bytes, path: str, watch: Watch | None = None) -> Report:
    """Parse one JUnit XML document (bytes), `path` naming it in errors."""
    return _collected(iter([data]), path, watch)


def _collected(chunks: Iterator[bytes], path: str, watch: Watch | None = None) -> Report:
    """A whole report in memory: each test once, where its last record is (an
    earlier record is a failed attempt: one rerun more)."""
    tests: dict[str, Testcase] = {}
    attempts: dict[str, int] = {}  # records before the last one, of tests seen again

    def keep(test: Testcase) -> None:
        if tests.pop(test.node_id, None) is not None:
            attempts[test.node_id] = attempts.get(test.node_id, 0) + 1
        tests[test.node_id] = test

    end = _parse(chunks, path, keep, watch)
    return Report(
        path=path,
        testcases=tuple(
            replace(t, reruns=t.reruns + attempts[t.node_id]) if t.node_id in attempts else t
            for t in tests.values()
        ),
        finished_at=end.finished_at,
    )


# Distinct classnames and suite names shared as one string each, up to this
# many (then the table starts again).
_SHARED_LIMIT = 10_000


class _Reader:
    """expat's handlers for one report: no tree, the state is the open elements
    and one record. Each finished record goes to `emit` as read."""

    def __init__(
        self,
        parser: object,
        path: str,
        emit: Callable[[Testcase], object],
        watch: Watch | None = None,
    ) -> None:
        self.parser = parser
        self.path = path
        self.emit = emit
        self.watch = watch
        self.text: list[str] = []  # the watched element's text not handed on yet
        self.text_size = 0
        self.watching = 0  # the depth of the element whose text is read (0: none)
        self.output_line = ""
        self.stack: list[str] = []
        self.suites: list[str] = []
        # The record being read; its children (rare) replace it with what they say.
        self.current: Testcase | None = None
        self.quarantined = False
        self.finished: dt.datetime | None = None
        self.emitting = False  # an error raised by `emit` is its own, not the XML's
        self.strings: dict[str, str] = {}

    def shared(self, text: str) -> str:
        if len(self.strings) >= _SHARED_LIMIT:
            self.strings.clear()
        return self.strings.setdefault(text, text)

    def where(self) -> str:
        parser = self.parser
        return f"{self.path}:{parser.CurrentLineNumber}:{parser.CurrentColumnNumber + 1}"  # type: ignore[attr-defined]

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        stack = self.stack
        if not stack and tag not in _ROOTS:
            raise ResultsFileError(
                f"{self.where()}: not a JUnit XML report: the root element is <{tag}>, "
                "expected <testsuites> or <testsuite>"
            )
        if len(stack) >= MAX_DEPTH:
            raise ResultsFileError(
                f"{self.where()}: <{tag[:40]}> is nested more than {MAX_DEPTH} elements deep: "
                "not a JUnit XML report (suites and tests nest a few levels)"
            )
        stack.append(tag)
        record = self.current
        if tag == "testsuite":
            self.suites.append(self.shared(attrs.get("name", "")))
            stamp = _suite_end(attrs, self.where)
            if stamp is not None and (self.finished is None or stamp > self.finished):
                self.finished = stamp
        elif tag == "testcase":
            self.open_record(attrs)
        elif record is not None and stack[-2] == "testcase":
            self.current = _child(record, tag, attrs)
            if self.watch is not None and tag in _WATCHED:
                self.start_watching(tag, attrs)
        elif (
            tag == "property"
            and record is not None
            and stack[-3:-1] == ["testcase", "properties"]
            and attrs.get("name") == QUARANTINED_PROPERTY
            and attrs.get("value", "").strip()
        ):
            self.quarantined = True

    def open_record(self, attrs: dict[str, str]) -> None:
        if self.current is not None:
            raise ResultsFileError(f"{self.where()}: <testcase> inside <testcase>")
        name = attrs.get("name", "").strip()
        if not name:
            raise ResultsFileError(f"{self.where()}: <testcase> without a name attribute")
        classname = self.shared(attrs.get("classname", "").strip())
        self.quarantined = False
        self.output_line = ""
        self.current = Testcase(
            node_id=node_id(classname, name, attrs.get("file", "").strip()),
            classname=classname,
            name=name,
            suite=self.suites[-1] if self.suites else "",
            outcome=Outcome.PASSED,
            duration=_seconds(attrs.get("time"), self.where),
            line=self.parser.CurrentLineNumber,  # type: ignore[attr-defined]
        )

    def start_watching(self, tag: str, attrs: dict[str, str]) -> None:
        """Read a failed record's output (a failure's or error's message)."""
        record = self.current
        if self.output_line or record is None or not record.outcome.failed:
            return  # a line was found, or the record has not failed (yet)
        if tag in _FAILURE_TAGS:
            message = attrs.get("message")
            if message:
                assert self.watch is not None
                self.output_line = self.watch(message) or ""
            return
        self.watching = len(self.stack)
        self.parser.CharacterDataHandler = self.characters  # type: ignore[attr-defined]

    def characters(self, data: str) -> None:
        self.text.append(data)
        self.text_size += len(data)
        if self.text_size >= _WATCH_PIECE:
            self.hand_on(final=False)

    def hand_on(self, *, final: bool) -> None:
        """The whole lines read so far to the watch (all, when `final` or when a
        line is longer than _WATCH_PIECE)."""
        text = "".join(self.text)
        rest = ""
        if not final:
            cut = text.rfind("\n") + 1
            if cut > 0 and len(text) - cut < _WATCH_PIECE:
                text, rest = text[:cut], text[cut:]
        self.text, self.text_size = ([rest], len(rest)) if rest else ([], 0)
        assert self.watch is not None
        found = self.watch(text) if text else None
        if found is not None:
            self.output_line = found
            self.stop_watching()

    def stop_watching(self) -> None:
        self.watching = 0
        self.text, self.text_size = [], 0
        self.parser.CharacterDataHandler = None  # type: ignore[attr-defined]

    def end(self, tag: str) -> None:
        if self.watching and len(self.stack) == self.watching:
            self.hand_on(final=True)
            self.stop_watching()
        self.stack.pop()
        if tag == "testsuite":
            self.suites.pop()
        elif tag == "testcase":
            record = self.current
            assert record is not None
            if self.quarantined and record.outcome.failed:
                record = replace(record, outcome=Outcome.MUTED, muted_from=record.outcome)
            if self.output_line:
                record = replace(record, output_line=self.output_line)
            self.current = None
            self.emitting = True
            self.emit(record)
            self.emitting = False


def _child(record: Testcase, tag: str, attrs: dict[str, str]) -> Testcase:
    """The record with a child element of it: its failure, error, skip or rerun."""
    # An error beside a failure (a teardown error after a failed call) keeps
    # the failure: the test itself failed.
    if tag in _FAILURE_TAGS and not record.outcome.failed:
        message = attrs.get("message", "")[:MESSAGE_LIMIT]
        return replace(record, outcome=_FAILURE_TAGS[tag], message=message)
    if tag == "skipped" and record.outcome is Outcome.PASSED:
        return replace(record, outcome=Outcome.SKIPPED)
    if tag in _RERUN_TAGS:
        return replace(record, reruns=record.reruns + 1)
    return record


def _parse(
    chunks: Iterator[bytes],
    path: str,
    emit: Callable[[Testcase], object],
    watch: Watch | None = None,
) -> ReportEnd:
    """Stream the chunks through expat, each record to `emit` as it ends."""
    from xml.parsers import expat

    parser = expat.ParserCreate()
    parser.buffer_text = True  # a watch gets an element's text in few pieces
    reader = _Reader(parser, path, emit, watch)

    def refuse_doctype(*_args: object) -> None:
        raise ResultsFileError(
            f"{reader.where()}: a DOCTYPE is not accepted in a JUnit XML report "
            "(it could declare entities)"
        )

    parser.StartDoctypeDeclHandler = refuse_doctype
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    first = next(chunks, b"")
    if not first.strip():
        raise ResultsFileError(f"{path}: the file is empty, expected a JUnit XML report")
    try:
        for chunk in chain([first], chunks):
            parser.Parse(chunk, False)
        parser.Parse(b"", True)
    except MemoryError:
        where = reader.where()
        del parser, reader  # what the parse held, freed before the message is built
        raise ResultsFileError(
            f"{where}: out of memory while reading the report (nothing is stored)"
        ) from None
    except expat.ExpatError as exc:
        raise ResultsFileError(
            f"{path}:{exc.lineno}:{exc.offset + 1}: not well-formed XML "
            f"({expat.errors.messages[exc.code] if exc.code else exc})"
        ) from None
    except (LookupError, ValueError) as exc:
        if reader.emitting:
            raise
        # The declared encoding: unknown to Python, or one expat cannot decode
        # (multi-byte encodings other than UTF-8 and UTF-16).
        declared = _DECLARED_ENCODING.match(first[:200])  # prefix: the declaration starts the file
        name = declared.group(1).decode("ascii", "replace") if declared else "?"
        raise ResultsFileError(
            f'{reader.where()}: the XML declaration names encoding "{name}", which cannot be '
            f"read ({exc}): write the report in UTF-8"
        ) from None
    return ReportEnd(path=path, finished_at=reader.finished)


def _seconds(text: str | None, where: Callable[[], str]) -> float | None:
    """A `time` attribute: None when absent or not a number (some reporters
    write "" or "N/A"); a located error past MAX_SECONDS."""
    if not text:
        return None
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    if value != value or value < 0:
        return None
    if value > MAX_SECONDS:
        raise ResultsFileError(
            f'{where()}: time="{text[:40]}" is more than {MAX_SECONDS:,} seconds (a year): '
            "not a duration a test or suite can take"
        )
    return value


def _suite_end(attrs: dict[str, str], where: Callable[[], str]) -> dt.datetime | None:
    """When a suite ended, UTC: its timestamp (naive: UTC) plus its time; a
    located error when that is outside the years 1 to 9999."""
    seconds = _seconds(attrs.get("time"), where)
    stamp = attrs.get("timestamp")
    if not stamp:
        return None
    try:
        start = dt.datetime.fromisoformat(stamp.strip())
    except ValueError:
        return None
    if start.tzinfo is None:
        start = start.replace(tzinfo=dt.UTC)
    try:
        return (start + dt.timedelta(seconds=seconds or 0)).astimezone(dt.UTC)
    except OverflowError:
        raise ResultsFileError(
            f'{where()}: testsuite timestamp="{stamp[:40]}" with time="{attrs.get("time", "")}" '
            "ends outside the years 1 to 9999"
        ) from None


def node_id(classname: str, name: str, file: str = "") -> str:
    """pytest's node id from a record: `tests/x/test_a.py::TestK::test_b[1]`.
    `classname` is the module's dotted path and the classes; the `file`
    attribute (xunit1, GitLab and GitHub shapes) tells which part is the
    module, else pytest's default test file names do (`test_*`, `*_test`). A
    record that is not pytest's stays `classname::name`."""
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


# How far past the clock a report's time may be (runners' clocks differ a little).
FUTURE_SKEW = dt.timedelta(minutes=5)


def run_finished_at(
    reports: Iterable[ReportEnd], now: dt.datetime | None = None
) -> tuple[dt.datetime | None, str | None]:
    """When the run finished: its reports' latest suite end. One later than now
    plus FUTURE_SKEW is clamped to now, and the note says so: a report dated
    2099 would be the latest run of every test for good."""
    now = now or dt.datetime.now(dt.UTC)
    dated = [(r.finished_at, r.path) for r in reports if r.finished_at is not None]
    if not dated:
        return None, None
    finished, path = max(dated, key=lambda d: d[0])  # the first of equal ends
    if finished <= now + FUTURE_SKEW:
        return finished, None
    return now, (
        f"{path}: its suites end at {finished.isoformat()}, later than now "
        f"({now.isoformat(timespec='seconds')}) plus {FUTURE_SKEW.seconds // 60} minutes: "
        "the run is stored as finished now (clamped)"
    )


def report_files(paths: Iterable[Path]) -> list[Path]:
    """Files as given, directories searched for `*.xml` (sorted: the same
    order on every machine)."""
    found: dict[Path, None] = {}  # a file named twice stays at its first place
    for path in paths:
        if path.is_dir():
            found.update(dict.fromkeys(sorted(p for p in path.rglob("*.xml") if p.is_file())))
        elif path.is_file():
            found.setdefault(path)
        else:
            raise ResultsFileError(f"{path}: no such file or directory")
    return list(found)


def read_report(path: Path, watch: Watch | None = None) -> Report:
    """Read one report file, streamed in chunks; a file larger than
    MAX_REPORT_BYTES is refused before it is read."""
    with _report_chunks(path) as chunks:
        return _collected(chunks, str(path), watch)


def stream_report(
    path: Path, emit: Callable[[Testcase], object], watch: Watch | None = None
) -> ReportEnd:
    """read_report without keeping the tests: each record (a rerun's each
    once: the receiver folds them) goes to `emit` as it ends, in file order."""
    with _report_chunks(path) as chunks:
        return _parse(chunks, str(path), emit, watch)


@contextmanager
def _report_chunks(path: Path) -> Iterator[Iterator[bytes]]:
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_REPORT_BYTES:
                raise ResultsFileError(
                    f"{path}: {size:,} bytes, more than the {MAX_REPORT_BYTES:,} bytes "
                    "a JUnit XML report may have: split it (pytest writes one per run of it)"
                )
            yield iter(partial(handle.read, _CHUNK), b"")
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot read: {exc.strerror}") from None
