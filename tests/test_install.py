"""What installs this project: the distribution's name, every install line the
docs and CI files show, and the base install without the PostgreSQL driver.

"matrixgen" on PyPI is an unrelated project with its own `matrixgen` command:
a line that installs that name runs someone else's code. Every line must
install this project unambiguously: a path (this checkout, a wheel built from
it), `matrixgen-ci @ git+URL@COMMIT`, or `matrixgen-ci==VERSION`.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import matrixgen
from matrixgen.results.store import POSTGRES_EXTRA

REPO = Path(__file__).resolve().parent.parent
DISTRIBUTION = "matrixgen-ci"

# A pip (or pipx) install command, up to the end of its shell command or of its
# Markdown code span.
_INSTALL = re.compile(r"\b(?:pip3?|pipx)\s+install\b([^\n`;|&)]*)")
# Options whose value is not a requirement (-e's value is one: it is checked).
_VALUED = frozenset(
    {"-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f", "--find-links"}
    | {"-t", "--target", "--prefix", "--root", "--python-version", "--platform"}
)
_NAME = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(\[[^\]]*\])?\s*(.*)", re.S)
_PINNED_URL = re.compile(r"^git\+https://[^\s@]+@(?:[0-9a-f]{40}|COMMIT)$")


def canonical(name: str) -> str:
    """A distribution name as PyPI compares names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_problem(token: str) -> str | None:
    """Why one argument of `pip install` may install something else than this
    project (None: it is fine). Arguments that name other projects are fine."""
    if token.startswith((".", "/", "$", "~")) or (
        "/" in token and "://" not in token and "@" not in token
    ):
        wheel = token.rsplit("/", 1)[-1]
        ours = wheel.startswith("matrixgen_ci-")
        if wheel.endswith(".whl") and "matrixgen" in wheel and not ours:
            return f"{token}: a wheel of another distribution than {DISTRIBUTION}"
        return None  # a path: this checkout, or a wheel built from it
    name, sep, url = token.partition("@")
    if "://" in name or (not sep and "://" in token):
        return f"{token}: a bare URL (write `{DISTRIBUTION} @ URL`: pip then checks the name)"
    found = _NAME.fullmatch(name.strip())
    if found is None:
        return f"{token}: not a requirement"
    project, _extras, spec = found.groups()
    if canonical(project) == "matrixgen":
        return f"{token}: installs PyPI's unrelated `matrixgen`; this project is {DISTRIBUTION}"
    if canonical(project) != DISTRIBUTION:
        return None
    if sep:
        if not _PINNED_URL.match(url.strip()):
            return f"{token}: the URL must be git+https://...@COMMIT (a full commit id)"
        return None
    if spec.strip() != f"=={matrixgen.__version__}":
        return f"{token}: pin the version (=={matrixgen.__version__})"
    return None


def line_problems(command: str) -> list[str]:
    """Every problem of one install command's arguments."""
    try:
        words = shlex.split(command)
    except ValueError:
        return [f"{command}: cannot be split into words"]
    problems = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word in ("-r", "--requirement"):
            problems.append(f"{command}: a requirements file is not checked here")
            continue
        if word in _VALUED:
            skip = True
            continue
        if word.startswith("-"):
            continue
        if (problem := requirement_problem(word)) is not None:
            problems.append(problem)
    return problems


def install_commands(text: str) -> list[str]:
    return [m.group(0) for m in _INSTALL.finditer(text)]


def _documents() -> list[Path]:
    paths = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    paths += [REPO / "action.yml", REPO / ".pre-commit-hooks.yaml", REPO / ".gitlab-ci.yml"]
    paths += sorted((REPO / ".github" / "workflows").glob("*.yml"))
    paths += [REPO / ".ci" / "run"]
    return [p for p in paths if p.is_file()]


@pytest.mark.parametrize(
    ("command", "wrong"),
    [
        ("pip install matrixgen", True),
        ("pip install -q matrixgen==0.1.0", True),
        ("pip install 'MatrixGen>=0.1'", True),
        ("pip install matrixgen-ci", True),
        ("pip install matrixgen_ci>=0.1", True),
        ("pip install git+https://github.com/OWNER/matrixgen@COMMIT", True),
        ('pip install "matrixgen-ci @ git+https://github.com/OWNER/matrixgen@main"', True),
        ("pip install dist/matrixgen-0.1.0-py3-none-any.whl", True),
        ("pip install -r requirements.txt", True),
        ('pip install "matrixgen-ci @ git+https://github.com/OWNER/matrixgen@COMMIT"', False),
        (f'pip install "matrixgen-ci[postgres] @ git+https://h.example/o/m@{"a" * 40}"', False),
        (f'pip install "matrixgen-ci=={matrixgen.__version__}"', False),
        ("pip install dist/matrixgen_ci-0.1.0-py3-none-any.whl", False),
        ("pip install -q -e '.[test]'", False),
        ('python3 -m pip install --quiet "$GITHUB_ACTION_PATH"', False),
        ("pip install . click", False),
        ("pip install -e '.[mutation]'", False),
    ],
)
def test_the_check_tells_an_unambiguous_install_from_one_that_is_not(
    command: str, wrong: bool
) -> None:
    assert bool(line_problems(install_commands(command)[0])) is wrong, command


def test_every_install_line_of_the_docs_and_ci_files_installs_this_project() -> None:
    seen: dict[str, int] = {}
    problems = []
    for path in _documents():
        rel = path.relative_to(REPO).as_posix()
        for command in install_commands(path.read_text(encoding="utf-8")):
            seen[rel] = seen.get(rel, 0) + 1
            problems += [f"{rel}: {p}" for p in line_problems(command)]
    assert problems == []
    # The scan sees the lines: the README's set-up commands, the pages that
    # tell another project how to install it.
    for rel in ("README.md", "docs/setup.md", "docs/megatron.md", "docs/pytest-plugin.md"):
        assert seen.get(rel, 0) >= 1, rel


def test_the_install_guide_shows_each_unambiguous_form() -> None:
    commands = install_commands((REPO / "docs" / "setup.md").read_text(encoding="utf-8"))
    shown = " ".join(commands)
    assert f"{DISTRIBUTION} @ git+https://" in shown
    assert re.search(r"dist/matrixgen_ci-[^ ]+\.whl", shown)
    assert f"{DISTRIBUTION}=={matrixgen.__version__}" in shown


def test_the_distribution_name_and_its_postgres_extra_are_what_pyproject_declares() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION
    assert f"{DISTRIBUTION}[postgres]" == POSTGRES_EXTRA
    extras = project["optional-dependencies"]
    assert [r for r in extras["postgres"] if r.startswith("psycopg")]
    # The base install has no PostgreSQL driver; the test install has it.
    assert not [r for r in project["dependencies"] if r.startswith("psycopg")]
    assert POSTGRES_EXTRA in extras["test"]


# Runs the CLI with every psycopg module unimportable, as in the base install.
_WITHOUT_DRIVER = r"""
import sys

class _NoDriver:
    def find_spec(self, name, path=None, target=None):
        if name == "psycopg" or name.startswith(("psycopg.", "psycopg_")):
            raise ImportError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoDriver())
from matrixgen.cli.main import main
code = main(sys.argv[1:])
assert not [m for m in sys.modules if m.startswith("psycopg")]
sys.exit(code)
"""


def _without_driver(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_DRIVER, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_base_install_keeps_sqlite_and_refuses_postgresql_with_what_to_install(
    tmp_path: Path,
) -> None:
    db = tmp_path / "results.db"
    ingest = _without_driver(
        "results", "ingest", str(REPO / "tests" / "junit" / "gitlab.xml"), "--run-id", "1",
        "--target", "gitlab-mr-h100-dev", "--tag", "latest", "--recipes",
        str(REPO / "recipes"), "--db", str(db),
        cwd=tmp_path,
    )  # fmt: skip
    assert ingest.returncode == 0, ingest.stderr
    assert "stored 6 result(s)" in ingest.stderr
    recipes = str(REPO / "recipes")
    read = _without_driver("flaky", "--db", str(db), "--recipes", recipes, cwd=tmp_path)
    assert read.returncode == 0, read.stderr
    refused = _without_driver("flaky", "--db", "postgresql://ci@db.invalid/results", cwd=tmp_path)
    assert refused.returncode == 11, refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "the PostgreSQL driver (psycopg) is not installed" in refused.stderr
    assert POSTGRES_EXTRA in refused.stderr
