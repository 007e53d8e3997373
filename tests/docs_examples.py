"""The docs' command examples, run and compared with what each page shows.

A page (README.md, docs/*.md) shows a command as a transcript in a fenced block:
a line `$ COMMAND` (continued on the next lines while bash reads it as
unfinished: a trailing backslash, an open `while ... done`), then the output it
prints, stdout and stderr as a terminal shows them, up to the next `$ ` line.
Every transcript with a `matrixgen` command is an example: the docs tests run
its commands in the page's sandbox and compare what they print with the page.

- A line `...` stands for any number of lines (none included); `...` inside a
  line for any text within that line.
- A command with a trailing comment (`$ matrixgen stats      # excerpt`) shows
  an excerpt: the shown lines must appear in that order, others may come between.
- Otherwise the output is the whole output (trailing blanks of a line ignored).

Each page runs in one sandbox, its blocks in order; what a block needs (a
checkout, a results store, an edit) is declared in the page itself by an HTML
comment, which a reader of the rendered page does not see but a reader of its
source does:

- `<!-- docs-test: setup shipped-checkout -->`: a fresh sandbox, a git checkout
  holding a copy of the shipped tree (`recipes/`), its reference files
  (`tests/functional_tests/`) and the evidence fixture project
  (`tests/evidence_project/`), committed on `main`;
- `<!-- docs-test: setup megatron-checkout -->`: a fresh sandbox laid out as a
  Megatron-LM checkout: its CI files, parser and generator (from
  `$MATRIXGEN_MEGATRON_CI`) and its recipe tree at `tests/test_utils/recipes`
  (from `$MATRIXGEN_MEGATRON_RECIPES`), committed on `main`; the page's test
  skips when they are absent (fails under `MATRIXGEN_REQUIRE_MEGATRON=1`);
- `<!-- docs-test: setup megatron-goldens -->`: the same checkout, with a copy
  of Megatron-LM's golden-values changes (`$MATRIXGEN_MEGATRON_GOLDENS`) beside
  it as `../megatron-goldens`; skipped (or failed) the same way without them;
- `<!-- docs-test: example -->`: the next block runs even without a `matrixgen`
  command (an edit a later example depends on);
- `<!-- docs-test: run` + shell lines + `-->`: those lines run in the sandbox
  (bash, stopping at the first failure) before the next block;
- `<!-- docs-test: skip REASON -->`: the next example is not run, for REASON.

Every command runs under bash with `MATRIXGEN_TODAY` fixed (`TODAY`), the test
environment's `matrixgen` and `python` first on PATH, no `MATRIXGEN_*`, CI or
token variable of the caller, and fixed git identities and dates.

Update mode (`MATRIXGEN_UPDATE_DOCS=1`): a block whose shown output no longer
matches is rewritten from the real run, keeping its `...` lines and excerpt
form where they still fit (a shown line is replaced by the closest line of the
real output); what cannot be repaired that way stays a failure.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests import tiers

REPO = Path(__file__).resolve().parent.parent
TODAY = "2026-12-01"
UPDATE_ENV = "MATRIXGEN_UPDATE_DOCS"
RERUN = "MATRIXGEN_UPDATE_DOCS=1 python -m pytest -m docs tests/test_docs_examples.py"
GAP = "..."
DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*(setup|run|skip|example)\b(.*?)-->", re.S)
# A matrixgen command: at the start of a line of the command, after variable
# assignments, or after a shell separator.
MATRIXGEN = re.compile(r"(?:^|[;&|(]|\bdo\b|\bthen\b)\s*(?:\w+=\S*\s+)*matrixgen\b", re.M)
COMMENT = re.compile(r"\s{2,}#\s*(.+)$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")


@dataclass
class Command:
    text: str  # as bash runs it
    line: int  # 1-based line of its `$ ` in the page
    expected: list[str]
    excerpt: bool
    first: int  # 0-based index in the page of the first line of `expected`


@dataclass
class Block:
    line: int  # 1-based line of the opening fence
    commands: list[Command]
    skip: str | None = None
    before: list[tuple[str, str]] = field(default_factory=list)  # (kind, argument)
    forced: bool = False  # `docs-test: example`: run without a matrixgen command

    @property
    def is_example(self) -> bool:
        return self.forced or any(MATRIXGEN.search(c.text) for c in self.commands)


def _incomplete(script: str) -> bool:
    if script.endswith("\\"):
        return True
    done = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
    # An open here-document is only a warning to bash -n.
    return "unexpected end of file" in done.stderr or "delimited by end-of-file" in done.stderr


def parse_transcript(lines: list[str], start: int) -> list[Command]:
    """The commands of one block's lines; `start`: index in the page of lines[0]."""
    commands: list[Command] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        line_no = start + i + 1
        script = lines[i][2:]
        i += 1
        while i < len(lines) and _incomplete(script):
            script += "\n" + lines[i]
            i += 1
        excerpt = False
        last = script.rsplit("\n", 1)[-1]
        comment = COMMENT.search(last)
        if comment and "'" not in comment.group(0) and '"' not in comment.group(0):
            excerpt = True
            script = script[: len(script) - len(last)] + last[: comment.start()]
        first = i
        while i < len(lines) and not lines[i].startswith("$ "):
            i += 1
        expected = lines[first:i]
        while expected and not expected[-1].strip():
            expected.pop()
        commands.append(Command(script, line_no, expected, excerpt, start + first))
    return commands


def parse_page(text: str) -> list[Block]:
    """Every fenced block holding a `$ ` line, with the directives before it."""
    lines = text.split("\n")
    blocks: list[Block] = []
    pending: list[tuple[str, str]] = []
    skip: str | None = None
    forced = False
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if lines[i].lstrip().startswith("<!--"):
            j = i
            while "-->" not in lines[j]:
                j += 1
            for kind, arg in DIRECTIVE.findall("\n".join(lines[i : j + 1])):
                if kind == "skip":
                    skip = arg.strip() or "no reason given"
                elif kind == "example":
                    forced = True
                else:
                    pending.append((kind, arg.strip()))
            i = j + 1
            continue
        if fence:
            mark = fence.group(2)
            j = i + 1
            close = re.compile(r" {0,3}" + re.escape(mark[0]) + f"{{{len(mark)},}}\\s*")
            while j < len(lines) and not close.fullmatch(lines[j]):
                j += 1
            body = lines[i + 1 : j]
            if any(line.startswith("$ ") for line in body):
                block = Block(i + 1, parse_transcript(body, i + 1), skip, pending, forced)
                blocks.append(block)
                pending, skip, forced = [], None, False
            i = j + 1
            continue
        i += 1
    if pending:
        blocks.append(Block(len(lines), [], None, pending))
    return blocks


# ------------------------------------------------------------------ matching


def _pattern(expected: list[str], excerpt: bool) -> list[re.Pattern[str] | None]:
    """None for a gap; a line's `...` matches any text."""
    items: list[re.Pattern[str] | None] = [None] if excerpt else []
    for line in expected:
        line = line.rstrip()
        if line.strip() == GAP:
            items.append(None)
            continue
        parts = [re.escape(p) for p in line.split(GAP)]
        items.append(re.compile(".*".join(parts)))
        if excerpt:
            items.append(None)
    return items


def matches(expected: list[str], excerpt: bool, actual: list[str]) -> bool:
    return first_unmatched(expected, excerpt, actual) is None


def first_unmatched(expected: list[str], excerpt: bool, actual: list[str]) -> str | None:
    """None when the shown output matches; else the first shown line no match reaches."""
    items = _pattern(expected, excerpt)
    shown = [None if line.strip() == GAP else line for line in expected]
    if excerpt:  # the pattern interleaves a gap after each shown line
        shown = [s for line in shown for s in ((line, None) if line is not None else (None,))]
        shown = [None, *shown]
    reached = [0]
    actual = [line.rstrip() for line in actual]
    memo: dict[tuple[int, int], bool] = {}

    def go(p: int, a: int) -> bool:
        key = (p, a)
        if key in memo:
            return memo[key]
        reached[0] = max(reached[0], p)
        if p == len(items):
            result = a == len(actual)
        elif items[p] is None:
            result = go(p + 1, a) or (a < len(actual) and go(p, a + 1))
        else:
            pat = items[p]
            result = a < len(actual) and bool(pat.fullmatch(actual[a])) and go(p + 1, a + 1)
        memo[key] = result
        return result

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20 * (len(items) + len(actual)) + 1000))
    if go(0, 0):
        return None
    if reached[0] >= len(items):
        return "(the end: the run prints more lines than the page shows)"
    line = next((s for s in shown[reached[0] :] if s is not None), None)
    return line if line is not None else "(the end: the run prints more lines than the page shows)"


def repaired(expected: list[str], excerpt: bool, actual: list[str]) -> list[str]:
    """The shown output rewritten from the real one (update mode)."""
    actual = [line.rstrip() for line in actual]
    wild = excerpt or any(GAP in line for line in expected)
    if not wild:
        return actual
    out: list[str] = []
    at = 0
    gap = excerpt
    for line in expected:
        if line.strip() == GAP:
            out.append(line)
            gap = True
            continue
        pat = _pattern([line], False)[0]
        assert pat is not None
        hit = next((k for k in range(at, len(actual)) if pat.fullmatch(actual[k])), None)
        if hit is None:
            close = difflib.get_close_matches(line, actual[at:], n=1, cutoff=0.5)
            if not close:
                out.append(line)
                continue
            hit = actual.index(close[0], at)
            line = close[0]
        if not gap:  # lines the page skipped without saying so
            out.extend(actual[at:hit])
        out.append(line)
        at = hit + 1
        gap = excerpt
    if not gap:
        out.extend(actual[at:])
    return out


# ------------------------------------------------------------------- running


def environment(sandbox: Path) -> dict[str, str]:
    dropped = ("MATRIXGEN_", "GITHUB_", "GITLAB_", "CI_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped) and k != "CI"}
    bin_dir = str(Path(sys.executable).parent)
    env.update(
        {
            "PATH": bin_dir + os.pathsep + env.get("PATH", ""),
            "MATRIXGEN_TODAY": TODAY,
            "PYTHONUNBUFFERED": "1",
            "HOME": str(sandbox.parent / "home"),
            "GIT_AUTHOR_NAME": "ci",
            "GIT_AUTHOR_EMAIL": "ci@example.com",
            "GIT_COMMITTER_NAME": "ci",
            "GIT_COMMITTER_EMAIL": "ci@example.com",
            "GIT_AUTHOR_DATE": f"{TODAY}T00:00:00Z",
            "GIT_COMMITTER_DATE": f"{TODAY}T00:00:00Z",
            "GIT_CONFIG_NOSYSTEM": "1",
            "LC_ALL": "C.UTF-8",
        }
    )
    return env


def setup_shipped_checkout(sandbox: Path) -> None:
    if sandbox.exists():
        shutil.rmtree(sandbox)
    (sandbox / "tests").mkdir(parents=True)
    (sandbox.parent / "home").mkdir(exist_ok=True)
    shutil.copytree(REPO / "recipes", sandbox / "recipes")
    for name in ("functional_tests", "evidence_project"):
        shutil.copytree(
            REPO / "tests" / name,
            sandbox / "tests" / name,
            ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"),
        )
    (sandbox / ".gitignore").write_text("/out/\n.matrixgen/\n__pycache__/\n")
    run_shell(sandbox, "git init -q -b main && git add -A && git commit -q -m 'the shipped tree'")


def setup_megatron_checkout(sandbox: Path) -> None:
    """A Megatron-LM checkout from the reference copies (never kept in the project)."""
    from tests.conftest import require_megatron
    from tests.megatron_ci import require_megatron_ci

    ci, recipes = require_megatron_ci(), require_megatron()
    if sandbox.exists():
        shutil.rmtree(sandbox)
    (sandbox.parent / "home").mkdir(exist_ok=True)
    shutil.copytree(ci, sandbox)
    shutil.copytree(recipes, sandbox / "tests" / "test_utils" / "recipes")
    for path in [sandbox, *sandbox.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    run_shell(sandbox, "git init -q -b main && git add -A && git commit -q -m 'Megatron-LM'")


def setup_megatron_goldens(sandbox: Path) -> None:
    """A Megatron-LM checkout, and beside it (`../megatron-goldens`) a copy of
    the golden-values files of real refresh commits ($MATRIXGEN_MEGATRON_GOLDENS)."""
    from tests.conftest import require_megatron_goldens

    goldens = require_megatron_goldens()
    setup_megatron_checkout(sandbox)
    beside = sandbox.parent / "megatron-goldens"
    if beside.exists():
        shutil.rmtree(beside)
    shutil.copytree(goldens, beside, copy_function=shutil.copy)
    for path in [beside, *beside.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)


SETUPS = {
    "shipped-checkout": setup_shipped_checkout,
    "megatron-checkout": setup_megatron_checkout,
    "megatron-goldens": setup_megatron_goldens,
}


def run_shell(sandbox: Path, script: str, last: int = 0) -> tuple[int, list[str]]:
    prefix = f"(exit {last}); " if "$?" in script else ""
    done = subprocess.run(
        ["bash", "-c", prefix + script],
        cwd=sandbox,
        env=environment(sandbox),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    return done.returncode, done.stdout.splitlines()


@dataclass
class Mismatch:
    command: Command
    actual: list[str]

    def report(self, page: str) -> str:
        shown = "\n".join(self.command.expected)
        diff = "\n".join(
            difflib.unified_diff(
                self.command.expected, self.actual, "shown", "printed", n=2, lineterm=""
            )
        )
        kind = "an excerpt of" if self.command.excerpt else "the output of"
        c = self.command
        line = first_unmatched(c.expected, c.excerpt, self.actual)
        return (
            f"{page}:{c.line}: $ {c.text}\n"
            f"the page shows {kind} this command that the run does not print;\n"
            f"first shown line not matched: {line}\n"
            f"{diff or shown}"
        )


def run_page(path: Path, sandbox: Path) -> tuple[list[Mismatch], list[str]]:
    """Run every example of a page; the mismatches, and the examples skipped."""
    tiers.uses("docs")
    text = path.read_text(encoding="utf-8")
    mismatches: list[Mismatch] = []
    skipped: list[str] = []
    ready = False
    for block in parse_page(text):
        for kind, arg in block.before:
            if kind == "setup":
                SETUPS[arg](sandbox)
                ready = True
            else:
                code, out = run_shell(sandbox, "set -e\n" + arg)
                if code:
                    raise AssertionError(
                        f"{path.name}: the docs-test run before line {block.line} failed "
                        f"(exit {code}):\n" + "\n".join(out)
                    )
        if not block.commands or not block.is_example:
            continue
        if block.skip:
            skipped.append(f"{path.name}:{block.line}: {block.skip}")
            continue
        if not ready:
            raise AssertionError(
                f"{path.name}:{block.line}: an example with no setup before it: declare one "
                "(<!-- docs-test: setup shipped-checkout -->) or skip it with a reason"
            )
        last = 0
        for command in block.commands:
            last, actual = run_shell(sandbox, command.text, last)
            if not matches(command.expected, command.excerpt, actual):
                mismatches.append(Mismatch(command, actual))
    return mismatches, skipped


def update_page(path: Path, mismatches: list[Mismatch]) -> list[Mismatch]:
    """Rewrite the shown output of each mismatch; those that still do not match."""
    lines = path.read_text(encoding="utf-8").split("\n")
    left = []
    for m in sorted(mismatches, key=lambda m: m.command.first, reverse=True):
        c = m.command
        new = repaired(c.expected, c.excerpt, m.actual)
        lines[c.first : c.first + len(c.expected)] = new
        if not matches(new, c.excerpt, m.actual):
            left.append(m)
    path.write_text("\n".join(lines), encoding="utf-8")
    return left
