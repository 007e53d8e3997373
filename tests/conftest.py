"""Shared fixtures: recipe trees written by the tests, and the real Megatron-LM
tree when `.ci/run` points MATRIXGEN_MEGATRON_RECIPES at it."""

from __future__ import annotations

import datetime as dt
import os
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from matrixgen.cli.main import main

# The evidence tests' real pytest runs and results store (session fixtures).
pytest_plugins = ("tests.evidence_fixtures",)

MEGATRON_ENV = "MATRIXGEN_MEGATRON_RECIPES"


def megatron_recipes_path() -> Path | None:
    value = os.environ.get(MEGATRON_ENV)
    if value:
        path = Path(value)
    else:
        path = Path(__file__).resolve().parents[2] / "shared" / "megatron-recipes"
    return path if path.is_dir() else None


@pytest.fixture
def megatron_dir() -> Path:
    path = megatron_recipes_path()
    if path is None:
        pytest.skip(f"the Megatron-LM recipe tree is absent (set {MEGATRON_ENV})")
    return path


# A day on which every entry of the shipped recipes/quarantine.yaml is in force
# (after each was added, before any expires). Tests that run the commands on the
# shipped tree check expiry against it, not against the calendar: the entries
# expire by design, and the suite must not start failing on that day.
SHIPPED_QUARANTINE_DAY = dt.date(2026, 12, 1)


@pytest.fixture
def pinned_today(monkeypatch: pytest.MonkeyPatch) -> dt.date:
    """Quarantine expiry, as `validate` (and every command that runs its checks)
    sees it, is checked against SHIPPED_QUARANTINE_DAY (through MATRIXGEN_TODAY,
    so subprocesses such as gitlab-ci-local's jobs see the same day)."""
    from matrixgen.quarantine.entries import TODAY_VARIABLE

    monkeypatch.setenv(TODAY_VARIABLE, SHIPPED_QUARANTINE_DAY.isoformat())
    return SHIPPED_QUARANTINE_DAY


def write_tree(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Write {relative path: text} below root; text is dedented."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Callable[[Mapping[str, str | bytes]], Path]:
    """tree({...}) writes a recipe tree in a fresh directory and returns it."""
    counter = iter(range(1_000_000))

    def make(files: Mapping[str, str | bytes]) -> Path:
        return write_tree(tmp_path / f"tree{next(counter)}", files)

    return make


class Run:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"Run(code={self.code}, out={self.out[:400]!r}, err={self.err[:800]!r})"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    """cli("list", "--recipes", d) runs the CLI in-process and captures its output."""

    def run(*args: str | Path) -> Run:
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run
