"""The node-id rule: `path::name[::name...]` with an optional `[...]` part,
never a bare path or directory; one pattern, the same in the schema, in Python
and in JavaScript."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.quarantine.model import parse_quarantine
from matrixgen.util.nodeid import NODE_ID_PATTERN, is_node_id, node_id_problem

SCHEMA = Path(__file__).resolve().parents[1] / "schema" / "quarantine.schema.json"

# Characters a segment may hold, and the ones that matter to the rule forced in.
_SEGMENT = st.text(
    st.characters(codec="utf-8", exclude_characters=":[\n\r") | st.sampled_from("/.-_ ]\\"),
    min_size=1,
    max_size=12,
)
_PARAMS = st.text(
    st.characters(codec="utf-8", exclude_characters="\n\r") | st.sampled_from(":[]/"), max_size=10
)


def _schema_pattern() -> str:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return schema["$defs"]["entry"]["properties"]["node_ids"]["items"]["pattern"]


def test_the_schema_holds_the_one_pattern() -> None:
    assert _schema_pattern() == NODE_ID_PATTERN


@given(path=_SEGMENT, names=st.lists(_SEGMENT, min_size=1, max_size=3), params=st.none() | _PARAMS)
def test_path_and_names_make_a_node_id(path: str, names: list[str], params: str | None) -> None:
    node = "::".join([path, *names]) + (f"[{params}]" if params is not None else "")
    assert is_node_id(node) and node_id_problem(node) is None
    # A line break anywhere, the last character included, breaks it.
    for cut in (0, len(node) // 2, len(node)):
        assert not is_node_id(node[:cut] + "\n" + node[cut:])


@given(path=_SEGMENT, params=st.none() | _PARAMS)
@example(path="tests/unit_tests/data/", params=None)
@example(path="tests/unit_tests/data", params=None)
@example(path="tests/unit_tests/test_a.py", params="1")
def test_a_bare_path_is_never_a_node_id(path: str, params: str | None) -> None:
    """What pytest's prefix-matching --deselect would turn into a whole folder
    or file: a path without `::name`, with or without a bracket part."""
    node = path + (f"[{params}]" if params is not None else "")
    assert not is_node_id(node)
    assert not is_node_id(node + "::")  # an empty name is no name
    problem = node_id_problem(node)
    assert problem is not None
    if "::" not in path and "\n" not in node:
        assert "leave out every test under it" in problem


@given(st.text(st.characters(codec="utf-8") | st.sampled_from(":[]\n\r/"), max_size=30))
@example("a::b\n")
@example("a::b[x]\n")
def test_the_schema_pattern_agrees_as_jsonschema_reads_it(text: str) -> None:
    """jsonschema applies a pattern with `re.search`, whose `$` also matches
    before a final line break: the pattern must refuse one all the same."""
    assert (re.search(NODE_ID_PATTERN, text) is not None) == is_node_id(text)


@pytest.mark.skipif(shutil.which("node") is None, reason="no node to run JavaScript")
def test_javascript_reads_the_pattern_alike() -> None:
    samples = [
        "tests/a.py::test_b",
        "tests/a.py::K::test_b[1-2]",
        "tests/a.py::test_b[a::b [c]]",
        "tests/unit_tests/data/",
        "tests/unit_tests/data/[x]",
        "tests/a.py",
        "tests/a.py::",
        "a::b\n",
        "a::b[x]\n",
        "\na::b",
        "a\r::b",
        "a::b::c",
        "::b",
        "a::[x]",
    ]
    script = (
        "const re = new RegExp(process.argv[1], 'u');"
        "const xs = JSON.parse(process.argv[2]);"
        "console.log(JSON.stringify(xs.map((x) => re.test(x))));"
    )
    done = subprocess.run(
        ["node", "-e", script, NODE_ID_PATTERN, json.dumps(samples)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == [is_node_id(s) for s in samples]
    assert json.loads(done.stdout).count(True) == 4  # the first three and a::b::c


@pytest.mark.parametrize(
    ("node", "why"),
    [
        ("tests/unit_tests/data/", "it is a directory"),
        ("tests/unit_tests/test_a.py", "it is a bare path"),
        ("tests/unit_tests/test_a.py::", "expected path::name"),
    ],
)
def test_validate_refuses_an_entry_that_names_no_test(node: str, why: str) -> None:
    text = (
        'entries:\n  - id: a\n    tracker: "#1"\n    kind: flaky\n    action: deselect\n'
        f"    match: {{test_case: x}}\n    node_ids: [ok.py::t, {json.dumps(node)}]\n"
        "    owner: me\n    reason: r\n"
    )
    qfile = parse_quarantine(text.encode(), "q.yaml")
    found = [(f.code, f.location.line, f.message) for f in qfile.errors]
    assert len(found) == 1, found  # said once: the schema's own message is left out
    code, line, message = found[0]
    assert (code, line) == ("quarantine-node-ids", 7)
    assert f'"{node}" is not a pytest node id: {why}' in message
    assert qfile.entries == ()  # never applied: it would deselect the whole folder
