"""JUnit XML reports: pytest's real output (reruns included), the GitLab and
GitHub reporter shapes, node ids, and refused input."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from matrixgen.engine.errors import ExitCode, ResultsFileError
from matrixgen.evidence.junit import Outcome, node_id, parse_report, read_report, report_files
from tests.evidence_fixtures import JUNIT, Run

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
