"""What the commands emit for the shipped tree and the Megatron-LM tree is byte for
byte what it was before the speed-ups (digests in tests/fixtures/golden-outputs.json,
computed by tests/golden_outputs.py on the earlier code)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.golden_outputs import FIXTURE, SHIPPED, digests


def _expected(tree: str) -> dict[str, str]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))[tree]


def _compare(expected: dict[str, str], actual: dict[str, str]) -> None:
    changed = sorted(k for k in expected.keys() & actual.keys() if expected[k] != actual[k])
    assert not changed, f"outputs changed: {changed}"
    assert sorted(actual) == sorted(expected), "a different set of files was emitted"


def test_shipped_tree_outputs_are_unchanged() -> None:
    _compare(_expected("shipped"), digests(SHIPPED))


def test_megatron_tree_outputs_are_unchanged(megatron_dir: Path) -> None:
    _compare(_expected("megatron"), digests(megatron_dir))


def test_a_changed_output_is_noticed(tmp_path: Path) -> None:
    """The digests see a one-byte change of one emitted file (planted here by
    comparing a different tree against the shipped tree's digests)."""
    tree = tmp_path / "recipes"
    for path in SHIPPED.rglob("*"):
        if path.is_file():
            target = tree / path.relative_to(SHIPPED)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    config = tree / "matrixgen.yaml"
    text = config.read_text(encoding="utf-8")
    assert "time_limit: 2700" in text
    config.write_text(text.replace("time_limit: 2700", "time_limit: 2701", 1), encoding="utf-8")
    with pytest.raises(AssertionError, match="outputs changed"):
        _compare(_expected("shipped"), digests(tree))
