"""The command examples of README.md and docs/*.md, run on a copy of the shipped
tree and compared with what each page shows (tests/docs_examples.py says how a
page declares its set-up, and how excerpts and `...` are matched).

Why a harness of our own: prysk (cram's format) reads `.t` files, not Markdown,
and knows no excerpt; pytest-examples runs Python blocks, not shell transcripts.
MATRIXGEN_UPDATE_DOCS=1 rewrites the shown output from the real run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import docs_examples as de

pytestmark = pytest.mark.docs

PAGES = [de.REPO / "README.md", *sorted((de.REPO / "docs").glob("*.md"))]


def _name(path: Path) -> str:
    return str(path.relative_to(de.REPO))


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_example_of_the_page_prints_what_it_shows(page: Path, tmp_path: Path) -> None:
    mismatches, skipped = de.run_page(page, tmp_path / "checkout")
    for reason in skipped:  # said, not hidden: each skip names its reason in the page
        print(f"not run: {reason}")
    if mismatches and os.environ.get(de.UPDATE_ENV) == "1":
        mismatches = de.update_page(page, mismatches)
    assert not mismatches, (
        "\n\n".join(m.report(_name(page)) for m in mismatches)
        + f"\n\n{len(mismatches)} example(s) differ; `{de.RERUN}` rewrites the shown output"
    )


# ------------------------------------------------------------- the harness


def test_a_transcript_is_split_into_commands_and_their_output() -> None:
    text = "\n".join(
        [
            "<!-- docs-test: setup shipped-checkout -->",
            "",
            "```text",
            "$ matrixgen stats      # excerpt",
            "a",
            "",
            "$ while read -r x; do",
            "    matrixgen list \\",
            "      --scope mr",
            "  done < f",
            "b",
            "...",
            "$ matrixgen x; echo $?",
            "```",
            "<!-- docs-test: skip needs a Megatron-LM checkout -->",
            "```console",
            "$ matrixgen coverage --root ../megatron",
            "```",
            "```console",
            "$ git diff --stat",
            "```",
        ]
    )
    first, second, third = de.parse_page(text)
    assert first.before == [("setup", "shipped-checkout")] and first.skip is None
    stats, loop, echo = first.commands
    assert (stats.text, stats.excerpt, stats.expected, stats.line) == (
        "matrixgen stats",
        True,
        ["a"],
        4,
    )
    assert loop.text == "while read -r x; do\n    matrixgen list \\\n      --scope mr\n  done < f"
    assert (loop.excerpt, loop.expected) == (False, ["b", "..."])
    assert echo.text == "matrixgen x; echo $?" and echo.expected == []
    assert second.skip == "needs a Megatron-LM checkout" and second.is_example
    assert not third.is_example  # no matrixgen command: not an example


@pytest.mark.parametrize(
    ("expected", "excerpt", "actual", "ok"),
    [
        (["a", "b"], False, ["a", "b"], True),
        (["a", "b"], False, ["a", "b", "c"], False),
        (["a", "...", "d"], False, ["a", "b", "c", "d"], True),
        (["a", "...", "d"], False, ["a", "d"], True),
        (["a", "...", "d"], False, ["a", "b", "c"], False),
        (["x ... z"], False, ["x yyy z"], True),
        (["x ... z"], False, ["x yyy"], False),
        (["b", "d"], True, ["a", "b", "c", "d", "e"], True),
        (["d", "b"], True, ["a", "b", "c", "d", "e"], False),
        (["805 job(s)"], True, ["806 job(s)"], False),
        (["a"], False, ["a   "], True),
    ],
)
def test_shown_output_matches_as_whole_excerpt_or_with_gaps(
    expected: list[str], excerpt: bool, actual: list[str], ok: bool
) -> None:
    assert de.matches(expected, excerpt, actual) is ok


def test_update_mode_keeps_gaps_and_replaces_what_changed() -> None:
    actual = ["head", "x", "y", "total: 7 jobs", "tail"]
    assert de.repaired(["head", "...", "total: 6 jobs"], True, actual) == [
        "head",
        "...",
        "total: 7 jobs",
    ]
    assert de.repaired(["old"], False, ["new", "lines"]) == ["new", "lines"]
    # a line printed before the first one shown, in a whole (not excerpt) output
    assert de.repaired(["b", "..."], False, ["note", "b", "c"]) == ["note", "b", "..."]


def test_a_here_document_is_one_command_and_a_forced_block_is_an_example() -> None:
    text = "\n".join(
        [
            "<!-- docs-test: example -->",
            "```console",
            "$ cat > ~/check.py <<'EOF'",
            "$ echo 'a line of the document, not a command'",
            "EOF",
            "$ python3 ~/check.py",
            "```",
            "```console",
            "$ git diff --stat",
            "```",
        ]
    )
    forced, plain = de.parse_page(text)
    write, run = forced.commands
    assert write.text == (
        "cat > ~/check.py <<'EOF'\n$ echo 'a line of the document, not a command'\nEOF"
    )
    assert (write.expected, run.text, run.expected) == ([], "python3 ~/check.py", [])
    assert forced.is_example and not plain.is_example
