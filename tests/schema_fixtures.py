"""Documents to hold a generated schema against the one it replaced: the shipped
tree's, the test fixtures', the Megatron-LM tree's (when given), and every
document one small change away from each of them.

The schemas as they were written by hand, before the Structs declared them, are
kept in tests/data/schema-before/: only the tests read them.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

REPO = Path(__file__).resolve().parents[1]
BEFORE = REPO / "tests" / "data" / "schema-before"
SHIPPED = REPO / "recipes"

Path_ = tuple[str | int, ...]


@cache
def before(name: str) -> Any:
    """A validator of the schema as it was written by hand."""
    schema = json.loads((BEFORE / f"{name}.schema.json").read_text(encoding="utf-8"))
    return jsonschema.validators.validator_for(schema)(schema)


def plain(value: Any) -> Any:
    """YAML's dates as the text the schemas check (as the readers hand them over)."""
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _load(text: str) -> Any:
    return plain(yaml.safe_load(text))


def trimmed(doc: Any) -> Any:
    """A recipe cut to its first two blocks of two rows each: every rule of a
    block and a row is still there, at a fraction of the cost of changing and
    checking the whole file."""
    if not isinstance(doc, dict) or not isinstance(doc.get("products"), list):
        return doc
    blocks = [
        {**b, "products": b["products"][:2]}
        if isinstance(b, dict) and isinstance(b.get("products"), list)
        else b
        for b in doc["products"][:2]
    ]
    return {**doc, "products": blocks}


@cache
def corpus(name: str) -> list[tuple[str, Any]]:
    """(where from, document) of every known document of one kind (read once:
    leave them as they are)."""
    from tests.quarantine_fixtures import CONFIG, QUARANTINE
    from tests.tree_fixtures import HAND_TREE, v1_tree, v2_tree

    found: list[tuple[str, Any]] = []
    if name == "quarantine":
        found.append(("recipes/quarantine.yaml", _load((SHIPPED / "quarantine.yaml").read_text())))
        found.append(("quarantine_fixtures.QUARANTINE", _load(QUARANTINE)))
    elif name == "config":
        found.append(("recipes/matrixgen.yaml", _load((SHIPPED / "matrixgen.yaml").read_text())))
        found.append(("quarantine_fixtures.CONFIG", _load(CONFIG)))
        found.append(("tree_fixtures.v2_tree", _load(v2_tree("")["matrixgen.yaml"])))
    else:
        for path in sorted(SHIPPED.rglob("*.yaml")):
            if path.name not in ("matrixgen.yaml", "quarantine.yaml"):
                found.append((str(path.relative_to(REPO)), _load(path.read_text())))
        products = "  - test_case: [tc]\n    products:\n      - {environment: [dev], scope: [mr]}\n"
        for label, files in (("v1_tree", v1_tree(products)), ("v2_tree", v2_tree(products))):
            for rel, text in sorted(files.items()):
                if rel.endswith(".yaml") and rel not in ("matrixgen.yaml", "quarantine.yaml"):
                    found.append((f"tree_fixtures.{label}:{rel}", _load(text)))
        for rel, text in sorted(HAND_TREE.items()):
            if rel.endswith(".yaml") and rel not in ("matrixgen.yaml", "quarantine.yaml"):
                found.append((f"tree_fixtures.HAND_TREE:{rel}", _load(text)))
        megatron = os.environ.get("MATRIXGEN_MEGATRON_RECIPES")
        if megatron and Path(megatron).is_dir():
            for path in sorted(Path(megatron).rglob("*.yaml")):
                found.append((f"megatron:{path.relative_to(megatron)}", _load(path.read_text())))
    return [(where, doc) for where, doc in found if isinstance(doc, dict)]


def schema_words(schema: Any) -> tuple[list[Any], list[str]]:
    """Every enum and const value a schema names, and every property name:
    the values a change should try, since the schema tells them apart."""
    values: list[Any] = []
    names: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                if key == "enum" and isinstance(item, list):
                    values.extend(item)
                elif key == "const":
                    values.append(item)
                elif key == "properties" and isinstance(item, dict):
                    names.extend(item)
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    unique_values = list({json.dumps(v, sort_keys=True): v for v in values}.values())
    return unique_values, sorted(set(names))


# Values that sit on a rule's edge somewhere: empty, blank, a line break after a
# name, numbers at 0 and 1 and past them, the other types, dates well and badly
# written, node ids and places of the quarantine file, a 128- and 129-character id.
EDGE_VALUES: list[Any] = [
    None,
    "",
    " ",
    "x",
    "x\n",
    "x y",
    "\ufeffx",
    -1,
    0,
    1,
    2,
    3,
    500000,
    500001,
    0.5,
    True,
    False,
    [],
    ["x"],
    ["x", "x"],
    [1],
    {},
    {"x": 1},
    {"x": "y"},
    "2025-01-31",
    "2025-1-31",
    "2025-01-31\n",
    "tests/a.py::test_b",
    "tests/a.py",
    "tests/a.py::test_b\n",
    "github",
    "gitlab/mr",
    "gitlab/",
    "jenkins/mr",
    "#12",
    "https://x.invalid/1",
    "http://x.invalid/1",
    "ftp://x",
    "A" * 128,
    "A" * 129,
    "a_b",
    "_a",
    "9a",
    "l0-h100",
    "repo:tag",
    "x-extra",
]


def nodes(doc: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """(path, value) of every value in a document, the document itself first."""
    yield path, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from nodes(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from nodes(value, (*path, i))


def replaced(doc: Any, path: Path_, value: Any) -> Any:
    out = copy.deepcopy(doc)
    if not path:
        return value
    parent = out
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = copy.deepcopy(value)
    return out


def removed(doc: Any, path: Path_) -> Any:
    out = copy.deepcopy(doc)
    parent = out
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return out


def mutations(doc: Any, values: list[Any], names: list[str]) -> Iterator[tuple[str, Any]]:
    """(what changed, document) for every one-step change: each value replaced
    by each edge value, each key and list item removed, each mapping given one
    more key (every name the schema knows, and an unknown one), each list given
    its first item again."""
    for path, value in nodes(doc):
        for new in [*values, *EDGE_VALUES]:
            if new != value or type(new) is not type(value):
                yield f"{list(path)} = {new!r}", replaced(doc, path, new)
        if path:
            yield f"del {list(path)}", removed(doc, path)
        if isinstance(value, dict):
            for key in [*names, "zz", "x-extra"]:
                if key not in value:
                    yield f"{list(path)} + {key}", replaced(doc, (*path, key), "x")
                    yield f"{list(path)} + {key}: []", replaced(doc, (*path, key), ["x"])
        if isinstance(value, list) and value:
            yield f"{list(path)} + first again", replaced(doc, path, [*value, value[0]])


# --------------------------------------------------------------------------- a new field

# The field the experiment adds to a quarantine entry, as one line of its Struct.
TOY_FIELD = "team"
TOY_LINE = f"    {TOY_FIELD}: Annotated[str, Meta(min_length=1)] | None = None\n"
TOY_CHECK = """
import contextlib, io, json, sys
from pathlib import Path
from matrixgen.cli.main import main
from matrixgen.quarantine.model import entry_from_mapping, parse_quarantine
from matrixgen.quarantine.render import render_entry

tree = Path(sys.argv[1])
path = tree / "quarantine.yaml"
qfile = parse_quarantine(path.read_bytes(), str(path))
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    code = main(["quarantine", "list", "--format", "json", "--recipes", str(tree)])
listed = json.loads(out.getvalue()) if code == 0 else []
entry = {"id": "x", "tracker": "#1", "kind": "flaky", "action": "skip",
         "match": {"test_case": "t"}, "owner": "o", "reason": "r", "team": "infra"}
new, findings = entry_from_mapping(entry)
print(json.dumps({
    "file read without findings": not qfile.findings,
    "read onto the entry": getattr(qfile.entries[0], "team", None) == "infra",
    "listed by quarantine list --format json": bool(listed) and listed[0].get("team") == "infra",
    "checked as a new entry": new is not None and not findings,
    "written by the editor": "team: infra" in render_entry(entry, 2, 4, "\\n"),
}))
"""


def add_toy_field(checkout: Path) -> list[str]:
    """Add TOY_FIELD to the entry's Struct in a copy of the checkout (the one
    hand edit), write the schemas again as `python -m matrixgen.documents` does,
    and return every file that changed, relative to the checkout."""
    source = checkout / "matrixgen" / "documents" / "quarantine.py"
    with changed_files(checkout) as changed:
        text = source.read_text(encoding="utf-8")
        anchor = "class EntryFields("
        head, _, body = text.partition(anchor)
        fields_end = body.index("\n\n    SCHEMA")
        source.write_text(
            head + anchor + body[:fields_end] + "\n" + TOY_LINE.rstrip("\n") + body[fields_end:],
            encoding="utf-8",
        )
        write_again(checkout, "matrixgen.documents")
    return changed


def toy_field_carried(checkout: Path, tree: Path) -> dict[str, bool]:
    """Where the toy field, written into the first entry of `tree`'s quarantine
    file, is read, checked, listed and written, with the package of `checkout`."""
    path = tree / "quarantine.yaml"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("reason:"))
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    lines.insert(at + 1, f"{indent}{TOY_FIELD}: infra\n")
    path.write_text("".join(lines), encoding="utf-8")
    return run_in_checkout(checkout, TOY_CHECK, str(tree))


def _tracked(checkout: Path) -> list[Path]:
    return sorted(
        p
        for top in ("matrixgen", "schema", "docs")
        for p in (checkout / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )


# A triage verdict added in a copy of the checkout: its line in the enum, its
# words, and its name in the published schema (the two hand-edited files).
TOY_VERDICT_CHECK = """
import json, sys
from pathlib import Path
import jsonschema
from matrixgen.results.queries import RunFilter
from matrixgen.results.store import JobKey, RunRow
from matrixgen.results.triage import Failure, TriageReport, TriageVerdict
from matrixgen.results.triage_markdown import markdown, summary
from matrixgen.results.site import _triage_of
from matrixgen.util.values import json_value

verdict = TriageVerdict("retried")
run = RunRow(ref=1, run_id="7", commit="c", finished_at=0, git_ref="pr", source="gitlab")
job = JobKey(system="gitlab", scope="mr", platform="dgx_h100", environment="dev", model="gpt",
             test_case="t", tag="")
failure = Failure(job=job, node_id=None, metric=None, reason="failure: x", verdict=verdict,
                  evidence="retried and passed")
report = TriageReport(run=run, baseline=RunFilter(ref="main"), baseline_runs=(),
                      failures=(failure,), lift_candidates=())
document = json.loads(json.dumps(json_value(report)))
schema = json.loads(Path(sys.argv[1]).read_text())
print(json.dumps({
    "judged in the report's counts": document["summary"].get("retried") == 1,
    "valid against the published schema": not list(
        jsonschema.Draft202012Validator(schema).iter_errors(document)),
    "said by the text summary": "1 retried" in summary(report),
    "said by the Markdown comment": "1 retried" in markdown(report),
    "a section of the report's Triage page": "Retried after a failure (1)" in "".join(
        _triage_of(report)),
}))
"""


def add_toy_verdict(checkout: Path) -> list[str]:
    """Add the verdict `retried` to the triage verdicts in a copy of the checkout (its
    enum line and words in results/triage.py, its name in the schema's verdict
    vocabulary: the hand edits) and return every file that changed."""
    with changed_files(checkout) as changed:
        source = checkout / "matrixgen" / "results" / "triage.py"
        text = source.read_text(encoding="utf-8")
        enum_line = '    QUARANTINED = "quarantined"\n'
        words_line = '    TriageVerdict.QUARANTINED: ("Quarantined", "quarantined"),\n'
        assert enum_line in text and words_line in text
        text = text.replace(enum_line, enum_line + '    RETRIED = "retried"\n')
        text = text.replace(
            words_line,
            words_line + '    TriageVerdict.RETRIED: ("Retried after a failure", "retried"),\n',
        )
        source.write_text(text, encoding="utf-8")
        schema_path = checkout / "schema" / "triage.schema.json"
        schema = schema_path.read_text(encoding="utf-8")
        for old in ('"known", "quarantined"]', '"quarantined": {"type": "integer", "minimum": 0}'):
            assert old in schema
        schema = schema.replace('"known", "quarantined"]', '"known", "quarantined", "retried"]')
        schema = schema.replace(
            '"quarantined": {"type": "integer", "minimum": 0}',
            '"quarantined": {"type": "integer", "minimum": 0},\n'
            '        "retried": {"type": "integer", "minimum": 0}',
        )
        schema_path.write_text(schema, encoding="utf-8")
    return changed


def toy_verdict_carried(checkout: Path) -> dict[str, bool]:
    """Where a failure with the toy verdict is counted, valid and shown, with
    the package of `checkout`."""
    return run_in_checkout(
        checkout, TOY_VERDICT_CHECK, str(checkout / "schema" / "triage.schema.json")
    )


def run_in_checkout(checkout: Path, script: str, *args: str) -> dict[str, Any]:
    """What `script` prints as JSON, run by a fresh interpreter on the package
    of `checkout` (a copy made for an experiment), with `args`."""
    import subprocess
    import sys

    ran = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


@contextlib.contextmanager
def changed_files(checkout: Path) -> Iterator[list[str]]:
    """The files of the copy's package, schemas and docs that the block
    changes or adds, relative to the checkout and sorted (filled on exit)."""
    before = {p: p.read_bytes() for p in _tracked(checkout)}
    changed: list[str] = []
    yield changed
    changed += sorted(
        str(p.relative_to(checkout)) for p in _tracked(checkout) if p.read_bytes() != before.get(p)
    )


def write_again(checkout: Path, *modules: str) -> None:
    """Run each module's generator (`python -m MODULE`) on the copy's package."""
    import subprocess
    import sys

    for module in modules:
        subprocess.run(
            [sys.executable, "-m", module],
            cwd=checkout,
            env={**os.environ, "PYTHONPATH": str(checkout)},
            check=True,
            capture_output=True,
        )


def copy_checkout(dest: Path) -> Path:
    """A copy of the package, the schemas and the docs at `dest` (what an
    experiment edits, without touching the checkout), bytecode left out."""
    import shutil

    for top in ("matrixgen", "schema", "docs"):
        shutil.copytree(REPO / top, dest / top, ignore=shutil.ignore_patterns("__pycache__"))
    return dest
