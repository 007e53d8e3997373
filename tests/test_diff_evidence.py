"""The evidence beside each quarantine entry the diff names, from a real results
store (the fixture project's pytest runs, ingested), escaped for the comment."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import markdown_it
import orjson
import pytest

from matrixgen.diff.comment import render_markdown
from matrixgen.diff.evidence import evidence_of, listed_entries
from matrixgen.diff.model import LIFTED, QuarantineChange, SelectionDiff, TargetDiff
from matrixgen.diff.render import render_text
from matrixgen.model.jobs import QuarantineMark
from tests.diff_fixtures import target
from tests.emit_fixtures import make_job as job
from tests.gitrepo import GitRepo
from tests.results_fixtures import TODAY

SHIPPED = Path(__file__).resolve().parents[1] / "recipes"
ASYNC_ENTRY = "ut-async-save-flaky-dev"
EP8_ENTRY = "moe-ep8-etp1-fp8-h100"


def shipped_files() -> dict[str, str]:
    return {
        p.relative_to(SHIPPED).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(SHIPPED.rglob("*.yaml"))
    }


@pytest.fixture
def branch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    """The shipped tree at main; the working tree lifts the async-save deselect
    and lets the EP8 FP8 case run as allow-failure."""
    monkeypatch.setenv("MATRIXGEN_TODAY", TODAY)
    monkeypatch.delenv("MATRIXGEN_RESULTS_DB", raising=False)
    repo = GitRepo(tmp_path / "repo")
    files = shipped_files()
    repo.commit(files)
    text = files["quarantine.yaml"]
    start = text.index("  # One unit test is flaky in dev only")
    end = text.index("  # Two H100 EP8 cases hang")
    text = text[:start] + text[end:]
    ep8 = text.index(f"id: {EP8_ENTRY}")
    skip = text.index("action: skip", ep8)
    text = text[:skip] + "action: allow-failure" + text[skip + len("action: skip") :]
    repo.write({"quarantine.yaml": text})
    monkeypatch.chdir(repo.top)
    return repo


def rendered_text(markdown: str) -> str:
    """What a reader sees: the comment's text, escapes resolved."""
    tokens = markdown_it.MarkdownIt("commonmark").enable("table").parse(markdown)
    parts = []
    for token in tokens:
        for child in token.children or []:
            if child.type in ("text", "code_inline"):
                parts.append(child.content)
        if token.type == "inline":
            parts.append("\n")
    return "".join(parts)


def test_markdown_shows_each_entrys_evidence(
    branch: GitRepo, evidence_store: Path, cli: Callable[..., Any]
) -> None:
    run = cli("diff", "HEAD", "--format", "markdown", "--db", str(evidence_store))
    assert run.code == 0, run.err
    # Escaped in the source, as the reader sees it once rendered.
    assert r"— evidence: passed all 24 runs on dgx\_h100/dev since 2026\-11\-02" in run.out, run.out
    seen = rendered_text(run.out)
    lifted = next(line for line in seen.splitlines() if line.startswith("lifted"))
    assert ASYNC_ENTRY in lifted
    assert lifted.endswith("— evidence: passed all 24 runs on dgx_h100/dev since 2026-11-02")
    changed = next(line for line in seen.splitlines() if line.startswith("action changed"))
    assert EP8_ENTRY in changed
    assert changed.endswith("— evidence: no results in the last 30 days")
    run = cli("diff", "HEAD", "--format", "json", "--db", str(evidence_store))
    assert json.loads(run.out)["evidence"] == {
        EP8_ENTRY: "no results in the last 30 days",
        ASYNC_ENTRY: "passed all 24 runs on dgx_h100/dev since 2026-11-02",
    }
    run = cli("diff", "HEAD", "--db", str(evidence_store))
    assert "evidence (results store):\n" in run.out
    assert f"  {ASYNC_ENTRY}: passed all 24 runs on dgx_h100/dev since 2026-11-02\n" in run.out


def test_without_a_store_no_evidence(branch: GitRepo, cli: Callable[..., Any]) -> None:
    assert not (branch.top / ".matrixgen").exists()
    run = cli("diff", "HEAD", "--format", "markdown")
    assert run.code == 0, run.err
    assert "evidence" not in run.out
    assert "evidence" not in json.loads(cli("diff", "HEAD", "--format", "json").out)


def test_the_default_store_is_read_when_it_exists(
    branch: GitRepo, evidence_store: Path, cli: Callable[..., Any]
) -> None:
    import shutil

    (branch.top / ".matrixgen").mkdir()
    shutil.copyfile(evidence_store, branch.top / ".matrixgen" / "results.db")
    run = cli("diff", "HEAD", "--format", "markdown")
    assert "— evidence: passed all 24 runs" in run.out


def test_entries_are_read_from_the_marks_combined_or_not() -> None:
    both = QuarantineMark(id="a, b", tracker="#1, #2", action="skip", kind="broken")
    assert evidence_of(both, {"a": "failed 1 of 2 runs"}) == "a: failed 1 of 2 runs"
    assert evidence_of(both, {"a": "x", "b": "y"}) == "a: x; b: y"
    one = QuarantineMark(id="a", tracker="#1", action="skip", kind="broken")
    assert evidence_of(one, {"a": "x"}) == "x" and evidence_of(one, {}) is None
    assert listed_entries(SelectionDiff(base="a", head="b", targets=())) == []


def test_entries_are_listed_from_changes_and_from_added_and_removed_jobs() -> None:
    def mark(entry: str) -> QuarantineMark:
        return QuarantineMark(id=entry, tracker="#1", action="skip", kind="broken")

    change = QuarantineChange(LIFTED, job("a", quarantine=mark("old, both")), job("a"))
    moved = TargetDiff(
        target("github", "L1"),
        added=(job("b", quarantine=mark("added")), job("c")),
        removed=(job("d", quarantine=mark("removed, both")),),
        quarantine=(change,),
    )
    diff = SelectionDiff(base="a", head="b", targets=(moved,))
    assert listed_entries(diff) == ["added", "both", "old", "removed"]


def test_the_text_report_escapes_the_evidence() -> None:
    diff = SelectionDiff(
        base="a" * 40, head="worktree", targets=(), evidence={"e": "ok\n\x1b[31mforged"}
    )
    text = render_text(diff)
    assert "\x1b" not in text and "forged\n" in text and "ok\\n" in text
    assert "evidence" not in render_markdown(diff)  # no entry listed, nothing to say


def test_a_store_that_cannot_be_read_is_an_error(
    branch: GitRepo, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    from matrixgen.model.errors import ExitCode

    missing = tmp_path / "nowhere" / "results.db"
    run = cli("diff", "HEAD", "--format", "markdown", "--db", str(missing))
    assert run.code == ExitCode.RESULTS_STORE and "no results store at" in run.err
    branch.write({"quarantine.yaml": (SHIPPED / "quarantine.yaml").read_text()})
    run = cli("diff", "HEAD", "--db", str(missing))  # no entry to show: still an error
    assert run.code == ExitCode.RESULTS_STORE
    assert "Traceback" not in run.err


def test_a_store_the_branch_commits_is_never_read(
    branch: GitRepo, evidence_store: Path, cli: Callable[..., Any]
) -> None:
    """A pull request can commit `.matrixgen/results.db` (git add -f) full of
    forged green runs: the diff must not show them beside a lifted entry."""
    import shutil

    (branch.top / ".matrixgen").mkdir()
    shutil.copyfile(evidence_store, branch.top / ".matrixgen" / "results.db")
    branch.git("add", "-f", ".matrixgen/results.db")
    run = cli("diff", "HEAD", "--format", "markdown")
    assert run.code == 0, run.err
    assert "evidence" not in run.out
    assert run.err.count("is tracked by git, so it is not read as the results store") == 1
    branch.commit(message="commit the forged store")  # committed as well as staged
    run = cli("diff", "HEAD~1", "--format", "json")
    assert run.code == 0 and "evidence" not in json.loads(run.out)
    # Given explicitly, the same file is read: whoever runs the command chose it.
    run = cli("diff", "HEAD~1", "--format", "json", "--db", ".matrixgen/results.db")
    assert ASYNC_ENTRY in orjson.loads(run.out)["evidence"]  # strict JSON: no NaN, Infinity


@pytest.mark.parametrize(
    "content",
    [b"not a database, just text\n", b"SQLite format 3\x00" + b"\xff" * 200, b"\x00" * 4096],
)
def test_a_file_that_is_not_a_store_is_a_clear_error(
    branch: GitRepo, tmp_path: Path, content: bytes, cli: Callable[..., Any]
) -> None:
    from matrixgen.model.errors import ExitCode

    path = tmp_path / "results.db"
    path.write_bytes(content)
    run = cli("diff", "HEAD", "--db", str(path))
    assert run.code == ExitCode.RESULTS_STORE, run
    assert "Traceback" not in run.err and f"results store sqlite:///{path}: " in run.err
    assert len(run.err.splitlines()) == 1
    assert path.read_bytes() == content  # read-only: nothing written to it


def test_a_store_whose_table_is_a_recursive_view_is_refused(
    branch: GitRepo, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    import sqlite3
    import time

    from matrixgen.model.errors import ExitCode

    path = tmp_path / "results.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE matrixgen_schema (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO matrixgen_schema VALUES (1)")
        conn.execute(
            "CREATE VIEW runs AS WITH RECURSIVE r(id) AS (SELECT 1 UNION ALL "
            "SELECT id + 1 FROM r) SELECT id, '' AS run_id, NULL AS commit_sha, "
            "0 AS finished_at, 0 AS ingested_at FROM r"
        )
    conn.close()
    start = time.monotonic()
    run = cli("diff", "HEAD", "--db", str(path))
    assert time.monotonic() - start < 30
    assert run.code == ExitCode.RESULTS_STORE, run
    assert "holds a view runs, which a matrixgen store never has" in run.err


def test_a_default_store_reached_through_a_link_is_never_read(
    branch: GitRepo, evidence_store: Path, cli: Callable[..., Any]
) -> None:
    """A committed `.matrixgen` link could lead git's check elsewhere."""
    import shutil

    (branch.top / "elsewhere").mkdir()
    shutil.copyfile(evidence_store, branch.top / "elsewhere" / "results.db")
    (branch.top / ".matrixgen").symlink_to("elsewhere")
    run = cli("diff", "HEAD", "--format", "markdown")
    assert run.code == 0 and "evidence" not in run.out
    assert "is reached through a symbolic link, so it is not read" in run.err
