"""One YAML reader, one set of limits: the quarantine editor (`remove`, `lift`,
`add`) and `migrate`'s reading of commented-out rows read YAML only through
`documents.yamlio`, so they take what every other command takes (a tab before
a comment) and refuse what it refuses (nesting past 64 levels, an alias bomb)
with the same located message, never a traceback.

The properties build hostile files from their parts and use the main reader
itself as the oracle: what it refuses, the secondary path refuses, at a line of
the file; what it reads, the secondary path edits or migrates."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matrixgen.documents.yamlio import parse_yaml
from matrixgen.model.errors import Findings
from matrixgen.quarantine.model import parse_quarantine
from tests.conftest import run_cli, write_tree
from tests.quarantine_fixtures import v1_files

SEPARATORS = (" ", "  ", "\t", " \t", "\t ")
# An alias bomb: each level nine uses of the one before, 9**8 nodes in all.
BOMB = "[&a0 [x, x, x, x, x, x, x, x, x], " + ", ".join(
    f"&a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 8)
)
BOMB += "]"
VALUES = {
    "plain": "r",
    "deep-64": "[" * 63 + "x" + "]" * 63,  # lists 63 deep in a mapping 1 deep: 64
    "deep-65": "[" * 64 + "x" + "]" * 64,
    "deep-1500": "[" * 1500 + "x" + "]" * 1500,  # past libyaml's own bound
    "bomb": BOMB,
}
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _entry(n: int, owner: str, reason: str, comment: str) -> list[str]:
    return [
        f"  - id: e{n}{comment}\n",
        f"    tracker: '#{n + 1}'\n",
        "    kind: flaky\n",
        "    action: skip\n",
        f"    match: {{test_case: tc_{'ab'[n]}}}\n",
        f"    owner: {owner}\n",
        f"    reason: {reason}\n",
    ]


@st.composite
def hostile_quarantines(draw: st.DrawFn) -> dict[str, Any]:
    """A quarantine file of two entries: comments after tabs or blanks, an
    anchor used by the other entry, and a hostile value (deep, an alias bomb)."""

    def comment(what: str) -> str:
        return f"{draw(st.sampled_from(SEPARATORS))}# {what}" if draw(st.booleans()) else ""

    anchored = draw(st.booleans())
    value = draw(st.sampled_from(sorted(VALUES)))
    head = [f"entries:{comment('the list')}\n"]
    first = _entry(0, "&o me" if anchored else "me", "r", comment("first"))
    second = _entry(1, "*o" if anchored else "me", VALUES[value], comment("second"))
    return {"head": head, "entries": [first, second], "anchored": anchored, "value": value}


def _file(case: dict[str, Any], without: int | None = None) -> str:
    kept = [e for i, e in enumerate(case["entries"]) if i != without]
    return "".join(case["head"] + [line for entry in kept for line in entry])


@example(
    case={"head": ["entries:\t# tab\n"], "entries": [_entry(0, "me", "r", "\t# t"),
          _entry(1, "me", "r", "")], "anchored": False, "value": "plain"},
    remove=0,
)  # fmt: skip
@example(
    case={"head": ["entries:\n"], "entries": [_entry(0, "&o me", "r", ""),
          _entry(1, "*o", "r", "")], "anchored": True, "value": "plain"},
    remove=0,
)  # fmt: skip
@example(
    case={"head": ["entries:\n"], "entries": [_entry(0, "me", "r", ""),
          _entry(1, "me", VALUES["deep-65"], "")], "anchored": False, "value": "deep-65"},
    remove=0,
)  # fmt: skip
@example(
    case={"head": ["entries:\n"], "entries": [_entry(0, "me", "r", ""),
          _entry(1, "me", VALUES["deep-1500"], "")], "anchored": False, "value": "deep-1500"},
    remove=1,
)  # fmt: skip
@example(
    case={"head": ["entries:\n"], "entries": [_entry(0, "me", "r", ""),
          _entry(1, "me", BOMB, "")], "anchored": False, "value": "bomb"},
    remove=0,
)  # fmt: skip
@SETTINGS
@given(case=hostile_quarantines(), remove=st.sampled_from([0, 1]))
def test_the_editor_reads_what_every_command_reads(
    tmp_path_factory: Any, case: dict[str, Any], remove: int
) -> None:
    text = _file(case)
    root = write_tree(
        tmp_path_factory.mktemp("q"), {**v1_files(), "quarantine.yaml": text.encode()}
    )
    path = root / "quarantine.yaml"
    errors = parse_quarantine(text.encode(), str(path)).errors
    run = run_cli(["quarantine", "remove", f"e{remove}", "--recipes", str(root)])
    if errors:
        # Refused as every command refuses it: exit 7, at the place, untouched.
        first = errors[0].location
        assert run.code == 7, run
        assert f"quarantine.yaml:{first.line}:{first.column}:" in run.err
        assert path.read_text(encoding="utf-8") == text
    elif case["anchored"] and remove == 0:
        assert run.code == 7 and "defines the YAML anchor &o (line 7)" in run.err, run
        assert path.read_text(encoding="utf-8") == text
    else:
        # Read, then edited: exactly that entry's lines go, every other byte stays.
        assert run.code == 0, run
        assert path.read_text(encoding="utf-8") == _file(case, without=remove)


RECIPE_HEAD = """\
type: basic
format_version: 1
maintainers: [mcore]
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: mcore-pyt-{environment}
  platforms: dgx_h100
products:
  - test_case: [tc_a]
    products:
      - environment: [dev]
        scope: [mr]
"""


@st.composite
def commented_rows(draw: st.DrawFn) -> list[str]:
    """The lines of a row as it was before it was commented out (its tracker in a
    comment after a tab or blanks), with a hostile platforms value."""
    sep = draw(st.sampled_from(SEPARATORS))
    value = draw(st.sampled_from(["[dgx_h100]", *sorted(VALUES.values())]))
    return [
        f"      - environment: [dev]{sep}# hang: #513\n",
        "        scope: [mr]\n",
        f"        platforms: {value}\n",
    ]


@example(rows=["      - environment: [dev]\t# hang: #513\n", "        scope: [mr]\n",
               "        platforms: [dgx_h100]\n"])  # fmt: skip
@example(rows=["      - environment: [dev] # hang: #513\n", "        scope: [mr]\n",
               f"        platforms: {VALUES['deep-1500']}\n"])  # fmt: skip
@example(rows=["      - environment: [dev] # hang: #513\n", "        scope: [mr]\n",
               f"        platforms: {VALUES['deep-65']}\n"])  # fmt: skip
@example(rows=["      - environment: [dev] # hang: #513\n", "        scope: [mr]\n",
               f"        platforms: {BOMB}\n"])  # fmt: skip
@SETTINGS
@given(rows=commented_rows())
def test_migrate_reads_a_commented_out_row_as_every_command_reads_yaml(
    tmp_path_factory: Any, rows: list[str]
) -> None:
    commented = ["      # " + line[6:] for line in rows]
    recipe = RECIPE_HEAD + "".join(commented)
    first = RECIPE_HEAD.count("\n") + 1  # the commented row's first line
    files = {**v1_files(), "h100/gpt.yaml": recipe.encode()}
    root = write_tree(tmp_path_factory.mktemp("m"), files)
    run = run_cli(["migrate", "--recipes", str(root), "--format", "json"])
    assert run.code == 0, run
    plan = json.loads(run.out)
    found = Findings()
    refused = parse_yaml("".join(rows).encode(), "row", found) is None or bool(found.errors)
    left = [x for x in plan["left_alone"] if x["line"] == first]
    unreadable = [x for x in left if x["reason"].startswith("does not uncomment to valid YAML")]
    assert bool(unreadable) is refused, (run.out, found.errors)
    if refused:
        # Said at a line of the row, with the reader's own words.
        said = unreadable[0]["reason"]
        line = int(said.split("(line ", 1)[1].split(":", 1)[0])
        assert first <= line < first + len(rows), said
        assert found.errors[0].message in said
    else:
        assert left or [e for e in plan["entries"] if e["tracker"] == "#513"], run.out
