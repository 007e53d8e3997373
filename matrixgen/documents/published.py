"""The documents whose JSON Schema is published in schema/, made from their Structs.

    python -m matrixgen.documents          # write schema/*.schema.json
    python -m matrixgen.documents --check  # exit 1 when a file differs

tests/test_documents_schema.py holds the committed files equal to what this writes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from matrixgen.documents.config_sections import ConfigDocument
from matrixgen.documents.quarantine import QuarantineDocument
from matrixgen.documents.recipe_fields import RECIPE
from matrixgen.documents.schema import json_schema

# Each published document: its file name in schema/ (NAME.schema.json) and its top level.
PUBLISHED: dict[str, Any] = {
    "config": ConfigDocument,
    "quarantine": QuarantineDocument,
    "recipe": RECIPE,
}


def schema_text(name: str) -> str:
    """The schema file of one document, as written (two-space indent, a final newline)."""
    return json.dumps(json_schema(PUBLISHED[name]), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parents[2] / "schema")
    options = parser.parse_args(argv)
    stale = []
    for name in PUBLISHED:
        path = options.dir / f"{name}.schema.json"
        text = schema_text(name)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path)
        if not options.check:
            path.write_text(text, encoding="utf-8")
        print(f"{'differs' if options.check else 'wrote'}: {path}", file=sys.stderr)
    return 1 if options.check and stale else 0
