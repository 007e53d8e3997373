"""sha256 of every file and document the commands emit for the shipped tree and
the Megatron-LM tree, to prove that a change meant to be invisible is.

The digests in tests/fixtures/golden-outputs.json were computed by running this
module on the code before a change (never typed by hand). Regenerate them
only when an output is meant to change, and say so in the commit:

    MATRIXGEN_MEGATRON_RECIPES=DIR python -m tests.golden_outputs --write

or, to take them from an earlier revision REV (the code a change must not
alter the output of):

    git archive REV | tar -x -C /tmp/ref && cp tests/golden_outputs.py /tmp/ref/tests/
    (cd /tmp/ref && python -m tests.golden_outputs) > tests/fixtures/golden-outputs.json

Each command runs in-process through `main`, with the quarantine day pinned, so
that expiry cannot change what is emitted.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from matrixgen.cli.main import main

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "golden-outputs.json"
SHIPPED = Path(__file__).resolve().parents[1] / "recipes"
DAY = "2026-12-01"

# Documents printed on stdout, by a name for the fixture: the JSON and YAML
# encoders of the commands, besides the files `generate --output-dir` writes.
STDOUT_COMMANDS = {
    "list.json": ["list", "--format", "json"],
    "list-all.json": ["list", "--format", "json", "--with-quarantined"],
    "list.yaml": ["list", "--format", "yaml"],
    "generate-summary.json": ["generate", "--format", "json", "--output-dir", "{out}"],
    "graph.json": ["graph", "--format", "json"],
    "stats.json": ["stats", "--format", "json"],
    "stats-cost.json": ["stats", "--cost", "--format", "json"],
    "pins.json": ["pins", "--format", "json"],
    "coverage.json": ["coverage", "--format", "json"],
    "decide.json": ["decide", "--event", "pull_request", "--format", "json"],
    "quarantine-list.json": ["quarantine", "list", "--format", "json"],
    "quarantine-audit.json": ["quarantine", "audit", "--format", "json"],
    "migrate.json": ["quarantine", "migrate", "--format", "json"],
    # The tables and Markdown written from each feature's one declaration.
    "generate-summary.txt": ["generate", "--output-dir", "{out}"],
    "stats.txt": ["stats"],
    "stats-cost.txt": ["stats", "--cost"],
    "coverage.txt": ["coverage"],
    "coverage.md": ["coverage", "--format", "markdown"],
    "decide.txt": ["decide", "--event", "pull_request", "--label", "Run functional tests"],
    "decide.md": ["decide", "--event", "pull_request", "--format", "markdown"],
    "quarantine-list.txt": ["quarantine", "list"],
    "quarantine-audit.txt": ["quarantine", "audit"],
}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# The day pinned; no tracker token (audit would ask the tracker) and no results
# store (stats --cost would read it).
PINNED = {"MATRIXGEN_TODAY": DAY, "GITHUB_TOKEN": None, "MATRIXGEN_RESULTS_DB": None}


@contextlib.contextmanager
def _pinned_day() -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in PINNED}
    for name, value in PINNED.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run(argv: list[str]) -> tuple[int, bytes]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue().encode("utf-8")


def digests(tree: Path) -> dict[str, str]:
    """{name: sha256} of every emitted file and printed document for one tree."""
    found: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="matrixgen-golden-") as tmp, _pinned_day():
        out = Path(tmp) / "out"
        code, _ = _run(["generate", "--recipes", str(tree), "--out", str(out)])
        found["generate.exit"] = str(code)
        for path in sorted(out.iterdir()):
            if path.is_file() and not path.name.startswith("."):
                found[f"out/{path.name}"] = _digest(path.read_bytes())
        for name, command in STDOUT_COMMANDS.items():
            argv = [a.replace("{out}", str(Path(tmp) / "out2")) for a in command]
            code, printed = _run([*argv, "--recipes", str(tree)])
            found[f"{name}.exit"] = str(code)
            found[name] = _digest(printed)
    return found


def trees() -> dict[str, Path | None]:
    megatron = os.environ.get("MATRIXGEN_MEGATRON_RECIPES")
    return {"shipped": SHIPPED, "megatron": Path(megatron) if megatron else None}


def main_cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {FIXTURE}")
    options = parser.parse_args()
    result = {}
    for name, tree in trees().items():
        if tree is None or not tree.is_dir():
            print(f"no {name} tree (set MATRIXGEN_MEGATRON_RECIPES)", file=sys.stderr)
            return 2
        result[name] = digests(tree)
    text = json.dumps(result, indent=2, sort_keys=True) + "\n"
    if options.write:
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        FIXTURE.write_text(text, encoding="utf-8")
        print(f"wrote {FIXTURE}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main_cli())
