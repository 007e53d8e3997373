"""Name patterns match whole names.

In Python `$` also matches before a final line break and `Pattern.match` takes
any text that starts right, so "l0-h100\\n" once passed the target-group pattern
and went on to write lines `$GITHUB_OUTPUT` refuses. The package checks names
with `util.patterns.whole` only; the JSON Schemas' patterns mean the same in
Python (jsonschema: `re.search`) and JavaScript (the language of JSON Schema).
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import matrixgen
from matrixgen.engine.targets import default_system
from matrixgen.model.vocab import System
from matrixgen.quarantine.tracker import parse_issue_url
from matrixgen.quarantine.trackers import resolve_tracker
from matrixgen.util.patterns import NON_BLANK, name_pattern, whole
from tests import realvalidators
from tests.tree_fixtures import findings_of

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "matrixgen"
SCHEMAS = sorted((REPO / "schema").glob("*.json"))


def schema_patterns() -> Iterator[tuple[str, str]]:
    """(where, pattern) for every `pattern` and `patternProperties` key of every schema."""

    def walk(value: Any, where: str) -> Iterator[tuple[str, str]]:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "pattern" and isinstance(item, str):
                    yield where, item
                elif key == "patternProperties" and isinstance(item, dict):
                    yield from ((f"{where}/patternProperties", k) for k in item)
                yield from walk(item, f"{where}/{key}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from walk(item, f"{where}/{i}")

    for path in SCHEMAS:
        yield from walk(json.loads(path.read_text(encoding="utf-8")), path.name)


PATTERNS = sorted(set(schema_patterns()))


def test_the_walk_finds_the_patterns() -> None:
    where = {w.split("/")[0] for w, _ in PATTERNS}
    assert where >= {"config.schema.json", "quarantine.schema.json", "recipe.schema.json"}
    assert len(PATTERNS) >= 15


def _walk_ops(parsed: Any) -> Iterator[tuple[Any, Any]]:
    for op, arg in parsed:
        yield op, arg
        for item in arg if isinstance(arg, (list, tuple)) else ():
            if isinstance(item, sre_parse.SubPattern):
                yield from _walk_ops(item)
            elif isinstance(item, (list, tuple)):
                for sub in item:
                    if isinstance(sub, sre_parse.SubPattern):
                        yield from _walk_ops(sub)


def ends_anchored(pattern: str) -> bool:
    """Whether the pattern holds an end anchor (`$`: the end in JavaScript)."""
    return any(
        op == sre_parse.AT and arg == sre_parse.AT_END
        for op, arg in _walk_ops(sre_parse.parse(pattern))
    )


def accepts(pattern: str, text: str) -> bool:
    return jsonschema.Draft202012Validator({"type": "string", "pattern": pattern}).is_valid(text)


@pytest.mark.parametrize(("where", "pattern"), PATTERNS, ids=[w for w, _ in PATTERNS])
@settings(max_examples=20, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_schema_pattern_refuses_a_trailing_line_break(
    where: str, pattern: str, data: st.DataObject
) -> None:
    name = data.draw(st.from_regex(pattern, fullmatch=True), label="name")
    assert accepts(pattern, name)
    # JavaScript's `$` is the end only: a name with a line break after it is
    # another name there, and must be here too. (A pattern with no end anchor,
    # "holds a non-blank", takes it in both.)
    assert accepts(pattern, name + "\n") is not ends_anchored(pattern), (where, name)


BLANKS = ["\n", "\r\n", "\x1c", "\x1f", "\x85", "\ufeff", "\xa0", "\u2028", "\u3000", " "]


def _probes(samples: list[str]) -> list[str]:
    """The names, and each with blanks and digits that Python and JavaScript read
    differently (a final line break, \\s and \\d of either engine)."""
    out = {"", *samples}
    for s in samples:
        out.update(s + b for b in BLANKS)
        out.update(b + s for b in BLANKS)
        out.update(s[:1] + b + s[1:] for b in BLANKS)
        out.add(re.sub("[0-9]", "\u0663", s))  # an Arabic-Indic digit: \\d in Python only
        out.add(re.sub("[0-9]", "\uff11", s))  # a full-width digit
        out.add(s + "\u0663")
    return sorted(out)


JAVASCRIPT = """
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
console.log(JSON.stringify(cases.map(c => [
  c.texts.map(t => new RegExp(c.pattern, "u").test(t)),
  c.texts.map(t => new RegExp(c.pattern).test(t)),
])));
"""


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.tuples(
        *(st.lists(st.from_regex(p, fullmatch=True), min_size=1, max_size=3) for _, p in PATTERNS)
    )
)
def test_schema_patterns_mean_the_same_in_javascript(names: tuple[list[str], ...]) -> None:
    node = realvalidators.node_executable(16)
    if node is None:
        realvalidators._require("Node is not installed: the JavaScript side is not checked")
        return
    cases = [
        {"pattern": p, "texts": _probes(samples)}
        for (_, p), samples in zip(PATTERNS, names, strict=True)
    ]
    ran = subprocess.run(
        [str(node), "-e", JAVASCRIPT], input=json.dumps(cases), capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    for case, (unicode_mode, plain_mode) in zip(cases, json.loads(ran.stdout), strict=True):
        python = [re.search(case["pattern"], t) is not None for t in case["texts"]]
        for text, py, js_u, js in zip(case["texts"], python, unicode_mode, plain_mode, strict=True):
            assert py == js_u == js, (case["pattern"], text, py, js_u, js)


def test_the_non_blank_class_is_every_engines_non_blank() -> None:
    python_blanks = {c for c in map(chr, range(0x110000)) if c.isspace()}
    javascript_only = {"\ufeff"}  # \s of JavaScript that Python's str.isspace lacks
    for flags in (0, re.ASCII):
        compiled = re.compile(NON_BLANK, flags)
        refused = {c for c in map(chr, range(0x3100)) if not compiled.fullmatch(c)}
        refused |= {c for c in javascript_only if not compiled.fullmatch(c)}
        assert refused == python_blanks | javascript_only


def test_a_target_group_with_a_line_break_is_a_located_error(
    tree: Callable[..., Path], cli: Callable
) -> None:
    from tests.tree_fixtures import v2_tree

    files = v2_tree(
        "  - test_case: [tc]\n    products:\n      - {environment: [dev], scope: [L0]}\n"
    )
    files["matrixgen.yaml"] += (
        "targets:\n"
        '  gh: {system: github, scope: L0, platform: dgx_h100, environment: dev, group: "l0\\n"}\n'
    )
    root = tree(files)
    run = cli("validate", "--recipes", root)
    assert run.code != 0, run
    found = [m for m in findings_of(run.err) if "/group" in m.string]
    assert found, run.err
    line = (root / "matrixgen.yaml").read_text().splitlines()[int(found[0]["line"]) - 1]
    assert line.index('"l0') + 1 == int(found[0]["col"])


@pytest.mark.parametrize(
    ("check", "good", "bad"),
    [
        (lambda t: default_system(t) is System.GITHUB, "L0", ["L0\n", "L\u0660", "L0x"]),
        (
            lambda t: resolve_tracker(t, "https://github.com/o/r/issues") is not None,
            "#12",
            ["#12\n3", "#\u0661\u0662", "#12x"],
        ),
        (
            lambda t: parse_issue_url(t) is not None,
            "https://github.com/o/r/issues/12",
            ["https://github.com/o/r/issues/12\n/", "https://github.com/o/r/issues/\u0661"],
        ),
    ],
    ids=["scope", "tracker", "issue-url"],
)
def test_names_checked_in_the_package_are_whole_ascii_names(
    check: Callable[[str], bool], good: str, bad: list[str]
) -> None:
    assert check(good)
    assert [b for b in bad if check(b)] == []


def test_whole_matches_all_of_the_text() -> None:
    pattern = name_pattern(r"[a-z]+")
    assert whole(pattern, "abc") is not None
    assert whole(pattern, "abc\n") is None and whole(pattern, "abcD") is None
    assert whole(name_pattern(r"\d+"), "\u0663") is None  # ASCII classes


# --- every pattern of the package -------------------------------------------------

RE_FUNCTIONS = {"compile", "match", "search", "fullmatch", "sub", "subn", "split", "findall"}


def _modules() -> Iterator[Path]:
    yield from sorted(PACKAGE.rglob("*.py"))


def _literal_patterns(path: Path) -> Iterator[tuple[int, str, int]]:
    """(line, pattern, flags known) of every literal pattern given to `re` or name_pattern."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        is_re = (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "re"
            and func.attr in RE_FUNCTIONS
        )
        is_name = isinstance(func, ast.Name) and func.id == "name_pattern"
        first = node.args[0]
        if (is_re or is_name) and isinstance(first, ast.Constant) and isinstance(first.value, str):
            multiline = "MULTILINE" in ast.unparse(node) or "re.M" in ast.unparse(node)
            yield node.lineno, first.value, re.MULTILINE if multiline else 0


def test_no_pattern_of_the_package_ends_with_a_dollar() -> None:
    # `$` is the end or a final line break: `\Z` or whole() say the end.
    found = []
    for path in _modules():
        for line, pattern, flags in _literal_patterns(path):
            if not flags & re.MULTILINE and ends_anchored(pattern):
                found.append(f"{path.relative_to(REPO)}:{line}: {pattern}")
    # Patterns built at import time (joined from parts) too.
    for info in pkgutil.walk_packages(matrixgen.__path__, "matrixgen."):
        if info.name.endswith("__main__"):  # runs the CLI
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                isinstance(value, re.Pattern)
                and isinstance(value.pattern, str)
                and not value.flags & re.MULTILINE
                and ends_anchored(value.pattern)
            ):
                found.append(f"{info.name}.{name}: {value.pattern}")
    assert found == []


def test_a_prefix_match_says_so() -> None:
    # Pattern.match(text) takes any text that starts right: whole() is the check of
    # a name; a scanner gives a position; a test of a text's start says `# prefix`.
    found = []
    for path in _modules():
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr != "match":
                continue
            receiver_is_re = isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
            positional = len(node.args) - (1 if receiver_is_re else 0)
            if positional >= 2 or "# prefix" in lines[node.lineno - 1]:
                continue
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: {lines[node.lineno - 1]}")
    assert found == []
