"""`validate --format sarif`: SARIF 2.1.0 that the OASIS schema accepts and GitHub
code scanning can place (relative URIs, a line for every result), the same bytes
for the same findings."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from matrixgen.model.errors import Finding, Location, Severity
from matrixgen.views.sarif import artifact_location, render_sarif, sarif_report

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"

BROKEN = {
    "_build-mcore-dev.yaml": """
type: build
format_version: 1
spec: {name: mcore-pyt-dev, platforms: [linux/amd64]}
""",
    "sub dir/gpt.yaml": """
type: basic
format_version: 1
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: mcore-pyt-{environment}
  platforms: dgx_h100
products:
  - test_case: [a]
    products:
      - {environment: [dev], scope: [mr], platforms: [dgx_h100], cadence: [nightyl]}
  - test_case: [b, c]
    products:
      - {environment: [dev], scope: [mr], platforms: [dgx_h100]}
""",
}


@cache
def validator() -> jsonschema.Draft4Validator:
    data = SCHEMA.read_bytes()
    assert hashlib.sha256(data).hexdigest() == SCHEMA_SHA256  # the vendored file, unchanged
    schema = json.loads(data)
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def assert_valid(log: dict) -> None:
    errors = sorted(validator().iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_the_schema_rejects_what_code_scanning_could_not_read() -> None:
    # The check has teeth: a wrong version, a result without a message, a bad level.
    good = sarif_report(
        [
            Finding(
                location=Location("a.yaml", 3, 4), severity=Severity.ERROR, code="x", message="m"
            )
        ],
        version="1.0",
        base=Path.cwd(),
    )
    assert_valid(good)
    for path, value in (
        (("version",), "2.0.0"),
        (("runs", 0, "results", 0, "level"), "fatal"),
        (("runs", 0, "results", 0, "message"), {}),
        (("runs", 0, "results", 0, "locations", 0, "physicalLocation", "region", "startLine"), 0),
    ):
        bad = json.loads(json.dumps(good))
        node = bad
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        assert list(validator().iter_errors(bad)), path


def test_validate_sarif_on_a_broken_tree(tree: Callable, cli, monkeypatch) -> None:
    root = tree(BROKEN)
    monkeypatch.chdir(root)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    run = cli("validate", "--recipes", root, "--format", "sarif")
    assert run.code == 1  # errors found: the exit code does not change with the format
    log = json.loads(run.out)
    assert_valid(log)
    assert log["version"] == "2.1.0"
    (the_run,) = log["runs"]
    results = the_run["results"]
    text = cli("validate", "--recipes", root)
    # One result per finding of the text format, same messages, same places.
    lines = [x for x in text.err.splitlines() if ": error: " in x or ": warning: " in x]
    assert len(results) == len(lines) >= 2
    rules = [r["id"] for r in the_run["tool"]["driver"]["rules"]]
    assert rules == sorted(set(rules))
    for result in results:
        assert rules[result["ruleIndex"]] == result["ruleId"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert not location["artifactLocation"]["uri"].startswith("/")
        assert location["region"]["startLine"] >= 1
        line = next(x for x in lines if result["message"]["text"] in x)
        assert f":{location['region']['startLine']}:" in line
        assert f": {result['level']}: " in line
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert "sub%20dir/gpt.yaml" in uris  # percent-encoded, relative to the checkout's top


def test_validate_json_and_text_agree(tree: Callable, cli) -> None:
    root = tree(BROKEN)
    as_json = cli("validate", "--recipes", root, "--format", "json")
    assert as_json.code == 1
    data = json.loads(as_json.out)
    assert data["errors"] == sum(f["severity"] == "error" for f in data["findings"]) >= 1
    text = cli("validate", "--recipes", root)
    for f in data["findings"]:
        assert f"{f['file']}:{f['line']}:{f['column']}: {f['severity']}: {f['message']}" in text.err


def test_the_shipped_tree_gives_a_valid_log_without_errors(cli) -> None:
    run = cli("validate", "--format", "sarif")
    assert run.code == 0, run
    log = json.loads(run.out)
    assert_valid(log)
    results = log["runs"][0]["results"]
    assert all(r["level"] == "warning" for r in results)
    text = cli("validate")
    assert f"{len(results)} warning(s)" in text.err


def test_artifact_locations(tmp_path: Path) -> None:
    assert artifact_location(str(tmp_path / "a b" / "c.yaml"), tmp_path) == {
        "uri": "a%20b/c.yaml",
        "uriBaseId": "%SRCROOT%",
    }
    outside = artifact_location("/elsewhere/x.yaml", tmp_path)
    assert outside == {"uri": "file:///elsewhere/x.yaml"}


findings = st.lists(
    st.builds(
        Finding,
        location=st.builds(
            Location,
            st.sampled_from(["a.yaml", "b/c.yaml", "d e.yaml"]),
            st.integers(0, 50),
            st.integers(0, 9),
        ),
        severity=st.sampled_from(list(Severity)),
        code=st.sampled_from(["vocabulary", "vocabulary-typo", "yaml-duplicate-key"]),
        message=st.text(min_size=1, max_size=30),
    ),
    max_size=8,
)


@given(findings, st.randoms())
def test_any_findings_give_a_valid_log_in_one_byte_order(found: list, rnd) -> None:
    base = Path("/repo")
    text = render_sarif(found, version="0.1.0", base=base)
    shuffled = list(found)
    rnd.shuffle(shuffled)
    assert render_sarif(shuffled, version="0.1.0", base=base) == text
    log = json.loads(text)
    assert_valid(log)
    assert len(log["runs"][0]["results"]) == len(set(found))


@pytest.mark.parametrize("fmt", ["text", "json", "sarif"])
def test_formats_are_documented(cli, fmt: str) -> None:
    assert fmt in cli("validate", "--help").out


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
def test_findings_that_differ_only_in_severity_keep_one_order_whatever_the_hash_seed() -> None:
    # Findings are de-duplicated through a set, whose order follows the string
    # hash: the sort must decide between them, or the bytes change per process.
    code = (
        "from pathlib import Path\n"
        "from matrixgen.model.errors import Finding, Findings, Location, Severity\n"
        "from matrixgen.views.sarif import render_sarif\n"
        "found = Findings()\n"
        "for severity in Severity:\n"
        "    found.add(Location('a.yaml', 3, 1), 'platform', 'one message', severity)\n"
        "print([f.severity.value for f in found.sorted()])\n"
        "print(render_sarif(found.items, version='0.1.0', base=Path('/repo')))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in range(12)
    }
    assert len(outputs) == 1, outputs


_NAME_BYTES = st.binary(min_size=1, max_size=12).filter(lambda b: b"/" not in b and b"\0" not in b)


@given(st.lists(_NAME_BYTES, min_size=1, max_size=3))
def test_a_name_that_is_not_utf8_is_the_uri_of_its_bytes(parts: list[bytes]) -> None:
    """A file name read from the tree with surrogate escapes (not UTF-8) was a
    UnicodeEncodeError: its URI now holds its bytes, percent-encoded, ASCII."""
    from urllib.parse import unquote_to_bytes

    names = [p if p not in (b".", b"..") else p + b"x" for p in parts]
    base = Path("/top")
    file = os.path.join("/top", *(os.fsdecode(n) for n in names))
    uri = artifact_location(file, base)["uri"]
    assert uri.isascii() and unquote_to_bytes(uri) == b"/".join(names)
    outside = artifact_location(os.path.join("/elsewhere", os.fsdecode(names[0])), base)["uri"]
    assert outside.isascii() and unquote_to_bytes(outside) == b"file:///elsewhere/" + names[0]


def test_validate_sarif_with_a_file_name_that_is_not_utf8(tmp_path: Path, cli, monkeypatch) -> None:
    root = tmp_path / "recipes"
    root.mkdir()
    (root / os.fsdecode(b"bad\xff.yaml")).write_bytes(b"foo: [\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    run = cli("validate", "--recipes", root, "--format", "sarif")
    assert run.code == 1 and "Traceback" not in run.err, run
    log = json.loads(run.out)
    assert_valid(log)
    uris = [
        r["locations"][0]["physicalLocation"]["artifactLocation"] for r in log["runs"][0]["results"]
    ]
    assert {"uri": "recipes/bad%FF.yaml", "uriBaseId": "%SRCROOT%"} in uris
    # The text and JSON formats show the name with its escape, as the log reads it.
    assert "recipes/bad\\udcff.yaml:" in cli("validate", "--recipes", root).err
