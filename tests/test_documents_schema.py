"""The published JSON Schemas are made from the Structs that declare each
document: the committed files are what `python -m matrixgen.documents` writes,
they accept and refuse what the hand-written ones did (tests/data/schema-before/),
each rule has its example on both sides, and a field added to a Struct alone is
read, checked, listed and written."""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matrixgen.documents.published import PUBLISHED, schema_text
from matrixgen.documents.schema import error_path, json_schema
from tests.schema_fixtures import (
    EDGE_VALUES,
    REPO,
    add_toy_field,
    add_toy_verdict,
    before,
    copy_checkout,
    corpus,
    nodes,
    removed,
    replaced,
    schema_words,
    toy_field_carried,
    toy_verdict_carried,
    trimmed,
)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_committed_schema_is_the_generated_one(name: str) -> None:
    committed = (REPO / "schema" / f"{name}.schema.json").read_text(encoding="utf-8")
    assert committed == schema_text(name), f"run `python -m matrixgen.documents` ({name})"


def test_the_check_sees_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from matrixgen.documents.published import main

    for name in PUBLISHED:
        (tmp_path / f"{name}.schema.json").write_text(schema_text(name), encoding="utf-8")
    assert main(["--check", "--dir", str(tmp_path)]) == 0
    stale = tmp_path / f"{sorted(PUBLISHED)[0]}.schema.json"
    stale.write_text(stale.read_text(encoding="utf-8").replace('"type"', '"typ"', 1))
    capsys.readouterr()
    assert main(["--check", "--dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"differs: {stale}\n"  # the stale file, and only it
    assert main(["--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().err == f"wrote: {stale}\n"
    assert main(["--check", "--dir", str(tmp_path)]) == 0


@cache
def _new(name: str) -> Any:
    schema = json_schema(PUBLISHED[name])
    return jsonschema.validators.validator_for(schema)(schema)


# --------------------------------------------------------------------------- old and new agree


def _changed(
    doc: Any, steps: list[tuple[int, int, int]], values: list[Any], names: list[str]
) -> Any:
    """`doc` after each step: (which node, what change, which value or name)."""
    for node_pick, kind, pick in steps:
        found = list(nodes(doc))
        path, value = found[node_pick % len(found)]
        if kind == 0:
            doc = replaced(doc, path, values[pick % len(values)])
        elif kind == 1 and path:
            doc = removed(doc, path)
        elif kind == 2 and isinstance(value, dict):
            doc = replaced(doc, (*path, names[pick % len(names)]), values[pick % len(values)])
        elif kind == 3 and isinstance(value, list) and value:
            doc = replaced(doc, path, [*value, value[pick % len(value)]])
    return doc


STEPS = st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 3), st.integers(0, 10_000)),
    min_size=1,
    max_size=3,
)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(0, 10_000), steps=STEPS)
@example(which=0, steps=[(0, 2, 0)])  # an unknown key at the top
@example(which=0, steps=[(1, 0, 1)])  # the first value null
@example(which=0, steps=[(5, 0, 5)])  # a name with a line break
@example(which=0, steps=[(6, 1, 0)])  # a key removed
@example(which=0, steps=[(3, 3, 0)])  # a list item twice
def test_the_generated_schema_accepts_and_refuses_what_the_written_one_did(
    name: str, which: int, steps: list[tuple[int, int, int]]
) -> None:
    documents = corpus(name)
    old, new = before(name), _new(name)
    words, names = schema_words(old.schema)
    values = [*EDGE_VALUES, *words]
    where, doc = documents[which % len(documents)]
    changed = _changed(trimmed(doc), steps, values, [*names, "zz"])
    assert old.is_valid(changed) == new.is_valid(changed), (where, steps, changed)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_corpus_reads_alike_on_both_sides(name: str) -> None:
    documents = corpus(name)
    assert documents
    old, new = before(name), _new(name)
    for where, doc in documents:
        assert old.is_valid(doc) and new.is_valid(doc), where


# --------------------------------------------------------------------------- each rule


def _entry(**changes: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": "ep8-muon",
        "tracker": "#7201",
        "kind": "flaky",
        "action": "skip",
        "match": {"test_case": "ep8_muon"},
        "owner": "alice",
        "reason": "hangs",
    }
    for key, value in changes.items():
        if value is ...:
            del entry[key]
        else:
            entry[key] = value
    return {"entries": [entry]}


QUARANTINE_RULES: list[tuple[str, Any, bool]] = [
    ("the smallest entry", _entry(), True),
    ("no entries at all", {"entries": []}, True),
    ("entries missing", {}, False),
    ("entries null", {"entries": None}, False),
    ("an unknown top-level key", {"entries": [], "zz": 1}, False),
    ("an unknown entry key", _entry(colour="red"), False),
    ("id of 128 characters", _entry(id="a" * 128), True),
    ("id of 129 characters", _entry(id="a" * 129), False),
    ("id with a line break after it", _entry(id="a\n"), False),
    ("id starting with a dash", _entry(id="-a"), False),
    ("id with a plus and a dot", _entry(id="a.b+c_d-e"), True),
    ("tracker missing", _entry(tracker=...), False),
    ("tracker empty", _entry(tracker=""), False),
    ("tracker null", _entry(tracker=None), False),
    ("owner missing", _entry(owner=...), False),
    ("reason missing", _entry(reason=...), False),
    ("reason empty", _entry(reason=""), False),
    ("kind unknown", _entry(kind="flakey"), False),
    ("action unknown", _entry(action="silence"), False),
    ("deselect without node ids", _entry(action="deselect"), False),
    ("deselect with a node id", _entry(action="deselect", node_ids=["t/a.py::b"]), True),
    ("mute with a node id and parameters", _entry(action="mute", node_ids=["a::b[x-1]"]), True),
    ("skip with node ids", _entry(node_ids=["t/a.py::b"]), False),
    ("a bare path as node id", _entry(action="mute", node_ids=["tests/a.py"]), False),
    ("a node id with a line break", _entry(action="mute", node_ids=["a::b\n"]), False),
    ("node ids empty", _entry(action="mute", node_ids=[]), False),
    ("a node id twice", _entry(action="mute", node_ids=["a::b", "a::b"]), False),
    ("where a system", _entry(where=["gitlab"]), True),
    ("where a system and scope", _entry(where=["github/L1", "gitlab/mr-slim"]), True),
    ("where a system and no scope after the slash", _entry(where=["gitlab/"]), False),
    ("where an unknown system", _entry(where=["jenkins/mr"]), False),
    ("where a scope with a blank", _entry(where=["gitlab/m r"]), False),
    ("where empty", _entry(where=[]), False),
    ("where twice", _entry(where=["gitlab", "gitlab"]), False),
    ("match without test case", _entry(match={"model": "gpt"}), False),
    (
        "match with every key",
        _entry(
            match={
                "model": "gpt",
                "test_case": "t*",
                "platforms": ["dgx_h100"],
                "environments": ["dev"],
                "tags": ["x"],
            }
        ),
        True,
    ),
    ("match model empty", _entry(match={"test_case": "t", "model": ""}), False),
    ("match model null", _entry(match={"test_case": "t", "model": None}), False),
    ("match platforms empty", _entry(match={"test_case": "t", "platforms": []}), False),
    (
        "match platforms with an empty name",
        _entry(match={"test_case": "t", "platforms": [""]}),
        False,
    ),
    ("match an unknown key", _entry(match={"test_case": "t", "platform": ["x"]}), False),
    ("added a date", _entry(added="2025-01-31"), True),
    ("added one digit short", _entry(added="2025-1-31"), False),
    ("expires with a line break after it", _entry(expires="2025-01-31\n"), False),
    ("expires null", _entry(expires=None), False),
]


@pytest.mark.parametrize(
    ("what", "document", "valid"), QUARANTINE_RULES, ids=[r[0] for r in QUARANTINE_RULES]
)
def test_each_quarantine_rule_on_both_sides(what: str, document: Any, valid: bool) -> None:
    assert before("quarantine").is_valid(document) is valid, what
    assert _new("quarantine").is_valid(document) is valid, what


VOCABULARY = {"platforms": ["dgx_h100"], "environments": ["dev"], "scopes": {"gitlab": ["mr"]}}


def _config(**sections: Any) -> dict[str, Any]:
    """A format_version 2 config with the smallest vocabulary, and `sections`."""
    return {"format_version": 2, "vocabulary": dict(VOCABULARY), **sections}


def _target(**settings: Any) -> dict[str, Any]:
    target = {"system": "gitlab", "scope": "mr", "platform": "dgx_h100", "environment": "dev"}
    return _config(targets={"t": {**target, **settings}})


PIN = {"repository": "r", "tag": "26.09"}
CONFIG_RULES: list[tuple[str, Any, bool]] = [
    ("the smallest v2 config", _config(), True),
    ("a v1 config of settings only", {"quarantine": {"grace_days": 3}}, True),
    ("format_version without vocabulary", {"format_version": 2}, False),
    ("vocabulary without format_version", {"vocabulary": VOCABULARY}, False),
    ("targets without vocabulary", {"targets": {}}, False),
    ("format_version 1", {"format_version": 1, "vocabulary": VOCABULARY}, False),
    ("an unknown top-level key", _config(colour=1), False),
    ("vocabulary scopes of an unknown system", _config(vocabulary={**VOCABULARY,
        "scopes": {"jenkins": ["mr"]}}), False),
    ("vocabulary scopes empty", _config(vocabulary={**VOCABULARY, "scopes": {}}), False),
    ("a platform twice", _config(vocabulary={**VOCABULARY, "platforms": ["a", "a"]}), False),
    ("a platform with a line break", _config(vocabulary={**VOCABULARY,
        "platforms": ["a\n"]}), False),
    ("cadences known", _config(vocabulary={**VOCABULARY, "cadences": ["pr", "weekly"]}), True),
    ("a cadence unknown", _config(vocabulary={**VOCABULARY, "cadences": ["hourly"]}), False),
    ("defaults at their bounds", _config(defaults={"time_limit": 1, "max_jobs": 500000}), True),
    ("max_jobs past the ceiling", _config(defaults={"max_jobs": 500001}), False),
    ("n_repeat 0", _config(defaults={"n_repeat": 0}), False),
    ("n_repeat true", _config(defaults={"n_repeat": True}), False),
    ("a platform's facts", _config(platforms={"p": {"arch": "arm64", "counted": False,
        "alias_of": "q", "runner_tags": ["x"], "cluster": "c", "gpu_hour_weight": 0.5}}), True),
    ("an unknown arch", _config(platforms={"p": {"arch": "x86"}}), False),
    ("a gpu_hour_weight of 0", _config(platforms={"p": {"gpu_hour_weight": 0}}), False),
    ("one image for every arch", _config(images={"gitlab": PIN}), True),
    ("an image per arch", _config(images={"gitlab": {"amd64": PIN, "arm64": PIN}}), True),
    ("an image without tag", _config(images={"gitlab": {"repository": "r"}}), False),
    ("an image and an arch's", _config(images={"gitlab": {**PIN, "amd64": PIN}}), False),
    ("an arch's pin and a tag", _config(images={"gitlab": {"amd64": PIN, "tag": "t"}}), False),
    ("no pin at all", _config(images={"gitlab": {}}), False),
    ("an unknown arch's pin", _config(images={"gitlab": {"x86": PIN}}), False),
    ("a tag with a blank", _config(images={"github": {"repository": "r", "tag": "a b"}}), False),
    ("a version with a line break", _config(images={"version": "26.09\n"}), False),
    ("an environment's pins", _config(images={"environments": {"lts": {"gitlab": PIN}}}), True),
    ("an environment with no pin", _config(images={"environments": {"lts": {}}}), False),
    ("an env pin", _config(pins={"nvte": {"env": {"NVTE_X": 0}}}), True),
    ("a pin of neither env nor args", _config(pins={"p": {"reason": "r"}}), False),
    ("a pin's env name", _config(pins={"p": {"env": {"1X": "a"}}}), False),
    ("a pin's name with a line break", _config(pins={"p\n": {"args": ["--x"]}}), False),
    ("an exclude of nothing", _config(pins={"p": {"args": ["--x"], "exclude": {}}}), False),
    ("system settings", _config(systems={"gitlab": {"retry": 1, "warmup": True}}), True),
    ("settings of an unknown system", _config(systems={"jenkins": {}}), False),
    ("an unknown setting", _config(systems={"github": {"colour": 1}}), False),
    ("a GitLab setting on GitHub", _config(systems={"github": {"retry": 1}}), False),
    ("a target", _target(), True),
    ("a target without scope", _target(scope=...), False),
    ("a target of an unknown system", _target(system="jenkins"), False),
    ("a target without system", _target(system=...), False),
    ("a target's cadence null", _target(cadence=None), True),
    ("a target's cadence unknown", _target(cadence="hourly"), False),
    ("a target's unknown key", _target(colour=1), False),
    ("a GitLab target's retry", _target(retry={"max": 2, "when": ["api_failure"]}), True),
    ("retry past GitLab's limit", _target(retry=3), False),
    ("retry of no max", _target(retry={"when": ["api_failure"]}), False),
    ("retry on an unknown reason", _target(retry={"max": 1, "when": ["tuesday"]}), False),
    ("a GitHub target's retry", _target(system="github", retry=1), False),
    ("a GitHub target's group", _target(system="github", group="l0_h100"), True),
    ("a group with a line break", _target(system="github", group="l0\n"), False),
    ("a blank launcher", _target(launcher="  "), False),
    ("a parent job of 129 characters", _target(parent_job="j" * 129), False),
    ("artifacts", _target(artifacts={"paths": ["a/"], "when": "always"}), True),
    ("artifacts when never", _target(artifacts={"when": "never"}), False),
    ("a timeout of 0", _target(timeout=0), False),
    ("a target named with a line break", _config(targets={"t\n": {}}), False),
    ("jet", {"jet": {"runner_tags": ["x"], "clusters": {"a": "b"}}}, True),
    ("jet clusters of numbers", {"jet": {"clusters": {"a": 1}}}, False),
    ("a tracker base", {"quarantine": {"tracker_base": "https://x/issues/"}}, True),
    ("a tracker base not http", {"quarantine": {"tracker_base": "ftp://x/"}}, False),
    ("a blank default owner", {"quarantine": {"default_owner": " "}}, False),
    ("grace_days -1", {"quarantine": {"grace_days": -1}}, False),
    ("references", {"references": {"templates": {"g": "{model}.json"}, "gating": ["t*"]}}, True),
    ("references without templates", {"references": {"root": "x"}}, False),
    ("a reference named with a blank", {"references": {"templates": {"g h": "x"}}}, False),
    ("gating twice", {"references": {"templates": {"g": "x"}, "gating": ["a", "a"]}}, False),
    ("changes", {"changes": {"ignore": ["docs/**"]}}, True),
    ("changes ignore ''", {"changes": {"ignore": [""]}}, False),
    ("decisions", _config(decisions={"gitlab": {"events": {"push": {"scope": "mr"}},
        "labels": [{"label": "x", "n_repeat": 1}]}}), True),
    ("decisions without events", _config(decisions={"gitlab": {"labels": []}}), False),
    ("an event rule's unknown key", _config(decisions={"gitlab": {"events": {"push": {
        "scope": "mr", "colour": 1}}}}), False),
    ("a label rule without label", _config(decisions={"gitlab": {"events": {"push": {}},
        "labels": [{"n_repeat": 1}]}}), False),
    ("a label rule's events empty", _config(decisions={"gitlab": {"events": {"push": {}},
        "labels": [{"label": "x", "events": []}]}}), False),
    ("graph external", {"graph": {"external": {"gitlab": ["generate"]}}}, True),
    ("graph external of an unknown system", {"graph": {"external": {"x": ["g"]}}}, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "document", "valid"), CONFIG_RULES, ids=[r[0] for r in CONFIG_RULES]
)
def test_each_config_rule_on_both_sides(what: str, document: Any, valid: bool) -> None:
    document = {k: v for k, v in document.items() if v is not ...}
    for target in (document.get("targets") or {}).values():
        for key in [k for k, v in target.items() if v is ...]:
            del target[key]
    assert before("config").is_valid(document) is valid, what
    assert _new("config").is_valid(document) is valid, what


def _recipe(version: int = 2, spec: Any = None, block: Any = None, **top: Any) -> dict[str, Any]:
    """A test recipe of one block and row; `block` and `spec` replace or add to the defaults."""
    base_spec = {"name": "{test_case}", "model": "gpt", "build": "img"}
    base_block = {"test_case": ["tc"], "products": [{"environment": ["dev"]}]}
    doc: dict[str, Any] = {
        "type": "basic",
        "format_version": version,
        "spec": {**base_spec, **(spec or {})},
        "products": [{**base_block, **(block or {})}],
    }
    for key, value in top.items():
        if value is ...:
            del doc[key]
        else:
            doc[key] = value
    return doc


def _row(**row: Any) -> dict[str, Any]:
    return _recipe(block={"products": [row]})


RECIPE_RULES: list[tuple[str, Any, bool]] = [
    ("a v2 test recipe", _recipe(), True),
    ("a v1 test recipe", _recipe(1), True),
    ("a build recipe", {"type": "build", "format_version": 1, "spec": {"name": "img"}}, True),
    ("a build recipe without a name", {"type": "build", "format_version": 2, "spec": {}}, False),
    ("a test recipe without a build", _recipe() | {"spec": {"name": "n", "model": "m"}}, False),
    ("no format_version", _recipe(format_version=...), False),
    ("format_version 3", _recipe(3), False),
    ("format_version as text", _recipe(format_version="2"), False),
    ("an unknown type", _recipe(type="check"), False),
    ("no spec", {k: v for k, v in _recipe().items() if k != "spec"}, False),
    ("a v1 unknown top-level key", _recipe(1, colour=1), True),
    ("a v2 unknown top-level key", _recipe(colour=1), False),
    ("maintainers of numbers", _recipe(maintainers=[3]), False),
    ("v1 products null", _recipe(1, products=None), True),
    ("v2 products null", _recipe(products=None), False),
    ("v2 products empty", _recipe(products=[]), False),
    ("v1 two test cases", _recipe(1, block={"test_case": ["a", "b"]}), True),
    ("v2 two test cases", _recipe(block={"test_case": ["a", "b"]}), False),
    ("v2 an empty test case", _recipe(block={"test_case": [""]}), False),
    ("v1 a block of products null", _recipe(1, block={"products": None}), False),
    ("v2 a block without products", {**_recipe(), "products": [{"test_case": ["tc"]}]}, False),
    ("v2 an unknown block key", _recipe(block={"colour": 1}), False),
    ("v1 an unknown block key", _recipe(1, block={"colour": 1}), True),
    ("a block cadence", _recipe(block={"cadence": ["pr", "weekly"]}), True),
    ("a cadence unknown", _recipe(block={"cadence": ["hourly"]}), False),
    ("a cadence empty", _recipe(block={"cadence": []}), False),
    ("v2 an empty row", _row(), False),
    ("v1 an empty row", _recipe(1, block={"products": [{}]}), True),
    ("v2 a declared axis", _row(precision=["bf16", 8, True]), True),
    ("v2 a declared axis empty", _row(precision=[]), False),
    ("v1 an axis empty", _recipe(1, block={"products": [{"precision": []}]}), True),
    ("an axis of a mapping", _row(precision=[{"a": 1}]), False),
    ("an axis not a list", _row(environment="dev"), False),
    ("n_repeat 0", _row(n_repeat=[0]), False),
    ("gpus 1", _row(gpus=[1]), True),
    ("allow_failure a boolean list", _row(allow_failure=[True]), True),
    ("allow_failure of text", _row(allow_failure=["yes"]), False),
    ("a row's env", _row(env={"NVTE_X": 1, "B": True}), True),
    ("a row's env name", _row(env={"1B": "x"}), False),
    ("a row's args", _row(args=["--a"]), True),
    ("a row's args of numbers", _row(args=[1]), False),
    ("a row's paths empty", _row(paths=[]), False),
    ("a row's references", _row(references={"skip": "all", "reason": "unit tests"}), True),
    ("references skip names", _row(references={"skip": ["golden"], "reason": "r"}), True),
    ("references skip some", _row(references={"skip": "some", "reason": "r"}), False),
    ("references with a blank reason", _row(references={"skip": "all", "reason": " "}), False),
    ("references without reason", _row(references={"skip": "all"}), False),
    ("a spec's x- key", _recipe(spec={"x-owner": {"a": 1}}), True),
    ("a spec's unknown key", _recipe(spec={"owner": "a"}), False),
    ("a v1 spec's unknown key", _recipe(1, spec={"owner": "a"}), True),
    ("a spec's nodes 0", _recipe(spec={"nodes": 0}), False),
    ("a spec's gpus 0", _recipe(spec={"gpus": 0}), True),
    ("a spec's platforms as text", _recipe(spec={"platforms": "dgx_h100"}), True),
    ("a spec's platforms as a list", _recipe(spec={"platforms": ["dgx_h100"]}), True),
    ("a spec's platforms a number", _recipe(spec={"platforms": 1}), False),
    ("a spec's artifacts of lists", _recipe(spec={"artifacts": {"a": ["x"]}}), False),
    ("a spec's needs of text", _recipe(spec={"needs": "warm"}), False),
    ("a spec's source", _recipe(spec={"source": {"a": [1]}}), True),
    ("a spec's always", _recipe(spec={"always": True}), True),
    ("a spec's name empty", _recipe(spec={"name": ""}), False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "document", "valid"), RECIPE_RULES, ids=[r[0] for r in RECIPE_RULES]
)
def test_each_recipe_rule_on_both_sides(what: str, document: Any, valid: bool) -> None:
    assert before("recipe").is_valid(document) is valid, what
    assert _new("recipe").is_valid(document) is valid, what


# --------------------------------------------------------------------------- error paths


@pytest.mark.parametrize(
    ("message", "keys", "text"),
    [
        ("Expected `str` - at `$.entries[0].match`", ["entries", 0, "match"], "Expected `str`"),
        (
            "Object missing required field `id` - at `$[3]`",
            [3],
            "Object missing required field `id`",
        ),
        ("Expected `int`, got `str`", [], "Expected `int`, got `str`"),
        ("Invalid value - at `$.a.b-c[12].x_y`", ["a", "b-c", 12, "x_y"], "Invalid value"),
    ],
)
def test_msgspec_error_paths_read_as_keys(message: str, keys: list[Any], text: str) -> None:
    assert error_path(message) == (keys, text)


def test_a_value_only_the_decoding_refuses_is_said_where_it_is() -> None:
    """A quoted date of no day: the schema's pattern takes it, msgspec does not;
    the entry is left out and the reason is a finding at the value, not silence."""
    from matrixgen.quarantine.model import parse_quarantine

    raw = (
        b"entries:\n"
        b"  - id: a\n    tracker: '#1'\n    kind: flaky\n    action: skip\n"
        b"    match: {test_case: t}\n    owner: o\n    reason: r\n"
        b"    expires: '2025-02-30'\n"
    )
    qfile = parse_quarantine(raw, "q.yaml")
    assert not qfile.entries
    assert [(str(f.location), f.code) for f in qfile.errors] == [("q.yaml:9:14", "schema")]
    assert "entries/0/expires" in qfile.errors[0].message


# --------------------------------------------------------------------------- a new field


def test_a_field_added_to_the_entry_struct_alone_is_read_checked_listed_and_written(
    tmp_path: Path,
) -> None:
    checkout = copy_checkout(tmp_path / "checkout")
    tree = tmp_path / "recipes"
    shutil.copytree(REPO / "recipes", tree)
    assert add_toy_field(checkout) == [
        "matrixgen/documents/quarantine.py",
        "schema/quarantine.schema.json",
    ]
    assert json.loads((checkout / "schema" / "quarantine.schema.json").read_text())["$defs"][
        "entry"
    ]["properties"]["team"] == {"type": "string", "minLength": 1}
    carried = toy_field_carried(checkout, tree)
    assert all(carried.values()), carried


def test_a_triage_verdict_added_in_two_files_is_counted_valid_and_shown(tmp_path: Path) -> None:
    """A new verdict is its enum line and words (results/triage.py) and its
    name in the published schema: every report of a triage loops over the
    verdicts, so none has to learn it."""
    checkout = copy_checkout(tmp_path / "checkout")
    assert add_toy_verdict(checkout) == [
        "matrixgen/results/triage.py",
        "schema/triage.schema.json",
    ]
    carried = toy_verdict_carried(checkout)
    assert carried and all(carried.values()), carried


def test_the_triage_schema_names_every_verdict() -> None:
    from matrixgen.results.triage import TriageVerdict

    schema = json.loads((REPO / "schema" / "triage.schema.json").read_text())
    names = [v.value for v in TriageVerdict]
    failure = schema["$defs"]["failure"] if "failure" in schema.get("$defs", {}) else None
    verdicts = json.dumps(schema)
    assert f'"enum": {json.dumps(names)}' in verdicts, failure
    assert schema["properties"]["summary"]["required"] == names


_STEP = st.one_of(
    st.from_regex(r"[a-z_][a-z0-9_-]{0,8}", fullmatch=True),
    st.integers(0, 99),
    st.just("*"),
)


@given(st.lists(_STEP, min_size=1, max_size=6))
@example(["platforms", "*", "gpu_hour_weight"])
@example(["targets", "*", "*", 0])
def test_a_mappings_unnamed_key_in_an_error_path_reads_as_a_star(keys: list[Any]) -> None:
    """msgspec writes the key of a dict[str, ...] it refused a value of as `[...]`:
    the path says `*` there (the finding is then located at the mapping), never a
    key made of its brackets and dots."""
    at = "".join(f"[{k}]" if isinstance(k, int) else "[...]" if k == "*" else f".{k}" for k in keys)
    assert error_path(f"Expected `float` > 0.0 - at `${at}`") == (keys, "Expected `float` > 0.0")


def test_a_weight_only_the_decoding_refuses_names_its_section() -> None:
    from matrixgen.documents.config import parse_config
    from matrixgen.model.errors import ConfigError

    raw = b"platforms:\n  a: {gpu_hour_weight: 1}\n  b: {gpu_hour_weight: .nan}\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, "matrixgen.yaml")
    (found,) = caught.value.findings
    assert found.message == "platforms/*/gpu_hour_weight: Expected `float` > 0.0", found
    assert (found.location.line, found.location.column) == (2, 3)


@given(st.integers(1, 1_000))  # an implicit key of YAML is at most 1,024 characters
@example(250)  # past the cut of a message, at the quoted value
def test_a_long_value_keeps_what_the_schema_expected_in_its_message(length: int) -> None:
    """A message quotes the value it refuses: a long value is shortened there,
    so that the message still says what was expected (cut after the value, it
    said nothing)."""
    from matrixgen.documents.config import parse_config
    from matrixgen.model.errors import ConfigError

    raw = b"pins:\n  " + b"p" * length + b"!: {env: {A: b}, reason: r}\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, "matrixgen.yaml")
    (found,) = [f for f in caught.value.findings if "does not match" in f.message]
    assert found.message.startswith("pins: 'p"), found
    assert " does not match '^[A-Za-z0-9]" in found.message, found
    assert len(found.message) <= len("pins: ") + 200
