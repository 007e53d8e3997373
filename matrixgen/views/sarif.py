"""Findings as SARIF 2.1.0, the format GitHub code scanning reads: one rule per
finding code used (sorted), one result per finding. A finding without a line
points at line 1: code scanning needs a line for every result."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from matrixgen.model.errors import Finding, Severity
from matrixgen.util.escape import json_for_log

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"


def artifact_location(file: str, base: Path) -> dict[str, str]:
    """`file` as code scanning wants it: relative to `base` (the checkout's top),
    with `/` separators and percent-encoding, else an absolute file URI. The
    name's bytes are encoded, so one that is not UTF-8 (read with surrogate
    escapes, `bad\\udcff.yaml`) is the URI of that very file (`bad%FF.yaml`)."""
    path = Path(os.path.abspath(file))
    top = Path(os.path.abspath(base))
    if path == top or top in path.parents:
        rel = PurePosixPath(*path.relative_to(top).parts)
        return {"uri": quote(os.fsencode(str(rel)), safe="/"), "uriBaseId": SRCROOT}
    return {"uri": path.as_uri()}


def _rule(code: str, severity: Severity) -> dict[str, Any]:
    words = code.replace("-", " ")
    return {
        "id": code,
        "name": "".join(w.capitalize() for w in code.split("-")),
        "shortDescription": {"text": f"matrixgen check: {words}"},
        "defaultConfiguration": {"level": severity.value},
    }


def sarif_report(findings: Sequence[Finding], *, version: str, base: Path) -> dict[str, Any]:
    """The SARIF log of one `validate` run."""
    ordered = sorted(set(findings), key=Finding.sort_key)
    # A code's default level: error when any of its findings is one.
    worst: dict[str, Severity] = {}
    for f in ordered:
        if worst.get(f.code) is not Severity.ERROR:
            worst[f.code] = f.severity
    codes = sorted(worst)
    index = {code: i for i, code in enumerate(codes)}
    results = []
    for f in ordered:
        region: dict[str, int] = {"startLine": max(f.location.line, 1)}
        if f.location.line and f.location.column:
            region["startColumn"] = f.location.column
        results.append(
            {
                "ruleId": f.code,
                "ruleIndex": index[f.code],
                "level": f.severity.value,
                "message": {"text": f.message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": artifact_location(f.location.file, base),
                            "region": region,
                        }
                    }
                ],
            }
        )
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "matrixgen",
                        "version": version,
                        "semanticVersion": version,
                        "rules": [_rule(code, worst[code]) for code in codes],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def render_sarif(findings: Sequence[Finding], *, version: str, base: Path) -> str:
    """The log as JSON text, in a spelling safe to print in a CI log (json_for_log)."""
    report = sarif_report(findings, version=version, base=base)
    return json_for_log(json.dumps(report, indent=2, ensure_ascii=False)) + "\n"
