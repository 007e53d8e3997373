"""JUnit XML reports: pytest's real output (reruns included), the GitLab and
GitHub reporter shapes, node ids, and refused input."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.model.errors import ExitCode, ResultsFileError
from matrixgen.results.junit import (
    MAX_DEPTH,
    Outcome,
    node_id,
    parse_report,
    read_report,
    report_files,
    stream_report,
)
from tests.results_fixtures import JUNIT, RECIPES, Run

ASYNC = "tests/unit_tests/dist_checkpointing/test_async_save.py"
FUNCTIONAL = "tests/functional/test_gpt3_tp1_pp1.py"


def _by_id(report):
    return {t.node_id: t for t in report.testcases}


def test_pytest_reports_read_with_reruns_folded_in(evidence_runs: list[Run]) -> None:
    runs = {r.run_id: r for r in evidence_runs}
    # Seed 3: the parallel write order fails on the try and on the rerun.
    tests = _by_id(read_report(runs["9104"].report))
    order = tests[f"{ASYNC}::TestAsyncSave::test_parallel_write_order"]
    assert (order.outcome, order.reruns) == (Outcome.FAILED, 1)
    assert "AssertionError" in order.message
    assert tests[f"{ASYNC}::TestAsyncSave::test_roundtrip"].outcome is Outcome.PASSED
    skipped = tests["tests/unit_tests/data/test_blend.py::test_blend_full_corpus"]
    assert skipped.outcome is Outcome.SKIPPED
    # Seed 2: the functional check fails its first try only: a pass, rerun once.
    loss = _by_id(read_report(runs["9103"].report))[
        f"{FUNCTIONAL}::test_loss_matches_golden_values"
    ]
    assert (loss.outcome, loss.reruns) == (Outcome.PASSED, 1)
    # One result per test, whatever the number of attempts.
    assert len(tests) == 8
    assert {t.suite for t in tests.values()} == {"gpt3_tp1_pp1_dev_dgx_h100"}


def test_gitlab_shape_nested_suites_and_file_attributes() -> None:
    report = read_report(JUNIT / "gitlab.xml")
    tests = _by_id(report)
    assert list(tests) == [
        f"{ASYNC}::TestAsyncSave::test_async_is_equivalent_to_sync",
        f"{ASYNC}::TestAsyncSave::test_parallel_write_order",
        f"{ASYNC}::TestAsyncSave::test_roundtrip[fp16-2 ranks]",
        f"{ASYNC}::test_cleanup",
        "tests/unit_tests/dist_checkpointing/test_resharding.py::test_tp_to_pp",
        "tests/unit_tests/dist_checkpointing/test_resharding.py::test_pp_to_tp",
    ]
    outcomes = [t.outcome for t in tests.values()]
    assert outcomes == [
        Outcome.PASSED,
        Outcome.FAILED,
        Outcome.SKIPPED,
        Outcome.ERROR,
        Outcome.PASSED,
        Outcome.PASSED,
    ]
    assert tests[f"{ASYNC}::test_cleanup"].duration is None  # time=""
    assert tests[f"{ASYNC}::TestAsyncSave::test_parallel_write_order"].duration == 2.0
    assert {t.suite for t in tests.values()} == {"test_async_save.py", "test_resharding.py"}
    # A naive timestamp is UTC; the suite's time is added.
    assert report.finished_at == dt.datetime(2026, 11, 20, 10, 0, 12, 500000, tzinfo=dt.UTC)


def test_github_shape_flaky_and_rerun_elements() -> None:
    tests = _by_id(read_report(JUNIT / "github.xml"))
    loss = tests[f"{FUNCTIONAL}::test_loss_matches_golden_values"]
    assert (loss.outcome, loss.reruns) == (Outcome.PASSED, 1)
    throughput = tests[f"{FUNCTIONAL}::test_throughput"]
    assert (throughput.outcome, throughput.reruns) == (Outcome.FAILED, 2)
    assert throughput.message == "throughput 0.8x of the baseline"
    assert tests[f"{FUNCTIONAL}::test_memory"].reruns == 0


def test_a_repeated_record_is_a_failed_attempt_even_when_empty() -> None:
    # pytest-rerunfailures 16.6.1 and later: an empty record per attempt.
    xml = b"""<testsuites><testsuite name="s">
      <testcase classname="tests.test_a" name="test_x"/>
      <testcase classname="tests.test_a" name="test_x"/>
      <testcase classname="tests.test_a" name="test_x"><failure message="boom"/></testcase>
      <testcase classname="tests.test_a" name="test_y"/>
    </testsuite></testsuites>"""
    tests = _by_id(parse_report(xml, "r.xml"))
    assert (tests["tests/test_a.py::test_x"].outcome, tests["tests/test_a.py::test_x"].reruns) == (
        Outcome.FAILED,
        2,
    )
    assert tests["tests/test_a.py::test_y"].reruns == 0


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"<testsuites><testsuite><testcase name='a'", "r.xml:1:"),
        (b"", "r.xml: the file is empty"),
        (b"<html><body/></html>", "r.xml:1:1: not a JUnit XML report: the root element is <html>"),
        (
            b"<testsuite>\n  <testcase classname='x'/></testsuite>",
            "r.xml:2:3: <testcase> without a name",
        ),
        (
            b"<testsuite><testcase name='a'><testcase name='b'/></testcase></testsuite>",
            "<testcase> inside <testcase>",
        ),
        (
            b'<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">]>\n'
            b"<testsuite><testcase name='&lol;'/></testsuite>",
            "r.xml:2:",
        ),
    ],
)
def test_bad_reports_are_errors_that_name_the_file(data: bytes, expected: str) -> None:
    with pytest.raises(ResultsFileError) as caught:
        parse_report(data, "r.xml")
    assert expected in str(caught.value)
    assert caught.value.exit_code is ExitCode.RESULTS_FILE


def test_a_doctype_is_refused_before_any_entity_is_expanded() -> None:
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
        + b"".join(
            f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">'.encode() for i in range(8)
        )
        + b']><testsuite><testcase name="&i;"/></testsuite>'
    )
    with pytest.raises(ResultsFileError, match="DOCTYPE is not accepted"):
        parse_report(laughs, "r.xml")


def test_report_files_walks_directories_in_sorted_order(tmp_path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "2.xml").write_text("<testsuite/>")
    (tmp_path / "a.xml").write_text("<testsuite/>")
    (tmp_path / "notes.txt").write_text("x")
    assert report_files([tmp_path, tmp_path / "a.xml"]) == [
        tmp_path / "a.xml",
        tmp_path / "b" / "2.xml",
    ]
    with pytest.raises(ResultsFileError, match="no such file"):
        report_files([tmp_path / "missing.xml"])


_IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)


@given(
    dirs=st.lists(_IDENT.filter(lambda s: not s.startswith("test")), max_size=3),
    module=_IDENT,
    classes=st.lists(_IDENT.map(lambda s: "Test" + s.capitalize()), max_size=2),
    name=_IDENT,
    param=st.one_of(st.just(""), st.from_regex(r"\[[a-z0-9 .-]{1,6}\]", fullmatch=True)),
    with_file=st.booleans(),
)
def test_node_id_is_what_pytest_would_print(dirs, module, classes, name, param, with_file) -> None:
    """pytest writes classname = module path with dots + classes, name = the
    test with its parameters; the node id comes back from them."""
    path = "/".join([*dirs, f"test_{module}.py"])
    classname = ".".join([*dirs, f"test_{module}", *classes])
    expected = "::".join([path, *classes, f"test_{name}{param}"])
    got = node_id(classname, f"test_{name}{param}", path if with_file else "")
    assert got == expected


def test_a_record_that_is_not_pytest_keeps_its_names() -> None:
    assert node_id("io.example.CheckoutIT", "pays") == "io.example.CheckoutIT::pays"
    assert node_id("", "lonely") == "lonely"


# ------------------------------------------------------------ hostile reports


@pytest.mark.parametrize(
    ("encoding", "reason"),
    [("Shift_JIS", "multi-byte encodings are not supported"), ("no-such-enc", "unknown encoding")],
)
def test_an_encoding_the_parser_cannot_read_is_a_located_error(
    encoding: str, reason: str, tmp_path
) -> None:
    data = (
        f'<?xml version="1.0" encoding="{encoding}"?>\n<testsuite><testcase name="a"/></testsuite>'
    )
    with pytest.raises(ResultsFileError) as caught:
        parse_report(data.encode(), "r.xml")
    message = str(caught.value)
    assert message.startswith("r.xml:1:")
    assert f'names encoding "{encoding}", which cannot be read ({reason}' in message
    assert caught.value.exit_code is ExitCode.RESULTS_FILE
    # Through the command: exit 10, one line, no traceback.
    from tests.conftest import run_cli

    report = tmp_path / "r.xml"
    report.write_bytes(data.encode())
    run = run_cli(["results", "ingest", str(report), "--run-id", "1", "--db", str(tmp_path / "d")])
    assert run.code == ExitCode.RESULTS_FILE and "Traceback" not in run.err, run


@pytest.mark.parametrize(
    ("suite", "expected"),
    [
        ('timestamp="9999-12-31T23:00:00" time="7200"', "ends outside the years 1 to 9999"),
        ('timestamp="0001-01-01T00:00:00+05:00"', "ends outside the years 1 to 9999"),
        ('timestamp="2026-11-30T10:00:00" time="1e300"', 'time="1e300" is more than'),
        ('time="inf"', 'time="inf" is more than'),
    ],
)
def test_suite_times_that_overflow_are_located_errors(suite: str, expected: str) -> None:
    data = f"<testsuites>\n <testsuite {suite}><testcase name='a'/></testsuite></testsuites>"
    with pytest.raises(ResultsFileError, match=expected) as caught:
        parse_report(data.encode(), "r.xml")
    assert str(caught.value).startswith("r.xml:2:2: ")


def test_a_test_duration_past_a_year_is_a_located_error() -> None:
    from matrixgen.results.junit import MAX_SECONDS

    ok = f"<testsuite><testcase name='a' time='{MAX_SECONDS}'/></testsuite>"
    assert parse_report(ok.encode(), "r.xml").testcases[0].duration == MAX_SECONDS
    for bad in ("1e308", str(MAX_SECONDS + 1), "Infinity"):
        data = f"<testsuite>\n<testcase name='a' time='{bad}'/></testsuite>"
        with pytest.raises(ResultsFileError, match=rf"^r\.xml:2:1: time=\"{bad}\" is more than"):
            parse_report(data.encode(), "r.xml")


@given(
    durations=st.lists(
        st.floats(min_value=0, max_value=1e300, allow_nan=False) | st.sampled_from([1e308, 0.0]),
        min_size=1,
        max_size=6,
    )
)
def test_what_a_report_holds_sums_to_a_finite_figure(durations: list[float]) -> None:
    """Every duration read is at most a year, so any sum of them is finite;
    the rest is refused, never read as a huge or infinite number."""
    import math

    from matrixgen.results.junit import MAX_SECONDS

    cases = "".join(f"<testcase name='t{i}' time='{d!r}'/>" for i, d in enumerate(durations))
    data = f"<testsuite>{cases}</testsuite>".encode()
    if max(durations) > MAX_SECONDS:
        with pytest.raises(ResultsFileError, match="is more than"):
            parse_report(data, "r.xml")
        return
    report = parse_report(data, "r.xml")
    assert math.isfinite(sum(t.duration or 0 for t in report.testcases) * 10**6)


def test_a_report_dated_in_the_future_is_clamped_to_now() -> None:
    from matrixgen.results.junit import FUTURE_SKEW, run_finished_at

    now = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)

    def report(stamp: str, path: str = "r.xml"):
        data = f'<testsuite timestamp="{stamp}"><testcase name="a"/></testsuite>'
        return parse_report(data.encode(), path)

    past = report("2026-12-01T11:00:00")
    assert run_finished_at([past], now) == (past.finished_at, None)
    within = report((now + FUTURE_SKEW).isoformat())
    assert run_finished_at([past, within], now) == (now + FUTURE_SKEW, None)
    future = report("2099-01-01T00:00:00", "forged.xml")
    moment, note = run_finished_at([past, future], now)
    assert moment == now
    assert note is not None and note.startswith("forged.xml: its suites end at 2099-01-01")
    assert "plus 5 minutes: the run is stored as finished now (clamped)" in note
    assert run_finished_at([parse_report(b"<testsuite/>", "x.xml")], now) == (None, None)


@given(st.data())
def test_a_report_read_in_chunks_is_the_report_read_whole(data: st.DataObject) -> None:
    """The parser is fed the file in pieces; where the pieces end changes nothing
    (inside a tag, a name, a multi-byte character)."""
    from matrixgen.results.junit import _collected

    raw = (JUNIT / "gitlab.xml").read_bytes().replace(b"test_cleanup", "test_clé".encode())
    cuts = sorted(data.draw(st.sets(st.integers(1, len(raw) - 1), max_size=12)))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    assert _collected(iter(pieces), "r.xml") == parse_report(raw, "r.xml")


def test_a_report_past_the_size_limit_is_refused_unread(tmp_path, monkeypatch) -> None:
    from matrixgen.results import junit

    path = tmp_path / "big.xml"
    path.write_bytes(b"<testsuite>" + b" " * 100 + b"</testsuite>")
    monkeypatch.setattr(junit, "MAX_REPORT_BYTES", 100)
    monkeypatch.setattr(junit, "_parse", lambda *a: pytest.fail("read past the limit"))
    expected = r"big\.xml: 123 bytes, more than the 100 bytes a JUnit"
    with pytest.raises(ResultsFileError, match=expected):
        read_report(path)


def test_nested_suites_deeper_than_python_recurses_are_a_located_error(tmp_path) -> None:
    depth = 60_000
    path = tmp_path / "deep.xml"
    path.write_text(
        '<testsuite name="s">' * depth + '<testcase name="a"/>' + "</testsuite>" * depth
    )
    column = len('<testsuite name="s">') * MAX_DEPTH + 1
    with pytest.raises(ResultsFileError, match=f"deep.xml:1:{column}: <testsuite> is nested"):
        read_report(path)


def test_a_quarantined_failure_is_muted_and_a_quarantined_pass_passes() -> None:
    prop = '<properties><property name="quarantined" value="ut-mute"/></properties>'
    data = (
        '<testsuite name="s"><properties><property name="quarantined" value="x"/></properties>'
        f'<testcase classname="tests.test_a" name="test_f">{prop}<failure message="m"/></testcase>'
        f'<testcase classname="tests.test_a" name="test_e"><error message="e"/>{prop}</testcase>'
        f'<testcase classname="tests.test_a" name="test_p">{prop}</testcase>'
        f'<testcase classname="tests.test_a" name="test_s">{prop}<skipped/></testcase>'
        '<testcase classname="tests.test_a" name="test_plain"><failure message="m"/></testcase>'
        '<testcase classname="tests.test_a" name="test_empty_value"><properties>'
        '<property name="quarantined" value=""/></properties><failure/></testcase>'
        "</testsuite>"
    ).encode()
    found = {t.name: t.outcome for t in parse_report(data, "r.xml").testcases}
    assert found == {
        "test_f": Outcome.MUTED,
        "test_e": Outcome.MUTED,
        "test_p": Outcome.PASSED,
        "test_s": Outcome.SKIPPED,
        "test_plain": Outcome.FAILED,  # the suite's property marks no testcase
        "test_empty_value": Outcome.FAILED,
    }
    assert not Outcome.MUTED.failed and Outcome.MUTED.test_failed


# --------------------------------------------------------------------------- nesting depth


def _nested(depth: int) -> bytes:
    """A report whose elements nest `depth` deep: suites in suites, a test inside."""
    suites = max(depth - 2, 0)
    head = "<testsuites>" + '<testsuite name="s">' * suites
    body = '<testcase classname="tests.test_a" name="test_b"/>' if depth >= 2 else ""
    tail = "</testsuite>" * suites + "</testsuites>"
    return (head + body + tail).encode()


@given(depth=st.integers(1, 400))
@example(depth=MAX_DEPTH)  # the deepest report read
@example(depth=MAX_DEPTH + 1)  # the first refused
@example(depth=1)
def test_a_report_nested_deeper_than_the_bound_is_refused_where_it_goes_too_deep(
    depth: int,
) -> None:
    data = _nested(depth)
    if depth <= MAX_DEPTH:
        assert [t.name for t in parse_report(data, "r.xml").testcases] == (
            ["test_b"] if depth >= 2 else []
        )
        return
    with pytest.raises(ResultsFileError, match=f"nested more than {MAX_DEPTH} elements deep"):
        parse_report(data, "r.xml")
    # Located at the element that opens one level too deep.
    column = len("<testsuites>") + len('<testsuite name="s">') * (MAX_DEPTH - 1) + 1
    assert f"r.xml:1:{column}:" in str(_error(data))


def _error(data: bytes) -> ResultsFileError:
    try:
        parse_report(data, "r.xml")
    except ResultsFileError as exc:
        return exc
    raise AssertionError("no error")


def test_running_out_of_memory_is_a_located_error(tmp_path: Path) -> None:
    def emit(_test: object) -> None:
        raise MemoryError

    path = tmp_path / "r.xml"
    path.write_bytes(_nested(3))
    with pytest.raises(ResultsFileError, match=r"r.xml:1:\d+: out of memory while reading"):
        stream_report(path, emit)


def test_a_deep_report_under_a_memory_cap_fails_at_once_with_flat_memory(
    tmp_path: Path,
) -> None:
    """14 MB of open elements took 319 MB before, and under a memory cap went on
    instead of failing. Under a 300 MB address-space cap, `results ingest`
    stops at the 101st element with exit 10, in a second, using little memory."""
    import resource
    import subprocess
    import sys

    report = tmp_path / "deep.xml"
    report.write_bytes(b"<testsuites>" + b"<a>" * 4_600_000)  # 14 MB
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (300 * 2**20, 300 * 2**20))\n"
        "from matrixgen.cli.main import main\n"
        "code = main(sys.argv[1:])\n"
        # VmHWM: this process's own peak (ru_maxrss would hold the parent's, at fork).
        "peak = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "print('peak', peak, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    argv = ["results", "ingest", str(report), "--run-id", "1", "--job", "gpt3_tp1_pp1_dev_dgx_h100",
            "--target", "gitlab-mr-h100-dev", "--recipes", str(RECIPES),
            "--db", str(tmp_path / "results.db")]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120
    )
    spent = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
    assert done.returncode == ExitCode.RESULTS_FILE, done.stderr
    assert (
        f"deep.xml:1:{len('<testsuites>') + 3 * (MAX_DEPTH - 1) + 1}: <a> is nested" in done.stderr
    )
    assert "Traceback" not in done.stderr
    peak_kib = int(done.stderr.rsplit("peak ", 1)[1].split()[0])
    assert peak_kib < 150 * 1024, peak_kib  # the interpreter and matrixgen's imports
    assert spent < 30
    assert not (tmp_path / "results.db").exists()  # nothing stored
