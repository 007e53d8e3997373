"""Known failures: the config's `triage.known_failures`, each pattern checked
where it is written (RE2: no backreference, no lookaround, nothing that
matches the empty text), and the matcher that runs them in time linear in the
text (util/linear_regex.py, results/known.py)."""

from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.cli.main import main
from matrixgen.documents.config import parse_config
from matrixgen.model.errors import ConfigError, ExitCode
from matrixgen.util.linear_regex import PatternSet, problem

CONFIG = """\
quarantine:
  tracker_base: https://github.com/example/mcore/issues/
triage:
  known_failures:
    - pattern: 'The server socket has failed to listen on any local network'
      tracker: "#8201"
      kind: infra
    - pattern: "We couldn't connect to 'https://huggingface\\\\.co'"
      tracker: https://github.com/example/mcore/issues/8202
      kind: infra
    - pattern: 'NCCL (error|timeout) on rank \\d+'
      tracker: "#8203"
      kind: flaky
"""


def parse(text: str):  # type: ignore[no-untyped-def]
    return parse_config(text.encode(), "matrixgen.yaml")


def test_the_section_is_read_with_each_pattern_located() -> None:
    known = parse(CONFIG).triage.known_failures
    assert [(k.pattern, k.tracker, k.kind) for k in known] == [
        ("The server socket has failed to listen on any local network", "#8201", "infra"),
        (
            "We couldn't connect to 'https://huggingface\\.co'",
            "https://github.com/example/mcore/issues/8202",
            "infra",
        ),
        ("NCCL (error|timeout) on rank \\d+", "#8203", "flaky"),
    ]
    assert [(k.location.line, k.location.column) for k in known] == [(5, 16), (8, 16), (11, 16)]
    assert parse("project: x\n").triage.known_failures == ()


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        (r"(a)\1", r"invalid escape sequence: \1"),  # a backreference
        (r"timeout(?= on rank)", "invalid perl operator: (?="),  # lookahead
        (r"(?<!soft )lockup", "invalid perl operator: (?<"),  # lookbehind
        (r"(?!x)", "invalid perl operator: (?!"),
        (r"NCCL [", "missing ]"),
        (r".*", "matches the empty text"),
        (r"(error)?", "matches the empty text"),
        ("a|", "matches the empty text"),
        ("x" * 1001, ""),
    ],
)
def test_a_pattern_only_a_backtracking_engine_runs_is_refused_where_it_is(
    pattern: str, says: str
) -> None:
    text = CONFIG + f"    - pattern: '{pattern}'\n      tracker: '#1'\n      kind: infra\n"
    with pytest.raises(ConfigError) as raised:
        parse(text)
    (finding,) = raised.value.findings  # once, by the schema or by the check
    assert (finding.location.line, finding.location.column) == (14, 16)
    if len(pattern) > 1000:
        assert finding.code == "schema"  # its maxLength
    else:
        assert finding.code == "config-known-failure"
        assert says in finding.message


def test_the_command_line_says_where_and_exits_with_the_config_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "recipes"
    tree.mkdir()
    (tree / "gpt.yaml").write_text(
        "type: basic\nformat_version: 1\nspec:\n  name: '{test_case}'\n  model: gpt\n"
        "  build: img\n  platforms: dgx_h100\n  environment: dev\n  script: x\n"
        "products:\n  - test_case: [a]\n    products:\n      - scope: [mr]\n"
    )
    (tree / "_build.yaml").write_text("type: build\nformat_version: 1\nspec:\n  name: img\n")
    (tree / "matrixgen.yaml").write_text(
        CONFIG + "    - pattern: '(\\w+) and \\1'\n      tracker: '#1'\n      kind: infra\n"
    )
    code = main(["list", "--recipes", str(tree)])
    err = capsys.readouterr().err
    assert code == ExitCode.CONFIG
    assert f"{tree / 'matrixgen.yaml'}:14:16" in err
    assert 'known failure pattern "(\\\\w+) and \\\\1": invalid escape sequence' in err
    assert "no backreferences" in err and "Traceback" not in err


def test_a_nested_quantifier_runs_in_linear_time() -> None:
    """`(a+)+b` takes Python's engine minutes over thirty `a`s; RE2 has no
    backtracking to blow up: over 2,000,000 characters it stays linear."""
    assert problem(r"(a+)+b") is None
    hostile = PatternSet([r"(a+)+b", r"(x|x)*y", r"(\w+\s?)*!"])
    began = time.process_time()
    assert hostile.matching("a" * 2_000_000 + "c") == []
    assert hostile.matching(("x" * 1000 + "\n") * 2000) == []
    assert time.process_time() - began < 2.0
    assert hostile.matching("aaab\nxxy\nab cd!") == [0, 1, 2]


WORDS = st.sampled_from(["NCCL", "error", "rank", "3", "ECC", "é", "socket", "x"])
LINES = st.lists(st.lists(WORDS, max_size=6).map(" ".join), max_size=6)


@given(words=st.lists(WORDS, min_size=1, max_size=3), lines=LINES)
@example(words=["NCCL", "error"], lines=["NCCL", "error"])  # across a line break: no match
@example(words=["é"], lines=["x é"])  # non-ASCII, in UTF-8 for RE2
@example(words=["3"], lines=[])  # no text
def test_a_set_finds_a_literal_pattern_exactly_in_the_lines_that_hold_it(
    words: list[str], lines: list[str]
) -> None:
    """Against Python's `in` on each line: a match lies within one line."""
    patterns = [re.escape(w) for w in words]
    text = "\n".join(lines)
    found = PatternSet(patterns).matching(text)
    expected = [i for i, w in enumerate(words) if any(w in line for line in lines)]
    assert found == expected
    first = PatternSet(patterns).first_line(text, 300)
    if expected:
        assert first is not None
        index, line = first
        assert line in lines and words[index] in line
        # The match that starts first, the lowest index among those starting there.
        earliest = min(
            (n, line.index(w), i)
            for n, line in enumerate(lines)
            for i, w in enumerate(words)
            if w in line
        )
        assert lines.index(line) == earliest[0] and index == earliest[2]
    else:
        assert first is None


def test_the_match_that_starts_first_wins_not_the_one_that_ends_first() -> None:
    found = PatternSet(["c", "b c d"]).first_line("a b c d", 300)
    assert found == (1, "a b c d")


def test_the_line_kept_is_cut_around_the_match() -> None:
    known = PatternSet(["Segmentation fault"])
    long = "x" * 1000 + " Segmentation fault (core dumped) " + "y" * 1000
    index, line = known.first_line("first\n" + long + "\nlast", 300) or (None, "")
    assert index == 0 and len(line) == 300 and line.endswith("x Segmentation fault")
    assert known.first_line("Segmentation fault here", 300) == (0, "Segmentation fault here")


def test_known_failures_resolve_trackers_and_match_messages_and_lines() -> None:
    from matrixgen.results.known import known_failures

    known = known_failures(parse(CONFIG))
    assert [r.tracker for r in known.refs] == [
        "https://github.com/example/mcore/issues/8201",
        "https://github.com/example/mcore/issues/8202",
        "https://github.com/example/mcore/issues/8203",
    ]
    hub = "OSError: We couldn't connect to 'https://huggingface.co' to load this file"
    assert known.match(hub, None) == known.refs[1]
    assert known.match("RuntimeError: worker exited", "NCCL timeout on rank 12") == known.refs[2]
    # Both: the first declared pattern wins.
    socket = "[W socket.cpp:464] The server socket has failed to listen on any local network"
    assert known.match(hub, socket) == known.refs[0]
    assert known.match("assert 1 == 2", None) is None
    assert known.watch("warn\n" + socket + "\nend") == socket
    assert not known_failures(parse("project: x\n"))


def test_a_failure_is_explained_by_its_message_before_its_output_line() -> None:
    """Triage's evidence says where a known failure matched: the message when it
    matches (even when the kept output line matches an earlier pattern), else
    the line, quoted."""
    from matrixgen.results.known import known_failures

    known = known_failures(parse(CONFIG))
    hub = "OSError: We couldn't connect to 'https://huggingface.co' to load this file"
    socket = "[W socket.cpp:464] The server socket has failed to listen on any local network"
    assert known.explain(hub, socket) == (known.refs[1], "its message")
    assert known.explain("assert 1 == 2", socket) == (
        known.refs[0],
        f'a line of its output: "{socket}"',
    )
    assert known.explain(None, hub) == (known.refs[1], f'a line of its output: "{hub}"')
    assert known.explain("assert 1 == 2", None) is None
    assert known.explain("", "") is None


def test_the_shipped_example_of_megatron_lm_patterns_is_a_valid_config() -> None:
    """docs/evidence.md ships the transient failures Megatron-LM's launcher
    retries as an example config: it must load, and match its own lines."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "evidence.md").read_text()
    block = docs.split("$ cat >> recipes/matrixgen.yaml <<'EOF'\n", 1)[1].split("\nEOF", 1)[0]
    config = parse(textwrap.dedent(block))
    known = config.triage.known_failures
    assert len(known) >= 20
    from matrixgen.results.known import known_failures

    matcher = known_failures(config)
    for line in (
        "Some NCCL operations have failed or timed out. Due to the asynchronous nature",
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any "
        "local network address. port: 29500",
        "OSError: We couldn't connect to 'https://huggingface.co' to load the files",
        "zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5555')",
    ):
        assert matcher.match(line, None) is not None, line
    assert matcher.match("AssertionError: loss 2.31 at step 100, golden value 2.29", None) is None


def _watched(xml: str) -> dict[str, str]:
    from matrixgen.results.junit import parse_report

    watch = PatternSet(["NCCL timeout"])

    def line(text: str) -> str | None:
        found = watch.first_line(text, 300)
        return found[1] if found else None

    report = parse_report(xml.encode(), "r.xml", line)
    return {t.name: t.output_line for t in report.testcases}


def test_the_ingest_reads_a_failed_tests_message_and_output_not_its_traceback() -> None:
    """What a watch is handed: a failed record's whole message, its
    system-out and system-err; not a passing record's output, and not the
    traceback, which quotes the source lines that name the errors they handle."""
    long_line = "x" * 100_000 + " NCCL timeout on rank 3 " + "y" * 100_000
    case = '<testcase classname="t.test_a" name='
    message = "RuntimeError: " + "x" * 400 + " NCCL timeout"
    xml = f"""<testsuite name="s">
{case}"in_stderr"><failure message="boom">trace</failure>
<system-out>nothing here</system-out>
<system-err>a\n[rank 3] NCCL timeout after 600 s\nb</system-err></testcase>
{case}"in_message"><error message="{message}"/></testcase>
{case}"in_traceback"><failure message="boom">
    except NCCL timeout as e:  # the source line a traceback quotes
</failure></testcase>
{case}"passed"><system-out>NCCL timeout</system-out></testcase>
{case}"long"><failure message="boom"/><system-out>{long_line}</system-out></testcase>
</testsuite>"""
    found = _watched(xml)
    assert found["in_stderr"] == "[rank 3] NCCL timeout after 600 s"
    # The whole message (the store keeps 300 characters of it), the line cut to
    # 300 characters that end where the match does.
    assert found["in_message"].endswith("x NCCL timeout") and len(found["in_message"]) == 300
    assert found["in_traceback"] == "" and found["passed"] == ""
    # A line longer than a piece (64 Ki characters) is cut there: the match inside one is found.
    assert found["long"].endswith(" NCCL timeout") and len(found["long"]) == 300
